//! Produce: leader appends, acks 0/1/all. Transactional batches go through
//! the transaction check in `crate::apis::txn`.

use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::ProduceRequest;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse,
    ProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::BrokerId;
use kafka_protocol::protocol::StrBytes;
use ottla_controller::MetadataImage;
use ottla_protocol::batch::BatchIter;
use ottla_storage::manager::TopicPartition;
use ottla_storage::producer_state::AppendOrigin;

use crate::apis::{leader_hints, txn};
use crate::broker::Broker;
use crate::replica::ProduceOutcome;

/// A produce whose appends are done, and, under acks=all, the partitions
/// whose high watermark must still reach the appended batch.
pub struct Appended {
    response: Option<ProduceResponse>,
    waits: Vec<ReplicationWait>,
    timeout: Duration,
}

struct ReplicationWait {
    topic: usize,
    partition: usize,
    tp: TopicPartition,
    end_offset: i64,
}

/// The record bytes a Produce carries, which produce quotas count.
pub fn records_bytes(req: &ProduceRequest) -> usize {
    req.topic_data
        .iter()
        .flat_map(|t| t.partition_data.iter())
        .map(|p| p.records.as_ref().map_or(0, |r| r.len()))
        .sum()
}

/// Whether `req` may append on the request's own worker thread rather than
/// the blocking pool. Kafka appends on its request handler threads: a write
/// to the page cache takes microseconds, less than handing the request to
/// another thread and back, which doubles the broker's CPU time on small
/// produce requests. Not when an append could wait on more than the page
/// cache: a transactional batch may ask its coordinator (a network round
/// trip), and a log with `flush.messages` set may fsync.
pub fn appends_in_place(broker: &Broker, req: &ProduceRequest) -> bool {
    if req.transactional_id.is_some() {
        return false;
    }
    let image = broker.controller.image();
    req.topic_data.iter().all(|topic| {
        let name = match image.topic_by_id(&topic.topic_id) {
            Some(t) => t.name.as_str(),
            None => topic.name.as_str(),
        };
        topic.partition_data.iter().all(|part| {
            let tp = TopicPartition::new(name, part.index);
            broker
                .replicas
                .partition(&tp)
                .is_none_or(|p| p.log.read().config().flush_messages == i64::MAX)
        })
    })
}

/// Appends (blocking I/O); [`finish`] then waits for replication.
pub fn handle(broker: &Broker, version: i16, listener: &str, req: ProduceRequest) -> Appended {
    let image = broker.controller.image();
    let acks = req.acks;
    let timeout = Duration::from_millis(req.timeout_ms.max(0) as u64);
    let mut waits = Vec::new();
    let transactional_id = req.transactional_id.as_deref().map(|t| t.to_string());
    let mut responses = Vec::with_capacity(req.topic_data.len());
    for topic in req.topic_data {
        let name = leader_hints::topic_name(
            &image,
            version >= TOPIC_IDS_FROM,
            &topic.name,
            &topic.topic_id,
        );
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for (partition_at, part) in topic.partition_data.into_iter().enumerate() {
            let refused = ProduceOutcome::failed;
            let o = match &name {
                None => refused(ResponseError::UnknownTopicId, None),
                Some(_) if !matches!(acks, -1..=1) => {
                    refused(ResponseError::InvalidRequiredAcks, None)
                }
                Some(n) if ottla_controller::controller::is_internal(n) => refused(
                    ResponseError::InvalidTopicException,
                    Some(format!("Cannot append to internal topic {n}")),
                ),
                Some(n) => match &part.records {
                    None => refused(
                        ResponseError::CorruptMessage,
                        Some("produce request without records".to_string()),
                    ),
                    Some(records) => {
                        let tp = TopicPartition::new(n.clone(), part.index);
                        let o = match transactional_producer(records) {
                            Some(producer) => txn::append_transactional(
                                broker,
                                version,
                                transactional_id.as_deref(),
                                producer,
                                &tp,
                                records,
                                acks,
                            ),
                            None => {
                                broker
                                    .replicas
                                    .append(&tp, records, acks, AppendOrigin::Client)
                            }
                        };
                        if acks == -1 && o.end_offset >= 0 {
                            waits.push(ReplicationWait {
                                topic: responses.len(),
                                partition: partition_at,
                                tp,
                                end_offset: o.end_offset,
                            });
                        }
                        o
                    }
                },
            };
            let mut r = PartitionProduceResponse::default()
                .with_index(part.index)
                .with_error_code(o.error.map_or(0, |e| e.code()))
                .with_base_offset(o.base_offset)
                .with_log_append_time_ms(o.log_append_time)
                .with_log_start_offset(o.log_start_offset);
            if version >= 8 && o.error.is_some() {
                r = r
                    .with_error_message(o.message.map(StrBytes::from_string))
                    .with_record_errors(
                        o.record_errors
                            .into_iter()
                            .map(|(index, why)| {
                                BatchIndexAndErrorMessage::default()
                                    .with_batch_index(index)
                                    .with_batch_index_error_message(Some(StrBytes::from_string(
                                        why,
                                    )))
                            })
                            .collect(),
                    );
            }
            partitions.push(r);
        }
        let mut t = TopicProduceResponse::default().with_partition_responses(partitions);
        if version >= TOPIC_IDS_FROM {
            t = t.with_topic_id(topic.topic_id);
        } else {
            t = t.with_name(topic.name);
        }
        responses.push(t);
    }
    let mut response = ProduceResponse::default().with_responses(responses);
    if version >= LEADER_HINTS_FROM {
        add_leader_hints(&image, version, listener, &mut response);
    }
    Appended {
        response: (acks != 0).then_some(response),
        waits,
        timeout,
    }
}

