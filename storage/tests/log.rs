//! Partition-log behaviour: append paths, reads, rolls, recovery, truncation,
//! retention, transactions and compaction.

use std::collections::BTreeMap;
use std::path::Path;

use ottla_protocol::batch::{
    txn_marker_value, BatchBuilder, BatchIter, BatchView, ControlType, SimpleRecord,
};
use ottla_protocol::records::{records_section, walk_records};
use ottla_storage::cleaner::CleanerBuffers;
use ottla_storage::config::{CleanupPolicy, LogConfig};
use ottla_storage::epoch_cache::{LeaderEpochCache, LEADER_EPOCH_CHECKPOINT_FILE};
use ottla_storage::io_throttle::IoThrottle;
use ottla_storage::log::{FetchIsolation, LogOpenOptions, PartitionLog};
use ottla_storage::log_file::OpenLogFiles;
use ottla_storage::producer_state::AppendOrigin;
use ottla_storage::segment::FileSlice;
use ottla_storage::StorageError;
use proptest::prelude::*;

const NOW: i64 = 1_700_000_000_000;

fn records(n: usize, ts: i64, prefix: &str) -> Vec<SimpleRecord> {
    (0..n)
        .map(|i| SimpleRecord {
            timestamp: ts,
            key: Some(format!("{prefix}-k{i}").into_bytes()),
            value: Some(vec![b'x'; 100]),
            headers: vec![],
        })
        .collect()
}

fn client_batch(n: usize) -> Vec<u8> {
    BatchBuilder::default().build(&records(n, NOW, "r"))
}

/// A COMMIT or ABORT marker of producer `pid` (epoch 0).
fn txn_marker_batch(pid: i64, ct: ControlType) -> Vec<u8> {
    BatchBuilder {
        producer_id: pid,
        producer_epoch: 0,
        transactional: true,
        ..Default::default()
    }
    .build_control(ct, NOW, txn_marker_value(0))
}

fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

fn open(dir: &Path, cfg: LogConfig, clean: bool) -> PartitionLog {
    PartitionLog::open(
        dir,
        cfg,
        LogOpenOptions {
            clean_shutdown: clean,
            ..Default::default()
        },
    )
    .unwrap()
}

fn append(log: &mut PartitionLog, n: usize, epoch: i32) -> (i64, i64) {
    let mut b = client_batch(n);
    let info = log
        .append_as_leader(&mut b, epoch, AppendOrigin::Client, NOW)
        .unwrap();
    (info.first_offset, info.last_offset)
}

/// Calls `f` with every batch from `from` to the log end, each validated.
fn for_each_batch(log: &PartitionLog, from: i64, mut f: impl FnMut(&BatchView<'_>)) {
    let mut offset = from;
    loop {
        let info = log
            .read(offset, 1 << 20, FetchIsolation::LogEnd, true)
            .unwrap();
        let Some(slice) = info.slice else { break };
        let bytes = slice.read().unwrap();
        for b in BatchIter::new(&bytes) {
            let b = b.unwrap();
            b.validate().unwrap();
            f(&b);
            offset = b.next_offset();
        }
    }
}

fn read_all(log: &PartitionLog, from: i64) -> Vec<(i64, i64, i32)> {
    let mut out = Vec::new();
    for_each_batch(log, from, |b| {
        out.push((b.base_offset(), b.last_offset(), b.partition_leader_epoch()))
    });
    out
}

#[test]
fn leader_append_assigns_offsets_and_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), false);
    assert_eq!(append(&mut log, 3, 0), (0, 2));
    assert_eq!(append(&mut log, 2, 5), (3, 4));
    assert_eq!(log.log_end_offset(), 5);
    assert_eq!(read_all(&log, 0), vec![(0, 2, 0), (3, 4, 5)]);
    // A read from inside a batch returns that whole batch.
    assert_eq!(read_all(&log, 1)[0], (0, 2, 0));
    assert_eq!(log.end_offset_for_epoch(0), (0, 3));
    assert_eq!(log.end_offset_for_epoch(5), (5, 5));
    assert_eq!(log.latest_epoch(), Some(5));
}

/// The slice of a read of 1 MiB from offset 0.
fn first_mib(log: &PartitionLog) -> FileSlice {
    log.read(0, 1 << 20, FetchIsolation::LogEnd, true)
        .unwrap()
        .slice
        .unwrap()
}

#[test]
fn a_read_for_some_records_stops_after_the_batches_that_hold_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), true);
    for _ in 0..200 {
        append(&mut log, 10, 0);
    }
    let slice = first_mib(&log);
    let everything = slice.read().unwrap();
    assert_eq!(slice.read_records(i64::MAX).unwrap(), everything);
    let some = slice.read_records(25).unwrap();
    assert!(
        some.len() < everything.len() / 2,
        "{} of {}",
        some.len(),
        everything.len()
    );
    assert_eq!(
        some,
        everything.slice(..some.len()),
        "whole batches from the start"
    );
    let last = BatchIter::new(&some)
        .map(|b| b.unwrap().last_offset())
        .last();
    assert!(last.is_some_and(|l| l >= 24), "{last:?}");

    // A batch larger than the first read still comes whole.
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), LogConfig::default(), true);
    append(&mut log, 1_000, 0);
    append(&mut log, 1_000, 0);
    let first = first_mib(&log).read_records(1).unwrap();
    let batches: Vec<_> = BatchIter::new(&first)
        .map(|b| b.unwrap().last_offset())
        .collect();
    assert_eq!(batches, vec![999]);
}

