//! One log segment: `<base>.log` plus its `.index`, `.timeindex` and
//! `.txnindex`, all named by the 20-digit base offset as Kafka names them.

use std::fs::File;
use std::io;
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use crate::file_range::FileRange;
use bytes::{Bytes, BytesMut};
use ottla_protocol::batch::{batch_size_at, BatchError, BatchView, BATCH_HEADER_LEN, LOG_OVERHEAD};

use crate::error::{Result, StorageError};
use crate::index::{OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset};
use crate::log_file::{LogFile, OpenLogFiles};
use crate::txn_index::{AbortedTxn, TransactionIndex};

/// Size of the buffer used for sequential scans (recovery, compaction, time lookups).
const SCAN_CHUNK: usize = 1 << 20;

pub fn segment_file_name(dir: &Path, base_offset: i64, suffix: &str) -> PathBuf {
    dir.join(format!("{base_offset:020}{suffix}"))
}

/// Parses `00000000000000001234.log` style names.
pub fn parse_offset_file_name(name: &str, suffix: &str) -> Option<i64> {
    let stem = name.strip_suffix(suffix)?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// A byte range of a segment file that holds whole batches. Reading happens
/// outside the log's lock; the file handle keeps the data reachable even if
/// the segment is deleted meanwhile.
#[derive(Debug, Clone)]
pub struct FileSlice {
    pub range: FileRange,
    /// The offset after the slice's last batch.
    pub next_offset: i64,
}

impl FileSlice {
    /// Reads the slice. If the file was truncated since the slice was planned
    /// (a follower truncation racing a read), returns only the whole batches
    /// still present.
    pub fn read(&self) -> io::Result<Bytes> {
        let mut buf = BytesMut::new();
        self.fill(&mut buf, self.range.len)?;
        buf.truncate(whole_batches_len(&buf));
        Ok(buf.freeze())
    }

    /// Reads the slice's first whole batches, stopping once those read span
    /// `max_records` offsets (one batch at least): a share fetch acquires a
    /// few hundred records from a slice that may span the request's whole
    /// byte budget. The read starts at 64 KiB and doubles, so it takes at
    /// most twice the bytes of the batches it needs beyond that.
    pub fn read_records(&self, max_records: i64) -> io::Result<Bytes> {
        let mut buf = BytesMut::new();
        let mut want = self.range.len.min(FIRST_RECORDS_READ);
        loop {
            let complete = self.fill(&mut buf, want)?;
            let (whole, offsets) = whole_batches(&buf);
            if offsets >= max_records || !complete || want == self.range.len {
                buf.truncate(whole);
                return Ok(buf.freeze());
            }
            want = self.range.len.min(want.saturating_mul(2));
        }
    }

    /// Reads on into `buf` until it holds the slice's first `want` bytes.
    /// False when the file ended first (truncated since the slice was
    /// planned).
    fn fill(&self, buf: &mut BytesMut, want: usize) -> io::Result<bool> {
        let FileRange { file, position, .. } = &self.range;
        let mut filled = buf.len();
        buf.resize(want, 0);
        while filled < want {
            let n = file.read_at(&mut buf[filled..], position + filled as u64)?;
            if n == 0 {
                buf.truncate(filled);
                return Ok(false);
            }
            filled += n;
        }
        Ok(true)
    }
}

/// The first read of [`FileSlice::read_records`].
const FIRST_RECORDS_READ: usize = 64 * 1024;

/// Length of the prefix of `buf` made of whole batches.
pub fn whole_batches_len(buf: &[u8]) -> usize {
    whole_batches(buf).0
}

/// The length of the whole batches at the start of `buf` and the offsets
/// they span (a batch whose header cannot be read counts one).
fn whole_batches(buf: &[u8]) -> (usize, i64) {
    let mut pos = 0;
    let mut offsets = 0;
    while let Some(Ok(size)) = batch_size_at(&buf[pos..]) {
        if pos + size > buf.len() {
            break;
        }
        offsets += BatchView::parse(&buf[pos..])
            .map_or(1, |b| (b.last_offset() - b.base_offset() + 1).max(1));
        pos += size;
    }
    (pos, offsets)
}

/// Header fields of one batch found by scanning a segment.
#[derive(Debug, Clone, Copy)]
pub struct BatchLocation {
    pub position: u64,
    pub size: usize,
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
}

pub struct LogSegment {
    dir: PathBuf,
    base_offset: i64,
    log: Arc<LogFile>,
    size: u64,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    txn_index: TransactionIndex,
    bytes_since_index_entry: usize,
    /// Largest batch max timestamp in the segment and the last offset of that batch.
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    next_offset: i64,
    created_ms: i64,
    index_interval_bytes: usize,
}

impl LogSegment {
    /// Creates a new, empty segment (files truncated if they exist).
    pub fn create(
        dir: &Path,
        base_offset: i64,
        index_bytes: usize,
        index_interval: usize,
        now_ms: i64,
        files: &OpenLogFiles,
    ) -> Result<Self> {
        let log = files.open_file(&segment_file_name(dir, base_offset, ".log"), true)?;
        remove_if_exists(&segment_file_name(dir, base_offset, ".txnindex"))?;
        Self::with_fresh_indexes(dir, base_offset, log, index_bytes, index_interval, now_ms)
    }

    /// A segment over `log` with new, empty indexes (a new segment, or one
    /// whose indexes [`LogSegment::recover`] is about to rebuild).
    fn with_fresh_indexes(
        dir: &Path,
        base_offset: i64,
        log: Arc<LogFile>,
        index_bytes: usize,
        index_interval: usize,
        created_ms: i64,
    ) -> Result<Self> {
        for suffix in [".index", ".timeindex"] {
            remove_if_exists(&segment_file_name(dir, base_offset, suffix))?;
        }
        let size = log.handle()?.metadata()?.len();
        Ok(Self {
            dir: dir.to_path_buf(),
            base_offset,
            log,
            size,
            offset_index: OffsetIndex::open_active(
                &segment_file_name(dir, base_offset, ".index"),
                index_bytes,
            )?,
            time_index: TimeIndex::open_active(
                &segment_file_name(dir, base_offset, ".timeindex"),
                index_bytes,
            )?,
            txn_index: TransactionIndex::open(&segment_file_name(dir, base_offset, ".txnindex"))?,
            bytes_since_index_entry: 0,
            max_timestamp: -1,
            offset_of_max_timestamp: base_offset,
            next_offset: base_offset,
            created_ms,
            index_interval_bytes: index_interval,
        })
    }

    /// Opens an existing segment, trusting its indexes (clean shutdown path).
    /// Returns `CorruptFile` if an index fails its sanity check; the caller
    /// then runs [`LogSegment::recover`].
    pub fn open(
        dir: &Path,
        base_offset: i64,
        index_bytes: usize,
        index_interval: usize,
        active: bool,
        files: &OpenLogFiles,
    ) -> Result<Self> {
        let log = files.open_file(&segment_file_name(dir, base_offset, ".log"), false)?;
        let meta = log.handle()?.metadata()?;
        let size = meta.len();
        let created_ms = meta
            .created()
            .or_else(|_| meta.modified())
            .ok()
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64);
        let open_index = |suffix: &str| -> Result<OffsetIndex> {
            let p = segment_file_name(dir, base_offset, suffix);
            if active {
                OffsetIndex::open_active(&p, index_bytes)
            } else {
                OffsetIndex::open_sealed(&p, index_bytes)
            }
        };
        let offset_index = open_index(".index")?;
        let time_path = segment_file_name(dir, base_offset, ".timeindex");
        let time_index = if active {
            TimeIndex::open_active(&time_path, index_bytes)?
        } else {
            TimeIndex::open_sealed(&time_path, index_bytes)?
        };
        let txn_index = TransactionIndex::open(&segment_file_name(dir, base_offset, ".txnindex"))?;
        let mut seg = Self {
            dir: dir.to_path_buf(),
            base_offset,
            log,
            size,
            offset_index,
            time_index,
            txn_index,
            bytes_since_index_entry: 0,
            max_timestamp: -1,
            offset_of_max_timestamp: base_offset,
            next_offset: base_offset,
            created_ms,
            index_interval_bytes: index_interval,
        };
        seg.load_tail()?;
        if !active {
            // A sealed segment is read again only when a reader reaches
            // back to it: loading thousands need not hold their files.
            seg.log.close_if_over_budget()?;
        }
        Ok(seg)
    }

    /// Opens a segment whose indexes are not trusted: they are recreated
    /// empty, and [`LogSegment::recover`] rebuilds them.
    pub fn open_for_recovery(
        dir: &Path,
        base_offset: i64,
        index_bytes: usize,
        index_interval: usize,
        files: &OpenLogFiles,
    ) -> Result<Self> {
        let log = files.open_file(&segment_file_name(dir, base_offset, ".log"), false)?;
        log.mark_written();
        Self::with_fresh_indexes(
            dir,
            base_offset,
            log,
            index_bytes,
            index_interval,
            now_wall_ms(),
        )
    }

    /// Makes the indexes appendable again (the segment became the active one
    /// after the segments after it were truncated away).
    pub fn reactivate(&mut self) -> Result<()> {
        self.offset_index.make_active()?;
        self.time_index.make_active()
    }

    /// Finds the next offset and the max timestamp from the last index entries
    /// plus a scan of the bytes after the last indexed batch.
    fn load_tail(&mut self) -> Result<()> {
        if let Some(t) = self.time_index.last() {
            self.max_timestamp = t.timestamp;
            self.offset_of_max_timestamp = self.base_offset + t.relative_offset as i64;
        }
        let start = self.offset_index.last().map_or(0, |e| e.position as u64);
        if start > self.size {
            return Err(StorageError::corrupt_file(
                self.offset_index.path(),
                "index points past the end of the log",
            ));
        }
        let mut end = start;
        let log = self.log.handle()?;
        let scan = scan_file(&log, self.size, start, |loc, _| {
            end = loc.position + loc.size as u64;
            self.next_offset = loc.last_offset + 1;
            if loc.max_timestamp > self.max_timestamp {
                self.max_timestamp = loc.max_timestamp;
                self.offset_of_max_timestamp = loc.last_offset;
            }
            ControlFlow::Continue(())
        })?;
        if scan.is_some() || end != self.size {
            return Err(StorageError::corrupt_file(
                segment_file_name(&self.dir, self.base_offset, ".log"),
                "log does not end on a whole batch",
            ));
        }
        self.bytes_since_index_entry = (self.size - start) as usize;
        Ok(())
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
    pub fn size(&self) -> u64 {
        self.size
    }
    /// The `.log` file, for readers that must not hold the log's lock
    /// (`scan_file` over it up to `size`); reopened if it was closed.
    pub fn file(&self) -> Result<Arc<File>> {
        Ok(self.log.handle()?)
    }
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
    /// Offset after the last batch (the base offset for an empty segment).
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }
    pub fn offset_of_max_timestamp(&self) -> i64 {
        self.offset_of_max_timestamp
    }
    pub fn created_ms(&self) -> i64 {
        self.created_ms
    }
    pub fn txn_index(&self) -> &TransactionIndex {
        &self.txn_index
    }
    /// The segment's file, open or closed (its identity: a segment
    /// replaced by one of the same base has another).
    pub fn log_file(&self) -> &Arc<LogFile> {
        &self.log
    }

    /// Whether appending `bytes` more, ending at `last_offset`, needs a new segment.
    pub fn must_roll(
        &self,
        bytes: usize,
        last_offset: i64,
        segment_bytes: u64,
        segment_ms: i64,
        now_ms: i64,
    ) -> bool {
        if self.is_empty() {
            return false;
        }
        self.size + bytes as u64 > segment_bytes
            || now_ms.saturating_sub(self.created_ms) > segment_ms
            || self.offset_index.is_full()
            || self.time_index.is_full()
            || last_offset - self.base_offset > i32::MAX as i64
            || self.size + bytes as u64 > u32::MAX as u64
    }

    /// Appends whole batches whose offsets are final. `batches` must all start
    /// at or after `next_offset`. On a write error the file is cut back to its
    /// previous size so no partial batch remains.
    pub fn append(&mut self, data: &[u8], batches: &[BatchLocation]) -> Result<()> {
        let start = self.size;
        if let Err(e) = self.log.write_all_at(data, start) {
            // Best effort: leave no torn batch behind (e.g. ENOSPC mid-write).
            let _ = self.log.set_len(start);
            return Err(e.into());
        }
        if self.is_empty() && self.created_ms == 0 {
            self.created_ms = now_wall_ms();
        }
        self.size += data.len() as u64;
        for loc in batches {
            let position = start + loc.position;
            self.index_batch(position, loc)?;
        }
        Ok(())
    }

    fn index_batch(&mut self, position: u64, loc: &BatchLocation) -> Result<()> {
        if loc.max_timestamp > self.max_timestamp {
            self.max_timestamp = loc.max_timestamp;
            self.offset_of_max_timestamp = loc.last_offset;
        }
        self.next_offset = loc.last_offset + 1;
        if self.bytes_since_index_entry > self.index_interval_bytes {
            self.offset_index.append(OffsetPosition {
                relative_offset: (loc.last_offset - self.base_offset) as u32,
                position: position as u32,
            })?;
            let newest = self.time_index.last();
            if newest.is_none_or(|t| self.max_timestamp > t.timestamp) {
                self.time_index.append(TimestampOffset {
                    timestamp: self.max_timestamp,
                    relative_offset: (self.offset_of_max_timestamp - self.base_offset) as u32,
                })?;
            }
            self.bytes_since_index_entry = 0;
        }
        self.bytes_since_index_entry += loc.size;
        Ok(())
    }

    pub fn append_aborted_txn(&mut self, txn: &AbortedTxn) -> Result<()> {
        self.txn_index.append(txn)
    }

    /// Visits every batch from `position` on (see [`scan_file`]).
    pub fn scan(
        &self,
        position: u64,
        visit: impl FnMut(BatchLocation, BatchView<'_>) -> ControlFlow<()>,
    ) -> Result<Option<(u64, BatchError)>> {
        let file = self.log.handle()?;
        scan_file(&file, self.size, position, visit)
    }

    /// Rebuilds the indexes from the `.log`, validating every batch's CRC and
    /// offsets, and cuts the file at the first invalid or torn batch.
    /// `on_batch` sees each valid batch in order (epoch cache, producer state)
    /// and may return an aborted transaction to record in the `.txnindex`.
    /// Offsets are not covered by the CRC, so they are checked against the
    /// segment's range (below the next segment, within a 32-bit relative
    /// offset). Returns the number of bytes truncated.
    pub fn recover(
        &mut self,
        max_batch_bytes: usize,
        next_segment_base: Option<i64>,
        mut on_batch: impl FnMut(&BatchView<'_>) -> Option<AbortedTxn>,
    ) -> Result<u64> {
        self.offset_index.make_active()?;
        self.time_index.make_active()?;
        self.offset_index.reset()?;
        self.time_index.reset()?;
        self.txn_index.truncate_to(self.base_offset)?;
        self.max_timestamp = -1;
        self.offset_of_max_timestamp = self.base_offset;
        self.next_offset = self.base_offset;
        self.bytes_since_index_entry = 0;
        let mut valid_end = 0u64;
        let mut failure: Option<StorageError> = None;
        let log = self.log.handle()?;
        scan_file(&log, self.size, 0, |loc, view| {
            let valid = view.validate().is_ok()
                && loc.size <= max_batch_bytes.max(BATCH_HEADER_LEN)
                && loc.base_offset >= self.next_offset
                && loc.last_offset - self.base_offset <= i32::MAX as i64
                && next_segment_base.is_none_or(|next| loc.last_offset < next);
            if !valid {
                return ControlFlow::Break(());
            }
            let step = self
                .index_batch(loc.position, &loc)
                .and_then(|()| match on_batch(&view) {
                    Some(txn) => self.txn_index.append(&txn),
                    None => Ok(()),
                });
            if let Err(e) = step {
                failure = Some(e);
                return ControlFlow::Break(());
            }
            valid_end = loc.position + loc.size as u64;
            ControlFlow::Continue(())
        })?;
        if let Some(e) = failure {
            return Err(e);
        }
        let truncated = self.size - valid_end;
        if truncated > 0 {
            self.log.set_len(valid_end)?;
            self.size = valid_end;
        }
        Ok(truncated)
    }

    /// Position and location of the first batch whose last offset is >= `offset`.
    pub fn find_batch(&self, offset: i64, from_position: u64) -> Result<Option<BatchLocation>> {
        let file = self.log.handle()?;
        self.find_batch_in(&file, offset, from_position)
    }

    /// [`LogSegment::find_batch`] in `file`, the segment's open file.
    fn find_batch_in(
        &self,
        file: &File,
        offset: i64,
        from_position: u64,
    ) -> Result<Option<BatchLocation>> {
        let rel = (offset - self.base_offset).clamp(0, u32::MAX as i64);
        let start = self
            .offset_index
            .floor(rel)
            .map_or(0, |e| e.position as u64)
            .max(from_position);
        let mut found = None;
        self.scan_headers(file, start, |loc| {
            if loc.last_offset >= offset {
                found = Some(loc);
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })?;
        Ok(found)
    }

    /// Reads only the 61-byte headers from `position` on (cheap for index
    /// lookups that cross a few batches).
    fn scan_headers(
        &self,
        file: &File,
        mut position: u64,
        mut visit: impl FnMut(BatchLocation) -> ControlFlow<()>,
    ) -> Result<()> {
        let mut header = [0u8; BATCH_HEADER_LEN];
        while position + BATCH_HEADER_LEN as u64 <= self.size {
            file.read_exact_at(&mut header, position)?;
            let size = match batch_size_at(&header) {
                Some(Ok(s)) => s,
                _ => break,
            };
            // Parse the header fields without requiring the whole batch.
            let base_offset = i64::from_be_bytes(header[0..8].try_into().expect("8 bytes"));
            let delta = i32::from_be_bytes(header[23..27].try_into().expect("4 bytes"));
            let max_timestamp = i64::from_be_bytes(header[35..43].try_into().expect("8 bytes"));
            let loc = BatchLocation {
                position,
                size,
                base_offset,
                last_offset: base_offset + delta as i64,
                max_timestamp,
            };
            if visit(loc).is_break() {
                break;
            }
            position += size as u64;
        }
        Ok(())
    }

    /// A slice of whole batches starting with the batch that holds `offset`,
    /// at most `max_bytes` long but always including that first batch whole
    /// (Kafka's rule: a fetch makes progress even past max_bytes), and never
    /// past `max_position` (the high watermark's position, when bounded).
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        max_position: Option<u64>,
        first_batch_whole: bool,
    ) -> Result<Option<FileSlice>> {
        let file = self.log.handle()?;
        let Some(first) = self.find_batch_in(&file, offset, 0)? else {
            return Ok(None);
        };
        let limit = max_position.unwrap_or(self.size).min(self.size);
        if first.position >= limit {
            return Ok(None);
        }
        let mut len = first.size;
        if len > max_bytes && !first_batch_whole {
            return Ok(None);
        }
        let mut next_offset = first.last_offset + 1;
        if len < max_bytes {
            // Whole batches up to an indexed batch that ends in reach are
            // counted from the index instead of header by header; the scan
            // goes on from that batch, so it sees it and its last offset.
            let reach = limit.min(first.position.saturating_add(max_bytes as u64));
            let mut scan_from = first.position + first.size as u64;
            if let Some(indexed) = self.offset_index.batch_ending_by(reach) {
                let indexed_at = u64::from(indexed.position);
                if indexed_at > scan_from {
                    len = (indexed_at - first.position) as usize;
                    scan_from = indexed_at;
                }
            }
            self.scan_headers(&file, scan_from, |loc| {
                let end = loc.position + loc.size as u64;
                if end > limit || len + loc.size > max_bytes {
                    return ControlFlow::Break(());
                }
                len += loc.size;
                next_offset = loc.last_offset + 1;
                ControlFlow::Continue(())
            })?;
        }
        Ok(Some(FileSlice {
            range: FileRange {
                file,
                position: first.position,
                len,
            },
            next_offset,
        }))
    }

    /// Byte position where the batch containing `offset` starts, or the size
    /// of the segment if all batches end before it.
    pub fn position_of(&self, offset: i64) -> Result<u64> {
        Ok(self
            .find_batch(offset, 0)?
            .map_or(self.size, |l| l.position))
    }

    /// First batch with max timestamp >= `timestamp`, at or after `min_offset`.
    pub fn find_by_timestamp(
        &self,
        timestamp: i64,
        min_offset: i64,
    ) -> Result<Option<(BatchLocation, Bytes)>> {
        if self.max_timestamp < timestamp {
            return Ok(None);
        }
        let from_offset = self
            .time_index
            .floor(timestamp - 1)
            .map_or(self.base_offset, |t| {
                self.base_offset + t.relative_offset as i64
            })
            .max(min_offset);
        let file = self.log.handle()?;
        let start = self
            .find_batch_in(&file, from_offset, 0)?
            .map_or(self.size, |l| l.position);
        let mut found = None;
        self.scan_headers(&file, start, |loc| {
            if loc.max_timestamp >= timestamp && loc.last_offset >= min_offset {
                found = Some(loc);
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })?;
        match found {
            None => Ok(None),
            Some(loc) => {
                let mut buf = vec![0u8; loc.size];
                file.read_exact_at(&mut buf, loc.position)?;
                Ok(Some((loc, Bytes::from(buf))))
            }
        }
    }

    /// Cuts the segment so that no batch with last offset >= `offset`
    /// remains. Returns the offset of the first removed batch, if any.
    pub fn truncate_to(&mut self, offset: i64) -> Result<Option<i64>> {
        let Some(first_removed) = self.find_batch(offset, 0)? else {
            return Ok(None);
        };
        let keep = first_removed.position;
        let removed_rel = first_removed.base_offset - self.base_offset;
        // Drop the maps before the files change under them.
        self.offset_index.make_active()?;
        self.time_index.make_active()?;
        self.log.set_len(keep)?;
        self.size = keep;
        // Offset entries are keyed by the indexed batch's last offset, which is
        // below the first removed batch for every batch that stays.
        self.offset_index.truncate_from_key(removed_rel)?;
        self.time_index
            .truncate_suffix_where(|t| t.relative_offset as i64 >= removed_rel)?;
        self.txn_index.truncate_to(first_removed.base_offset)?;
        self.max_timestamp = -1;
        self.offset_of_max_timestamp = self.base_offset;
        self.next_offset = self.base_offset;
        self.load_tail()?;
        Ok(Some(first_removed.base_offset))
    }

    /// fsyncs the log and its index files.
    pub fn flush(&self) -> Result<()> {
        self.log.sync_data()?;
        self.offset_index.flush()?;
        self.time_index.flush()?;
        self.txn_index.flush()?;
        Ok(())
    }

    /// Called when the segment stops being the active one.
    pub fn seal(&mut self) -> Result<()> {
        self.flush()?;
        self.offset_index.seal()?;
        self.time_index.seal()?;
        self.txn_index.seal()
    }

    /// Removes all of the segment's files.
    pub fn delete(self) -> Result<()> {
        for suffix in [".log", ".index", ".timeindex", ".txnindex"] {
            remove_if_exists(&segment_file_name(&self.dir, self.base_offset, suffix))?;
        }
        Ok(())
    }
}

pub fn remove_if_exists(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

pub fn now_wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Visits every batch of `file` (its first `size` bytes) from `position` on,
/// reading in large chunks. Returns the position and error of the first batch
/// that cannot be parsed, or None when the scan reached the end (or `visit`
/// stopped it).
pub fn scan_file(
    file: &File,
    size: u64,
    mut position: u64,
    mut visit: impl FnMut(BatchLocation, BatchView<'_>) -> ControlFlow<()>,
) -> Result<Option<(u64, BatchError)>> {
    let mut buf = vec![0u8; SCAN_CHUNK];
    while position < size {
        let want = ((size - position) as usize).min(buf.len());
        file.read_exact_at(&mut buf[..want], position)?;
        let mut at = 0usize;
        while at < want {
            let here = position + at as u64;
            let rest = &buf[at..want];
            let batch_size = match batch_size_at(rest) {
                None => break,
                Some(Err(e)) => return Ok(Some((here, e))),
                Some(Ok(n)) => n,
            };
            if here + batch_size as u64 > size {
                let available = (size - here) as usize;
                return Ok(Some((
                    here,
                    BatchError::Truncated {
                        needed: batch_size,
                        available,
                    },
                )));
            }
            if batch_size > rest.len() {
                break;
            }
            let view = match BatchView::parse(rest) {
                Ok(v) => v,
                Err(e) => return Ok(Some((here, e))),
            };
            let loc = BatchLocation {
                position: here,
                size: batch_size,
                base_offset: view.base_offset(),
                last_offset: view.last_offset(),
                max_timestamp: view.max_timestamp(),
            };
            if visit(loc, view).is_break() {
                return Ok(None);
            }
            at += batch_size;
        }
        if at == 0 {
            match batch_size_at(&buf[..want]) {
                // A batch larger than the buffer: grow it and read again.
                Some(Ok(n)) if n > buf.len() => buf.resize(n, 0),
                // Fewer bytes left than a batch header: a torn tail.
                _ => {
                    return Ok(Some((
                        position,
                        BatchError::Truncated {
                            needed: LOG_OVERHEAD,
                            available: want,
                        },
                    )))
                }
            }
        }
        position += at as u64;
    }
    Ok(None)
}
