//! Typed storage errors. The broker maps each to a Kafka error code.

use std::io;
use std::path::PathBuf;

use ottla_protocol::batch::BatchError;
use thiserror::Error;

pub type Result<T, E = StorageError> = std::result::Result<T, E>;

#[derive(Debug, Error)]
pub enum StorageError {
    /// Bad client input: CORRUPT_MESSAGE / INVALID_RECORD.
    #[error("corrupt record batch: {0}")]
    Corrupt(#[from] BatchError),
    /// A batch or the whole request is above `max.message.bytes`: MESSAGE_TOO_LARGE.
    #[error("record batch of {size} bytes exceeds max.message.bytes={limit}")]
    MessageTooLarge { size: usize, limit: usize },
    /// A timestamp outside the allowed window: INVALID_TIMESTAMP.
    #[error("invalid timestamp {timestamp}: {reason}")]
    InvalidTimestamp {
        timestamp: i64,
        reason: &'static str,
    },
    /// Verbatim append whose first offset is not where the log ends.
    #[error("offset gap or overlap: batch starts at {first_offset}, log ends at {log_end_offset}")]
    NonContiguousOffsets {
        first_offset: i64,
        log_end_offset: i64,
    },
    /// Reads outside [log start, log end]: OFFSET_OUT_OF_RANGE.
    #[error("offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        offset: i64,
        log_start_offset: i64,
        log_end_offset: i64,
    },
    /// Idempotence checks: OUT_OF_ORDER_SEQUENCE_NUMBER.
    #[error("out of order sequence for producer {producer_id}: expected {expected}, got {got}")]
    OutOfOrderSequence {
        producer_id: i64,
        expected: i32,
        got: i32,
    },
    /// Idempotence checks: INVALID_PRODUCER_EPOCH (fenced by a newer epoch).
    #[error("producer {producer_id} epoch {epoch} is older than the current epoch {current}")]
    InvalidProducerEpoch {
        producer_id: i64,
        epoch: i16,
        current: i16,
    },
    /// Records without a key sent to a compacted topic: INVALID_RECORD, with
    /// the index in the request of each such record.
    #[error("a compacted topic cannot take records without a key ({} of them)", .indexes.len())]
    KeylessRecords { indexes: Vec<i32> },
    /// Transactional checks: INVALID_TXN_STATE.
    #[error("invalid transaction state: {0}")]
    InvalidTxnState(String),
    /// A file on disk is not what it should be (checkpoints, snapshots, indexes).
    #[error("{path}: {reason}")]
    CorruptFile { path: PathBuf, reason: String },
    /// The log hit an I/O error (disk full, device gone) and went offline:
    /// KAFKA_STORAGE_ERROR. Nothing more is written until it is reopened.
    #[error("log {dir} is offline after an I/O error: {source}")]
    Offline {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A compaction pass cannot make progress: its key map cannot hold
    /// even the first dirty batch's records.
    #[error("log.cleaner.dedupe.buffer.size gives each cleaner thread room for {capacity} keys, fewer than the {records} records of the batch at offset {offset}: raise log.cleaner.dedupe.buffer.size or lower log.cleaner.threads")]
    KeyMapTooSmall {
        capacity: usize,
        records: usize,
        offset: i64,
    },
    /// Another process holds the dir's `.lock` (see `dir_lock.rs`).
    #[error("{dir} is in use by another process (it holds the lock on {dir}/.lock): stop that process first (a broker that is still shutting down lets go when it exits), or give this one other log.dirs / metadata.log.dir")]
    DirLocked { dir: PathBuf },
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
}

impl StorageError {
    pub fn corrupt_file(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Self::CorruptFile {
            path: path.into(),
            reason: reason.into(),
        }
    }
}
