//! Moving a streams member towards its target (Kafka's
//! CurrentAssignmentBuilder for streams groups). A task is never given to a
//! member while another still holds it: the holder first gives it up
//! (UNREVOKED_TASKS, at its old epoch), and the newcomer waits for it
//! (UNRELEASED_TASKS). Within one process, a task moves between roles only
//! once the process no longer holds it in another role.

use std::collections::BTreeMap;

use super::streams_member::{intersect, minus, union, CurrentAssignment, MemberState};
use super::streams_member::{StreamsMember, TaskRoles, Tasks};

/// The tasks the other members of the group hold.
pub struct Holdings {
    /// Active tasks held (assigned or being revoked) by any other member.
    pub active: Tasks,
    /// Any role's tasks held by other members of the same process.
    pub same_process: Tasks,
}

impl Holdings {
    pub fn of(members: &BTreeMap<String, StreamsMember>, member: &str, process: &str) -> Self {
        let mut active = Tasks::new();
        let mut same_process = Tasks::new();
        let add = |into: &mut Tasks, tasks: &Tasks| {
            for (id, partitions) in tasks {
                into.entry(id.clone()).or_default().extend(partitions);
            }
        };
        for (_, m) in members.iter().filter(|(id, _)| id.as_str() != member) {
            let (assigned, revoking) = (&m.current.assigned, &m.current.revoking);
            add(&mut active, &assigned.active);
            add(&mut active, &revoking.active);
            if m.metadata.process_id == process {
                for tasks in [
                    &assigned.active,
                    &revoking.active,
                    &assigned.standby,
                    &revoking.standby,
                    &assigned.warmup,
                    &revoking.warmup,
                ] {
                    add(&mut same_process, tasks);
                }
            }
        }
        Self {
            active,
            same_process,
        }
    }

    /// The tasks of `target` the member cannot take yet.
    fn unreleased(&self, target: &TaskRoles) -> TaskRoles {
        TaskRoles {
            active: intersect(&target.active, &union(&self.active, &self.same_process)),
            standby: intersect(&target.standby, &self.same_process),
            warmup: intersect(&target.warmup, &self.same_process),
        }
    }
}

/// The member's next assignment, given its target at `target_epoch` and
/// the tasks it says it owns (None: unchanged since its last heartbeat).
/// `holdings` (the other members' tasks, a walk of the whole group) is
/// only asked for when the member is not settled at the target.
pub fn reconcile(
    current: &CurrentAssignment,
    target: &TaskRoles,
    target_epoch: i32,
    owned: Option<&TaskRoles>,
    holdings: impl FnOnce() -> Holdings,
) -> CurrentAssignment {
    match current.state {
        MemberState::Stable if current.epoch == target_epoch => current.clone(),
        MemberState::UnrevokedTasks => {
            let still_owned = owned.is_none_or(|o| !o.zip(&current.revoking, intersect).is_empty());
            if still_owned {
                current.clone()
            } else {
                let released = CurrentAssignment {
                    revoking: TaskRoles::default(),
                    ..current.clone()
                };
                next(&released, target, target_epoch, owned, &holdings())
            }
        }
        _ => next(current, target, target_epoch, owned, &holdings()),
    }
}

fn next(
    current: &CurrentAssignment,
    target: &TaskRoles,
    target_epoch: i32,
    owned: Option<&TaskRoles>,
    holdings: &Holdings,
) -> CurrentAssignment {
    let kept = current.assigned.zip(target, intersect);
    let revoke = current.assigned.zip(target, minus);
    let still_owned = owned.is_none_or(|o| !o.zip(&revoke, intersect).is_empty());
    if !revoke.is_empty() && still_owned {
        return CurrentAssignment {
            epoch: current.epoch,
            previous_epoch: current.previous_epoch,
            state: MemberState::UnrevokedTasks,
            assigned: kept,
            revoking: revoke,
        };
    }
    let unreleased = holdings.unreleased(&target.zip(&kept, minus));
    let assigned = target.zip(&unreleased, minus);
    CurrentAssignment {
        epoch: target_epoch,
        previous_epoch: current.epoch,
        state: if unreleased.is_empty() {
            MemberState::Stable
        } else {
            MemberState::UnreleasedTasks
        },
        assigned,
        revoking: TaskRoles::default(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn roles(active: &[i32]) -> TaskRoles {
        TaskRoles {
            active: Tasks::from([("0".to_string(), active.iter().copied().collect())]),
            ..Default::default()
        }
    }

    fn none() -> Holdings {
        Holdings {
            active: Tasks::new(),
            same_process: Tasks::new(),
        }
    }

    #[test]
    fn a_member_gives_up_tasks_before_it_moves_on() {
        let current = CurrentAssignment {
            epoch: 3,
            previous_epoch: 2,
            state: MemberState::Stable,
            assigned: roles(&[0, 1]),
            revoking: TaskRoles::default(),
        };
        let target = roles(&[0, 2]);
        let step = reconcile(&current, &target, 4, Some(&roles(&[0, 1])), none);
        assert_eq!(step.state, MemberState::UnrevokedTasks);
        assert_eq!(step.epoch, 3);
        assert_eq!(step.assigned, roles(&[0]));
        assert_eq!(step.revoking, roles(&[1]));
        // Still owning task 1: no change.
        assert_eq!(
            reconcile(&step, &target, 4, Some(&roles(&[0, 1])), none),
            step
        );
        // Task 1 given up, but task 2 is still another member's.
        let held = || Holdings {
            active: roles(&[2]).active,
            same_process: Tasks::new(),
        };
        let step = reconcile(&step, &target, 4, Some(&roles(&[0])), held);
        assert_eq!(step.state, MemberState::UnreleasedTasks);
        assert_eq!(step.epoch, 4);
        assert_eq!(step.assigned, roles(&[0]));
        // Released: the member gets it.
        let step = reconcile(&step, &target, 4, None, none);
        assert_eq!(step.state, MemberState::Stable);
        assert_eq!(step.assigned.active["0"], BTreeSet::from([0, 2]));
    }

    #[test]
    fn a_standby_waits_for_its_process_to_drop_the_active_copy() {
        let current = CurrentAssignment::default();
        let target = TaskRoles {
            standby: roles(&[5]).active,
            ..Default::default()
        };
        let held = || Holdings {
            active: Tasks::new(),
            same_process: roles(&[5]).active,
        };
        let step = reconcile(&current, &target, 1, Some(&TaskRoles::default()), held);
        assert_eq!(step.state, MemberState::UnreleasedTasks);
        assert!(step.assigned.is_empty());
    }
}
