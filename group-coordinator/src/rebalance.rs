//! The classic rebalance protocol's state machine (Kafka's
//! GroupMetadataManager, classic part): preparing a rebalance, completing the
//! join phase into a new generation, distributing the leader's assignment,
//! and the timers (initial delay, rebalance timeout, pending syncs, member
//! sessions). Transitions:
//!
//! - Empty / Stable / CompletingRebalance -> PreparingRebalance: a member
//!   joins, changes its protocols, leaves or expires;
//! - PreparingRebalance -> CompletingRebalance: every member rejoined, or the
//!   rebalance timeout passed (stragglers are dropped);
//! - PreparingRebalance -> Empty: nobody is left;
//! - CompletingRebalance -> Stable: the leader's assignment is stored.

use std::collections::HashMap;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tracing::{info, warn};

use super::classic::{ClassicGroup, GroupState, JoinTimer, JoinTimerKind, SyncTimer};
use super::member::SyncResult;
use super::writer::Ctx;

impl ClassicGroup {
    /// Starts a rebalance when the state allows one, else tries to finish
    /// the join phase in progress.
    pub(super) fn maybe_prepare_rebalance_or_complete_join(&mut self, ctx: &Ctx<'_>, reason: &str) {
        if self.can_rebalance() {
            self.prepare_rebalance(ctx, reason);
        } else {
            self.maybe_complete_join_phase(ctx);
        }
    }

    pub(super) fn prepare_rebalance(&mut self, ctx: &Ctx<'_>, reason: &str) {
        // Members waiting for an assignment must rejoin instead.
        if self.state == GroupState::CompletingRebalance {
            self.reset_and_propagate_assignment(ResponseError::RebalanceInProgress);
        }
        self.pending_sync.clear();
        self.sync_timer = None;
        let initial = self.state == GroupState::Empty;
        if initial {
            let delay_ms = i64::from(ctx.config.initial_rebalance_delay_ms);
            self.join_timer = Some(JoinTimer {
                deadline: ctx.now + delay_ms,
                kind: JoinTimerKind::Initial {
                    delay_ms,
                    remaining_ms: (self.rebalance_timeout_ms() - delay_ms).max(0),
                },
            });
        }
        self.transition(GroupState::PreparingRebalance, ctx.now);
        crate::stats::rebalance_started();
        info!(group = %self.id, generation = self.generation_id, reason, "preparing to rebalance");
        if !initial {
            self.maybe_complete_join_else_schedule(ctx);
        } else if self.join_timer.is_some_and(|t| t.deadline <= ctx.now) {
            // group.initial.rebalance.delay.ms=0: the join completes now, as
            // Kafka's delayed join with no delay does, not at the next tick.
            self.on_join_timer(ctx);
        }
    }

    fn maybe_complete_join_else_schedule(&mut self, ctx: &Ctx<'_>) {
        if self.has_all_members_joined() {
            self.complete_join(ctx);
        } else {
            self.join_timer = Some(JoinTimer {
                deadline: ctx.now + self.rebalance_timeout_ms(),
                kind: JoinTimerKind::Rebalance,
            });
        }
    }

    /// Completes the join phase once everyone has rejoined, except during
    /// an initial rebalance, which only its timer completes.
    pub(super) fn maybe_complete_join_phase(&mut self, ctx: &Ctx<'_>) {
        if self.state == GroupState::PreparingRebalance
            && self.previous_state != Some(GroupState::Empty)
            && self.has_all_members_joined()
        {
            self.complete_join(ctx);
        }
    }

