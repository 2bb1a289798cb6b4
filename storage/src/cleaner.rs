//! Log compaction (`cleanup.policy=compact`): keeps the latest record per
//! key, drops tombstones once `delete.retention.ms` has passed, drops the
//! data of aborted transactions (as Kafka's cleaner does), never touches
//! the active segment, and preserves offsets. Transaction markers are kept.
//!
//! A pass has three steps, so that the log's lock is held only briefly:
//! [`PartitionLog::compaction_input`] (under the lock) takes the sealed
//! segments' files and what decides the cleaning; [`CompactionInput::clean`]
//! (no lock) builds the key map and the cleaned segments, paced by the I/O
//! throttle; [`PartitionLog::install_cleaned`] (under the lock) swaps in
//! those whose segment is unchanged.
//!
//! A log is due for a pass as in Kafka: when the part written since the
//! last pass is over `min.cleanable.dirty.ratio` of the cleanable bytes, or
//! has waited `max.compaction.lag.ms`; and also when a segment's tombstones
//! have outlived `delete.retention.ms` since the last pass.
//!
//! Each sealed segment is rewritten in place of itself: the cleaned copy is
//! written to `<base>.log.cleaned`, fsynced, renamed to `<base>.log.swap` (the
//! commit point), then renamed over `<base>.log`. A crash before the swap
//! leaves the old segment; after it, recovery finishes the rename. Kept
//! records are copied byte for byte; only batch headers (count, length, CRC)
//! are rewritten, and batches are recompressed with their own codec.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io::Write;
use std::ops::ControlFlow;
use std::sync::Arc;

use ottla_protocol::batch::{BatchView, BatchViewMut, Compression, BATCH_HEADER_LEN, LOG_OVERHEAD};
use ottla_protocol::records::{compress_records, records_section, walk_records};
use tracing::info;

use crate::error::Result;
use crate::io_throttle::IoThrottle;
use crate::log::{fsync_dir, PartitionLog};
use crate::segment::{remove_if_exists, scan_file, segment_file_name, LogSegment};
use crate::txn_index::AbortedTxn;

/// What one compaction pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CompactionStats {
    pub segments_rewritten: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub records_removed: u64,
}

/// A sealed segment as a compaction pass reads it: its file (immutable
/// until the pass swaps it, and readable through this handle even if
/// retention deletes it meanwhile) and what the pass decides on.
struct SegmentFile {
    base: i64,
    file: Arc<File>,
    size: u64,
    next_offset: i64,
    max_timestamp: i64,
}

/// Where compaction stands on a log between passes. Kept in memory: after a
/// restart the whole log counts as dirty once (as with a lost
/// cleaner-offset-checkpoint in Kafka).
#[derive(Debug, Clone, Copy)]
pub struct CleanerProgress {
    /// Offsets below this were covered by a finished pass.
    first_dirty: i64,
    /// The tombstone horizon that pass used.
    tombstone_horizon: i64,
}

impl Default for CleanerProgress {
    fn default() -> Self {
        Self {
            first_dirty: i64::MIN,
            tombstone_horizon: i64::MIN,
        }
    }
}

impl CleanerProgress {
    /// The log lost everything from `end` on: that range is dirty again.
    pub(crate) fn truncated_to(&mut self, end: i64) {
        self.first_dirty = self.first_dirty.min(end);
    }
}

/// What one compaction pass reads, taken from the log under its lock
/// ([`PartitionLog::compaction_input`]) and worked on without it
/// ([`CompactionInput::clean`]), so appends, fetches and metadata changes
/// to the partition never wait for a pass (which a low
/// `log.cleaner.io.max.bytes.per.second` can make last minutes).
pub struct CompactionInput {
    segments: Vec<SegmentFile>,
    aborted: Vec<AbortedTxn>,
    keep_empty: HashSet<i64>,
    tombstone_horizon: i64,
}

/// A pass's result, for [`PartitionLog::install_cleaned`].
pub struct CleanedLog {
    segments: Vec<CleanedSegment>,
    /// The end of the range the pass covered.
    end: i64,
    tombstone_horizon: i64,
}

impl CleanedLog {
    /// How many segments the pass rewrote.
    pub fn rewritten(&self) -> usize {
        self.segments.len()
    }
}

