//! The share-group records (KIP-932) in `__consumer_offsets`, in Kafka's
//! formats. Keys are non-flexible (`int16` record type, then strings);
//! values are version 0 of the flexible schemas in
//! `ottla_protocol::share_group_records`:
//!
//! | type | key           | value                                            |
//! |------|---------------|--------------------------------------------------|
//! | 10   | group, member | ShareGroupMemberMetadata: rack, client, topics   |
//! | 11   | group         | ShareGroupMetadata: epoch, metadata hash         |
//! | 12   | group         | ShareGroupTargetAssignmentMetadata: epoch        |
//! | 13   | group, member | ShareGroupTargetAssignmentMember: partitions     |
//! | 14   | group, member | ShareGroupCurrentMemberAssignment: member epochs |
//! | 15   | group         | ShareGroupStatePartitionMetadata: the partitions with share state |

use std::collections::{BTreeMap, BTreeSet};

use ottla_protocol::share_group_records::{
    ShareGroupCurrentMemberAssignmentValue, ShareGroupMemberMetadataValue, ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataValue, ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataValue, TopicPartitions, TopicPartitionsInfo,
};
use uuid::Uuid;

use super::codec::{DecodeResult, FieldTooLong, Reader, Writer};
use super::records::{decode_value, encode_value};

const MEMBER_METADATA: i16 = 10;
const GROUP_METADATA: i16 = 11;
const TARGET_ASSIGNMENT_METADATA: i16 = 12;
const TARGET_ASSIGNMENT_MEMBER: i16 = 13;
const CURRENT_ASSIGNMENT: i16 = 14;
const STATE_PARTITIONS: i16 = 15;

/// Kafka's MemberState.STABLE: a share member is never anything else.
const STABLE: i8 = 1;

/// Topic id -> partitions.
pub type ShareAssignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// A member's epochs as it was last answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberEpochs {
    pub epoch: i32,
    pub previous_epoch: i32,
}

/// A topic whose partitions may hold the group's share state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StateTopic {
    pub name: String,
    pub partitions: BTreeSet<i32>,
}

/// Topic id -> the partitions of it with share state for the group.
pub type StatePartitions = BTreeMap<Uuid, StateTopic>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShareRecord {
    MemberMetadata {
        group: String,
        member: String,
        value: Option<ShareGroupMemberMetadataValue>,
    },
    GroupMetadata {
        group: String,
        value: Option<ShareGroupMetadataValue>,
    },
    TargetAssignmentMetadata {
        group: String,
        value: Option<i32>,
    },
    TargetAssignmentMember {
        group: String,
        member: String,
        value: Option<ShareAssignment>,
    },
    /// The member's epochs; the partitions it was told are its target's.
    CurrentAssignment {
        group: String,
        member: String,
        value: Option<(MemberEpochs, ShareAssignment)>,
    },
    StatePartitions {
        group: String,
        value: Option<StatePartitions>,
    },
}

type Encoded = (Vec<u8>, Option<Vec<u8>>);

fn to_wire(assignment: &ShareAssignment) -> Vec<TopicPartitions> {
    assignment
        .iter()
        .map(|(topic_id, partitions)| TopicPartitions {
            topic_id: *topic_id,
            partitions: partitions.iter().copied().collect(),
            ..Default::default()
        })
        .collect()
}

fn from_wire(topics: &[TopicPartitions]) -> ShareAssignment {
    let mut assignment = ShareAssignment::new();
    for t in topics {
        assignment
            .entry(t.topic_id)
            .or_default()
            .extend(t.partitions.iter().copied());
    }
    assignment
}

