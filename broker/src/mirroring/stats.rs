//! What DescribeMirrors and the metrics report about a mirror partition,
//! as the fetch loop sees it. The loop reports through three calls:
//! `source_answered`, `appended` and `failed`.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::replica::now_ms;

#[derive(Debug, Default)]
pub struct MirrorStats {
    /// The source's high watermark as last fetched (-1: not yet).
    pub source_high_watermark: AtomicI64,
    /// How far behind the source the last appended batch was, in ms.
    pub lag_ms: AtomicI64,
    pub bytes: AtomicU64,
    pub fetch_errors: AtomicU64,
    pub last_error: Mutex<Option<String>>,
}

impl MirrorStats {
    pub fn new() -> Self {
        Self {
            source_high_watermark: AtomicI64::new(-1),
            lag_ms: AtomicI64::new(-1),
            ..Self::default()
        }
    }

    /// The source answered a fetch of the partition without error;
    /// `local_end` is the mirror's log end offset after what came with it
    /// was appended.
    pub fn source_answered(&self, high_watermark: i64, local_end: i64) {
        self.source_high_watermark
            .store(high_watermark, Ordering::Relaxed);
        if high_watermark <= local_end {
            self.lag_ms.store(0, Ordering::Relaxed);
        }
    }

    /// `bytes` of batches were appended; the newest of them has timestamp
    /// `newest_timestamp` (-1: none known).
    pub fn appended(&self, bytes: usize, newest_timestamp: i64) {
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        if newest_timestamp >= 0 {
            self.lag_ms
                .store((now_ms() - newest_timestamp).max(0), Ordering::Relaxed);
        }
    }

    /// A fetch of the partition failed for `error`.
    pub fn failed(&self, error: String) {
        self.fetch_errors.fetch_add(1, Ordering::Relaxed);
        *self.last_error.lock() = Some(error);
    }
}
