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
//! As in Kafka, the key map covers the dirty part only (the part before it
//! was deduplicated by earlier passes), in bounded memory
//! ([`crate::key_map`]): a pass maps dirty batches until the map is full and
//! cleans the log up to that point; the rest waits for the next pass.
//!
//! Each sealed segment is rewritten in place of itself: the cleaned copy is
//! streamed to `<base>.log.cleaned` during the pass (so a pass holds one
//! batch and a write buffer in memory, not the cleaned log) and fsynced;
//! installing renames it to `<base>.log.swap` (the commit point), then over
//! `<base>.log`. A crash before the swap leaves the old segment (recovery
//! deletes `.cleaned` files); after it, recovery finishes the rename. A
//! cleaned copy that is not installed is deleted. Kept records are copied
//! byte for byte; only batch headers (count, length, CRC) are rewritten,
//! and batches are recompressed with their own codec.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ottla_protocol::batch::{BatchView, BatchViewMut, Compression, BATCH_HEADER_LEN, LOG_OVERHEAD};
use ottla_protocol::records::{compress_records, records_section, walk_records};
use tracing::info;

use crate::error::{Result, StorageError};
use crate::io_throttle::IoThrottle;
use crate::key_map::{self, KeyMap};
use crate::log::{fsync_dir, PartitionLog};
use crate::log_file::LogFile;
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
    /// The segment's identity (see [`CleanedSegment::log_file`]).
    log_file: Arc<LogFile>,
    size: u64,
    next_offset: i64,
    max_timestamp: i64,
}

/// What one compaction pass reads, taken from the log under its lock
/// ([`PartitionLog::compaction_input`]) and worked on without it
/// ([`CompactionInput::clean`]), so appends, fetches and metadata changes
/// to the partition never wait for a pass (which a low
/// `log.cleaner.io.max.bytes.per.second` can make last minutes).
pub struct CompactionInput {
    dir: PathBuf,
    segments: Vec<SegmentFile>,
    /// Offsets below this were deduplicated by earlier passes.
    first_dirty: i64,
    aborted: Vec<AbortedTxn>,
    keep_empty: HashSet<i64>,
    tombstone_horizon: i64,
}

/// The memory one cleaner thread works with: its share of Kafka's dedupe
/// buffer (as a key count) and of its I/O buffers.
#[derive(Debug, Clone, Copy)]
pub struct CleanerBuffers {
    pub key_capacity: usize,
    pub write_buffer_bytes: usize,
}

impl CleanerBuffers {
    /// Each of `threads` threads' share of `log.cleaner.dedupe.buffer.size`
    /// (filled to `log.cleaner.io.buffer.load.factor`) and of
    /// `log.cleaner.io.buffer.size` (half of which Kafka uses to read and
    /// half to write; Ottla reads in fixed chunks and writes with its half).
    pub fn for_threads(
        dedupe_buffer_size: u64,
        load_factor: f64,
        io_buffer_size: usize,
        threads: usize,
    ) -> Self {
        Self {
            key_capacity: key_map::capacity(dedupe_buffer_size, threads, load_factor),
            write_buffer_bytes: (io_buffer_size / threads.max(1) / 2).max(MIN_WRITE_BUFFER),
        }
    }
}

/// Kafka's defaults, for one thread.
impl Default for CleanerBuffers {
    fn default() -> Self {
        Self::for_threads(128 << 20, 0.9, 512 << 10, 1)
    }
}

/// The smallest write buffer a cleaned copy is written with.
const MIN_WRITE_BUFFER: usize = 4096;

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

/// A segment's cleaned copy, to be swapped in if the segment is unchanged.
pub struct CleanedSegment {
    base: i64,
    /// The segment's file that was read: a segment recreated at the same
    /// base (after a truncation) has another.
    log_file: Arc<LogFile>,
    size_before: u64,
    /// `<base>.log.cleaned`, fsynced; deleted on drop unless installed.
    copy: CleanedCopy,
    removed: u64,
}

/// A `.cleaned` file that belongs to a pass until it is installed.
struct CleanedCopy {
    path: Option<PathBuf>,
    len: u64,
}

impl CleanedCopy {
    /// The path, now the installer's to rename.
    fn take(&mut self) -> PathBuf {
        self.path.take().expect("installed once")
    }
}

impl Drop for CleanedCopy {
    fn drop(&mut self) {
        if let Some(path) = self.path.take() {
            // Best effort: recovery deletes leftover `.cleaned` files too.
            let _ = fs::remove_file(path);
        }
    }
}

impl PartitionLog {
    /// Offset below which compaction may work: the start of the active
    /// segment, bounded by the high watermark and the first open transaction.
    fn cleanable_end(&self) -> i64 {
        self.active_base().min(self.last_stable_offset())
    }

