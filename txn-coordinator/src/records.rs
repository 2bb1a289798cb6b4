//! The `__transaction_state` records, encoded as Kafka encodes them so that
//! Kafka's tools can read Ottla's log (and the reverse):
//!
//! - key: `int16` record type 0 (TransactionLogKey), then `transactional_id`
//!   as a classic `int16`-length string;
//! - value: `int16` version, then TransactionLogValue. Version 0 is classic;
//!   version 1 is flexible (compact lengths) and adds tagged fields: 0
//!   PreviousProducerId, 1 NextProducerId, 2 ClientTransactionVersion (3
//!   NextProducerEpoch in newer Kafka is read and ignored). Kafka writes v1
//!   only under transaction version 2, so Ottla writes v1 for transactions
//!   whose client uses it and v0 otherwise;
//! - a null value is a tombstone (an expired transactional id).

use std::collections::{BTreeMap, BTreeSet};

pub use ottla_coordinator_common::codec::DecodeError;
use ottla_coordinator_common::codec::{Reader, Writer};
use ottla_storage::manager::TopicPartition;

use super::state::TxnState;

const KEY_TYPE: i16 = 0;
const FLEXIBLE_VERSION: i16 = 1;
const TAG_PREVIOUS_PRODUCER_ID: u32 = 0;
const TAG_NEXT_PRODUCER_ID: u32 = 1;
const TAG_CLIENT_TRANSACTION_VERSION: u32 = 2;

/// One TransactionLogValue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnLogValue {
    pub producer_id: i64,
    pub previous_producer_id: i64,
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<TopicPartition>,
    pub last_update_timestamp: i64,
    pub start_timestamp: i64,
    /// ClientTransactionVersion (KIP-890): 2 when the client ends
    /// transactions with EndTxn v5+.
    pub client_transaction_version: i16,
}

pub fn encode_key(transactional_id: &str) -> Option<Vec<u8>> {
    let mut w = Writer::default();
    w.i16(KEY_TYPE).string(transactional_id);
    w.finish().ok()
}

/// The transactional id of a stored key; None for key types that are not
/// TransactionLogKey (Kafka skips those too).
pub fn decode_key(key: &[u8]) -> Result<Option<String>, DecodeError> {
    let mut r = Reader::new(key);
    if r.i16()? != KEY_TYPE {
        return Ok(None);
    }
    r.string().map(Some)
}

/// None when a field does not fit its length prefix.
pub fn encode_value(v: &TxnLogValue) -> Option<Vec<u8>> {
    let flexible = v.client_transaction_version >= 2;
    let mut w = Writer::default();
    w.i16(if flexible { FLEXIBLE_VERSION } else { 0 })
        .set_flexible(flexible)
        .i64(v.producer_id)
        .i16(v.producer_epoch)
        .i32(v.timeout_ms)
        .i8(v.state.id());
    // As Kafka: Empty carries a null partition list.
    if v.state == TxnState::Empty {
        w.array_len(None);
    } else {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for tp in &v.partitions {
            by_topic.entry(&tp.topic).or_default().push(tp.partition);
        }
        w.array_len(Some(by_topic.len()));
        for (topic, partitions) in by_topic {
            w.string(topic).array_len(Some(partitions.len()));
            for p in partitions {
                w.i32(p);
            }
            if flexible {
                w.tagged_fields(&[]);
            }
        }
    }
    w.i64(v.last_update_timestamp).i64(v.start_timestamp);
    if flexible {
        let previous = v.previous_producer_id.to_be_bytes();
        let next = v.next_producer_id.to_be_bytes();
        let client_version = v.client_transaction_version.to_be_bytes();
        let mut tagged: Vec<(u32, &[u8])> = Vec::new();
        if v.previous_producer_id != -1 {
            tagged.push((TAG_PREVIOUS_PRODUCER_ID, &previous));
        }
        if v.next_producer_id != -1 {
            tagged.push((TAG_NEXT_PRODUCER_ID, &next));
        }
        tagged.push((TAG_CLIENT_TRANSACTION_VERSION, &client_version));
        w.tagged_fields(&tagged);
    }
    w.finish().ok()
}

