//! The sticky task assignor of streams groups (Kafka's StickyTaskAssignor,
//! `streams.assignor.name=sticky`): active tasks go back to their previous
//! member while it has room, the rest to the least-loaded process and its
//! least-loaded member; standby tasks of stateful subtopologies go to other
//! processes than the task's active one, previous holders first. A task
//! that has to move goes to a member with its state: a previous standby,
//! else the member that reported the most of it (a restarted instance
//! under a new member id). It makes no warm-up tasks, as Kafka's.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use tracing::warn;

use super::streams_member::{TaskOffsetSums, TaskRoles, Tasks};

/// A member as the assignor sees it.
pub struct AssignorMember<'a> {
    pub process_id: &'a str,
    /// Its current target.
    pub previous: TaskRoles,
    /// The changelog offsets of the task state it reported having.
    pub state: &'a TaskOffsetSums,
}

type Task = (String, i32);

/// Members and processes by index, with the tasks given so far, so that
/// picking the least-loaded process and member costs O(processes + its
/// members) integer comparisons.
struct Loads<'m> {
    ids: Vec<&'m str>,
    index: HashMap<&'m str, usize>,
    process_of: Vec<usize>,
    /// Process (in id order) → its members (in id order).
    members_of: Vec<Vec<usize>>,
    load: Vec<usize>,
    process_load: Vec<usize>,
}

impl<'m> Loads<'m> {
    fn new(members: &'m BTreeMap<String, AssignorMember<'m>>) -> Self {
        let processes: BTreeSet<&str> = members.values().map(|m| m.process_id).collect();
        let process_index: HashMap<&str, usize> =
            processes.iter().enumerate().map(|(i, p)| (*p, i)).collect();
        let mut loads = Self {
            ids: Vec::with_capacity(members.len()),
            index: HashMap::with_capacity(members.len()),
            process_of: Vec::with_capacity(members.len()),
            members_of: vec![Vec::new(); processes.len()],
            load: vec![0; members.len()],
            process_load: vec![0; processes.len()],
        };
        for (i, (id, m)) in members.iter().enumerate() {
            let process = process_index[m.process_id];
            loads.ids.push(id);
            loads.index.insert(id, i);
            loads.process_of.push(process);
            loads.members_of[process].push(i);
        }
        loads
    }

    fn add(&mut self, member: usize) {
        self.load[member] += 1;
        self.process_load[self.process_of[member]] += 1;
    }

    /// The least-loaded member of the least-loaded process (tasks per
    /// member) among the processes `allowed` admits; ties go to the lower
    /// process id, then member id.
    fn least_loaded(&self, allowed: impl Fn(usize) -> bool) -> Option<usize> {
        let lighter = |a: usize, b: usize| {
            // a's load per member below b's, without division.
            self.process_load[a] * self.members_of[b].len()
                < self.process_load[b] * self.members_of[a].len()
        };
        let mut best: Option<usize> = None;
        for p in (0..self.members_of.len()).filter(|&p| allowed(p)) {
            if best.is_none_or(|b| lighter(p, b)) {
                best = Some(p);
            }
        }
        self.members_of[best?]
            .iter()
            .copied()
            .min_by_key(|&m| self.load[m])
    }

    /// The first of the `ranked` members `allowed`, unless a later one is
    /// less loaded both itself and in its process.
    fn first_ranked(&self, ranked: &[usize], allowed: impl Fn(usize) -> bool) -> Option<usize> {
        let mut best: Option<usize> = None;
        for m in ranked.iter().copied().filter(|&m| allowed(m)) {
            let lighter = |b: usize| {
                self.load[m] < self.load[b]
                    && self.process_load[self.process_of[m]] < self.process_load[self.process_of[b]]
            };
            if best.is_none_or(lighter) {
                best = Some(m);
            }
        }
        best
    }
}

/// For each task, the members that have its state: its previous standbys
/// first, then those that reported it, the most caught-up first.
fn holders_of_state(
    members: &BTreeMap<String, AssignorMember<'_>>,
    loads: &Loads<'_>,
) -> HashMap<Task, Vec<usize>> {
    let mut ranked: HashMap<Task, Vec<(bool, i64, usize)>> = HashMap::new();
    for (id, m) in members {
        let i = loads.index[id.as_str()];
        for (s, ps) in &m.previous.standby {
            for &p in ps {
                let offset = m.state.get(s).and_then(|o| o.get(&p)).copied();
                ranked
                    .entry((s.clone(), p))
                    .or_default()
                    .push((false, -offset.unwrap_or(0), i));
            }
        }
        for (s, offsets) in m.state {
            let standby = m.previous.standby.get(s);
            for (&p, &offset) in offsets {
                if standby.is_none_or(|ps| !ps.contains(&p)) {
                    ranked
                        .entry((s.clone(), p))
                        .or_default()
                        .push((true, -offset, i));
                }
            }
        }
    }
    ranked
        .into_iter()
        .map(|(task, mut c)| {
            c.sort_unstable();
            (task, c.into_iter().map(|(_, _, m)| m).collect())
        })
        .collect()
}