    /// Ends the join phase: dynamic members that did not rejoin are dropped
    /// and the next generation starts, answering every parked JoinGroup
    /// (the leader gets the members). An emptied group is stored as such.
    pub(super) fn complete_join(&mut self, ctx: &Ctx<'_>) {
        self.join_timer = None;
        let absent: Vec<String> = self
            .members()
            .filter(|m| !m.is_awaiting_join() && m.group_instance_id.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in &absent {
            self.remove(id);
        }
        if !absent.is_empty() {
            info!(group = %self.id, members = ?absent, "removed members that did not rejoin");
        }
        if !self.maybe_elect_new_joined_leader() && self.members().next().is_some() {
            // Only static members remain and none rejoined: wait another
            // round for them to rejoin or for their sessions to expire.
            self.join_timer = Some(JoinTimer {
                deadline: ctx.now + self.rebalance_timeout_ms(),
                kind: JoinTimerKind::Rebalance,
            });
            return;
        }
        self.init_next_generation(ctx.now);
        if self.state == GroupState::Empty {
            info!(group = %self.id, generation = self.generation_id, "group is now empty");
            // Nothing waits on this write: if it is lost, the previous
            // generation comes back on reload and its members time out.
            let record = self.metadata_record(&HashMap::new());
            if let Err(e) = ctx.writer.append(&[record]) {
                warn!(group = %self.id, error = %e, "could not store the empty group");
            }
            return;
        }
        info!(group = %self.id, generation = self.generation_id, members = self.members.len(), "group stabilizing");
        let members = self.joined_members();
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let list = if self.is_leader(&id) {
                members.clone()
            } else {
                Vec::new()
            };
            let result = self.join_result(&id, list);
            let m = self.members.get_mut(&id).expect("listed above");
            m.complete_join(result);
            m.heartbeat_deadline = Some(ctx.now + i64::from(m.session_timeout_ms));
            m.is_new = false;
            self.pending_sync.insert(id);
        }
        self.sync_timer = Some(SyncTimer {
            deadline: ctx.now + self.rebalance_timeout_ms(),
            generation: self.generation_id,
        });
    }

    fn init_next_generation(&mut self, now: i64) {
        self.generation_id += 1;
        if self.members.is_empty() {
            self.protocol_name = None;
            self.subscribed_topics = self.compute_subscribed_topics();
            self.transition(GroupState::Empty, now);
        } else {
            self.protocol_name = self.select_protocol();
            self.subscribed_topics = self.compute_subscribed_topics();
            self.transition(GroupState::CompletingRebalance, now);
        }
        self.pending_sync.clear();
    }

    /// Clears every assignment and fails parked SyncGroups with `error`.
    pub(super) fn reset_and_propagate_assignment(&mut self, error: ResponseError) {
        for m in self.members.values_mut() {
            m.assignment = Bytes::new();
        }
        self.propagate_assignment(Some(error), None);
    }

    /// Installs the leader's assignment and answers parked SyncGroups.
    pub(super) fn set_and_propagate_assignment(
        &mut self,
        assignment: &HashMap<String, Bytes>,
        now: i64,
    ) {
        for m in self.members.values_mut() {
            m.assignment = assignment.get(&m.id).cloned().unwrap_or_default();
        }
        self.propagate_assignment(None, Some(now));
    }

    /// Answers parked SyncGroups; on success their sessions restart at `now`.
    fn propagate_assignment(&mut self, error: Option<ResponseError>, now: Option<i64>) {
        let (protocol_type, protocol_name) = match error {
            None => (self.protocol_type.clone(), self.protocol_name.clone()),
            Some(_) => (None, None),
        };
        for m in self.members.values_mut() {
            let answered = m.complete_sync(SyncResult {
                error: error.map_or(0, |e| e.code()),
                protocol_type: protocol_type.clone(),
                protocol_name: protocol_name.clone(),
                assignment: m.assignment.clone(),
            });
            if let (true, Some(now)) = (answered, now) {
                m.heartbeat_deadline = Some(now + i64::from(m.session_timeout_ms));
            }
        }
    }