fn state_partitions_to_wire(p: &StatePartitions) -> ShareGroupStatePartitionMetadataValue {
    ShareGroupStatePartitionMetadataValue {
        initialized_topics: p
            .iter()
            .map(|(id, t)| TopicPartitionsInfo {
                topic_id: *id,
                topic_name: t.name.clone(),
                partitions: t.partitions.iter().copied().collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// Initialized and initializing topics alike may hold state (Kafka writes
/// the second while its initialization is under way); topics being deleted
/// are left to their deletion.
fn state_partitions_from_wire(v: &ShareGroupStatePartitionMetadataValue) -> StatePartitions {
    let mut out = StatePartitions::new();
    for t in v.initialized_topics.iter().chain(&v.initializing_topics) {
        let topic = out.entry(t.topic_id).or_default();
        topic.name = t.topic_name.clone();
        topic.partitions.extend(t.partitions.iter().copied());
    }
    out
}

impl ShareRecord {
    pub fn group(&self) -> &str {
        match self {
            Self::MemberMetadata { group, .. }
            | Self::GroupMetadata { group, .. }
            | Self::TargetAssignmentMetadata { group, .. }
            | Self::TargetAssignmentMember { group, .. }
            | Self::CurrentAssignment { group, .. }
            | Self::StatePartitions { group, .. } => group,
        }
    }

    pub fn encode(&self) -> Result<Encoded, FieldTooLong> {
        let mut key = Writer::default();
        let value = match self {
            Self::MemberMetadata {
                group,
                member,
                value,
            } => {
                key.i16(MEMBER_METADATA).string(group).string(member);
                value.as_ref().map(encode_value).transpose()?
            }
            Self::GroupMetadata { group, value } => {
                key.i16(GROUP_METADATA).string(group);
                value.as_ref().map(encode_value).transpose()?
            }
            Self::TargetAssignmentMetadata { group, value } => {
                key.i16(TARGET_ASSIGNMENT_METADATA).string(group);
                value
                    .map(|epoch| {
                        encode_value(&ShareGroupTargetAssignmentMetadataValue {
                            assignment_epoch: epoch,
                            ..Default::default()
                        })
                    })
                    .transpose()?
            }
            Self::TargetAssignmentMember {
                group,
                member,
                value,
            } => {
                key.i16(TARGET_ASSIGNMENT_MEMBER)
                    .string(group)
                    .string(member);
                value
                    .as_ref()
                    .map(|a| {
                        encode_value(&ShareGroupTargetAssignmentMemberValue {
                            topic_partitions: to_wire(a),
                            ..Default::default()
                        })
                    })
                    .transpose()?
            }
            Self::CurrentAssignment {
                group,
                member,
                value,
            } => {
                key.i16(CURRENT_ASSIGNMENT).string(group).string(member);
                value
                    .as_ref()
                    .map(|(epochs, a)| {
                        encode_value(&ShareGroupCurrentMemberAssignmentValue {
                            member_epoch: epochs.epoch,
                            previous_member_epoch: epochs.previous_epoch,
                            state: STABLE,
                            assigned_partitions: to_wire(a),
                            ..Default::default()
                        })
                    })
                    .transpose()?
            }
            Self::StatePartitions { group, value } => {
                key.i16(STATE_PARTITIONS).string(group);
                value
                    .as_ref()
                    .map(|p| encode_value(&state_partitions_to_wire(p)))
                    .transpose()?
            }
        };
        Ok((key.finish()?, value))
    }

    /// Decodes a record whose key type (already read from `key`) is one of
    /// the share group types.
    pub fn decode(
        key_type: i16,
        key: &mut Reader<'_>,
        value: Option<&[u8]>,
    ) -> DecodeResult<Option<Self>> {
        let group = key.string()?;
        let record = match key_type {
            MEMBER_METADATA => Self::MemberMetadata {
                group,
                member: key.string()?,
                value: value.map(decode_value).transpose()?,
            },
            GROUP_METADATA => Self::GroupMetadata {
                group,
                value: value.map(decode_value).transpose()?,
            },
            TARGET_ASSIGNMENT_METADATA => Self::TargetAssignmentMetadata {
                group,
                value: value
                    .map(decode_value::<ShareGroupTargetAssignmentMetadataValue>)
                    .transpose()?
                    .map(|v| v.assignment_epoch),
            },
            TARGET_ASSIGNMENT_MEMBER => Self::TargetAssignmentMember {
                group,
                member: key.string()?,
                value: value
                    .map(decode_value::<ShareGroupTargetAssignmentMemberValue>)
                    .transpose()?
                    .map(|v| from_wire(&v.topic_partitions)),
            },
            CURRENT_ASSIGNMENT => Self::CurrentAssignment {
                group,
                member: key.string()?,
                value: value
                    .map(decode_value::<ShareGroupCurrentMemberAssignmentValue>)
                    .transpose()?
                    .map(|v| {
                        let epochs = MemberEpochs {
                            epoch: v.member_epoch,
                            previous_epoch: v.previous_member_epoch,
                        };
                        (epochs, from_wire(&v.assigned_partitions))
                    }),
            },
            STATE_PARTITIONS => Self::StatePartitions {
                group,
                value: value
                    .map(decode_value::<ShareGroupStatePartitionMetadataValue>)
                    .transpose()?
                    .map(|v| state_partitions_from_wire(&v)),
            },
            _ => return Ok(None),
        };
        Ok(Some(record))
    }

    /// Whether `key_type` is one of the share group record types.
    pub fn is_share_type(key_type: i16) -> bool {
        (MEMBER_METADATA..=STATE_PARTITIONS).contains(&key_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::CoordinatorRecord;

    fn round_trip(record: ShareRecord) {
        let (key, value) = record.encode().unwrap();
        let decoded = CoordinatorRecord::decode(&key, value.as_deref()).unwrap();
        assert_eq!(decoded, Some(CoordinatorRecord::Share(record)));
    }

    fn assignment(pairs: &[(u128, &[i32])]) -> ShareAssignment {
        pairs
            .iter()
            .map(|(t, ps)| (Uuid::from_u128(*t), ps.iter().copied().collect()))
            .collect()
    }

    #[test]
    fn every_record_round_trips_and_tombstones_too() {
        let g = "queue".to_string();
        round_trip(ShareRecord::MemberMetadata {
            group: g.clone(),
            member: "m".into(),
            value: Some(ShareGroupMemberMetadataValue {
                rack_id: Some("r1".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                subscribed_topic_names: vec!["a".into(), "b".into()],
                ..Default::default()
            }),
        });
        round_trip(ShareRecord::GroupMetadata {
            group: g.clone(),
            value: Some(ShareGroupMetadataValue {
                epoch: 4,
                metadata_hash: -9,
                ..Default::default()
            }),
        });
        round_trip(ShareRecord::TargetAssignmentMetadata {
            group: g.clone(),
            value: Some(4),
        });
        round_trip(ShareRecord::TargetAssignmentMember {
            group: g.clone(),
            member: "m".into(),
            value: Some(assignment(&[(1, &[0, 2]), (2, &[1])])),
        });
        let epochs = MemberEpochs {
            epoch: 4,
            previous_epoch: 3,
        };
        round_trip(ShareRecord::CurrentAssignment {
            group: g.clone(),
            member: "m".into(),
            value: Some((epochs, assignment(&[(1, &[0])]))),
        });
        let mut partitions = StatePartitions::new();
        partitions.insert(
            Uuid::from_u128(1),
            StateTopic {
                name: "a".into(),
                partitions: [0, 1, 2].into(),
            },
        );
        round_trip(ShareRecord::StatePartitions {
            group: g.clone(),
            value: Some(partitions),
        });
        for tombstone in [
            ShareRecord::MemberMetadata {
                group: g.clone(),
                member: "m".into(),
                value: None,
            },
            ShareRecord::StatePartitions {
                group: g,
                value: None,
            },
        ] {
            round_trip(tombstone);
        }
    }

    #[test]
    fn keys_and_values_are_kafkas() {
        let (key, value) = ShareRecord::CurrentAssignment {
            group: "g".into(),
            member: "m".into(),
            value: Some((
                MemberEpochs {
                    epoch: 2,
                    previous_epoch: 1,
                },
                ShareAssignment::new(),
            )),
        }
        .encode()
        .unwrap();
        assert_eq!(key, [0, 14, 0, 1, b'g', 0, 1, b'm']);
        // Version 0; epoch 2; previous 1; STABLE; no partitions (compact
        // array length 0 + 1); no tagged fields.
        assert_eq!(
            value.as_deref(),
            Some(&[0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 1, 1, 0][..])
        );
    }

    #[test]
    fn kafkas_initializing_topics_count_as_holding_state() {
        let value = ShareGroupStatePartitionMetadataValue {
            initializing_topics: vec![TopicPartitionsInfo {
                topic_id: Uuid::from_u128(7),
                topic_name: "new".into(),
                partitions: vec![3],
                ..Default::default()
            }],
            ..Default::default()
        };
        let got = state_partitions_from_wire(&value);
        assert_eq!(got[&Uuid::from_u128(7)].partitions, BTreeSet::from([3]));
    }
}
