//! The client-facing APIs: one dispatcher from decoded requests to the
//! handlers in `crate::apis`, and the table of versions each is served at.
//!
//! Handlers that touch files (appends, metadata commits, fsyncs) run on the
//! blocking pool so they never stall the async workers; Fetch and the group
//! APIs are async (they long-poll) and run in place.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind};
use ottla_protocol::api_versions::ApiTableError;
use ottla_protocol::file_records::FileRecords;

use crate::apis::describe_quorum::QuorumContext;
use crate::apis::{
    acls, client_quotas, configs, consumer_group, create_partitions, create_topics, delete_records,
    delete_topics, describe_cluster, describe_log_dirs, describe_quorum, describe_topic_partitions,
    elect_leaders, fetch, group, init_producer_id, list_config_resources, list_offsets, metadata,
    offset_for_leader_epoch, produce, raft_voters, reassignments, scram_credentials, share_fetch,
    share_group, share_state, txn, unregister_broker, update_features,
};
use crate::authorize::{gate_request, Gate};
use crate::blocking::blocking;
use crate::broker::Broker;
use crate::handlers::HandlerRegistry;
use crate::network::{HandlerFuture, RequestContext, RequestHandler, Response};
use crate::quotas::{thread_percent, throttle_time_field, QuotaClient, QuotaType};

/// The versions served, from Kafka 4.x's floors (KIP-896) to what the
/// handlers implement.
pub const SERVED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 13),
    (ApiKey::Fetch, 4, 18),
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::ListConfigResources, 0, 1),
    (ApiKey::DescribeTopicPartitions, 0, 0),
    (ApiKey::DescribeQuorum, 0, 2),
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::AlterPartitionReassignments, 0, 1),
    (ApiKey::ListPartitionReassignments, 0, 0),
    (ApiKey::UpdateFeatures, 0, 2),
    (ApiKey::UnregisterBroker, 0, 0),
    (ApiKey::AddRaftVoter, 0, 0),
    (ApiKey::RemoveRaftVoter, 0, 0),
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    (ApiKey::ShareGroupHeartbeat, 1, 1),
    (ApiKey::ShareGroupDescribe, 1, 1),
    (ApiKey::ShareFetch, 1, 1),
    (ApiKey::ShareAcknowledge, 1, 1),
    (ApiKey::DescribeShareGroupOffsets, 0, 0),
    (ApiKey::AlterShareGroupOffsets, 0, 0),
    (ApiKey::DeleteShareGroupOffsets, 0, 0),
    (ApiKey::InitializeShareGroupState, 0, 0),
    (ApiKey::ReadShareGroupState, 0, 0),
    (ApiKey::WriteShareGroupState, 0, 0),
    (ApiKey::DeleteShareGroupState, 0, 0),
    (ApiKey::ReadShareGroupStateSummary, 0, 0),
    (ApiKey::AddPartitionsToTxn, 0, 5),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::EndTxn, 0, 5),
    (ApiKey::WriteTxnMarkers, 1, 1),
    (ApiKey::TxnOffsetCommit, 0, 5),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 2),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    (ApiKey::DescribeClientQuotas, 0, 1),
    (ApiKey::AlterClientQuotas, 0, 1),
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
];

pub use crate::broker::BrokerSlot;

/// Registers every client-facing API in `registry`, served by the broker
/// that `slot` will hold.
pub fn register(registry: &mut HandlerRegistry, slot: BrokerSlot) -> Result<(), ApiTableError> {
    registry.register_all(SERVED, Arc::new(BrokerApis { broker: slot }))
}

struct BrokerApis {
    broker: BrokerSlot,
}

/// The quorum APIs' view of this broker.
fn quorum_context(b: &Broker) -> QuorumContext<'_> {
    QuorumContext {
        controller: &b.controller,
        cluster_id: &b.cluster_id,
        controller_listener: &b.settings.controller_listener,
    }
}

