//! What failover (STOPPING) does to a mirror partition's log, as a plan
//! computed from the log alone: the transactions the source left open
//! (ended with ABORT markers, or cut off with the records after them by
//! truncating to the last stable offset, per `mirror.stop.open.transactions`)
//! and the last mirrored epoch it records. The same plan is what
//! `ottla mirrors --remove --dry-run` shows and, with the time it became
//! writable, what `--describe` shows of a STOPPED partition.

use ottla_protocol::batch::{txn_marker_value, BatchBuilder, ControlType};
use ottla_protocol::mirror::admin::{FailoverSummary, OpenTransactionSummary};
use ottla_protocol::mirror::states::NO_EPOCH;
use ottla_storage::log::PartitionLog;

use crate::config::OpenTransactions;

/// A transaction the source left open in a mirrored log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenTransaction {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub coordinator_epoch: i32,
    pub first_offset: i64,
    /// When the producer last wrote to the partition.
    pub last_write_ms: i64,
}

/// The open transactions of `log`, oldest first.
fn open_transactions_of(log: &PartitionLog) -> Vec<OpenTransaction> {
    let mut open: Vec<OpenTransaction> = log
        .producer_state()
        .active_producers()
        .filter_map(|p| {
            p.current_txn_first_offset
                .map(|first_offset| OpenTransaction {
                    producer_id: p.producer_id,
                    producer_epoch: p.producer_epoch,
                    coordinator_epoch: p.coordinator_epoch,
                    first_offset,
                    last_write_ms: p.last_timestamp,
                })
        })
        .collect();
    open.sort_by_key(|t| t.first_offset);
    open
}

/// What failover would do to `log` now under `policy`, and the open
/// transactions it would end.
pub fn plan(
    log: &PartitionLog,
    policy: OpenTransactions,
    now_ms: i64,
) -> (FailoverSummary, Vec<OpenTransaction>) {
    let open = open_transactions_of(log);
    let truncated_records = match policy {
        OpenTransactions::Truncate => log.log_end_offset() - log.last_stable_offset(),
        OpenTransactions::Abort => 0,
    };
    let summary = FailoverSummary {
        open_transactions_policy: policy_name(policy).to_string(),
        open_transactions: open
            .iter()
            .map(|t| OpenTransactionSummary {
                producer_id: t.producer_id,
                first_offset: t.first_offset,
                idle_ms: (now_ms - t.last_write_ms).max(0),
                ..Default::default()
            })
            .collect(),
        truncated_records: truncated_records.max(0),
        last_mirrored_epoch: log.latest_epoch().unwrap_or(NO_EPOCH),
        ..Default::default()
    };
    (summary, open)
}

fn policy_name(policy: OpenTransactions) -> &'static str {
    match policy {
        OpenTransactions::Abort => "abort",
        OpenTransactions::Truncate => "truncate",
    }
}

/// The ABORT marker the source's coordinator never wrote: same producer id
/// and epoch, and the last coordinator epoch the partition saw, so the
/// producer state accepts it as that coordinator's.
pub fn abort_marker(txn: &OpenTransaction, now: i64) -> Vec<u8> {
    BatchBuilder {
        producer_id: txn.producer_id,
        producer_epoch: txn.producer_epoch,
        transactional: true,
        ..BatchBuilder::default()
    }
    .build_control(
        ControlType::Abort,
        now,
        txn_marker_value(txn.coordinator_epoch.max(0)),
    )
}