/// Targets for `members` over the tasks of `subtopologies` (id → task
/// count), with `standbys` standby replicas of each `stateful` task.
pub fn assign(
    members: &BTreeMap<String, AssignorMember<'_>>,
    subtopologies: &BTreeMap<String, i32>,
    stateful: &BTreeSet<String>,
    standbys: usize,
) -> BTreeMap<String, TaskRoles> {
    let mut targets: Vec<TaskRoles> = vec![TaskRoles::default(); members.len()];
    if members.is_empty() {
        return BTreeMap::new();
    }
    let mut loads = Loads::new(members);
    let tasks: Vec<Task> = subtopologies
        .iter()
        .flat_map(|(id, &n)| (0..n).map(move |p| (id.clone(), p)))
        .collect();
    // Who had each task before, looked up once rather than per task.
    let mut previous_active: HashMap<Task, usize> = HashMap::new();
    for (id, m) in members {
        let i = loads.index[id.as_str()];
        for (s, ps) in &m.previous.active {
            for &p in ps {
                previous_active.insert((s.clone(), p), i);
            }
        }
    }
    let with_state = holders_of_state(members, &loads);
    let state_of = |task: &Task| with_state.get(task).map_or(&[][..], Vec::as_slice);
    // The processes holding each task, so a standby goes elsewhere.
    let mut held_by: HashMap<&Task, Vec<usize>> = HashMap::new();
    let mut give = |loads: &mut Loads, member: usize, task: &Task, standby: bool| {
        let roles = &mut targets[member];
        let tasks: &mut Tasks = if standby {
            &mut roles.standby
        } else {
            &mut roles.active
        };
        tasks.entry(task.0.clone()).or_default().insert(task.1);
        loads.add(member);
        loads.process_of[member]
    };
    // Active tasks: stickiness first, then balance.
    let quota = tasks.len().div_ceil(members.len());
    let mut unassigned = Vec::new();
    for task in &tasks {
        match previous_active.get(task) {
            Some(&m) if loads.load[m] < quota => {
                let process = give(&mut loads, m, task, false);
                held_by.entry(task).or_default().push(process);
            }
            _ => unassigned.push(task),
        }
    }
    for task in unassigned {
        let member = loads
            .first_ranked(state_of(task), |m| loads.load[m] < quota)
            .or_else(|| loads.least_loaded(|_| true))
            .expect("members exist");
        let process = give(&mut loads, member, task, false);
        held_by.entry(task).or_default().push(process);
    }
    // Standby tasks: never on a process already holding the task.
    let mut short = 0;
    for task in tasks
        .iter()
        .filter(|t| standbys > 0 && stateful.contains(&t.0))
    {
        for _ in 0..standbys {
            let holders = held_by.entry(task).or_default();
            let free = |process: usize| !holders.contains(&process);
            // The member that ran it keeps a copy, else one with state.
            let previous_owner = previous_active
                .get(task)
                .copied()
                .filter(|&m| free(loads.process_of[m]));
            let with_state = || loads.first_ranked(state_of(task), |m| free(loads.process_of[m]));
            match previous_owner
                .or_else(with_state)
                .or_else(|| loads.least_loaded(free))
            {
                Some(member) => {
                    let process = give(&mut loads, member, task, true);
                    holders.push(process);
                }
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
    loads
        .ids
        .iter()
        .map(|id| id.to_string())
        .zip(targets)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::streams_member::contains;

    static NO_STATE: TaskOffsetSums = TaskOffsetSums::new();

    fn member(process: &str, previous: TaskRoles) -> AssignorMember<'_> {
        AssignorMember {
            process_id: process,
            previous,
            state: &NO_STATE,
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

    #[test]
    fn moved_tasks_go_to_members_with_their_state() {
        // b restarted under a new id with the state of tasks 0_2 and 0_3.
        let b_state =
            TaskOffsetSums::from([("0".to_string(), BTreeMap::from([(2, 50), (3, 900)]))]);
        let mut a_previous = TaskRoles::default();
        a_previous
            .active
            .insert("0".into(), BTreeSet::from([0, 1, 2, 3]));
        let members: BTreeMap<String, AssignorMember> = [
            ("a".to_string(), member("p1", a_previous)),
            (
                "b".to_string(),
                AssignorMember {
                    state: &b_state,
                    ..member("p2", TaskRoles::default())
                },
            ),
            ("c".to_string(), member("p3", TaskRoles::default())),
        ]
        .into();
        let subs = BTreeMap::from([("0".to_string(), 6)]);
        let stateful = BTreeSet::from(["0".to_string()]);
        let targets = assign(&members, &subs, &stateful, 1);
        // a keeps two (its quota); 2 and 3 go where their state is.
        assert_eq!(targets["a"].active["0"], BTreeSet::from([0, 1]));
        assert!(contains(&targets["b"].active, "0", 2));
        assert!(contains(&targets["b"].active, "0", 3));
        // a ran 0_3 before: it keeps a standby copy.
        assert!(contains(&targets["a"].standby, "0", 3));
    }
}
