//! The mirror fetcher of one partition: consumer Fetch requests (replica id
//! -1, read_uncommitted, so open and aborted transactions are copied too) to
//! the source partition's leader, batches appended byte for byte to the
//! destination leader's log. It follows source leader changes, truncates
//! where the source says the log diverged, and restarts at the source's log
//! start when retention there has passed it.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kafka_protocol::messages::{BrokerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use ottla_protocol::batch::{whole_batches_len, BatchIter};
use ottla_protocol::client::KafkaClient;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::source::SourceCluster;
use super::stats::MirrorStats;
use crate::replica::{Partition, ReplicaManager};

/// Fetch v12: diverging-epoch answers, topics by name.
const FETCH_VERSION: i16 = 12;
const LIST_OFFSETS_VERSION: i16 = 1;
const EARLIEST: i64 = -2;
const LATEST: i64 = -1;
const MAX_WAIT: Duration = Duration::from_millis(500);
const PARTITION_MAX_BYTES: i32 = 8 << 20;
const RETRY_BACKOFF: Duration = Duration::from_millis(500);

/// A storage failure: the partition cannot go on mirroring (FAILED).
#[derive(Debug)]
pub struct FetcherFailed(pub String);

/// Mirrors `p` from the source until `stop` is cancelled. Source errors are
/// retried (counted in `stats`); only a local storage error ends it.
pub async fn mirror_partition(
    source: &SourceCluster,
    replicas: &Arc<ReplicaManager>,
    p: &Arc<Partition>,
    stats: &MirrorStats,
    stop: &CancellationToken,
) -> Result<(), FetcherFailed> {
    let topic = p.tp.topic.clone();
    while !stop.is_cancelled() {
        let leader = tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            leader = connect_leader(source, &topic, p.tp.partition) => leader,
        };
        let (mut client, epoch) = match leader {
            Ok(leader) => leader,
            Err(e) => {
                // One loop per mirror partition: one line for all of them.
                crate::log_limited!(
                    tracing::Level::WARN,
                    key: &(),
                    partition = %p.tp,
                    error = %e,
                    "cannot reach the source leader"
                );
                stats.failed(e);
                backoff(stop).await;
                continue;
            }
        };
        loop {
            let fetched = tokio::select! {
                _ = stop.cancelled() => return Ok(()),
                fetched = fetch_once(source, &mut client, p, epoch) => fetched,
            };
            let data = match fetched {
                Ok(data) => data,
                Err(e) => {
                    stats.failed(e);
                    break;
                }
            };
            match apply(source, &mut client, replicas, p, stats, data).await? {
                Next::Continue => {}
                Next::Reconnect(why) => {
                    crate::log_limited!(
                        tracing::Level::INFO,
                        key: &(),
                        partition = %p.tp,
                        why,
                        "reconnecting to the source leader"
                    );
                    stats.failed(why);
                    backoff(stop).await;
                    break;
                }
            }
        }
    }
    Ok(())
}

async fn backoff(stop: &CancellationToken) {
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = tokio::time::sleep(RETRY_BACKOFF) => {}
    }
}

/// A connection to the source partition's current leader and its epoch.
async fn connect_leader(
    source: &SourceCluster,
    topic: &str,
    partition: i32,
) -> Result<(KafkaClient, i32), String> {
    let (found, brokers) = source
        .topic(topic)
        .await?
        .ok_or_else(|| format!("topic {topic} does not exist on the source"))?;
    let &(leader, epoch) = found
        .partitions
        .get(&partition)
        .ok_or_else(|| format!("the source has no partition {partition} of {topic}"))?;
    let (host, port) = brokers
        .address(leader)
        .ok_or_else(|| format!("the source partition {topic}-{partition} has no leader"))?;
    Ok((source.connect(host, *port).await?, epoch))
}

async fn fetch_once(
    source: &SourceCluster,
    client: &mut KafkaClient,
    p: &Partition,
    source_epoch: i32,
) -> Result<PartitionData, String> {
    let (offset, last_epoch) = {
        let log = p.log.read();
        (log.log_end_offset(), log.latest_epoch().unwrap_or(-1))
    };
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(MAX_WAIT.as_millis() as i32)
        .with_min_bytes(1)
        .with_max_bytes(PARTITION_MAX_BYTES)
        .with_isolation_level(0)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(p.tp.topic.clone())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(p.tp.partition)
                .with_current_leader_epoch(source_epoch)
                .with_fetch_offset(offset)
                .with_last_fetched_epoch(last_epoch)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(PARTITION_MAX_BYTES)])]);
    let response = client
        .send(FETCH_VERSION, &request, source.timeout + MAX_WAIT)
        .await
        .map_err(|e| e.to_string())?;
    if response.error_code != 0 {
        return Err(format!(
            "the source refused the fetch with error code {}",
            response.error_code
        ));
    }
    response
        .responses
        .into_iter()
        .flat_map(|t| t.partitions)
        .find(|d| d.partition_index == p.tp.partition)
        .ok_or_else(|| "the source's fetch answer lacks the partition".to_string())
}

