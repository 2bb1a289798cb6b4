//! The client-facing Kafka APIs, each registered once (see
//! [`served_apis!`]): versions, authorization gate and handler in
//! `crate::apis`.
//!
//! Handlers that touch files (appends, metadata commits, fsyncs) run on the
//! blocking pool so they never stall the async workers; Fetch and the group
//! APIs are async (they long-poll) and run in place.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::{
    FetchRequest, FetchResponse, ProduceRequest, ProduceResponse, RequestHeader, RequestKind,
};
use ottla_controller::acls::operation::{ALTER, ALTER_CONFIGS, DESCRIBE, DESCRIBE_CONFIGS};
use ottla_protocol::api_versions::ApiTableError;
use ottla_protocol::own_api::Api;

use crate::apis::describe_quorum::QuorumContext;
use crate::apis::{
    acls, client_quotas, configs, consumer_group, create_partitions, create_topics, delete_records,
    delete_topics, describe_cluster, describe_log_dirs, describe_quorum, describe_topic_partitions,
    elect_leaders, fetch, group, init_producer_id, list_config_resources, list_offsets, metadata,
    offset_for_leader_epoch, produce, raft_voters, reassignments, scram_credentials, share_fetch,
    share_group, share_state, txn, unregister_broker, update_features,
};
use crate::authorize::{
    cluster, configs as config_gates, gate_request, groups, metadata as metadata_gates, share,
    topics, txn as txn_gates, Gate,
};
use crate::blocking::blocking;
use crate::broker::Broker;
use crate::handlers::past_versions::PastVersionFields;
use crate::handlers::served::served_apis;
use crate::handlers::HandlerRegistry;
use crate::metrics::network;
use crate::network::file_records::FileRecords;
use crate::network::{HandlerFuture, RequestContext, RequestHandler, Response};
use crate::quotas::{thread_percent, throttle_time_field, QuotaClient, QuotaType};

