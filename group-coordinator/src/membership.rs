//! The membership requests of the classic protocol: JoinGroup, SyncGroup,
//! Heartbeat and LeaveGroup, applied to one shard's groups. JoinGroup and
//! SyncGroup may park until a rebalance step answers them.

use std::collections::HashMap;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::sync::oneshot;
use tracing::{info, warn};
use uuid::Uuid;

use super::classic::{ClassicGroup, GroupState};
use super::config::NEW_MEMBER_JOIN_TIMEOUT_MS;
use super::member::{JoinResult, Member, Protocol, SyncResult};
use super::writer::Ctx;

/// An answer now, or a receiver for one a rebalance step will send.
pub enum Reply<T> {
    Ready(T),
    Parked(oneshot::Receiver<T>),
}

#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub group_id: String,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<Protocol>,
    /// JoinGroup v4+: a new dynamic member first gets MEMBER_ID_REQUIRED.
    pub require_known_member_id: bool,
    /// JoinGroup v9+ (KIP-814): a rejoining static leader may skip assigning.
    pub supports_skip_assignment: bool,
}

#[derive(Debug, Clone)]
pub struct SyncRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

#[derive(Debug, Clone)]
pub struct LeavingMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

pub fn join(
    groups: &mut HashMap<String, ClassicGroup>,
    req: JoinRequest,
    ctx: &Ctx<'_>,
) -> Reply<JoinResult> {
    let is_unknown = req.member_id.is_empty();
    if !groups.contains_key(&req.group_id) {
        // Only a new member creates a group; a known one lost it.
        if !is_unknown {
            return Reply::Ready(JoinResult::error(
                &req.member_id,
                ResponseError::UnknownMemberId,
            ));
        }
        let group = ClassicGroup::new(&req.group_id, ctx.now);
        if let Err(e) = ctx.writer.append(&[group.created_record()]) {
            return Reply::Ready(JoinResult::error("", e));
        }
        groups.insert(req.group_id.clone(), group);
    }
    let group = groups
        .get_mut(&req.group_id)
        .expect("present or just created");
    if !accepts_joining_member(group, &req.member_id, ctx.config.max_group_size) {
        group.remove(&req.member_id);
        return Reply::Ready(JoinResult::error("", ResponseError::GroupMaxSizeReached));
    }
    if is_unknown {
        join_new_member(group, req, ctx)
    } else {
        join_existing_member(group, req, ctx)
    }
}

/// `group.max.size`: counted on parked joins while preparing a rebalance
/// (the member count may be stale then), on members otherwise.
fn accepts_joining_member(group: &ClassicGroup, member_id: &str, max: usize) -> bool {
    let member = group.member(member_id);
    match group.state() {
        GroupState::Empty => true,
        GroupState::PreparingRebalance => {
            member.is_some_and(Member::is_awaiting_join)
                || group.members().filter(|m| m.is_awaiting_join()).count() < max
        }
        GroupState::CompletingRebalance | GroupState::Stable => {
            member.is_some() || group.members().count() < max
        }
    }
}

fn join_new_member(group: &mut ClassicGroup, req: JoinRequest, ctx: &Ctx<'_>) -> Reply<JoinResult> {
    if !group.supports_protocols(&req.protocol_type, &req.protocols) {
        return Reply::Ready(JoinResult::error(
            "",
            ResponseError::InconsistentGroupProtocol,
        ));
    }
    // Kafka's member ids: `<group.instance.id or client.id>-<uuid>`.
    let prefix = req.group_instance_id.as_deref().unwrap_or(&req.client_id);
    let new_id = format!("{prefix}-{}", Uuid::new_v4());
    match req.group_instance_id.clone() {
        Some(instance) => match group.static_member_id(&instance).map(str::to_string) {
            Some(old_id) => update_static_member(group, &req, &instance, &old_id, &new_id, ctx),
            None => add_member_then_rebalance(group, req, new_id, ctx),
        },
        None if req.require_known_member_id => {
            // The client must rejoin with this id; until then it is pending.
            let deadline = ctx.now + i64::from(req.session_timeout_ms);
            group.pending_join.insert(new_id.clone(), deadline);
            Reply::Ready(JoinResult::error(&new_id, ResponseError::MemberIdRequired))
        }
        None => add_member_then_rebalance(group, req, new_id, ctx),
    }
}

