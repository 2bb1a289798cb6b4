//! Per-partition producer state: idempotence (sequence numbers, epochs,
//! duplicate detection) and the partition's transactions (ongoing ones for the
//! last stable offset, completed ones for the transaction index). Semantics
//! follow Kafka's ProducerStateManager and ProducerAppendInfo.
//!
//! Use from the log:
//! 1. leader, before writing: [`ProducerStateManager::check_append`];
//! 2. after a batch is in the log (offsets final; also followers and
//!    recovery): [`ProducerStateManager::update`], then, for an aborted
//!    [`CompletedTxn`], [`ProducerStateManager::last_stable_offset_for_completed`]
//!    to fill the `.txnindex` entry, then
//!    [`ProducerStateManager::update_map_end_offset`] with the next offset;
//! 3. LSO = min(first_unstable_offset, high watermark).
//!
//! Snapshots are `<20-digit offset>.snapshot` files in the partition
//! directory holding the state for everything below that offset. Their format
//! is Ottla's own (all big-endian):
//!
//! ```text
//! version i16 (1) | crc u32: CRC-32C of everything after it | count i32
//! count x { producerId i64, epoch i16, coordinatorEpoch i32, lastTimestamp i64,
//!           currentTxnFirstOffset i64 (-1 = none), batchCount i8 (<= 5),
//!           batchCount x { firstSeq i32, lastSeq i32, firstOffset i64,
//!                          lastOffset i64, timestamp i64 } }
//! ```
//! Unlike Kafka's (last batch only) they keep all 5 cached batches, so
//! duplicates are still detected after a restart.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use ottla_protocol::batch::{BatchError, BatchView, ControlType, VarintCursor, NO_SEQUENCE};
use ottla_protocol::schema::wire::Reader;
use tracing::{debug, info, warn};

use crate::checkpoint::write_atomically;
use crate::error::{Result, StorageError};
use crate::txn_index::AbortedTxn;

/// Batches remembered per producer for duplicate detection (Kafka's
/// max.in.flight.requests.per.connection limit for idempotence).
pub const NUM_BATCHES_TO_RETAIN: usize = 5;
pub const NO_PRODUCER_EPOCH: i16 = -1;
pub const SNAPSHOT_SUFFIX: &str = ".snapshot";
const SNAPSHOT_VERSION: i16 = 1;
const SNAPSHOT_HEADER_LEN: usize = 6;

/// Who is appending, which decides how much is validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A produce request: epochs, sequences, duplicates and transaction state.
    Client,
    /// The group or transaction coordinator (offset commits, markers): epochs
    /// and transaction state, no sequences.
    Coordinator,
    /// A follower copying its leader: nothing is refused, state is updated.
    Replication,
    /// A mirror copying a source cluster's batches as they are: trusted like
    /// replication.
    Verbatim,
}

impl AppendOrigin {
    fn is_trusted(self) -> bool {
        matches!(self, Self::Replication | Self::Verbatim)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    /// The batch's max timestamp.
    pub timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerStateEntry {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The most recent batches of the current epoch, oldest first.
    pub batches: VecDeque<BatchMetadata>,
    /// Epoch of the last transaction coordinator that wrote a marker.
    pub coordinator_epoch: i32,
    pub current_txn_first_offset: Option<i64>,
    pub last_timestamp: i64,
}

impl ProducerStateEntry {
    fn new(producer_id: i64) -> Self {
        Self {
            producer_id,
            producer_epoch: NO_PRODUCER_EPOCH,
            batches: VecDeque::new(),
            coordinator_epoch: -1,
            current_txn_first_offset: None,
            last_timestamp: -1,
        }
    }

    pub fn first_seq(&self) -> i32 {
        self.batches.front().map_or(NO_SEQUENCE, |b| b.first_seq)
    }

    pub fn last_seq(&self) -> i32 {
        self.batches.back().map_or(NO_SEQUENCE, |b| b.last_seq)
    }

    pub fn last_data_offset(&self) -> i64 {
        self.batches.back().map_or(-1, |b| b.last_offset)
    }

    /// A cached batch of the same epoch with exactly this sequence range.
    pub fn find_duplicate(&self, batch: &BatchView<'_>) -> Option<BatchMetadata> {
        if batch.producer_epoch() != self.producer_epoch {
            return None;
        }
        let (first, last) = (batch.base_sequence(), batch.last_sequence());
        self.batches
            .iter()
            .find(|b| b.first_seq == first && b.last_seq == last)
            .copied()
    }

    /// A new epoch restarts sequences, so the cached batches no longer apply.
    fn set_epoch(&mut self, epoch: i16) {
        if self.producer_epoch != epoch {
            self.batches.clear();
            self.producer_epoch = epoch;
        }
    }

    fn add_batch(&mut self, epoch: i16, batch: BatchMetadata) {
        self.set_epoch(epoch);
        if self.batches.len() == NUM_BATCHES_TO_RETAIN {
            self.batches.pop_front();
        }
        self.batches.push_back(batch);
        self.last_timestamp = batch.timestamp;
    }
}

/// What the leader should do with a batch that passed the checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendCheck {
    Append,
    /// A retry of a batch already in the log: answer success with its offsets.
    Duplicate(BatchMetadata),
}

/// A transaction ended by a COMMIT or ABORT marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// Offset of the marker.
    pub last_offset: i64,
    pub is_aborted: bool,
}

impl CompletedTxn {
    pub fn to_aborted_txn(&self, last_stable_offset: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: self.producer_id,
            first_offset: self.first_offset,
            last_offset: self.last_offset,
            last_stable_offset,
        }
    }
}

#[derive(Debug)]
pub struct ProducerStateManager {
    dir: PathBuf,
    producers: HashMap<i64, ProducerStateEntry>,
    /// Transactions without a marker yet: first offset -> producer id.
    ongoing_txns: BTreeMap<i64, i64>,
    /// Completed transactions whose marker is not yet below the high
    /// watermark: first offset -> (producer id, marker offset). They still
    /// hold the LSO back, as the marker could be lost with a leader change.
    unreplicated_txns: BTreeMap<i64, (i64, i64)>,
    /// Offsets of the snapshot files in `dir`.
    snapshots: BTreeSet<i64>,
    /// Every batch below this offset has been applied.
    map_end_offset: i64,
}

