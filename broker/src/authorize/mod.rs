//! Authorization of every client-facing API, in one place per API and in
//! front of the handlers, which stay unaware of ACLs.
//!
//! A gate looks at a request with the requester's [`Access`] and either
//! answers it outright (nothing in it is allowed: a group the principal may
//! not read, a cluster operation it may not perform), or lets the allowed
//! part through: resources that fail their check are taken out of the
//! request and a [`Patch`] adds their errors (TOPIC_AUTHORIZATION_FAILED,
//! ...) to the handler's response, as Kafka answers them. The patch also
//! fills in authorized-operations fields. With the authorizer off every
//! request passes unchanged.

mod cluster;
mod configs;
mod groups;
#[cfg(test)]
mod matrix;
mod metadata;
mod share;
#[cfg(test)]
mod tests;
mod topics;
mod txn;

use std::sync::Arc;

use kafka_protocol::messages::{RequestKind, ResponseKind};

use crate::broker::Broker;
use crate::network::RequestContext;
use ottla_controller::MetadataImage;

use crate::security::authorizer::{Access, Authorizer};

/// Adds the refused resources' errors to the handler's response.
pub type Patch = Box<dyn FnOnce(&mut ResponseKind) + Send>;

pub enum Gate {
    /// Run the handler on this (possibly reduced) request, then patch.
    Pass(RequestKind, Option<Patch>),
    /// Nothing to run: the answer.
    Answer(ResponseKind),
    /// No authorization rule exists for this API: refuse to serve it.
    NoRule,
}

/// A patch for responses of one kind.
macro_rules! patch {
    ($kind:ident, $f:expr) => {
        Some(
            Box::new(move |resp: &mut ::kafka_protocol::messages::ResponseKind| {
                if let ::kafka_protocol::messages::ResponseKind::$kind(r) = resp {
                    #[allow(clippy::redundant_closure_call)]
                    ($f)(r)
                }
            }) as $crate::authorize::Patch,
        )
    };
}
pub(crate) use patch;

/// Splits `items` into the allowed ones and the refused ones.
fn split<T>(items: Vec<T>, allowed: impl Fn(&T) -> bool) -> (Vec<T>, Vec<T>) {
    items.into_iter().partition(|i| allowed(i))
}

/// The gate of one request from `ctx`'s principal and host.
pub fn gate_request(broker: &Broker, ctx: &RequestContext, body: RequestKind) -> Gate {
    if broker.settings.authorizer.is_none() {
        return Gate::Pass(body, None);
    }
    let access = Arc::new(broker.access(&ctx.principal, ctx.peer.ip()));
    gate(
        &access,
        broker.settings.auto_create_topics,
        ctx.api_version,
        body,
    )
}

/// The gate of one request taken by a controller listener, on a node that
/// may run no broker: checked against `image`'s ACLs.
pub fn gate_on_controller(
    authorizer: Option<Arc<Authorizer>>,
    image: Arc<MetadataImage>,
    ctx: &RequestContext,
    body: RequestKind,
) -> Gate {
    if authorizer.is_none() {
        return Gate::Pass(body, None);
    }
    let access = Arc::new(Access::new(
        authorizer,
        image,
        &ctx.principal,
        ctx.peer.ip(),
    ));
    gate(&access, false, ctx.api_version, body)
}

fn gate(access: &Arc<Access>, auto_create_topics: bool, version: i16, body: RequestKind) -> Gate {
    use RequestKind as R;
    match body {
        R::Produce(r) => topics::produce(access, version, r),
        R::Fetch(r) => topics::fetch(access, version, r),
        R::ListOffsets(r) => topics::list_offsets(access, r),
        R::OffsetForLeaderEpoch(r) => topics::offset_for_leader_epoch(access, r),
        R::DeleteRecords(r) => topics::delete_records(access, r),
        R::Metadata(r) => metadata::metadata(access, version, auto_create_topics, r),
        R::DescribeTopicPartitions(r) => metadata::describe_topic_partitions(access, r),
        R::CreateTopics(r) => configs::create_topics(access, version, r),
        R::DeleteTopics(r) => configs::delete_topics(access, version, r),
        R::CreatePartitions(r) => configs::create_partitions(access, r),
        R::DescribeConfigs(r) => configs::describe_configs(access, r),
        R::AlterConfigs(r) => configs::alter_configs(access, r),
        R::IncrementalAlterConfigs(r) => configs::incremental_alter_configs(access, r),
        R::FindCoordinator(r) => groups::find_coordinator(access, version, r),
        R::JoinGroup(r) => groups::join_group(access, r),
        R::SyncGroup(r) => groups::sync_group(access, r),
        R::Heartbeat(r) => groups::heartbeat(access, r),
        R::LeaveGroup(r) => groups::leave_group(access, r),
        R::OffsetCommit(r) => groups::offset_commit(access, r),
        R::OffsetFetch(r) => groups::offset_fetch(access, version, r),
        R::OffsetDelete(r) => groups::offset_delete(access, r),
        R::DescribeGroups(r) => groups::describe_groups(access, r),
        R::ListGroups(r) => groups::list_groups(access, r),
        R::DeleteGroups(r) => groups::delete_groups(access, r),
        R::ConsumerGroupHeartbeat(r) => groups::consumer_group_heartbeat(access, r),
        R::ConsumerGroupDescribe(r) => groups::consumer_group_describe(access, r),
        R::ShareGroupHeartbeat(r) => share::heartbeat(access, r),
        R::ShareGroupDescribe(r) => share::describe(access, r),
        R::ShareFetch(r) => share::fetch(access, r),
        R::ShareAcknowledge(r) => share::acknowledge(access, r),
        R::DescribeShareGroupOffsets(r) => share::describe_offsets(access, r),
        R::AlterShareGroupOffsets(r) => share::alter_offsets(access, r),
        R::DeleteShareGroupOffsets(r) => share::delete_offsets(access, r),
        R::InitializeShareGroupState(r) => share::initialize_state(access, r),
        R::ReadShareGroupState(r) => share::read_state(access, r),
        R::DeleteShareGroupState(r) => share::delete_state(access, r),
        R::ReadShareGroupStateSummary(r) => share::read_state_summary(access, r),
        R::WriteShareGroupState(r) => share::write_state(access, r),
        R::InitProducerId(r) => txn::init_producer_id(access, r),
        R::AddPartitionsToTxn(r) => txn::add_partitions_to_txn(access, version, r),
        R::AddOffsetsToTxn(r) => txn::add_offsets_to_txn(access, r),
        R::EndTxn(r) => txn::end_txn(access, r),
        R::TxnOffsetCommit(r) => txn::txn_offset_commit(access, r),
        R::WriteTxnMarkers(r) => txn::write_txn_markers(access, r),
        R::DescribeProducers(r) => txn::describe_producers(access, r),
        R::DescribeTransactions(r) => txn::describe_transactions(access, r),
        R::ListTransactions(r) => txn::list_transactions(access, r),
        other => cluster::gate(access, version, other),
    }
}
