//! Storage benchmark: append and read throughput of a partition log, open
//! times after clean and unclean shutdowns, and the append rate as a share of
//! the raw sequential write bandwidth of the same disk, measured in the same
//! run with `dd`.
//!
//! Usage: storage-bench [DIR] [SIZE_MIB]   (defaults: a temp dir, 1024)

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use ottla_protocol::batch::{BatchBuilder, SimpleRecord};
use ottla_storage::config::LogConfig;
use ottla_storage::log::{FetchIsolation, LogOpenOptions, PartitionLog};
use ottla_storage::producer_state::AppendOrigin;

const RECORD_BYTES: usize = 1024;
const RECORDS_PER_BATCH: usize = 16;
const MIB: f64 = 1024.0 * 1024.0;

fn main() {
    let mut args = std::env::args().skip(1);
    let base = args.next().map(std::path::PathBuf::from);
    let size_mib: u64 = args
        .next()
        .map_or(1024, |s| s.parse().expect("SIZE_MIB is a number"));
    let tmp = tempfile::tempdir_in(base.as_deref().unwrap_or(Path::new("."))).unwrap();
    let dir = tmp.path();

    // The disk is measured before and after the log run and the better
    // figure kept, so the ratio never flatters the log.
    let dd_before = raw_write_bandwidth(dir, size_mib);
    let (append_mibs, log_dir) = append_throughput(dir, size_mib);
    let dd_mibs = dd_before.max(raw_write_bandwidth(dir, size_mib));
    let read_mibs = read_throughput(&log_dir);
    let (clean_ms, unclean_tail_ms, unclean_full_ms) = open_times(&log_dir);

    println!("storage benchmark, {size_mib} MiB, {RECORD_BYTES}-byte records, {RECORDS_PER_BATCH} per batch");
    println!(
        "{:<44} {:>12}",
        "raw sequential write (dd, fdatasync)",
        format!("{dd_mibs:.0} MiB/s")
    );
    println!(
        "{:<44} {:>12}",
        "log append (leader path, fsync at end)",
        format!("{append_mibs:.0} MiB/s")
    );
    println!(
        "{:<44} {:>12}",
        "append / raw disk",
        format!("{:.0} %", 100.0 * append_mibs / dd_mibs)
    );
    println!(
        "{:<44} {:>12}",
        "sequential read (page cache)",
        format!("{read_mibs:.0} MiB/s")
    );
    println!(
        "{:<44} {:>12}",
        "open after clean shutdown",
        format!("{clean_ms:.1} ms")
    );
    println!(
        "{:<44} {:>12}",
        "open after kill -9 (flushed to the end)",
        format!("{unclean_tail_ms:.1} ms")
    );
    println!(
        "{:<44} {:>12}",
        "open after kill -9 (full rescan)",
        format!("{unclean_full_ms:.1} ms")
    );
}

fn raw_write_bandwidth(dir: &Path, size_mib: u64) -> f64 {
    let target = dir.join("dd.bin");
    let start = Instant::now();
    let status = Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", target.display()))
        .arg("bs=1M")
        .arg(format!("count={size_mib}"))
        .arg("conv=fdatasync")
        .arg("status=none")
        .status()
        .expect("dd runs");
    assert!(status.success(), "dd failed");
    let secs = start.elapsed().as_secs_f64();
    std::fs::remove_file(target).unwrap();
    size_mib as f64 / secs
}

fn append_throughput(dir: &Path, size_mib: u64) -> (f64, std::path::PathBuf) {
    let log_dir = dir.join("bench-0");
    let mut log =
        PartitionLog::open(&log_dir, LogConfig::default(), LogOpenOptions::default()).unwrap();
    let now = 1_700_000_000_000;
    let records: Vec<SimpleRecord> = (0..RECORDS_PER_BATCH)
        .map(|i| SimpleRecord {
            timestamp: now,
            key: Some(format!("key-{i}").into_bytes()),
            value: Some(vec![b'v'; RECORD_BYTES]),
            headers: vec![],
        })
        .collect();
    let mut batch = BatchBuilder::default().build(&records);
    let batches = (size_mib as f64 * MIB / batch.len() as f64) as u64;
    let start = Instant::now();
    for _ in 0..batches {
        // The leader path rewrites the offset in place; the CRC is unaffected.
        log.append_as_leader(&mut batch, 0, AppendOrigin::Client, now)
            .unwrap();
    }
    log.flush().unwrap();
    let secs = start.elapsed().as_secs_f64();
    log.set_high_watermark(log.log_end_offset());
    log.close().unwrap();
    ((batches * batch.len() as u64) as f64 / MIB / secs, log_dir)
}

fn read_throughput(log_dir: &Path) -> f64 {
    let opts = LogOpenOptions {
        clean_shutdown: true,
        ..Default::default()
    };
    let log = PartitionLog::open(log_dir, LogConfig::default(), opts).unwrap();
    let start = Instant::now();
    let mut offset = 0;
    let mut bytes = 0usize;
    while offset < log.log_end_offset() {
        let info = log
            .read(offset, 1 << 20, FetchIsolation::LogEnd, true)
            .unwrap();
        let data = info.slice.expect("data").read().unwrap();
        bytes += data.len();
        offset = last_next_offset(&data);
    }
    bytes as f64 / MIB / start.elapsed().as_secs_f64()
}

fn last_next_offset(data: &[u8]) -> i64 {
    ottla_protocol::batch::BatchIter::new(data)
        .map(|b| b.unwrap().next_offset())
        .last()
        .expect("at least one batch")
}

fn open_times(log_dir: &Path) -> (f64, f64, f64) {
    let time_open = |opts: LogOpenOptions| {
        let start = Instant::now();
        let log = PartitionLog::open(log_dir, LogConfig::default(), opts).unwrap();
        let ms = start.elapsed().as_secs_f64() * 1000.0;
        (ms, log)
    };
    let (clean, log) = time_open(LogOpenOptions {
        clean_shutdown: true,
        ..Default::default()
    });
    let end = log.log_end_offset();
    drop(log); // no close: the next open is unclean
    let (tail, log) = time_open(LogOpenOptions {
        recovery_point: end,
        ..Default::default()
    });
    assert_eq!(log.log_end_offset(), end);
    drop(log);
    let (full, log) = time_open(LogOpenOptions::default());
    assert_eq!(log.log_end_offset(), end);
    (clean, tail, full)
}