impl ProducerStateManager {
    /// Loads the producer state of the log in `dir` whose offsets span
    /// `[log_start_offset, log_end_offset)`. Snapshots above the log end (from
    /// data that was truncated away) and at or below the log start are deleted,
    /// as Kafka's truncateAndReload does; the newest remaining valid snapshot is
    /// loaded (corrupt ones are deleted with a warning). Returns the state and
    /// the offset to replay the log from through [`Self::update`]: the
    /// snapshot's offset, or `log_start_offset` when there is none.
    pub fn load(dir: &Path, log_start_offset: i64, log_end_offset: i64) -> Result<(Self, i64)> {
        let mut state = Self {
            dir: dir.to_path_buf(),
            producers: HashMap::new(),
            ongoing_txns: BTreeMap::new(),
            unreplicated_txns: BTreeMap::new(),
            snapshots: list_snapshots(dir)?,
            map_end_offset: log_start_offset,
        };
        state.remove_snapshots_out_of(log_start_offset, log_end_offset)?;
        state.reload(log_start_offset)?;
        let replay_from = state.map_end_offset;
        Ok((state, replay_from))
    }

    /// After the log was truncated to `log_end_offset` (or its start moved):
    /// drops out-of-range snapshots and, unless the state already ends exactly
    /// there, reloads from the newest remaining snapshot. Returns the offset to
    /// replay the log from (the new map end offset).
    pub fn truncate_and_reload(
        &mut self,
        dir: &Path,
        log_start_offset: i64,
        log_end_offset: i64,
    ) -> Result<i64> {
        self.dir = dir.to_path_buf();
        self.remove_snapshots_out_of(log_start_offset, log_end_offset)?;
        if log_end_offset != self.map_end_offset {
            // The log end is assumed to be at or below the high watermark, so
            // forgetting unreplicated transactions is safe (as in Kafka).
            self.reload(log_start_offset)?;
        } else {
            self.on_log_start_offset_incremented(log_start_offset);
        }
        Ok(self.map_end_offset)
    }

    fn remove_snapshots_out_of(
        &mut self,
        log_start_offset: i64,
        log_end_offset: i64,
    ) -> Result<()> {
        let out: Vec<i64> = self
            .snapshots
            .iter()
            .copied()
            .filter(|&o| o > log_end_offset || o <= log_start_offset)
            .collect();
        for offset in out {
            self.delete_snapshot(offset)?;
        }
        Ok(())
    }

    /// Replaces the in-memory state with the newest valid snapshot, or with
    /// nothing at `log_start_offset`.
    fn reload(&mut self, log_start_offset: i64) -> Result<()> {
        self.clear();
        while let Some(&offset) = self.snapshots.last() {
            let path = snapshot_path(&self.dir, offset);
            let bytes = match fs::read(&path) {
                Ok(bytes) => bytes,
                // Deleted behind our back: try the next older one.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    self.snapshots.remove(&offset);
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            match decode_snapshot(&bytes) {
                Ok(entries) => {
                    info!(path = %path.display(), producers = entries.len(), "loaded producer state snapshot");
                    for entry in entries {
                        self.load_entry(entry);
                    }
                    self.map_end_offset = offset;
                    return Ok(());
                }
                Err(reason) => {
                    warn!(path = %path.display(), reason, "deleting corrupt producer state snapshot");
                    self.delete_snapshot(offset)?;
                }
            }
        }
        self.map_end_offset = log_start_offset;
        Ok(())
    }

    fn load_entry(&mut self, entry: ProducerStateEntry) {
        if let Some(first) = entry.current_txn_first_offset {
            self.ongoing_txns.insert(first, entry.producer_id);
        }
        self.producers.insert(entry.producer_id, entry);
    }

    /// Leader-side validation of a batch before it is written. Batches without
    /// a producer id pass. Trusted origins (replication, mirror) never fail:
    /// the leader that wrote the batch validated it.
    pub fn check_append(&self, batch: &BatchView<'_>, origin: AppendOrigin) -> Result<AppendCheck> {
        if batch.is_control() && origin == AppendOrigin::Client {
            // Also keeps clients from forging a MIRROR_PID_RESET.
            return Err(BatchError::Invalid("clients may not write control batches").into());
        }
        if !batch.has_producer_id() {
            return Ok(AppendCheck::Append);
        }
        let producer_id = batch.producer_id();
        let entry = self.producers.get(&producer_id);
        if origin == AppendOrigin::Client {
            if let Some(dup) = entry.and_then(|e| e.find_duplicate(batch)) {
                return Ok(AppendCheck::Duplicate(dup));
            }
        }
        let epoch = batch.producer_epoch();
        let current = entry.map_or(NO_PRODUCER_EPOCH, |e| e.producer_epoch);
        if origin.is_trusted() {
            if epoch < current {
                warn!(
                    producer_id,
                    epoch,
                    current,
                    offset = batch.base_offset(),
                    "replicated batch has an older producer epoch"
                );
            }
            return Ok(AppendCheck::Append);
        }
        // Markers too: TV0/TV1 rule, marker epoch >= current epoch.
        if epoch < current {
            return Err(StorageError::InvalidProducerEpoch {
                producer_id,
                epoch,
                current,
            });
        }
        if batch.is_control() {
            if matches!(
                batch.control_type(),
                Some(ControlType::Commit | ControlType::Abort)
            ) {
                let coordinator_epoch = marker_coordinator_epoch(batch)
                    .ok_or(BatchError::Invalid("malformed transaction marker"))?;
                if let Some(e) = entry.filter(|e| coordinator_epoch < e.coordinator_epoch) {
                    // Kafka: TRANSACTION_COORDINATOR_FENCED (a zombie coordinator).
                    return Err(StorageError::InvalidTxnState(format!(
                        "marker for producer {producer_id} from coordinator epoch {coordinator_epoch}, older than {}",
                        e.coordinator_epoch
                    )));
                }
            }
            return Ok(AppendCheck::Append);
        }
        if origin == AppendOrigin::Client {
            check_sequence(producer_id, entry, batch)?;
        }
        if entry.is_some_and(|e| e.current_txn_first_offset.is_some()) && !batch.is_transactional()
        {
            return Err(StorageError::InvalidTxnState(format!(
                "non-transactional batch from producer {producer_id} during its ongoing transaction"
            )));
        }
        Ok(AppendCheck::Append)
    }

    /// Applies a batch that is now in the log with its final offsets. Returns
    /// the transaction a COMMIT/ABORT marker completed, if it had any data.
    /// Never fails: the batch is already written (leader, follower, recovery
    /// all go through here, so they all end in the same state).
    pub fn update(&mut self, batch: &BatchView<'_>) -> Option<CompletedTxn> {
        let control = if batch.is_control() {
            match batch.control_type() {
                Some(ControlType::MirrorPidReset) => {
                    // KIP-1279 failover barrier: producer ids seen before it
                    // belong to the source cluster, so forget them all.
                    info!(
                        offset = batch.base_offset(),
                        "mirror PID reset: clearing all producer state"
                    );
                    self.producers.clear();
                    self.ongoing_txns.clear();
                    return None;
                }
                Some(ControlType::Abort) => Some(true),
                Some(ControlType::Commit) => Some(false),
                _ => return None,
            }
        } else {
            None
        };
        if !batch.has_producer_id() {
            return None;
        }
        let producer_id = batch.producer_id();
        let entry = self
            .producers
            .entry(producer_id)
            .or_insert_with(|| ProducerStateEntry::new(producer_id));

        let Some(is_aborted) = control else {
            entry.add_batch(
                batch.producer_epoch(),
                BatchMetadata {
                    first_seq: batch.base_sequence(),
                    last_seq: batch.last_sequence(),
                    first_offset: batch.base_offset(),
                    last_offset: batch.last_offset(),
                    timestamp: batch.max_timestamp(),
                },
            );
            match (batch.is_transactional(), entry.current_txn_first_offset) {
                (true, None) => {
                    entry.current_txn_first_offset = Some(batch.base_offset());
                    self.ongoing_txns.insert(batch.base_offset(), producer_id);
                }
                (false, Some(first)) => {
                    warn!(
                        producer_id,
                        first,
                        offset = batch.base_offset(),
                        "non-transactional batch inside an ongoing transaction"
                    );
                }
                _ => {}
            }
            return None;
        };

        let completed = entry
            .current_txn_first_offset
            .take()
            .map(|first_offset| CompletedTxn {
                producer_id,
                first_offset,
                last_offset: batch.base_offset(),
                is_aborted,
            });
        entry.set_epoch(batch.producer_epoch());
        if let Some(coordinator_epoch) = marker_coordinator_epoch(batch) {
            entry.coordinator_epoch = coordinator_epoch;
        }
        entry.last_timestamp = batch.max_timestamp();
        if let Some(txn) = completed {
            self.ongoing_txns.remove(&txn.first_offset);
            self.unreplicated_txns
                .insert(txn.first_offset, (producer_id, txn.last_offset));
        }
        completed
    }

    /// Kafka's lastStableOffset(completedTxn): the LSO to record with an
    /// aborted transaction in the `.txnindex`. Call right after the marker's
    /// [`Self::update`].
    pub fn last_stable_offset_for_completed(&self, txn: &CompletedTxn) -> i64 {
        self.ongoing_txns
            .iter()
            .find(|&(_, &pid)| pid != txn.producer_id)
            .map_or(txn.last_offset + 1, |(&first, _)| first)
    }

    /// The first offset that may still change outcome or visibility: the
    /// earliest ongoing transaction or completed-but-unreplicated one.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        let ongoing = self.ongoing_txns.keys().next();
        let unreplicated = self.unreplicated_txns.keys().next();
        ongoing.into_iter().chain(unreplicated).min().copied()
    }

