//! openraft's log storage over a storage-crate `PartitionLog` (see the
//! module docs of `raft` for the index/offset/term mapping), plus the vote,
//! committed and purged log ids in `quorum-state`.
//!
//! Every disk operation runs on the blocking pool and completes (fsync
//! included) before the call returns, so openraft's ordering rules hold
//! trivially: writes are serialized by RaftCore awaiting each one.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{AnyError, LogState, RaftLogReader, StorageIOError, Vote};
use ottla_storage::config::LogConfig;
use ottla_storage::log::{FetchIsolation, LogOpenOptions, PartitionLog};
use parking_lot::Mutex;

use super::batches::{now_ms, put_batch, read_batches};
use super::state_file::{write_atomically, QuorumState};
use super::{blocking, epoch_of, offset_of, Entry, LogId, StorageError, TypeConfig};

pub(crate) const STATE_FILE: &str = "quorum-state";
/// Format byte in front of every serialized entry.
const ENTRY_FORMAT: u8 = 0;
/// Bytes read from the log per step when serving entries.
const READ_CHUNK: usize = 1 << 20;

pub(crate) struct LogStore {
    log: Arc<Mutex<PartitionLog>>,
    state: QuorumState,
    state_path: PathBuf,
}

/// Reads entries for replication tasks, concurrently with RaftCore.
#[derive(Clone)]
pub(crate) struct LogReader {
    log: Arc<Mutex<PartitionLog>>,
}

impl LogStore {
    /// Opens the log in `dir` and its `quorum-state`.
    pub fn open(dir: &Path, segment_bytes: u64) -> ottla_storage::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let state_path = dir.join(STATE_FILE);
        let state = QuorumState::load(&state_path)?;
        let start = next_offset(state.purged.as_ref());
        let config = LogConfig {
            segment_bytes,
            retention_ms: -1,
            ..LogConfig::default()
        };
        let opts = LogOpenOptions {
            log_start_offset: start,
            high_watermark: next_offset(state.committed.as_ref()),
            ..LogOpenOptions::default()
        };
        let mut log = PartitionLog::open(dir, config, opts)?;
        if log.log_end_offset() < start {
            // The purge after a snapshot install was recorded, but the crash
            // came before the log was emptied.
            log.truncate_fully_and_start_at(start)?;
        }
        Ok(Self {
            log: Arc::new(Mutex::new(log)),
            state,
            state_path,
        })
    }

    async fn save_state(&self) -> Result<(), StorageError> {
        let path = self.state_path.clone();
        let bytes = self.state.encode();
        blocking(move || write_atomically(&path, &bytes))
            .await
            .map_err(|e| StorageIOError::write(&e).into())
    }

    fn reader(&self) -> LogReader {
        LogReader {
            log: self.log.clone(),
        }
    }
}

/// The offset after `log_id`: where the log starts after purging up to it,
/// or the high watermark once it is committed.
fn next_offset(log_id: Option<&LogId>) -> i64 {
    log_id.map_or(0, |id| offset_of(id.index) + 1)
}

fn encode_entry(entry: &Entry) -> Vec<u8> {
    let mut value = vec![ENTRY_FORMAT];
    value.extend(postcard::to_allocvec(entry).expect("in-memory serialization cannot fail"));
    value
}

fn decode_entry(offset: i64, values: &[Vec<u8>]) -> Result<Entry, String> {
    let [value] = values else {
        return Err(format!("batch at offset {offset} does not hold one entry"));
    };
    let entry: Entry = match value.split_first() {
        Some((&ENTRY_FORMAT, body)) => postcard::from_bytes(body)
            .map_err(|e| format!("entry at offset {offset} is malformed: {e}"))?,
        _ => return Err(format!("entry at offset {offset} has an unknown format")),
    };
    if offset_of(entry.log_id.index) != offset {
        return Err(format!(
            "entry at offset {offset} claims index {}",
            entry.log_id.index
        ));
    }
    Ok(entry)
}

