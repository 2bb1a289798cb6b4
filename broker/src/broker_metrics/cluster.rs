//! Broker state read at scrape time: per-topic traffic, partition logs, the
//! replica manager's partition counts, the controller's view of the cluster
//! and the group coordinator. Nothing here is maintained on the request
//! path except the rebalance counter; each partition's log lock is held
//! only long enough to copy a few numbers.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use crate::broker::Broker;
use crate::metrics::{counter, gauge, Field, Traffic, COUNTERS, NO_LABELS};
use crate::replication::throttle::Side;
use ottla_group_coordinator::GroupState;

/// One hosted partition, copied out of its locks.
struct PartitionRow {
    topic: String,
    partition: i32,
    size_bytes: u64,
    segments: usize,
    start_offset: i64,
    end_offset: i64,
    offline: bool,
    leader: bool,
    under_replicated: bool,
    under_min_isr: bool,
}

pub struct BrokerCollector(pub Arc<Broker>);

impl fmt::Debug for BrokerCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrokerCollector").finish_non_exhaustive()
    }
}

impl BrokerCollector {
    fn partitions(&self) -> (Vec<PartitionRow>, BTreeMap<String, Traffic>) {
        let node = self.0.node_id();
        let mut rows = Vec::new();
        let mut traffic: BTreeMap<String, Traffic> = BTreeMap::new();
        for p in self.0.replicas.hosted() {
            *traffic.entry(p.tp.topic.clone()).or_default() += p.stats.traffic();
            let state = p.state();
            let log = p.log.read();
            let leader = state.leader == node;
            let isr = state.isr.len();
            rows.push(PartitionRow {
                topic: p.tp.topic.clone(),
                partition: p.tp.partition,
                size_bytes: log.size_bytes(),
                segments: log.segment_count(),
                start_offset: log.log_start_offset(),
                end_offset: log.log_end_offset(),
                offline: log.is_offline(),
                leader,
                // As Kafka, only the leader reports these.
                under_replicated: leader && isr < state.replicas.len(),
                under_min_isr: leader && (isr as i64) < i64::from(log.config().min_insync_replicas),
            });
        }
        rows.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        (rows, traffic)
    }

