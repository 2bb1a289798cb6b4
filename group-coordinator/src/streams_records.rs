//! The streams-group records (KIP-1071) in `__consumer_offsets`, in Kafka's
//! formats. Keys are non-flexible (`int16` record type, then strings);
//! values are version 0 of the flexible schemas in
//! `ottla_protocol::streams::records`:
//!
//! | type | key           | value                                        |
//! |------|---------------|----------------------------------------------|
//! | 17   | group         | StreamsGroupMetadata: epoch, metadata hash, validated topology epoch |
//! | 18   | group         | StreamsGroupPartitionMetadata (pre-4.1 Kafka): skipped |
//! | 19   | group, member | StreamsGroupMemberMetadata                   |
//! | 20   | group         | StreamsGroupTargetAssignmentMetadata: epoch  |
//! | 21   | group, member | StreamsGroupTargetAssignmentMember: tasks    |
//! | 22   | group, member | StreamsGroupCurrentMemberAssignment          |
//! | 23   | group         | StreamsGroupTopology                         |

use ottla_protocol::streams::describe::Assignment;
use ottla_protocol::streams::records::{
    StreamsGroupCurrentMemberAssignmentValue, StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataValue, StreamsGroupTargetAssignmentMetadataValue,
};
use ottla_protocol::streams::Topology;

use super::codec::{DecodeResult, FieldTooLong, Reader, Writer};
use super::records::{decode_value, encode_value};
use super::streams_member::{CurrentAssignment, TaskRoles};

const GROUP_METADATA: i16 = 17;
const PARTITION_METADATA: i16 = 18;
const MEMBER_METADATA: i16 = 19;
const TARGET_ASSIGNMENT_METADATA: i16 = 20;
const TARGET_ASSIGNMENT_MEMBER: i16 = 21;
const CURRENT_ASSIGNMENT: i16 = 22;
const TOPOLOGY: i16 = 23;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamsRecord {
    GroupMetadata {
        group: String,
        value: Option<StreamsGroupMetadataValue>,
    },
    MemberMetadata {
        group: String,
        member: String,
        value: Option<StreamsGroupMemberMetadataValue>,
    },
    TargetAssignmentMetadata {
        group: String,
        value: Option<i32>,
    },
    TargetAssignmentMember {
        group: String,
        member: String,
        value: Option<TaskRoles>,
    },
    CurrentAssignment {
        group: String,
        member: String,
        value: Option<CurrentAssignment>,
    },
    Topology {
        group: String,
        value: Option<Topology>,
    },
}

type Encoded = (Vec<u8>, Option<Vec<u8>>);

impl StreamsRecord {
    pub fn group(&self) -> &str {
        match self {
            Self::GroupMetadata { group, .. }
            | Self::MemberMetadata { group, .. }
            | Self::TargetAssignmentMetadata { group, .. }
            | Self::TargetAssignmentMember { group, .. }
            | Self::CurrentAssignment { group, .. }
            | Self::Topology { group, .. } => group,
        }
    }

    pub fn is_tombstone(&self) -> bool {
        matches!(
            self,
            Self::GroupMetadata { value: None, .. }
                | Self::MemberMetadata { value: None, .. }
                | Self::TargetAssignmentMetadata { value: None, .. }
                | Self::TargetAssignmentMember { value: None, .. }
                | Self::CurrentAssignment { value: None, .. }
                | Self::Topology { value: None, .. }
        )
    }