/// Entries with offsets in `[from, to)` that are still in the log.
fn read_entries(log: &PartitionLog, from: i64, to: i64) -> Result<Vec<Entry>, String> {
    let to = to.min(log.log_end_offset());
    let mut next = from.max(log.log_start_offset());
    let mut out = Vec::new();
    while next < to {
        let info = log
            .read(next, READ_CHUNK, FetchIsolation::LogEnd, true)
            .map_err(|e| e.to_string())?;
        let Some(slice) = info.slice else { break };
        let bytes = slice.read().map_err(|e| e.to_string())?;
        let before = next;
        for batch in read_batches(&bytes).map_err(|e| e.to_string())? {
            if batch.base_offset < next {
                continue;
            }
            if batch.base_offset >= to {
                return Ok(out);
            }
            out.push(decode_entry(batch.base_offset, &batch.values)?);
            next = batch.base_offset + 1;
        }
        if next == before {
            return Err(format!("no progress reading the metadata log at {next}"));
        }
    }
    Ok(out)
}

/// Entries as batches, one per entry, and the offset of the first.
fn encode_entries(entries: impl IntoIterator<Item = Entry>) -> (Option<i64>, Vec<u8>) {
    let mut bytes = Vec::new();
    let mut first = None;
    for entry in entries {
        let offset = offset_of(entry.log_id.index);
        first.get_or_insert(offset);
        let epoch = epoch_of(entry.log_id.leader_id.term);
        put_batch(&mut bytes, offset, epoch, vec![encode_entry(&entry)]);
    }
    (first, bytes)
}

/// Appends encoded entries and makes them durable.
fn write_entries(log: &mut PartitionLog, first: Option<i64>, bytes: &[u8]) -> Result<(), String> {
    if let Some(first) = first {
        // openraft never leaves holes; a gap here is a bug, and a log with
        // a hole must not be acknowledged.
        if first != log.log_end_offset() {
            return Err(format!(
                "append at {first} but the metadata log ends at {}",
                log.log_end_offset()
            ));
        }
        log.append_verbatim(bytes, now_ms())
            .map_err(|e| e.to_string())?;
    }
    // Durable before openraft hears back: it counts the entries towards
    // the quorum at once.
    log.flush().map_err(|e| e.to_string())
}

fn offsets(range: &impl RangeBounds<u64>) -> (i64, i64) {
    let from = match range.start_bound() {
        Bound::Included(&i) => offset_of(i),
        Bound::Excluded(&i) => offset_of(i) + 1,
        Bound::Unbounded => 0,
    };
    let to = match range.end_bound() {
        Bound::Included(&i) => offset_of(i) + 1,
        Bound::Excluded(&i) => offset_of(i),
        Bound::Unbounded => i64::MAX,
    };
    (from, to)
}

fn read_error(e: String) -> StorageError {
    StorageIOError::read_logs(AnyError::error(e)).into()
}

fn write_error(e: impl ToString) -> StorageError {
    StorageIOError::write_logs(AnyError::error(e.to_string())).into()
}