    /// Runs one whole compaction pass, holding the log throughout (see
    /// [`CompactionInput`] for the way that does not).
    pub fn compact(
        &mut self,
        now_ms: i64,
        throttle: &IoThrottle,
        buffers: &CleanerBuffers,
    ) -> Result<CompactionStats> {
        match self.compaction_input(now_ms)? {
            Some(input) => {
                let cleaned = input.clean(throttle, buffers)?;
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
    pub fn compaction_input(&mut self, now_ms: i64) -> Result<Option<CompactionInput>> {
        if !self.config().cleanup_policy.compact {
            return Ok(None);
        }
        let end = self.cleanable_end();
        let config = self.config().clone();
        let tombstone_horizon = now_ms.saturating_sub(config.delete_retention_ms);
        let progress = *self.cleaner_progress_mut();
        let first_dirty = progress.first_dirty.max(self.log_start_offset());
        // The cleanable range stops at the first segment still within
        // min.compaction.lag.ms, so it has no holes.
        let segments: Vec<SegmentFile> = self
            .segments_mut()
            .values()
            .take_while(|s| {
                s.next_offset() <= end
                    && now_ms.saturating_sub(s.max_timestamp()) >= config.min_compaction_lag_ms
            })
            .filter(|s| !s.is_empty())
            .map(|s| {
                Ok(SegmentFile {
                    base: s.base_offset(),
                    file: s.file()?,
                    log_file: s.log_file().clone(),
                    size: s.size(),
                    next_offset: s.next_offset(),
                    max_timestamp: s.max_timestamp(),
                })
            })
            .collect::<Result<_>>()?;
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
            return Ok(None);
        }
        Ok(Some(CompactionInput {
            dir: self.dir().to_path_buf(),
            segments,
            first_dirty,
            aborted: self.aborted_txns(),
            keep_empty: self.last_batch_offsets_of_producers(),
            tombstone_horizon,
        }))
    }

    /// Swaps in the cleaned segments that are still as the pass read them;
    /// one truncated or deleted meanwhile is left alone (the next pass sees
    /// the log as it is then).
    pub fn install_cleaned(&mut self, cleaned: CleanedLog) -> Result<CompactionStats> {
        let mut stats = CompactionStats::default();
        let end = self.cleanable_end();
        let mut all_current = true;
        for mut c in cleaned.segments {
            let unchanged = self.segments_mut().get(&c.base).is_some_and(|s| {
                Arc::ptr_eq(s.log_file(), &c.log_file)
                    && s.size() == c.size_before
                    && s.next_offset() <= end
            });
            if !unchanged {
                all_current = false;
                continue;
            }
            stats.bytes_before += c.size_before;
            stats.bytes_after += c.copy.len;
            stats.records_removed += c.removed;
            stats.segments_rewritten += 1;
            self.swap_in_cleaned(c.base, &c.copy.take())?;
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

    /// Puts the fsynced `cleaned` copy in place of segment `base`.
    fn swap_in_cleaned(&mut self, base: i64, cleaned: &Path) -> Result<()> {
        let dir = self.dir().to_path_buf();
        let log_path = segment_file_name(&dir, base, ".log");
        let swap_path = segment_file_name(&dir, base, ".log.swap");
        fs::rename(cleaned, &swap_path)?;
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
            self.open_files(),
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
    /// Cleans the segments of the pass, reading only the files it holds:
    /// no lock on the log is needed. `throttle` paces the I/O; the key map
    /// holds at most `buffers.key_capacity` keys, so the pass may end
    /// before the last segment.
    pub fn clean(&self, throttle: &IoThrottle, buffers: &CleanerBuffers) -> Result<CleanedLog> {
        let (latest, end) = self.map_dirty_keys(throttle, buffers.key_capacity)?;
        let mut out = Vec::new();
        for seg in self.segments.iter().filter(|s| s.base < end) {
            let plan = CleanPlan {
                latest: &latest,
                end,
                keep_empty: &self.keep_empty,
                aborted: &self.aborted,
                drop_tombstones: seg.max_timestamp < self.tombstone_horizon,
            };
            throttle.account(seg.size);
            let cleaned_path = segment_file_name(&self.dir, seg.base, ".log.cleaned");
            let writer = CleanedWriter::new(seg, cleaned_path, buffers.write_buffer_bytes);
            let Some((copy, removed)) = clean_segment(seg, &plan, writer)? else {
                continue;
            };
            throttle.account(copy.len);
            out.push(CleanedSegment {
                base: seg.base,
                log_file: seg.log_file.clone(),
                size_before: seg.size,
                copy,
                removed,
            });
        }
        Ok(CleanedLog {
            segments: out,
            end,
            tombstone_horizon: self.tombstone_horizon,
        })
    }

    /// Maps key -> offset of its latest record over the dirty batches, in
    /// order, until the map could overflow; returns the map and the offset
    /// it covers up to: the end of the pass. Aborted records are not
    /// candidates: they are dropped.
    fn map_dirty_keys(&self, throttle: &IoThrottle, capacity: usize) -> Result<(KeyMap, i64)> {
        let mut map = KeyMap::new(capacity);
        let mut end = self
            .segments
            .iter()
            .map(|s| s.next_offset)
            .max()
            .unwrap_or(i64::MIN);
        let mut failure = None;
        let mut full = false;
        for seg in self
            .segments
            .iter()
            .filter(|s| s.next_offset > self.first_dirty)
        {
            throttle.account(seg.size);
            scan_file(&seg.file, seg.size, 0, |_, view| {
                if view.base_offset() < self.first_dirty
                    || view.is_control()
                    || is_aborted(&view, &self.aborted)
                {
                    return ControlFlow::Continue(());
                }
                let records = view.record_count().max(0) as usize;
                if !map.has_room_for(records) {
                    if map.is_empty() {
                        failure = Some(StorageError::KeyMapTooSmall {
                            capacity: map.capacity(),
                            records,
                            offset: view.base_offset(),
                        });
                    }
                    end = view.base_offset();
                    full = true;
                    return ControlFlow::Break(());
                }
                let section = match records_section(&view) {
                    Ok(s) => s,
                    Err(e) => {
                        failure = Some(e.into());
                        return ControlFlow::Break(());
                    }
                };
                let walked = walk_records(&section, |r| {
                    if let Some(key) = r.key {
                        map.put(key, view.base_offset() + r.offset_delta as i64);
                    }
                });
                if let Err(e) = walked {
                    failure = Some(e.into());
                    return ControlFlow::Break(());
                }
                ControlFlow::Continue(())
            })?;
            if let Some(e) = failure {
                return Err(e);
            }
            if full {
                break;
            }
        }
        Ok((map, end))
    }
}

struct CleanPlan<'a> {
    latest: &'a KeyMap,
    /// Batches from here on are beyond the pass and kept as they are.
    end: i64,
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

/// Rewrites one segment's batches through `out`, returning the fsynced
/// copy and how many records were removed; None when nothing is removed
/// (no copy is written then).
fn clean_segment(
    seg: &SegmentFile,
    plan: &CleanPlan<'_>,
    mut out: CleanedWriter<'_>,
) -> Result<Option<(CleanedCopy, u64)>> {
    let mut removed = 0u64;
    let mut failure = None;
    scan_file(&seg.file, seg.size, 0, |loc, view| {
        let written = match clean_batch(&view, plan) {
            Ok(CleanedBatch::Unchanged) => out.unchanged(view.bytes()),
            Ok(CleanedBatch::Rewritten { bytes, removed: n }) => {
                removed += n;
                out.changed(loc.position, &bytes)
            }
            Ok(CleanedBatch::Dropped { removed: n }) => {
                removed += n;
                out.changed(loc.position, &[])
            }
            Err(e) => Err(e),
        };
        match written {
            Ok(()) => ControlFlow::Continue(()),
            Err(e) => {
                failure = Some(e);
                ControlFlow::Break(())
            }
        }
    })?;
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(out.finish()?.map(|copy| (copy, removed)))
}

/// Streams a segment's cleaned copy to its `.cleaned` file. The file is
/// created at the first batch that changes, starting with a copy of the
/// unchanged batches before it, so a segment with nothing to remove costs
/// no write.
struct CleanedWriter<'a> {
    source: &'a SegmentFile,
    path: PathBuf,
    buffer_bytes: usize,
    out: Option<(BufWriter<File>, CleanedCopy)>,
}

impl<'a> CleanedWriter<'a> {
    fn new(source: &'a SegmentFile, path: PathBuf, buffer_bytes: usize) -> Self {
        Self {
            source,
            path,
            buffer_bytes,
            out: None,
        }
    }

    /// A batch kept as it is.
    fn unchanged(&mut self, bytes: &[u8]) -> Result<()> {
        match &mut self.out {
            Some(_) => self.write(bytes),
            // Copied from the source if a later batch changes.
            None => Ok(()),
        }
    }

    /// A batch rewritten (or dropped: `bytes` empty), found at `position`.
    fn changed(&mut self, position: u64, bytes: &[u8]) -> Result<()> {
        if self.out.is_none() {
            let file = File::create(&self.path)?;
            let copy = CleanedCopy {
                path: Some(self.path.clone()),
                len: 0,
            };
            self.out = Some((BufWriter::with_capacity(self.buffer_bytes, file), copy));
            self.copy_source_prefix(position)?;
        }
        self.write(bytes)
    }

    /// The source's first `len` bytes: the batches before the first change.
    fn copy_source_prefix(&mut self, len: u64) -> Result<()> {
        let mut buf = vec![0u8; self.buffer_bytes.min(len as usize)];
        let mut at = 0u64;
        while at < len {
            let n = buf.len().min((len - at) as usize);
            self.source.file.read_exact_at(&mut buf[..n], at)?;
            self.write(&buf[..n])?;
            at += n as u64;
        }
        Ok(())
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        let (w, copy) = self.out.as_mut().expect("created before writing");
        w.write_all(bytes)?;
        copy.len += bytes.len() as u64;
        Ok(())
    }

    /// The fsynced copy, or None when nothing changed.
    fn finish(self) -> Result<Option<CleanedCopy>> {
        let Some((w, copy)) = self.out else {
            return Ok(None);
        };
        // On an error `copy` is dropped, which deletes the file.
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        Ok(Some(copy))
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
    if view.base_offset() >= plan.end || view.is_control() {
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
            .is_some_and(|k| plan.latest.latest(k).is_some_and(|o| o > offset));
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