/// A segment's cleaned bytes, to be swapped in if the segment is unchanged.
pub struct CleanedSegment {
    base: i64,
    /// The file that was read: a segment recreated at the same base (after
    /// a truncation) is another file.
    file: Arc<File>,
    size_before: u64,
    bytes: Vec<u8>,
    removed: u64,
}

impl PartitionLog {
    /// Offset below which compaction may work: the start of the active
    /// segment, bounded by the high watermark and the first open transaction.
    fn cleanable_end(&self) -> i64 {
        self.active_base().min(self.last_stable_offset())
    }

    /// Runs one whole compaction pass, holding the log throughout (see
    /// [`CompactionInput`] for the way that does not).
    pub fn compact(&mut self, now_ms: i64, throttle: &IoThrottle) -> Result<CompactionStats> {
        match self.compaction_input(now_ms) {
            Some(input) => {
                let cleaned = input.clean(throttle)?;
                self.install_cleaned(cleaned)
            }
            None => Ok(CompactionStats::default()),
        }
    }

    /// What a pass would clean now, if the policy asks for compaction and
    /// the log is due: its dirty part (written since the last pass) is over
    /// `min.cleanable.dirty.ratio` of the cleanable bytes, or has waited
    /// `max.compaction.lag.ms`, or a segment's tombstones have outlived
    /// `delete.retention.ms` since the last pass. `now_ms` decides those
    /// ages and which records are still within `min.compaction.lag.ms`.
    pub fn compaction_input(&mut self, now_ms: i64) -> Option<CompactionInput> {
        if !self.config().cleanup_policy.compact {
            return None;
        }
        let end = self.cleanable_end();
        let config = self.config().clone();
        let tombstone_horizon = now_ms.saturating_sub(config.delete_retention_ms);
        let progress = *self.cleaner_progress_mut();
        let first_dirty = progress.first_dirty.max(self.log_start_offset());
        let segments: Vec<SegmentFile> = self
            .segments_mut()
            .values()
            .filter(|s| {
                s.next_offset() <= end
                    && !s.is_empty()
                    && now_ms.saturating_sub(s.max_timestamp()) >= config.min_compaction_lag_ms
            })
            .map(|s| SegmentFile {
                base: s.base_offset(),
                file: s.file(),
                size: s.size(),
                next_offset: s.next_offset(),
                max_timestamp: s.max_timestamp(),
            })
            .collect();
        let total: u64 = segments.iter().map(|s| s.size).sum();
        let dirty: Vec<&SegmentFile> = segments
            .iter()
            .filter(|s| s.next_offset > first_dirty)
            .collect();
        let dirty_bytes: u64 = dirty.iter().map(|s| s.size).sum();
        // A segment's newest record stands in for its oldest: an overdue
        // segment is found at most one segment's time span late.
        let overdue = dirty
            .iter()
            .any(|s| now_ms.saturating_sub(s.max_timestamp) >= config.max_compaction_lag_ms);
        let filthy = dirty_bytes > 0
            && (dirty_bytes as f64 / total as f64 > config.min_cleanable_dirty_ratio || overdue);
        let tombstones_due = segments
            .iter()
            .any(|s| (progress.tombstone_horizon..tombstone_horizon).contains(&s.max_timestamp));
        if !filthy && !tombstones_due {
            return None;
        }
        Some(CompactionInput {
            segments,
            aborted: self.aborted_txns(),
            keep_empty: self.last_batch_offsets_of_producers(),
            tombstone_horizon,
        })
    }

    /// Swaps in the cleaned segments that are still as the pass read them;
    /// one truncated or deleted meanwhile is left alone (the next pass sees
    /// the log as it is then).
    pub fn install_cleaned(&mut self, cleaned: CleanedLog) -> Result<CompactionStats> {
        let mut stats = CompactionStats::default();
        let end = self.cleanable_end();
        let mut all_current = true;
        for c in cleaned.segments {
            let unchanged = self.segments_mut().get(&c.base).is_some_and(|s| {
                Arc::ptr_eq(&s.file(), &c.file)
                    && s.size() == c.size_before
                    && s.next_offset() <= end
            });
            if !unchanged {
                all_current = false;
                continue;
            }
            stats.bytes_before += c.size_before;
            stats.bytes_after += c.bytes.len() as u64;
            stats.records_removed += c.removed;
            stats.segments_rewritten += 1;
            self.swap_in_cleaned(c.base, &c.bytes)?;
        }
        if all_current {
            let progress = self.cleaner_progress_mut();
            progress.first_dirty = progress.first_dirty.max(cleaned.end);
            progress.tombstone_horizon = cleaned.tombstone_horizon;
        }
        if stats.segments_rewritten > 0 {
            info!(dir = %self.dir().display(), ?stats, "compacted log");
        }
        Ok(stats)
    }

