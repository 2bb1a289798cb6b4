//! Zero-copy views over Kafka v2 record batches (magic 2).
//!
//! The 61-byte batch header is parsed by hand: kafka-protocol's records module
//! re-encodes batches (collapsing duplicate header keys) and does not expose
//! `lastOffsetDelta` or `maxTimestamp`, both of which the log needs.
//!
//! Layout (big-endian):
//! ```text
//!  0 baseOffset i64        8 batchLength i32      12 partitionLeaderEpoch i32
//! 16 magic i8             17 crc u32              21 attributes i16
//! 23 lastOffsetDelta i32  27 baseTimestamp i64    35 maxTimestamp i64
//! 43 producerId i64       51 producerEpoch i16    53 baseSequence i32
//! 57 recordCount i32      61 records...
//! ```
//! The CRC-32C covers bytes 21.. to the end, so baseOffset and the leader epoch
//! can be rewritten in place without recomputing it.

use thiserror::Error;

pub const BATCH_HEADER_LEN: usize = 61;
/// Bytes before `batchLength` counts: baseOffset + batchLength.
pub const LOG_OVERHEAD: usize = 12;
pub const MAGIC_V2: i8 = 2;
pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_SEQUENCE: i32 = -1;
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;

const OFF_BASE_OFFSET: usize = 0;
const OFF_LENGTH: usize = 8;
const OFF_LEADER_EPOCH: usize = 12;
const OFF_MAGIC: usize = 16;
const OFF_CRC: usize = 17;
const OFF_ATTRIBUTES: usize = 21;
const OFF_LAST_OFFSET_DELTA: usize = 23;
const OFF_BASE_TIMESTAMP: usize = 27;
const OFF_MAX_TIMESTAMP: usize = 35;
const OFF_PRODUCER_ID: usize = 43;
const OFF_PRODUCER_EPOCH: usize = 51;
const OFF_BASE_SEQUENCE: usize = 53;
const OFF_RECORD_COUNT: usize = 57;

const ATTR_COMPRESSION_MASK: i16 = 0x07;
const ATTR_TIMESTAMP_TYPE: i16 = 0x08;
const ATTR_TRANSACTIONAL: i16 = 0x10;
const ATTR_CONTROL: i16 = 0x20;
const ATTR_DELETE_HORIZON: i16 = 0x40;

/// Why a batch was refused. The broker maps these to Kafka error codes.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum BatchError {
    #[error("record batch truncated: need {needed} bytes, have {available}")]
    Truncated { needed: usize, available: usize },
    #[error("record batch length {0} is invalid")]
    InvalidLength(i32),
    #[error("unsupported record batch magic {0} (only v2 is accepted)")]
    UnsupportedMagic(i8),
    #[error("record batch CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("record batch is invalid: {0}")]
    Invalid(&'static str),
}

/// Compression codec ids as carried in the attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    pub fn from_id(id: i16) -> Option<Self> {
        Some(match id {
            0 => Self::None,
            1 => Self::Gzip,
            2 => Self::Snappy,
            3 => Self::Lz4,
            4 => Self::Zstd,
            _ => return None,
        })
    }
}

/// Timestamp type bit of the attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

/// Control record types (the key of a control record is `version i16, type i16`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlType {
    Abort,
    Commit,
    /// Ottla's failover barrier (KIP-1279 MIRROR_PID_RESET): expires all producer
    /// state derived from mirrored data. Kafka's own types stop at 6 (KRAFT_VOTERS).
    MirrorPidReset,
    Other(i16),
}

impl ControlType {
    pub const ABORT: i16 = 0;
    pub const COMMIT: i16 = 1;
    pub const MIRROR_PID_RESET: i16 = 100;

    pub fn from_code(code: i16) -> Self {
        match code {
            Self::ABORT => Self::Abort,
            Self::COMMIT => Self::Commit,
            Self::MIRROR_PID_RESET => Self::MirrorPidReset,
            other => Self::Other(other),
        }
    }

