//! Fetch: long polling (max_wait / min_bytes), size limits, read_committed
//! isolation, topic ids (v13+), incremental fetch sessions (KIP-227) and
//! fetch from follower (KIP-392: v11+ consumers may read from a follower,
//! and a leader may send them to one in their rack).
//! Record sets stay in their segment files: the answer carries stand-ins for
//! them, and the network layer sends them from the files (`file_records`).

use std::time::{Duration, Instant};

use crate::network::file_records::FileRecords;
use crate::network::response_frame::SPLICE_MIN;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::FetchRequest;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchResponse, FetchableTopicResponse, LeaderIdAndEpoch,
    NodeEndpoint, PartitionData,
};
use kafka_protocol::messages::{BrokerId, ProducerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::MetadataImage;
use ottla_storage::log::FetchIsolation;
use ottla_storage::manager::TopicPartition;
use ottla_storage::segment::FileSlice;
use tracing::warn;
use uuid::Uuid;

#[cfg(test)]
mod follower_reads_tests;
mod reads;
#[cfg(test)]
mod waiting_tests;

use crate::apis::leader_hints;
use crate::apis::partition_access::DEBUGGING_REPLICA_ID;
use crate::broker::Broker;
use crate::fetch_session::{Answered, PartitionFetch, PartitionSeen};
use crate::quotas::{QuotaClient, QuotaType};
use crate::replica::{FetchOutcome, ReplicaManager};
use reads::{Reader, SessionReads};

/// Fetch sessions exist from v7.
const SESSIONS_FROM: i16 = 7;
/// Consumers name their rack and may read from followers from v11.
const FOLLOWER_READS_FROM: i16 = 11;
/// Replicas say which high watermark they have from v18.
const REPLICA_HIGH_WATERMARK_FROM: i16 = 18;

/// A Fetch's answer: the response, the record sets it sends from their
/// files, and how long was spent waiting for data (long polling), which is
/// not request handling time.
pub struct Fetched {
    pub response: FetchResponse,
    pub files: FileRecords,
    pub waited: Duration,
}

/// Answers a Fetch. A consumer over its fetch quota (`quota`) is answered
/// empty with a throttle time.
pub async fn handle(
    broker: &Broker,
    version: i16,
    listener: &str,
    req: FetchRequest,
    quota: Option<&QuotaClient<'_>>,
) -> Fetched {
    let unfiled = |response, waited| Fetched {
        response,
        files: FileRecords::default(),
        waited,
    };
    let image = broker.controller.image();
    let mut waited = Duration::ZERO;
    let by_id = version >= 13;
    let replica_id = if version >= 15 {
        req.replica_state.replica_id.0
    } else {
        req.replica_id.0
    };
    let is_follower = replica_id >= 0;
    let isolation = if is_follower {
        FetchIsolation::LogEnd
    } else if req.isolation_level == 1 {
        FetchIsolation::TxnCommitted
    } else {
        FetchIsolation::HighWatermark
    };

    // Resolve topic names (by id from v13) and build the session view.
    let mut unknown_ids: Vec<(Uuid, i32)> = Vec::new();
    let mut requested = Vec::new();
    for topic in &req.topics {
        let name = if by_id {
            match image.topic_by_id(&topic.topic_id) {
                Some(t) => t.name.clone(),
                None => {
                    unknown_ids.extend(
                        topic
                            .partitions
                            .iter()
                            .map(|p| (topic.topic_id, p.partition)),
                    );
                    continue;
                }
            }
        } else {
            topic.topic.to_string()
        };
        let topic_id = image.topic_by_name(&name).map_or(Uuid::nil(), |t| t.id);
        for p in &topic.partitions {
            requested.push((
                TopicPartition::new(name.clone(), p.partition),
                PartitionFetch {
                    topic_id,
                    fetch_offset: p.fetch_offset,
                    log_start_offset: p.log_start_offset,
                    max_bytes: p.partition_max_bytes,
                    current_leader_epoch: if version >= 9 {
                        p.current_leader_epoch
                    } else {
                        -1
                    },
                    last_fetched_epoch: if version >= 12 {
                        p.last_fetched_epoch
                    } else {
                        -1
                    },
                    // i64::MAX: the replica does not track it (KIP-1166).
                    replica_high_watermark: (is_follower
                        && version >= REPLICA_HIGH_WATERMARK_FROM
                        && p.high_watermark != i64::MAX)
                        .then_some(p.high_watermark),
                },
            ));
        }
    }
    let forgotten: Vec<TopicPartition> = req
        .forgotten_topics_data
        .iter()
        .flat_map(|f| {
            let name = if by_id {
                image.topic_by_id(&f.topic_id).map(|t| t.name.clone())
            } else {
                Some(f.topic.to_string())
            };
            name.into_iter().flat_map(move |n| {
                f.partitions
                    .iter()
                    .map(move |p| TopicPartition::new(n.clone(), *p))
            })
        })
        .collect();
    let (session_id, epoch) = if version >= SESSIONS_FROM {
        (req.session_id, req.session_epoch)
    } else {
        (0, -1)
    };
    let session = match broker
        .fetch_sessions
        .begin(session_id, epoch, requested, forgotten)
    {
        Ok(s) => s,
        Err(e) => {
            let mut r = FetchResponse::default().with_error_code(e.code());
            if version >= SESSIONS_FROM {
                r = r.with_session_id(0);
            }
            return unfiled(r, waited);
        }
    };

    // Read until min_bytes is reached, an error shows up, or max_wait passes.
    let deadline = Instant::now() + Duration::from_millis(req.max_wait_ms.max(0) as u64);
    let mut max_total = if version >= 3 {
        req.max_bytes.max(0) as usize
    } else {
        usize::MAX
    };
    if let Some(allowance) = quota
        .filter(|_| !is_follower)
        .and_then(|q| q.window_allowance(QuotaType::Fetch))
    {
        max_total = max_total.min(allowance);
    }
    // As Kafka: a replica fetches from the leader; so does a consumer too
    // old to be sent elsewhere.
    let leader_only =
        is_follower || (version < FOLLOWER_READS_FROM && replica_id != DEBUGGING_REPLICA_ID);
    let client_rack = (version >= FOLLOWER_READS_FROM && !is_follower)
        .then(|| req.rack_id.as_str())
        .filter(|rack| !rack.is_empty() && broker.settings.rack_aware_reads);
    let reader = Reader {
        isolation,
        follower: is_follower.then_some(replica_id),
        leader_only,
        rack_aware: client_rack.map(|rack| (rack, listener)),
    };
    let mut reads = SessionReads::new(broker, &image, &session, reader, max_total);
    waited += reads
        .read_until(req.min_bytes.max(0) as usize, deadline)
        .await;
    let (outcomes, hosted) = reads.finish();
    if let Some(quota) = quota.filter(|_| !is_follower) {
        let bytes: usize = outcomes.iter().map(reads::record_bytes).sum();
        let throttle = quota.record(QuotaType::Fetch, bytes as f64);
        if !throttle.is_zero() {
            // Nothing is sent, so nothing counts; the session is left as
            // it was, so the same records are fetched again afterwards.
            quota.unrecord(QuotaType::Fetch, bytes as f64);
            let mut r = FetchResponse::default()
                .with_throttle_time_ms(throttle.as_millis().min(i32::MAX as u128) as i32);
            if version >= SESSIONS_FROM {
                r = r.with_session_id(session.session_id);
            }
            return unfiled(r, waited);
        }
    }

    // Assemble, grouping partitions by topic in request order.
    let mut topics: Vec<FetchableTopicResponse> = Vec::new();
    let mut files = FileRecords::default();
    let answers: Vec<Answered> = outcomes
        .iter()
        .map(|o| Answered {
            seen: PartitionSeen {
                high_watermark: o.high_watermark,
                last_stable_offset: o.last_stable_offset,
                log_start_offset: o.log_start_offset,
            },
            must_include: reads::record_bytes(o) > 0 || o.must_answer(),
        })
        .collect();
    let included =
        broker
            .fetch_sessions
            .record_all(session.session_id, &session.partitions, &answers);
    let answered = session.partitions.iter().zip(outcomes).zip(hosted);
    for ((((tp, f), mut o), partition), include) in answered.zip(included) {
        if let Some(p) = partition.filter(|_| !is_follower) {
            ReplicaManager::record_fetch(&p, &o);
        }
        if session.incremental && !include {
            continue;
        }
        let in_metadata = image
            .topic_by_name(&tp.topic)
            .is_some_and(|t| t.partitions.contains_key(&tp.partition));
        let records = match o.records.take() {
            Some(slice) => records_for_response(&mut files, slice).unwrap_or_else(|e| {
                warn!(partition = %tp, error = %e, "read failed");
                o.error = Some(ResponseError::KafkaStorageError);
                Bytes::new()
            }),
            None => Bytes::new(),
        };
        let data = partition_data(version, tp.partition, o, records, isolation, in_metadata);
        let same_topic = topics.last().is_some_and(|t| {
            if by_id {
                t.topic_id == f.topic_id
            } else {
                t.topic.as_str() == tp.topic
            }
        });
        if !same_topic {
            let mut t = FetchableTopicResponse::default();
            if by_id {
                t = t.with_topic_id(f.topic_id);
            } else {
                t = t.with_topic(TopicName(StrBytes::from_string(tp.topic.clone())));
            }
            topics.push(t);
        }
        topics
            .last_mut()
            .expect("just pushed")
            .partitions
            .push(data);
    }
    for (id, partition) in unknown_ids {
        let data = partition_data(
            version,
            partition,
            unknown(ResponseError::UnknownTopicId),
            Bytes::new(),
            isolation,
            false,
        );
        topics.push(
            FetchableTopicResponse::default()
                .with_topic_id(id)
                .with_partitions(vec![data]),
        );
    }
    let mut r = FetchResponse::default().with_responses(topics);
    if version >= SESSIONS_FROM {
        r = r.with_session_id(session.session_id);
    }
    if version >= LEADER_HINTS_FROM {
        add_leader_hints(&image, version, listener, &mut r);
    }
    Fetched {
        response: r,
        files,
        waited,
    }
}

/// The bytes a partition's answer carries: a stand-in for a record set
/// sent from its file, or the set itself, read now, when it is small (a
/// chunk of its own would cost more than the copy) or no stand-in is left.
fn records_for_response(files: &mut FileRecords, slice: FileSlice) -> std::io::Result<Bytes> {
    if slice.range.len >= SPLICE_MIN {
        if let Ok(stand_in) = files.stand_in(slice.range.clone()) {
            return Ok(stand_in);
        }
    }
    slice.read()
}

/// Fetch v12 carries the current leader with leadership errors; v16 adds
/// the leaders' endpoints (KIP-951).
const LEADER_HINTS_FROM: i16 = 12;
const ENDPOINTS_FROM: i16 = 16;

fn add_leader_hints(image: &MetadataImage, version: i16, listener: &str, r: &mut FetchResponse) {
    let mut leaders = Vec::new();
    for topic in &mut r.responses {
        let Some(name) =
            leader_hints::topic_name(image, version >= 13, &topic.topic, &topic.topic_id)
        else {
            continue;
        };
        for p in &mut topic.partitions {
            if !leader_hints::is_leadership_error(p.error_code) {
                continue;
            }
            if let Some((leader, epoch)) =
                leader_hints::current_leader(image, &name, p.partition_index)
            {
                p.current_leader = LeaderIdAndEpoch::default()
                    .with_leader_id(BrokerId(leader))
                    .with_leader_epoch(epoch);
                leaders.push(leader);
            }
        }
    }
    if version >= ENDPOINTS_FROM {
        r.node_endpoints = leader_hints::endpoints(image, leaders, listener)
            .into_iter()
            .map(|e| {
                NodeEndpoint::default()
                    .with_node_id(BrokerId(e.node_id))
                    .with_host(StrBytes::from_string(e.host))
                    .with_port(i32::from(e.port))
                    .with_rack(e.rack.map(StrBytes::from_string))
            })
            .collect();
    }
}

fn unknown(e: ResponseError) -> FetchOutcome {
    FetchOutcome {
        error: Some(e),
        records: None,
        high_watermark: -1,
        last_stable_offset: -1,
        log_start_offset: -1,
        aborted: None,
        diverging_epoch: None,
        preferred_read_replica: None,
    }
}

/// One partition's answer, shaped as Kafka's: a partition whose read failed
/// carries no offsets (-1) and empty records (ReplicaManager.readFromLocalLog);
/// records are never null. The aborted transactions are listed under
/// read_committed only, and are null for a failed read; a partition refused
/// before any read because the metadata does not have it (unknown topic id,
/// unknown partition) carries Kafka's default for the field, an empty list.
fn partition_data(
    version: i16,
    partition: i32,
    o: FetchOutcome,
    records: Bytes,
    isolation: FetchIsolation,
    in_metadata: bool,
) -> PartitionData {
    let failed = o.error.is_some();
    let (high_watermark, last_stable_offset, log_start_offset) = if failed {
        (-1, -1, -1)
    } else {
        (o.high_watermark, o.last_stable_offset, o.log_start_offset)
    };
    let mut d = PartitionData::default()
        .with_partition_index(partition)
        .with_error_code(o.error.map_or(0, |e| e.code()))
        .with_high_watermark(high_watermark)
        .with_records(Some(records));
    if version >= 4 {
        let aborted = if !in_metadata {
            Some(Vec::new())
        } else if failed || isolation != FetchIsolation::TxnCommitted {
            None
        } else {
            Some(
                o.aborted
                    .unwrap_or_default()
                    .into_iter()
                    .map(|a| {
                        AbortedTransaction::default()
                            .with_producer_id(ProducerId(a.producer_id))
                            .with_first_offset(a.first_offset)
                    })
                    .collect(),
            )
        };
        d = d
            .with_last_stable_offset(last_stable_offset)
            .with_aborted_transactions(aborted);
    }
    if version >= 5 {
        d = d.with_log_start_offset(log_start_offset);
    }
    if let Some(replica) = o
        .preferred_read_replica
        .filter(|_| version >= FOLLOWER_READS_FROM)
    {
        d = d.with_preferred_read_replica(BrokerId(replica));
    }
    if let Some((epoch, end_offset)) = o.diverging_epoch.filter(|_| version >= 12) {
        d.diverging_epoch = EpochEndOffset::default()
            .with_epoch(epoch)
            .with_end_offset(end_offset);
    }
    d
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use ottla_storage::txn_index::AbortedTxn;

    use super::*;

    fn outcome(error: Option<ResponseError>) -> FetchOutcome {
        FetchOutcome {
            error,
            records: None,
            high_watermark: 3,
            last_stable_offset: 3,
            log_start_offset: 1,
            aborted: Some(vec![AbortedTxn {
                producer_id: 7,
                first_offset: 1,
                last_offset: 2,
                last_stable_offset: 3,
            }]),
            diverging_epoch: None,
            preferred_read_replica: None,
        }
    }

    #[test]
    fn partitions_are_shaped_as_kafka_answers_them() {
        let read_uncommitted = FetchIsolation::HighWatermark;
        let ok = partition_data(16, 0, outcome(None), Bytes::new(), read_uncommitted, true);
        assert_eq!(
            (
                ok.high_watermark,
                ok.last_stable_offset,
                ok.log_start_offset
            ),
            (3, 3, 1)
        );
        assert_eq!(ok.records, Some(Bytes::new()), "records are never null");
        assert_eq!(ok.aborted_transactions, None);

        let committed = partition_data(
            16,
            0,
            outcome(None),
            Bytes::new(),
            FetchIsolation::TxnCommitted,
            true,
        );
        let aborted = committed.aborted_transactions.unwrap();
        assert_eq!((aborted[0].producer_id.0, aborted[0].first_offset), (7, 1));

        let failed = partition_data(
            16,
            0,
            outcome(Some(ResponseError::OffsetOutOfRange)),
            Bytes::new(),
            FetchIsolation::TxnCommitted,
            true,
        );
        assert_eq!(
            (
                failed.high_watermark,
                failed.last_stable_offset,
                failed.log_start_offset
            ),
            (-1, -1, -1)
        );
        assert_eq!(failed.aborted_transactions, None);
        assert_eq!(failed.records, Some(Bytes::new()));

        let unknown = partition_data(
            16,
            9,
            unknown(ResponseError::UnknownTopicOrPartition),
            Bytes::new(),
            read_uncommitted,
            false,
        );
        assert_eq!(unknown.aborted_transactions, Some(Vec::new()));
        assert_eq!(unknown.high_watermark, -1);
    }
}
