//! The KIP-848 consumer group records in `__consumer_offsets`, in Kafka's
//! formats. Keys are non-flexible (`int16` record type, then strings);
//! values are flexible version 0 with tagged fields:
//!
//! | type | key                     | value                                          |
//! |------|-------------------------|------------------------------------------------|
//! | 3    | group                   | ConsumerGroupMetadata: epoch, tag 0 metadata hash |
//! | 4    | group                   | ConsumerGroupPartitionMetadata (pre-4.1 Kafka)  |
//! | 5    | group, member           | ConsumerGroupMemberMetadata: the subscription   |
//! | 6    | group                   | ConsumerGroupTargetAssignmentMetadata: epoch    |
//! | 7    | group, member           | ConsumerGroupTargetAssignmentMember: partitions |
//! | 8    | group, member           | ConsumerGroupCurrentMemberAssignment            |
//! | 16   | group, regex            | ConsumerGroupRegularExpression: resolved topics |
//!
//! Like Kafka 4.1+, Ottla keeps a hash of the subscribed topics' metadata in
//! the group record instead of type 4 records: those are skipped on load and
//! only ever written as tombstones.

use std::collections::BTreeSet;

use super::codec::{DecodeError, DecodeResult, FieldTooLong, Reader, Writer};
use super::consumer_codec::FlexWriter;
use super::consumer_member::{
    Assignment, ClassicMetadata, CurrentAssignment, MemberState, MemberSubscription,
};
use super::member::Protocol;

const GROUP_METADATA: i16 = 3;
const PARTITION_METADATA: i16 = 4;
const MEMBER_METADATA: i16 = 5;
const TARGET_ASSIGNMENT_METADATA: i16 = 6;
const TARGET_ASSIGNMENT_MEMBER: i16 = 7;
const CURRENT_ASSIGNMENT: i16 = 8;
const REGULAR_EXPRESSION: i16 = 16;

/// Every value here has this one version.
const VALUE_VERSION: i16 = 0;
/// ConsumerGroupMetadataValue's tagged MetadataHash (KIP-1101).
const METADATA_HASH_TAG: u32 = 0;
/// ConsumerGroupMemberMetadataValue's tagged ClassicMemberMetadata.
const CLASSIC_MEMBER_METADATA_TAG: u32 = 0;

/// A regex resolved against the metadata image.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResolvedRegex {
    pub topics: BTreeSet<String>,
    /// The metadata image offset it was resolved at.
    pub version: i64,
    pub timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerRecord {
    /// The group epoch and the hash of its subscribed topics' metadata.
    GroupMetadata {
        group: String,
        value: Option<(i32, i64)>,
    },
    PartitionMetadataTombstone {
        group: String,
    },
    MemberMetadata {
        group: String,
        member: String,
        value: Option<MemberSubscription>,
    },
    TargetAssignmentMetadata {
        group: String,
        value: Option<i32>,
    },
    TargetAssignmentMember {
        group: String,
        member: String,
        value: Option<Assignment>,
    },
    CurrentAssignment {
        group: String,
        member: String,
        value: Option<CurrentAssignment>,
    },
    RegularExpression {
        group: String,
        regex: String,
        value: Option<ResolvedRegex>,
    },
}

type Encoded = (Vec<u8>, Option<Vec<u8>>);

impl ConsumerRecord {
    pub fn group(&self) -> &str {
        match self {
            Self::GroupMetadata { group, .. }
            | Self::PartitionMetadataTombstone { group }
            | Self::MemberMetadata { group, .. }
            | Self::TargetAssignmentMetadata { group, .. }
            | Self::TargetAssignmentMember { group, .. }
            | Self::CurrentAssignment { group, .. }
            | Self::RegularExpression { group, .. } => group,
        }
    }