pub fn decode_value(value: &[u8]) -> Result<TxnLogValue, DecodeError> {
    let mut r = Reader::new(value);
    let version = r.i16()?;
    if !(0..=FLEXIBLE_VERSION).contains(&version) {
        return Err(DecodeError("unknown TransactionLogValue version"));
    }
    let flexible = version >= FLEXIBLE_VERSION;
    r.set_flexible(flexible);
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let timeout_ms = r.i32()?;
    let state = TxnState::from_id(r.i8()?).ok_or(DecodeError("unknown transaction state"))?;
    let mut partitions = BTreeSet::new();
    if let Some(topics) = r.nullable_array_len()? {
        for _ in 0..topics {
            let topic = r.string()?;
            for _ in 0..r.array_len()? {
                partitions.insert(TopicPartition::new(topic.clone(), r.i32()?));
            }
            r.skip_tagged_fields()?;
        }
    }
    let last_update_timestamp = r.i64()?;
    let start_timestamp = r.i64()?;
    let mut v = TxnLogValue {
        producer_id,
        previous_producer_id: -1,
        next_producer_id: -1,
        producer_epoch,
        timeout_ms,
        state,
        // Kafka reads partitions only for states other than Empty.
        partitions: if state == TxnState::Empty {
            BTreeSet::new()
        } else {
            partitions
        },
        last_update_timestamp,
        start_timestamp,
        client_transaction_version: 0,
    };
    if flexible {
        for (tag, data) in r.tagged_fields()? {
            let mut f = Reader::new(data);
            match tag {
                TAG_PREVIOUS_PRODUCER_ID => v.previous_producer_id = f.i64()?,
                TAG_NEXT_PRODUCER_ID => v.next_producer_id = f.i64()?,
                TAG_CLIENT_TRANSACTION_VERSION => v.client_transaction_version = f.i16()?,
                _ => {}
            }
        }
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(state: TxnState, tv: i16) -> TxnLogValue {
        TxnLogValue {
            producer_id: 1000,
            previous_producer_id: 999,
            next_producer_id: -1,
            producer_epoch: 3,
            timeout_ms: 60_000,
            state,
            partitions: [TopicPartition::new("a", 1), TopicPartition::new("a", 0)]
                .into_iter()
                .filter(|_| state != TxnState::Empty)
                .collect(),
            last_update_timestamp: 20,
            start_timestamp: 10,
            client_transaction_version: tv,
        }
    }

    #[test]
    fn key_matches_kafka_layout() {
        let key = encode_key("tx").unwrap();
        assert_eq!(key, [0, 0, 0, 2, b't', b'x']);
        assert_eq!(decode_key(&key).unwrap().as_deref(), Some("tx"));
        // Other coordinator record types are skipped.
        assert_eq!(decode_key(&[0, 1, 0, 0]).unwrap(), None);
    }

    #[test]
    fn version_0_matches_kafka_layout() {
        let bytes = encode_value(&value(TxnState::Ongoing, 0)).unwrap();
        let mut expected = vec![0, 0];
        expected.extend_from_slice(&1000i64.to_be_bytes());
        expected.extend_from_slice(&3i16.to_be_bytes());
        expected.extend_from_slice(&60_000i32.to_be_bytes());
        expected.push(1); // Ongoing
        expected.extend_from_slice(&1i32.to_be_bytes()); // one topic
        expected.extend_from_slice(&[0, 1, b'a']);
        expected.extend_from_slice(&2i32.to_be_bytes());
        expected.extend_from_slice(&0i32.to_be_bytes());
        expected.extend_from_slice(&1i32.to_be_bytes());
        expected.extend_from_slice(&20i64.to_be_bytes());
        expected.extend_from_slice(&10i64.to_be_bytes());
        assert_eq!(bytes, expected);
        let back = decode_value(&bytes).unwrap();
        // v0 has no previous producer id.
        assert_eq!(
            back,
            TxnLogValue {
                previous_producer_id: -1,
                ..value(TxnState::Ongoing, 0)
            }
        );
    }

    #[test]
    fn empty_state_writes_a_null_partition_list() {
        let bytes = encode_value(&value(TxnState::Empty, 0)).unwrap();
        assert_eq!(&bytes[17..21], &(-1i32).to_be_bytes());
        assert_eq!(decode_value(&bytes).unwrap().state, TxnState::Empty);
    }

    #[test]
    fn version_1_round_trips_tagged_fields() {
        let v = TxnLogValue {
            next_producer_id: 2000,
            ..value(TxnState::PrepareCommit, 2)
        };
        let bytes = encode_value(&v).unwrap();
        assert_eq!(&bytes[..2], &[0, 1]);
        assert_eq!(decode_value(&bytes).unwrap(), v);
    }

    #[test]
    fn reads_unknown_tags_and_refuses_garbage() {
        let mut bytes = encode_value(&value(TxnState::Ongoing, 2)).unwrap();
        // Replace the tagged fields (count, tag 0 with 8 bytes, tag 2 with
        // 2 bytes) with one unknown tag (3, NextProducerEpoch).
        let tags_at = bytes.len() - (1 + (2 + 8) + (2 + 2));
        bytes.truncate(tags_at);
        bytes.extend_from_slice(&[1, 3, 2, 0, 7]);
        let back = decode_value(&bytes).unwrap();
        assert_eq!(back.client_transaction_version, 0);
        assert!(decode_value(&[0, 9]).is_err());
        assert!(decode_value(&bytes[..10]).is_err());
    }
}
