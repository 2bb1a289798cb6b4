//! Kafka's per-segment sparse indexes: `.index` (offset -> file position,
//! 8-byte entries) and `.timeindex` (timestamp -> offset, 12-byte entries).
//!
//! The active segment keeps its entries in memory and writes the new ones to
//! the file when it is flushed, with the file open only for that: nothing is
//! mapped that can still be truncated, and an active segment costs one file
//! descriptor (its `.log`), not three, so 10,000 partitions fit in a default
//! descriptor limit. A sealed segment's index is memory-mapped read-only, so
//! the page cache holds it instead of the heap. Indexes are never
//! authoritative: an index behind its log only makes lookups scan further (a
//! clean open scans from the last entry; a crash rebuilds from the recovery
//! point), and on a sanity failure the log rebuilds them from the `.log`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use parking_lot::Mutex;

use crate::error::{Result, StorageError};

/// The layout of one index kind.
pub trait IndexEntry: Copy + std::fmt::Debug {
    const SIZE: usize;
    /// The value entries are ordered and searched by.
    fn key(&self) -> i64;
    fn encode(&self, out: &mut [u8]);
    fn decode(bytes: &[u8]) -> Self;
}

/// `.index` entry: offset relative to the segment base, byte position in `.log`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetPosition {
    pub relative_offset: u32,
    pub position: u32,
}

impl IndexEntry for OffsetPosition {
    const SIZE: usize = 8;
    fn key(&self) -> i64 {
        self.relative_offset as i64
    }
    fn encode(&self, out: &mut [u8]) {
        out[..4].copy_from_slice(&self.relative_offset.to_be_bytes());
        out[4..8].copy_from_slice(&self.position.to_be_bytes());
    }
    fn decode(b: &[u8]) -> Self {
        Self {
            relative_offset: u32::from_be_bytes(b[..4].try_into().expect("4 bytes")),
            position: u32::from_be_bytes(b[4..8].try_into().expect("4 bytes")),
        }
    }
}

/// `.timeindex` entry: the largest timestamp so far and the offset it is at
/// (relative to the segment base).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    pub timestamp: i64,
    pub relative_offset: u32,
}

impl IndexEntry for TimestampOffset {
    const SIZE: usize = 12;
    fn key(&self) -> i64 {
        self.timestamp
    }
    fn encode(&self, out: &mut [u8]) {
        out[..8].copy_from_slice(&self.timestamp.to_be_bytes());
        out[8..12].copy_from_slice(&self.relative_offset.to_be_bytes());
    }
    fn decode(b: &[u8]) -> Self {
        Self {
            timestamp: i64::from_be_bytes(b[..8].try_into().expect("8 bytes")),
            relative_offset: u32::from_be_bytes(b[8..12].try_into().expect("4 bytes")),
        }
    }
}

enum Entries<E> {
    /// Active segment: entries in memory; the file holds the first
    /// `written` of them and gets the rest at the next flush.
    Active {
        entries: Vec<E>,
        written: Mutex<usize>,
    },
    /// Sealed segment: read-only map (None for an empty file, which cannot be mapped).
    Sealed { map: Option<Mmap> },
}

/// A sparse, append-only, sorted index file.
pub struct SparseIndex<E: IndexEntry> {
    path: PathBuf,
    entries: Entries<E>,
    max_entries: usize,
}