    /// Every aborted transaction of the log: the index entry sits in the
    /// segment of its ABORT marker, which may follow the data's segment.
    fn aborted_txns(&mut self) -> Vec<AbortedTxn> {
        self.segments_mut()
            .values()
            .flat_map(|s| s.txn_index().all().iter().cloned())
            .collect()
    }

    /// Producers' last batches stay in the log even when emptied, so their
    /// sequence numbers survive compaction (as in Kafka).
    fn last_batch_offsets_of_producers(&self) -> HashSet<i64> {
        self.producer_state()
            .active_producers()
            .filter_map(|p| p.batches.back().map(|b| b.last_offset))
            .collect()
    }

    fn swap_in_cleaned(&mut self, base: i64, cleaned: &[u8]) -> Result<()> {
        let dir = self.dir().to_path_buf();
        let log_path = segment_file_name(&dir, base, ".log");
        let cleaned_path = segment_file_name(&dir, base, ".log.cleaned");
        let swap_path = segment_file_name(&dir, base, ".log.swap");
        let mut f = fs::File::create(&cleaned_path)?;
        f.write_all(cleaned)?;
        f.sync_all()?;
        fs::rename(&cleaned_path, &swap_path)?;
        fsync_dir(&dir)?;
        let cfg = self.config().clone();
        let old = self.segments_mut().remove(&base).expect("segment to swap");
        let aborted = old.txn_index().all().to_vec();
        drop(old);
        fs::rename(&swap_path, &log_path)?;
        for suffix in [".index", ".timeindex", ".txnindex"] {
            remove_if_exists(&segment_file_name(&dir, base, suffix))?;
        }
        let mut seg = LogSegment::open_for_recovery(
            &dir,
            base,
            cfg.segment_index_bytes,
            cfg.index_interval_bytes,
        )?;
        seg.recover(usize::MAX, None, |_| None)?;
        for txn in &aborted {
            seg.append_aborted_txn(txn)?;
        }
        seg.seal()?;
        fsync_dir(&dir)?;
        self.segments_mut().insert(base, seg);
        Ok(())
    }
}

impl CompactionInput {
    /// Cleans every segment of the pass, reading only the files it holds:
    /// no lock on the log is needed. `throttle` paces the I/O.
    pub fn clean(&self, throttle: &IoThrottle) -> Result<CleanedLog> {
        let latest = self.latest_offsets_by_key(throttle)?;
        let mut out = Vec::new();
        for seg in &self.segments {
            let plan = CleanPlan {
                latest: &latest,
                keep_empty: &self.keep_empty,
                aborted: &self.aborted,
                drop_tombstones: seg.max_timestamp < self.tombstone_horizon,
            };
            throttle.account(seg.size);
            let (bytes, removed) = clean_segment(seg, &plan)?;
            if removed == 0 {
                continue;
            }
            throttle.account(bytes.len() as u64);
            out.push(CleanedSegment {
                base: seg.base,
                file: seg.file.clone(),
                size_before: seg.size,
                bytes,
                removed,
            });
        }
        Ok(CleanedLog {
            segments: out,
            end: self
                .segments
                .iter()
                .map(|s| s.next_offset)
                .max()
                .unwrap_or(i64::MIN),
            tombstone_horizon: self.tombstone_horizon,
        })
    }

    /// key -> offset of its latest record, over the segments to clean.
    /// Aborted records are not candidates: they are dropped.
    fn latest_offsets_by_key(&self, throttle: &IoThrottle) -> Result<HashMap<Vec<u8>, i64>> {
        let mut latest = HashMap::new();
        let mut failure = None;
        for seg in &self.segments {
            throttle.account(seg.size);
            scan_file(&seg.file, seg.size, 0, |_, view| {
                if view.is_control() || is_aborted(&view, &self.aborted) {
                    return ControlFlow::Continue(());
                }
                let section = match records_section(&view) {
                    Ok(s) => s,
                    Err(e) => {
                        failure = Some(e);
                        return ControlFlow::Break(());
                    }
                };
                let walked = walk_records(&section, |r| {
                    if let Some(key) = r.key {
                        latest.insert(key.to_vec(), view.base_offset() + r.offset_delta as i64);
                    }
                });
                if let Err(e) = walked {
                    failure = Some(e);
                    return ControlFlow::Break(());
                }
                ControlFlow::Continue(())
            })?;
        }
        match failure {
            Some(e) => Err(e.into()),
            None => Ok(latest),
        }
    }
}