/// Produce v10 is the first to carry new-leader hints (KIP-951).
const LEADER_HINTS_FROM: i16 = 10;

/// Produce v13 names topics by id only.
const TOPIC_IDS_FROM: i16 = 13;

fn add_leader_hints(
    image: &MetadataImage,
    version: i16,
    listener: &str,
    response: &mut ProduceResponse,
) {
    let mut leaders = Vec::new();
    for topic in &mut response.responses {
        let by_id = version >= TOPIC_IDS_FROM;
        let Some(name) = leader_hints::topic_name(image, by_id, &topic.name, &topic.topic_id)
        else {
            continue;
        };
        for p in &mut topic.partition_responses {
            if !leader_hints::is_leadership_error(p.error_code) {
                continue;
            }
            if let Some((leader, epoch)) = leader_hints::current_leader(image, &name, p.index) {
                p.current_leader = LeaderIdAndEpoch::default()
                    .with_leader_id(BrokerId(leader))
                    .with_leader_epoch(epoch);
                leaders.push(leader);
            }
        }
    }
    response.node_endpoints = leader_hints::endpoints(image, leaders, listener)
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

impl Appended {
    /// The response as appended, without waiting for replication (a single
    /// node's ISR has every batch at once).
    #[cfg(test)]
    pub(crate) fn into_response(self) -> Option<ProduceResponse> {
        self.response
    }
}

/// Waits until every acks=all batch is on the whole ISR (or the request's
/// timeout passes) and returns the response; None for acks=0.
pub async fn finish(broker: &Broker, appended: Appended) -> Option<ProduceResponse> {
    let Appended {
        mut response,
        waits,
        timeout,
    } = appended;
    let r = response.as_mut()?;
    // One timeout for the request, however many partitions it waits on.
    let deadline = tokio::time::Instant::now() + timeout;
    for w in waits {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if let Err(e) = broker
            .replicas
            .wait_replicated(&w.tp, w.end_offset, left)
            .await
        {
            let part = &mut r.responses[w.topic].partition_responses[w.partition];
            part.error_code = e.code();
            part.base_offset = -1;
        }
    }
    response
}

/// The producer id and epoch of the request's transactional batch, if any
/// (clients send one batch per partition; a producer's batches share them).
fn transactional_producer(records: &[u8]) -> Option<(i64, i16)> {
    BatchIter::new(records)
        .map_while(Result::ok)
        .find(|b| b.is_transactional())
        .map(|b| (b.producer_id(), b.producer_epoch()))
}
