//! The `__consumer_offsets` records, encoded as Kafka encodes them so that
//! Kafka's tools can read Ottla's log (and the reverse). Each record's key and
//! value start with an `int16` schema version:
//!
//! - key version 0 or 1: OffsetCommitKey `group, topic, partition`;
//!   value versions 0-4 (Kafka writes 3, or 1 when an expire timestamp is set);
//! - key version 2: GroupMetadataKey `group`; value versions 0-4 (Kafka writes 3);
//! - a null value is a tombstone.
//!
//! - key versions 3-8 and 16: the consumer protocol's records (KIP-848), in
//!   `consumer_records`.
//!
//! - key versions 17-23: the streams group records (KIP-1071), in
//!   `streams_records`.
//!
//! - key versions 10-15: the share group records (KIP-932), in
//!   `share_records`.
//!
//! Other key versions are skipped on load.

use bytes::Bytes;
use ottla_protocol::schema::wire::WireField;
use ottla_protocol::schema::{decode_body, encode_body};

use super::codec::{DecodeError, DecodeResult, FieldTooLong, Reader, Writer};
use super::consumer_records::ConsumerRecord;
use super::share_records::ShareRecord;
use super::streams_records::StreamsRecord;

const OFFSET_COMMIT_KEY_VERSION: i16 = 1;
const GROUP_METADATA_KEY_VERSION: i16 = 2;
const OFFSET_COMMIT_VALUE_VERSION: i16 = 3;
/// The only version with an expire timestamp (OffsetCommit v2-4 retention).
const OFFSET_COMMIT_VALUE_WITH_EXPIRY: i16 = 1;
const GROUP_METADATA_VALUE_VERSION: i16 = 3;
/// Both values became flexible at version 4.
const FIRST_FLEXIBLE_VALUE_VERSION: i16 = 4;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitValue {
    pub offset: i64,
    /// -1 when unknown.
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
    pub expire_timestamp: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberMetadata {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout: i32,
    pub session_timeout: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataValue {
    /// "" when the group has none (Kafka writes "" rather than null).
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    /// -1 when unknown.
    pub current_state_timestamp: i64,
    pub members: Vec<MemberMetadata>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoordinatorRecord {
    OffsetCommit {
        group: String,
        topic: String,
        partition: i32,
        value: Option<OffsetCommitValue>,
    },
    GroupMetadata {
        group: String,
        value: Option<GroupMetadataValue>,
    },
    Consumer(ConsumerRecord),
    Streams(StreamsRecord),
    Share(ShareRecord),
}

impl CoordinatorRecord {
    /// The record's key and value bytes (None for a tombstone).
    pub fn encode(&self) -> Result<(Vec<u8>, Option<Vec<u8>>), FieldTooLong> {
        let mut key = Writer::default();
        match self {
            Self::OffsetCommit {
                group,
                topic,
                partition,
                value,
            } => {
                key.i16(OFFSET_COMMIT_KEY_VERSION)
                    .string(group)
                    .string(topic)
                    .i32(*partition);
                Ok((
                    key.finish()?,
                    value.as_ref().map(encode_offset_commit).transpose()?,
                ))
            }
            Self::GroupMetadata { group, value } => {
                key.i16(GROUP_METADATA_KEY_VERSION).string(group);
                Ok((
                    key.finish()?,
                    value.as_ref().map(encode_group_metadata).transpose()?,
                ))
            }
            Self::Consumer(r) => r.encode(),
            Self::Streams(r) => r.encode(),
            Self::Share(r) => r.encode(),
        }
    }

    /// Decodes a stored record; Ok(None) for record types this coordinator
    /// does not handle.
    pub fn decode(key: &[u8], value: Option<&[u8]>) -> DecodeResult<Option<Self>> {
        let mut k = Reader::new(key);
        match k.i16()? {
            0 | 1 => {
                let group = k.string()?;
                let topic = k.string()?;
                let partition = k.i32()?;
                let value = value.map(decode_offset_commit).transpose()?;
                Ok(Some(Self::OffsetCommit {
                    group,
                    topic,
                    partition,
                    value,
                }))
            }
            GROUP_METADATA_KEY_VERSION => {
                let group = k.string()?;
                let value = value.map(decode_group_metadata).transpose()?;
                Ok(Some(Self::GroupMetadata { group, value }))
            }
            t if ConsumerRecord::is_consumer_type(t) => {
                Ok(ConsumerRecord::decode(t, &mut k, value)?.map(Self::Consumer))
            }
            t if StreamsRecord::is_streams_type(t) => {
                Ok(StreamsRecord::decode(t, &mut k, value)?.map(Self::Streams))
            }
            t if ShareRecord::is_share_type(t) => {
                Ok(ShareRecord::decode(t, &mut k, value)?.map(Self::Share))
            }
            _ => Ok(None),
        }
    }
}

/// The one value version of the streams and share group records.
const MODERN_VALUE_VERSION: i16 = 0;

/// A streams or share group record's value: version 0 of its flexible
/// schema, after the `int16` version.
pub(super) fn encode_value<T: WireField>(value: &T) -> Result<Vec<u8>, FieldTooLong> {
    let body = encode_body(value, "group record", 0..=0, 0).map_err(|_| FieldTooLong)?;
    let mut bytes = MODERN_VALUE_VERSION.to_be_bytes().to_vec();
    bytes.extend_from_slice(&body);
    Ok(bytes)
}

pub(super) fn decode_value<T: WireField>(bytes: &[u8]) -> DecodeResult<T> {
    let mut r = Reader::new(bytes);
    if r.i16()? != MODERN_VALUE_VERSION {
        return Err(DecodeError("unknown group record value version"));
    }
    decode_body(&bytes[2..], "group record", 0..=0, 0)
        .map_err(|_| DecodeError("malformed group record value"))
}

fn encode_offset_commit(v: &OffsetCommitValue) -> Result<Vec<u8>, FieldTooLong> {
    let mut w = Writer::default();
    match v.expire_timestamp {
        Some(expire) => {
            w.i16(OFFSET_COMMIT_VALUE_WITH_EXPIRY)
                .i64(v.offset)
                .string(&v.metadata)
                .i64(v.commit_timestamp)
                .i64(expire);
        }
        None => {
            w.i16(OFFSET_COMMIT_VALUE_VERSION)
                .i64(v.offset)
                .i32(v.leader_epoch)
                .string(&v.metadata)
                .i64(v.commit_timestamp);
        }
    }
    w.finish()
}

fn decode_offset_commit(buf: &[u8]) -> DecodeResult<OffsetCommitValue> {
    let mut r = Reader::new(buf);
    let version = r.i16()?;
    if !(0..=FIRST_FLEXIBLE_VALUE_VERSION).contains(&version) {
        return Err(DecodeError("unknown OffsetCommitValue version"));
    }
    r.set_flexible(version >= FIRST_FLEXIBLE_VALUE_VERSION);
    let offset = r.i64()?;
    let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
    let metadata = r.string()?;
    let commit_timestamp = r.i64()?;
    let expire_timestamp = if version == 1 { Some(r.i64()?) } else { None };
    r.skip_tagged_fields()?;
    Ok(OffsetCommitValue {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp,
        expire_timestamp,
    })
}

fn encode_group_metadata(v: &GroupMetadataValue) -> Result<Vec<u8>, FieldTooLong> {
    let mut w = Writer::default();
    w.i16(GROUP_METADATA_VALUE_VERSION)
        .string(&v.protocol_type)
        .i32(v.generation)
        .nullable_string(v.protocol.as_deref())
        .nullable_string(v.leader.as_deref())
        .i64(v.current_state_timestamp)
        .i32(v.members.len() as i32);
    for m in &v.members {
        w.string(&m.member_id)
            .nullable_string(m.group_instance_id.as_deref())
            .string(&m.client_id)
            .string(&m.client_host)
            .i32(m.rebalance_timeout)
            .i32(m.session_timeout)
            .bytes(&m.subscription)
            .bytes(&m.assignment);
    }
    w.finish()
}

fn decode_group_metadata(buf: &[u8]) -> DecodeResult<GroupMetadataValue> {
    let mut r = Reader::new(buf);
    let version = r.i16()?;
    if !(0..=FIRST_FLEXIBLE_VALUE_VERSION).contains(&version) {
        return Err(DecodeError("unknown GroupMetadataValue version"));
    }
    r.set_flexible(version >= FIRST_FLEXIBLE_VALUE_VERSION);
    let protocol_type = r.string()?;
    let generation = r.i32()?;
    let protocol = r.nullable_string()?;
    let leader = r.nullable_string()?;
    let current_state_timestamp = if version >= 2 { r.i64()? } else { -1 };
    let count = r.array_len()?;
    let mut members = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let member_id = r.string()?;
        let group_instance_id = if version >= 3 {
            r.nullable_string()?
        } else {
            None
        };
        let client_id = r.string()?;
        let client_host = r.string()?;
        // Version 0 has no rebalance timeout; Kafka then uses the session timeout.
        let rebalance_timeout = if version >= 1 { Some(r.i32()?) } else { None };
        let session_timeout = r.i32()?;
        let subscription = r.bytes()?;
        let assignment = r.bytes()?;
        r.skip_tagged_fields()?;
        members.push(MemberMetadata {
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout: rebalance_timeout.unwrap_or(session_timeout),
            session_timeout,
            subscription,
            assignment,
        });
    }
    r.skip_tagged_fields()?;
    Ok(GroupMetadataValue {
        protocol_type,
        generation,
        protocol,
        leader,
        current_state_timestamp,
        members,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offset_value(expire: Option<i64>) -> OffsetCommitValue {
        OffsetCommitValue {
            offset: 42,
            leader_epoch: if expire.is_some() { -1 } else { 5 },
            metadata: "meta".into(),
            commit_timestamp: 1_700_000_000_000,
            expire_timestamp: expire,
        }
    }

    #[test]
    fn offset_commit_matches_kafka_layout() {
        let rec = CoordinatorRecord::OffsetCommit {
            group: "g".into(),
            topic: "t".into(),
            partition: 3,
            value: Some(offset_value(None)),
        };
        let (key, value) = rec.encode().unwrap();
        assert_eq!(key, [0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 3]);
        let value = value.unwrap();
        let mut expected = vec![0, 3];
        expected.extend_from_slice(&42i64.to_be_bytes());
        expected.extend_from_slice(&5i32.to_be_bytes());
        expected.extend_from_slice(&[0, 4]);
        expected.extend_from_slice(b"meta");
        expected.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
        assert_eq!(value, expected);
        assert_eq!(
            CoordinatorRecord::decode(&key, Some(&value)).unwrap(),
            Some(rec)
        );
    }

    #[test]
    fn offset_commit_with_expiry_uses_version_1() {
        let rec = CoordinatorRecord::OffsetCommit {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
            value: Some(offset_value(Some(99))),
        };
        let (key, value) = rec.encode().unwrap();
        let value = value.unwrap();
        assert_eq!(&value[..2], &[0, 1]);
        assert_eq!(
            CoordinatorRecord::decode(&key, Some(&value)).unwrap(),
            Some(rec)
        );
    }

    #[test]
    fn group_metadata_round_trips_and_tombstones() {
        let rec = CoordinatorRecord::GroupMetadata {
            group: "grp".into(),
            value: Some(GroupMetadataValue {
                protocol_type: "consumer".into(),
                generation: 4,
                protocol: Some("range".into()),
                leader: Some("m1".into()),
                current_state_timestamp: 17,
                members: vec![MemberMetadata {
                    member_id: "m1".into(),
                    group_instance_id: Some("i1".into()),
                    client_id: "c".into(),
                    client_host: "/127.0.0.1".into(),
                    rebalance_timeout: 300_000,
                    session_timeout: 45_000,
                    subscription: Bytes::from_static(b"sub"),
                    assignment: Bytes::from_static(b"asg"),
                }],
            }),
        };
        let (key, value) = rec.encode().unwrap();
        assert_eq!(key, [0, 2, 0, 3, b'g', b'r', b'p']);
        let value = value.unwrap();
        assert_eq!(&value[..2], &[0, 3]);
        assert_eq!(
            CoordinatorRecord::decode(&key, Some(&value)).unwrap(),
            Some(rec)
        );
        let tombstone = CoordinatorRecord::decode(&key, None).unwrap();
        assert_eq!(
            tombstone,
            Some(CoordinatorRecord::GroupMetadata {
                group: "grp".into(),
                value: None
            })
        );
    }

    #[test]
    fn decodes_flexible_offset_commit_value() {
        let mut v = vec![0, 4];
        v.extend_from_slice(&7i64.to_be_bytes());
        v.extend_from_slice(&(-1i32).to_be_bytes());
        v.extend_from_slice(&[2, b'm']); // compact string "m"
        v.extend_from_slice(&9i64.to_be_bytes());
        v.push(0); // no tagged fields
        let got = decode_offset_commit(&v).unwrap();
        assert_eq!(
            (
                got.offset,
                got.leader_epoch,
                got.metadata.as_str(),
                got.commit_timestamp
            ),
            (7, -1, "m", 9)
        );
    }

    #[test]
    fn skips_other_record_types() {
        // Key version 9 is ShareGroupPartitionMetadataKey (KIP-932).
        assert_eq!(
            CoordinatorRecord::decode(&[0, 9, 0, 1, b'g'], Some(&[0, 0])).unwrap(),
            None
        );
    }
}