served_apis! {
    with (b: &Arc<Broker>, c: &mut Call<'_>, v, listener, r; access, args);

    // Records.
    Produce 3..=13,
        gate topics::produce(access, v, r),
        // acks=0: no response.
        run match serve_produce(b, c, listener, r).await? {
            Some(response) => response,
            None => return Ok(None),
        };
    Fetch 4..=18,
        gate topics::fetch(access, v, r),
        run serve_fetch(b, c, listener, r).await;
    ListOffsets 1..=10,
        gate topics::list_offsets(access, r),
        run blocking(b, move |b| list_offsets::handle(b, v, r)).await?;
    OffsetForLeaderEpoch 2..=4,
        gate topics::offset_for_leader_epoch(access, r),
        run blocking(b, move |b| offset_for_leader_epoch::handle(b, v, r)).await?;
    DeleteRecords 0..=2,
        gate topics::delete_records(access, r),
        run blocking(b, move |b| delete_records::handle(b, v, r)).await?;

    // Metadata and topics.
    Metadata 0..=13,
        gate metadata_gates::metadata(access, v, args.auto_create_topics, r),
        run blocking(b, move |b| metadata::handle(b, v, &listener, r)).await?;
    DescribeTopicPartitions 0..=0,
        gate metadata_gates::describe_topic_partitions(access, r),
        run blocking(b, move |b| describe_topic_partitions::handle(b, v, &listener, r)).await?;
    CreateTopics 2..=7,
        gate config_gates::create_topics(access, v, r),
        run blocking(b, move |b| create_topics::handle(b, v, r)).await?;
    DeleteTopics 1..=6,
        gate config_gates::delete_topics(access, v, r),
        run blocking(b, move |b| delete_topics::handle(b, v, r)).await?;
    CreatePartitions 0..=3,
        gate config_gates::create_partitions(access, r),
        run blocking(b, move |b| create_partitions::handle(b, v, r)).await?;
    DescribeConfigs 1..=4,
        gate config_gates::describe_configs(access, r),
        run blocking(b, move |b| configs::describe::handle(b, v, r)).await?;
    AlterConfigs 0..=2,
        gate config_gates::alter_configs(access, r),
        run blocking(b, move |b| configs::alter::handle(b, v, r)).await?;
    IncrementalAlterConfigs 0..=1,
        gate config_gates::incremental_alter_configs(access, r),
        run blocking(b, move |b| configs::incremental::handle(b, v, r)).await?;
    ListConfigResources 0..=1,
        gate cluster::require(access, v, DESCRIBE_CONFIGS, r.into()),
        run blocking(b, move |b| list_config_resources::handle(b, v, r)).await?;

    // Classic groups and committed offsets. The first FindCoordinator
    // creates the internal topic through the controller, which blocks. Join
    // and Sync mostly wait for the other members (Kafka parks them in
    // purgatory, off its threads), so they count against no request quota.
    FindCoordinator 0..=6,
        gate groups::find_coordinator(access, v, r),
        run blocking(b, move |b| group::find_coordinator(b, v, &listener, r)).await?;
    JoinGroup 0..=9,
        gate groups::join_group(access, r),
        run {
            c.exempt = true;
            group::join_group(b, v, &c.ctx.client_id, c.ctx.peer.ip(), r).await
        };
    SyncGroup 0..=5,
        gate groups::sync_group(access, r),
        run {
            c.exempt = true;
            group::sync_group(b, v, r).await
        };
    Heartbeat 0..=4,
        gate groups::heartbeat(access, r),
        run group::heartbeat(b, v, r).await;
    LeaveGroup 0..=5,
        gate groups::leave_group(access, r),
        run group::leave_group(b, v, r).await;
    OffsetCommit 2..=9,
        gate groups::offset_commit(access, r),
        run group::offset_commit(b, v, r).await;
    OffsetFetch 1..=9,
        gate groups::offset_fetch(access, v, r),
        run group::offset_fetch(b, v, r).await;
    OffsetDelete 0..=0,
        gate groups::offset_delete(access, r),
        run group::offset_delete(b, v, r).await;
    DescribeGroups 0..=6,
        gate groups::describe_groups(access, r),
        run group::describe_groups(b, v, r).await;
    ListGroups 0..=5,
        gate groups::list_groups(access, r),
        run group::list_groups(b, v, r).await;
    DeleteGroups 0..=2,
        gate groups::delete_groups(access, r),
        run group::delete_groups(b, v, r).await;

    // Consumer groups (KIP-848).
    ConsumerGroupHeartbeat 0..=1,
        gate groups::consumer_group_heartbeat(access, r),
        run {
            let (client_id, peer) = (c.ctx.client_id.clone(), c.ctx.peer.ip());
            blocking(b, move |b| consumer_group::heartbeat(b, v, &client_id, peer, r)).await?
        };
    ConsumerGroupDescribe 0..=1,
        gate groups::consumer_group_describe(access, r),
        run blocking(b, move |b| consumer_group::describe(b, v, r)).await?;

    // Share groups (KIP-932). ShareFetch long-polls as Fetch does.
    ShareGroupHeartbeat 1..=1,
        gate share::heartbeat(access, r),
        run {
            let (client_id, peer) = (c.ctx.client_id.clone(), c.ctx.peer.ip());
            blocking(b, move |b| share_group::heartbeat(b, &client_id, peer, r)).await?
        };
    ShareGroupDescribe 1..=1,
        gate share::describe(access, r),
        run blocking(b, move |b| share_group::describe(b, r)).await?;
    ShareFetch 1..=2,
        gate share::fetch(access, r),
        run {
            c.ctx.release_next();
            let (response, waited) =
                share_fetch::fetch(b, &listener, v, r, c.ctx.share_v2).await;
            c.waited = waited;
            response
        };
    ShareAcknowledge 1..=2,
        gate share::acknowledge(access, r),
        run {
            let (response, lock_timeout) =
                share_fetch::acknowledge(b, &listener, r, c.ctx.share_v2).await;
            c.past.share_lock_timeout_ms = Some(lock_timeout);
            response
        };
    DescribeShareGroupOffsets 0..=1,
        gate share::describe_offsets(access, r),
        run {
            let (response, lags) = share_group::describe_offsets(b, r).await;
            c.past.share_offset_lags = Some(lags);
            response
        };
    AlterShareGroupOffsets 0..=0,
        gate share::alter_offsets(access, r),
        run share_group::alter_offsets(b, r).await;
    DeleteShareGroupOffsets 0..=0,
        gate share::delete_offsets(access, r),
        run share_group::delete_offsets(b, r).await;
    // The share coordinator's APIs, between share partition leaders and
    // the coordinator, and from the admin APIs above.
    InitializeShareGroupState 0..=0,
        gate share::initialize_state(access, r),
        run share_state::initialize(b, r).await;
    ReadShareGroupState 0..=0,
        gate share::read_state(access, r),
        run share_state::read(b, r).await;
    WriteShareGroupState 0..=1,
        gate share::write_state(access, r),
        run share_state::write(b, r).await;
    DeleteShareGroupState 0..=0,
        gate share::delete_state(access, r),
        run share_state::delete(b, r).await;
    ReadShareGroupStateSummary 0..=1,
        gate share::read_state_summary(access, r),
        run {
            let (response, counts) = share_state::read_summary(b, r).await;
            c.past.share_delivery_counts = Some(counts);
            response
        };

    // Transactions. Markers between brokers count against no quota.
    InitProducerId 0..=5,
        gate txn_gates::init_producer_id(access, r),
        run blocking(b, move |b| init_producer_id::handle(b, v, r)).await?;
    AddPartitionsToTxn 0..=5,
        gate txn_gates::add_partitions_to_txn(access, v, r),
        run blocking(b, move |b| txn::add_partitions_to_txn(b, v, r)).await?;
    AddOffsetsToTxn 0..=4,
        gate txn_gates::add_offsets_to_txn(access, r),
        run blocking(b, move |b| txn::add_offsets_to_txn(b, v, r)).await?;
    EndTxn 0..=5,
        gate txn_gates::end_txn(access, r),
        run blocking(b, move |b| txn::end_txn(b, v, r)).await?;
    WriteTxnMarkers 1..=1,
        gate txn_gates::write_txn_markers(access, r),
        run {
            c.exempt = true;
            blocking(b, move |b| txn::write_txn_markers(b, v, r)).await?
        };
    TxnOffsetCommit 0..=5,
        gate txn_gates::txn_offset_commit(access, r),
        run blocking(b, move |b| txn::txn_offset_commit(b, v, r)).await?;
    DescribeProducers 0..=0,
        gate txn_gates::describe_producers(access, r),
        run blocking(b, move |b| txn::describe_producers(b, v, r)).await?;
    DescribeTransactions 0..=0,
        gate txn_gates::describe_transactions(access, r),
        run blocking(b, move |b| txn::describe_transactions(b, v, r)).await?;
    ListTransactions 0..=2,
        gate txn_gates::list_transactions(access, r),
        run blocking(b, move |b| txn::list_transactions(b, v, r)).await?;

    // The cluster.
    DescribeCluster 0..=2,
        gate cluster::describe_cluster(access, r),
        run blocking(b, move |b| describe_cluster::handle(b, v, &listener, r)).await?;
    DescribeLogDirs 1..=4,
        gate cluster::require(access, v, DESCRIBE, r.into()),
        run blocking(b, move |b| describe_log_dirs::handle(b, v, r)).await?;
    DescribeQuorum 0..=2,
        gate cluster::require(access, v, DESCRIBE, r.into()),
        run blocking(b, move |b| describe_quorum::handle(&quorum_context(b), v, r)).await?;
    AddRaftVoter 0..=0,
        gate cluster::require(access, v, ALTER, r.into()),
        run blocking(b, move |b| raft_voters::add(&quorum_context(b), v, r)).await?;
    RemoveRaftVoter 0..=0,
        gate cluster::require(access, v, ALTER, r.into()),
        run blocking(b, move |b| raft_voters::remove(&quorum_context(b), v, r)).await?;
    UnregisterBroker 0..=0,
        gate cluster::require(access, v, ALTER, r.into()),
        run blocking(b, move |b| unregister_broker::handle(b, v, r)).await?;
    UpdateFeatures 0..=2,
        gate cluster::require(access, v, ALTER, r.into()),
        run blocking(b, move |b| update_features::handle(b, v, r)).await?;
    ElectLeaders 0..=2,
        gate cluster::require(access, v, ALTER, r.into()),
        run blocking(b, move |b| elect_leaders::handle(b, v, r)).await?;
    AlterPartitionReassignments 0..=1,
        gate cluster::require(access, v, ALTER, r.into()),
        run blocking(b, move |b| reassignments::alter(b, v, r)).await?;
    ListPartitionReassignments 0..=0,
        gate cluster::require(access, v, DESCRIBE, r.into()),
        run blocking(b, move |b| reassignments::list(b, v, r)).await?;

    // Security and quotas.
    DescribeUserScramCredentials 0..=0,
        gate cluster::require(access, v, DESCRIBE, r.into()),
        run blocking(b, move |b| scram_credentials::describe(b, v, r)).await?;
    AlterUserScramCredentials 0..=0,
        gate cluster::require(access, v, ALTER, r.into()),
        run blocking(b, move |b| scram_credentials::alter(b, v, r)).await?;
    DescribeClientQuotas 0..=1,
        gate cluster::require(access, v, DESCRIBE_CONFIGS, r.into()),
        run client_quotas::describe(&b.controller.image(), v, r);
    AlterClientQuotas 0..=1,
        gate cluster::require(access, v, ALTER_CONFIGS, r.into()),
        run blocking(b, move |b| client_quotas::alter(b, v, r)).await?;
    DescribeAcls 1..=3,
        gate cluster::require(access, v, DESCRIBE, r.into()),
        run blocking(b, move |b| acls::describe(b, v, r)).await?;
    CreateAcls 1..=3,
        gate cluster::require(access, v, ALTER, r.into()),
        run blocking(b, move |b| acls::create(b, v, r)).await?;
    DeleteAcls 1..=3,
        gate cluster::require(access, v, ALTER, r.into()),
        run blocking(b, move |b| acls::delete(b, v, r)).await?;
}

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

/// One request's handling beyond its response: time spent waiting (acks,
/// long polls), which is not handling; the record sets a Fetch sends from
/// their files; and how it counts against quotas.
struct Call<'a> {
    ctx: &'a RequestContext,
    quota: QuotaClient<'a>,
    waited: Duration,
    files: FileRecords,
    byte_throttle: Duration,
    /// Not counted against request quotas.
    exempt: bool,
    /// What the answer carries that kafka-protocol's types have no field
    /// for.
    past: PastVersionFields,
}

