//! DescribeQuorum: the metadata quorum's leader, epoch, high watermark and
//! each voter's and observer's (broker-only node's) progress, as the active
//! controller sees it
//! (`kafka-metadata-quorum.sh describe --status / --replication`).

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_quorum_request::DescribeQuorumRequest;
use kafka_protocol::messages::describe_quorum_response::{
    DescribeQuorumResponse, Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::BrokerId;
use kafka_protocol::protocol::StrBytes;
use ottla_controller::{QuorumSummary, VoterSummary};
use uuid::Uuid;

use ottla_controller::Controller;

const METADATA_TOPIC: &str = "__cluster_metadata";

/// What the quorum APIs (DescribeQuorum, AddRaftVoter, RemoveRaftVoter)
/// need, whether a broker listener or a controller listener took the
/// request.
pub struct QuorumContext<'a> {
    pub controller: &'a Controller,
    pub cluster_id: &'a str,
    /// The first controller listener's name, the one voters are reached on.
    pub controller_listener: &'a str,
}

pub fn handle(
    quorum: &QuorumContext<'_>,
    version: i16,
    req: DescribeQuorumRequest,
) -> DescribeQuorumResponse {
    let controller = quorum.controller;
    let summary = controller.block_on(controller.describe_quorum());
    let directories = controller.image().controller_directories.clone();
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let is_metadata = t.topic_name.as_str() == METADATA_TOPIC;
            let partitions = t
                .partitions
                .into_iter()
                .map(
                    |p| match (&summary, is_metadata && p.partition_index == 0) {
                        (_, false) => failed(
                            p.partition_index,
                            ResponseError::UnknownTopicOrPartition,
                            None,
                        ),
                        (Err(e), true) => {
                            failed(0, ResponseError::NotLeaderOrFollower, Some(e.clone()))
                        }
                        (Ok(s), true) => partition(s, &directories, version),
                    },
                )
                .collect();
            TopicData::default()
                .with_topic_name(t.topic_name)
                .with_partitions(partitions)
        })
        .collect();
    let mut response = DescribeQuorumResponse::default().with_topics(topics);
    if let (true, Ok(summary)) = (version >= 2, &summary) {
        let listener = quorum.controller_listener.to_string();
        response = response.with_nodes(
            summary
                .voter_nodes
                .clone()
                .into_iter()
                .map(|(id, node)| {
                    Node::default()
                        .with_node_id(BrokerId(id as i32))
                        .with_listeners(vec![Listener::default()
                            .with_name(StrBytes::from_string(listener.clone()))
                            .with_host(StrBytes::from_string(node.host))
                            .with_port(node.port)])
                })
                .collect(),
        );
    }
    response
}

/// Controllers' metadata log directories (dynamic quorums only; a static
/// quorum's voters have none, as in KRaft).
type Directories = BTreeMap<i32, Uuid>;

fn partition(s: &QuorumSummary, directories: &Directories, version: i16) -> PartitionData {
    let replicas = |list: &[VoterSummary]| -> Vec<ReplicaState> {
        list.iter()
            .map(|r| replica(s, r, directories, version))
            .collect()
    };
    PartitionData::default()
        .with_partition_index(0)
        .with_leader_id(BrokerId(s.leader.map_or(-1, |l| l as i32)))
        .with_leader_epoch(i32::try_from(s.epoch).unwrap_or(i32::MAX))
        .with_high_watermark(s.high_watermark)
        .with_current_voters(replicas(&s.voters))
        .with_observers(replicas(&s.observers))
}

/// A voter's or an observer's progress.
fn replica(
    s: &QuorumSummary,
    v: &VoterSummary,
    directories: &Directories,
    version: i16,
) -> ReplicaState {
    let mut r = ReplicaState::default()
        .with_replica_id(BrokerId(v.id as i32))
        .with_log_end_offset(v.log_end_offset);
    if version >= 1 {
        let fetched = v.last_fetch_ms.unwrap_or(-1);
        // A replica with the whole committed log was caught up at its
        // last fetch.
        let caught_up = if v.log_end_offset >= s.high_watermark {
            fetched
        } else {
            -1
        };
        r = r
            .with_last_fetch_timestamp(fetched)
            .with_last_caught_up_timestamp(caught_up);
    }
    if version >= 2 {
        let directory = i32::try_from(v.id)
            .ok()
            .and_then(|id| directories.get(&id).copied());
        r = r.with_replica_directory_id(directory.unwrap_or_default());
    }
    r
}

fn failed(partition: i32, error: ResponseError, message: Option<String>) -> PartitionData {
    PartitionData::default()
        .with_partition_index(partition)
        .with_error_code(error.code())
        .with_error_message(message.map(StrBytes::from_string))
        .with_leader_id(BrokerId(-1))
        .with_leader_epoch(-1)
        .with_high_watermark(-1)
}
