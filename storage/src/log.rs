//! A partition's log: an ordered set of segments plus the state Kafka keeps
//! beside them (leader epochs, producer state, high watermark, log start
//! offset). Writers take `&mut self`; readers take `&self` and get file
//! slices they read after releasing whatever lock the caller holds.

use std::collections::BTreeMap;
use std::fs;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use ottla_protocol::batch::{BatchView, BatchViewMut, Compression, TimestampType};
use ottla_protocol::records::{
    first_record_at_or_after, records_section, validate_producer_records, walk_records,
};
use tracing::{info, warn};

use crate::cleaner_progress::CleanerProgress;
use crate::config::LogConfig;
use crate::epoch_cache::LeaderEpochCache;
use crate::error::{Result, StorageError};
use crate::log_file::OpenLogFiles;
use crate::producer_state::{AppendCheck, AppendOrigin, CompletedTxn, ProducerStateManager};
use crate::segment::{
    now_wall_ms, parse_offset_file_name, remove_if_exists, segment_file_name, BatchLocation,
    FileSlice, LogSegment,
};
use crate::txn_index::AbortedTxn;

/// How far a read may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchIsolation {
    /// Followers and mirrors read up to the log end.
    LogEnd,
    /// read_uncommitted consumers read up to the high watermark.
    HighWatermark,
    /// read_committed consumers read up to the last stable offset.
    TxnCommitted,
}

/// What the caller knows when it opens a log.
#[derive(Debug, Clone, Default)]
pub struct LogOpenOptions {
    /// Offset up to which data is known to be flushed (from the log dir's
    /// recovery-point checkpoint). Only segments from here on are rescanned
    /// after an unclean shutdown.
    pub recovery_point: i64,
    pub log_start_offset: i64,
    pub high_watermark: i64,
    /// Whether the log dir was shut down cleanly (indexes and producer
    /// snapshots can be trusted).
    pub clean_shutdown: bool,
    /// The open-file budget the log's segments share.
    pub open_files: OpenLogFiles,
}

/// Outcome of an append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    /// LogAppendTime stamped on the batches, or -1 under CreateTime.
    pub log_append_time: i64,
    pub log_start_offset: i64,
    /// The batch was a retry of one already in the log (idempotent producer):
    /// nothing was written and the offsets are the original ones.
    pub duplicate: bool,
    pub record_count: usize,
}

/// Outcome of a read.
#[derive(Debug, Clone)]
pub struct ReadInfo {
    /// Whole batches, or None when there is nothing to return.
    pub slice: Option<FileSlice>,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    /// For read_committed reads: aborted transactions overlapping the slice.
    pub aborted: Option<Vec<AbortedTxn>>,
}

/// An offset found by timestamp (ListOffsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    pub offset: i64,
    pub timestamp: i64,
    pub leader_epoch: Option<i32>,
}

pub struct PartitionLog {
    dir: PathBuf,
    config: LogConfig,
    segments: BTreeMap<i64, LogSegment>,
    log_start_offset: i64,
    log_end_offset: i64,
    high_watermark: i64,
    recovery_point: i64,
    epoch_cache: LeaderEpochCache,
    producers: ProducerStateManager,
    unflushed_records: i64,
    last_flush_ms: i64,
    /// A segment was created since the last flush: its files and the
    /// directory need an fsync even when no record was appended.
    segments_created: bool,
    offline: bool,
    cleaner: CleanerProgress,
    open_files: OpenLogFiles,
}