    /// The first offset of the earliest transaction without a marker.
    pub fn first_undecided_offset(&self) -> Option<i64> {
        self.ongoing_txns.keys().next().copied()
    }

    /// Completed transactions whose marker is now below the high watermark
    /// no longer hold the LSO back.
    pub fn on_high_watermark_updated(&mut self, high_watermark: i64) {
        self.unreplicated_txns
            .retain(|_, &mut (_, last)| last >= high_watermark);
    }

    /// Kafka's onLogStartOffsetIncremented: forgets unreplicated transactions
    /// below the new start and moves the map end offset up to it.
    pub fn on_log_start_offset_incremented(&mut self, log_start_offset: i64) {
        self.unreplicated_txns
            .retain(|_, &mut (_, last)| last >= log_start_offset);
        self.map_end_offset = self.map_end_offset.max(log_start_offset);
    }

    /// Removes producers idle for `expiration_ms` (producer.id.expiration.ms),
    /// except those with an ongoing transaction.
    pub fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) {
        self.producers.retain(|_, e| {
            e.current_txn_first_offset.is_some() || now_ms - e.last_timestamp < expiration_ms
        });
    }

    pub fn last_entry(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.producers.get(&producer_id)
    }

    /// For DescribeProducers.
    pub fn active_producers(&self) -> impl Iterator<Item = &ProducerStateEntry> {
        self.producers.values()
    }

    pub fn producer_count(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty() && self.unreplicated_txns.is_empty()
    }

    pub fn map_end_offset(&self) -> i64 {
        self.map_end_offset
    }

    pub fn update_map_end_offset(&mut self, offset: i64) {
        self.map_end_offset = offset;
    }

    /// Forgets all producers and transactions in memory (snapshots stay).
    pub fn clear(&mut self) {
        self.producers.clear();
        self.ongoing_txns.clear();
        self.unreplicated_txns.clear();
    }

    /// Kafka's truncateFullyAndStartAt: the log was emptied and restarts at
    /// `offset`, so all state and all snapshots go.
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<()> {
        self.clear();
        self.delete_snapshots_below(i64::MAX)?;
        self.map_end_offset = offset;
        Ok(())
    }

    /// The partition directory was renamed.
    pub fn update_parent_dir(&mut self, dir: &Path) {
        self.dir = dir.to_path_buf();
    }

    /// Sets the map end offset to `map_end_offset` (everything below it is
    /// applied; normally the log end at a segment roll) and writes the state
    /// to `<dir>/<map_end_offset>.snapshot`, unless that snapshot exists
    /// already (it holds the same state: snapshots above a truncation point
    /// are deleted with it). Atomic: tmp file, fsync, rename.
    pub fn take_snapshot(&mut self, dir: &Path, map_end_offset: i64) -> Result<()> {
        debug_assert!(
            map_end_offset >= self.map_end_offset,
            "snapshot below applied state"
        );
        self.dir = dir.to_path_buf();
        self.map_end_offset = map_end_offset;
        if self.snapshots.contains(&map_end_offset) {
            return Ok(());
        }
        let path = snapshot_path(dir, map_end_offset);
        let mut entries: Vec<&ProducerStateEntry> = self.producers.values().collect();
        entries.sort_by_key(|e| e.producer_id);
        write_atomically(&path, &encode_snapshot(&entries))?;
        debug!(path = %path.display(), producers = entries.len(), "wrote producer state snapshot");
        self.snapshots.insert(map_end_offset);
        Ok(())
    }

    pub fn latest_snapshot_offset(&self) -> Option<i64> {
        self.snapshots.last().copied()
    }

    pub fn oldest_snapshot_offset(&self) -> Option<i64> {
        self.snapshots.first().copied()
    }

    /// Deletes the snapshot files of offsets below `offset` (retention).
    pub fn delete_snapshots_below(&mut self, offset: i64) -> Result<()> {
        let below: Vec<i64> = self.snapshots.range(..offset).copied().collect();
        for o in below {
            self.delete_snapshot(o)?;
        }
        Ok(())
    }

    fn delete_snapshot(&mut self, offset: i64) -> Result<()> {
        self.snapshots.remove(&offset);
        match fs::remove_file(snapshot_path(&self.dir, offset)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }
}

fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    next_seq as i64 == last_seq as i64 + 1 || (next_seq == 0 && last_seq == i32::MAX)
}

/// Kafka's checkSequence for client appends (without KIP-890 verification).
fn check_sequence(
    producer_id: i64,
    entry: Option<&ProducerStateEntry>,
    batch: &BatchView<'_>,
) -> Result<()> {
    // Unknown producer (new, or its state expired or was deleted with the
    // log's start): accept any sequence, as Kafka does since 2.5.
    let Some(entry) = entry else {
        return Ok(());
    };
    let first = batch.base_sequence();
    let out_of_order = |expected| StorageError::OutOfOrderSequence {
        producer_id,
        expected,
        got: first,
    };
    if batch.producer_epoch() != entry.producer_epoch {
        // A new epoch restarts the sequence at 0.
        if first != 0 && first != NO_SEQUENCE && entry.producer_epoch != NO_PRODUCER_EPOCH {
            return Err(out_of_order(0));
        }
    } else if entry.producer_epoch != NO_PRODUCER_EPOCH && !in_sequence(entry.last_seq(), first) {
        let last = entry.last_seq();
        return Err(out_of_order(if last == i32::MAX { 0 } else { last + 1 }));
    }
    Ok(())
}

/// The coordinator epoch in a COMMIT/ABORT marker's value
/// (`version i16, coordinatorEpoch i32`).
fn marker_coordinator_epoch(batch: &BatchView<'_>) -> Option<i32> {
    let mut c = VarintCursor::new(batch.records_payload());
    let _length = c.varint()?;
    let _attributes = c.byte()?;
    let _timestamp_delta = c.varlong()?;
    let _offset_delta = c.varint()?;
    let key_len = c.varint()?;
    c.take(usize::try_from(key_len).ok()?)?;
    let value_len = c.varint()?;
    let value = c.take(usize::try_from(value_len).ok()?)?;
    let epoch = value.get(2..6)?;
    Some(i32::from_be_bytes(epoch.try_into().ok()?))
}

pub fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(format!("{offset:020}{SNAPSHOT_SUFFIX}"))
}

/// Offsets of the snapshot files in `dir`; leftover `.tmp` files from a crash
/// during a snapshot write are deleted.
fn list_snapshots(dir: &Path) -> Result<BTreeSet<i64>> {
    let mut offsets = BTreeSet::new();
    let read_dir = match fs::read_dir(dir) {
        Ok(r) => r,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(offsets),
        Err(e) => return Err(e.into()),
    };
    for item in read_dir {
        let item = item?;
        let name = item.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(".snapshot.tmp") {
            fs::remove_file(item.path())?;
        } else if let Some(stem) = name.strip_suffix(SNAPSHOT_SUFFIX) {
            if !stem.is_empty() && stem.bytes().all(|b| b.is_ascii_digit()) {
                if let Ok(offset) = stem.parse::<i64>() {
                    offsets.insert(offset);
                }
            }
        }
    }
    Ok(offsets)
}

