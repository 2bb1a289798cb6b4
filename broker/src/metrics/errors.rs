//! The error codes a response carries, as Kafka's `AbstractResponse.errorCounts`
//! gathers them for `RequestMetrics.ErrorsPerSec`: every top-level, topic and
//! partition code, once per occurrence. NONE is skipped (the request counters
//! already count every response). APIs not listed report no codes.

use kafka_protocol::messages::ResponseKind;

/// Calls `f` with every non-zero error code in `response`.
pub fn for_each_error(response: &ResponseKind, mut f: impl FnMut(i16)) {
    let mut each = |code: i16| {
        if code != 0 {
            f(code);
        }
    };
    match response {
        ResponseKind::Produce(r) => r
            .responses
            .iter()
            .flat_map(|t| &t.partition_responses)
            .for_each(|p| each(p.error_code)),
        ResponseKind::Fetch(r) => {
            each(r.error_code);
            r.responses
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| each(p.error_code));
        }
        ResponseKind::ListOffsets(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| each(p.error_code)),
        ResponseKind::Metadata(r) => {
            each(r.error_code);
            for t in &r.topics {
                each(t.error_code);
                t.partitions.iter().for_each(|p| each(p.error_code));
            }
        }
        ResponseKind::OffsetCommit(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| each(p.error_code)),
        ResponseKind::OffsetFetch(r) => {
            each(r.error_code);
            r.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| each(p.error_code));
            for g in &r.groups {
                each(g.error_code);
                g.topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .for_each(|p| each(p.error_code));
            }
        }
        ResponseKind::FindCoordinator(r) => {
            each(r.error_code);
            r.coordinators.iter().for_each(|c| each(c.error_code));
        }
        ResponseKind::JoinGroup(r) => each(r.error_code),
        ResponseKind::Heartbeat(r) => each(r.error_code),
        ResponseKind::LeaveGroup(r) => {
            each(r.error_code);
            r.members.iter().for_each(|m| each(m.error_code));
        }
        ResponseKind::SyncGroup(r) => each(r.error_code),
        ResponseKind::DescribeGroups(r) => r.groups.iter().for_each(|g| each(g.error_code)),
        ResponseKind::ListGroups(r) => each(r.error_code),
        ResponseKind::ApiVersions(r) => each(r.error_code),
        ResponseKind::CreateTopics(r) => r.topics.iter().for_each(|t| each(t.error_code)),
        ResponseKind::DeleteTopics(r) => r.responses.iter().for_each(|t| each(t.error_code)),
        ResponseKind::DeleteRecords(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| each(p.error_code)),
        ResponseKind::InitProducerId(r) => each(r.error_code),
        ResponseKind::OffsetForLeaderEpoch(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| each(p.error_code)),
        ResponseKind::AddPartitionsToTxn(r) => {
            each(r.error_code);
            r.results_by_topic_v3_and_below
                .iter()
                .chain(
                    r.results_by_transaction
                        .iter()
                        .flat_map(|x| &x.topic_results),
                )
                .flat_map(|t| &t.results_by_partition)
                .for_each(|p| each(p.partition_error_code));
        }
        ResponseKind::AddOffsetsToTxn(r) => each(r.error_code),
        ResponseKind::EndTxn(r) => each(r.error_code),
        ResponseKind::WriteTxnMarkers(r) => r
            .markers
            .iter()
            .flat_map(|m| &m.topics)
            .flat_map(|t| &t.partitions)
            .for_each(|p| each(p.error_code)),
        ResponseKind::TxnOffsetCommit(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| each(p.error_code)),
        ResponseKind::DescribeConfigs(r) => r.results.iter().for_each(|x| each(x.error_code)),
        ResponseKind::AlterConfigs(r) => r.responses.iter().for_each(|x| each(x.error_code)),
        ResponseKind::IncrementalAlterConfigs(r) => {
            r.responses.iter().for_each(|x| each(x.error_code))
        }
        ResponseKind::DescribeLogDirs(r) => {
            each(r.error_code);
            r.results.iter().for_each(|x| each(x.error_code));
        }
        ResponseKind::CreatePartitions(r) => r.results.iter().for_each(|x| each(x.error_code)),
        ResponseKind::DeleteGroups(r) => r.results.iter().for_each(|x| each(x.error_code)),
        ResponseKind::OffsetDelete(r) => {
            each(r.error_code);
            r.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| each(p.error_code));
        }
        ResponseKind::DescribeCluster(r) => each(r.error_code),
        ResponseKind::ListConfigResources(r) => each(r.error_code),
        ResponseKind::DescribeTopicPartitions(r) => {
            for t in &r.topics {
                each(t.error_code);
                t.partitions.iter().for_each(|p| each(p.error_code));
            }
        }
        ResponseKind::DescribeTransactions(r) => {
            r.transaction_states.iter().for_each(|s| each(s.error_code))
        }
        ResponseKind::ListTransactions(r) => each(r.error_code),
        ResponseKind::ConsumerGroupHeartbeat(r) => each(r.error_code),
        ResponseKind::ConsumerGroupDescribe(r) => r.groups.iter().for_each(|g| each(g.error_code)),
        ResponseKind::ShareGroupHeartbeat(r) => each(r.error_code),
        ResponseKind::ShareGroupDescribe(r) => r.groups.iter().for_each(|g| each(g.error_code)),
        ResponseKind::ShareFetch(r) => {
            each(r.error_code);
            for p in r.responses.iter().flat_map(|t| &t.partitions) {
                each(p.error_code);
                each(p.acknowledge_error_code);
            }
        }
        ResponseKind::ShareAcknowledge(r) => {
            each(r.error_code);
            r.responses
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| each(p.error_code));
        }
        ResponseKind::DescribeShareGroupOffsets(r) => {
            for g in &r.groups {
                each(g.error_code);
                g.topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .for_each(|p| each(p.error_code));
            }
        }
        ResponseKind::AlterShareGroupOffsets(r) => {
            each(r.error_code);
            r.responses
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| each(p.error_code));
        }
        ResponseKind::DeleteShareGroupOffsets(r) => {
            each(r.error_code);
            r.responses.iter().for_each(|t| each(t.error_code));
        }
        _ => {}
    }
}