    fn encode_partitions(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        let (rows, traffic) = self.partitions();
        for (name, help, value) in COUNTERS {
            counter(
                e,
                name,
                help,
                traffic
                    .iter()
                    .map(|(t, x)| ([("topic", t.as_str())], value(x))),
            )?;
        }
        let labels = |r: &PartitionRow| {
            [
                ("topic", r.topic.clone()),
                ("partition", r.partition.to_string()),
            ]
        };
        let per_partition: [Field<PartitionRow, i64>; 4] = [
            (
                "kafka_log_size_bytes",
                "Bytes in the partition's log segments (Kafka Log Size).",
                |r| r.size_bytes as i64,
            ),
            (
                "kafka_log_segments",
                "Segments in the partition's log (Kafka Log NumLogSegments).",
                |r| r.segments as i64,
            ),
            (
                "kafka_log_start_offset",
                "First offset in the partition's log (Kafka Log LogStartOffset).",
                |r| r.start_offset,
            ),
            (
                "kafka_log_end_offset",
                "Offset of the next record appended (Kafka Log LogEndOffset).",
                |r| r.end_offset,
            ),
        ];
        for (name, help, value) in per_partition {
            gauge(e, name, help, rows.iter().map(|r| (labels(r), value(r))))?;
        }
        let count = |f: fn(&PartitionRow) -> bool| {
            [(NO_LABELS, rows.iter().filter(|r| f(r)).count() as u64)]
        };
        gauge(
            e,
            "kafka_server_replicamanager_partitions",
            "Partitions hosted here (Kafka ReplicaManager PartitionCount).",
            count(|_| true),
        )?;
        gauge(
            e,
            "kafka_server_replicamanager_leader_count",
            "Partitions led here (Kafka ReplicaManager LeaderCount).",
            count(|r| r.leader),
        )?;
        gauge(
            e,
            "kafka_server_replicamanager_under_replicated_partitions",
            "Partitions led here whose ISR is smaller than their replica set (Kafka ReplicaManager UnderReplicatedPartitions).",
            count(|r| r.under_replicated),
        )?;
        gauge(
            e,
            "kafka_server_replicamanager_under_min_isr_partitions",
            "Partitions led here whose ISR is below min.insync.replicas (Kafka ReplicaManager UnderMinIsrPartitionCount).",
            count(|r| r.under_min_isr),
        )?;
        let (shrinks, expands) = self.0.replicas.isr_change_counts();
        counter(
            e,
            "kafka_server_replicamanager_isr_shrinks",
            "ISR shrinks asked by this broker's leaders (Kafka ReplicaManager IsrShrinksPerSec).",
            [(NO_LABELS, shrinks)],
        )?;
        counter(
            e,
            "kafka_server_replicamanager_isr_expands",
            "ISR expansions asked by this broker's leaders (Kafka ReplicaManager IsrExpandsPerSec).",
            [(NO_LABELS, expands)],
        )?;
        gauge(
            e,
            "ottla_replica_fetchers",
            "Replica fetch loops running per leader broker (num.replica.fetchers each; Kafka's ReplicaFetcherThread-<id>-<leader>).",
            self.0
                .fetchers
                .running()
                .into_iter()
                .map(|(leader, loops)| ([("leader", leader.to_string())], loops as u64)),
        )?;
        gauge(
            e,
            "kafka_server_replicamanager_offline_replicas",
            "Hosted partitions whose log went offline after an I/O error (Kafka ReplicaManager OfflineReplicaCount).",
            count(|r| r.offline),
        )?;
        let open_files = self.0.replicas.logs().open_files();
        gauge(
            e,
            "ottla_log_open_segment_files",
            "Ottla's own: segment .log files open now; beyond log.segment.max.open.files, idle ones are closed.",
            [(NO_LABELS, open_files.open() as u64)],
        )?;
        gauge(
            e,
            "ottla_log_max_open_segment_files",
            "Ottla's own: log.segment.max.open.files as applied (by default a quarter of the open-file limit).",
            [(NO_LABELS, open_files.max_open().min(i64::MAX as usize) as u64)],
        )?;
        gauge(
            e,
            "kafka_log_offline_log_directories",
            "Log dirs taken offline (Kafka LogManager OfflineLogDirectoryCount).",
            [(
                NO_LABELS,
                self.0.replicas.logs().offline_dirs().len() as u64,
            )],
        )
    }

    fn encode_controller(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        let image = self.0.controller.image();
        let partitions = || image.topics.values().flat_map(|t| t.partitions.values());
        let fenced = image.brokers.values().filter(|b| b.fenced).count();
        let controller = &self.0.controller;
        gauge(
            e,
            "kafka_controller_active_controller_count",
            "1 on the active controller (Kafka KafkaController ActiveControllerCount).",
            [(NO_LABELS, u64::from(controller.is_active()))],
        )?;
        let (leader, epoch) = controller.quorum_view();
        gauge(
            e,
            "kafka_server_raft_metrics_current_leader",
            "The metadata quorum leader this node knows, -1 during an election (Kafka raft-metrics current-leader).",
            [(NO_LABELS, leader.map_or(-1, |l| l as i64))],
        )?;
        gauge(
            e,
            "kafka_server_raft_metrics_current_epoch",
            "The metadata quorum's epoch (Raft term) (Kafka raft-metrics current-epoch).",
            [(NO_LABELS, epoch)],
        )?;
        if controller.is_active() {
            // Rendering runs on the blocking pool (`metrics::http`).
            if let Ok(quorum) = controller.block_on(controller.describe_quorum()) {
                gauge(
                    e,
                    "kafka_server_raft_metrics_high_watermark",
                    "The metadata log's high watermark, on the active controller (Kafka raft-metrics high-watermark).",
                    [(NO_LABELS, quorum.high_watermark)],
                )?;
                gauge(
                    e,
                    "kafka_server_raft_metrics_voter_lag_records",
                    "Metadata records each voter is behind the high watermark, on the active controller (DescribeQuorum's lag).",
                    quorum.voters.iter().map(|v| {
                        let lag = if v.log_end_offset < 0 {
                            -1
                        } else {
                            (quorum.high_watermark - v.log_end_offset).max(0)
                        };
                        ([("voter", v.id.to_string())], lag)
                    }),
                )?;
            }
        }
        gauge(
            e,
            "kafka_controller_last_applied_record_offset",
            "Offset of the last metadata record in the image (Kafka KafkaController LastAppliedRecordOffset).",
            [(NO_LABELS, image.offset)],
        )?;
        gauge(
            e,
            "kafka_controller_global_topic_count",
            "Topics in the cluster (Kafka KafkaController GlobalTopicCount).",
            [(NO_LABELS, image.topics.len() as u64)],
        )?;
        gauge(
            e,
            "kafka_controller_global_partition_count",
            "Partitions in the cluster (Kafka KafkaController GlobalPartitionCount).",
            [(NO_LABELS, partitions().count() as u64)],
        )?;
        gauge(
            e,
            "kafka_controller_offline_partitions_count",
            "Partitions without a leader (Kafka KafkaController OfflinePartitionsCount).",
            [(
                NO_LABELS,
                partitions().filter(|p| p.leader < 0).count() as u64,
            )],
        )?;
        gauge(
            e,
            "kafka_controller_active_broker_count",
            "Registered, unfenced brokers (Kafka KafkaController ActiveBrokerCount).",
            [(NO_LABELS, (image.brokers.len() - fenced) as u64)],
        )?;
        gauge(
            e,
            "kafka_controller_fenced_broker_count",
            "Fenced brokers (Kafka KafkaController FencedBrokerCount).",
            [(NO_LABELS, fenced as u64)],
        )
    }

