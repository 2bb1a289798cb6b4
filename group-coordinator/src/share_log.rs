//! A share group's changes as records (`share_records`), and the records
//! replayed into groups on load: what a change writes is exactly what a
//! reload rebuilds.

use ottla_protocol::share_group_records::{ShareGroupMemberMetadataValue, ShareGroupMetadataValue};

use super::share_group::{ShareGroup, ShareGroups, ShareMember};
use super::share_records::{MemberEpochs, ShareRecord};

fn member_metadata(m: &ShareMember) -> ShareGroupMemberMetadataValue {
    ShareGroupMemberMetadataValue {
        rack_id: m.rack_id.clone(),
        client_id: m.client_id.clone(),
        client_host: m.client_host.clone(),
        subscribed_topic_names: m.subscribed.iter().cloned().collect(),
        ..Default::default()
    }
}

fn epochs(m: &ShareMember) -> MemberEpochs {
    MemberEpochs {
        epoch: m.epoch,
        previous_epoch: m.previous_epoch,
    }
}

/// The records that take group `id` from `before` to `after` (None: no
/// group), in Kafka's order: members' metadata, the group's, the target
/// assignment, members' current assignment; a removal's tombstones in the
/// reverse order, the group's metadata last.
pub(super) fn records_between(
    id: &str,
    before: Option<&ShareGroup>,
    after: Option<&ShareGroup>,
) -> Vec<ShareRecord> {
    let empty = ShareGroup::default();
    let (old, new) = (before.unwrap_or(&empty), after.unwrap_or(&empty));
    let group = || id.to_string();
    let mut records = Vec::new();
    for (member_id, m) in &new.members {
        let previous = old.members.get(member_id);
        if previous.is_none_or(|p| member_metadata(p) != member_metadata(m)) {
            records.push(ShareRecord::MemberMetadata {
                group: group(),
                member: member_id.clone(),
                value: Some(member_metadata(m)),
            });
        }
    }
    if after.is_some()
        && (before.is_none() || old.epoch != new.epoch || old.metadata_hash != new.metadata_hash)
    {
        records.push(ShareRecord::GroupMetadata {
            group: group(),
            value: Some(ShareGroupMetadataValue {
                epoch: new.epoch,
                metadata_hash: new.metadata_hash,
                ..Default::default()
            }),
        });
    }
    for (member_id, m) in &new.members {
        if old
            .members
            .get(member_id)
            .is_none_or(|p| p.assignment != m.assignment)
        {
            records.push(ShareRecord::TargetAssignmentMember {
                group: group(),
                member: member_id.clone(),
                value: Some(m.assignment.clone()),
            });
        }
    }
    if after.is_some() && (before.is_none() || old.assignment_epoch != new.assignment_epoch) {
        records.push(ShareRecord::TargetAssignmentMetadata {
            group: group(),
            value: Some(new.assignment_epoch),
        });
    }
    for (member_id, m) in &new.members {
        if old
            .members
            .get(member_id)
            .is_none_or(|p| epochs(p) != epochs(m) || p.assignment != m.assignment)
        {
            records.push(ShareRecord::CurrentAssignment {
                group: group(),
                member: member_id.clone(),
                value: Some((epochs(m), m.assignment.clone())),
            });
        }
    }
    if after.is_some() && old.state_partitions != new.state_partitions {
        records.push(ShareRecord::StatePartitions {
            group: group(),
            value: Some(new.state_partitions.clone()),
        });
    }
    for member_id in old.members.keys() {
        if !new.members.contains_key(member_id) {
            let member = || member_id.clone();
            records.extend([
                ShareRecord::CurrentAssignment {
                    group: group(),
                    member: member(),
                    value: None,
                },
                ShareRecord::TargetAssignmentMember {
                    group: group(),
                    member: member(),
                    value: None,
                },
                ShareRecord::MemberMetadata {
                    group: group(),
                    member: member(),
                    value: None,
                },
            ]);
        }
    }
    if before.is_some() && after.is_none() {
        records.extend([
            ShareRecord::StatePartitions {
                group: group(),
                value: None,
            },
            ShareRecord::TargetAssignmentMetadata {
                group: group(),
                value: None,
            },
            ShareRecord::GroupMetadata {
                group: group(),
                value: None,
            },
        ]);
    }
    records
}