    pub fn code(self) -> i16 {
        match self {
            Self::Abort => Self::ABORT,
            Self::Commit => Self::COMMIT,
            Self::MirrorPidReset => Self::MIRROR_PID_RESET,
            Self::Other(c) => c,
        }
    }
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Reads `batchLength` of the batch starting at `buf[0]` and returns the batch's
/// total size in bytes, or `None` if fewer than 12 bytes are available.
pub fn batch_size_at(buf: &[u8]) -> Option<Result<usize, BatchError>> {
    if buf.len() < LOG_OVERHEAD {
        return None;
    }
    let len = be_i32(buf, OFF_LENGTH);
    let min = (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32;
    if len < min {
        return Some(Err(BatchError::InvalidLength(len)));
    }
    Some(Ok(LOG_OVERHEAD + len as usize))
}

/// A read-only view of exactly one record batch.
#[derive(Clone, Copy)]
pub struct BatchView<'a> {
    bytes: &'a [u8],
}

impl std::fmt::Debug for BatchView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchView")
            .field("base_offset", &self.base_offset())
            .field("last_offset", &self.last_offset())
            .field("leader_epoch", &self.partition_leader_epoch())
            .field("size", &self.size())
            .finish()
    }
}

impl<'a> BatchView<'a> {
    /// Views the batch at the start of `buf`, checking only that the header and
    /// the whole declared length are present and the magic is 2. `buf` may hold
    /// more bytes after the batch.
    pub fn parse(buf: &'a [u8]) -> Result<Self, BatchError> {
        let size = match batch_size_at(buf) {
            None => {
                return Err(BatchError::Truncated {
                    needed: LOG_OVERHEAD,
                    available: buf.len(),
                })
            }
            Some(r) => r?,
        };
        if buf.len() < size {
            return Err(BatchError::Truncated {
                needed: size,
                available: buf.len(),
            });
        }
        let magic = buf[OFF_MAGIC] as i8;
        if magic != MAGIC_V2 {
            return Err(BatchError::UnsupportedMagic(magic));
        }
        Ok(Self {
            bytes: &buf[..size],
        })
    }

    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
    pub fn size(&self) -> usize {
        self.bytes.len()
    }
    pub fn base_offset(&self) -> i64 {
        be_i64(self.bytes, OFF_BASE_OFFSET)
    }
    pub fn last_offset_delta(&self) -> i32 {
        be_i32(self.bytes, OFF_LAST_OFFSET_DELTA)
    }
    pub fn last_offset(&self) -> i64 {
        self.base_offset() + self.last_offset_delta() as i64
    }
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }
    pub fn partition_leader_epoch(&self) -> i32 {
        be_i32(self.bytes, OFF_LEADER_EPOCH)
    }
    pub fn magic(&self) -> i8 {
        self.bytes[OFF_MAGIC] as i8
    }
    pub fn stored_crc(&self) -> u32 {
        be_u32(self.bytes, OFF_CRC)
    }
    pub fn computed_crc(&self) -> u32 {
        crc32c::crc32c(&self.bytes[OFF_ATTRIBUTES..])
    }
    pub fn attributes(&self) -> i16 {
        be_i16(self.bytes, OFF_ATTRIBUTES)
    }
    pub fn compression_id(&self) -> i16 {
        self.attributes() & ATTR_COMPRESSION_MASK
    }
    pub fn compression(&self) -> Option<Compression> {
        Compression::from_id(self.compression_id())
    }
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes() & ATTR_TIMESTAMP_TYPE != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes() & ATTR_TRANSACTIONAL != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes() & ATTR_CONTROL != 0
    }
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes() & ATTR_DELETE_HORIZON != 0
    }
    pub fn base_timestamp(&self) -> i64 {
        be_i64(self.bytes, OFF_BASE_TIMESTAMP)
    }
    pub fn max_timestamp(&self) -> i64 {
        be_i64(self.bytes, OFF_MAX_TIMESTAMP)
    }
    pub fn producer_id(&self) -> i64 {
        be_i64(self.bytes, OFF_PRODUCER_ID)
    }
    pub fn producer_epoch(&self) -> i16 {
        be_i16(self.bytes, OFF_PRODUCER_EPOCH)
    }
    pub fn base_sequence(&self) -> i32 {
        be_i32(self.bytes, OFF_BASE_SEQUENCE)
    }
    /// Last sequence of the batch, wrapping at i32::MAX as Kafka does.
    pub fn last_sequence(&self) -> i32 {
        let base = self.base_sequence();
        if base == NO_SEQUENCE {
            return NO_SEQUENCE;
        }
        let delta = self.last_offset_delta();
        if delta > i32::MAX - base {
            delta - (i32::MAX - base) - 1
        } else {
            base + delta
        }
    }
    pub fn record_count(&self) -> i32 {
        be_i32(self.bytes, OFF_RECORD_COUNT)
    }
    pub fn has_producer_id(&self) -> bool {
        self.producer_id() > NO_PRODUCER_ID
    }
    /// The records section (compressed if the batch is compressed).
    pub fn records_payload(&self) -> &'a [u8] {
        &self.bytes[BATCH_HEADER_LEN..]
    }

    /// Checks the CRC and the header fields that do not depend on offsets.
    pub fn validate(&self) -> Result<(), BatchError> {
        let computed = self.computed_crc();
        if computed != self.stored_crc() {
            return Err(BatchError::CrcMismatch {
                stored: self.stored_crc(),
                computed,
            });
        }
        if self.compression().is_none() {
            return Err(BatchError::Invalid("unknown compression codec"));
        }
        if self.last_offset_delta() < 0 {
            return Err(BatchError::Invalid("negative lastOffsetDelta"));
        }
        let count = self.record_count();
        if count < 0 {
            return Err(BatchError::Invalid("negative record count"));
        }
        if self.is_control() && count != 1 {
            return Err(BatchError::Invalid(
                "control batch must hold exactly one record",
            ));
        }
        // An uncompressed record takes at least 7 bytes (length, attributes,
        // timestampDelta, offsetDelta, key length, value length, header count).
        if self.compression() == Some(Compression::None)
            && (count as usize).saturating_mul(7) > self.records_payload().len()
        {
            return Err(BatchError::Invalid(
                "record count exceeds what the batch can hold",
            ));
        }
        Ok(())
    }

    /// For a control batch: the control record type from the first record's key.
    /// Control batches are never compressed.
    pub fn control_type(&self) -> Option<ControlType> {
        if !self.is_control() {
            return None;
        }
        let record = self.records_payload();
        let mut cursor = VarintCursor::new(record);
        let _length = cursor.varint()?;
        let _attributes = cursor.byte()?;
        let _ts_delta = cursor.varlong()?;
        let _offset_delta = cursor.varint()?;
        let key_len = cursor.varint()?;
        if key_len < 4 {
            return None;
        }
        let key = cursor.take(key_len as usize)?;
        Some(ControlType::from_code(be_i16(key, 2)))
    }
}