    pub fn is_tombstone(&self) -> bool {
        matches!(
            self,
            Self::GroupMetadata { value: None, .. }
                | Self::PartitionMetadataTombstone { .. }
                | Self::MemberMetadata { value: None, .. }
                | Self::TargetAssignmentMetadata { value: None, .. }
                | Self::TargetAssignmentMember { value: None, .. }
                | Self::CurrentAssignment { value: None, .. }
                | Self::RegularExpression { value: None, .. }
        )
    }

    pub fn encode(&self) -> Result<Encoded, FieldTooLong> {
        let mut key = Writer::default();
        let value = match self {
            Self::GroupMetadata { group, value } => {
                key.i16(GROUP_METADATA).string(group);
                value.map(|(epoch, hash)| {
                    let mut w = FlexWriter::new(VALUE_VERSION);
                    w.i32(epoch);
                    if hash == 0 {
                        w.no_tags();
                    } else {
                        w.tags(&[(METADATA_HASH_TAG, hash.to_be_bytes().to_vec())]);
                    }
                    w
                })
            }
            Self::PartitionMetadataTombstone { group } => {
                key.i16(PARTITION_METADATA).string(group);
                None
            }
            Self::MemberMetadata {
                group,
                member,
                value,
            } => {
                key.i16(MEMBER_METADATA).string(group).string(member);
                value.as_ref().map(encode_subscription).transpose()?
            }
            Self::TargetAssignmentMetadata { group, value } => {
                key.i16(TARGET_ASSIGNMENT_METADATA).string(group);
                value.map(|epoch| {
                    let mut w = FlexWriter::new(VALUE_VERSION);
                    w.i32(epoch).no_tags();
                    w
                })
            }
            Self::TargetAssignmentMember {
                group,
                member,
                value,
            } => {
                key.i16(TARGET_ASSIGNMENT_MEMBER)
                    .string(group)
                    .string(member);
                value.as_ref().map(|a| {
                    let mut w = FlexWriter::new(VALUE_VERSION);
                    write_partitions(&mut w, a);
                    w.no_tags();
                    w
                })
            }
            Self::CurrentAssignment {
                group,
                member,
                value,
            } => {
                key.i16(CURRENT_ASSIGNMENT).string(group).string(member);
                value.as_ref().map(|c| {
                    let mut w = FlexWriter::new(VALUE_VERSION);
                    w.i32(c.epoch).i32(c.previous_epoch).i8(c.state.byte());
                    write_partitions(&mut w, &c.assigned);
                    write_partitions(&mut w, &c.pending_revocation);
                    w.no_tags();
                    w
                })
            }
            Self::RegularExpression {
                group,
                regex,
                value,
            } => {
                key.i16(REGULAR_EXPRESSION).string(group).string(regex);
                value.as_ref().map(|r| {
                    let mut w = FlexWriter::new(VALUE_VERSION);
                    w.array_len(r.topics.len());
                    for t in &r.topics {
                        w.string(t);
                    }
                    w.i64(r.version).i64(r.timestamp).no_tags();
                    w
                })
            }
        };
        Ok((key.finish()?, value.map(FlexWriter::finish).transpose()?))
    }

    /// Decodes a record whose key type (already read from `key`) is one of
    /// the consumer group types; Ok(None) for types that are skipped.
    pub fn decode(
        key_type: i16,
        key: &mut Reader<'_>,
        value: Option<&[u8]>,
    ) -> DecodeResult<Option<Self>> {
        let group = key.string()?;
        let record = match key_type {
            GROUP_METADATA => Self::GroupMetadata {
                group,
                value: value.map(decode_group_metadata).transpose()?,
            },
            PARTITION_METADATA => return Ok(None),
            MEMBER_METADATA => Self::MemberMetadata {
                group,
                member: key.string()?,
                value: value.map(decode_subscription).transpose()?,
            },
            TARGET_ASSIGNMENT_METADATA => Self::TargetAssignmentMetadata {
                group,
                value: value
                    .map(|v| {
                        let mut r = value_reader(v)?;
                        let epoch = r.i32()?;
                        r.tagged_fields()?;
                        Ok(epoch)
                    })
                    .transpose()?,
            },
            TARGET_ASSIGNMENT_MEMBER => Self::TargetAssignmentMember {
                group,
                member: key.string()?,
                value: value
                    .map(|v| {
                        let mut r = value_reader(v)?;
                        let a = read_partitions(&mut r)?;
                        r.tagged_fields()?;
                        Ok(a)
                    })
                    .transpose()?,
            },
            CURRENT_ASSIGNMENT => Self::CurrentAssignment {
                group,
                member: key.string()?,
                value: value.map(decode_current_assignment).transpose()?,
            },
            REGULAR_EXPRESSION => Self::RegularExpression {
                group,
                regex: key.string()?,
                value: value.map(decode_regex).transpose()?,
            },
            _ => return Ok(None),
        };
        Ok(Some(record))
    }