#[test]
fn corrupt_and_oversized_input_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), false);
    let mut b = client_batch(2);
    let last = b.len() - 1;
    b[last] ^= 0xff;
    assert!(matches!(
        log.append_as_leader(&mut b, 0, AppendOrigin::Client, NOW),
        Err(StorageError::Corrupt(_))
    ));
    let mut big = BatchBuilder::default().build(&[SimpleRecord {
        timestamp: NOW,
        key: None,
        value: Some(vec![0; 2_000_000]),
        headers: vec![],
    }]);
    assert!(matches!(
        log.append_as_leader(&mut big, 0, AppendOrigin::Client, NOW),
        Err(StorageError::MessageTooLarge { .. })
    ));
    let mut future = BatchBuilder::default().build(&records(1, NOW + 10 * 3_600_000, "f"));
    assert!(matches!(
        log.append_as_leader(&mut future, 0, AppendOrigin::Client, NOW),
        Err(StorageError::InvalidTimestamp { .. })
    ));
    let mut control = BatchBuilder {
        producer_id: 1,
        producer_epoch: 0,
        transactional: true,
        ..Default::default()
    }
    .build_control(ControlType::Commit, NOW, txn_marker_value(0));
    assert!(log
        .append_as_leader(&mut control, 0, AppendOrigin::Client, NOW)
        .is_err());
    assert_eq!(log.log_end_offset(), 0, "nothing was written");
}

#[test]
fn log_append_time_is_stamped() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        message_timestamp_type: ottla_protocol::batch::TimestampType::LogAppendTime,
        ..small_config()
    };
    let mut log = open(dir.path(), cfg, false);
    let mut b = BatchBuilder::default().build(&records(1, 5, "t"));
    let info = log
        .append_as_leader(&mut b, 0, AppendOrigin::Client, NOW)
        .unwrap();
    assert_eq!(info.log_append_time, NOW);
    let bytes = log
        .read(0, 1 << 20, FetchIsolation::LogEnd, true)
        .unwrap()
        .slice
        .unwrap()
        .read()
        .unwrap();
    let v = BatchView::parse(&bytes).unwrap();
    v.validate().unwrap();
    assert_eq!(v.max_timestamp(), NOW);
}

#[test]
fn segments_roll_and_survive_clean_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), false);
    for _ in 0..50 {
        append(&mut log, 3, 1);
    }
    assert!(log.segment_count() >= 4, "rolled by segment.bytes");
    let before = read_all(&log, 0);
    assert_eq!(before.len(), 50);
    log.close().unwrap();
    let log = open(dir.path(), small_config(), true);
    assert_eq!(log.log_end_offset(), 150);
    assert_eq!(read_all(&log, 0), before);
    assert_eq!(read_all(&log, 77)[0].0, 75);
    // Kafka's file names
    assert!(dir.path().join("00000000000000000000.log").exists());
    assert!(dir.path().join("00000000000000000000.index").exists());
    assert!(dir.path().join("00000000000000000000.timeindex").exists());
    assert!(dir.path().join("leader-epoch-checkpoint").exists());
}

/// What a dir holds: each file's name, length and modification time.
fn dir_state(dir: &Path) -> BTreeMap<String, (u64, std::time::SystemTime)> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            let name = e.file_name().into_string().unwrap();
            (name, (meta.len(), meta.modified().unwrap()))
        })
        .collect()
}

/// A clean stop of many idle partitions must cost nothing per partition: an
/// empty log leaves no producer snapshot, and a log reopened after a clean
/// stop closes again without rewriting a file.
#[test]
fn an_unchanged_log_closes_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), false);
    log.close().unwrap();
    drop(log);
    let names: Vec<String> = dir_state(dir.path()).into_keys().collect();
    assert!(
        !names.iter().any(|n| n.ends_with(".snapshot")),
        "an empty log needs no producer snapshot: {names:?}"
    );

    let mut log = open(dir.path(), small_config(), true);
    for i in 0..30 {
        append(&mut log, 2, i / 10);
    }
    log.close().unwrap();
    drop(log);
    let closed = dir_state(dir.path());
    assert!(
        closed.keys().any(|n| n.ends_with(".snapshot")),
        "{closed:?}"
    );

    std::thread::sleep(std::time::Duration::from_millis(20));
    let mut log = open(dir.path(), small_config(), true);
    log.close().unwrap();
    drop(log);
    assert_eq!(
        dir_state(dir.path()),
        closed,
        "an unchanged log rewrote files"
    );
}

#[test]
fn torn_tail_is_cut_on_unclean_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), false);
    for _ in 0..5 {
        append(&mut log, 2, 0);
    }
    log.flush().unwrap();
    drop(log);
    let path = dir.path().join("00000000000000000000.log");
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 7).unwrap();
    let log = open(dir.path(), small_config(), false);
    assert_eq!(log.log_end_offset(), 8);
    assert_eq!(read_all(&log, 0).len(), 4);
}

/// The epoch checkpoint is fsynced only when the log flushes, so a power loss
/// can leave it empty or torn: reopening rebuilds it from the batches.
#[test]
fn a_lost_or_corrupt_epoch_checkpoint_is_rebuilt_from_the_log() {
    for damaged in ["", "0\n", "0\n2\n0 0\n", "not a checkpoint\n"] {
        for clean in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let mut log = open(dir.path(), small_config(), false);
            for i in 0..30 {
                append(&mut log, 2, i / 10);
            }
            let expected = log.epoch_cache().entries().to_vec();
            assert_eq!(expected.len(), 3, "{expected:?}");
            assert!(log.segment_bases().len() > 2);
            log.close().unwrap();
            drop(log);
            let checkpoint = dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE);
            std::fs::write(&checkpoint, damaged).unwrap();
            let log = open(dir.path(), small_config(), clean);
            assert_eq!(
                log.epoch_cache().entries(),
                expected,
                "checkpoint {damaged:?}, clean shutdown {clean}"
            );
            assert_eq!(log.end_offset_for_epoch(1), (1, 40));
            assert_eq!(
                LeaderEpochCache::open(dir.path()).unwrap().entries(),
                expected,
                "the rebuilt entries are written back"
            );
        }
    }
}