/// Minimal varint reader for the few record fields the broker inspects.
pub struct VarintCursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> VarintCursor<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }
    pub fn position(&self) -> usize {
        self.pos
    }
    #[inline(always)]
    pub fn byte(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }
    #[inline(always)]
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    #[inline(always)]
    pub fn varlong(&mut self) -> Option<i64> {
        // A plain loop: `step_by` over the shifts costs a third more on the
        // per-record walk that every produce request makes.
        let mut value: u64 = 0;
        let mut shift = 0;
        loop {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                return None;
            }
            value |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Some(((value >> 1) as i64) ^ -((value & 1) as i64));
            }
            shift += 7;
            if shift > 63 {
                return None;
            }
        }
    }
    #[inline(always)]
    pub fn varint(&mut self) -> Option<i32> {
        let v = self.varlong()?;
        i32::try_from(v).ok()
    }
}

/// Writes `value` as a zigzag varint (used by tests and control-record builders).
pub fn put_varlong(out: &mut Vec<u8>, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A mutable view used to stamp offsets, leader epochs and LogAppendTime.
pub struct BatchViewMut<'a> {
    bytes: &'a mut [u8],
}

impl<'a> BatchViewMut<'a> {
    /// `bytes` must be exactly one batch already checked by [`BatchView::parse`].
    pub fn new(bytes: &'a mut [u8]) -> Self {
        debug_assert!(bytes.len() >= BATCH_HEADER_LEN);
        Self { bytes }
    }
    pub fn view(&self) -> BatchView<'_> {
        BatchView { bytes: self.bytes }
    }
    pub fn set_base_offset(&mut self, offset: i64) {
        self.bytes[OFF_BASE_OFFSET..OFF_BASE_OFFSET + 8].copy_from_slice(&offset.to_be_bytes());
    }
    pub fn set_partition_leader_epoch(&mut self, epoch: i32) {
        self.bytes[OFF_LEADER_EPOCH..OFF_LEADER_EPOCH + 4].copy_from_slice(&epoch.to_be_bytes());
    }
    /// Switches the batch to LogAppendTime with `timestamp` as its max timestamp
    /// and recomputes the CRC, as Kafka does for `message.timestamp.type=LogAppendTime`.
    pub fn set_log_append_time(&mut self, timestamp: i64) {
        let attrs = be_i16(self.bytes, OFF_ATTRIBUTES) | ATTR_TIMESTAMP_TYPE;
        self.bytes[OFF_ATTRIBUTES..OFF_ATTRIBUTES + 2].copy_from_slice(&attrs.to_be_bytes());
        self.bytes[OFF_MAX_TIMESTAMP..OFF_MAX_TIMESTAMP + 8]
            .copy_from_slice(&timestamp.to_be_bytes());
        self.update_crc();
    }
    pub fn update_crc(&mut self) {
        let crc = crc32c::crc32c(&self.bytes[OFF_ATTRIBUTES..]);
        self.bytes[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
    }
}

