//! The records of the compacted `__mirror_state` topic, in the layout of
//! Kafka's coordinator records: a key is an int16 record type followed by the
//! key fields, a value an int16 value version followed by the value fields;
//! a null value is a tombstone (DeleteMirror writes one per key). Fields use
//! the flexible encoding of the mirror APIs (compact strings, a tagged-field
//! section per struct; unknown tagged fields are kept).
//!
//! ```json
//! { "type": "coordinator-key", "name": "MirrorPartitionStateKey", "recordType": 0,
//!   "fields": [
//!     { "name": "MirrorName", "type": "string", "about": "The mirror." },
//!     { "name": "TopicId", "type": "uuid", "about": "The mirrored topic's id." },
//!     { "name": "Partition", "type": "int32", "about": "The partition index." }
//!   ] }
//! { "type": "coordinator-value", "name": "MirrorPartitionStateValue", "validVersions": "0",
//!   "fields": [
//!     { "name": "State", "type": "int8", "about": "The partition state (wire values of protocol::mirror)." },
//!     { "name": "PreviousState", "type": "int8", "about": "The state before it (16 = UNKNOWN)." },
//!     { "name": "LeaderEpoch", "type": "int32",
//!       "about": "The mirror partition's leader epoch when written; older writes are fenced." },
//!     { "name": "ErrorMessage", "type": "string", "nullableVersions": "0+",
//!       "about": "Why the partition FAILED, else null." },
//!     { "name": "Failover", "type": "FailoverSummary", "taggedVersions": "0+", "tag": 0,
//!       "about": "With STOPPED: what failover did (DescribeMirrors' schema)." }
//!   ] }
//! { "type": "coordinator-key", "name": "LastMirroredEpochKey", "recordType": 1,
//!   "fields": [ MirrorName, TopicId, Partition as above ] }
//! { "type": "coordinator-value", "name": "LastMirroredEpochValue", "validVersions": "0",
//!   "fields": [
//!     { "name": "LeaderEpoch", "type": "int32", "about": "The writer's leader epoch, for fencing." },
//!     { "name": "LastMirroredEpoch", "type": "int32",
//!       "about": "The latest leader epoch in the partition's log when it stopped mirroring." }
//!   ] }
//! ```
//!
//! Both records of one mirror partition live in the `__mirror_state`
//! partition [`MirrorPartitionKey::state_partition`] picks.

use std::num::NonZeroU32;

use ottla_protocol::mirror::admin::FailoverSummary;
use ottla_protocol::schema::wire::{
    DecodeError, EncodeError, Reader, UnknownTaggedFields, WireField, Writer,
};
use thiserror::Error;
use uuid::Uuid;

use crate::partitioning::mirror_state_partition;
use crate::state::{MirrorPartitionState, UnknownStateValue};

const PARTITION_STATE_RECORD: i16 = 0;
const LAST_MIRRORED_EPOCH_RECORD: i16 = 1;
const VALUE_VERSION: i16 = 0;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RecordError {
    #[error("malformed __mirror_state record: {0}")]
    Malformed(#[from] DecodeError),
    #[error("unknown __mirror_state record type {0}")]
    UnknownRecordType(i16),
    #[error("__mirror_state value version {version} of record type {record_type} is newer than this broker knows ({VALUE_VERSION})")]
    UnknownValueVersion { record_type: i16, version: i16 },
    #[error("a {0} value cannot belong to a {1} key")]
    KeyValueMismatch(&'static str, &'static str),
    #[error(transparent)]
    UnknownState(#[from] UnknownStateValue),
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

/// The identity of one mirror partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MirrorPartitionKey {
    pub mirror_name: String,
    pub topic_id: Uuid,
    pub partition: i32,
}

impl MirrorPartitionKey {
    /// The `__mirror_state` partition holding this partition's records.
    pub fn state_partition(&self, num_partitions: NonZeroU32) -> i32 {
        mirror_state_partition(
            &self.mirror_name,
            &self.topic_id,
            self.partition,
            num_partitions,
        )
    }

    fn write(&self, w: &mut Writer) -> Result<(), EncodeError> {
        self.mirror_name.write(w)?;
        self.topic_id.write(w)?;
        self.partition.write(w)?;
        UnknownTaggedFields::default().write(w)
    }

    fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let key = Self {
            mirror_name: String::read(r).map_err(|e| e.at("MirrorStateKey.MirrorName"))?,
            topic_id: Uuid::read(r).map_err(|e| e.at("MirrorStateKey.TopicId"))?,
            partition: i32::read(r).map_err(|e| e.at("MirrorStateKey.Partition"))?,
        };
        // Keys are compared byte for byte by compaction, so a key with tagged
        // fields would be a different key; they are read and not kept.
        UnknownTaggedFields::read(r).map_err(|e| e.at("MirrorStateKey.tagged_fields"))?;
        Ok(key)
    }
}

/// A `__mirror_state` record key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MirrorStateKey {
    PartitionState(MirrorPartitionKey),
    LastMirroredEpoch(MirrorPartitionKey),
}

