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

use ottla_storage::manager::TopicPartition;

use super::state::TxnState;

const KEY_TYPE: i16 = 0;
const FLEXIBLE_VERSION: i16 = 1;
const TAG_PREVIOUS_PRODUCER_ID: u32 = 0;
const TAG_NEXT_PRODUCER_ID: u32 = 1;
const TAG_CLIENT_TRANSACTION_VERSION: u32 = 2;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed transaction log record: {0}")]
pub struct DecodeError(&'static str);

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
    let mut w = Vec::with_capacity(4 + transactional_id.len());
    w.extend_from_slice(&KEY_TYPE.to_be_bytes());
    put_string(&mut w, transactional_id, false)?;
    Some(w)
}

/// The transactional id of a stored key; None for key types that are not
/// TransactionLogKey (Kafka skips those too).
pub fn decode_key(key: &[u8]) -> Result<Option<String>, DecodeError> {
    let mut r = Reader::new(key, false);
    if r.i16()? != KEY_TYPE {
        return Ok(None);
    }
    r.string().map(Some)
}

/// None when a field does not fit its length prefix.
pub fn encode_value(v: &TxnLogValue) -> Option<Vec<u8>> {
    let flexible = v.client_transaction_version >= 2;
    let mut w = Vec::with_capacity(64);
    let version = if flexible { FLEXIBLE_VERSION } else { 0 };
    w.extend_from_slice(&version.to_be_bytes());
    w.extend_from_slice(&v.producer_id.to_be_bytes());
    w.extend_from_slice(&v.producer_epoch.to_be_bytes());
    w.extend_from_slice(&v.timeout_ms.to_be_bytes());
    w.push(v.state.id() as u8);
    // As Kafka: Empty carries a null partition list.
    if v.state == TxnState::Empty {
        put_len(&mut w, None, flexible);
    } else {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for tp in &v.partitions {
            by_topic.entry(&tp.topic).or_default().push(tp.partition);
        }
        put_len(&mut w, Some(by_topic.len()), flexible);
        for (topic, partitions) in by_topic {
            put_string(&mut w, topic, flexible)?;
            put_len(&mut w, Some(partitions.len()), flexible);
            for p in partitions {
                w.extend_from_slice(&p.to_be_bytes());
            }
            if flexible {
                w.push(0); // no tagged fields
            }
        }
    }
    w.extend_from_slice(&v.last_update_timestamp.to_be_bytes());
    w.extend_from_slice(&v.start_timestamp.to_be_bytes());
    if flexible {
        let mut tagged: Vec<(u32, Vec<u8>)> = Vec::new();
        if v.previous_producer_id != -1 {
            tagged.push((
                TAG_PREVIOUS_PRODUCER_ID,
                v.previous_producer_id.to_be_bytes().to_vec(),
            ));
        }
        if v.next_producer_id != -1 {
            tagged.push((
                TAG_NEXT_PRODUCER_ID,
                v.next_producer_id.to_be_bytes().to_vec(),
            ));
        }
        tagged.push((
            TAG_CLIENT_TRANSACTION_VERSION,
            v.client_transaction_version.to_be_bytes().to_vec(),
        ));
        put_uvarint(&mut w, tagged.len() as u32);
        for (tag, data) in tagged {
            put_uvarint(&mut w, tag);
            put_uvarint(&mut w, data.len() as u32);
            w.extend_from_slice(&data);
        }
    }
    Some(w)
}

pub fn decode_value(value: &[u8]) -> Result<TxnLogValue, DecodeError> {
    let mut r = Reader::new(value, false);
    let version = r.i16()?;
    if !(0..=FLEXIBLE_VERSION).contains(&version) {
        return Err(DecodeError("unknown TransactionLogValue version"));
    }
    r.flexible = version >= FLEXIBLE_VERSION;
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let timeout_ms = r.i32()?;
    let state =
        TxnState::from_id(r.take(1)?[0] as i8).ok_or(DecodeError("unknown transaction state"))?;
    let mut partitions = BTreeSet::new();
    if let Some(topics) = r.len()? {
        for _ in 0..topics {
            let topic = r.string()?;
            let count = r.len()?.ok_or(DecodeError("null partition list"))?;
            for _ in 0..count {
                partitions.insert(TopicPartition::new(topic.clone(), r.i32()?));
            }
            r.tagged_fields(|_, _| Ok(()))?;
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
    r.tagged_fields(|tag, data| {
        let mut f = Reader::new(data, false);
        match tag {
            TAG_PREVIOUS_PRODUCER_ID => v.previous_producer_id = f.i64()?,
            TAG_NEXT_PRODUCER_ID => v.next_producer_id = f.i64()?,
            TAG_CLIENT_TRANSACTION_VERSION => v.client_transaction_version = f.i16()?,
            _ => {}
        }
        Ok(())
    })?;
    Ok(v)
}

fn put_uvarint(w: &mut Vec<u8>, mut n: u32) {
    while n >= 0x80 {
        w.push((n as u8) | 0x80);
        n >>= 7;
    }
    w.push(n as u8);
}

/// An array length: `int32` (-1 null) or compact `uvarint` (n + 1, 0 null).
fn put_len(w: &mut Vec<u8>, n: Option<usize>, flexible: bool) {
    match (n, flexible) {
        (None, false) => w.extend_from_slice(&(-1i32).to_be_bytes()),
        (None, true) => w.push(0),
        (Some(n), false) => w.extend_from_slice(&(n as i32).to_be_bytes()),
        (Some(n), true) => put_uvarint(w, n as u32 + 1),
    }
}

fn put_string(w: &mut Vec<u8>, s: &str, flexible: bool) -> Option<()> {
    let n = i16::try_from(s.len()).ok()?;
    if flexible {
        put_uvarint(w, n as u32 + 1);
    } else {
        w.extend_from_slice(&n.to_be_bytes());
    }
    w.extend_from_slice(s.as_bytes());
    Some(())
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    flexible: bool,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8], flexible: bool) -> Self {
        Self {
            buf,
            pos: 0,
            flexible,
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or(DecodeError("truncated"))?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn i16(&mut self) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }

    fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    fn uvarint(&mut self) -> Result<u32, DecodeError> {
        let mut value = 0u32;
        for shift in (0..35).step_by(7) {
            let b = self.take(1)?[0];
            value |= u32::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError("varint too long"))
    }

    /// A string or array length; None for null.
    fn len(&mut self) -> Result<Option<usize>, DecodeError> {
        let n = if self.flexible {
            i64::from(self.uvarint()?) - 1
        } else {
            i64::from(self.i32()?)
        };
        Ok(usize::try_from(n).ok())
    }

    fn string(&mut self) -> Result<String, DecodeError> {
        let n = if self.flexible {
            i64::from(self.uvarint()?) - 1
        } else {
            i64::from(self.i16()?)
        };
        let n = usize::try_from(n).map_err(|_| DecodeError("null string"))?;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| DecodeError("string is not UTF-8"))
    }

    /// Visits a flexible struct's tagged fields; a no-op for classic versions.
    fn tagged_fields(
        &mut self,
        mut visit: impl FnMut(u32, &[u8]) -> Result<(), DecodeError>,
    ) -> Result<(), DecodeError> {
        if !self.flexible {
            return Ok(());
        }
        for _ in 0..self.uvarint()? {
            let tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            visit(tag, self.take(size)?)?;
        }
        Ok(())
    }
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