impl PartitionLog {
    /// Opens (or creates) the log in `dir`, recovering what an unclean
    /// shutdown may have left: torn tails are cut, indexes rebuilt, the epoch
    /// cache and producer state made consistent with the data.
    pub fn open(dir: &Path, config: LogConfig, opts: LogOpenOptions) -> Result<Self> {
        fs::create_dir_all(dir)?;
        remove_leftovers(dir)?;
        let now = now_wall_ms();
        let mut bases: Vec<i64> = fs::read_dir(dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| parse_offset_file_name(e.file_name().to_str()?, ".log"))
            .collect();
        bases.sort_unstable();
        // Segments from the one holding the recovery point on are rescanned
        // after an unclean shutdown; all earlier data was flushed.
        let recover_from = if opts.clean_shutdown {
            i64::MAX
        } else {
            bases
                .iter()
                .rev()
                .find(|&&b| b <= opts.recovery_point)
                .copied()
                .unwrap_or(i64::MIN)
        };
        let mut epoch_cache = match LeaderEpochCache::open(dir) {
            Ok(cache) => cache,
            Err(StorageError::CorruptFile { path, reason }) => {
                warn!(path = %path.display(), %reason, "unreadable leader epoch checkpoint; rebuilding it from the log");
                LeaderEpochCache::reset(dir)?
            }
            Err(e) => return Err(e),
        };
        let mut segments = BTreeMap::new();
        let mut needs_recovery = Vec::new();
        for (i, &base) in bases.iter().enumerate() {
            let active = i + 1 == bases.len();
            if base >= recover_from {
                needs_recovery.push(base);
                continue;
            }
            match LogSegment::open(
                dir,
                base,
                config.segment_index_bytes,
                config.index_interval_bytes,
                active,
                &opts.open_files,
            ) {
                Ok(seg) => {
                    segments.insert(base, seg);
                }
                Err(StorageError::CorruptFile { path, reason }) => {
                    warn!(path = %path.display(), %reason, "index failed its sanity check; rebuilding segment");
                    needs_recovery.push(base);
                }
                Err(e) => return Err(e),
            }
        }
        needs_recovery.sort_unstable();
        let first_recovered = needs_recovery.first().copied();

        // Producer state up to the first segment to recover comes from the
        // newest snapshot plus a replay of the trusted segments after it.
        let start_hint = bases
            .first()
            .copied()
            .unwrap_or(opts.log_start_offset)
            .max(opts.log_start_offset);
        let trusted_end = match first_recovered {
            Some(b) => b,
            None => segments
                .values()
                .next_back()
                .map_or(start_hint, |s| s.next_offset()),
        };
        let (mut producers, replay_from) =
            ProducerStateManager::load(dir, start_hint, trusted_end)?;
        for seg in segments.values() {
            if seg.next_offset() <= replay_from || seg.base_offset() >= trusted_end {
                continue;
            }
            seg.scan(0, |loc, view| {
                if loc.base_offset >= replay_from {
                    producers.update(&view);
                }
                ControlFlow::Continue(())
            })?;
        }

        // The epoch checkpoint is fsynced only when the log flushes: it can
        // lack entries for the segments being recovered, or (power loss) be
        // empty. Its entries are rebuilt from the batches of every segment
        // from the first one rescanned on, in offset order.
        let epochs_from = if epoch_cache.is_empty() {
            bases.first().copied()
        } else {
            first_recovered
        };
        if let Some(from) = epochs_from {
            epoch_cache.truncate_from_end(from)?;
        }
        let rescanned = bases
            .iter()
            .copied()
            .filter(|&b| epochs_from.is_some_and(|from| b >= from));

        // Rescan the untrusted segments, rebuilding everything derived.
        let mut truncated_at: Option<i64> = None;
        for base in rescanned {
            if needs_recovery.binary_search(&base).is_err() {
                if let Some(seg) = segments.get(&base) {
                    read_epochs(seg, &mut epoch_cache)?;
                }
                continue;
            }
            if truncated_at.is_some() {
                // Everything after a corrupt batch goes, as in Kafka.
                for suffix in [".log", ".index", ".timeindex", ".txnindex"] {
                    remove_if_exists(&segment_file_name(dir, base, suffix))?;
                }
                warn!(dir = %dir.display(), base, "deleted segment after a corrupt tail");
                continue;
            }
            let mut seg = LogSegment::open_for_recovery(
                dir,
                base,
                config.segment_index_bytes,
                config.index_interval_bytes,
                &opts.open_files,
            )?;
            let next_base = bases.iter().find(|&&b| b > base).copied();
            let truncated = seg.recover(usize::MAX, next_base, |view| {
                if let Err(e) = assign_epoch(&mut epoch_cache, view) {
                    warn!(error = %e, "leader epoch cache update failed during recovery");
                }
                let done = producers.update(view)?;
                aborted_txn_entry(&producers, &done)
            })?;
            if truncated > 0 {
                warn!(dir = %dir.display(), base, bytes = truncated, "truncated a torn or corrupt tail during recovery");
                truncated_at = Some(seg.next_offset());
            }
            info!(dir = %dir.display(), base, "recovered segment");
            segments.insert(base, seg);
        }

        let mut log = Self {
            dir: dir.to_path_buf(),
            segments,
            log_start_offset: opts.log_start_offset,
            log_end_offset: 0,
            high_watermark: 0,
            recovery_point: 0,
            epoch_cache,
            producers,
            unflushed_records: 0,
            last_flush_ms: now,
            segments_created: false,
            offline: false,
            cleaner: CleanerProgress::default(),
            config,
            open_files: opts.open_files.clone(),
        };
        if log.segments.is_empty() {
            log.add_segment(opts.log_start_offset.max(0), now)?;
        }
        log.active_segment_mut().reactivate()?;
        let last = log.active_segment();
        log.log_end_offset = last.next_offset();
        let first_base = log.segments.keys().next().copied().unwrap_or(0);
        log.log_start_offset = opts
            .log_start_offset
            .max(first_base)
            .min(log.log_end_offset);
        log.recovery_point = if opts.clean_shutdown {
            log.log_end_offset
        } else {
            opts.recovery_point.min(log.log_end_offset)
        };
        log.epoch_cache.truncate_from_end(log.log_end_offset)?;
        log.epoch_cache.truncate_from_start(log.log_start_offset)?;
        log.producers.update_map_end_offset(log.log_end_offset);
        log.set_high_watermark(opts.high_watermark);
        Ok(log)
    }