impl MirrorStateKey {
    fn record_type(&self) -> i16 {
        match self {
            Self::PartitionState(_) => PARTITION_STATE_RECORD,
            Self::LastMirroredEpoch(_) => LAST_MIRRORED_EPOCH_RECORD,
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            Self::PartitionState(_) => "MirrorPartitionState",
            Self::LastMirroredEpoch(_) => "LastMirroredEpoch",
        }
    }

    pub fn partition_key(&self) -> &MirrorPartitionKey {
        match self {
            Self::PartitionState(key) | Self::LastMirroredEpoch(key) => key,
        }
    }

    pub fn encode(&self) -> Result<Vec<u8>, RecordError> {
        let mut w = Writer::new();
        w.i16(self.record_type());
        self.partition_key().write(&mut w)?;
        Ok(w.into_bytes().to_vec())
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, RecordError> {
        let mut r = Reader::new(bytes);
        let record_type = r.i16()?;
        let key = match record_type {
            PARTITION_STATE_RECORD => Self::PartitionState(MirrorPartitionKey::read(&mut r)?),
            LAST_MIRRORED_EPOCH_RECORD => {
                Self::LastMirroredEpoch(MirrorPartitionKey::read(&mut r)?)
            }
            other => return Err(RecordError::UnknownRecordType(other)),
        };
        r.finish()?;
        Ok(key)
    }

    /// Decodes `value` as this key's value type; `None` is a tombstone.
    pub fn decode_value(
        &self,
        value: Option<&[u8]>,
    ) -> Result<Option<MirrorStateValue>, RecordError> {
        let Some(bytes) = value else {
            return Ok(None);
        };
        let mut r = Reader::new(bytes);
        let version = r.i16()?;
        if version != VALUE_VERSION {
            // A newer value cannot be interpreted; refusing keeps a stale
            // reading from driving the state machine.
            return Err(RecordError::UnknownValueVersion {
                record_type: self.record_type(),
                version,
            });
        }
        let value = match self {
            Self::PartitionState(_) => {
                MirrorStateValue::PartitionState(PartitionStateValue::read(&mut r)?)
            }
            Self::LastMirroredEpoch(_) => {
                MirrorStateValue::LastMirroredEpoch(LastMirroredEpochValue::read(&mut r)?)
            }
        };
        r.finish()?;
        Ok(Some(value))
    }

    /// Encodes `value` for this key, refusing a value of the other type.
    pub fn encode_value(&self, value: &MirrorStateValue) -> Result<Vec<u8>, RecordError> {
        let mut w = Writer::new();
        w.i16(VALUE_VERSION);
        match (self, value) {
            (Self::PartitionState(_), MirrorStateValue::PartitionState(v)) => v.write(&mut w)?,
            (Self::LastMirroredEpoch(_), MirrorStateValue::LastMirroredEpoch(v)) => {
                v.write(&mut w)?
            }
            _ => {
                return Err(RecordError::KeyValueMismatch(
                    value.type_name(),
                    self.type_name(),
                ))
            }
        }
        Ok(w.into_bytes().to_vec())
    }
}

/// A `__mirror_state` record value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MirrorStateValue {
    PartitionState(PartitionStateValue),
    LastMirroredEpoch(LastMirroredEpochValue),
}

impl MirrorStateValue {
    fn type_name(&self) -> &'static str {
        match self {
            Self::PartitionState(_) => "MirrorPartitionState",
            Self::LastMirroredEpoch(_) => "LastMirroredEpoch",
        }
    }
}

