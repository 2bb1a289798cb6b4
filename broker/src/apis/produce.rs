//! Produce: leader appends, acks 0/1/all. Transactional batches go through
//! the transaction check in `crate::apis::txn`.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::ProduceRequest;
use kafka_protocol::messages::produce_response::{
    PartitionProduceResponse, ProduceResponse, TopicProduceResponse,
};
use kafka_protocol::protocol::StrBytes;
use ottla_protocol::batch::BatchIter;
use ottla_storage::manager::TopicPartition;
use ottla_storage::producer_state::AppendOrigin;

use crate::apis::txn;
use crate::broker::Broker;

/// Returns None for acks=0 (no response is sent).
pub fn handle(broker: &Broker, version: i16, req: ProduceRequest) -> Option<ProduceResponse> {
    let image = broker.controller.image();
    let acks = req.acks;
    let transactional_id = req.transactional_id.as_deref().map(|t| t.to_string());
    let mut responses = Vec::with_capacity(req.topic_data.len());
    for topic in req.topic_data {
        // Produce v13 names topics by id.
        let name = if version >= 13 {
            image.topic_by_id(&topic.topic_id).map(|t| t.name.clone())
        } else {
            Some(topic.name.to_string())
        };
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        for part in topic.partition_data {
            let (error, message, base_offset, append_time, start) = match &name {
                None => (ResponseError::UnknownTopicId, None, -1, -1, -1),
                Some(_) if !matches!(acks, -1..=1) => {
                    (ResponseError::InvalidRequiredAcks, None, -1, -1, -1)
                }
                Some(n) if ottla_controller::controller::is_internal(n) => (
                    ResponseError::InvalidTopicException,
                    Some(format!("Cannot append to internal topic {n}")),
                    -1,
                    -1,
                    -1,
                ),
                Some(n) => match &part.records {
                    None => (
                        ResponseError::CorruptMessage,
                        Some("produce request without records".to_string()),
                        -1,
                        -1,
                        -1,
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
                        (
                            o.error,
                            o.message,
                            o.base_offset,
                            o.log_append_time,
                            o.log_start_offset,
                        )
                    }
                },
            };
            let mut r = PartitionProduceResponse::default()
                .with_index(part.index)
                .with_error_code(error.code())
                .with_base_offset(base_offset)
                .with_log_append_time_ms(append_time)
                .with_log_start_offset(start);
            if version >= 8 && error.code() != 0 {
                r = r.with_error_message(message.map(StrBytes::from_string));
            }
            partitions.push(r);
        }
        let mut t = TopicProduceResponse::default().with_partition_responses(partitions);
        if version >= 13 {
            t = t.with_topic_id(topic.topic_id);
        } else {
            t = t.with_name(topic.name);
        }
        responses.push(t);
    }
    (acks != 0).then(|| ProduceResponse::default().with_responses(responses))
}

/// The producer id and epoch of the request's transactional batch, if any
/// (clients send one batch per partition; a producer's batches share them).
fn transactional_producer(records: &[u8]) -> Option<(i64, i16)> {
    BatchIter::new(records)
        .map_while(Result::ok)
        .find(|b| b.is_transactional())
        .map(|b| (b.producer_id(), b.producer_epoch()))
}