    /// Whether `key_type` is one of the consumer group record types.
    pub fn is_consumer_type(key_type: i16) -> bool {
        matches!(
            key_type,
            GROUP_METADATA..=CURRENT_ASSIGNMENT | REGULAR_EXPRESSION
        )
    }
}

fn value_reader(buf: &[u8]) -> DecodeResult<Reader<'_>> {
    let mut r = Reader::new(buf);
    if r.i16()? != VALUE_VERSION {
        return Err(DecodeError("unknown consumer group record value version"));
    }
    r.set_flexible(true);
    Ok(r)
}

fn decode_group_metadata(buf: &[u8]) -> DecodeResult<(i32, i64)> {
    let mut r = value_reader(buf)?;
    let epoch = r.i32()?;
    let mut hash = 0;
    for (tag, bytes) in r.tagged_fields()? {
        if tag == METADATA_HASH_TAG {
            hash = i64::from_be_bytes(
                bytes
                    .try_into()
                    .map_err(|_| DecodeError("metadata hash is not 8 bytes"))?,
            );
        }
    }
    Ok((epoch, hash))
}

fn encode_subscription(s: &MemberSubscription) -> Result<FlexWriter, FieldTooLong> {
    let mut w = FlexWriter::new(VALUE_VERSION);
    w.nullable_string(s.instance_id.as_deref())
        .nullable_string(s.rack_id.as_deref())
        .string(&s.client_id)
        .string(&s.client_host)
        .array_len(s.topic_names.len());
    for t in &s.topic_names {
        w.string(t);
    }
    w.nullable_string(s.topic_regex.as_deref())
        .i32(s.rebalance_timeout_ms)
        .nullable_string(s.server_assignor.as_deref());
    match &s.classic {
        None => w.no_tags(),
        Some(c) => w.tags(&[(CLASSIC_MEMBER_METADATA_TAG, encode_classic(c)?)]),
    };
    Ok(w)
}

/// A nullable struct as a tagged value: 1 (present), then the struct.
fn encode_classic(c: &ClassicMetadata) -> Result<Vec<u8>, FieldTooLong> {
    let mut w = FlexWriter::nested();
    w.i8(1)
        .i32(c.session_timeout_ms)
        .array_len(c.protocols.len());
    for p in &c.protocols {
        w.string(&p.name).bytes(&p.metadata).no_tags();
    }
    w.no_tags();
    w.finish()
}

fn decode_classic(buf: &[u8]) -> DecodeResult<Option<ClassicMetadata>> {
    let mut r = Reader::new(buf);
    r.set_flexible(true);
    if r.i8()? < 0 {
        return Ok(None);
    }
    let session_timeout_ms = r.i32()?;
    let protocols = (0..r.array_len()?)
        .map(|_| {
            let name = r.string()?;
            let metadata = r.bytes()?;
            r.tagged_fields()?;
            Ok(Protocol { name, metadata })
        })
        .collect::<DecodeResult<_>>()?;
    r.tagged_fields()?;
    Ok(Some(ClassicMetadata {
        session_timeout_ms,
        protocols,
    }))
}