/// Data past the recovery point is rescanned after an unclean shutdown, so an
/// epoch checkpoint that missed its newest entries (not yet fsynced) is
/// completed from the batches; entries below the recovery point were fsynced
/// by the flush that moved it.
#[test]
fn an_epoch_checkpoint_missing_unflushed_entries_is_completed_by_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), false);
    for _ in 0..10 {
        append(&mut log, 2, 0);
    }
    log.flush().unwrap();
    let recovery_point = log.recovery_point();
    let checkpoint = dir.path().join(LEADER_EPOCH_CHECKPOINT_FILE);
    let flushed = std::fs::read(&checkpoint).unwrap();
    for i in 0..20 {
        append(&mut log, 2, 1 + i / 10);
    }
    let expected = log.epoch_cache().entries().to_vec();
    assert_eq!(expected.len(), 3, "{expected:?}");
    drop(log);
    std::fs::write(&checkpoint, flushed).unwrap();
    let log = PartitionLog::open(
        dir.path(),
        small_config(),
        LogOpenOptions {
            clean_shutdown: false,
            recovery_point,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(log.epoch_cache().entries(), expected);
}

#[test]
fn bit_flip_truncates_at_the_corrupt_batch_and_later_segments_go() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), false);
    for _ in 0..40 {
        append(&mut log, 3, 0);
    }
    let bases = log.segment_bases();
    drop(log);
    // Corrupt a byte in the middle of the second segment.
    let second = dir.path().join(format!("{:020}.log", bases[1]));
    let mut data = std::fs::read(&second).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 0x40;
    std::fs::write(&second, &data).unwrap();
    let log = open(dir.path(), small_config(), false);
    let batches = read_all(&log, 0);
    assert!(log.log_end_offset() < 120);
    assert!(log.log_end_offset() >= bases[1]);
    assert_eq!(batches.last().unwrap().1 + 1, log.log_end_offset());
    assert_eq!(
        log.segment_count(),
        2,
        "segments after the corruption are deleted"
    );
}

#[test]
fn verbatim_append_is_byte_identical() {
    let src_dir = tempfile::tempdir().unwrap();
    let dst_dir = tempfile::tempdir().unwrap();
    let mut src = open(src_dir.path(), small_config(), false);
    for epoch in [0, 0, 3, 7] {
        let mut b = BatchBuilder {
            producer_id: 42,
            producer_epoch: 1,
            base_sequence: (src.log_end_offset()) as i32,
            ..Default::default()
        }
        .build(&records(4, NOW, "m"));
        src.append_as_leader(&mut b, epoch, AppendOrigin::Client, NOW)
            .unwrap();
    }
    let bytes = src
        .read(0, 1 << 20, FetchIsolation::LogEnd, true)
        .unwrap()
        .slice
        .unwrap()
        .read()
        .unwrap();
    let mut dst = open(dst_dir.path(), small_config(), false);
    dst.append_verbatim(&bytes, NOW).unwrap();
    let copy = dst
        .read(0, 1 << 20, FetchIsolation::LogEnd, true)
        .unwrap()
        .slice
        .unwrap()
        .read()
        .unwrap();
    assert_eq!(copy, bytes);
    assert_eq!(dst.epoch_cache().entries(), src.epoch_cache().entries());
    assert_eq!(dst.end_offset_for_epoch(3), (3, 12));
    // Overlapping offsets are refused; a gap (compacted source) is accepted.
    assert!(matches!(
        dst.append_verbatim(&bytes, NOW),
        Err(StorageError::NonContiguousOffsets { .. })
    ));
    let gap = BatchBuilder {
        base_offset: 100,
        leader_epoch: 7,
        ..Default::default()
    }
    .build(&records(1, NOW, "g"));
    dst.append_verbatim(&gap, NOW).unwrap();
    assert_eq!(dst.log_end_offset(), 101);
}

#[test]
fn truncation_moves_the_end_and_the_epoch_cache() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), false);
    for epoch in 0..30 {
        append(&mut log, 2, epoch / 10);
    }
    log.set_high_watermark(60);
    log.truncate_to(31).unwrap();
    // The batch 30..31 straddles nothing: 31 is inside batch 30-31, which goes.
    assert_eq!(log.log_end_offset(), 30);
    assert_eq!(log.high_watermark(), 30);
    assert_eq!(log.latest_epoch(), Some(1));
    assert_eq!(read_all(&log, 0).len(), 15);
    assert_eq!(append(&mut log, 1, 4), (30, 30));
    log.truncate_fully_and_start_at(1000).unwrap();
    assert_eq!(log.log_start_offset(), 1000);
    assert_eq!(log.log_end_offset(), 1000);
    assert_eq!(log.latest_epoch(), None);
    assert_eq!(append(&mut log, 1, 9), (1000, 1000));
    assert!(matches!(
        log.read(5, 100, FetchIsolation::LogEnd, true),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
}

/// A replica that became leader in an epoch and lost leadership before
/// appending anything has that epoch in its cache, starting at its log
/// end. Truncating to its log end (the new leader's answer for that epoch)
/// must drop it, or the replica asks with the same epoch forever and never
/// rejoins the ISR.
#[test]
fn truncating_to_the_log_end_drops_an_epoch_led_without_appends() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), false);
    append(&mut log, 3, 47);
    log.assign_leader_epoch(48).unwrap();
    assert_eq!(log.latest_epoch(), Some(48));
    log.truncate_to(log.log_end_offset()).unwrap();
    assert_eq!(log.log_end_offset(), 3);
    assert_eq!(log.latest_epoch(), Some(47));
    // Beyond the end: the same.
    log.assign_leader_epoch(49).unwrap();
    log.truncate_to(100).unwrap();
    assert_eq!(log.latest_epoch(), Some(47));
    // The cache on disk agrees.
    drop(log);
    let log = open(dir.path(), small_config(), true);
    assert_eq!(log.latest_epoch(), Some(47));
}