/// Iterates the batches of a buffer holding zero or more whole batches.
/// The length of the whole batches at the start of `buf`: a fetch answer
/// may end in a batch cut short by the size limit, which is not an error
/// (the next fetch starts there). A malformed batch is.
pub fn whole_batches_len(buf: &[u8]) -> Result<usize, BatchError> {
    let mut batches = BatchIter::new(buf);
    let mut len = 0;
    while let Some(batch) = batches.next() {
        match batch {
            Ok(_) => len = batches.position(),
            Err(BatchError::Truncated { .. }) => break,
            Err(e) => return Err(e),
        }
    }
    Ok(len)
}

/// Stops with an error at the first malformed or truncated batch.
pub struct BatchIter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> BatchIter<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }
    /// Byte position of the next batch within the buffer.
    pub fn position(&self) -> usize {
        self.pos
    }
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<BatchView<'a>, BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        match BatchView::parse(&self.buf[self.pos..]) {
            Ok(view) => {
                self.pos += view.size();
                Some(Ok(view))
            }
            Err(e) => {
                self.pos = self.buf.len();
                Some(Err(e))
            }
        }
    }
}

/// One record to put into a batch built by [`BatchBuilder`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimpleRecord {
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

/// Builds uncompressed v2 batches. Used for control batches, internal topics
/// and tests; client batches are never rebuilt.
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    pub base_offset: i64,
    pub leader_epoch: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub transactional: bool,
    pub control: bool,
}

impl Default for BatchBuilder {
    fn default() -> Self {
        Self {
            base_offset: 0,
            leader_epoch: NO_PARTITION_LEADER_EPOCH,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: -1,
            base_sequence: NO_SEQUENCE,
            transactional: false,
            control: false,
        }
    }
}