impl RequestHandler for BrokerApis {
    fn handle<'a>(
        &'a self,
        ctx: &'a RequestContext,
        header: RequestHeader,
        body: RequestKind,
    ) -> HandlerFuture<'a> {
        Box::pin(async move {
            let b = self
                .broker
                .get()
                .ok_or_else(|| anyhow::anyhow!("request before the broker was started"))?;
            let v = ctx.api_version;
            let listener = ctx.listener.to_string();
            let (body, patch) = match gate_request(b, ctx, body) {
                Gate::Pass(body, patch) => (body, patch),
                Gate::Answer(response) => return Ok(Response::Message(response)),
                Gate::NoRule => anyhow::bail!(
                    "{:?} has no authorization rule, so it is not served while authorizer.class.name is set",
                    ctx.api
                ),
            };
            let started = Instant::now();
            let image = b.controller.image();
            let quota = QuotaClient {
                manager: &b.client_quotas,
                quotas: &image.client_quotas,
                user: &ctx.principal.name,
                client_id: &ctx.client_id,
            };
            // Time spent waiting (acks, long polls), which is not handling.
            let mut waited = Duration::ZERO;
            // The record sets a Fetch sends from their files.
            let mut files = FileRecords::default();
            let mut byte_throttle = Duration::ZERO;
            // Not counted against request quotas: markers between brokers,
            // and the group calls whose handlers mostly wait for the other
            // members (Kafka parks those in purgatory, off its threads).
            let mut exempt = matches!(
                body,
                RequestKind::WriteTxnMarkers(_)
                    | RequestKind::JoinGroup(_)
                    | RequestKind::SyncGroup(_)
            );
            let mut response = match body {
                RequestKind::Produce(r) => {
                    let bytes = produce::records_bytes(&r);
                    let appended = if produce::appends_in_place(b, &r) {
                        produce::handle(b, v, &listener, r)
                    } else {
                        blocking(b, move |b| produce::handle(b, v, &listener, r)).await?
                    };
                    ctx.release_next();
                    byte_throttle = quota.record(QuotaType::Produce, bytes as f64);
                    let acks_started = Instant::now();
                    let finished = produce::finish(b, appended).await;
                    waited = acks_started.elapsed();
                    match finished {
                        Some(r) => ResponseKind::Produce(r),
                        None => {
                            ctx.throttle.mute_for(byte_throttle);
                            return Ok(Response::NoResponse);
                        }
                    }
                }
                RequestKind::Fetch(r) => {
                    ctx.release_next();
                    exempt = r.replica_id.0 >= 0 || r.replica_state.replica_id.0 >= 0;
                    let fetched = fetch::handle(b, v, &listener, r, Some(&quota)).await;
                    waited = fetched.waited;
                    files = fetched.files;
                    let r = fetched.response;
                    byte_throttle = Duration::from_millis(r.throttle_time_ms.max(0) as u64);
                    ResponseKind::Fetch(r)
                }
                RequestKind::Metadata(r) => ResponseKind::Metadata(
                    blocking(b, move |b| metadata::handle(b, v, &listener, r)).await?,
                ),
                RequestKind::ListOffsets(r) => ResponseKind::ListOffsets(
                    blocking(b, move |b| list_offsets::handle(b, v, r)).await?,
                ),
                RequestKind::CreateTopics(r) => ResponseKind::CreateTopics(
                    blocking(b, move |b| create_topics::handle(b, v, r)).await?,
                ),
                RequestKind::DeleteTopics(r) => ResponseKind::DeleteTopics(
                    blocking(b, move |b| delete_topics::handle(b, v, r)).await?,
                ),
                RequestKind::CreatePartitions(r) => ResponseKind::CreatePartitions(
                    blocking(b, move |b| create_partitions::handle(b, v, r)).await?,
                ),
                RequestKind::DeleteRecords(r) => ResponseKind::DeleteRecords(
                    blocking(b, move |b| delete_records::handle(b, v, r)).await?,
                ),
                RequestKind::InitProducerId(r) => ResponseKind::InitProducerId(
                    blocking(b, move |b| init_producer_id::handle(b, v, r)).await?,
                ),
                RequestKind::OffsetForLeaderEpoch(r) => ResponseKind::OffsetForLeaderEpoch(
                    blocking(b, move |b| offset_for_leader_epoch::handle(b, v, r)).await?,
                ),
                RequestKind::DescribeConfigs(r) => ResponseKind::DescribeConfigs(
                    blocking(b, move |b| configs::describe::handle(b, v, r)).await?,
                ),
                RequestKind::AlterConfigs(r) => ResponseKind::AlterConfigs(
                    blocking(b, move |b| configs::alter::handle(b, v, r)).await?,
                ),
                RequestKind::IncrementalAlterConfigs(r) => ResponseKind::IncrementalAlterConfigs(
                    blocking(b, move |b| configs::incremental::handle(b, v, r)).await?,
                ),
                RequestKind::AlterPartitionReassignments(r) => {
                    ResponseKind::AlterPartitionReassignments(
                        blocking(b, move |b| reassignments::alter(b, v, r)).await?,
                    )
                }
                RequestKind::ListPartitionReassignments(r) => {
                    ResponseKind::ListPartitionReassignments(
                        blocking(b, move |b| reassignments::list(b, v, r)).await?,
                    )
                }
                RequestKind::UpdateFeatures(r) => ResponseKind::UpdateFeatures(
                    blocking(b, move |b| update_features::handle(b, v, r)).await?,
                ),
                RequestKind::UnregisterBroker(r) => ResponseKind::UnregisterBroker(
                    blocking(b, move |b| unregister_broker::handle(b, v, r)).await?,
                ),
                RequestKind::AddRaftVoter(r) => ResponseKind::AddRaftVoter(
                    blocking(b, move |b| raft_voters::add(&quorum_context(b), v, r)).await?,
                ),
                RequestKind::RemoveRaftVoter(r) => ResponseKind::RemoveRaftVoter(
                    blocking(b, move |b| raft_voters::remove(&quorum_context(b), v, r)).await?,
                ),
                RequestKind::ElectLeaders(r) => ResponseKind::ElectLeaders(
                    blocking(b, move |b| elect_leaders::handle(b, v, r)).await?,
                ),
                RequestKind::DescribeQuorum(r) => ResponseKind::DescribeQuorum(
                    blocking(b, move |b| {
                        describe_quorum::handle(&quorum_context(b), v, r)
                    })
                    .await?,
                ),
                RequestKind::DescribeLogDirs(r) => ResponseKind::DescribeLogDirs(
                    blocking(b, move |b| describe_log_dirs::handle(b, v, r)).await?,
                ),
                RequestKind::ListConfigResources(r) => ResponseKind::ListConfigResources(
                    blocking(b, move |b| list_config_resources::handle(b, v, r)).await?,
                ),
                RequestKind::DescribeCluster(r) => ResponseKind::DescribeCluster(
                    blocking(b, move |b| describe_cluster::handle(b, v, &listener, r)).await?,
                ),
                RequestKind::DescribeTopicPartitions(r) => ResponseKind::DescribeTopicPartitions(
                    blocking(b, move |b| {
                        describe_topic_partitions::handle(b, v, &listener, r)
                    })
                    .await?,
                ),
                RequestKind::AddPartitionsToTxn(r) => ResponseKind::AddPartitionsToTxn(
                    blocking(b, move |b| txn::add_partitions_to_txn(b, v, r)).await?,
                ),
                RequestKind::AddOffsetsToTxn(r) => ResponseKind::AddOffsetsToTxn(
                    blocking(b, move |b| txn::add_offsets_to_txn(b, v, r)).await?,
                ),
                RequestKind::EndTxn(r) => {
                    ResponseKind::EndTxn(blocking(b, move |b| txn::end_txn(b, v, r)).await?)
                }
                RequestKind::WriteTxnMarkers(r) => ResponseKind::WriteTxnMarkers(
                    blocking(b, move |b| txn::write_txn_markers(b, v, r)).await?,
                ),
                RequestKind::TxnOffsetCommit(r) => ResponseKind::TxnOffsetCommit(
                    blocking(b, move |b| txn::txn_offset_commit(b, v, r)).await?,
                ),
                RequestKind::DescribeProducers(r) => ResponseKind::DescribeProducers(
                    blocking(b, move |b| txn::describe_producers(b, v, r)).await?,
                ),
                RequestKind::DescribeTransactions(r) => ResponseKind::DescribeTransactions(
                    blocking(b, move |b| txn::describe_transactions(b, v, r)).await?,
                ),
                RequestKind::ListTransactions(r) => ResponseKind::ListTransactions(
                    blocking(b, move |b| txn::list_transactions(b, v, r)).await?,
                ),
                RequestKind::ConsumerGroupHeartbeat(r) => {
                    let client_id = header.client_id.as_deref().unwrap_or_default().to_string();
                    let peer = ctx.peer.ip();
                    ResponseKind::ConsumerGroupHeartbeat(
                        blocking(b, move |b| {
                            consumer_group::heartbeat(b, v, &client_id, peer, r)
                        })
                        .await?,
                    )
                }
                RequestKind::ConsumerGroupDescribe(r) => ResponseKind::ConsumerGroupDescribe(
                    blocking(b, move |b| consumer_group::describe(b, v, r)).await?,
                ),
                RequestKind::ShareGroupHeartbeat(r) => {
                    let client_id = header.client_id.as_deref().unwrap_or_default().to_string();
                    let peer = ctx.peer.ip();
                    ResponseKind::ShareGroupHeartbeat(
                        blocking(b, move |b| share_group::heartbeat(b, &client_id, peer, r))
                            .await?,
                    )
                }
                RequestKind::ShareGroupDescribe(r) => ResponseKind::ShareGroupDescribe(
                    blocking(b, move |b| share_group::describe(b, r)).await?,
                ),
                // Long polls, as Fetch does: in place, waiting async.
                RequestKind::ShareFetch(r) => {
                    ctx.release_next();
                    let (r, share_waited) = share_fetch::fetch(b, &listener, r).await;
                    waited = share_waited;
                    ResponseKind::ShareFetch(r)
                }
                RequestKind::ShareAcknowledge(r) => {
                    ResponseKind::ShareAcknowledge(share_fetch::acknowledge(b, &listener, r).await)
                }
                RequestKind::DescribeShareGroupOffsets(r) => {
                    ResponseKind::DescribeShareGroupOffsets(
                        share_group::describe_offsets(b, r).await,
                    )
                }
                RequestKind::AlterShareGroupOffsets(r) => {
                    ResponseKind::AlterShareGroupOffsets(share_group::alter_offsets(b, r).await)
                }
                RequestKind::DeleteShareGroupOffsets(r) => {
                    ResponseKind::DeleteShareGroupOffsets(share_group::delete_offsets(b, r).await)
                }
                RequestKind::InitializeShareGroupState(r) => {
                    ResponseKind::InitializeShareGroupState(share_state::initialize(b, r).await)
                }
                // Between brokers: share partition leaders and the share
                // coordinator (KIP-932).
                RequestKind::ReadShareGroupState(r) => {
                    ResponseKind::ReadShareGroupState(share_state::read(b, r).await)
                }
                RequestKind::WriteShareGroupState(r) => {
                    ResponseKind::WriteShareGroupState(share_state::write(b, r).await)
                }
                RequestKind::DeleteShareGroupState(r) => {
                    ResponseKind::DeleteShareGroupState(share_state::delete(b, r).await)
                }
                RequestKind::ReadShareGroupStateSummary(r) => {
                    ResponseKind::ReadShareGroupStateSummary(share_state::read_summary(b, r).await)
                }
                // The first lookup creates the internal topic through the
                // controller, which blocks.
                RequestKind::FindCoordinator(r) => ResponseKind::FindCoordinator(
                    blocking(b, move |b| group::find_coordinator(b, v, &listener, r)).await?,
                ),
                RequestKind::JoinGroup(r) => {
                    let client_id = header
                        .client_id
                        .as_deref()
                        .map(|s| s.to_string())
                        .unwrap_or_default();
                    ResponseKind::JoinGroup(
                        group::join_group(b, v, &client_id, ctx.peer.ip(), r).await,
                    )
                }
                RequestKind::SyncGroup(r) => {
                    ResponseKind::SyncGroup(group::sync_group(b, v, r).await)
                }
                RequestKind::Heartbeat(r) => {
                    ResponseKind::Heartbeat(group::heartbeat(b, v, r).await)
                }
                RequestKind::LeaveGroup(r) => {
                    ResponseKind::LeaveGroup(group::leave_group(b, v, r).await)
                }
                RequestKind::OffsetCommit(r) => {
                    ResponseKind::OffsetCommit(group::offset_commit(b, v, r).await)
                }
                RequestKind::OffsetFetch(r) => {
                    ResponseKind::OffsetFetch(group::offset_fetch(b, v, r).await)
                }
                RequestKind::ListGroups(r) => {
                    ResponseKind::ListGroups(group::list_groups(b, v, r).await)
                }
                RequestKind::DescribeGroups(r) => {
                    ResponseKind::DescribeGroups(group::describe_groups(b, v, r).await)
                }
                RequestKind::DeleteGroups(r) => {
                    ResponseKind::DeleteGroups(group::delete_groups(b, v, r).await)
                }
                RequestKind::OffsetDelete(r) => {
                    ResponseKind::OffsetDelete(group::offset_delete(b, v, r).await)
                }
                RequestKind::DescribeClientQuotas(r) => ResponseKind::DescribeClientQuotas(
                    client_quotas::describe(&b.controller.image(), v, r),
                ),
                RequestKind::AlterClientQuotas(r) => ResponseKind::AlterClientQuotas(
                    blocking(b, move |b| client_quotas::alter(b, v, r)).await?,
                ),
                RequestKind::DescribeUserScramCredentials(r) => {
                    ResponseKind::DescribeUserScramCredentials(
                        blocking(b, move |b| scram_credentials::describe(b, v, r)).await?,
                    )
                }
                RequestKind::AlterUserScramCredentials(r) => {
                    ResponseKind::AlterUserScramCredentials(
                        blocking(b, move |b| scram_credentials::alter(b, v, r)).await?,
                    )
                }
                RequestKind::CreateAcls(r) => {
                    ResponseKind::CreateAcls(blocking(b, move |b| acls::create(b, v, r)).await?)
                }
                RequestKind::DescribeAcls(r) => {
                    ResponseKind::DescribeAcls(blocking(b, move |b| acls::describe(b, v, r)).await?)
                }
                RequestKind::DeleteAcls(r) => {
                    ResponseKind::DeleteAcls(blocking(b, move |b| acls::delete(b, v, r)).await?)
                }
                other => anyhow::bail!(
                    "no handler registered for {:?}",
                    std::mem::discriminant(&other)
                ),
            };
            if let Some(patch) = patch {
                patch(&mut response);
            }
            let handling = started.elapsed().saturating_sub(waited);
            let request_throttle = if exempt {
                Duration::ZERO
            } else {
                quota.record(QuotaType::Request, thread_percent(handling))
            };
            let throttle = byte_throttle.max(request_throttle);
            if !throttle.is_zero() {
                ctx.throttle.mute_for(throttle);
                if let Some(field) = throttle_time_field(&mut response, v) {
                    *field = throttle.as_millis().min(i32::MAX as u128) as i32;
                }
            }
            Ok(if files.is_empty() {
                Response::Message(response)
            } else {
                Response::FromFiles(response, files)
            })
        })
    }
}
