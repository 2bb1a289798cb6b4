//! Reconciliation of a member's current assignment towards its target
//! (Kafka's CurrentAssignmentBuilder). The rules that keep a partition with
//! one owner at a time:
//!
//! - a member first revokes what it must give up, staying at its epoch in
//!   UNREVOKED_PARTITIONS until its heartbeat no longer reports them;
//! - only then does it move to the target epoch and get new partitions, and
//!   only those no other member still owns; the others wait
//!   (UNRELEASED_PARTITIONS) and come with a later heartbeat.

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use super::consumer_member::{owns_any, Assignment, CurrentAssignment, MemberState};

/// What a member is reconciled against.
pub struct Target<'a> {
    pub epoch: i32,
    pub partitions: &'a Assignment,
    /// Topics the member subscribes to now: a target for any other topic
    /// counts as empty.
    pub subscribed: &'a BTreeSet<Uuid>,
    /// The partitions the heartbeat reports as owned (None: not reported).
    pub owned: Option<&'a Assignment>,
    /// The epoch of a partition's current owner, if it has one.
    pub owner_epoch: &'a dyn Fn(&Uuid, i32) -> Option<i32>,
}

/// The member's next state, or the same one when it cannot progress.
/// FENCED_MEMBER_EPOCH for a state this version does not know, unless the
/// member owns nothing (then it starts over at the target).
pub fn reconcile(
    current: &CurrentAssignment,
    target: &Target<'_>,
) -> Result<CurrentAssignment, ResponseError> {
    match current.state {
        MemberState::Stable if current.epoch == target.epoch => Ok(current.clone()),
        MemberState::Stable | MemberState::UnreleasedPartitions => {
            Ok(next(current, current.epoch, target))
        }
        MemberState::UnrevokedPartitions => {
            if owns_any(target.owned, &current.pending_revocation) {
                Ok(current.clone())
            } else {
                Ok(next(current, current.epoch, target))
            }
        }
        MemberState::Unknown => match target.owned {
            Some(owned) if owned.is_empty() => Ok(next(current, target.epoch, target)),
            _ => Err(ResponseError::FencedMemberEpoch),
        },
    }
}

fn next(current: &CurrentAssignment, member_epoch: i32, target: &Target<'_>) -> CurrentAssignment {
    let empty = BTreeSet::new();
    let mut assigned = Assignment::new();
    let mut revoke = Assignment::new();
    let mut pending_assignment = Assignment::new();
    let mut unreleased = false;
    let topics: BTreeSet<&Uuid> = target
        .partitions
        .keys()
        .chain(current.assigned.keys())
        .collect();
    for topic in topics {
        let wanted = match target.partitions.get(topic) {
            Some(ps) if target.subscribed.contains(topic) => ps,
            _ => &empty,
        };
        let had = current.assigned.get(topic).unwrap_or(&empty);
        let kept: BTreeSet<i32> = had.intersection(wanted).copied().collect();
        let revoked: BTreeSet<i32> = had.difference(&kept).copied().collect();
        let own_pending = current.pending_revocation.get(topic);
        let mut to_assign = BTreeSet::new();
        for &p in wanted.difference(&kept) {
            // A partition this member is itself revoking is not "owned by
            // another member".
            let owned_elsewhere = (target.owner_epoch)(topic, p).is_some()
                && !own_pending.is_some_and(|ps| ps.contains(&p));
            if owned_elsewhere {
                unreleased = true;
            } else {
                to_assign.insert(p);
            }
        }
        insert_non_empty(&mut assigned, topic, kept);
        insert_non_empty(&mut revoke, topic, revoked);
        insert_non_empty(&mut pending_assignment, topic, to_assign);
    }
    if !revoke.is_empty() && owns_any(target.owned, &revoke) {
        // Revocation first: the member stays at its epoch until it acknowledges.
        return CurrentAssignment {
            epoch: member_epoch,
            previous_epoch: current.epoch,
            state: MemberState::UnrevokedPartitions,
            assigned,
            pending_revocation: revoke,
        };
    }
    for (topic, partitions) in pending_assignment {
        assigned.entry(topic).or_default().extend(partitions);
    }
    CurrentAssignment {
        epoch: target.epoch,
        previous_epoch: current.epoch,
        state: if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        },
        assigned,
        pending_revocation: Assignment::new(),
    }
}