impl RequestHandler for BrokerApis {
    fn handle<'a>(
        &'a self,
        ctx: &'a RequestContext,
        _header: RequestHeader,
        body: RequestKind,
    ) -> HandlerFuture<'a> {
        Box::pin(async move {
            let b = self
                .broker
                .get()
                .ok_or_else(|| anyhow::anyhow!("request before the broker was started"))?;
            let v = ctx.api_version;
            let (body, patch) = match gate_request(b, ctx, body, gate) {
                Gate::Pass(body, patch) => (body, patch),
                Gate::Answer(response) => return Ok(Response::Message(response)),
                Gate::NoRule => anyhow::bail!(
                    "{:?} has no authorization rule, so it is not served while authorizer.class.name is set",
                    ctx.api
                ),
            };
            let started = Instant::now();
            let image = b.controller.image();
            let mut call = Call {
                ctx,
                quota: QuotaClient {
                    manager: &b.client_quotas,
                    quotas: &image.client_quotas,
                    user: &ctx.principal.name,
                    client_id: &ctx.client_id,
                },
                waited: Duration::ZERO,
                files: FileRecords::default(),
                byte_throttle: Duration::ZERO,
                exempt: false,
                past: PastVersionFields::default(),
            };
            let Some(mut response) = run(b, &mut call, v, ctx.listener.to_string(), body).await?
            else {
                return Ok(Response::NoResponse);
            };
            if let Some(patch) = patch {
                patch(&mut response);
            }
            let handling = started.elapsed().saturating_sub(call.waited);
            let request_throttle = if call.exempt {
                Duration::ZERO
            } else {
                call.quota
                    .record(QuotaType::Request, thread_percent(handling))
            };
            let throttle = call.byte_throttle.max(request_throttle);
            if !throttle.is_zero() {
                ctx.throttle.mute_for(throttle);
                if let Some(field) = throttle_time_field(&mut response, v) {
                    *field = throttle.as_millis().min(i32::MAX as u128) as i32;
                }
            }
            if let Some(body) = call.past.encode(&response, v)? {
                if let Api::Kafka(key) = ctx.api {
                    network().response_errors(key, &response);
                }
                return Ok(Response::Encoded(body.freeze()));
            }
            Ok(if call.files.is_empty() {
                Response::Message(response)
            } else {
                Response::FromFiles(response, call.files)
            })
        })
    }
}