#[test]
fn retention_and_delete_records_advance_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        retention_bytes: 8192,
        ..small_config()
    };
    let mut log = open(dir.path(), cfg, false);
    for _ in 0..60 {
        append(&mut log, 3, 0);
    }
    log.set_high_watermark(log.log_end_offset());
    let deleted = log.apply_retention(NOW).unwrap();
    assert!(deleted > 0);
    assert!(log.size_bytes() <= 8192 + 4096);
    let start = log.log_start_offset();
    assert!(start > 0);
    assert!(matches!(
        log.read(0, 100, FetchIsolation::HighWatermark, true),
        Err(StorageError::OffsetOutOfRange { .. })
    ));
    let new_start = log.delete_records_before(start + 10).unwrap();
    assert_eq!(new_start, start + 10);
    assert!(
        log.delete_records_before(10_000).is_err(),
        "not past the high watermark"
    );
    // Time retention removes everything old, rolling the active segment.
    let cfg = LogConfig {
        retention_ms: 1000,
        ..small_config()
    };
    log.set_config(cfg);
    log.apply_retention(NOW + 10_000).unwrap();
    assert_eq!(log.log_start_offset(), log.log_end_offset());
}

#[test]
fn transactions_drive_the_lso_and_the_aborted_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), false);
    let txn = |pid: i64, seq: i32| {
        BatchBuilder {
            producer_id: pid,
            producer_epoch: 0,
            base_sequence: seq,
            transactional: true,
            ..Default::default()
        }
        .build(&records(2, NOW, "t"))
    };
    append(&mut log, 1, 0); // 0
    log.append_as_leader(&mut txn(7, 0), 0, AppendOrigin::Client, NOW)
        .unwrap(); // 1-2
    log.append_as_leader(&mut txn(8, 0), 0, AppendOrigin::Client, NOW)
        .unwrap(); // 3-4
    log.set_high_watermark(log.log_end_offset());
    assert_eq!(log.last_stable_offset(), 1);
    log.append_as_leader(
        &mut txn_marker_batch(7, ControlType::Abort),
        0,
        AppendOrigin::Coordinator,
        NOW,
    )
    .unwrap(); // 5
    log.set_high_watermark(log.log_end_offset());
    assert_eq!(log.last_stable_offset(), 3);
    log.append_as_leader(
        &mut txn_marker_batch(8, ControlType::Commit),
        0,
        AppendOrigin::Coordinator,
        NOW,
    )
    .unwrap(); // 6
    log.set_high_watermark(log.log_end_offset());
    assert_eq!(log.last_stable_offset(), 7);
    let info = log
        .read(0, 1 << 20, FetchIsolation::TxnCommitted, true)
        .unwrap();
    let aborted = info.aborted.unwrap();
    assert_eq!(aborted.len(), 1);
    assert_eq!(
        (
            aborted[0].producer_id,
            aborted[0].first_offset,
            aborted[0].last_offset
        ),
        (7, 1, 5)
    );
    // The aborted index and LSO survive an unclean reopen (rebuilt from the log).
    drop(log);
    let mut log = open(dir.path(), small_config(), false);
    log.set_high_watermark(log.log_end_offset());
    assert_eq!(log.last_stable_offset(), 7);
    assert_eq!(log.collect_aborted(0, 7).len(), 1);
}

#[test]
fn idempotent_retries_return_the_original_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), false);
    let batch = |seq: i32| {
        BatchBuilder {
            producer_id: 3,
            producer_epoch: 0,
            base_sequence: seq,
            ..Default::default()
        }
        .build(&records(2, NOW, "i"))
    };
    let first = log
        .append_as_leader(&mut batch(0), 0, AppendOrigin::Client, NOW)
        .unwrap();
    log.append_as_leader(&mut batch(2), 0, AppendOrigin::Client, NOW)
        .unwrap();
    let retry = log
        .append_as_leader(&mut batch(0), 0, AppendOrigin::Client, NOW)
        .unwrap();
    assert!(retry.duplicate);
    assert_eq!(retry.first_offset, first.first_offset);
    assert_eq!(log.log_end_offset(), 4);
    assert!(matches!(
        log.append_as_leader(&mut batch(9), 0, AppendOrigin::Client, NOW),
        Err(StorageError::OutOfOrderSequence { .. })
    ));
    // Producer state survives a clean restart through its snapshot.
    log.close().unwrap();
    let mut log = open(dir.path(), small_config(), true);
    let retry = log
        .append_as_leader(&mut batch(2), 0, AppendOrigin::Client, NOW)
        .unwrap();
    assert!(retry.duplicate);
    // The mirror barrier clears producer state: sequence 0 is new again.
    let mut reset =
        BatchBuilder::default().build_control(ControlType::MirrorPidReset, NOW, vec![0, 0]);
    log.append_as_leader(&mut reset, 1, AppendOrigin::Coordinator, NOW)
        .unwrap();
    assert!(log.producer_state().is_empty());
}

/// Every stored batch as (base offset, is control, its records' values).
fn stored_batches(log: &PartitionLog) -> Vec<(i64, bool, Vec<Vec<u8>>)> {
    let mut out = Vec::new();
    for_each_batch(log, log.log_start_offset(), |b| {
        let mut values = Vec::new();
        walk_records(&records_section(b).unwrap(), |r| {
            values.push(r.value.map(<[u8]>::to_vec).unwrap_or_default())
        })
        .unwrap();
        out.push((b.base_offset(), b.is_control(), values));
    });
    out
}

