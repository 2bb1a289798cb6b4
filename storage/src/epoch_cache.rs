//! The leader epoch cache: for each leader epoch, the first offset written in
//! it. Followers use it (OffsetsForLeaderEpoch) to find where their log
//! diverges from the leader's. Semantics follow Kafka's LeaderEpochFileCache.
//!
//! Every change rewrites `leader-epoch-checkpoint` at once (atomically, so it
//! matches memory after a kill -9) but does not fsync it: a leadership change
//! on thousands of partitions would otherwise cost two fsyncs per partition
//! (Kafka moved these fsyncs off its request path too, KAFKA-15046). The log
//! fsyncs the file with [`LeaderEpochCache::flush`] before its recovery point
//! moves, and log recovery rebuilds the entries of the segments it rescans, so
//! after a power loss nothing below the recovery point is missing.

use std::path::Path;

use tracing::{debug, warn};

use crate::checkpoint::{CheckpointEntry, CheckpointFile};
use crate::error::{Result, StorageError};

pub const LEADER_EPOCH_CHECKPOINT_FILE: &str = "leader-epoch-checkpoint";
const CHECKPOINT_VERSION: i32 = 0;
/// OffsetsForLeaderEpoch answers for an epoch the cache cannot place.
pub const UNDEFINED_EPOCH: i32 = -1;
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

impl CheckpointEntry for EpochEntry {
    fn to_line(&self) -> String {
        format!("{} {}", self.epoch, self.start_offset)
    }

    fn from_line(line: &str) -> Option<Self> {
        let mut fields = line.split_whitespace();
        let entry = Self {
            epoch: fields.next()?.parse().ok()?,
            start_offset: fields.next()?.parse().ok()?,
        };
        fields.next().is_none().then_some(entry)
    }
}

#[derive(Debug)]
pub struct LeaderEpochCache {
    checkpoint: CheckpointFile,
    /// Strictly increasing in both epoch and start offset.
    entries: Vec<EpochEntry>,
    /// The file was rewritten since it was last fsynced.
    unsynced: bool,
}

impl LeaderEpochCache {
    /// Loads `<dir>/leader-epoch-checkpoint` (missing = empty cache). Entries
    /// are re-applied through the assign rules, as Kafka does, so a file with
    /// non-monotonic entries loads sanitized.
    pub fn open(dir: &Path) -> Result<Self> {
        let checkpoint = CheckpointFile::new(dir.join(LEADER_EPOCH_CHECKPOINT_FILE));
        let loaded: Vec<EpochEntry> = checkpoint.read_entries(CHECKPOINT_VERSION)?;
        let mut cache = Self {
            checkpoint,
            entries: Vec::with_capacity(loaded.len()),
            unsynced: false,
        };
        for entry in loaded {
            if entry.epoch < 0 || entry.start_offset < 0 {
                return Err(StorageError::corrupt_file(
                    cache.checkpoint.path(),
                    format!("invalid epoch entry {entry:?}"),
                ));
            }
            cache.assign_in_memory(entry);
        }
        Ok(cache)
    }

    /// An empty cache for `dir` whose checkpoint could not be read: the file
    /// is emptied so that it is not read again, and the log rebuilds the
    /// entries from its batches.
    pub fn reset(dir: &Path) -> Result<Self> {
        let mut cache = Self {
            checkpoint: CheckpointFile::new(dir.join(LEADER_EPOCH_CHECKPOINT_FILE)),
            entries: Vec::new(),
            unsynced: false,
        };
        cache.persist()?;
        Ok(cache)
    }

    pub fn path(&self) -> &Path {
        self.checkpoint.path()
    }

    /// Points the cache at a new partition directory (after the directory was
    /// renamed, e.g. for deletion or a future replica swap).
    pub fn update_parent_dir(&mut self, dir: &Path) {
        self.checkpoint = CheckpointFile::new(dir.join(LEADER_EPOCH_CHECKPOINT_FILE));
    }