/// A mirror partition's persisted state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionStateValue {
    pub state: MirrorPartitionState,
    pub previous_state: MirrorPartitionState,
    pub leader_epoch: i32,
    pub error_message: Option<String>,
    pub unknown_tagged_fields: UnknownTaggedFields,
}

/// PartitionStateValue's tagged field Failover.
const FAILOVER_TAG: u32 = 0;

impl PartitionStateValue {
    /// What failover did, stored with STOPPED.
    pub fn failover(&self) -> Option<FailoverSummary> {
        self.unknown_tagged_fields.get_field(FAILOVER_TAG)
    }

    pub fn with_failover(mut self, failover: Option<&FailoverSummary>) -> Self {
        let _ = self.unknown_tagged_fields.set_field(FAILOVER_TAG, failover);
        self
    }

    fn write(&self, w: &mut Writer) -> Result<(), EncodeError> {
        w.i8(self.state.wire_value());
        w.i8(self.previous_state.wire_value());
        w.i32(self.leader_epoch);
        self.error_message.write(w)?;
        self.unknown_tagged_fields.write(w)
    }

    fn read(r: &mut Reader<'_>) -> Result<Self, RecordError> {
        let state = r
            .i8()
            .map_err(|e| e.at("MirrorPartitionStateValue.State"))?;
        let previous = r
            .i8()
            .map_err(|e| e.at("MirrorPartitionStateValue.PreviousState"))?;
        Ok(Self {
            state: MirrorPartitionState::from_wire_value(state)?,
            previous_state: MirrorPartitionState::from_wire_value(previous)?,
            leader_epoch: r
                .i32()
                .map_err(|e| e.at("MirrorPartitionStateValue.LeaderEpoch"))?,
            error_message: Option::<String>::read(r)
                .map_err(|e| e.at("MirrorPartitionStateValue.ErrorMessage"))?,
            unknown_tagged_fields: UnknownTaggedFields::read(r)
                .map_err(|e| e.at("MirrorPartitionStateValue.tagged_fields"))?,
        })
    }
}

/// The last leader epoch a partition mirrored before it stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastMirroredEpochValue {
    pub leader_epoch: i32,
    pub last_mirrored_epoch: i32,
    pub unknown_tagged_fields: UnknownTaggedFields,
}

impl LastMirroredEpochValue {
    fn write(&self, w: &mut Writer) -> Result<(), EncodeError> {
        w.i32(self.leader_epoch);
        w.i32(self.last_mirrored_epoch);
        self.unknown_tagged_fields.write(w)
    }

