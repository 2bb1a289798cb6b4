//! The sticky task assignor of streams groups (Kafka's StickyTaskAssignor,
//! `streams.assignor.name=sticky`): active tasks go back to their previous
//! member while it has room, the rest to the least-loaded process and its
//! least-loaded member; standby tasks of stateful subtopologies go to other
//! processes than the task's active one, previous holders first. It makes
//! no warm-up tasks, as Kafka's.

use std::collections::{BTreeMap, BTreeSet};

use tracing::warn;

use super::streams_member::{contains, TaskRoles, Tasks};

/// A member as the assignor sees it.
pub struct AssignorMember<'a> {
    pub process_id: &'a str,
    /// Its current target.
    pub previous: TaskRoles,
}

type Task = (String, i32);

struct Loads<'m> {
    members: &'m BTreeMap<String, AssignorMember<'m>>,
    /// Member → tasks given (active and standby count alike).
    load: BTreeMap<&'m str, usize>,
}

impl<'m> Loads<'m> {
    fn process_load(&self, process: &str) -> f64 {
        let members: Vec<&str> = self
            .members
            .iter()
            .filter(|(_, m)| m.process_id == process)
            .map(|(id, _)| id.as_str())
            .collect();
        let tasks: usize = members.iter().map(|m| self.load[m]).sum();
        tasks as f64 / members.len().max(1) as f64
    }

    /// The least-loaded member of the least-loaded process among those
    /// `allowed` admits (ties: process id, then member id).
    fn least_loaded(&self, allowed: impl Fn(&str, &AssignorMember) -> bool) -> Option<&'m str> {
        let mut processes: Vec<&str> = self
            .members
            .iter()
            .filter(|(id, m)| allowed(id, m))
            .map(|(_, m)| m.process_id)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        processes.sort_by(|a, b| self.process_load(a).total_cmp(&self.process_load(b)));
        let process = *processes.first()?;
        self.members
            .iter()
            .filter(|(id, m)| m.process_id == process && allowed(id, m))
            .min_by_key(|(id, _)| self.load[id.as_str()])
            .map(|(id, _)| id.as_str())
    }
}