impl BatchBuilder {
    pub fn build(&self, records: &[SimpleRecord]) -> Vec<u8> {
        assert!(!records.is_empty(), "a batch holds at least one record");
        let base_ts = records[0].timestamp;
        let max_ts = records.iter().map(|r| r.timestamp).max().unwrap_or(base_ts);
        let mut body = Vec::new();
        for (i, r) in records.iter().enumerate() {
            let mut rec = Vec::new();
            rec.push(0u8);
            put_varlong(&mut rec, r.timestamp - base_ts);
            put_varlong(&mut rec, i as i64);
            put_bytes_field(&mut rec, r.key.as_deref());
            put_bytes_field(&mut rec, r.value.as_deref());
            put_varlong(&mut rec, r.headers.len() as i64);
            for (k, v) in &r.headers {
                put_bytes_field(&mut rec, Some(k.as_bytes()));
                put_bytes_field(&mut rec, v.as_deref());
            }
            put_varlong(&mut body, rec.len() as i64);
            body.extend_from_slice(&rec);
        }
        let mut attrs: i16 = 0;
        if self.transactional {
            attrs |= ATTR_TRANSACTIONAL;
        }
        if self.control {
            attrs |= ATTR_CONTROL;
        }
        let mut out = Vec::with_capacity(BATCH_HEADER_LEN + body.len());
        out.extend_from_slice(&self.base_offset.to_be_bytes());
        out.extend_from_slice(
            &((BATCH_HEADER_LEN - LOG_OVERHEAD + body.len()) as i32).to_be_bytes(),
        );
        out.extend_from_slice(&self.leader_epoch.to_be_bytes());
        out.push(MAGIC_V2 as u8);
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&attrs.to_be_bytes());
        out.extend_from_slice(&((records.len() - 1) as i32).to_be_bytes());
        out.extend_from_slice(&base_ts.to_be_bytes());
        out.extend_from_slice(&max_ts.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&self.base_sequence.to_be_bytes());
        out.extend_from_slice(&(records.len() as i32).to_be_bytes());
        out.extend_from_slice(&body);
        BatchViewMut::new(&mut out).update_crc();
        out
    }

    /// A control batch (transaction marker or mirror barrier) with one record
    /// whose key is `version 0, type` and whose value is `value`.
    pub fn build_control(&self, control: ControlType, timestamp: i64, value: Vec<u8>) -> Vec<u8> {
        let mut key = Vec::with_capacity(4);
        key.extend_from_slice(&0i16.to_be_bytes());
        key.extend_from_slice(&control.code().to_be_bytes());
        let builder = BatchBuilder {
            control: true,
            ..self.clone()
        };
        builder.build(&[SimpleRecord {
            timestamp,
            key: Some(key),
            value: Some(value),
            headers: Vec::new(),
        }])
    }
}

/// The value of a transaction marker: `version 0, coordinatorEpoch i32`.
pub fn txn_marker_value(coordinator_epoch: i32) -> Vec<u8> {
    let mut v = Vec::with_capacity(6);
    v.extend_from_slice(&0i16.to_be_bytes());
    v.extend_from_slice(&coordinator_epoch.to_be_bytes());
    v
}