fn decode_subscription(buf: &[u8]) -> DecodeResult<MemberSubscription> {
    let mut r = value_reader(buf)?;
    let instance_id = r.nullable_string()?;
    let rack_id = r.nullable_string()?;
    let client_id = r.string()?;
    let client_host = r.string()?;
    let topic_names = read_strings(&mut r)?;
    let topic_regex = r.nullable_string()?;
    let rebalance_timeout_ms = r.i32()?;
    let server_assignor = r.nullable_string()?;
    let mut classic = None;
    for (tag, bytes) in r.tagged_fields()? {
        if tag == CLASSIC_MEMBER_METADATA_TAG {
            classic = decode_classic(bytes)?;
        }
    }
    Ok(MemberSubscription {
        instance_id,
        rack_id,
        client_id,
        client_host,
        topic_names,
        topic_regex,
        rebalance_timeout_ms,
        server_assignor,
        classic,
    })
}

fn decode_current_assignment(buf: &[u8]) -> DecodeResult<CurrentAssignment> {
    let mut r = value_reader(buf)?;
    let epoch = r.i32()?;
    let previous_epoch = r.i32()?;
    let state = MemberState::from_byte(r.i8()?);
    let assigned = read_partitions(&mut r)?;
    let pending_revocation = read_partitions(&mut r)?;
    r.tagged_fields()?;
    Ok(CurrentAssignment {
        epoch,
        previous_epoch,
        state,
        assigned,
        pending_revocation,
    })
}

fn decode_regex(buf: &[u8]) -> DecodeResult<ResolvedRegex> {
    let mut r = value_reader(buf)?;
    let topics = read_strings(&mut r)?;
    let version = r.i64()?;
    let timestamp = r.i64()?;
    r.tagged_fields()?;
    Ok(ResolvedRegex {
        topics,
        version,
        timestamp,
    })
}

fn read_strings(r: &mut Reader<'_>) -> DecodeResult<BTreeSet<String>> {
    (0..r.array_len()?).map(|_| r.string()).collect()
}

/// `[]TopicPartitions`: topic id, partitions, tagged fields (Kafka 4.3's
/// per-partition assignment epochs are tagged and not kept).
fn write_partitions(w: &mut FlexWriter, a: &Assignment) {
    w.array_len(a.len());
    for (topic, partitions) in a {
        w.uuid(topic).array_len(partitions.len());
        for &p in partitions {
            w.i32(p);
        }
        w.no_tags();
    }
}