// Kafka's names for error codes (`Errors.name()`), shared with the CLI.
pub use ottla_protocol::names::error_name;

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::produce_response::{
        PartitionProduceResponse, ProduceResponse, TopicProduceResponse,
    };

    use super::*;

    #[test]
    fn produce_partition_codes_are_reported_except_none() {
        let partitions = [0, 6, 6, 3]
            .into_iter()
            .map(|code| PartitionProduceResponse::default().with_error_code(code))
            .collect();
        let response = ResponseKind::Produce(ProduceResponse::default().with_responses(vec![
            TopicProduceResponse::default().with_partition_responses(partitions),
        ]));
        let mut codes = Vec::new();
        for_each_error(&response, |c| codes.push(c));
        assert_eq!(codes, [6, 6, 3]);
    }

    #[test]
    fn share_fetch_reports_fetch_and_acknowledgement_codes() {
        use kafka_protocol::messages::share_fetch_response::{
            PartitionData, ShareFetchResponse, ShareFetchableTopicResponse,
        };
        let partition = PartitionData::default()
            .with_error_code(6)
            .with_acknowledge_error_code(121);
        let response = ResponseKind::ShareFetch(
            ShareFetchResponse::default()
                .with_error_code(0)
                .with_responses(vec![
                    ShareFetchableTopicResponse::default().with_partitions(vec![partition])
                ]),
        );
        let mut codes = Vec::new();
        for_each_error(&response, |c| codes.push(c));
        assert_eq!(codes, [6, 121]);
    }
}