    /// Creates an empty segment at `base`, the new active one.
    fn add_segment(&mut self, base: i64, now: i64) -> Result<()> {
        let seg = LogSegment::create(
            &self.dir,
            base,
            self.config.segment_index_bytes,
            self.config.index_interval_bytes,
            now,
            &self.open_files,
        )?;
        self.segments.insert(base, seg);
        self.segments_created = true;
        Ok(())
    }

    fn active_segment(&self) -> &LogSegment {
        self.segments
            .values()
            .next_back()
            .expect("a log always has a segment")
    }

    fn active_segment_mut(&mut self) -> &mut LogSegment {
        self.segments
            .values_mut()
            .next_back()
            .expect("a log always has a segment")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn config(&self) -> &LogConfig {
        &self.config
    }
    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
    }
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
    }
    pub fn is_offline(&self) -> bool {
        self.offline
    }
    pub fn size_bytes(&self) -> u64 {
        self.segments.values().map(LogSegment::size).sum()
    }
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }
    pub fn segment_bases(&self) -> Vec<i64> {
        self.segments.keys().copied().collect()
    }
    pub fn epoch_cache(&self) -> &LeaderEpochCache {
        &self.epoch_cache
    }
    pub fn producer_state(&self) -> &ProducerStateManager {
        &self.producers
    }
    pub fn latest_epoch(&self) -> Option<i32> {
        self.epoch_cache.latest_epoch()
    }

    /// Records that this replica became leader in `epoch`, starting at the
    /// log end, as Kafka does on a leadership change, so OffsetForLeaderEpoch
    /// answers for the new epoch before anything is appended in it.
    pub fn assign_leader_epoch(&mut self, epoch: i32) -> Result<()> {
        self.ensure_online()?;
        if epoch >= 0 && self.epoch_cache.latest_epoch().is_none_or(|e| epoch > e) {
            let end = self.log_end_offset;
            let r = self.epoch_cache.assign(epoch, end);
            self.guard(r)?;
        }
        Ok(())
    }

    /// OffsetForLeaderEpoch: `(epoch, end offset)` for the largest epoch <= `epoch`.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        self.epoch_cache.end_offset_for(epoch, self.log_end_offset)
    }

    /// LSO: the first offset of the earliest open transaction, or the high watermark.
    pub fn last_stable_offset(&self) -> i64 {
        self.producers
            .first_unstable_offset()
            .map_or(self.high_watermark, |o| o.min(self.high_watermark))
    }

    /// Sets the high watermark (the caller's replication logic decides it),
    /// clamped to [log start, log end].
    pub fn set_high_watermark(&mut self, hw: i64) {
        self.high_watermark = hw.clamp(self.log_start_offset, self.log_end_offset);
        self.producers
            .on_high_watermark_updated(self.high_watermark);
    }

    fn ensure_online(&self) -> Result<()> {
        if self.offline {
            return Err(StorageError::Offline {
                dir: self.dir.clone(),
                source: std::io::Error::other("log is offline after an earlier I/O error"),
            });
        }
        Ok(())
    }

    /// Takes the log offline after an I/O error found outside its own
    /// operations (an fsync before its closed file's descriptor went).
    pub fn fail(&mut self, error: std::io::Error) {
        let _ = self.guard::<()>(Err(StorageError::Io(error)));
    }

    /// Marks the log offline on I/O errors: nothing more is written, so an
    /// unknown on-disk state cannot be made worse.
    fn guard<T>(&mut self, r: Result<T>) -> Result<T> {
        match r {
            Err(StorageError::Io(source)) => {
                self.offline = true;
                tracing::error!(dir = %self.dir.display(), error = %source, "log is going offline after an I/O error; fix the disk and restart the broker");
                Err(StorageError::Offline {
                    dir: self.dir.clone(),
                    source,
                })
            }
            other => other,
        }
    }

    /// Leader append: validates client batches, assigns offsets, stamps the
    /// leader epoch (and LogAppendTime if configured), checks producer
    /// sequences, then writes. The whole request is rejected if any batch is.
    pub fn append_as_leader(
        &mut self,
        records: &mut [u8],
        leader_epoch: i32,
        origin: AppendOrigin,
        now_ms: i64,
    ) -> Result<AppendInfo> {
        self.ensure_online()?;
        let validated = self.validate_leader_batches(records, origin, now_ms)?;
        if let Some(dup) = validated.duplicate {
            return Ok(dup);
        }
        let log_append_time =
            (self.config.message_timestamp_type == TimestampType::LogAppendTime).then_some(now_ms);
        let mut next = self.log_end_offset;
        let mut pos = 0;
        while pos < records.len() {
            let size = BatchView::parse(&records[pos..])?.size();
            let mut m = BatchViewMut::new(&mut records[pos..pos + size]);
            m.set_base_offset(next);
            m.set_partition_leader_epoch(leader_epoch);
            if let Some(t) = log_append_time {
                m.set_log_append_time(t);
            }
            next = m.view().next_offset();
            pos += size;
        }
        let mut info = self.write_batches(records, now_ms)?;
        info.log_append_time = log_append_time.unwrap_or(-1);
        Ok(info)
    }

    fn validate_leader_batches(
        &self,
        records: &[u8],
        origin: AppendOrigin,
        now_ms: i64,
    ) -> Result<Validated> {
        if records.is_empty() {
            return Err(StorageError::Corrupt(
                ottla_protocol::batch::BatchError::Invalid("no record batches"),
            ));
        }
        let mut pos = 0;
        // (producer id, epoch, last sequence) of the previous batch in this
        // request, so several batches of one producer chain correctly.
        let mut previous: Option<(i64, i16, i32)> = None;
        // Records of the request so far, and those without a key.
        let mut records_seen = 0;
        let mut keyless = Vec::new();
        while pos < records.len() {
            let view = BatchView::parse(&records[pos..])?;
            if view.size() > self.config.max_message_bytes {
                return Err(StorageError::MessageTooLarge {
                    size: view.size(),
                    limit: self.config.max_message_bytes,
                });
            }
            view.validate()?;
            if origin == AppendOrigin::Client {
                if view.is_control() {
                    return Err(StorageError::Corrupt(
                        ottla_protocol::batch::BatchError::Invalid(
                            "clients may not write control batches",
                        ),
                    ));
                }
                validate_producer_records(&view)?;
                if self.config.cleanup_policy.compact {
                    keyless.extend(
                        keyless_records(&view)?
                            .into_iter()
                            .map(|i| records_seen + i),
                    );
                }
                records_seen += view.record_count();
            }
            if view.is_transactional() && !view.has_producer_id() {
                return Err(StorageError::InvalidTxnState(
                    "transactional batch without a producer id".into(),
                ));
            }
            if self.config.message_timestamp_type == TimestampType::CreateTime && !view.is_control()
            {
                self.validate_timestamp(view.base_timestamp(), now_ms)?;
                self.validate_timestamp(view.max_timestamp(), now_ms)?;
            }
            if view.has_producer_id() {
                let chained = previous.filter(|(pid, _, _)| *pid == view.producer_id());
                match chained {
                    Some((_, epoch, last_seq)) => {
                        let expected = last_seq.wrapping_add(1).max(0);
                        if view.producer_epoch() != epoch || view.base_sequence() != expected {
                            return Err(StorageError::OutOfOrderSequence {
                                producer_id: view.producer_id(),
                                expected,
                                got: view.base_sequence(),
                            });
                        }
                    }
                    None => {
                        if let AppendCheck::Duplicate(meta) =
                            self.producers.check_append(&view, origin)?
                        {
                            // Kafka answers a retried batch with its original
                            // offsets; only single-batch requests can be retries.
                            return Ok(Validated {
                                duplicate: Some(AppendInfo {
                                    first_offset: meta.first_offset,
                                    last_offset: meta.last_offset,
                                    log_append_time: -1,
                                    log_start_offset: self.log_start_offset,
                                    duplicate: true,
                                    record_count: 0,
                                }),
                            });
                        }
                    }
                }
                previous = Some((
                    view.producer_id(),
                    view.producer_epoch(),
                    view.last_sequence(),
                ));
            }
            pos += view.size();
        }
        if !keyless.is_empty() {
            return Err(StorageError::KeylessRecords { indexes: keyless });
        }
        Ok(Validated { duplicate: None })
    }

    fn validate_timestamp(&self, ts: i64, now_ms: i64) -> Result<()> {
        if ts < 0 && ts != -1 {
            return Err(StorageError::InvalidTimestamp {
                timestamp: ts,
                reason: "negative timestamp",
            });
        }
        if ts >= 0 && now_ms.saturating_sub(ts) > self.config.message_timestamp_before_max_ms {
            return Err(StorageError::InvalidTimestamp {
                timestamp: ts,
                reason: "older than message.timestamp.before.max.ms allows",
            });
        }
        if ts.saturating_sub(now_ms) > self.config.message_timestamp_after_max_ms {
            return Err(StorageError::InvalidTimestamp {
                timestamp: ts,
                reason: "further in the future than message.timestamp.after.max.ms allows",
            });
        }
        Ok(())
    }

    /// Verbatim append: batches that already carry their offsets and leader
    /// epochs (a follower's fetch, or a source cluster when mirroring) are
    /// stored byte for byte. Offsets must continue at or after the log end
    /// (gaps are legal: compacted sources have them) and increase.
    pub fn append_verbatim(&mut self, records: &[u8], now_ms: i64) -> Result<AppendInfo> {
        self.ensure_online()?;
        let mut expected = self.log_end_offset;
        let mut pos = 0;
        while pos < records.len() {
            let view = BatchView::parse(&records[pos..])?;
            view.validate()?;
            if view.base_offset() < expected {
                return Err(StorageError::NonContiguousOffsets {
                    first_offset: view.base_offset(),
                    log_end_offset: expected,
                });
            }
            expected = view.next_offset();
            pos += view.size();
        }
        if records.is_empty() {
            return Ok(AppendInfo {
                first_offset: self.log_end_offset,
                last_offset: self.log_end_offset - 1,
                log_append_time: -1,
                log_start_offset: self.log_start_offset,
                duplicate: false,
                record_count: 0,
            });
        }
        self.write_batches(records, now_ms)
    }

    /// Writes batches with final offsets: rolls if needed, appends to the
    /// active segment, then updates the epoch cache, producer state and
    /// transaction index from the batches, and flushes per policy.
    fn write_batches(&mut self, records: &[u8], now_ms: i64) -> Result<AppendInfo> {
        let mut locations = Vec::new();
        let mut pos = 0;
        let mut record_count = 0usize;
        while pos < records.len() {
            let view = BatchView::parse(&records[pos..])?;
            locations.push(BatchLocation {
                position: pos as u64,
                size: view.size(),
                base_offset: view.base_offset(),
                last_offset: view.last_offset(),
                max_timestamp: view.max_timestamp(),
            });
            record_count += view.record_count().max(0) as usize;
            pos += view.size();
        }
        let first = locations.first().expect("at least one batch").base_offset;
        let last = locations.last().expect("at least one batch").last_offset;
        let r = self.maybe_roll(records.len(), last, now_ms);
        self.guard(r)?;
        let r = self.active_segment_mut().append(records, &locations);
        self.guard(r)?;
        self.log_end_offset = last + 1;
        for loc in &locations {
            let pos = loc.position as usize;
            let view = BatchView::parse(&records[pos..pos + loc.size])?;
            let r = assign_epoch(&mut self.epoch_cache, &view);
            self.guard(r)?;
            if let Some(done) = self.producers.update(&view) {
                if let Some(entry) = aborted_txn_entry(&self.producers, &done) {
                    let r = self.active_segment_mut().append_aborted_txn(&entry);
                    self.guard(r)?;
                }
            }
        }
        self.producers.update_map_end_offset(self.log_end_offset);
        self.unflushed_records += record_count as i64;
        if self.unflushed_records >= self.config.flush_messages {
            self.flush()?;
        }
        Ok(AppendInfo {
            first_offset: first,
            last_offset: last,
            log_append_time: -1,
            log_start_offset: self.log_start_offset,
            duplicate: false,
            record_count,
        })
    }

    fn maybe_roll(&mut self, bytes: usize, last_offset: i64, now_ms: i64) -> Result<()> {
        let roll = self.active_segment().must_roll(
            bytes,
            last_offset,
            self.config.segment_bytes,
            self.config.segment_ms,
            now_ms,
        );
        if roll {
            self.roll(now_ms)?;
        }
        Ok(())
    }

    /// Starts a new active segment at the log end offset.
    pub fn roll(&mut self, now_ms: i64) -> Result<()> {
        let base = self.log_end_offset;
        if self.active_segment().base_offset() == base {
            return Ok(());
        }
        self.active_segment_mut().seal()?;
        self.add_segment(base, now_ms)?;
        // Kafka snapshots producer state at every roll so recovery replays at
        // most one segment.
        self.producers.take_snapshot(&self.dir, base)?;
        Ok(())
    }

    /// fsyncs everything not yet flushed and advances the recovery point.
    /// A log with nothing new since its last flush costs no fsync: a clean
    /// stop of 10,000 idle partitions must not sync each of them again.
    pub fn flush(&mut self) -> Result<()> {
        if self.is_flushed() {
            return Ok(());
        }
        let from = self.recovery_point;
        let created = self.segments_created;
        let r = self
            .segments
            .values()
            .filter(|s| s.next_offset() > from || (created && s.is_empty()))
            .try_for_each(LogSegment::flush);
        self.guard(r)?;
        // Before the recovery point moves past them, the epochs of the data
        // it covers must be durable: recovery will not rescan that data.
        let r = self.epoch_cache.flush();
        self.guard(r)?;
        let r = fsync_dir(&self.dir);
        self.guard(r)?;
        self.recovery_point = self.log_end_offset;
        self.unflushed_records = 0;
        self.segments_created = false;
        self.last_flush_ms = now_wall_ms();
        Ok(())
    }

    /// Nothing to fsync: no record past the recovery point and no new
    /// segment. An epoch checkpoint changed without records (a new epoch at
    /// the log end, as every restart of a lone node makes, or a truncation)
    /// may stay unsynced until records come: an epoch entry with no data
    /// behind it is safe to lose, open cuts entries past the log end again,
    /// and an unreadable checkpoint is rebuilt from the segments.
    fn is_flushed(&self) -> bool {
        self.recovery_point == self.log_end_offset && !self.segments_created
    }

    /// Forgets producers idle for `expiration_ms` (`producer.id.expiration.ms`),
    /// except those in a transaction; returns how many were removed.
    pub fn expire_producers(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.active_producers().count();
        self.producers.remove_expired(now_ms, expiration_ms);
        before - self.producers.active_producers().count()
    }

    /// Time-based flush (`flush.ms`), called periodically by the log manager.
    pub fn maybe_flush_by_time(&mut self, now_ms: i64) -> Result<()> {
        if self.recovery_point < self.log_end_offset
            && now_ms.saturating_sub(self.last_flush_ms) >= self.config.flush_ms
        {
            self.flush()?;
        }
        Ok(())
    }

    /// Reads whole batches from `offset`, at most `max_bytes` (but at least
    /// one whole batch when `min_one_batch`), never past the isolation bound.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        isolation: FetchIsolation,
        min_one_batch: bool,
    ) -> Result<ReadInfo> {
        let upper = match isolation {
            FetchIsolation::LogEnd => self.log_end_offset,
            FetchIsolation::HighWatermark => self.high_watermark,
            FetchIsolation::TxnCommitted => self.last_stable_offset(),
        };
        let mut info = ReadInfo {
            slice: None,
            high_watermark: self.high_watermark,
            last_stable_offset: self.last_stable_offset(),
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset,
            aborted: None,
        };
        if offset < self.log_start_offset || offset > self.log_end_offset {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.log_end_offset,
            });
        }
        if offset >= upper {
            return Ok(info);
        }
        let start_segment = self
            .segments
            .range(..=offset)
            .next_back()
            .map(|(b, _)| *b)
            .unwrap_or(i64::MIN);
        for seg in self.segments.range(start_segment..).map(|(_, s)| s) {
            if seg.base_offset() >= upper {
                break;
            }
            let max_position = if upper < seg.next_offset() {
                Some(seg.position_of(upper)?)
            } else {
                None
            };
            if let Some(slice) = seg.read(offset, max_bytes, max_position, min_one_batch)? {
                info.slice = Some(slice);
                break;
            }
        }
        if isolation == FetchIsolation::TxnCommitted && info.slice.is_some() {
            info.aborted = Some(self.collect_aborted(offset, upper));
        }
        Ok(info)
    }

    /// Aborted transactions overlapping `[from, upper)`, for read_committed fetches.
    pub fn collect_aborted(&self, from: i64, upper: i64) -> Vec<AbortedTxn> {
        let mut out = Vec::new();
        for seg in self.segments.values() {
            if seg.next_offset() <= from && seg.txn_index().is_empty() {
                continue;
            }
            if seg.base_offset() >= upper {
                break;
            }
            out.extend(seg.txn_index().collect_aborted(from, upper));
        }
        out
    }

    /// The first offset whose record timestamp is >= `timestamp`.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<TimestampOffset>> {
        for seg in self.segments.values() {
            if seg.max_timestamp() < timestamp || seg.next_offset() <= self.log_start_offset {
                continue;
            }
            if let Some((_, batch)) = seg.find_by_timestamp(timestamp, self.log_start_offset)? {
                let view = BatchView::parse(&batch)?;
                if let Some((offset, ts)) = first_record_at_or_after(&view, timestamp)? {
                    let offset = offset.max(self.log_start_offset);
                    return Ok(Some(TimestampOffset {
                        offset,
                        timestamp: ts,
                        leader_epoch: self.epoch_cache.epoch_for_offset(offset),
                    }));
                }
            }
        }
        Ok(None)
    }

    /// ListOffsets MAX_TIMESTAMP: the record with the largest timestamp.
    pub fn offset_of_max_timestamp(&self) -> Result<Option<TimestampOffset>> {
        let Some(seg) = self
            .segments
            .values()
            .filter(|s| !s.is_empty() && s.next_offset() > self.log_start_offset)
            .max_by_key(|s| s.max_timestamp())
        else {
            return Ok(None);
        };
        let max = seg.max_timestamp();
        if let Some((_, batch)) = seg.find_by_timestamp(max, self.log_start_offset)? {
            let view = BatchView::parse(&batch)?;
            if let Some((offset, ts)) = first_record_at_or_after(&view, max)? {
                return Ok(Some(TimestampOffset {
                    offset,
                    timestamp: ts,
                    leader_epoch: self.epoch_cache.epoch_for_offset(offset),
                }));
            }
        }
        Ok(None)
    }

    /// Removes everything at and after `offset` (follower divergence, mirror
    /// alignment to the last mirrored epoch, failover truncation to the LSO).
    pub fn truncate_to(&mut self, offset: i64) -> Result<()> {
        self.ensure_online()?;
        if offset >= self.log_end_offset {
            // Nothing to cut, but the epoch cache may end in an epoch this
            // log led without appending to it (its start is the log end):
            // a follower that kept it would send it as its last fetched
            // epoch, be told to truncate, and never get past it (as
            // Kafka's truncateTo, which cuts the cache here too).
            let end = self.log_end_offset;
            let r = self.epoch_cache.truncate_from_end(end);
            return self.guard(r);
        }
        if offset <= self.log_start_offset {
            return self.truncate_fully_and_start_at(offset.max(self.log_start_offset));
        }
        let r = self.truncate_segments(offset);
        self.guard(r)
    }

    fn truncate_segments(&mut self, offset: i64) -> Result<()> {
        let doomed: Vec<i64> = self.segments.range(offset + 1..).map(|(b, _)| *b).collect();
        for base in doomed {
            if let Some(seg) = self.segments.remove(&base) {
                seg.delete()?;
            }
        }
        let seg = self.active_segment_mut();
        seg.reactivate()?;
        let removed_from = seg.truncate_to(offset)?;
        // A batch straddling `offset` goes whole, so the end may move below it.
        let new_end = removed_from.map_or(offset, |b| b.min(offset));
        self.log_end_offset = new_end;
        self.cleaner.truncated_to(new_end);
        self.epoch_cache.truncate_from_end(new_end)?;
        self.producers
            .truncate_and_reload(&self.dir, self.log_start_offset, new_end)?;
        self.replay_producer_state()?;
        self.recovery_point = self.recovery_point.min(new_end);
        self.high_watermark = self.high_watermark.min(new_end);
        self.producers
            .on_high_watermark_updated(self.high_watermark);
        info!(dir = %self.dir.display(), offset = new_end, "truncated log");
        Ok(())
    }

    /// Rebuilds producer state after a reload from a snapshot by replaying
    /// the log from the snapshot's offset to the end.
    fn replay_producer_state(&mut self) -> Result<()> {
        let from = self.producers.map_end_offset();
        for seg in self.segments.values() {
            if seg.next_offset() <= from {
                continue;
            }
            let producers = &mut self.producers;
            seg.scan(0, |loc, view| {
                if loc.base_offset >= from {
                    producers.update(&view);
                }
                ControlFlow::Continue(())
            })?;
        }
        self.producers.update_map_end_offset(self.log_end_offset);
        Ok(())
    }

    /// Deletes every segment and restarts the log, empty, at `offset`.
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<()> {
        self.ensure_online()?;
        let r = self.reset_to(offset);
        self.guard(r)
    }

    fn reset_to(&mut self, offset: i64) -> Result<()> {
        for (_, seg) in std::mem::take(&mut self.segments) {
            seg.delete()?;
        }
        self.add_segment(offset, now_wall_ms())?;
        self.log_start_offset = offset;
        self.log_end_offset = offset;
        self.cleaner.truncated_to(offset);
        self.high_watermark = offset;
        self.recovery_point = offset;
        self.epoch_cache.clear()?;
        self.producers.truncate_fully_and_start_at(offset)?;
        info!(dir = %self.dir.display(), offset, "log truncated fully and restarted");
        Ok(())
    }

    /// DeleteRecords: moves the log start offset forward (never past the
    /// high watermark) and deletes segments entirely below it.
    pub fn delete_records_before(&mut self, offset: i64) -> Result<i64> {
        self.ensure_online()?;
        if offset > self.high_watermark {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.high_watermark,
            });
        }
        if offset > self.log_start_offset {
            self.log_start_offset = offset;
            self.producers.on_log_start_offset_incremented(offset);
            let r = self.epoch_cache.truncate_from_start(offset);
            self.guard(r)?;
            let r = self.delete_segments_while(|seg, _| seg.next_offset() <= offset);
            self.guard(r)?;
        }
        Ok(self.log_start_offset)
    }

    /// Applies `retention.ms` and `retention.bytes` (delete policy) and
    /// removes segments below the log start offset. Only segments wholly
    /// below the high watermark go. Returns how many segments were deleted.
    pub fn apply_retention(&mut self, now_ms: i64) -> Result<usize> {
        self.ensure_online()?;
        let cfg = self.config.clone();
        let total = self.size_bytes() as i64;
        let mut deleted_bytes = 0i64;
        let log_start = self.log_start_offset;
        let retain_by_policy = cfg.cleanup_policy.delete;
        // If every segment is expired, roll first so the active one can go too.
        let all_expired = retain_by_policy
            && cfg.retention_ms >= 0
            && self.active_segment().size() > 0
            && self.high_watermark == self.log_end_offset
            && self
                .segments
                .values()
                .all(|s| now_ms.saturating_sub(s.max_timestamp()) > cfg.retention_ms);
        if all_expired {
            let r = self.roll(now_ms);
            self.guard(r)?;
        }
        let r = self.delete_segments_while(|seg, _| {
            let expired_by_time = retain_by_policy
                && cfg.retention_ms >= 0
                && now_ms.saturating_sub(seg.max_timestamp()) > cfg.retention_ms;
            let over_size = retain_by_policy
                && cfg.retention_bytes >= 0
                && total - deleted_bytes - seg.size() as i64 >= cfg.retention_bytes;
            let below_start = seg.next_offset() <= log_start;
            let delete = expired_by_time || over_size || below_start;
            if delete {
                deleted_bytes += seg.size() as i64;
            }
            delete
        });
        self.guard(r)
    }

    /// Deletes segments from the oldest while `pred` holds, never the active
    /// segment and never one that reaches past the high watermark.
    fn delete_segments_while(
        &mut self,
        mut pred: impl FnMut(&LogSegment, i64) -> bool,
    ) -> Result<usize> {
        let mut deleted = 0;
        while self.segments.len() > 1 {
            let (&base, seg) = self.segments.iter().next().expect("non-empty");
            if seg.next_offset() > self.high_watermark || !pred(seg, base) {
                break;
            }
            let seg = self.segments.remove(&base).expect("present");
            seg.delete()?;
            deleted += 1;
        }
        if deleted > 0 {
            let first = *self.segments.keys().next().expect("non-empty");
            if first > self.log_start_offset {
                self.log_start_offset = first;
                self.epoch_cache.truncate_from_start(first)?;
                self.producers.on_log_start_offset_incremented(first);
            }
            self.producers
                .delete_snapshots_below(self.log_start_offset)?;
            info!(dir = %self.dir.display(), deleted, log_start_offset = self.log_start_offset, "deleted old segments");
        }
        Ok(deleted)
    }

    /// Flushes, snapshots producer state at the log end and seals the active
    /// segment's indexes: what a clean shutdown leaves for a fast reopen.
    pub fn close(&mut self) -> Result<()> {
        if self.offline {
            return Ok(());
        }
        self.flush()?;
        // A log with no records and no producers has no state to snapshot
        // (Kafka snapshots only past its last snapshot's offset).
        if self.log_end_offset > self.log_start_offset || !self.producers.is_empty() {
            self.producers
                .take_snapshot(&self.dir, self.log_end_offset)?;
        }
        Ok(())
    }

    /// Segments that compaction may rewrite (all but the active one).
    pub(crate) fn cleaner_progress_mut(&mut self) -> &mut CleanerProgress {
        &mut self.cleaner
    }

    /// The open-file budget the log's segments share.
    pub(crate) fn open_files(&self) -> &OpenLogFiles {
        &self.open_files
    }

    pub(crate) fn segments_mut(&mut self) -> &mut BTreeMap<i64, LogSegment> {
        &mut self.segments
    }

    pub(crate) fn active_base(&self) -> i64 {
        self.active_segment().base_offset()
    }
}