fn encode_snapshot(entries: &[&ProducerStateEntry]) -> Vec<u8> {
    let mut b = Vec::with_capacity(SNAPSHOT_HEADER_LEN + 4 + entries.len() * 64);
    b.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
    b.extend_from_slice(&[0; 4]); // CRC, filled in below
    b.extend_from_slice(&(entries.len() as i32).to_be_bytes());
    for e in entries {
        b.extend_from_slice(&e.producer_id.to_be_bytes());
        b.extend_from_slice(&e.producer_epoch.to_be_bytes());
        b.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
        b.extend_from_slice(&e.last_timestamp.to_be_bytes());
        b.extend_from_slice(&e.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
        b.push(e.batches.len() as u8);
        for m in &e.batches {
            b.extend_from_slice(&m.first_seq.to_be_bytes());
            b.extend_from_slice(&m.last_seq.to_be_bytes());
            b.extend_from_slice(&m.first_offset.to_be_bytes());
            b.extend_from_slice(&m.last_offset.to_be_bytes());
            b.extend_from_slice(&m.timestamp.to_be_bytes());
        }
    }
    let crc = crc32c::crc32c(&b[SNAPSHOT_HEADER_LEN..]);
    b[2..6].copy_from_slice(&crc.to_be_bytes());
    b
}

fn decode_snapshot(bytes: &[u8]) -> std::result::Result<Vec<ProducerStateEntry>, String> {
    decode_entries(bytes).map_err(|e| e.to_string())
}

type DecodeResult<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn decode_entries(bytes: &[u8]) -> DecodeResult<Vec<ProducerStateEntry>> {
    let mut r = Reader::new(bytes);
    let version = r.i16()?;
    if version != SNAPSHOT_VERSION {
        return Err(format!("unknown snapshot version {version}").into());
    }
    let stored = r.i32()? as u32;
    let computed = crc32c::crc32c(&bytes[SNAPSHOT_HEADER_LEN..]);
    if stored != computed {
        return Err(
            format!("CRC mismatch: stored {stored:#010x}, computed {computed:#010x}").into(),
        );
    }
    let count = r.i32()?;
    let count = usize::try_from(count).map_err(|_| format!("negative producer count {count}"))?;
    let mut entries = Vec::with_capacity(count.min(bytes.len() / 31));
    for _ in 0..count {
        let mut e = ProducerStateEntry::new(r.i64()?);
        e.producer_epoch = r.i16()?;
        e.coordinator_epoch = r.i32()?;
        e.last_timestamp = r.i64()?;
        let txn = r.i64()?;
        e.current_txn_first_offset = (txn >= 0).then_some(txn);
        let batches = r.i8()? as u8;
        if batches as usize > NUM_BATCHES_TO_RETAIN {
            return Err(format!("{batches} cached batches for producer {}", e.producer_id).into());
        }
        for _ in 0..batches {
            e.batches.push_back(BatchMetadata {
                first_seq: r.i32()?,
                last_seq: r.i32()?,
                first_offset: r.i64()?,
                last_offset: r.i64()?,
                timestamp: r.i64()?,
            });
        }
        entries.push(e);
    }
    r.finish()?;
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ottla_protocol::batch::{txn_marker_value, BatchBuilder, SimpleRecord};
    use AppendOrigin::{Client, Coordinator, Replication, Verbatim};

    const P1: i64 = 1000;
    const P2: i64 = 2000;
    const P3: i64 = 3000;

    fn data(pid: i64, epoch: i16, seq: i32, count: usize, offset: i64, txn: bool) -> Vec<u8> {
        let records: Vec<SimpleRecord> = (0..count)
            .map(|i| SimpleRecord {
                timestamp: 1_000 + offset,
                value: Some(vec![i as u8]),
                ..Default::default()
            })
            .collect();
        BatchBuilder {
            base_offset: offset,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            transactional: txn,
            ..Default::default()
        }
        .build(&records)
    }

    fn marker(
        pid: i64,
        epoch: i16,
        offset: i64,
        kind: ControlType,
        coordinator_epoch: i32,
    ) -> Vec<u8> {
        BatchBuilder {
            base_offset: offset,
            producer_id: pid,
            producer_epoch: epoch,
            transactional: true,
            ..Default::default()
        }
        .build_control(kind, 1_000 + offset, txn_marker_value(coordinator_epoch))
    }

    fn mirror_reset(offset: i64) -> Vec<u8> {
        BatchBuilder {
            base_offset: offset,
            ..Default::default()
        }
        .build_control(ControlType::MirrorPidReset, 1_000 + offset, Vec::new())
    }

    fn v(b: &[u8]) -> BatchView<'_> {
        BatchView::parse(b).unwrap()
    }

    fn empty_state() -> (tempfile::TempDir, ProducerStateManager) {
        let dir = tempfile::tempdir().unwrap();
        let (state, replay_from) = ProducerStateManager::load(dir.path(), 0, 0).unwrap();
        assert_eq!(replay_from, 0);
        (dir, state)
    }

    /// Checks the batch as the leader would (markers come from the
    /// coordinator), then applies it as the log does after writing it.
    fn append(s: &mut ProducerStateManager, b: &[u8]) -> Option<CompletedTxn> {
        let origin = if v(b).is_control() {
            Coordinator
        } else {
            Client
        };
        assert_eq!(s.check_append(&v(b), origin).unwrap(), AppendCheck::Append);
        let completed = s.update(&v(b));
        s.update_map_end_offset(v(b).next_offset());
        completed
    }

    fn producers(s: &ProducerStateManager) -> Vec<ProducerStateEntry> {
        let mut all: Vec<_> = s.active_producers().cloned().collect();
        all.sort_by_key(|e| e.producer_id);
        all
    }

    fn meta(first_seq: i32, last_seq: i32, first_offset: i64, last_offset: i64) -> BatchMetadata {
        BatchMetadata {
            first_seq,
            last_seq,
            first_offset,
            last_offset,
            timestamp: 1_000 + first_offset,
        }
    }

    #[test]
    fn duplicates_of_each_of_the_last_five_batches_are_detected() {
        let (_dir, mut s) = empty_state();
        for i in 0..6 {
            append(&mut s, &data(P1, 0, i * 2, 2, i as i64 * 10, false));
        }
        for i in 1..6 {
            // A retry carries no offsets yet.
            let retry = data(P1, 0, i * 2, 2, 0, false);
            let original = meta(i * 2, i * 2 + 1, i as i64 * 10, i as i64 * 10 + 1);
            assert_eq!(
                s.check_append(&v(&retry), Client).unwrap(),
                AppendCheck::Duplicate(original)
            );
        }
        // The oldest batch fell out of the cache.
        assert!(matches!(
            s.check_append(&v(&data(P1, 0, 0, 2, 0, false)), Client),
            Err(StorageError::OutOfOrderSequence {
                expected: 12,
                got: 0,
                ..
            })
        ));
        // Same first sequence, different range: not a duplicate.
        assert!(matches!(
            s.check_append(&v(&data(P1, 0, 10, 1, 0, false)), Client),
            Err(StorageError::OutOfOrderSequence { .. })
        ));
        // Another epoch: not a duplicate (and a new epoch must start at 0).
        assert!(matches!(
            s.check_append(&v(&data(P1, 1, 10, 2, 0, false)), Client),
            Err(StorageError::OutOfOrderSequence { expected: 0, .. })
        ));
        // Only client appends are deduplicated.
        assert_eq!(
            s.check_append(&v(&data(P1, 0, 10, 2, 0, false)), Replication)
                .unwrap(),
            AppendCheck::Append
        );
    }

    #[test]
    fn out_of_order_sequences_are_refused() {
        let (_dir, mut s) = empty_state();
        append(&mut s, &data(P1, 0, 0, 3, 0, false));
        assert!(matches!(
            s.check_append(&v(&data(P1, 0, 4, 1, 0, false)), Client),
            Err(StorageError::OutOfOrderSequence {
                producer_id: P1,
                expected: 3,
                got: 4
            })
        ));
        assert!(matches!(
            s.check_append(&v(&data(P1, 0, 1, 1, 0, false)), Client),
            Err(StorageError::OutOfOrderSequence {
                expected: 3,
                got: 1,
                ..
            })
        ));
        append(&mut s, &data(P1, 0, 3, 1, 3, false));
        assert_eq!(s.last_entry(P1).unwrap().last_seq(), 3);
        // Unknown producers may start anywhere (Kafka 2.5+).
        append(&mut s, &data(P2, 0, 77, 1, 4, false));
        // The coordinator's batches have no sequence checks.
        assert_eq!(
            s.check_append(&v(&data(P1, 0, 50, 1, 0, false)), Coordinator)
                .unwrap(),
            AppendCheck::Append
        );
    }

    #[test]
    fn older_epochs_are_fenced_and_new_epochs_restart_at_zero() {
        let (_dir, mut s) = empty_state();
        append(&mut s, &data(P1, 3, 0, 1, 0, false));
        append(&mut s, &data(P1, 3, 1, 1, 1, false));
        for origin in [Client, Coordinator] {
            assert!(matches!(
                s.check_append(&v(&data(P1, 2, 2, 1, 0, false)), origin),
                Err(StorageError::InvalidProducerEpoch {
                    producer_id: P1,
                    epoch: 2,
                    current: 3
                })
            ));
        }
        assert!(matches!(
            s.check_append(&v(&marker(P1, 2, 0, ControlType::Abort, 0)), Coordinator),
            Err(StorageError::InvalidProducerEpoch { .. })
        ));
        // Followers and mirrors trust the leader.
        for origin in [Replication, Verbatim] {
            assert_eq!(
                s.check_append(&v(&data(P1, 2, 9, 1, 0, false)), origin)
                    .unwrap(),
                AppendCheck::Append
            );
        }
        assert!(matches!(
            s.check_append(&v(&data(P1, 4, 5, 1, 0, false)), Client),
            Err(StorageError::OutOfOrderSequence {
                expected: 0,
                got: 5,
                ..
            })
        ));
        append(&mut s, &data(P1, 4, 0, 1, 2, false));
        let entry = s.last_entry(P1).unwrap();
        assert_eq!(entry.producer_epoch, 4);
        assert_eq!(entry.batches, VecDeque::from([meta(0, 0, 2, 2)]));
    }

    #[test]
    fn sequences_wrap_at_i32_max() {
        let (_dir, mut s) = empty_state();
        append(&mut s, &data(P1, 0, i32::MAX - 1, 2, 0, false));
        assert_eq!(s.last_entry(P1).unwrap().last_seq(), i32::MAX);
        append(&mut s, &data(P1, 0, 0, 1, 2, false));
        // A batch straddling the wrap.
        append(&mut s, &data(P2, 0, i32::MAX, 3, 3, false));
        assert_eq!(s.last_entry(P2).unwrap().last_seq(), 1);
        assert!(matches!(
            s.check_append(&v(&data(P2, 0, 0, 1, 0, false)), Client),
            Err(StorageError::OutOfOrderSequence {
                expected: 2,
                got: 0,
                ..
            })
        ));
        append(&mut s, &data(P2, 0, 2, 1, 6, false));
    }

    #[test]
    fn transactions_start_commit_and_abort() {
        let (_dir, mut s) = empty_state();
        assert_eq!(append(&mut s, &data(P1, 0, 0, 2, 0, true)), None);
        append(&mut s, &data(P1, 0, 2, 2, 2, true));
        assert_eq!(s.last_entry(P1).unwrap().current_txn_first_offset, Some(0));
        assert_eq!(s.first_unstable_offset(), Some(0));
        assert_eq!(s.first_undecided_offset(), Some(0));
        assert!(matches!(
            s.check_append(&v(&data(P1, 0, 4, 1, 0, false)), Client),
            Err(StorageError::InvalidTxnState(_))
        ));

        let commit = append(&mut s, &marker(P1, 0, 4, ControlType::Commit, 7)).unwrap();
        assert_eq!(
            commit,
            CompletedTxn {
                producer_id: P1,
                first_offset: 0,
                last_offset: 4,
                is_aborted: false
            }
        );
        let entry = s.last_entry(P1).unwrap();
        assert_eq!(
            (entry.current_txn_first_offset, entry.coordinator_epoch),
            (None, 7)
        );
        assert_eq!(s.first_undecided_offset(), None);
        // Decided but the marker is not replicated yet.
        assert_eq!(s.first_unstable_offset(), Some(0));
        s.on_high_watermark_updated(4);
        assert_eq!(s.first_unstable_offset(), Some(0));
        s.on_high_watermark_updated(5);
        assert_eq!(s.first_unstable_offset(), None);

        // After the marker, non-transactional writes are fine again.
        append(&mut s, &data(P1, 0, 4, 1, 5, false));
        append(&mut s, &data(P1, 0, 5, 1, 6, true));
        let abort = append(&mut s, &marker(P1, 0, 7, ControlType::Abort, 7)).unwrap();
        assert!(abort.is_aborted);
        assert_eq!((abort.first_offset, abort.last_offset), (6, 7));
        assert_eq!(s.last_stable_offset_for_completed(&abort), 8);
        assert_eq!(
            abort.to_aborted_txn(8),
            AbortedTxn {
                producer_id: P1,
                first_offset: 6,
                last_offset: 7,
                last_stable_offset: 8
            }
        );

        // A marker with no transaction completes nothing but records the epochs.
        assert_eq!(
            append(&mut s, &marker(P1, 1, 8, ControlType::Abort, 9)),
            None
        );
        let entry = s.last_entry(P1).unwrap();
        assert_eq!((entry.producer_epoch, entry.coordinator_epoch), (1, 9));
        assert!(entry.batches.is_empty());
        // A zombie coordinator is refused.
        assert!(matches!(
            s.check_append(&v(&marker(P1, 1, 0, ControlType::Commit, 8)), Coordinator),
            Err(StorageError::InvalidTxnState(_))
        ));
        // Clients cannot write control batches at all.
        assert!(matches!(
            s.check_append(&v(&marker(P1, 1, 0, ControlType::Commit, 9)), Client),
            Err(StorageError::Corrupt(_))
        ));
        assert!(matches!(
            s.check_append(&v(&mirror_reset(0)), Client),
            Err(StorageError::Corrupt(_))
        ));
    }

    #[test]
    fn lso_with_two_overlapping_transactions() {
        let (_dir, mut s) = empty_state();
        append(&mut s, &data(P1, 0, 0, 2, 0, true));
        append(&mut s, &data(P2, 0, 0, 2, 2, true));
        append(&mut s, &data(P1, 0, 2, 1, 4, true));
        assert_eq!(s.first_unstable_offset(), Some(0));

        let c1 = append(&mut s, &marker(P1, 0, 5, ControlType::Commit, 0)).unwrap();
        assert_eq!((c1.first_offset, c1.last_offset), (0, 5));
        // P2's transaction is still open: the LSO at P1's commit is its start.
        assert_eq!(s.last_stable_offset_for_completed(&c1), 2);
        assert_eq!(s.first_unstable_offset(), Some(0));
        s.on_high_watermark_updated(6);
        assert_eq!(s.first_unstable_offset(), Some(2));

        let a2 = append(&mut s, &marker(P2, 0, 6, ControlType::Abort, 0)).unwrap();
        assert!(a2.is_aborted);
        assert_eq!(s.last_stable_offset_for_completed(&a2), 7);
        assert_eq!(s.first_unstable_offset(), Some(2));
        s.on_high_watermark_updated(7);
        assert_eq!(s.first_unstable_offset(), None);
    }

    #[test]
    fn mirror_pid_reset_clears_all_producers_and_transactions() {
        let (_dir, mut s) = empty_state();
        append(&mut s, &data(P1, 0, 0, 2, 0, false));
        append(&mut s, &data(P2, 0, 0, 1, 2, true));
        assert_eq!(s.first_undecided_offset(), Some(2));
        assert_eq!(s.update(&v(&mirror_reset(3))), None);
        s.update_map_end_offset(4);
        assert_eq!(s.producer_count(), 0);
        assert_eq!(s.first_undecided_offset(), None);
        assert_eq!(s.first_unstable_offset(), None);
        // The old sequences mean nothing any more.
        assert_eq!(
            s.check_append(&v(&data(P1, 0, 0, 2, 0, false)), Client)
                .unwrap(),
            AppendCheck::Append
        );
        assert_eq!(
            s.check_append(&v(&data(P2, 0, 9, 1, 0, false)), Client)
                .unwrap(),
            AppendCheck::Append
        );
        // A reset carrying a producer id leaves no entry behind either.
        let with_pid = BatchBuilder {
            base_offset: 4,
            producer_id: P3,
            producer_epoch: 0,
            ..Default::default()
        }
        .build_control(ControlType::MirrorPidReset, 0, Vec::new());
        s.update(&v(&with_pid));
        assert_eq!(s.producer_count(), 0);
    }

    #[test]
    fn mirror_pid_reset_gives_the_same_state_live_and_in_recovery() {
        let batches = [
            data(P1, 0, 0, 2, 0, false),
            data(P2, 0, 0, 1, 2, true),
            mirror_reset(3),
            data(P3, 0, 0, 1, 4, false),
            data(P1, 1, 0, 1, 5, true),
        ];
        // Leader.
        let (dir, mut leader) = empty_state();
        for b in &batches {
            let origin = if v(b).is_control() { Verbatim } else { Client };
            leader.check_append(&v(b), origin).unwrap();
            leader.update(&v(b));
            leader.update_map_end_offset(v(b).next_offset());
            if v(b).base_offset() == 2 {
                leader.take_snapshot(dir.path(), 3).unwrap();
            }
        }
        // Follower replicating everything.
        let mut follower = ProducerStateManager::load(tempfile::tempdir().unwrap().path(), 0, 0)
            .unwrap()
            .0;
        for b in &batches {
            follower.check_append(&v(b), Replication).unwrap();
            follower.update(&v(b));
        }
        // Recovery from the snapshot taken before the reset.
        let (mut recovered, from) = ProducerStateManager::load(dir.path(), 0, 6).unwrap();
        assert_eq!(from, 3);
        assert_eq!(recovered.first_undecided_offset(), Some(2));
        for b in batches.iter().filter(|b| v(b).base_offset() >= from) {
            recovered.update(&v(b));
        }
        for s in [&follower, &recovered] {
            assert_eq!(producers(s), producers(&leader));
            assert_eq!(s.first_undecided_offset(), Some(5));
        }
        assert_eq!(
            producers(&leader)
                .iter()
                .map(|e| e.producer_id)
                .collect::<Vec<_>>(),
            vec![P1, P3]
        );
    }

    fn busy_state(dir: &Path) -> ProducerStateManager {
        let (mut s, _) = ProducerStateManager::load(dir, 0, 0).unwrap();
        for i in 0..6 {
            append(&mut s, &data(P1, 2, i, 1, i as i64, false));
        }
        append(&mut s, &data(P2, 0, 0, 2, 6, true));
        append(&mut s, &data(P3, 5, 0, 1, 8, true));
        append(&mut s, &marker(P3, 5, 9, ControlType::Commit, 4));
        s
    }

    #[test]
    fn snapshot_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = busy_state(dir.path());
        s.take_snapshot(dir.path(), 10).unwrap();
        assert!(snapshot_path(dir.path(), 10).exists());
        assert_eq!(
            snapshot_path(dir.path(), 10).file_name().unwrap(),
            "00000000000000000010.snapshot"
        );
        assert_eq!(s.latest_snapshot_offset(), Some(10));

        for log_end in [10, 15] {
            let (loaded, from) = ProducerStateManager::load(dir.path(), 0, log_end).unwrap();
            assert_eq!(from, 10);
            assert_eq!(loaded.map_end_offset(), 10);
            assert_eq!(producers(&loaded), producers(&s));
            assert_eq!(
                loaded.last_entry(P1).unwrap().batches.len(),
                NUM_BATCHES_TO_RETAIN
            );
            assert_eq!(loaded.first_undecided_offset(), Some(6));
            assert_eq!(loaded.last_entry(P3).unwrap().coordinator_epoch, 4);
            // All five cached batches still catch retries after a restart.
            for i in 1..6 {
                assert!(matches!(
                    loaded.check_append(&v(&data(P1, 2, i, 1, 0, false)), Client).unwrap(),
                    AppendCheck::Duplicate(m) if m.first_offset == i as i64
                ));
            }
        }
        // A snapshot at that offset exists: nothing is written.
        s.take_snapshot(dir.path(), 10).unwrap();
        assert_eq!(list_snapshots(dir.path()).unwrap(), BTreeSet::from([10]));
    }

    #[test]
    fn corrupt_snapshots_are_skipped_and_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = busy_state(dir.path());
        s.take_snapshot(dir.path(), 10).unwrap();
        let at_10 = producers(&s);
        append(&mut s, &data(P1, 2, 6, 1, 10, false));
        s.take_snapshot(dir.path(), 11).unwrap();
        append(&mut s, &data(P1, 2, 7, 1, 11, false));
        s.take_snapshot(dir.path(), 12).unwrap();

        // 12: a flipped bit in the body; 11: torn.
        let p12 = snapshot_path(dir.path(), 12);
        let mut bytes = fs::read(&p12).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        fs::write(&p12, bytes).unwrap();
        let p11 = snapshot_path(dir.path(), 11);
        let bytes = fs::read(&p11).unwrap();
        fs::write(&p11, &bytes[..bytes.len() / 2]).unwrap();

        let (loaded, from) = ProducerStateManager::load(dir.path(), 0, 12).unwrap();
        assert_eq!(from, 10);
        assert_eq!(producers(&loaded), at_10);
        assert!(!p12.exists() && !p11.exists());
        assert_eq!(loaded.latest_snapshot_offset(), Some(10));

        // Nothing valid at all: start empty at the log start.
        fs::write(snapshot_path(dir.path(), 10), b"junk").unwrap();
        let (loaded, from) = ProducerStateManager::load(dir.path(), 0, 12).unwrap();
        assert_eq!((from, loaded.producer_count()), (0, 0));
        assert_eq!(loaded.latest_snapshot_offset(), None);
    }

    #[test]
    fn load_drops_snapshots_out_of_the_log_range() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = busy_state(dir.path());
        for offset in [10, 20, 30, 40] {
            s.take_snapshot(dir.path(), offset).unwrap();
        }
        fs::write(dir.path().join("00000000000000000050.snapshot.tmp"), b"x").unwrap();
        fs::write(dir.path().join("00000000000000000000.log"), b"").unwrap();
        let (loaded, from) = ProducerStateManager::load(dir.path(), 10, 35).unwrap();
        assert_eq!(from, 30);
        assert_eq!(producers(&loaded), producers(&s));
        // At or below the log start, above the log end, and stale tmp files go.
        assert_eq!(
            list_snapshots(dir.path()).unwrap(),
            BTreeSet::from([20, 30])
        );
        assert!(!dir
            .path()
            .join("00000000000000000050.snapshot.tmp")
            .exists());
        assert_eq!(loaded.oldest_snapshot_offset(), Some(20));
        // No snapshot in range: empty, replay from the log start.
        let (loaded, from) = ProducerStateManager::load(dir.path(), 30, 35).unwrap();
        assert_eq!((from, loaded.producer_count()), (30, 0));
    }

    #[test]
    fn truncate_and_reload_goes_back_to_an_earlier_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = busy_state(dir.path());
        s.take_snapshot(dir.path(), 10).unwrap();
        let at_10 = producers(&s);
        append(&mut s, &data(P2, 0, 2, 1, 10, true));
        append(&mut s, &marker(P2, 0, 11, ControlType::Abort, 0));
        s.take_snapshot(dir.path(), 12).unwrap();
        append(&mut s, &data(P1, 2, 6, 1, 12, false));
        assert_eq!(s.first_undecided_offset(), None);

        let from = s.truncate_and_reload(dir.path(), 0, 11).unwrap();
        assert_eq!(from, 10);
        assert_eq!(s.map_end_offset(), 10);
        assert_eq!(producers(&s), at_10);
        assert_eq!(s.first_undecided_offset(), Some(6));
        assert_eq!(s.first_unstable_offset(), Some(6));
        assert!(!snapshot_path(dir.path(), 12).exists());

        // Already ending there: only the log start is applied.
        append(&mut s, &data(P1, 2, 6, 1, 10, false));
        let before = producers(&s);
        assert_eq!(s.truncate_and_reload(dir.path(), 0, 11).unwrap(), 11);
        assert_eq!(producers(&s), before);

        // Below every snapshot: empty at the log start.
        assert_eq!(s.truncate_and_reload(dir.path(), 0, 5).unwrap(), 0);
        assert_eq!(s.producer_count(), 0);
        assert_eq!(s.latest_snapshot_offset(), None);
    }

    #[test]
    fn snapshot_deletion_and_full_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = busy_state(dir.path());
        for offset in [10, 20, 30] {
            s.take_snapshot(dir.path(), offset).unwrap();
        }
        s.delete_snapshots_below(30).unwrap();
        assert_eq!(list_snapshots(dir.path()).unwrap(), BTreeSet::from([30]));
        s.truncate_fully_and_start_at(100).unwrap();
        assert!(list_snapshots(dir.path()).unwrap().is_empty());
        assert_eq!((s.map_end_offset(), s.producer_count()), (100, 0));
        assert!(s.is_empty());
    }

    #[test]
    fn expiration_spares_producers_in_a_transaction() {
        let (_dir, mut s) = empty_state();
        append(&mut s, &data(P1, 0, 0, 1, 0, false)); // timestamp 1000
        append(&mut s, &data(P2, 0, 0, 1, 1, true)); // timestamp 1001
        append(&mut s, &data(P3, 0, 0, 1, 500, false)); // timestamp 1500
        s.remove_expired(2_000, 1_000);
        let left: Vec<i64> = producers(&s).iter().map(|e| e.producer_id).collect();
        assert_eq!(left, vec![P2, P3]);
        s.remove_expired(1_000_000, 1_000);
        assert_eq!(producers(&s).len(), 1);
        assert_eq!(s.first_undecided_offset(), Some(1));
    }

    #[test]
    fn log_start_increment_drops_old_unreplicated_txns() {
        let (_dir, mut s) = empty_state();
        append(&mut s, &data(P1, 0, 0, 1, 0, true));
        append(&mut s, &marker(P1, 0, 1, ControlType::Commit, 0));
        assert_eq!(s.first_unstable_offset(), Some(0));
        s.on_log_start_offset_incremented(5);
        assert_eq!(s.first_unstable_offset(), None);
        assert_eq!(s.map_end_offset(), 5);
    }

    #[test]
    fn batches_without_producer_id_are_ignored() {
        let (_dir, mut s) = empty_state();
        let plain = BatchBuilder::default().build(&[SimpleRecord::default()]);
        assert_eq!(
            s.check_append(&v(&plain), Client).unwrap(),
            AppendCheck::Append
        );
        assert_eq!(s.update(&v(&plain)), None);
        assert!(s.is_empty());
    }
}