impl<E: IndexEntry> SparseIndex<E> {
    /// Opens (creating if missing) an index for appending. Fails with
    /// `CorruptFile` if the file is not a whole number of sorted entries, so the
    /// caller rebuilds it.
    pub fn open_active(path: &Path, max_bytes: usize) -> Result<Self> {
        let data = match std::fs::read(path) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        let entries = decode_all::<E>(path, &data)?;
        // The file exists from the start: renames and deletions expect it.
        OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            entries: Entries::Active {
                written: Mutex::new(entries.len()),
                entries,
            },
            max_entries: (max_bytes / E::SIZE).max(1),
        })
    }

    /// Opens an existing index read-only and memory-maps it.
    pub fn open_sealed(path: &Path, max_bytes: usize) -> Result<Self> {
        let file = File::open(path)?;
        let len = file.metadata()?.len() as usize;
        let map = if len == 0 {
            None
        } else {
            // SAFETY: sealed index files are only ever replaced or deleted by
            // this process, never truncated or written while mapped: truncation
            // and rebuilds first convert the index back to `Active`, which
            // drops the map.
            Some(unsafe { Mmap::map(&file)? })
        };
        if let Some(m) = &map {
            check_sorted::<E>(path, m)?;
        }
        Ok(Self {
            path: path.to_path_buf(),
            entries: Entries::Sealed { map },
            max_entries: (max_bytes / E::SIZE).max(len / E::SIZE),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn len(&self) -> usize {
        match &self.entries {
            Entries::Active { entries, .. } => entries.len(),
            Entries::Sealed { map } => map.as_ref().map_or(0, |m| m.len() / E::SIZE),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn is_full(&self) -> bool {
        self.len() >= self.max_entries
    }

    pub fn entry(&self, i: usize) -> E {
        match &self.entries {
            Entries::Active { entries, .. } => entries[i],
            Entries::Sealed { map } => {
                let m = map.as_ref().expect("index entry within bounds");
                E::decode(&m[i * E::SIZE..(i + 1) * E::SIZE])
            }
        }
    }

    pub fn last(&self) -> Option<E> {
        let n = self.len();
        (n > 0).then(|| self.entry(n - 1))
    }

    /// Index of the first entry for which `before` is false (entries are
    /// sorted, so `before` holds for a prefix).
    fn partition_point(&self, before: impl Fn(&E) -> bool) -> usize {
        let (mut lo, mut hi) = (0usize, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if before(&self.entry(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The last entry whose key is <= `key`.
    pub fn floor(&self, key: i64) -> Option<E> {
        let i = self.partition_point(|e| e.key() <= key);
        (i > 0).then(|| self.entry(i - 1))
    }

    /// The first entry whose key is >= `key`.
    pub fn ceiling(&self, key: i64) -> Option<E> {
        let i = self.partition_point(|e| e.key() < key);
        (i < self.len()).then(|| self.entry(i))
    }

    /// Appends an entry; keys must not decrease. Ignored when full (the segment
    /// rolls on a full index before that matters).
    pub fn append(&mut self, entry: E) -> Result<()> {
        if self.is_full() {
            return Ok(());
        }
        if let Some(last) = self.last() {
            if entry.key() < last.key() {
                return Err(StorageError::corrupt_file(
                    &self.path,
                    format!("index entry key {} below last {}", entry.key(), last.key()),
                ));
            }
        }
        match &mut self.entries {
            Entries::Active { entries, .. } => {
                entries.push(entry);
                Ok(())
            }
            Entries::Sealed { .. } => Err(StorageError::corrupt_file(
                &self.path,
                "append to a sealed index",
            )),
        }
    }

    /// Removes entries whose key is >= `key`.
    pub fn truncate_from_key(&mut self, key: i64) -> Result<()> {
        let keep = self.partition_point(|e| e.key() < key);
        self.truncate_entries(keep)
    }

    /// Removes entries from the end while `remove` holds for the last one.
    pub fn truncate_suffix_where(&mut self, remove: impl Fn(&E) -> bool) -> Result<()> {
        let mut keep = self.len();
        while keep > 0 && remove(&self.entry(keep - 1)) {
            keep -= 1;
        }
        self.truncate_entries(keep)
    }

    /// Keeps the first `keep` entries.
    pub fn truncate_entries(&mut self, keep: usize) -> Result<()> {
        self.make_active()?;
        if let Entries::Active { entries, written } = &mut self.entries {
            entries.truncate(keep);
            let written = written.get_mut();
            if keep < *written {
                OpenOptions::new()
                    .write(true)
                    .open(&self.path)?
                    .set_len((keep * E::SIZE) as u64)?;
                *written = keep;
            }
        }
        Ok(())
    }

    /// Drops all entries (used before a rebuild).
    pub fn reset(&mut self) -> Result<()> {
        self.truncate_entries(0)
    }

    /// Writes the entries appended since the last flush and fsyncs them.
    pub fn flush(&self) -> Result<()> {
        let Entries::Active { entries, written } = &self.entries else {
            return Ok(());
        };
        let mut written = written.lock();
        if *written == entries.len() {
            return Ok(());
        }
        let mut bytes = vec![0u8; (entries.len() - *written) * E::SIZE];
        for (entry, out) in entries[*written..]
            .iter()
            .zip(bytes.chunks_exact_mut(E::SIZE))
        {
            entry.encode(out);
        }
        let mut file = OpenOptions::new().append(true).open(&self.path)?;
        file.write_all(&bytes)?;
        file.sync_data()?;
        *written = entries.len();
        Ok(())
    }

    /// Flushes and switches to a read-only map, releasing the in-memory copy.
    pub fn seal(&mut self) -> Result<()> {
        if let Entries::Active { .. } = self.entries {
            self.flush()?;
            *self = Self::open_sealed(&self.path, self.max_entries * E::SIZE)?;
        }
        Ok(())
    }

    /// Switches a sealed index back to appendable (before truncation).
    pub fn make_active(&mut self) -> Result<()> {
        if let Entries::Sealed { .. } = self.entries {
            // Drop the map before the file can change under it.
            self.entries = Entries::Sealed { map: None };
            *self = Self::open_active(&self.path, self.max_entries * E::SIZE)?;
        }
        Ok(())
    }

    /// Renames the file (compaction swaps, deletion markers).
    pub fn rename_to(&mut self, new_path: &Path) -> Result<()> {
        std::fs::rename(&self.path, new_path)?;
        self.path = new_path.to_path_buf();
        Ok(())
    }

    pub fn set_max_bytes(&mut self, max_bytes: usize) {
        self.max_entries = (max_bytes / E::SIZE).max(self.len());
    }
}

impl SparseIndex<OffsetPosition> {
    /// An indexed batch that ends at or before `position`: the one before
    /// the last indexed batch starting there or earlier (the next indexed
    /// batch starts after it, at or before `position`).
    pub fn batch_ending_by(&self, position: u64) -> Option<OffsetPosition> {
        let starting_by = self.partition_point(|e| u64::from(e.position) <= position);
        starting_by.checked_sub(2).map(|i| self.entry(i))
    }
}

fn decode_all<E: IndexEntry>(path: &Path, data: &[u8]) -> Result<Vec<E>> {
    check_sorted::<E>(path, data)?;
    Ok(data.chunks_exact(E::SIZE).map(E::decode).collect())
}

fn check_sorted<E: IndexEntry>(path: &Path, data: &[u8]) -> Result<()> {
    if !data.len().is_multiple_of(E::SIZE) {
        return Err(StorageError::corrupt_file(
            path,
            format!("index size {} is not a multiple of {}", data.len(), E::SIZE),
        ));
    }
    let mut prev = i64::MIN;
    for chunk in data.chunks_exact(E::SIZE) {
        let k = E::decode(chunk).key();
        if k < prev {
            return Err(StorageError::corrupt_file(
                path,
                "index entries out of order",
            ));
        }
        prev = k;
    }
    Ok(())
}

pub type OffsetIndex = SparseIndex<OffsetPosition>;
pub type TimeIndex = SparseIndex<TimestampOffset>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_and_ceiling_on_active_and_sealed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("0.index");
        let mut idx = OffsetIndex::open_active(&p, 1024).unwrap();
        for i in 0..10u32 {
            idx.append(OffsetPosition {
                relative_offset: i * 10,
                position: i * 100,
            })
            .unwrap();
        }
        for sealed in [false, true] {
            if sealed {
                idx.seal().unwrap();
            }
            assert_eq!(idx.floor(-1), None);
            assert_eq!(idx.floor(0).unwrap().position, 0);
            assert_eq!(idx.floor(35).unwrap().position, 300);
            assert_eq!(idx.floor(1000).unwrap().position, 900);
            assert_eq!(idx.ceiling(35).unwrap().position, 400);
            assert_eq!(idx.ceiling(91), None);
        }
        idx.truncate_from_key(50).unwrap();
        assert_eq!(idx.len(), 5);
        drop(idx);
        let reopened = OffsetIndex::open_active(&p, 1024).unwrap();
        assert_eq!(reopened.len(), 5);
        assert_eq!(reopened.last().unwrap().relative_offset, 40);
    }

    #[test]
    fn an_active_index_writes_its_entries_at_flush() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("0.index");
        let file_len = || std::fs::metadata(&p).unwrap().len();
        let entry = |i: u32| OffsetPosition {
            relative_offset: i,
            position: i * 100,
        };
        let mut idx = OffsetIndex::open_active(&p, 1024).unwrap();
        for i in 0..3 {
            idx.append(entry(i)).unwrap();
        }
        assert_eq!(file_len(), 0, "appends stay in memory");
        assert_eq!(idx.floor(2), Some(entry(2)));
        idx.flush().unwrap();
        assert_eq!(file_len(), 24);
        idx.append(entry(3)).unwrap();
        idx.truncate_from_key(2).unwrap();
        assert_eq!(file_len(), 16, "truncation cuts written entries too");
        idx.append(entry(5)).unwrap();
        idx.flush().unwrap();
        drop(idx);
        let reopened = OffsetIndex::open_active(&p, 1024).unwrap();
        assert_eq!(reopened.len(), 3);
        assert_eq!(reopened.last(), Some(entry(5)));
    }

    #[test]
    fn active_indexes_hold_no_file_open() {
        let open_files = || std::fs::read_dir("/proc/self/fd").unwrap().count();
        let dir = tempfile::tempdir().unwrap();
        let before = open_files();
        let indexes: Vec<OffsetIndex> = (0..64)
            .map(|i| {
                let mut idx =
                    OffsetIndex::open_active(&dir.path().join(format!("{i}.index")), 1024).unwrap();
                idx.append(OffsetPosition {
                    relative_offset: 1,
                    position: 1,
                })
                .unwrap();
                idx.flush().unwrap();
                idx
            })
            .collect();
        // Other tests of this process may open a few files meanwhile.
        assert!(
            open_files() < before + 8,
            "{} open files",
            open_files() - before
        );
        drop(indexes);
    }

    #[test]
    fn torn_index_is_reported_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("0.timeindex");
        std::fs::write(&p, [0u8; 13]).unwrap();
        assert!(matches!(
            TimeIndex::open_active(&p, 1024),
            Err(StorageError::CorruptFile { .. })
        ));
    }

    #[test]
    fn full_index_reports_full() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = OffsetIndex::open_active(&dir.path().join("0.index"), 16).unwrap();
        for i in 0..2 {
            idx.append(OffsetPosition {
                relative_offset: i,
                position: i,
            })
            .unwrap();
        }
        assert!(idx.is_full());
    }
}