fn put_bytes_field(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => put_varlong(out, -1),
        Some(b) => {
            put_varlong(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rec(ts: i64, key: &str, value: &str) -> SimpleRecord {
        SimpleRecord {
            timestamp: ts,
            key: Some(key.as_bytes().to_vec()),
            value: Some(value.as_bytes().to_vec()),
            headers: vec![("h".into(), Some(b"1".to_vec())), ("h".into(), None)],
        }
    }

    proptest! {
        /// Every i64 reads back as written, one-byte varints (-64..=63)
        /// and longer ones alike, and a varint cut short reads as nothing.
        #[test]
        fn varlongs_read_back_as_written(value in prop_oneof![-64i64..=63, any::<i64>()]) {
            let mut out = Vec::new();
            put_varlong(&mut out, value);
            let mut cursor = VarintCursor::new(&out);
            prop_assert_eq!(cursor.varlong(), Some(value));
            prop_assert_eq!(cursor.position(), out.len());
            let mut cut = VarintCursor::new(&out[..out.len() - 1]);
            prop_assert_eq!(cut.varlong(), None);
        }
    }

    #[test]
    fn whole_batches_stop_before_a_cut_batch() {
        let one = BatchBuilder::default().build(&[rec(1, "k", "v")]);
        let mut buf = one.clone();
        buf.extend_from_slice(&one);
        assert_eq!(whole_batches_len(&buf), Ok(buf.len()));
        assert_eq!(whole_batches_len(&buf[..buf.len() - 3]), Ok(one.len()));
        assert_eq!(whole_batches_len(&buf[..10]), Ok(0));
        let mut bad = one.clone();
        bad[16] = 9; // magic
        assert!(whole_batches_len(&bad).is_err());
    }

    #[test]
    fn built_batch_parses_and_validates() {
        let b = BatchBuilder {
            base_offset: 42,
            leader_epoch: 3,
            producer_id: 7,
            producer_epoch: 1,
            base_sequence: 10,
            ..Default::default()
        }
        .build(&[rec(100, "a", "x"), rec(150, "b", "y")]);
        let v = BatchView::parse(&b).unwrap();
        v.validate().unwrap();
        assert_eq!(v.base_offset(), 42);
        assert_eq!(v.last_offset(), 43);
        assert_eq!(v.partition_leader_epoch(), 3);
        assert_eq!(v.max_timestamp(), 150);
        assert_eq!(v.producer_id(), 7);
        assert_eq!(v.last_sequence(), 11);
        assert_eq!(v.record_count(), 2);
        assert_eq!(v.control_type(), None);
    }

    #[test]
    fn stamping_offset_and_epoch_keeps_crc_valid() {
        let mut b = BatchBuilder::default().build(&[rec(1, "k", "v")]);
        let mut m = BatchViewMut::new(&mut b);
        m.set_base_offset(1_000_000);
        m.set_partition_leader_epoch(9);
        let v = BatchView::parse(&b).unwrap();
        v.validate().unwrap();
        assert_eq!(v.base_offset(), 1_000_000);
        assert_eq!(v.partition_leader_epoch(), 9);
    }

    #[test]
    fn log_append_time_rewrites_crc() {
        let mut b = BatchBuilder::default().build(&[rec(1, "k", "v")]);
        BatchViewMut::new(&mut b).set_log_append_time(999);
        let v = BatchView::parse(&b).unwrap();
        v.validate().unwrap();
        assert_eq!(v.timestamp_type(), TimestampType::LogAppendTime);
        assert_eq!(v.max_timestamp(), 999);
    }

    #[test]
    fn control_batches_report_their_type() {
        for ct in [
            ControlType::Abort,
            ControlType::Commit,
            ControlType::MirrorPidReset,
        ] {
            let b = BatchBuilder {
                producer_id: 5,
                producer_epoch: 0,
                transactional: true,
                ..Default::default()
            }
            .build_control(ct, 10, txn_marker_value(0));
            let v = BatchView::parse(&b).unwrap();
            v.validate().unwrap();
            assert_eq!(v.control_type(), Some(ct));
        }
    }

    #[test]
    fn sequence_wraps_like_kafka() {
        let b = BatchBuilder {
            producer_id: 1,
            producer_epoch: 0,
            base_sequence: i32::MAX,
            ..Default::default()
        }
        .build(&[rec(1, "a", "b"), rec(1, "c", "d")]);
        assert_eq!(BatchView::parse(&b).unwrap().last_sequence(), 0);
    }

    #[test]
    fn rejects_bad_magic_length_and_truncation() {
        let mut b = BatchBuilder::default().build(&[rec(1, "k", "v")]);
        assert!(matches!(
            BatchView::parse(&b[..b.len() - 1]),
            Err(BatchError::Truncated { .. })
        ));
        b[16] = 1;
        assert_eq!(
            BatchView::parse(&b).unwrap_err(),
            BatchError::UnsupportedMagic(1)
        );
        b[8..12].copy_from_slice(&3i32.to_be_bytes());
        assert_eq!(
            BatchView::parse(&b).unwrap_err(),
            BatchError::InvalidLength(3)
        );
    }

    proptest! {
        #[test]
        fn any_bit_flip_after_the_crc_is_detected(
            flip in 21usize..80, bit in 0u8..8
        ) {
            let mut b = BatchBuilder::default().build(&[rec(1, "key", "value-bytes")]);
            let flip = flip % b.len();
            prop_assume!(flip >= 21);
            b[flip] ^= 1 << bit;
            let v = BatchView::parse(&b).unwrap();
            prop_assert!(v.validate().is_err());
        }

        #[test]
        fn iterator_never_panics_on_garbage(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            for v in BatchIter::new(&data).flatten() {
                let _ = v.validate();
                let _ = v.control_type();
            }
        }
    }
}