    /// Records that `epoch` starts at `start_offset`. A no-op when the latest
    /// entry already has this epoch at an offset <= `start_offset`. Otherwise
    /// every entry with an epoch >= `epoch` or a start offset >= `start_offset`
    /// is dropped first, so the cache stays monotonic (Kafka's
    /// maybeTruncateNonMonotonicEntries). Negative values are refused: they
    /// come from a batch without a partition leader epoch.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> Result<()> {
        if epoch < 0 || start_offset < 0 {
            return Err(StorageError::Corrupt(
                ottla_protocol::batch::BatchError::Invalid(
                    "negative leader epoch or start offset for the epoch cache",
                ),
            ));
        }
        if self.assign_in_memory(EpochEntry {
            epoch,
            start_offset,
        }) {
            self.persist()?;
        }
        Ok(())
    }

    /// Returns whether anything changed.
    fn assign_in_memory(&mut self, new: EpochEntry) -> bool {
        let needed = self
            .latest_entry()
            .is_none_or(|l| l.epoch != new.epoch || new.start_offset < l.start_offset);
        if !needed {
            return false;
        }
        let keep = self
            .entries
            .iter()
            .rposition(|e| e.epoch < new.epoch && e.start_offset < new.start_offset)
            .map_or(0, |i| i + 1);
        let removed = self.entries.split_off(keep);
        // Replacing the latest entry at the same offset is the normal case of
        // an epoch without data; anything else means the log diverged.
        if removed.len() > 1
            || removed
                .first()
                .is_some_and(|r| r.start_offset != new.start_offset)
        {
            warn!(path = %self.path().display(), ?new, ?removed, "new epoch entry truncated conflicting entries");
        }
        self.entries.push(new);
        debug!(path = %self.path().display(), ?new, "appended epoch entry");
        true
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn latest_entry(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    pub fn earliest_entry(&self) -> Option<EpochEntry> {
        self.entries.first().copied()
    }

    /// Kafka's endOffsetFor: the largest epoch <= `requested_epoch` and the end
    /// offset of `requested_epoch`, which is the start offset of the next
    /// higher epoch, or `log_end_offset` if it is the latest epoch.
    /// `(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)` when `requested_epoch` is
    /// undefined or above every cached epoch. When it is below every cached
    /// epoch the answer is `(requested_epoch, start of the earliest entry)`
    /// (since KIP-279): that data is gone, so the follower truncates to where
    /// the leader's known history starts.
    pub fn end_offset_for(&self, requested_epoch: i32, log_end_offset: i64) -> (i32, i64) {
        if requested_epoch == UNDEFINED_EPOCH {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        }
        if self.latest_epoch() == Some(requested_epoch) {
            return (requested_epoch, log_end_offset);
        }
        let higher = self.entries.partition_point(|e| e.epoch <= requested_epoch);
        let Some(next) = self.entries.get(higher) else {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        };
        match higher.checked_sub(1).map(|i| self.entries[i]) {
            Some(floor) => (floor.epoch, next.start_offset),
            None => (requested_epoch, next.start_offset),
        }
    }

    /// The epoch of the leader that wrote `offset`: the latest entry starting
    /// at or before it.
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        let after = self.entries.partition_point(|e| e.start_offset <= offset);
        after.checked_sub(1).map(|i| self.entries[i].epoch)
    }

    /// Drops the entries starting at or after `end_offset` (log truncated to
    /// `end_offset`). Negative offsets are ignored, as in Kafka.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> Result<()> {
        if end_offset < 0 {
            return Ok(());
        }
        let keep = self
            .entries
            .partition_point(|e| e.start_offset < end_offset);
        if keep < self.entries.len() {
            self.entries.truncate(keep);
            self.persist()?;
        }
        Ok(())
    }

    /// Log start moved to `start_offset`: the last entry starting at or before
    /// it is kept but moved up to `start_offset`, the ones before it go.
    /// Exclusive: an entry starting exactly at `start_offset` stays as it is.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> Result<()> {
        let covered = self
            .entries
            .partition_point(|e| e.start_offset <= start_offset);
        if covered == 0 {
            return Ok(());
        }
        let epoch = self.entries[covered - 1].epoch;
        let unchanged = covered == 1 && self.entries[0].start_offset == start_offset;
        self.entries.drain(..covered - 1);
        self.entries[0] = EpochEntry {
            epoch,
            start_offset,
        };
        if !unchanged {
            self.persist()?;
        }
        Ok(())
    }

    /// Removes every entry (and empties the checkpoint file).
    pub fn clear(&mut self) -> Result<()> {
        self.entries.clear();
        self.persist()
    }

    /// fsyncs the checkpoint if it changed since the last flush. The caller
    /// fsyncs the directory afterwards, so the rename is durable too.
    pub fn flush(&mut self) -> Result<()> {
        if self.unsynced {
            self.checkpoint.sync()?;
            self.unsynced = false;
        }
        Ok(())
    }

    fn persist(&mut self) -> Result<()> {
        self.checkpoint
            .write_entries_unsynced(CHECKPOINT_VERSION, &self.entries)?;
        self.unsynced = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(epoch: i32, start_offset: i64) -> EpochEntry {
        EpochEntry {
            epoch,
            start_offset,
        }
    }

    fn cache_with(dir: &Path, entries: &[(i32, i64)]) -> LeaderEpochCache {
        let mut c = LeaderEpochCache::open(dir).unwrap();
        for &(epoch, offset) in entries {
            c.assign(epoch, offset).unwrap();
        }
        c
    }

    fn reopened(c: &LeaderEpochCache) -> Vec<EpochEntry> {
        LeaderEpochCache::open(c.path().parent().unwrap())
            .unwrap()
            .entries()
            .to_vec()
    }

    #[test]
    fn assign_appends_and_persists() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache_with(dir.path(), &[(0, 0), (2, 10), (5, 30)]);
        assert_eq!(c.entries(), &[e(0, 0), e(2, 10), e(5, 30)]);
        assert_eq!(reopened(&c), c.entries());
        assert_eq!(
            std::fs::read_to_string(c.path()).unwrap(),
            "0\n3\n0 0\n2 10\n5 30\n"
        );
        assert_eq!(c.latest_epoch(), Some(5));
        assert_eq!(c.earliest_entry(), Some(e(0, 0)));
    }

    #[test]
    fn same_epoch_at_a_later_offset_is_a_no_op() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cache_with(dir.path(), &[(1, 5)]);
        c.assign(1, 9).unwrap();
        assert_eq!(c.entries(), &[e(1, 5)]);
    }

    #[test]
    fn same_epoch_at_a_lower_offset_replaces_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cache_with(dir.path(), &[(0, 0), (1, 5)]);
        c.assign(1, 3).unwrap();
        assert_eq!(c.entries(), &[e(0, 0), e(1, 3)]);
        assert_eq!(reopened(&c), c.entries());
    }

    #[test]
    fn lower_epoch_drops_later_epochs() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cache_with(dir.path(), &[(0, 0), (2, 10), (4, 20)]);
        c.assign(3, 25).unwrap();
        assert_eq!(c.entries(), &[e(0, 0), e(2, 10), e(3, 25)]);
        assert_eq!(reopened(&c), c.entries());
    }

    #[test]
    fn lower_start_offset_drops_entries_at_or_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cache_with(dir.path(), &[(0, 0), (2, 10), (4, 20)]);
        c.assign(5, 10).unwrap();
        assert_eq!(c.entries(), &[e(0, 0), e(5, 10)]);
        assert_eq!(reopened(&c), c.entries());
    }

    #[test]
    fn negative_values_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cache_with(dir.path(), &[]);
        assert!(c.assign(-1, 0).is_err());
        assert!(c.assign(0, -1).is_err());
        assert!(c.is_empty());
    }

    #[test]
    fn end_offset_for_follows_kafka() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache_with(dir.path(), &[(2, 10), (4, 20), (7, 35)]);
        let leo = 50;
        assert_eq!(c.end_offset_for(UNDEFINED_EPOCH, leo), (-1, -1));
        // Latest epoch: the log end offset.
        assert_eq!(c.end_offset_for(7, leo), (7, leo));
        // Known epochs end where the next one starts.
        assert_eq!(c.end_offset_for(2, leo), (2, 20));
        assert_eq!(c.end_offset_for(4, leo), (4, 35));
        // An unknown epoch between two known ones: the floor epoch, next start.
        assert_eq!(c.end_offset_for(3, leo), (2, 20));
        assert_eq!(c.end_offset_for(6, leo), (4, 35));
        // Below the earliest: requested epoch and the earliest start offset.
        assert_eq!(c.end_offset_for(1, leo), (1, 10));
        // Above the latest: undefined.
        assert_eq!(c.end_offset_for(8, leo), (-1, -1));
        let empty = LeaderEpochCache::open(tempfile::tempdir().unwrap().path()).unwrap();
        assert_eq!(empty.end_offset_for(0, leo), (-1, -1));
    }

    #[test]
    fn epoch_for_offset() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache_with(dir.path(), &[(2, 10), (4, 20)]);
        assert_eq!(c.epoch_for_offset(9), None);
        assert_eq!(c.epoch_for_offset(10), Some(2));
        assert_eq!(c.epoch_for_offset(19), Some(2));
        assert_eq!(c.epoch_for_offset(20), Some(4));
        assert_eq!(c.epoch_for_offset(1000), Some(4));
    }

    #[test]
    fn truncate_from_end_drops_entries_at_or_after() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cache_with(dir.path(), &[(0, 0), (2, 10), (4, 20)]);
        c.truncate_from_end(21).unwrap();
        assert_eq!(c.entries().len(), 3);
        c.truncate_from_end(10).unwrap();
        assert_eq!(c.entries(), &[e(0, 0)]);
        assert_eq!(reopened(&c), c.entries());
        c.truncate_from_end(-1).unwrap();
        assert_eq!(c.entries(), &[e(0, 0)]);
        c.truncate_from_end(0).unwrap();
        assert!(c.is_empty());
        assert!(reopened(&c).is_empty());
    }

    #[test]
    fn truncate_from_start_moves_the_covering_entry_up() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cache_with(dir.path(), &[(0, 0), (2, 10), (4, 20)]);
        c.truncate_from_start(15).unwrap();
        assert_eq!(c.entries(), &[e(2, 15), e(4, 20)]);
        assert_eq!(reopened(&c), c.entries());
        // Exclusive: an entry starting exactly there stays.
        c.truncate_from_start(20).unwrap();
        assert_eq!(c.entries(), &[e(4, 20)]);
        // Below the first entry: nothing to do.
        c.truncate_from_start(5).unwrap();
        assert_eq!(c.entries(), &[e(4, 20)]);
        c.truncate_from_start(100).unwrap();
        assert_eq!(c.entries(), &[e(4, 100)]);
        assert_eq!(reopened(&c), c.entries());
    }

    #[test]
    fn clear_empties_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = cache_with(dir.path(), &[(0, 0), (1, 3)]);
        c.clear().unwrap();
        assert!(c.is_empty());
        assert!(reopened(&c).is_empty());
        assert_eq!(std::fs::read_to_string(c.path()).unwrap(), "0\n0\n");
    }

    #[test]
    fn open_sanitizes_and_rejects_bad_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE);
        std::fs::write(&path, "0\n3\n0 0\n3 10\n2 5\n").unwrap();
        let c = LeaderEpochCache::open(dir.path()).unwrap();
        assert_eq!(c.entries(), &[e(0, 0), e(2, 5)]);
        std::fs::write(&path, "0\n1\n-1 0\n").unwrap();
        assert!(matches!(
            LeaderEpochCache::open(dir.path()),
            Err(StorageError::CorruptFile { .. })
        ));
        std::fs::write(&path, "1\n0\n").unwrap();
        assert!(LeaderEpochCache::open(dir.path()).is_err());
    }

    #[test]
    fn update_parent_dir_writes_to_the_new_place() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let mut c = cache_with(a.path(), &[(0, 0)]);
        c.update_parent_dir(b.path());
        c.assign(1, 5).unwrap();
        let moved = LeaderEpochCache::open(b.path()).unwrap();
        assert_eq!(moved.entries(), &[e(0, 0), e(1, 5)]);
    }
}