fn join_existing_member(
    group: &mut ClassicGroup,
    req: JoinRequest,
    ctx: &Ctx<'_>,
) -> Reply<JoinResult> {
    let id = req.member_id.clone();
    if !group.supports_protocols(&req.protocol_type, &req.protocols) {
        return Reply::Ready(JoinResult::error(
            &id,
            ResponseError::InconsistentGroupProtocol,
        ));
    }
    if group.pending_join.contains_key(&id) {
        if req.group_instance_id.is_some() {
            // Pending ids are only handed to dynamic members.
            return Reply::Ready(JoinResult::error(&id, ResponseError::UnknownServerError));
        }
        return add_member_then_rebalance(group, req, id, ctx);
    }
    if let Err(e) = group.validate_member(&id, req.group_instance_id.as_deref()) {
        return Reply::Ready(JoinResult::error(&id, e));
    }
    let same_protocols = group
        .member(&id)
        .is_some_and(|m| m.protocols == req.protocols);
    match group.state() {
        GroupState::PreparingRebalance => update_member_then_rebalance(group, req, ctx),
        // A retry of a JoinGroup whose answer was lost: answer it again.
        GroupState::CompletingRebalance if same_protocols => {
            let members = if group.is_leader(&id) {
                group.joined_members()
            } else {
                Vec::new()
            };
            Reply::Ready(group.join_result(&id, members))
        }
        GroupState::CompletingRebalance => update_member_then_rebalance(group, req, ctx),
        // The leader rejoins to trigger a rebalance (e.g. topics changed).
        GroupState::Stable if group.is_leader(&id) || !same_protocols => {
            update_member_then_rebalance(group, req, ctx)
        }
        GroupState::Stable => Reply::Ready(group.join_result(&id, Vec::new())),
        GroupState::Empty => Reply::Ready(JoinResult::error(&id, ResponseError::UnknownMemberId)),
    }
}

fn add_member_then_rebalance(
    group: &mut ClassicGroup,
    req: JoinRequest,
    id: String,
    ctx: &Ctx<'_>,
) -> Reply<JoinResult> {
    let mut member = Member {
        id,
        group_instance_id: req.group_instance_id,
        client_id: req.client_id,
        client_host: req.client_host,
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        session_timeout_ms: req.session_timeout_ms,
        protocol_type: req.protocol_type,
        protocols: req.protocols,
        assignment: Bytes::new(),
        join_waiter: None,
        sync_waiter: None,
        is_new: true,
        // A new member cannot heartbeat before its first answer; if its
        // client gave up on the parked JoinGroup, this removes it.
        heartbeat_deadline: Some(ctx.now + NEW_MEMBER_JOIN_TIMEOUT_MS),
    };
    let rx = member.await_join();
    if group.state() == GroupState::PreparingRebalance
        && group.previous_state == Some(GroupState::Empty)
    {
        // Extends the initial rebalance delay.
        group.new_member_added = true;
    }
    let reason = format!("adding new member {}", member.id);
    group.add(member);
    group.maybe_prepare_rebalance_or_complete_join(ctx, &reason);
    Reply::Parked(rx)
}

fn update_member_then_rebalance(
    group: &mut ClassicGroup,
    req: JoinRequest,
    ctx: &Ctx<'_>,
) -> Reply<JoinResult> {
    let rx = update_member(group, &req.member_id, &req);
    group.maybe_prepare_rebalance_or_complete_join(
        ctx,
        &format!("member {} rejoined", req.member_id),
    );
    Reply::Parked(rx)
}

/// Takes the request's protocols and timeouts and parks the JoinGroup.
fn update_member(
    group: &mut ClassicGroup,
    id: &str,
    req: &JoinRequest,
) -> oneshot::Receiver<JoinResult> {
    let m = group.members.get_mut(id).expect("validated member");
    m.protocols.clone_from(&req.protocols);
    m.rebalance_timeout_ms = req.rebalance_timeout_ms;
    m.session_timeout_ms = req.session_timeout_ms;
    m.await_join()
}