/// Compaction drops the records of aborted transactions (even the newest
/// value of a key), compacts committed transactional records like any
/// other, and keeps the markers.
#[test]
fn compaction_drops_aborted_transactions_and_keeps_markers() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        cleanup_policy: CleanupPolicy {
            delete: false,
            compact: true,
        },
        ..small_config()
    };
    let mut log = open(dir.path(), cfg, false);
    let batch = |pid: i64, seq: i32, transactional: bool, key: u8, value: u8| {
        BatchBuilder {
            producer_id: pid,
            producer_epoch: 0,
            base_sequence: seq,
            transactional,
            ..Default::default()
        }
        .build(&[SimpleRecord {
            timestamp: NOW,
            key: Some(vec![b'k', key]),
            value: Some(vec![value; 8]),
            headers: vec![],
        }])
    };
    let client = |log: &mut PartitionLog, mut b: Vec<u8>| {
        log.append_as_leader(&mut b, 0, AppendOrigin::Client, NOW)
            .unwrap();
    };
    let coordinator = |log: &mut PartitionLog, mut b: Vec<u8>| {
        log.append_as_leader(&mut b, 0, AppendOrigin::Coordinator, NOW)
            .unwrap();
    };
    client(&mut log, batch(-1, -1, false, 1, 1)); // 0: k1=1
    client(&mut log, batch(7, 0, true, 1, 7)); // 1: k1=7, aborted
    client(&mut log, batch(7, 1, true, 2, 7)); // 2: k2=7, aborted
    coordinator(&mut log, txn_marker_batch(7, ControlType::Abort)); // 3
    client(&mut log, batch(8, 0, true, 3, 8)); // 4: k3=8, committed
    coordinator(&mut log, txn_marker_batch(8, ControlType::Commit)); // 5
    client(&mut log, batch(8, 1, false, 3, 9)); // 6: k3=9
    log.roll(NOW).unwrap();
    log.set_high_watermark(log.log_end_offset());
    log.compact(NOW, &IoThrottle::unlimited(), &CleanerBuffers::default())
        .unwrap();

    let batches = stored_batches(&log);
    let values: Vec<(i64, Vec<Vec<u8>>)> = batches
        .iter()
        .filter(|(_, control, values)| !control && !values.is_empty())
        .map(|(offset, _, values)| (*offset, values.clone()))
        .collect();
    assert_eq!(
        values,
        [(0, vec![vec![1; 8]]), (6, vec![vec![9; 8]])],
        "k1 keeps its committed value, k2 only ever had an aborted one, k3's committed value was superseded"
    );
    let markers: Vec<i64> = batches
        .iter()
        .filter(|(_, control, _)| *control)
        .map(|(offset, _, _)| *offset)
        .collect();
    assert_eq!(markers, [3, 5]);
    // A read_committed fetch still learns of the aborted transaction.
    assert_eq!(log.collect_aborted(0, log.log_end_offset()).len(), 1);
}

/// A compact-only log config with small segments.
fn compacted_config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        cleanup_policy: CleanupPolicy {
            delete: false,
            compact: true,
        },
        segment_bytes,
        ..small_config()
    }
}

/// Appends records `from..from + count` (key `k<i % keys>`, value 40 × `i`),
/// then seals the segment and commits everything, so compaction may take it.
fn write_keyed(log: &mut PartitionLog, from: u8, count: u8, keys: u8) {
    for i in from..from + count {
        let mut b = BatchBuilder::default().build(&[SimpleRecord {
            timestamp: NOW,
            key: Some(vec![b'k', i % keys]),
            value: Some(vec![i; 40]),
            headers: vec![],
        }]);
        log.append_as_leader(&mut b, 0, AppendOrigin::Client, NOW)
            .unwrap();
    }
    log.roll(NOW).unwrap();
    log.set_high_watermark(log.log_end_offset());
}

/// `log.cleaner.io.max.bytes.per.second`: a pass reads every cleanable
/// segment twice (keys, then records) and writes what it keeps, so at a
/// rate of the log's size per second it takes over a second.
#[test]
fn compaction_io_is_held_to_its_rate() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), compacted_config(4096), false);
    write_keyed(&mut log, 0, 200, 10);
    let expected = latest_values(&log);
    let rate = log.size_bytes() as f64;
    let started = std::time::Instant::now();
    let stats = log
        .compact(NOW, &IoThrottle::new(rate), &CleanerBuffers::default())
        .unwrap();
    let took = started.elapsed();
    assert!(stats.records_removed > 0);
    assert!(took >= std::time::Duration::from_secs(1), "took {took:?}");
    assert_eq!(latest_values(&log), expected);
}

/// A pass cleans without the log's lock, so the log may change under it:
/// a segment deleted (DeleteRecords) or recreated after a truncation in
/// the meantime is not overwritten by the pass's stale copy.
#[test]
fn a_pass_leaves_segments_that_changed_while_it_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), compacted_config(1024), false);
    write_keyed(&mut log, 0, 60, 4);

    // Deleted meanwhile: the whole cleanable range goes.
    let input = log
        .compaction_input(NOW)
        .unwrap()
        .expect("sealed segments to clean");
    let cleaned = input
        .clean(&IoThrottle::unlimited(), &CleanerBuffers::default())
        .unwrap();
    assert!(cleaned.rewritten() > 0);
    log.delete_records_before(log.log_end_offset()).unwrap();
    let stats = log.install_cleaned(cleaned).unwrap();
    assert_eq!(stats.segments_rewritten, 0);
    assert_eq!(log.log_start_offset(), log.log_end_offset());

    // Truncated and written again meanwhile: new segments at the old bases.
    write_keyed(&mut log, 0, 60, 4);
    let start = log.log_start_offset();
    let input = log
        .compaction_input(NOW)
        .unwrap()
        .expect("sealed segments to clean");
    let cleaned = input
        .clean(&IoThrottle::unlimited(), &CleanerBuffers::default())
        .unwrap();
    log.truncate_to(start).unwrap();
    write_keyed(&mut log, 100, 60, 4);
    let expected = latest_values(&log);
    assert_eq!(log.install_cleaned(cleaned).unwrap().segments_rewritten, 0);
    assert_eq!(latest_values(&log), expected, "the new records are intact");
    // The next pass cleans the log as it now is.
    assert!(
        log.compact(NOW, &IoThrottle::unlimited(), &CleanerBuffers::default())
            .unwrap()
            .segments_rewritten
            > 0
    );
    assert_eq!(latest_values(&log), expected);
}