/// Replays a stored record: the latest record of a key wins; the group's
/// metadata tombstone deletes the group.
pub(super) fn replay(groups: &mut ShareGroups, record: ShareRecord) {
    let id = record.group().to_string();
    if let ShareRecord::GroupMetadata { value: None, .. } = record {
        groups.remove(&id);
        return;
    }
    let group = groups.get_mut_or_insert(&id);
    match record {
        ShareRecord::GroupMetadata { value: Some(v), .. } => {
            group.epoch = v.epoch;
            group.metadata_hash = v.metadata_hash;
        }
        ShareRecord::GroupMetadata { value: None, .. } => {}
        ShareRecord::MemberMetadata { member, value, .. } => match value {
            Some(v) => {
                let m = member_entry(group, &member);
                m.rack_id = v.rack_id;
                m.client_id = v.client_id;
                m.client_host = v.client_host;
                m.subscribed = v.subscribed_topic_names.into_iter().collect();
            }
            None => {
                group.members.remove(&member);
            }
        },
        ShareRecord::TargetAssignmentMetadata { value, .. } => {
            if let Some(epoch) = value {
                group.assignment_epoch = epoch;
            }
        }
        ShareRecord::TargetAssignmentMember { member, value, .. } => {
            if let Some(assignment) = value {
                member_entry(group, &member).assignment = assignment;
            }
        }
        ShareRecord::CurrentAssignment { member, value, .. } => {
            if let Some((e, _)) = value {
                let m = member_entry(group, &member);
                m.epoch = e.epoch;
                m.previous_epoch = e.previous_epoch;
            }
        }
        ShareRecord::StatePartitions { value, .. } => {
            group.state_partitions = value.unwrap_or_default();
        }
    }
}

fn member_entry<'a>(group: &'a mut ShareGroup, member: &str) -> &'a mut ShareMember {
    group
        .members
        .entry(member.to_string())
        .or_insert_with(|| ShareMember {
            member_id: member.to_string(),
            ..Default::default()
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::CoordinatorRecord;
    use crate::share_group::tests::{beat, LIMITS};
    use crate::test_images::image_with;

    /// Applies each step to a copy, keeps its records (through their
    /// bytes), and checks that replaying them all rebuilds the group.
    #[test]
    fn replaying_the_records_of_every_change_rebuilds_the_group() {
        let image = image_with(&[("t", 1, 4), ("u", 2, 2)]);
        let mut group: Option<ShareGroup> = None;
        let mut log: Vec<ShareRecord> = Vec::new();
        let mut step = |change: &dyn Fn(&mut ShareGroup)| {
            let mut next = group.clone().unwrap_or_default();
            change(&mut next);
            for r in records_between("g", group.as_ref(), Some(&next)) {
                let (key, value) = r.encode().unwrap();
                match CoordinatorRecord::decode(&key, value.as_deref()).unwrap() {
                    Some(CoordinatorRecord::Share(r)) => log.push(r),
                    other => panic!("not a share record: {other:?}"),
                }
            }
            group = Some(next);
            let mut replayed = ShareGroups::default();
            for r in &log {
                replay(&mut replayed, r.clone());
            }
            replayed.on_loaded(0, 0);
            let mut expected = group.clone().unwrap();
            for m in expected.members.values_mut() {
                m.session_deadline = 0;
            }
            assert_eq!(replayed.get("g"), Some(&expected));
        };
        let image = &image;
        let hb = |m: &'static str, e: i32, t: Option<&'static [&'static str]>| {
            move |g: &mut ShareGroup| {
                g.heartbeat(&beat(m, e, t), LIMITS, image, 0).unwrap();
            }
        };
        step(&hb("a", 0, Some(&["t"])));
        step(&hb("b", 0, Some(&["t", "u"])));
        step(&hb("a", 1, None));
        step(&hb("a", 2, Some(&["u"])));
        step(&|g: &mut ShareGroup| g.remove_member("b", image));
        step(&hb("a", -1, None));
        assert_eq!(group.as_ref().unwrap().members.len(), 0);
        assert_eq!(
            group.as_ref().unwrap().state_partitions.len(),
            2,
            "both topics were assigned once"
        );

        // Deleting the group: its tombstones leave nothing behind.
        for r in records_between("g", group.as_ref(), None) {
            log.push(r);
        }
        let mut replayed = ShareGroups::default();
        for r in log {
            replay(&mut replayed, r);
        }
        assert_eq!(replayed.len(), 0);
    }

    #[test]
    fn a_heartbeat_that_changes_nothing_writes_nothing() {
        let image = image_with(&[("t", 1, 4)]);
        let mut group = ShareGroup::default();
        group
            .heartbeat(&beat("a", 0, Some(&["t"])), LIMITS, &image, 0)
            .unwrap();
        let before = group.clone();
        let answer = group
            .heartbeat(&beat("a", 1, None), LIMITS, &image, 10)
            .unwrap();
        assert_eq!(answer.assignment, None);
        assert!(records_between("g", Some(&before), Some(&group)).is_empty());
    }
}