    fn encode_groups(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        // Every state appears, zero or not, so dashboards keep their series.
        let mut by_state: BTreeMap<&str, u64> = [
            GroupState::Empty,
            GroupState::PreparingRebalance,
            GroupState::CompletingRebalance,
            GroupState::Stable,
        ]
        .into_iter()
        .map(|s| (s.name(), 0))
        .collect();
        for shard in self.0.groups.shards() {
            for g in shard.list(&[], &[]) {
                *by_state.entry(g.state.name()).or_default() += 1;
            }
        }
        gauge(
            e,
            "kafka_server_group_coordinator_groups",
            "Classic groups coordinated here, by state (Kafka group-coordinator-metrics classic-group-count).",
            by_state.into_iter().map(|(s, n)| ([("state", s)], n)),
        )?;
        counter(
            e,
            "kafka_server_group_coordinator_rebalances",
            "Rebalances started by classic groups (Kafka group-coordinator-metrics classic-group-rebalance-count).",
            [(NO_LABELS, ottla_group_coordinator::stats::rebalances())],
        )?;
        let (written, unwritten) = self.0.share_partitions.dead_letter_counts();
        counter(
            e,
            "kafka_server_share_group_dead_letters",
            "Records share groups will not deliver again, by whether they were written to the group's dead-letter queue (KIP-1191) or archived without it (its queue refused or unreachable).",
            [
                ([("outcome", "written")], written),
                ([("outcome", "unwritten")], unwritten),
            ],
        )
    }
}

impl BrokerCollector {
    fn encode_quotas(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        let replication = &self.0.replication_throttle;
        counter(
            e,
            "kafka_server_replication_throttled_bytes",
            "Bytes of throttled replicas moved, by side (Kafka LeaderReplication / FollowerReplication byte-rate).",
            Side::BOTH
                .iter()
                .map(|s| ([("side", s.name())], replication.throttled_bytes(*s))),
        )?;
        let totals = self.0.client_quotas.throttle_totals();
        counter(
            e,
            "kafka_server_quota_throttled_responses",
            "Responses throttled by a client quota, by quota type (produce, fetch, request).",
            totals.iter().map(|(q, n, _)| ([("quota", q.name())], *n)),
        )?;
        counter(
            e,
            "kafka_server_quota_throttle_time_seconds",
            "Throttle time given to clients over their quota (Kafka throttle-time per Produce, Fetch, Request).",
            totals
                .iter()
                .map(|(q, _, ms)| ([("quota", q.name())], *ms as f64 / 1000.0)),
        )
    }
}

impl Collector for BrokerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        self.encode_partitions(&mut encoder)?;
        self.encode_controller(&mut encoder)?;
        self.encode_groups(&mut encoder)?;
        self.encode_quotas(&mut encoder)
    }
}