fn insert_non_empty(a: &mut Assignment, topic: &Uuid, partitions: BTreeSet<i32>) {
    if !partitions.is_empty() {
        a.insert(*topic, partitions);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    const T: Uuid = Uuid::from_u128(1);

    fn parts(ps: &[i32]) -> Assignment {
        if ps.is_empty() {
            return Assignment::new();
        }
        Assignment::from([(T, ps.iter().copied().collect())])
    }

    fn member(
        epoch: i32,
        state: MemberState,
        assigned: &[i32],
        pending: &[i32],
    ) -> CurrentAssignment {
        CurrentAssignment {
            epoch,
            previous_epoch: epoch - 1,
            state,
            assigned: parts(assigned),
            pending_revocation: parts(pending),
        }
    }

    fn run(
        current: &CurrentAssignment,
        epoch: i32,
        target: &[i32],
        owned: Option<&[i32]>,
        others: &[i32],
    ) -> CurrentAssignment {
        let target_parts = parts(target);
        let owned = owned.map(parts);
        let subscribed = BTreeSet::from([T]);
        let others: HashMap<i32, i32> = others.iter().map(|&p| (p, 3)).collect();
        let owner = move |_: &Uuid, p: i32| others.get(&p).copied();
        reconcile(
            current,
            &Target {
                epoch,
                partitions: &target_parts,
                subscribed: &subscribed,
                owned: owned.as_ref(),
                owner_epoch: &owner,
            },
        )
        .unwrap()
    }

    #[test]
    fn revokes_before_assigning_and_waits_for_released_partitions() {
        let m = member(5, MemberState::Stable, &[0, 1, 2], &[]);
        // Target moves 2 away and brings 3, which another member still owns.
        let step = run(&m, 6, &[0, 1, 3], None, &[3]);
        assert_eq!(step.state, MemberState::UnrevokedPartitions);
        assert_eq!(step.epoch, 5, "revocation happens at the old epoch");
        assert_eq!(step.assigned, parts(&[0, 1]));
        assert_eq!(step.pending_revocation, parts(&[2]));
        // Still reporting partition 2: no progress.
        assert_eq!(run(&step, 6, &[0, 1, 3], Some(&[0, 1, 2]), &[3]), step);
        // Revoked; 3 is still owned elsewhere.
        let step = run(&step, 6, &[0, 1, 3], Some(&[0, 1]), &[3]);
        assert_eq!(step.state, MemberState::UnreleasedPartitions);
        assert_eq!((step.epoch, step.previous_epoch), (6, 5));
        assert_eq!(step.assigned, parts(&[0, 1]));
        // Released: the member gets it.
        let step = run(&step, 6, &[0, 1, 3], Some(&[0, 1]), &[]);
        assert_eq!(step.state, MemberState::Stable);
        assert_eq!(step.assigned, parts(&[0, 1, 3]));
        assert!(step.is_reconciled_to(6));
    }

    #[test]
    fn skips_revocation_the_member_already_did() {
        let m = member(5, MemberState::Stable, &[0, 1], &[]);
        let step = run(&m, 6, &[0], Some(&[0]), &[]);
        assert_eq!(step.state, MemberState::Stable);
        assert_eq!(step.epoch, 6);
        assert_eq!(step.assigned, parts(&[0]));
    }

    #[test]
    fn unsubscribed_topics_are_revoked() {
        let m = member(5, MemberState::Stable, &[0, 1], &[]);
        let target = parts(&[0, 1]);
        let subscribed = BTreeSet::new();
        let owner = |_: &Uuid, _: i32| None;
        let step = reconcile(
            &m,
            &Target {
                epoch: 6,
                partitions: &target,
                subscribed: &subscribed,
                owned: None,
                owner_epoch: &owner,
            },
        )
        .unwrap();
        assert_eq!(step.state, MemberState::UnrevokedPartitions);
        assert_eq!(step.pending_revocation, parts(&[0, 1]));
    }

    #[test]
    fn unknown_state_is_fenced_unless_the_member_owns_nothing() {
        let m = member(5, MemberState::Unknown, &[0], &[]);
        let target = parts(&[0]);
        let subscribed = BTreeSet::from([T]);
        let owner = |_: &Uuid, _: i32| None;
        let t = |owned| Target {
            epoch: 6,
            partitions: &target,
            subscribed: &subscribed,
            owned,
            owner_epoch: &owner,
        };
        assert_eq!(
            reconcile(&m, &t(None)),
            Err(ResponseError::FencedMemberEpoch)
        );
        let empty = Assignment::new();
        assert_eq!(reconcile(&m, &t(Some(&empty))).unwrap().epoch, 6);
    }
}