    fn read(r: &mut Reader<'_>) -> Result<Self, RecordError> {
        Ok(Self {
            leader_epoch: r
                .i32()
                .map_err(|e| e.at("LastMirroredEpochValue.LeaderEpoch"))?,
            last_mirrored_epoch: r
                .i32()
                .map_err(|e| e.at("LastMirroredEpochValue.LastMirroredEpoch"))?,
            unknown_tagged_fields: UnknownTaggedFields::read(r)
                .map_err(|e| e.at("LastMirroredEpochValue.tagged_fields"))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use ottla_protocol::schema::wire::RawTaggedField;
    use proptest::prelude::*;

    use super::*;

    fn key(mirror_name: &str, topic_id: u128, partition: i32) -> MirrorPartitionKey {
        MirrorPartitionKey {
            mirror_name: mirror_name.into(),
            topic_id: Uuid::from_u128(topic_id),
            partition,
        }
    }

    #[test]
    fn key_layout_is_type_then_fields() {
        let encoded = MirrorStateKey::LastMirroredEpoch(key("dr", 1, 3))
            .encode()
            .unwrap();
        let mut expected = vec![0, 1, 3, b'd', b'r'];
        expected.extend([0; 15]);
        expected.extend([1, 0, 0, 0, 3, 0]);
        assert_eq!(encoded, expected);
    }

    #[test]
    fn values_round_trip_with_their_keys() {
        let state_key = MirrorStateKey::PartitionState(key("dr", 7, 0));
        let state = MirrorStateValue::PartitionState(PartitionStateValue {
            state: MirrorPartitionState::Failed,
            previous_state: MirrorPartitionState::Mirroring,
            leader_epoch: 4,
            error_message: Some("corrupt batch at offset 17".into()),
            unknown_tagged_fields: UnknownTaggedFields(vec![RawTaggedField {
                tag: 3,
                data: vec![9],
            }]),
        });
        let bytes = state_key.encode_value(&state).unwrap();
        assert_eq!(
            state_key.decode_value(Some(&bytes)).unwrap(),
            Some(state.clone())
        );

        let lme_key = MirrorStateKey::LastMirroredEpoch(key("dr", 7, 0));
        let lme = MirrorStateValue::LastMirroredEpoch(LastMirroredEpochValue {
            leader_epoch: 5,
            last_mirrored_epoch: 12,
            unknown_tagged_fields: UnknownTaggedFields::default(),
        });
        let bytes = lme_key.encode_value(&lme).unwrap();
        assert_eq!(bytes, [0, 0, 0, 0, 0, 5, 0, 0, 0, 12, 0]);
        assert_eq!(
            lme_key.decode_value(Some(&bytes)).unwrap(),
            Some(lme.clone())
        );

        assert!(matches!(
            lme_key.encode_value(&state),
            Err(RecordError::KeyValueMismatch(..))
        ));
        assert_eq!(lme_key.decode_value(None).unwrap(), None);
    }

    #[test]
    fn unknown_types_versions_and_states_are_refused() {
        let mut bytes = MirrorStateKey::PartitionState(key("dr", 1, 0))
            .encode()
            .unwrap();
        bytes[1] = 9;
        assert_eq!(
            MirrorStateKey::decode(&bytes),
            Err(RecordError::UnknownRecordType(9))
        );

        let state_key = MirrorStateKey::PartitionState(key("dr", 1, 0));
        assert!(matches!(
            state_key.decode_value(Some(&[0, 1, 2, 16, 0, 0, 0, 0, 0, 0])),
            Err(RecordError::UnknownValueVersion {
                record_type: 0,
                version: 1
            })
        ));
        assert_eq!(
            state_key.decode_value(Some(&[0, 0, 1, 16, 0, 0, 0, 0, 0, 0])),
            Err(RecordError::UnknownState(UnknownStateValue(1)))
        );
        assert!(matches!(
            state_key.decode_value(Some(&[0, 0, 2, 16, 0, 0, 0])),
            Err(RecordError::Malformed(_))
        ));
    }

    #[test]
    fn both_records_of_a_partition_share_a_state_partition() {
        let n = NonZeroU32::new(50).unwrap();
        let state = MirrorStateKey::PartitionState(key("dr", 99, 4));
        let lme = MirrorStateKey::LastMirroredEpoch(key("dr", 99, 4));
        assert_eq!(
            state.partition_key().state_partition(n),
            lme.partition_key().state_partition(n)
        );
    }

    proptest! {
        #[test]
        fn keys_round_trip(name in "\\PC{0,20}", id in any::<u128>(), partition in any::<i32>(), lme in any::<bool>()) {
            let k = key(&name, id, partition);
            let record = if lme { MirrorStateKey::LastMirroredEpoch(k) } else { MirrorStateKey::PartitionState(k) };
            let bytes = record.encode().unwrap();
            prop_assert_eq!(MirrorStateKey::decode(&bytes).unwrap(), record);
            for len in 0..bytes.len() {
                prop_assert!(MirrorStateKey::decode(&bytes[..len]).is_err());
            }
        }

        #[test]
        fn state_values_round_trip(
            state in proptest::sample::select(MirrorPartitionState::ALL.to_vec()),
            previous in proptest::sample::select(MirrorPartitionState::ALL.to_vec()),
            leader_epoch in any::<i32>(),
            error_message in proptest::option::of("\\PC{0,30}"),
        ) {
            let k = MirrorStateKey::PartitionState(key("dr", 1, 0));
            let value = MirrorStateValue::PartitionState(PartitionStateValue {
                state,
                previous_state: previous,
                leader_epoch,
                error_message,
                unknown_tagged_fields: UnknownTaggedFields::default(),
            });
            let bytes = k.encode_value(&value).unwrap();
            prop_assert_eq!(k.decode_value(Some(&bytes)).unwrap(), Some(value));
            for len in 0..bytes.len() {
                prop_assert!(k.decode_value(Some(&bytes[..len])).is_err());
            }
        }

        #[test]
        fn arbitrary_value_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let k = MirrorStateKey::PartitionState(key("dr", 1, 0));
            let _ = k.decode_value(Some(&bytes));
            let _ = MirrorStateKey::decode(&bytes);
        }
    }
}