/// A static member rejoins with an unknown member id (e.g. after a restart):
/// it takes over its instance's membership under a new member id. In a
/// Stable group whose protocol choice does not change, no rebalance happens.
fn update_static_member(
    group: &mut ClassicGroup,
    req: &JoinRequest,
    instance: &str,
    old_id: &str,
    new_id: &str,
    ctx: &Ctx<'_>,
) -> Reply<JoinResult> {
    let current_leader = group.leader().map(str::to_string);
    group.replace_static_member(instance, old_id, new_id);
    group.reschedule_heartbeat(new_id, ctx.now);
    match group.state() {
        GroupState::Stable => {
            let m = group.members.get_mut(new_id).expect("just replaced");
            let previous = (
                m.protocols.clone(),
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
            );
            m.protocols.clone_from(&req.protocols);
            m.rebalance_timeout_ms = req.rebalance_timeout_ms;
            m.session_timeout_ms = req.session_timeout_ms;
            if group.select_protocol().as_deref() != group.protocol_name() {
                let rx = group.members.get_mut(new_id).expect("present").await_join();
                group.maybe_prepare_rebalance_or_complete_join(
                    ctx,
                    &format!("static member {instance} changed protocols"),
                );
                return Reply::Parked(rx);
            }
            let record = group.metadata_record(&group.current_assignment());
            if let Err(e) = ctx.writer.append(&[record]) {
                warn!(group = %group.id, instance, error = %e, "could not store the new static member id; reverting");
                let m = group.members.get_mut(new_id).expect("present");
                (m.protocols, m.rebalance_timeout_ms, m.session_timeout_ms) = previous;
                group.replace_static_member(instance, new_id, old_id);
                group.reschedule_heartbeat(old_id, ctx.now);
                let mut r = group.join_result("", Vec::new());
                r.error = e.code();
                r.leader = current_leader.unwrap_or_default();
                return Reply::Ready(r);
            }
            info!(group = %group.id, instance, member = new_id, "static member rejoined without a rebalance");
            if req.supports_skip_assignment {
                // The leader gets the members but keeps the current assignment.
                let is_leader = group.is_leader(new_id);
                let members = if is_leader {
                    group.joined_members()
                } else {
                    Vec::new()
                };
                let mut r = group.join_result(new_id, members);
                r.skip_assignment = is_leader;
                Reply::Ready(r)
            } else {
                // Older clients would reassign if they saw themselves as
                // leader, so they are told the previous leader id.
                let mut r = group.join_result(new_id, Vec::new());
                r.leader = current_leader.unwrap_or_default();
                Reply::Ready(r)
            }
        }
        GroupState::CompletingRebalance => {
            // The leader may be assigning to the old member id: start over.
            let rx = update_member(group, new_id, req);
            group.prepare_rebalance(ctx, &format!("static member {instance} rejoined"));
            Reply::Parked(rx)
        }
        GroupState::PreparingRebalance | GroupState::Empty => {
            let rx = update_member(group, new_id, req);
            group.maybe_complete_join_phase(ctx);
            Reply::Parked(rx)
        }
    }
}

pub fn sync(
    groups: &mut HashMap<String, ClassicGroup>,
    req: SyncRequest,
    ctx: &Ctx<'_>,
) -> Reply<SyncResult> {
    let Some(group) = groups.get_mut(&req.group_id).filter(|g| !g.is_empty()) else {
        return Reply::Ready(SyncResult::error(ResponseError::UnknownMemberId));
    };
    if let Err(e) = validate_sync(group, &req) {
        return Reply::Ready(SyncResult::error(e));
    }
    match group.state() {
        GroupState::CompletingRebalance => {
            let rx = group
                .members
                .get_mut(&req.member_id)
                .expect("validated")
                .await_sync();
            group.remove_pending_sync(&req.member_id);
            if group.is_leader(&req.member_id) {
                store_assignment(group, req.assignments, ctx);
            }
            Reply::Parked(rx)
        }
        GroupState::Stable => {
            group.remove_pending_sync(&req.member_id);
            let assignment = group
                .member(&req.member_id)
                .map(|m| m.assignment.clone())
                .unwrap_or_default();
            Reply::Ready(SyncResult {
                error: 0,
                protocol_type: group.protocol_type.clone(),
                protocol_name: group.protocol_name.clone(),
                assignment,
            })
        }
        GroupState::PreparingRebalance | GroupState::Empty => {
            Reply::Ready(SyncResult::error(ResponseError::RebalanceInProgress))
        }
    }
}

