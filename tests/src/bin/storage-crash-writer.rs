//! Child process for the storage crash test: appends batches with
//! predictable contents to one partition through the log manager, flushes
//! and checkpoints every few batches, and prints `flushed <log end offset>`
//! after each flush. The test kills it with SIGKILL at random moments.
//!
//! With `--fsize-limit BYTES` it instead runs until the disk "fills up"
//! (RLIMIT_FSIZE makes writes past the limit fail with EFBIG, as a full disk
//! fails them with ENOSPC), flushing after every batch, and prints
//! `error <message>` for the first failed append.

use std::io::Write;
use std::path::PathBuf;

use ottla_protocol::batch::{BatchBuilder, SimpleRecord};
use ottla_storage::config::LogConfig;
use ottla_storage::manager::{LogManager, TopicPartition};
use ottla_storage::producer_state::AppendOrigin;
use ottla_tests::crash::{expected_value, RECORDS_PER_BATCH};

fn limit_file_size(bytes: u64) {
    // SAFETY: plain libc calls on this process; SIGXFSZ would otherwise kill
    // it instead of letting the write fail with EFBIG.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let limit = libc::rlimit {
            rlim_cur: bytes,
            rlim_max: bytes,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0, "setrlimit");
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(
        args.next()
            .expect("usage: storage-crash-writer DIR [--fsize-limit BYTES]"),
    );
    let fsize_limit: Option<u64> = match args.next().as_deref() {
        Some("--fsize-limit") => Some(
            args.next()
                .and_then(|v| v.parse().ok())
                .expect("--fsize-limit BYTES"),
        ),
        _ => None,
    };
    let config = LogConfig {
        segment_bytes: 256 * 1024,
        ..LogConfig::default()
    };
    let manager = LogManager::open(vec![dir], &config, 1).expect("open log dir");
    let tp = TopicPartition::new("crash", 0);
    let log = manager
        .get_or_create(&tp, "Y3Jhc2gtdGVzdC10b3BpYw", config.clone())
        .expect("create log");
    if let Some(bytes) = fsize_limit {
        limit_file_size(bytes);
    }
    let flush_every = if fsize_limit.is_some() { 1 } else { 7 };
    let mut out = std::io::stdout().lock();
    let mut appended = 0u64;
    loop {
        let mut log = log.write();
        let base = log.log_end_offset();
        let records: Vec<SimpleRecord> = (0..RECORDS_PER_BATCH)
            .map(|i| SimpleRecord {
                timestamp: 1_700_000_000_000,
                key: None,
                value: Some(expected_value(base + i as i64)),
                headers: vec![],
            })
            .collect();
        let mut batch = BatchBuilder::default().build(&records);
        let epoch = (base / 1000) as i32;
        let result = log
            .append_as_leader(&mut batch, epoch, AppendOrigin::Client, 1_700_000_000_000)
            .and_then(|_| {
                if fsize_limit.is_some() {
                    log.flush()
                } else {
                    Ok(())
                }
            });
        if let Err(e) = result {
            assert!(fsize_limit.is_some(), "append failed: {e}");
            // Once offline, the log refuses further appends.
            let again =
                log.append_as_leader(&mut batch, epoch, AppendOrigin::Client, 1_700_000_000_000);
            writeln!(
                out,
                "error {e} / then: {}",
                again.err().map(|e| e.to_string()).unwrap_or_default()
            )
            .expect("stdout");
            return;
        }
        appended += 1;
        if appended.is_multiple_of(flush_every) {
            log.flush().expect("flush");
            let end = log.log_end_offset();
            log.set_high_watermark(end);
            drop(log);
            manager.checkpoint().expect("checkpoint");
            writeln!(out, "flushed {end}").expect("stdout");
            out.flush().expect("stdout");
        }
    }
}