struct Validated {
    duplicate: Option<AppendInfo>,
}

/// Records a batch's leader epoch if it starts a newer epoch.
/// Offers every batch of a trusted segment to the epoch cache.
fn read_epochs(seg: &LogSegment, cache: &mut LeaderEpochCache) -> Result<()> {
    let mut result = Ok(());
    seg.scan(0, |_, view| match assign_epoch(cache, &view) {
        Ok(()) => ControlFlow::Continue(()),
        Err(e) => {
            result = Err(e);
            ControlFlow::Break(())
        }
    })?;
    result
}

fn assign_epoch(cache: &mut LeaderEpochCache, view: &BatchView<'_>) -> Result<()> {
    // As Kafka: every batch with an epoch is offered to the cache, which
    // ignores repeats and drops entries a lower epoch contradicts.
    let epoch = view.partition_leader_epoch();
    if epoch >= 0 && cache.latest_epoch() != Some(epoch) {
        cache.assign(epoch, view.base_offset())?;
    }
    Ok(())
}

fn aborted_txn_entry(producers: &ProducerStateManager, done: &CompletedTxn) -> Option<AbortedTxn> {
    done.is_aborted.then(|| AbortedTxn {
        producer_id: done.producer_id,
        first_offset: done.first_offset,
        last_offset: done.last_offset,
        last_stable_offset: producers.last_stable_offset_for_completed(done),
    })
}