    /// A member leaves (LeaveGroup) or fails (session expiry): its parked
    /// requests are answered and the group rebalances without it.
    pub(super) fn remove_member_and_update(&mut self, id: &str, ctx: &Ctx<'_>, reason: &str) {
        self.remove(id);
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.maybe_prepare_rebalance_or_complete_join(ctx, reason);
            }
            GroupState::PreparingRebalance if self.has_all_members_joined() => {
                self.complete_join(ctx)
            }
            _ => {}
        }
    }

    pub(super) fn reschedule_heartbeat(&mut self, id: &str, now: i64) {
        if let Some(m) = self.members.get_mut(id) {
            m.heartbeat_deadline = Some(now + i64::from(m.session_timeout_ms));
        }
    }

    /// Marks a member as synced; once all are, the sync timer stops.
    pub(super) fn remove_pending_sync(&mut self, id: &str) {
        self.pending_sync.remove(id);
        if self.pending_sync.is_empty() {
            self.sync_timer = None;
        }
    }

    /// Fires whatever timers are due at `ctx.now`.
    pub(super) fn on_tick(&mut self, ctx: &Ctx<'_>) {
        self.expire_pending_members(ctx);
        self.expire_sessions(ctx);
        if self.join_timer.is_some_and(|t| t.deadline <= ctx.now) {
            self.on_join_timer(ctx);
        }
        if let Some(t) = self.sync_timer.filter(|t| t.deadline <= ctx.now) {
            self.on_sync_timer(ctx, t.generation);
        }
    }

    /// Member ids handed out with MEMBER_ID_REQUIRED that never came back.
    fn expire_pending_members(&mut self, ctx: &Ctx<'_>) {
        let expired: Vec<String> = self
            .pending_join
            .iter()
            .filter(|(_, &deadline)| deadline <= ctx.now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            info!(group = %self.id, member = %id, "pending member expired");
            self.remove(&id);
            if self.state == GroupState::PreparingRebalance && self.has_all_members_joined() {
                self.complete_join(ctx);
            }
        }
    }

    fn expire_sessions(&mut self, ctx: &Ctx<'_>) {
        let due: Vec<String> = self
            .members()
            .filter(|m| m.heartbeat_deadline.is_some_and(|d| d <= ctx.now))
            .map(|m| m.id.clone())
            .collect();
        for id in due {
            let Some(m) = self.members.get_mut(&id) else {
                continue;
            };
            if m.has_satisfied_heartbeat() {
                // Parked in a rebalance; the next rebalance step reschedules.
                m.heartbeat_deadline = None;
                continue;
            }
            info!(group = %self.id, member = %id, "member session expired");
            self.remove_member_and_update(&id, ctx, "member session expired");
        }
    }

    fn on_join_timer(&mut self, ctx: &Ctx<'_>) {
        let Some(timer) = self.join_timer.take() else {
            return;
        };
        match timer.kind {
            JoinTimerKind::Initial {
                delay_ms,
                remaining_ms,
            } if self.new_member_added && remaining_ms != 0 => {
                // Members are still arriving: wait a little longer.
                self.new_member_added = false;
                let next_delay = i64::from(ctx.config.initial_rebalance_delay_ms).min(remaining_ms);
                self.join_timer = Some(JoinTimer {
                    deadline: ctx.now + next_delay,
                    kind: JoinTimerKind::Initial {
                        delay_ms: next_delay,
                        remaining_ms: (remaining_ms - delay_ms).max(0),
                    },
                });
            }
            _ => self.complete_join(ctx),
        }
    }

    /// Members that never sent SyncGroup for this generation are removed.
    fn on_sync_timer(&mut self, ctx: &Ctx<'_>, generation: i32) {
        self.sync_timer = None;
        if generation != self.generation_id
            || !matches!(
                self.state,
                GroupState::CompletingRebalance | GroupState::Stable
            )
            || self.pending_sync.is_empty()
        {
            return;
        }
        let missing: Vec<String> = self.pending_sync.iter().cloned().collect();
        for id in &missing {
            self.remove(id);
        }
        self.prepare_rebalance(
            ctx,
            &format!("removing {missing:?} on pending sync request expiration"),
        );
    }
}