/// Kafka's triggers: a compacted log is cleaned again only once the part
/// written since the last pass is over `min.cleanable.dirty.ratio` of the
/// cleanable bytes, or has waited `max.compaction.lag.ms`; a clean log is
/// not read again every `log.cleaner.backoff.ms`.
#[test]
fn compaction_waits_for_enough_dirty_data() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        min_cleanable_dirty_ratio: 0.5,
        max_compaction_lag_ms: 60_000,
        ..compacted_config(1024)
    };
    let mut log = open(dir.path(), cfg, false);
    write_keyed(&mut log, 0, 100, 10);
    let unlimited = || IoThrottle::unlimited();
    assert!(
        log.compact(NOW, &unlimited(), &CleanerBuffers::default())
            .unwrap()
            .segments_rewritten
            > 0
    );
    assert!(
        log.compaction_input(NOW).unwrap().is_none(),
        "nothing new: nothing to do"
    );

    write_keyed(&mut log, 100, 5, 10);
    assert!(
        log.compaction_input(NOW).unwrap().is_none(),
        "a little dirt under the ratio waits"
    );
    assert!(
        log.compaction_input(NOW + 60_000).unwrap().is_some(),
        "unless it waited max.compaction.lag.ms"
    );
    write_keyed(&mut log, 105, 100, 10);
    let expected = latest_values(&log);
    assert!(
        log.compaction_input(NOW).unwrap().is_some(),
        "over the ratio"
    );
    assert!(
        log.compact(NOW, &unlimited(), &CleanerBuffers::default())
            .unwrap()
            .records_removed
            > 0
    );
    assert_eq!(latest_values(&log), expected);
    assert!(log.compaction_input(NOW).unwrap().is_none());
}

/// `log.cleaner.dedupe.buffer.size`: a key map too small for the dirty part
/// cleans the log up to where it filled; later passes take the rest, and
/// the log ends up with exactly the latest value of every key.
#[test]
fn a_small_key_map_compacts_in_several_passes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        min_cleanable_dirty_ratio: 0.0,
        ..compacted_config(1024)
    };
    let mut log = open(dir.path(), cfg, false);
    // 200 one-record batches over 40 keys: five values each.
    write_keyed(&mut log, 0, 200, 40);
    let expected = latest_values(&log);
    let buffers = CleanerBuffers {
        key_capacity: 25,
        ..CleanerBuffers::default()
    };
    let mut passes = 0;
    while let Some(input) = log.compaction_input(NOW).unwrap() {
        let cleaned = input.clean(&IoThrottle::unlimited(), &buffers).unwrap();
        log.install_cleaned(cleaned).unwrap();
        passes += 1;
        assert!(passes < 20, "compaction makes progress");
        assert_eq!(latest_values(&log), expected, "pass {passes}");
    }
    // 25 keys (of single-record batches) per pass: 200 batches take 8.
    assert_eq!(passes, 8);
    let kept: usize = stored_batches(&log).iter().map(|(_, _, v)| v.len()).sum();
    assert_eq!(kept, 40, "one record per key is left");
}

/// A key map that cannot hold even one batch's records says what to change.
#[test]
fn a_key_map_smaller_than_a_batch_is_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), compacted_config(4096), false);
    let mut b = BatchBuilder::default().build(&records(10, NOW, "big"));
    log.append_as_leader(&mut b, 0, AppendOrigin::Client, NOW)
        .unwrap();
    log.roll(NOW).unwrap();
    log.set_high_watermark(log.log_end_offset());
    let buffers = CleanerBuffers {
        key_capacity: 9,
        ..CleanerBuffers::default()
    };
    let e = log
        .compact(NOW, &IoThrottle::unlimited(), &buffers)
        .unwrap_err();
    assert!(matches!(
        e,
        StorageError::KeyMapTooSmall {
            capacity: 9,
            records: 10,
            ..
        }
    ));
    assert!(e
        .to_string()
        .contains("raise log.cleaner.dedupe.buffer.size"));
}

/// A pass streams its cleaned copies to `.cleaned` files instead of
/// holding them in memory; a copy that is not installed is deleted, and an
/// installed one leaves no such file behind.
#[test]
fn cleaned_copies_are_files_that_do_not_outlive_the_pass() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), compacted_config(1024), false);
    write_keyed(&mut log, 0, 60, 4);
    let cleaned_files = || {
        std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".cleaned")
            })
            .count()
    };
    let input = log.compaction_input(NOW).unwrap().unwrap();
    let cleaned = input
        .clean(&IoThrottle::unlimited(), &CleanerBuffers::default())
        .unwrap();
    assert_eq!(cleaned_files(), cleaned.rewritten());
    assert!(cleaned.rewritten() > 0);
    drop(cleaned);
    assert_eq!(cleaned_files(), 0, "a dropped pass leaves nothing");

    let expected = latest_values(&log);
    let input = log.compaction_input(NOW).unwrap().unwrap();
    let cleaned = input
        .clean(&IoThrottle::unlimited(), &CleanerBuffers::default())
        .unwrap();
    assert!(log.install_cleaned(cleaned).unwrap().segments_rewritten > 0);
    assert_eq!(cleaned_files(), 0);
    assert_eq!(latest_values(&log), expected);
}