enum Next {
    Continue,
    Reconnect(String),
}

async fn apply(
    source: &SourceCluster,
    client: &mut KafkaClient,
    replicas: &Arc<ReplicaManager>,
    p: &Arc<Partition>,
    stats: &MirrorStats,
    data: PartitionData,
) -> Result<Next, FetcherFailed> {
    match ResponseError::try_from_code(data.error_code) {
        None if data.diverging_epoch.epoch >= 0 => {
            let end = data.diverging_epoch.end_offset;
            info!(partition = %p.tp, epoch = data.diverging_epoch.epoch, end, "the source diverged: truncating");
            let p = p.clone();
            local(move || {
                let offset = end.min(p.log.read().log_end_offset());
                p.log.write().truncate_to(offset)
            })
            .await?;
            Ok(Next::Continue)
        }
        None => {
            let records = data.records.unwrap_or_default();
            let whole = whole_batches_len(&records)
                .map_err(|e| FetcherFailed(format!("the source sent a corrupt batch: {e}")))?;
            if whole == 0 {
                stats.source_answered(data.high_watermark, p.log.read().log_end_offset());
                return Ok(Next::Continue);
            }
            let records = records.slice(..whole);
            let newest = BatchIter::new(&records)
                .filter_map(Result::ok)
                .map(|b| b.max_timestamp())
                .max()
                .unwrap_or(-1);
            let (replicas, partition) = (replicas.clone(), p.clone());
            let appended = records.len();
            local(move || replicas.append_mirrored(&partition, &records).map(|_| ())).await?;
            stats.appended(appended, newest);
            stats.source_answered(data.high_watermark, p.log.read().log_end_offset());
            Ok(Next::Continue)
        }
        Some(ResponseError::OffsetOutOfRange) => {
            reset_offset(source, client, p).await?;
            Ok(Next::Continue)
        }
        Some(e) => Ok(Next::Reconnect(format!(
            "the source answered the fetch of {} with {e:?}",
            p.tp
        ))),
    }
}

/// The fetch offset is outside the source's log: below its start
/// (retention there moved on) the log restarts at the source's log start;
/// above its end it is cut back to it.
async fn reset_offset(
    source: &SourceCluster,
    client: &mut KafkaClient,
    p: &Arc<Partition>,
) -> Result<(), FetcherFailed> {
    let (Some(start), Some(end)) = (
        list_offset(source, client, p, EARLIEST).await,
        list_offset(source, client, p, LATEST).await,
    ) else {
        return Ok(());
    };
    let p = p.clone();
    local(move || {
        let mut log = p.log.write();
        let ours = log.log_end_offset();
        if ours < start {
            warn!(partition = %p.tp, start, "restarting the mirror at the source's log start");
            log.truncate_fully_and_start_at(start)
        } else if ours > end {
            warn!(partition = %p.tp, end, "cutting the mirror back to the source's log end");
            log.truncate_to(end)
        } else {
            Ok(())
        }
    })
    .await
}

async fn list_offset(
    source: &SourceCluster,
    client: &mut KafkaClient,
    p: &Partition,
    timestamp: i64,
) -> Option<i64> {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(p.tp.topic.clone())))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(p.tp.partition)
                .with_timestamp(timestamp)])]);
    let response = client
        .send(LIST_OFFSETS_VERSION, &request, source.timeout)
        .await
        .ok()?;
    response
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .find(|r| r.error_code == 0)
        .map(|r| r.offset)
}

/// Runs log I/O on the blocking pool; a storage error fails the partition.
async fn local(
    f: impl FnOnce() -> Result<(), ottla_storage::StorageError> + Send + 'static,
) -> Result<(), FetcherFailed> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(FetcherFailed(format!("local log error: {e}"))),
        Err(e) => Err(FetcherFailed(format!("local log task failed: {e}"))),
    }
}
