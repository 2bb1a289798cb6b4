//! Where compaction stands on each log, kept by the log and moved by the
//! cleaner's passes.

/// Where compaction stands on a log between passes. Kept in memory: after a
/// restart the whole log counts as dirty once (as with a lost
/// cleaner-offset-checkpoint in Kafka).
#[derive(Debug, Clone, Copy)]
pub struct CleanerProgress {
    /// Offsets below this were covered by a finished pass.
    pub(crate) first_dirty: i64,
    /// The tombstone horizon that pass used.
    pub(crate) tombstone_horizon: i64,
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
