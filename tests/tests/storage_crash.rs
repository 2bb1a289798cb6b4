//! Kills a writer process with SIGKILL at random moments and reopens the log:
//! every batch acknowledged as flushed must be there, and every batch served
//! must be intact and hold exactly what was written at its offset.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ottla_protocol::batch::BatchIter;
use ottla_protocol::records::{records_section, walk_records};
use ottla_storage::config::LogConfig;
use ottla_storage::log::FetchIsolation;
use ottla_storage::manager::{LogManager, TopicPartition};
use ottla_tests::crash::expected_value;

fn verify(dir: &std::path::Path, at_least: i64) -> i64 {
    let config = LogConfig::default();
    let manager = LogManager::open(vec![dir.to_path_buf()], &config, 1).unwrap();
    let log = manager
        .get(&TopicPartition::new("crash", 0))
        .expect("partition exists");
    let log = log.read();
    let end = log.log_end_offset();
    assert!(
        end >= at_least,
        "lost flushed data: log ends at {end}, {at_least} was flushed"
    );
    let mut offset = 0;
    while offset < end {
        let slice = log
            .read(offset, 1 << 20, FetchIsolation::LogEnd, true)
            .unwrap()
            .slice
            .expect("data up to the log end");
        let bytes = slice.read().unwrap();
        for batch in BatchIter::new(&bytes) {
            let batch = batch.expect("whole batches only");
            batch.validate().expect("no corrupt batch is served");
            assert_eq!(batch.base_offset(), offset, "offsets are contiguous");
            let section = records_section(&batch).unwrap();
            walk_records(&section, |r| {
                let at = batch.base_offset() + r.offset_delta as i64;
                assert_eq!(
                    r.value.unwrap(),
                    expected_value(at).as_slice(),
                    "value at {at}"
                );
            })
            .unwrap();
            offset = batch.next_offset();
        }
    }
    // Leader epochs were rebuilt consistently with the data.
    if end > 0 {
        let latest = log.latest_epoch().unwrap();
        assert_eq!(latest as i64, (end - 5) / 1000);
    }
    end
}

#[test]
fn kill_9_never_loses_flushed_batches() {
    let dir = tempfile::tempdir().unwrap();
    let writer = env!("CARGO_BIN_EXE_storage-crash-writer");
    let mut flushed = 0i64;
    let mut seed = 0x9e3779b97f4a7c15u64 ^ std::process::id() as u64;
    for round in 0..12 {
        let mut child = Command::new(writer)
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let run_for = Duration::from_millis(30 + seed % 400);
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut last = 0i64;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(n) = line.strip_prefix("flushed ") {
                    last = n.parse().unwrap();
                }
            }
            last
        });
        let start = Instant::now();
        while start.elapsed() < run_for {
            std::thread::sleep(Duration::from_millis(5));
        }
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        child.wait().unwrap();
        let reported = reader.join().unwrap();
        flushed = flushed.max(reported);
        let end = verify(dir.path(), flushed);
        eprintln!("round {round}: flushed {flushed}, recovered end {end}");
    }
    assert!(flushed > 0, "the writer made progress");
}

#[test]
fn a_full_disk_takes_the_log_offline_without_corrupting_it() {
    let dir = tempfile::tempdir().unwrap();
    let writer = env!("CARGO_BIN_EXE_storage-crash-writer");
    let out = Command::new(writer)
        .arg(dir.path())
        .args(["--fsize-limit", "100000"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "writer crashed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let flushed: i64 = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("flushed ")?.parse().ok())
        .max()
        .expect("some batches were flushed before the disk filled");
    let error = stdout
        .lines()
        .find(|l| l.starts_with("error "))
        .expect("the append past the limit failed");
    assert!(error.contains("offline"), "{error}");
    assert!(
        error.contains("then: log") && error.contains("offline"),
        "further appends are refused: {error}"
    );
    // Everything acknowledged is intact; the failed write left nothing torn.
    let end = verify(dir.path(), flushed);
    assert_eq!(end, flushed, "nothing past the last successful append");
}