fn latest_values(log: &PartitionLog) -> BTreeMap<Vec<u8>, (i64, Option<Vec<u8>>)> {
    let mut out = BTreeMap::new();
    for_each_batch(log, log.log_start_offset(), |b| {
        walk_records(&records_section(b).unwrap(), |r| {
            out.insert(
                r.key.unwrap().to_vec(),
                (
                    b.base_offset() + r.offset_delta as i64,
                    r.value.map(<[u8]>::to_vec),
                ),
            );
        })
        .unwrap();
    });
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Compaction keeps exactly the latest value (and offset) of every key.
    #[test]
    fn compaction_keeps_the_latest_value_per_key(
        writes in proptest::collection::vec((0u8..12, proptest::option::of(0u8..255)), 20..200)
    ) {
        let dir = tempfile::tempdir().unwrap();
        let cfg = LogConfig {
            cleanup_policy: CleanupPolicy { delete: false, compact: true },
            segment_bytes: 1024,
            ..small_config()
        };
        let mut log = open(dir.path(), cfg, false);
        for (key, value) in &writes {
            let mut b = BatchBuilder::default().build(&[SimpleRecord {
                timestamp: NOW,
                key: Some(vec![b'k', *key]),
                value: value.map(|v| vec![v; 20]),
                headers: vec![],
            }]);
            log.append_as_leader(&mut b, 0, AppendOrigin::Client, NOW).unwrap();
        }
        log.roll(NOW).unwrap();
        log.set_high_watermark(log.log_end_offset());
        let expected = latest_values(&log);
        let size_before = log.size_bytes();
        // Tombstones are still within delete.retention.ms: kept.
        log.compact(NOW, &IoThrottle::unlimited(), &CleanerBuffers::default()).unwrap();
        prop_assert_eq!(latest_values(&log), expected.clone());
        prop_assert!(log.size_bytes() <= size_before);
        // Reopen (indexes rebuilt from the rewritten segments) and check again.
        drop(log);
        let cfg = LogConfig {
            cleanup_policy: CleanupPolicy { delete: false, compact: true },
            segment_bytes: 1024,
            ..small_config()
        };
        let mut log = open(dir.path(), cfg, false);
        log.set_high_watermark(log.log_end_offset());
        prop_assert_eq!(latest_values(&log), expected.clone());
        // Long after delete.retention.ms, tombstones go too.
        log.compact(NOW + 2 * 86_400_000, &IoThrottle::unlimited(), &CleanerBuffers::default())
            .unwrap();
        let live: BTreeMap<_, _> = expected.into_iter().filter(|(_, (_, v))| v.is_some()).collect();
        prop_assert_eq!(latest_values(&log), live);
    }

    /// Reads that skip whole batches through the offset index return the
    /// same slices as reads that walk every batch header (a log with no
    /// index entries), whatever the index interval, limits and high watermark.
    #[test]
    fn index_assisted_reads_match_header_walks(
        batch_records in proptest::collection::vec(1usize..12, 1..80),
        interval in 0usize..3000,
        hw_frac in 0.0f64..=1.0,
        queries in proptest::collection::vec((0.0f64..=1.0, 1usize..20_000, any::<bool>(), any::<bool>()), 1..40),
    ) {
        let indexed_dir = tempfile::tempdir().unwrap();
        let walked_dir = tempfile::tempdir().unwrap();
        let segment_bytes = 16_384;
        let mut indexed = open(indexed_dir.path(), LogConfig { segment_bytes, index_interval_bytes: interval, ..small_config() }, false);
        let mut walked = open(walked_dir.path(), LogConfig { segment_bytes, index_interval_bytes: usize::MAX, ..small_config() }, false);
        for &n in &batch_records {
            prop_assert_eq!(append(&mut indexed, n, 0), append(&mut walked, n, 0));
        }
        let end = indexed.log_end_offset();
        let hw = (end as f64 * hw_frac) as i64;
        indexed.set_high_watermark(hw);
        walked.set_high_watermark(hw);
        for (at, max_bytes, to_hw, min_one) in queries {
            let offset = (end as f64 * at) as i64;
            let isolation = if to_hw { FetchIsolation::HighWatermark } else { FetchIsolation::LogEnd };
            let slice = |log: &PartitionLog| {
                log.read(offset, max_bytes, isolation, min_one)
                    .unwrap()
                    .slice
                    .map(|s| (s.range.position, s.range.len, s.next_offset))
            };
            prop_assert_eq!(slice(&indexed), slice(&walked), "offset {} max_bytes {}", offset, max_bytes);
        }
    }

    /// Random appends, truncations and reopens agree with a simple model.
    #[test]
    fn append_truncate_reopen_matches_a_model(
        ops in proptest::collection::vec((0u8..4, 1usize..6), 1..60)
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path(), small_config(), false);
        let mut model: Vec<(i64, i64)> = Vec::new();
        for (op, n) in ops {
            match op {
                0 | 1 => {
                    let r = append(&mut log, n, 0);
                    model.push(r);
                }
                2 => {
                    if let Some(&(base, _)) = model.get(model.len().saturating_sub(n)) {
                        log.truncate_to(base).unwrap();
                        model.retain(|&(b, _)| b < base);
                    }
                }
                _ => {
                    let clean = n % 2 == 0;
                    if clean { log.close().unwrap(); } else { drop(log); }
                    log = open(dir.path(), small_config(), clean);
                }
            }
            let end = model.last().map_or(0, |&(_, l)| l + 1);
            prop_assert_eq!(log.log_end_offset(), end);
        }
        let seen: Vec<(i64, i64)> = read_all(&log, 0).into_iter().map(|(b, l, _)| (b, l)).collect();
        prop_assert_eq!(seen, model);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Torn tails and bit flips anywhere in the newest segment: after an
    /// unclean open, what is served is an intact prefix of what was written.
    #[test]
    fn damage_never_serves_a_corrupt_or_altered_batch(
        cut in 0usize..3000,
        flip in proptest::option::of((0usize..1_000_000, 0u8..8)),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open(dir.path(), small_config(), false);
        let mut originals = BTreeMap::new();
        for _ in 0..30 {
            let (first, _) = append(&mut log, 3, 2);
            let bytes = log.read(first, 1 << 20, FetchIsolation::LogEnd, true).unwrap().slice.unwrap().read().unwrap();
            let one = BatchView::parse(&bytes).unwrap().bytes().to_vec();
            originals.insert(first, one);
        }
        log.flush().unwrap();
        let last_base = *log.segment_bases().last().unwrap();
        drop(log);
        let path = dir.path().join(format!("{last_base:020}.log"));
        let mut data = std::fs::read(&path).unwrap();
        // baseOffset and partitionLeaderEpoch sit outside the CRC (as in
        // Kafka), so a flip there that keeps them plausible cannot be
        // detected by anyone; flips land everywhere else.
        let mut unprotected = Vec::new();
        let mut pos = 0;
        for b in BatchIter::new(&data) {
            let b = b.unwrap();
            unprotected.push(pos..pos + 8);
            unprotected.push(pos + 12..pos + 16);
            pos += b.size();
        }
        if let Some((at, bit)) = flip {
            if !data.is_empty() {
                let at = at % data.len();
                if !unprotected.iter().any(|r| r.contains(&at)) {
                    data[at] ^= 1 << bit;
                }
            }
        }
        data.truncate(data.len().saturating_sub(cut));
        std::fs::write(&path, &data).unwrap();
        let log = open(dir.path(), small_config(), false);
        let mut offset = 0;
        while offset < log.log_end_offset() {
            let bytes = log.read(offset, 1 << 20, FetchIsolation::LogEnd, true).unwrap().slice.unwrap().read().unwrap();
            for b in BatchIter::new(&bytes) {
                let b = b.unwrap();
                prop_assert!(b.validate().is_ok());
                prop_assert_eq!(b.base_offset(), offset);
                prop_assert_eq!(Some(&b.bytes().to_vec()), originals.get(&offset));
                offset = b.next_offset();
            }
        }
        prop_assert!(log.log_end_offset() <= 90);
        prop_assert!(log.log_end_offset() >= last_base.min(90));
    }
}

fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn segments_roll_by_age() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_ms: 1000,
        ..small_config()
    };
    let mut log = open(dir.path(), cfg, false);
    let now = wall_ms();
    let mut b = BatchBuilder::default().build(&records(1, now, "a"));
    log.append_as_leader(&mut b, 0, AppendOrigin::Client, now)
        .unwrap();
    log.append_as_leader(&mut b, 0, AppendOrigin::Client, now + 10)
        .unwrap();
    assert_eq!(log.segment_count(), 1, "young segment keeps growing");
    let later = now + 5_000;
    let mut b = BatchBuilder::default().build(&records(1, later, "b"));
    log.append_as_leader(&mut b, 0, AppendOrigin::Client, later)
        .unwrap();
    assert_eq!(log.segment_count(), 2, "segment.ms elapsed: rolled");
    assert_eq!(log.segment_bases(), vec![0, 2]);
}

#[test]
fn flush_messages_moves_the_recovery_point() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), small_config(), false);
    append(&mut log, 2, 0);
    assert_eq!(log.recovery_point(), 0, "default: leave flushing to the OS");
    let cfg = LogConfig {
        flush_messages: 3,
        ..small_config()
    };
    log.set_config(cfg);
    append(&mut log, 2, 0);
    assert_eq!(
        log.recovery_point(),
        4,
        "flushed once 3 records were pending"
    );
    append(&mut log, 1, 0);
    assert_eq!(log.recovery_point(), 4);
    let cfg = LogConfig {
        flush_ms: 0,
        ..small_config()
    };
    log.set_config(cfg);
    log.maybe_flush_by_time(wall_ms() + 1).unwrap();
    assert_eq!(log.recovery_point(), 5, "flush.ms elapsed");
}

/// Closes every idle `.log` file beyond `files`' budget, as the broker's
/// sweep does: the first pass clears the files' marks, the second closes.
fn close_idle_files(files: &OpenLogFiles) -> usize {
    let mut closed = 0;
    for _ in 0..2 {
        for file in files.idle_beyond_budget() {
            closed += usize::from(file.close_if_idle().unwrap());
        }
    }
    closed
}

/// With a budget of no open file, every segment's file is closed between
/// uses: reads, appends, truncation, compaction and a restart all see the
/// same log as with every file open.
#[test]
fn a_log_whose_files_were_closed_behaves_as_one_with_them_open() {
    let dir = tempfile::tempdir().unwrap();
    let files = OpenLogFiles::new(0);
    let opts = LogOpenOptions {
        open_files: files.clone(),
        ..Default::default()
    };
    let mut log = PartitionLog::open(dir.path(), compacted_config(1024), opts).unwrap();
    write_keyed(&mut log, 0, 60, 4);
    let segments = files.open();
    assert!(segments > 3, "{segments} segments");
    let before = read_all(&log, 0);
    let values = latest_values(&log);

    assert_eq!(close_idle_files(&files), segments);
    assert_eq!(files.open(), 0);
    assert_eq!(read_all(&log, 0), before);

    close_idle_files(&files);
    let stats = log
        .compact(NOW, &IoThrottle::unlimited(), &CleanerBuffers::default())
        .unwrap();
    assert!(stats.segments_rewritten > 0, "{stats:?}");
    assert_eq!(latest_values(&log), values);

    close_idle_files(&files);
    let end = log.log_end_offset();
    append(&mut log, 3, 1);
    append(&mut log, 2, 1);
    close_idle_files(&files);
    log.truncate_to(end + 3).unwrap();
    assert_eq!(log.log_end_offset(), end + 3);
    close_idle_files(&files);
    append(&mut log, 2, 2);
    let written = read_all(&log, 0);
    assert_eq!(
        written[written.len() - 2..],
        [(end, end + 2, 1), (end + 3, end + 4, 2)]
    );

    // A restart loads the sealed segments without keeping their files:
    // only the active one stays open.
    log.close().unwrap();
    drop(log);
    assert_eq!(files.open(), 0);
    let opts = LogOpenOptions {
        clean_shutdown: true,
        open_files: files.clone(),
        ..Default::default()
    };
    let reopened = PartitionLog::open(dir.path(), compacted_config(1024), opts).unwrap();
    assert_eq!(files.open(), 1);
    assert_eq!(read_all(&reopened, 0), written);
}
