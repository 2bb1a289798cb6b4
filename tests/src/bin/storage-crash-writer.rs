//! Child process for the storage crash test: appends batches with
//! predictable contents to one partition through the log manager, flushes
//! and checkpoints every few batches, and prints `flushed <log end offset>`
//! after each flush. The test kills it with SIGKILL at random moments.

use std::io::Write;
use std::path::PathBuf;

use ottla_protocol::batch::{BatchBuilder, SimpleRecord};
use ottla_storage::config::LogConfig;
use ottla_storage::manager::{LogManager, TopicPartition};
use ottla_storage::producer_state::AppendOrigin;
use ottla_tests::crash::{expected_value, RECORDS_PER_BATCH};

fn main() {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .expect("usage: storage-crash-writer DIR"),
    );
    let config = LogConfig {
        segment_bytes: 256 * 1024,
        ..LogConfig::default()
    };
    let manager = LogManager::open(vec![dir], &config).expect("open log dir");
    let tp = TopicPartition::new("crash", 0);
    let log = manager
        .get_or_create(&tp, "Y3Jhc2gtdGVzdC10b3BpYw", config.clone())
        .expect("create log");
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
        log.append_as_leader(&mut batch, epoch, AppendOrigin::Client, 1_700_000_000_000)
            .expect("append");
        appended += 1;
        if appended.is_multiple_of(7) {
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