fn validate_sync(group: &ClassicGroup, req: &SyncRequest) -> Result<(), ResponseError> {
    group.validate_member(&req.member_id, req.group_instance_id.as_deref())?;
    if req.generation_id != group.generation_id() {
        return Err(ResponseError::IllegalGeneration);
    }
    let inconsistent = |requested: Option<&str>, current: Option<&str>| matches!((requested, current), (Some(r), Some(c)) if r != c);
    if inconsistent(req.protocol_type.as_deref(), group.protocol_type())
        || inconsistent(req.protocol_name.as_deref(), group.protocol_name())
    {
        return Err(ResponseError::InconsistentGroupProtocol);
    }
    Ok(())
}

/// Stores the leader's assignment; once it is in the log, every parked
/// SyncGroup gets its part and the group is Stable.
fn store_assignment(group: &mut ClassicGroup, assignments: Vec<(String, Bytes)>, ctx: &Ctx<'_>) {
    let mut assignment: HashMap<String, Bytes> = assignments.into_iter().collect();
    for m in group.members() {
        if !assignment.contains_key(&m.id) {
            warn!(group = %group.id, member = %m.id, "the leader sent no assignment for a member; it gets an empty one");
        }
    }
    for id in group.members.keys() {
        assignment.entry(id.clone()).or_default();
    }
    match ctx.writer.append(&[group.metadata_record(&assignment)]) {
        Ok(()) => {
            group.set_and_propagate_assignment(&assignment, ctx.now);
            group.transition(GroupState::Stable, ctx.now);
            info!(group = %group.id, generation = group.generation_id(), "group is stable");
        }
        Err(e) => {
            group.reset_and_propagate_assignment(e);
            group.maybe_prepare_rebalance_or_complete_join(
                ctx,
                &format!("error {e} storing the assignment"),
            );
        }
    }
}

pub fn heartbeat(
    groups: &mut HashMap<String, ClassicGroup>,
    group_id: &str,
    member_id: &str,
    instance_id: Option<&str>,
    generation: i32,
    now: i64,
) -> Result<(), ResponseError> {
    let group = groups
        .get_mut(group_id)
        .ok_or(ResponseError::UnknownMemberId)?;
    group.validate_member(member_id, instance_id)?;
    if generation != group.generation_id() {
        return Err(ResponseError::IllegalGeneration);
    }
    match group.state() {
        GroupState::Empty => Err(ResponseError::UnknownMemberId),
        GroupState::PreparingRebalance => {
            group.reschedule_heartbeat(member_id, now);
            Err(ResponseError::RebalanceInProgress)
        }
        // Heartbeats may start right after the JoinGroup answer.
        GroupState::CompletingRebalance | GroupState::Stable => {
            group.reschedule_heartbeat(member_id, now);
            Ok(())
        }
    }
}

/// Removes members (by member id, or by instance id alone as admin tools
/// do). Returns one error code per member, in order.
pub fn leave(
    groups: &mut HashMap<String, ClassicGroup>,
    group_id: &str,
    members: &[LeavingMember],
    ctx: &Ctx<'_>,
) -> Vec<i16> {
    let Some(group) = groups.get_mut(group_id) else {
        return vec![ResponseError::UnknownMemberId.code(); members.len()];
    };
    let mut any_left = false;
    let codes = members
        .iter()
        .map(|m| {
            let result = if m.member_id.is_empty() {
                match m
                    .group_instance_id
                    .as_deref()
                    .and_then(|i| group.static_member_id(i))
                {
                    Some(id) => {
                        let id = id.to_string();
                        group.remove(&id);
                        Ok(())
                    }
                    None => Err(ResponseError::UnknownMemberId),
                }
            } else if group.pending_join.contains_key(&m.member_id) {
                group.remove(&m.member_id);
                Ok(())
            } else {
                group
                    .validate_member(&m.member_id, m.group_instance_id.as_deref())
                    .map(|()| group.remove(&m.member_id))
            };
            any_left |= result.is_ok();
            result.err().map_or(0, |e| e.code())
        })
        .collect();
    if any_left {
        info!(group = group_id, "members left the group");
        match group.state() {
            GroupState::Stable | GroupState::CompletingRebalance => {
                group.maybe_prepare_rebalance_or_complete_join(ctx, "members left the group");
            }
            GroupState::PreparingRebalance => group.maybe_complete_join_phase(ctx),
            GroupState::Empty => {}
        }
    }
    codes
}