/// Targets for `members` over the tasks of `subtopologies` (id → task
/// count), with `standbys` standby replicas of each `stateful` task.
pub fn assign(
    members: &BTreeMap<String, AssignorMember<'_>>,
    subtopologies: &BTreeMap<String, i32>,
    stateful: &BTreeSet<String>,
    standbys: usize,
) -> BTreeMap<String, TaskRoles> {
    let mut targets: BTreeMap<String, TaskRoles> = members
        .keys()
        .map(|id| (id.clone(), TaskRoles::default()))
        .collect();
    if members.is_empty() {
        return targets;
    }
    let tasks: Vec<Task> = subtopologies
        .iter()
        .flat_map(|(id, &n)| (0..n).map(move |p| (id.clone(), p)))
        .collect();
    let mut loads = Loads {
        members,
        load: members.keys().map(|id| (id.as_str(), 0)).collect(),
    };
    let quota = tasks.len().div_ceil(members.len());
    let give = |targets: &mut BTreeMap<String, TaskRoles>,
                loads: &mut Loads,
                member: &str,
                task: &Task,
                standby: bool| {
        let roles = targets.get_mut(member).expect("a member");
        let tasks: &mut Tasks = if standby {
            &mut roles.standby
        } else {
            &mut roles.active
        };
        tasks.entry(task.0.clone()).or_default().insert(task.1);
        *loads.load.get_mut(member).expect("a member") += 1;
    };
    // Active tasks: stickiness first, then balance.
    let mut unassigned = Vec::new();
    for task in &tasks {
        let previous = members
            .iter()
            .find(|(_, m)| contains(&m.previous.active, &task.0, task.1));
        match previous {
            Some((id, _)) if loads.load[id.as_str()] < quota => {
                give(&mut targets, &mut loads, id, task, false)
            }
            _ => unassigned.push(task),
        }
    }
    for task in unassigned {
        let member = loads.least_loaded(|_, _| true).expect("members exist");
        give(&mut targets, &mut loads, member, task, false);
    }
    if standbys == 0 {
        return targets;
    }
    // Standby tasks: never on a process already holding the task.
    let mut short = 0;
    for task in tasks.iter().filter(|t| stateful.contains(&t.0)) {
        for _ in 0..standbys {
            let holders: BTreeSet<&str> = members
                .iter()
                .filter(|(id, _)| {
                    let roles = &targets[id.as_str()];
                    contains(&roles.active, &task.0, task.1)
                        || contains(&roles.standby, &task.0, task.1)
                })
                .map(|(_, m)| m.process_id)
                .collect();
            let free = |_: &str, m: &AssignorMember| !holders.contains(m.process_id);
            let previous = members
                .iter()
                .filter(|(id, m)| free(id, m) && contains(&m.previous.standby, &task.0, task.1))
                .min_by_key(|(id, _)| loads.load[id.as_str()])
                .map(|(id, _)| id.as_str());
            match previous.or_else(|| loads.least_loaded(free)) {
                Some(member) => give(&mut targets, &mut loads, member, task, true),
                None => short += 1,
            }
        }
    }
    if short > 0 {
        warn!(
            missing = short,
            "not enough streams processes for every standby task; fewer were assigned"
        );
    }
    targets
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(process: &str, previous: TaskRoles) -> AssignorMember<'_> {
        AssignorMember {
            process_id: process,
            previous,
        }
    }

    fn count(roles: &TaskRoles, standby: bool) -> usize {
        let tasks = if standby {
            &roles.standby
        } else {
            &roles.active
        };
        tasks.values().map(|p| p.len()).sum()
    }

    #[test]
    fn active_tasks_are_balanced_and_each_given_once() {
        let members: BTreeMap<String, AssignorMember> = [
            ("a".to_string(), member("p1", TaskRoles::default())),
            ("b".to_string(), member("p2", TaskRoles::default())),
            ("c".to_string(), member("p2", TaskRoles::default())),
        ]
        .into();
        let subs = BTreeMap::from([("0".to_string(), 4), ("1".to_string(), 5)]);
        let targets = assign(&members, &subs, &BTreeSet::new(), 0);
        let counts: Vec<usize> = targets.values().map(|t| count(t, false)).collect();
        assert_eq!(counts.iter().sum::<usize>(), 9);
        assert!(counts.iter().all(|&c| c == 3), "{counts:?}");
        for (s, n) in &subs {
            for p in 0..*n {
                let owners = targets
                    .values()
                    .filter(|t| contains(&t.active, s, p))
                    .count();
                assert_eq!(owners, 1, "task {s}_{p}");
            }
        }
    }

    #[test]
    fn previous_owners_keep_their_tasks() {
        let mut previous = TaskRoles::default();
        previous.active.insert("0".into(), BTreeSet::from([1, 3]));
        let members: BTreeMap<String, AssignorMember> = [
            ("a".to_string(), member("p1", TaskRoles::default())),
            ("b".to_string(), member("p2", previous)),
        ]
        .into();
        let subs = BTreeMap::from([("0".to_string(), 4)]);
        let targets = assign(&members, &subs, &BTreeSet::new(), 0);
        assert_eq!(targets["b"].active["0"], BTreeSet::from([1, 3]));
        assert_eq!(targets["a"].active["0"], BTreeSet::from([0, 2]));
    }

    #[test]
    fn standbys_go_to_other_processes_and_only_for_stateful_tasks() {
        let members: BTreeMap<String, AssignorMember> = [
            ("a".to_string(), member("p1", TaskRoles::default())),
            ("b".to_string(), member("p1", TaskRoles::default())),
            ("c".to_string(), member("p2", TaskRoles::default())),
        ]
        .into();
        let subs = BTreeMap::from([("0".to_string(), 3), ("1".to_string(), 2)]);
        let stateful = BTreeSet::from(["0".to_string()]);
        let targets = assign(&members, &subs, &stateful, 1);
        let process = |id: &str| members[id].process_id;
        for p in 0..3 {
            let active = targets
                .iter()
                .find(|(_, t)| contains(&t.active, "0", p))
                .unwrap()
                .0;
            let standby: Vec<&String> = targets
                .iter()
                .filter(|(_, t)| contains(&t.standby, "0", p))
                .map(|(id, _)| id)
                .collect();
            assert_eq!(standby.len(), 1, "task 0_{p}");
            assert_ne!(process(active), process(standby[0]));
        }
        assert!(targets.values().all(|t| !t.standby.contains_key("1")));
        // With one process there is nowhere to put a standby.
        let lone: BTreeMap<String, AssignorMember> =
            [("a".to_string(), member("p1", TaskRoles::default()))].into();
        let targets = assign(&lone, &subs, &stateful, 1);
        assert_eq!(count(&targets["a"], true), 0);
        assert_eq!(count(&targets["a"], false), 5);
    }
}