/// Appends on the blocking pool unless the append may run in place (see
/// `produce::appends_in_place`), then waits for the acks; `None` for
/// acks=0, which gets no response.
async fn serve_produce(
    b: &Arc<Broker>,
    c: &mut Call<'_>,
    listener: String,
    r: ProduceRequest,
) -> anyhow::Result<Option<ProduceResponse>> {
    let v = c.ctx.api_version;
    let bytes = produce::records_bytes(&r);
    let appended = if produce::appends_in_place(b, &r) {
        produce::handle(b, v, &listener, r)
    } else {
        blocking(b, move |b| produce::handle(b, v, &listener, r)).await?
    };
    c.ctx.release_next();
    c.byte_throttle = c.quota.record(QuotaType::Produce, bytes as f64);
    let acks_started = Instant::now();
    let finished = produce::finish(b, appended).await;
    c.waited = acks_started.elapsed();
    if finished.is_none() {
        c.ctx.throttle.mute_for(c.byte_throttle);
    }
    Ok(finished)
}

/// Long-polls in place; replica fetches count against no quota.
async fn serve_fetch(
    b: &Arc<Broker>,
    c: &mut Call<'_>,
    listener: String,
    r: FetchRequest,
) -> FetchResponse {
    c.ctx.release_next();
    c.exempt = r.replica_id.0 >= 0 || r.replica_state.replica_id.0 >= 0;
    let fetched = fetch::handle(b, c.ctx.api_version, &listener, r, Some(&c.quota)).await;
    c.waited = fetched.waited;
    c.files = fetched.files;
    c.byte_throttle = Duration::from_millis(fetched.response.throttle_time_ms.max(0) as u64);
    fetched.response
}