fn read_partitions(r: &mut Reader<'_>) -> DecodeResult<Assignment> {
    let mut a = Assignment::new();
    for _ in 0..r.array_len()? {
        let topic = r.uuid()?;
        let partitions = (0..r.array_len()?)
            .map(|_| r.i32())
            .collect::<DecodeResult<BTreeSet<i32>>>()?;
        r.tagged_fields()?;
        if !partitions.is_empty() {
            a.entry(topic).or_default().extend(partitions);
        }
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;

    fn round_trip(rec: ConsumerRecord) -> Encoded {
        let (key, value) = rec.encode().unwrap();
        let mut k = Reader::new(&key);
        let key_type = k.i16().unwrap();
        assert!(ConsumerRecord::is_consumer_type(key_type));
        let decoded = ConsumerRecord::decode(key_type, &mut k, value.as_deref()).unwrap();
        assert_eq!(decoded, Some(rec));
        (key, value)
    }

    fn assignment(topic: Uuid, partitions: &[i32]) -> Assignment {
        Assignment::from([(topic, partitions.iter().copied().collect())])
    }

    #[test]
    fn group_metadata_carries_the_hash_as_tag_0() {
        let (key, value) = round_trip(ConsumerRecord::GroupMetadata {
            group: "g".into(),
            value: Some((7, 0x0102_0304_0506_0708)),
        });
        assert_eq!(key, [0, 3, 0, 1, b'g']);
        let mut expected = vec![0, 0, 0, 0, 0, 7, 1, 0, 8];
        expected.extend_from_slice(&0x0102_0304_0506_0708i64.to_be_bytes());
        assert_eq!(value.unwrap(), expected);
        // Without a hash there are no tagged fields.
        let (_, value) = round_trip(ConsumerRecord::GroupMetadata {
            group: "g".into(),
            value: Some((1, 0)),
        });
        assert_eq!(value.unwrap(), [0, 0, 0, 0, 0, 1, 0]);
    }

    #[test]
    fn member_records_round_trip() {
        let topic = Uuid::from_u128(42);
        round_trip(ConsumerRecord::MemberMetadata {
            group: "g".into(),
            member: "m".into(),
            value: Some(MemberSubscription {
                instance_id: Some("i".into()),
                rack_id: None,
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                topic_names: ["a".to_string(), "b".to_string()].into(),
                topic_regex: Some("t.*".into()),
                rebalance_timeout_ms: 300_000,
                server_assignor: Some("range".into()),
                classic: None,
            }),
        });
        let (key, value) = round_trip(ConsumerRecord::CurrentAssignment {
            group: "g".into(),
            member: "m".into(),
            value: Some(CurrentAssignment {
                epoch: 5,
                previous_epoch: 4,
                state: MemberState::UnrevokedPartitions,
                assigned: assignment(topic, &[0, 2]),
                pending_revocation: assignment(topic, &[1]),
            }),
        });
        assert_eq!(key, [0, 8, 0, 1, b'g', 0, 1, b'm']);
        let value = value.unwrap();
        // version, epoch 5, previous 4, state 1, one topic ...
        assert_eq!(&value[..12], &[0, 0, 0, 0, 0, 5, 0, 0, 0, 4, 1, 2]);
        round_trip(ConsumerRecord::TargetAssignmentMember {
            group: "g".into(),
            member: "m".into(),
            value: Some(assignment(topic, &[3])),
        });
        round_trip(ConsumerRecord::TargetAssignmentMetadata {
            group: "g".into(),
            value: Some(9),
        });
        round_trip(ConsumerRecord::RegularExpression {
            group: "g".into(),
            regex: "t.*".into(),
            value: Some(ResolvedRegex {
                topics: ["t1".to_string()].into(),
                version: 12,
                timestamp: 1_700_000_000_000,
            }),
        });
        round_trip(ConsumerRecord::MemberMetadata {
            group: "g".into(),
            member: "m".into(),
            value: None,
        });
    }

    #[test]
    fn classic_member_metadata_is_tag_0_as_a_nullable_struct() {
        let sub = MemberSubscription {
            client_id: "c".into(),
            client_host: "h".into(),
            rebalance_timeout_ms: 1,
            classic: Some(ClassicMetadata {
                session_timeout_ms: 45_000,
                protocols: vec![Protocol {
                    name: "range".into(),
                    metadata: bytes::Bytes::from_static(&[0, 3]),
                }],
            }),
            ..MemberSubscription::default()
        };
        let (_, value) = round_trip(ConsumerRecord::MemberMetadata {
            group: "g".into(),
            member: "m".into(),
            value: Some(sub),
        });
        let value = value.unwrap();
        // ... null server assignor, one tagged field: tag 0, 17 bytes: the
        // presence byte, the timeout, one protocol ("range", 2 bytes of
        // metadata, no tags), no tags.
        let tail = [
            0, 1, 0, 17, 1, 0, 0, 0xaf, 0xc8, 2, 6, b'r', b'a', b'n', b'g', b'e', 3, 0, 3, 0, 0,
        ];
        assert_eq!(&value[value.len() - tail.len()..], &tail);
    }

    #[test]
    fn partition_metadata_is_skipped_and_other_values_versions_refused() {
        let mut k = Reader::new(&[0, 1, b'g']);
        assert_eq!(
            ConsumerRecord::decode(PARTITION_METADATA, &mut k, Some(&[0, 0, 0])).unwrap(),
            None
        );
        let mut k = Reader::new(&[0, 1, b'g']);
        assert!(
            ConsumerRecord::decode(GROUP_METADATA, &mut k, Some(&[0, 1, 0, 0, 0, 1, 0])).is_err()
        );
    }
}