    pub fn encode(&self) -> Result<Encoded, FieldTooLong> {
        let mut key = Writer::default();
        let value = match self {
            Self::GroupMetadata { group, value } => {
                key.i16(GROUP_METADATA).string(group);
                value.as_ref().map(encode_value).transpose()?
            }
            Self::MemberMetadata {
                group,
                member,
                value,
            } => {
                key.i16(MEMBER_METADATA).string(group).string(member);
                value.as_ref().map(encode_value).transpose()?
            }
            Self::TargetAssignmentMetadata { group, value } => {
                key.i16(TARGET_ASSIGNMENT_METADATA).string(group);
                value
                    .map(|epoch| {
                        encode_value(&StreamsGroupTargetAssignmentMetadataValue {
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
                    .map(|tasks| encode_value(&tasks.to_wire()))
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
                    .map(|c| encode_value(&c.to_wire()))
                    .transpose()?
            }
            Self::Topology { group, value } => {
                key.i16(TOPOLOGY).string(group);
                value.as_ref().map(encode_value).transpose()?
            }
        };
        Ok((key.finish()?, value))
    }

    /// Decodes a record whose key type (already read from `key`) is one of
    /// the streams group types; Ok(None) for types that are skipped.
    pub fn decode(
        key_type: i16,
        key: &mut Reader<'_>,
        value: Option<&[u8]>,
    ) -> DecodeResult<Option<Self>> {
        let group = key.string()?;
        let record = match key_type {
            GROUP_METADATA => Self::GroupMetadata {
                group,
                value: value.map(decode_value).transpose()?,
            },
            PARTITION_METADATA => return Ok(None),
            MEMBER_METADATA => Self::MemberMetadata {
                group,
                member: key.string()?,
                value: value.map(decode_value).transpose()?,
            },
            TARGET_ASSIGNMENT_METADATA => Self::TargetAssignmentMetadata {
                group,
                value: value
                    .map(decode_value::<StreamsGroupTargetAssignmentMetadataValue>)
                    .transpose()?
                    .map(|v| v.assignment_epoch),
            },
            TARGET_ASSIGNMENT_MEMBER => Self::TargetAssignmentMember {
                group,
                member: key.string()?,
                value: value
                    .map(decode_value::<Assignment>)
                    .transpose()?
                    .map(|a| TaskRoles::from_wire(&a)),
            },
            CURRENT_ASSIGNMENT => Self::CurrentAssignment {
                group,
                member: key.string()?,
                value: value
                    .map(decode_value::<StreamsGroupCurrentMemberAssignmentValue>)
                    .transpose()?
                    .map(|v| CurrentAssignment::from_wire(&v)),
            },
            TOPOLOGY => Self::Topology {
                group,
                value: value.map(decode_value).transpose()?,
            },
            _ => return Ok(None),
        };
        Ok(Some(record))
    }

    /// Whether `key_type` is one of the streams group record types.
    pub fn is_streams_type(key_type: i16) -> bool {
        (GROUP_METADATA..=TOPOLOGY).contains(&key_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::CoordinatorRecord;
    use crate::streams_member::MemberState;
    use ottla_protocol::streams::{Subtopology, TopicInfo};

    fn round_trip(record: StreamsRecord) {
        let (key, value) = record.encode().unwrap();
        let decoded = CoordinatorRecord::decode(&key, value.as_deref()).unwrap();
        assert_eq!(decoded, Some(CoordinatorRecord::Streams(record)));
    }

    fn tasks(pairs: &[(&str, &[i32])]) -> crate::streams_member::Tasks {
        pairs
            .iter()
            .map(|(s, ps)| (s.to_string(), ps.iter().copied().collect()))
            .collect()
    }

    #[test]
    fn every_record_round_trips_and_tombstones_too() {
        let g = "app".to_string();
        let mut meta = StreamsGroupMetadataValue {
            epoch: 7,
            metadata_hash: -3,
            ..Default::default()
        };
        meta.set_validated_topology_epoch(1);
        round_trip(StreamsRecord::GroupMetadata {
            group: g.clone(),
            value: Some(meta),
        });
        round_trip(StreamsRecord::MemberMetadata {
            group: g.clone(),
            member: "m".into(),
            value: Some(StreamsGroupMemberMetadataValue {
                client_id: "c".into(),
                process_id: "p".into(),
                topology_epoch: 1,
                ..Default::default()
            }),
        });
        round_trip(StreamsRecord::TargetAssignmentMetadata {
            group: g.clone(),
            value: Some(7),
        });
        let roles = TaskRoles {
            active: tasks(&[("0", &[0, 2]), ("1", &[1])]),
            standby: tasks(&[("0", &[1])]),
            warmup: Default::default(),
        };
        round_trip(StreamsRecord::TargetAssignmentMember {
            group: g.clone(),
            member: "m".into(),
            value: Some(roles.clone()),
        });
        round_trip(StreamsRecord::CurrentAssignment {
            group: g.clone(),
            member: "m".into(),
            value: Some(CurrentAssignment {
                epoch: 7,
                previous_epoch: 6,
                state: MemberState::UnrevokedTasks,
                assigned: roles.clone(),
                revoking: TaskRoles {
                    active: tasks(&[("1", &[0])]),
                    ..Default::default()
                },
            }),
        });
        round_trip(StreamsRecord::Topology {
            group: g.clone(),
            value: Some(Topology {
                epoch: 1,
                subtopologies: vec![Subtopology {
                    subtopology_id: "0".into(),
                    source_topics: vec!["in".into()],
                    state_changelog_topics: vec![TopicInfo {
                        name: "app-store-changelog".into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }),
        });
        round_trip(StreamsRecord::CurrentAssignment {
            group: g,
            member: "m".into(),
            value: None,
        });
    }

    #[test]
    fn keys_are_kafkas_and_other_value_versions_are_refused() {
        let (key, value) = StreamsRecord::TargetAssignmentMetadata {
            group: "g".into(),
            value: Some(3),
        }
        .encode()
        .unwrap();
        assert_eq!(key, [0, 20, 0, 1, b'g']);
        // Version 0, epoch 3, no tagged fields.
        assert_eq!(value.as_deref(), Some(&[0, 0, 0, 0, 0, 3, 0][..]));
        let mut newer = value.unwrap();
        newer[1] = 1;
        assert!(CoordinatorRecord::decode(&key, Some(&newer)).is_err());
        // Pre-4.1 partition metadata is skipped.
        assert_eq!(
            CoordinatorRecord::decode(&[0, 18, 0, 1, b'g'], Some(&[0, 0])).unwrap(),
            None
        );
    }
}