impl RaftLogReader<TypeConfig> for LogReader {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let (from, to) = offsets(&range);
        let log = self.log.clone();
        blocking(move || read_entries(&log.lock(), from, to))
            .await
            .map_err(read_error)
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        self.reader().try_get_log_entries(range).await
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogReader;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let log = self.log.clone();
        let last = blocking(move || {
            let log = log.lock();
            let end = log.log_end_offset();
            read_entries(&log, end - 1, end)
        })
        .await
        .map_err(read_error)?;
        let last_purged_log_id = self.state.purged;
        Ok(LogState {
            last_purged_log_id,
            last_log_id: last.last().map(|e| e.log_id).or(last_purged_log_id),
        })
    }

    async fn get_log_reader(&mut self) -> LogReader {
        self.reader()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), StorageError> {
        self.state.vote = Some(*vote);
        self.save_state().await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, StorageError> {
        Ok(self.state.vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        self.state.committed = committed;
        self.save_state().await?;
        // Kafka's high watermark of the metadata log is the commit point.
        self.log
            .lock()
            .set_high_watermark(next_offset(committed.as_ref()));
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.state.committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let (first, bytes) = encode_entries(entries);
        let log = self.log.clone();
        blocking(move || write_entries(&mut log.lock(), first, &bytes))
            .await
            .map_err(write_error)?;
        callback.log_io_completed(Ok(()));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let log = self.log.clone();
        blocking(move || {
            let mut log = log.lock();
            log.truncate_to(offset_of(log_id.index))?;
            log.flush()
        })
        .await
        .map_err(write_error)
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        // Recorded first: after a crash the log may still hold purged
        // entries (hidden below the start offset), never miss kept ones.
        self.state.purged = Some(log_id);
        self.save_state().await?;
        let log = self.log.clone();
        let start = offset_of(log_id.index) + 1;
        blocking(move || {
            let mut log = log.lock();
            if start >= log.log_end_offset() {
                // Nothing left to keep: the snapshot covers the whole log
                // (or, just installed, reaches past its end).
                log.truncate_fully_and_start_at(start)
            } else {
                // Purged entries are applied, hence committed.
                let hw = log.high_watermark().max(start);
                log.set_high_watermark(hw);
                log.delete_records_before(start).map(|_| ())
            }
        })
        .await
        .map_err(write_error)
    }
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, EntryPayload};

    use super::*;

    fn entry(term: u64, index: u64) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
            payload: EntryPayload::Normal(vec![vec![index as u8]]),
        }
    }

    fn append(store: &mut LogStore, entries: Vec<Entry>) {
        let (first, bytes) = encode_entries(entries);
        write_entries(&mut store.log.lock(), first, &bytes).unwrap();
    }

    #[tokio::test]
    async fn entries_map_to_offsets_and_survive_truncate_purge_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = LogStore::open(dir.path(), 1 << 20).unwrap();
        let state = store.get_log_state().await.unwrap();
        assert_eq!((state.last_purged_log_id, state.last_log_id), (None, None));

        append(&mut store, (0..10).map(|i| entry(1 + i / 5, i)).collect());
        let got = store.try_get_log_entries(3..6).await.unwrap();
        assert_eq!(
            got.iter().map(|e| e.log_id.index).collect::<Vec<_>>(),
            [3, 4, 5]
        );
        assert_eq!(got[2].log_id.leader_id.term, 2);
        assert_eq!(store.log.lock().latest_epoch(), Some(2));

        store.truncate(entry(2, 8).log_id).await.unwrap();
        assert_eq!(
            store.get_log_state().await.unwrap().last_log_id,
            Some(entry(2, 7).log_id)
        );
        store.purge(entry(1, 2).log_id).await.unwrap();
        assert_eq!(store.log.lock().log_start_offset(), 3);
        assert_eq!(store.try_get_log_entries(0..5).await.unwrap().len(), 2);
        store.save_vote(&Vote::new(2, 1)).await.unwrap();
        store
            .save_committed(Some(entry(2, 6).log_id))
            .await
            .unwrap();
        drop(store);

        let mut store = LogStore::open(dir.path(), 1 << 20).unwrap();
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id, Some(entry(1, 2).log_id));
        assert_eq!(state.last_log_id, Some(entry(2, 7).log_id));
        assert_eq!(store.read_vote().await.unwrap(), Some(Vote::new(2, 1)));
        assert_eq!(
            store.read_committed().await.unwrap(),
            Some(entry(2, 6).log_id)
        );
        assert_eq!(store.log.lock().high_watermark(), 7);
        let got = store.try_get_log_entries(..).await.unwrap();
        assert_eq!(
            got.iter().map(|e| e.log_id.index).collect::<Vec<_>>(),
            [3, 4, 5, 6, 7]
        );

        // A purge past the end (snapshot installed) empties the log.
        store.purge(entry(3, 20).log_id).await.unwrap();
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_log_id, Some(entry(3, 20).log_id));
        assert!(store.try_get_log_entries(..).await.unwrap().is_empty());
        assert_eq!(store.log.lock().log_end_offset(), 21);
    }
}