struct CleanPlan<'a> {
    latest: &'a HashMap<Vec<u8>, i64>,
    keep_empty: &'a HashSet<i64>,
    aborted: &'a [AbortedTxn],
    drop_tombstones: bool,
}

/// Whether `view` holds data of a transaction that was aborted.
fn is_aborted(view: &BatchView<'_>, aborted: &[AbortedTxn]) -> bool {
    view.is_transactional()
        && !view.is_control()
        && aborted.iter().any(|t| {
            t.producer_id == view.producer_id()
                && (t.first_offset..=t.last_offset).contains(&view.base_offset())
        })
}

/// Rewrites one segment's batches, returning the new bytes and how many
/// records were removed.
fn clean_segment(seg: &SegmentFile, plan: &CleanPlan<'_>) -> Result<(Vec<u8>, u64)> {
    let mut out = Vec::with_capacity(seg.size as usize);
    let mut removed = 0u64;
    let mut failure = None;
    scan_file(&seg.file, seg.size, 0, |_, view| {
        match clean_batch(&view, plan) {
            Ok(CleanedBatch::Unchanged) => out.extend_from_slice(view.bytes()),
            Ok(CleanedBatch::Rewritten { bytes, removed: n }) => {
                out.extend_from_slice(&bytes);
                removed += n;
            }
            Ok(CleanedBatch::Dropped { removed: n }) => removed += n,
            Err(e) => {
                failure = Some(e);
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    })?;
    match failure {
        Some(e) => Err(e),
        None => Ok((out, removed)),
    }
}

enum CleanedBatch {
    Unchanged,
    Rewritten { bytes: Vec<u8>, removed: u64 },
    Dropped { removed: u64 },
}

fn clean_batch(view: &BatchView<'_>, plan: &CleanPlan<'_>) -> Result<CleanedBatch> {
    // Markers stay: read_committed fetches and producer state rely on them
    // (Kafka removes them only after delete.retention.ms; Ottla keeps them).
    if view.is_control() {
        return Ok(CleanedBatch::Unchanged);
    }
    let aborted = is_aborted(view, plan.aborted);
    let section = records_section(view)?;
    let mut kept: Vec<u8> = Vec::with_capacity(section.len());
    let mut kept_count = 0i32;
    let total = walk_records(&section, |r| {
        if aborted {
            return;
        }
        let offset = view.base_offset() + r.offset_delta as i64;
        let superseded = r
            .key
            .is_some_and(|k| plan.latest.get(k).is_some_and(|&o| o > offset));
        let expired_tombstone = r.value.is_none() && plan.drop_tombstones;
        if !superseded && !expired_tombstone {
            kept.extend_from_slice(r.raw);
            kept_count += 1;
        }
    })?;
    let removed = (total as i32 - kept_count) as u64;
    if removed == 0 {
        return Ok(CleanedBatch::Unchanged);
    }
    if kept_count == 0 && !(view.has_producer_id() && plan.keep_empty.contains(&view.last_offset()))
    {
        return Ok(CleanedBatch::Dropped { removed });
    }
    let codec = view.compression().unwrap_or(Compression::None);
    let payload = if kept_count == 0 {
        Vec::new()
    } else {
        compress_records(codec, &kept)?
    };
    // Same header (base offset, lastOffsetDelta, producer fields, epoch),
    // new count, length and CRC.
    let mut bytes = Vec::with_capacity(BATCH_HEADER_LEN + payload.len());
    bytes.extend_from_slice(&view.bytes()[..BATCH_HEADER_LEN]);
    bytes.extend_from_slice(&payload);
    let length = (bytes.len() - LOG_OVERHEAD) as i32;
    bytes[8..12].copy_from_slice(&length.to_be_bytes());
    bytes[57..61].copy_from_slice(&kept_count.to_be_bytes());
    BatchViewMut::new(&mut bytes).update_crc();
    Ok(CleanedBatch::Rewritten { bytes, removed })
}
