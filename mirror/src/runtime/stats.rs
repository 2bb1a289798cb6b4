//! What DescribeMirrors and the metrics report about a mirror partition,
//! as the fetch loop sees it. The loop reports through three calls:
//! `source_answered`, `appended` and `failed`.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use ottla_coordinator_common::partition_writer::now_ms;
use parking_lot::Mutex;

#[derive(Debug)]
pub struct MirrorStats {
    /// The source's high watermark as last fetched (-1: not yet).
    pub source_high_watermark: AtomicI64,
    /// When the source last told it, or confirmed it unchanged by leaving
    /// it out of an incremental fetch session's answer (wall-clock ms).
    source_answered_at_ms: AtomicI64,
    /// When the mirror last held everything the source had (wall-clock
    /// ms); until then, when mirroring of the partition began.
    caught_up_at_ms: AtomicI64,
    /// Whether the last answer of the source found the mirror behind.
    behind: AtomicBool,
    pub bytes: AtomicU64,
    pub fetch_errors: AtomicU64,
    pub last_error: Mutex<Option<String>>,
}

impl Default for MirrorStats {
    fn default() -> Self {
        Self::new()
    }
}

impl MirrorStats {
    pub fn new() -> Self {
        Self {
            source_high_watermark: AtomicI64::new(-1),
            source_answered_at_ms: AtomicI64::new(-1),
            caught_up_at_ms: AtomicI64::new(now_ms()),
            behind: AtomicBool::new(false),
            bytes: AtomicU64::new(0),
            fetch_errors: AtomicU64::new(0),
            last_error: Mutex::default(),
        }
    }

    /// The source answered a fetch of the partition without error;
    /// `local_end` is the mirror's log end offset after what came with it
    /// was appended.
    pub fn source_answered(&self, high_watermark: i64, local_end: i64) {
        let now = now_ms();
        self.source_high_watermark
            .store(high_watermark, Ordering::Relaxed);
        self.source_answered_at_ms.store(now, Ordering::Relaxed);
        let behind = high_watermark > local_end;
        if !behind {
            self.caught_up_at_ms.store(now, Ordering::Relaxed);
        }
        self.behind.store(behind, Ordering::Relaxed);
    }

    /// LAG-MS: how long the mirror has been behind the source, 0 when the
    /// source's last answer found it caught up, -1 before any answer. Not
    /// the age of the records copied: a backlog of old records would read
    /// as years.
    pub fn lag_ms(&self, now_ms: i64) -> i64 {
        if self.source_high_watermark.load(Ordering::Relaxed) < 0 {
            -1
        } else if self.behind.load(Ordering::Relaxed) {
            (now_ms - self.caught_up_at_ms.load(Ordering::Relaxed)).max(0)
        } else {
            0
        }
    }

    /// The source answered a fetch session that includes the partition and
    /// left it out: its high watermark is as last told, as of `now_ms`.
    pub fn source_unchanged(&self, now_ms: i64) {
        if self.source_high_watermark.load(Ordering::Relaxed) >= 0 {
            self.source_answered_at_ms.store(now_ms, Ordering::Relaxed);
        }
    }

    /// How old the source high watermark is, -1 before any answer.
    pub fn source_offset_age_ms(&self, now_ms: i64) -> i64 {
        match self.source_answered_at_ms.load(Ordering::Relaxed) {
            -1 => -1,
            at => (now_ms - at).max(0),
        }
    }

    /// `bytes` of batches were appended.
    pub fn appended(&self, bytes: usize) {
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// A fetch of the partition failed for `error`.
    pub fn failed(&self, error: String) {
        self.fetch_errors.fetch_add(1, Ordering::Relaxed);
        *self.last_error.lock() = Some(error);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_ms_is_how_long_the_mirror_has_been_behind() {
        let stats = MirrorStats::new();
        let start = now_ms();
        assert_eq!(stats.lag_ms(start), -1, "no answer from the source yet");
        assert_eq!(stats.source_offset_age_ms(start), -1);
        stats.source_answered(1_000, 10);
        let answered = stats.source_answered_at_ms.load(Ordering::Relaxed);
        assert_eq!(stats.source_offset_age_ms(answered + 40), 40);
        stats.source_unchanged(answered + 100);
        assert_eq!(stats.source_offset_age_ms(answered + 140), 40);
        let lag = stats.lag_ms(start + 5_000);
        assert!(
            (4_000..=5_000).contains(&lag),
            "behind since mirroring began: {lag}"
        );
        stats.source_answered(1_000, 1_000);
        assert_eq!(stats.lag_ms(start + 6_000), 0, "caught up");
        stats.source_answered(2_000, 1_500);
        let caught_up = stats.caught_up_at_ms.load(Ordering::Relaxed);
        assert_eq!(
            stats.lag_ms(caught_up + 250),
            250,
            "behind again: counted from when it was last caught up"
        );
    }
}