/// Removes temporary files an interrupted operation can leave behind.
fn remove_leftovers(dir: &Path) -> Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(".tmp") || name.ends_with(".deleted") || name.ends_with(".cleaned") {
            remove_if_exists(&entry.path())?;
        } else if let Some(final_name) = name.strip_suffix(".swap") {
            // A compaction swap was decided before the crash: finish it and
            // let the segment's indexes be rebuilt.
            fs::rename(entry.path(), dir.join(final_name))?;
            if let Some(base) = parse_offset_file_name(final_name, ".log") {
                for suffix in [".index", ".timeindex", ".txnindex"] {
                    remove_if_exists(&segment_file_name(dir, base, suffix))?;
                }
            }
        }
    }
    Ok(())
}

pub(crate) fn fsync_dir(dir: &Path) -> Result<()> {
    fs::File::open(dir)?.sync_all()?;
    Ok(())
}

/// The indexes, within `view`, of its records without a key: compaction
/// keeps the last record of each key, so Kafka refuses keyless records on a
/// compacted topic.
fn keyless_records(view: &BatchView<'_>) -> Result<Vec<i32>> {
    // An uncompressed batch is walked where it lies, without a copy.
    let inflated;
    let section = if view.compression() == Some(Compression::None) {
        view.records_payload()
    } else {
        inflated = records_section(view)?;
        &inflated[..]
    };
    let mut keyless = Vec::new();
    let mut index = 0;
    walk_records(section, |r| {
        if r.key.is_none() {
            keyless.push(index);
        }
        index += 1;
    })?;
    Ok(keyless)
}
