//! The per-segment transaction index (`<base offset>.txnindex`): the aborted
//! transactions whose ABORT marker sits in the segment, in marker order.
//! READ_COMMITTED fetches use it to tell consumers which data to skip.
//!
//! Each entry is 34 bytes, big-endian, as Kafka writes them:
//! `version i16 (0), producerId i64, firstOffset i64, lastOffset i64,
//! lastStableOffset i64`. As in Kafka, the file is only created by the first
//! append, so most segments have none.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use tracing::warn;

use crate::error::{Result, StorageError};

pub const ABORTED_TXN_SIZE: usize = 34;
const ABORTED_TXN_VERSION: i16 = 0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    /// First offset of the transaction's data.
    pub first_offset: i64,
    /// Offset of the ABORT marker.
    pub last_offset: i64,
    /// The partition's LSO right after the abort; lets a fetch stop searching
    /// older segments' indexes once it passes the fetch's upper bound.
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    pub fn to_bytes(&self) -> [u8; ABORTED_TXN_SIZE] {
        let mut b = [0u8; ABORTED_TXN_SIZE];
        b[0..2].copy_from_slice(&ABORTED_TXN_VERSION.to_be_bytes());
        b[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        b[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        b[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        b[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        b
    }

    /// `None` for an entry version this broker does not know.
    pub fn from_bytes(b: &[u8; ABORTED_TXN_SIZE]) -> Option<Self> {
        let i64_at = |at: usize| i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        (i16::from_be_bytes([b[0], b[1]]) == ABORTED_TXN_VERSION).then(|| Self {
            producer_id: i64_at(2),
            first_offset: i64_at(10),
            last_offset: i64_at(18),
            last_stable_offset: i64_at(26),
        })
    }
}

#[derive(Debug)]
pub struct TransactionIndex {
    path: PathBuf,
    /// Open while the segment takes appends: opened by the first append
    /// (or a truncation) and closed when the segment is sealed, so sealed
    /// segments hold no descriptor for their index.
    file: Option<File>,
    /// The whole index; the file is only read once, at open.
    entries: Vec<AbortedTxn>,
}

impl TransactionIndex {
    /// Loads the index at `path` if it exists. A torn last entry (length not a
    /// multiple of 34, from a crash mid-append) is cut off.
    pub fn open(path: &Path) -> Result<Self> {
        let mut index = Self {
            path: path.to_path_buf(),
            file: None,
            entries: Vec::new(),
        };
        let bytes = match fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(index),
            Err(e) => return Err(e.into()),
        };
        let whole = bytes.len() - bytes.len() % ABORTED_TXN_SIZE;
        if whole != bytes.len() {
            warn!(
                path = %path.display(),
                len = bytes.len(),
                "transaction index ends in a partial entry; truncating it to {whole} bytes"
            );
            index.set_len(whole as u64)?;
        }
        for chunk in bytes[..whole].chunks_exact(ABORTED_TXN_SIZE) {
            let txn =
                AbortedTxn::from_bytes(chunk.try_into().expect("34 bytes")).ok_or_else(|| {
                    StorageError::corrupt_file(path, "unknown aborted transaction entry version")
                })?;
            index.entries.push(txn);
        }
        Ok(index)
    }

    fn open_file(&self) -> io::Result<File> {
        // Append mode: every write lands at the end, including after set_len.
        OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&self.path)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends an aborted transaction. Marker offsets must strictly increase,
    /// as they do in the log; anything else is refused (Kafka throws too).
    pub fn append(&mut self, txn: &AbortedTxn) -> Result<()> {
        if let Some(last) = self.entries.last() {
            if txn.last_offset <= last.last_offset {
                return Err(StorageError::corrupt_file(
                    &self.path,
                    format!(
                        "aborted transaction marker offset {} is not above the last one {}",
                        txn.last_offset, last.last_offset
                    ),
                ));
            }
        }
        if self.file.is_none() {
            self.file = Some(self.open_file()?);
        }
        let file = self.file.as_mut().expect("opened above");
        file.write_all(&txn.to_bytes())?;
        self.entries.push(*txn);
        Ok(())
    }

    /// The aborted transactions overlapping `[fetch_offset, upper_bound_offset)`:
    /// marker at or after `fetch_offset` and data starting before the bound.
    pub fn collect_aborted(&self, fetch_offset: i64, upper_bound_offset: i64) -> Vec<AbortedTxn> {
        let mut out = Vec::new();
        self.collect_aborted_into(fetch_offset, upper_bound_offset, &mut out);
        out
    }

    /// Same as [`Self::collect_aborted`], appending to `out`. Returns true when
    /// the search is complete: an entry's LSO reached `upper_bound_offset`, so
    /// no later segment can hold an abort overlapping the range (Kafka's
    /// TxnIndexSearchResult.isComplete). The log walks segments until then.
    pub fn collect_aborted_into(
        &self,
        fetch_offset: i64,
        upper_bound_offset: i64,
        out: &mut Vec<AbortedTxn>,
    ) -> bool {
        for txn in &self.entries {
            if txn.last_offset >= fetch_offset && txn.first_offset < upper_bound_offset {
                out.push(*txn);
            }
            if txn.last_stable_offset >= upper_bound_offset {
                return true;
            }
        }
        false
    }

    pub fn all(&self) -> &[AbortedTxn] {
        &self.entries
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Removes the entries whose marker is at or after `offset` (log truncated
    /// to `offset`).
    pub fn truncate_to(&mut self, offset: i64) -> Result<()> {
        let keep = self
            .entries
            .iter()
            .position(|t| t.last_offset >= offset)
            .unwrap_or(self.entries.len());
        if keep < self.entries.len() {
            self.set_len((keep * ABORTED_TXN_SIZE) as u64)?;
            self.entries.truncate(keep);
        }
        Ok(())
    }

    /// Removes every entry (segment recovery rebuilds the index).
    pub fn reset(&mut self) -> Result<()> {
        self.set_len(0)?;
        self.entries.clear();
        Ok(())
    }

    /// Cuts the file, if it exists, to `len` bytes; it stays open for the
    /// appends that follow a truncation.
    fn set_len(&mut self, len: u64) -> Result<()> {
        if self.file.is_none() {
            if !self.path.exists() {
                return Ok(());
            }
            self.file = Some(self.open_file()?);
        }
        let file = self.file.as_ref().expect("opened above");
        file.set_len(len)?;
        Ok(())
    }

    /// Kafka's sanityCheck: every marker must be inside the segment.
    pub fn sanity_check(&self, segment_base_offset: i64) -> Result<()> {
        match self.entries.iter().find(|t| t.last_offset < segment_base_offset) {
            Some(t) => Err(StorageError::corrupt_file(
                &self.path,
                format!(
                    "aborted transaction marker offset {} is below the segment base offset {segment_base_offset}",
                    t.last_offset
                ),
            )),
            None => Ok(()),
        }
    }

    /// fsyncs the file, if it is open (written since it was opened).
    pub fn flush(&self) -> Result<()> {
        if let Some(file) = &self.file {
            file.sync_all()?;
        }
        Ok(())
    }

    /// fsyncs and closes the file: the segment takes no more appends.
    pub fn seal(&mut self) -> Result<()> {
        self.flush()?;
        self.file = None;
        Ok(())
    }

    /// Deletes the file (if any) and forgets the entries. Returns whether a
    /// file was removed.
    pub fn delete(&mut self) -> Result<bool> {
        self.file = None;
        self.entries.clear();
        match fs::remove_file(&self.path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Renames the file (if it exists yet) and from now on uses `new_path`.
    /// The open handle stays valid across the rename.
    pub fn rename_to(&mut self, new_path: &Path) -> Result<()> {
        if self.file.is_some() || self.path.exists() {
            fs::rename(&self.path, new_path)?;
        }
        self.path = new_path.to_path_buf();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(pid: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: last,
            last_stable_offset: lso,
        }
    }

    fn index_path(dir: &Path) -> PathBuf {
        dir.join("00000000000000000000.txnindex")
    }

    #[test]
    fn entry_layout_matches_kafka() {
        let b = txn(0x0102030405060708, 10, 20, 21).to_bytes();
        assert_eq!(&b[0..2], &[0, 0]);
        assert_eq!(&b[2..10], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(i64::from_be_bytes(b[10..18].try_into().unwrap()), 10);
        assert_eq!(i64::from_be_bytes(b[18..26].try_into().unwrap()), 20);
        assert_eq!(i64::from_be_bytes(b[26..34].try_into().unwrap()), 21);
        assert_eq!(
            AbortedTxn::from_bytes(&b),
            Some(txn(0x0102030405060708, 10, 20, 21))
        );
    }

    #[test]
    fn file_is_created_lazily_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let path = index_path(dir.path());
        let mut idx = TransactionIndex::open(&path).unwrap();
        idx.flush().unwrap();
        idx.truncate_to(0).unwrap();
        assert!(!path.exists());
        idx.append(&txn(1, 0, 5, 6)).unwrap();
        idx.append(&txn(2, 3, 9, 10)).unwrap();
        idx.flush().unwrap();
        assert_eq!(fs::metadata(&path).unwrap().len(), 68);
        let again = TransactionIndex::open(&path).unwrap();
        assert_eq!(again.all(), &[txn(1, 0, 5, 6), txn(2, 3, 9, 10)]);
    }

    /// Only a segment taking appends holds its index open; a sealed or
    /// reopened one reads its entries from memory and opens the file again
    /// only to change it.
    #[test]
    fn the_file_is_open_only_while_the_index_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = index_path(dir.path());
        let mut idx = TransactionIndex::open(&path).unwrap();
        idx.append(&txn(1, 0, 5, 6)).unwrap();
        idx.append(&txn(2, 3, 9, 10)).unwrap();
        assert!(idx.file.is_some());
        idx.seal().unwrap();
        assert!(idx.file.is_none());
        let mut again = TransactionIndex::open(&path).unwrap();
        assert!(again.file.is_none());
        assert_eq!(again.all(), &[txn(1, 0, 5, 6), txn(2, 3, 9, 10)]);
        again.truncate_to(9).unwrap();
        again.append(&txn(3, 7, 12, 13)).unwrap();
        again.seal().unwrap();
        let last = TransactionIndex::open(&path).unwrap();
        assert_eq!(last.all(), &[txn(1, 0, 5, 6), txn(3, 7, 12, 13)]);
    }

    #[test]
    fn marker_offsets_must_increase() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = TransactionIndex::open(&index_path(dir.path())).unwrap();
        idx.append(&txn(1, 0, 5, 6)).unwrap();
        assert!(idx.append(&txn(2, 1, 5, 6)).is_err());
        assert!(idx.append(&txn(2, 1, 4, 6)).is_err());
        assert_eq!(idx.len(), 1);
    }

    #[test]
    fn collect_aborted_selects_overlapping_ranges() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = TransactionIndex::open(&index_path(dir.path())).unwrap();
        let a = txn(1, 0, 10, 11);
        let b = txn(2, 5, 20, 21);
        let c = txn(3, 25, 30, 31);
        for t in [a, b, c] {
            idx.append(&t).unwrap();
        }
        assert_eq!(idx.collect_aborted(0, 100), vec![a, b, c]);
        assert_eq!(idx.collect_aborted(11, 100), vec![b, c]);
        assert_eq!(idx.collect_aborted(21, 25), Vec::<AbortedTxn>::new());
        // The search stops at an entry whose LSO reaches the upper bound.
        let mut out = Vec::new();
        assert!(idx.collect_aborted_into(0, 15, &mut out));
        assert_eq!(out, vec![a, b]);
        let mut out = Vec::new();
        assert!(!idx.collect_aborted_into(0, 40, &mut out));
        assert_eq!(out, vec![a, b, c]);
    }

    #[test]
    fn truncate_to_removes_markers_at_or_after() {
        let dir = tempfile::tempdir().unwrap();
        let path = index_path(dir.path());
        let mut idx = TransactionIndex::open(&path).unwrap();
        for t in [txn(1, 0, 10, 11), txn(2, 5, 20, 21), txn(3, 25, 30, 31)] {
            idx.append(&t).unwrap();
        }
        idx.truncate_to(20).unwrap();
        assert_eq!(idx.all(), &[txn(1, 0, 10, 11)]);
        assert_eq!(fs::metadata(&path).unwrap().len(), 34);
        // Appends continue at the new end.
        idx.append(&txn(4, 12, 15, 16)).unwrap();
        assert_eq!(
            TransactionIndex::open(&path).unwrap().all(),
            &[txn(1, 0, 10, 11), txn(4, 12, 15, 16)]
        );
        idx.reset().unwrap();
        assert!(idx.is_empty());
        assert_eq!(fs::metadata(&path).unwrap().len(), 0);
    }

    #[test]
    fn torn_tail_is_truncated_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = index_path(dir.path());
        let mut bytes = txn(1, 0, 10, 11).to_bytes().to_vec();
        bytes.extend_from_slice(&txn(2, 12, 20, 21).to_bytes()[..17]);
        fs::write(&path, &bytes).unwrap();
        let mut idx = TransactionIndex::open(&path).unwrap();
        assert_eq!(idx.all(), &[txn(1, 0, 10, 11)]);
        assert_eq!(fs::metadata(&path).unwrap().len(), 34);
        idx.append(&txn(2, 12, 20, 21)).unwrap();
        assert_eq!(TransactionIndex::open(&path).unwrap().len(), 2);
    }

    #[test]
    fn unknown_version_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = index_path(dir.path());
        let mut bytes = txn(1, 0, 10, 11).to_bytes();
        bytes[1] = 1;
        fs::write(&path, bytes).unwrap();
        assert!(matches!(
            TransactionIndex::open(&path),
            Err(StorageError::CorruptFile { .. })
        ));
    }

    #[test]
    fn sanity_check_rejects_markers_before_the_segment() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = TransactionIndex::open(&index_path(dir.path())).unwrap();
        idx.append(&txn(1, 90, 100, 101)).unwrap();
        idx.sanity_check(100).unwrap();
        assert!(idx.sanity_check(101).is_err());
    }

    #[test]
    fn rename_and_delete() {
        let dir = tempfile::tempdir().unwrap();
        let path = index_path(dir.path());
        let mut idx = TransactionIndex::open(&path).unwrap();
        let renamed = dir.path().join("00000000000000000000.txnindex.deleted");
        // Nothing on disk yet: only the path changes.
        idx.rename_to(&renamed).unwrap();
        assert!(!renamed.exists());
        idx.append(&txn(1, 0, 1, 2)).unwrap();
        assert!(renamed.exists());
        idx.rename_to(&path).unwrap();
        idx.append(&txn(1, 3, 4, 5)).unwrap();
        assert!(!renamed.exists());
        assert_eq!(TransactionIndex::open(&path).unwrap().len(), 2);
        assert!(idx.delete().unwrap());
        assert!(!path.exists());
        assert!(!idx.delete().unwrap());
    }
}
