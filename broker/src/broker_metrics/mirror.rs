//! Mirror partitions this broker leads, read at scrape time from their
//! drivers: state, lag (records and milliseconds), bytes mirrored and fetch
//! errors, labelled by mirror, topic and partition.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use crate::broker::Broker;
use crate::metrics::{counter, gauge, Field};
use crate::replica::now_ms;

/// One mirror partition, copied out of its driver.
struct MirrorRow {
    labels: [(&'static str, String); 3],
    state: i64,
    lag_records: i64,
    lag_ms: i64,
    bytes: u64,
    fetch_errors: u64,
}

pub struct MirrorCollector(pub Arc<Broker>);

impl fmt::Debug for MirrorCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MirrorCollector").finish_non_exhaustive()
    }
}

impl MirrorCollector {
    fn rows(&self) -> Vec<MirrorRow> {
        let mut rows: Vec<MirrorRow> = self
            .0
            .mirrors
            .running()
            .into_iter()
            .map(|(tp, run)| {
                let source = run.stats.source_high_watermark.load(Ordering::Relaxed);
                let destination = self
                    .0
                    .replicas
                    .partition(&tp)
                    .map_or(-1, |p| p.log.read().log_end_offset());
                MirrorRow {
                    labels: [
                        ("mirror", run.key.mirror_name.clone()),
                        ("topic", tp.topic.clone()),
                        ("partition", tp.partition.to_string()),
                    ],
                    state: i64::from(run.state.lock().wire_value()),
                    lag_records: if source >= 0 && destination >= 0 {
                        (source - destination).max(0)
                    } else {
                        -1
                    },
                    lag_ms: run.stats.lag_ms(now_ms()),
                    bytes: run.stats.bytes.load(Ordering::Relaxed),
                    fetch_errors: run.stats.fetch_errors.load(Ordering::Relaxed),
                }
            })
            .collect();
        rows.sort_by(|a, b| a.labels.cmp(&b.labels));
        rows
    }
}

impl Collector for MirrorCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> fmt::Result {
        let rows = self.rows();
        let gauges: [Field<MirrorRow, i64>; 3] = [
            (
                "ottla_mirror_partition_state",
                "Mirror partition state (wire value: 0 PREPARING, 2 MIRRORING, 3 PAUSING, 4 PAUSED, 5 STOPPING, 6 STOPPED, 7 FAILED, 16 UNKNOWN).",
                |r| r.state,
            ),
            (
                "ottla_mirror_lag_records",
                "Source high watermark minus this log's end offset (-1: unknown).",
                |r| r.lag_records,
            ),
            (
                "ottla_mirror_lag_ms",
                "How long the partition has been behind the source, in ms (0: caught up, -1: unknown).",
                |r| r.lag_ms,
            ),
        ];
        for (name, help, value) in gauges {
            gauge(
                &mut e,
                name,
                help,
                rows.iter().map(|r| (r.labels.clone(), value(r))),
            )?;
        }
        counter(
            &mut e,
            "ottla_mirror_bytes",
            "Bytes mirrored from the source.",
            rows.iter().map(|r| (r.labels.clone(), r.bytes)),
        )?;
        counter(
            &mut e,
            "ottla_mirror_fetch_errors",
            "Failed fetches from the source (reconnects, errors answered).",
            rows.iter().map(|r| (r.labels.clone(), r.fetch_errors)),
        )?;
        gauge(
            &mut e,
            "ottla_mirror_fetchers",
            "Mirror fetch loops (one connection and fetch session each) running per source broker (mirror.num.fetchers each).",
            self.0
                .mirrors
                .services()
                .fetchers
                .running()
                .into_iter()
                .map(|((mirror, broker), loops)| {
                    (
                        [("mirror", mirror), ("source_broker", broker.to_string())],
                        loops as u64,
                    )
                }),
        )
    }
}
