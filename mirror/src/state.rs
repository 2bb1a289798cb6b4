//! The mirror partition state machine, with exactly the valid-from rules of
//! the KIP-1279 seeds (`mirror-partition-states.txt`):
//!
//! | Target | Valid from |
//! |--------|------------|
//! | UNKNOWN | nothing: it is the absence of state, where a partition starts |
//! | PREPARING | UNKNOWN, MIRRORING, STOPPED |
//! | MIRRORING | PREPARING, PAUSED |
//! | PAUSING | MIRRORING |
//! | PAUSED | PAUSING |
//! | STOPPING | MIRRORING, PAUSED, FAILED |
//! | STOPPED | STOPPING |
//! | FAILED | any state (FAILED included: a new error replaces the old one) |
//!
//! STOPPING from FAILED is not in the seeds' STOPPING bullet but in their
//! FAILED one: a failed partition is recovered by removing the topic from the
//! mirror (which runs the STOPPING handler, "safe operations on a failed
//! partition") and adding it back. Without it FAILED would be a dead end.
//!
//! A transition to the same state is refused (except FAILED): a leader that
//! finds a partition PREPARING or STOPPING resumes that state's work without
//! a transition.

use std::fmt;

use thiserror::Error;

use crate::name::RequestedMirroring;

/// A mirror partition's state. The discriminants are the wire values used in
/// ReadMirrorStates, WriteMirrorStates, DescribeMirrors and `__mirror_state`
/// (the KIP-1279 prototype's numbering; 1 is reserved for its EPOCH_FENCING).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i8)]
pub enum MirrorPartitionState {
    Unknown = 16,
    Preparing = 0,
    Mirroring = 2,
    Pausing = 3,
    Paused = 4,
    Stopping = 5,
    Stopped = 6,
    Failed = 7,
}

use MirrorPartitionState::*;

/// Which states a state may be entered from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValidFrom {
    Nothing,
    Only(&'static [MirrorPartitionState]),
    Any,
}

impl MirrorPartitionState {
    pub const ALL: [MirrorPartitionState; 8] = [
        Unknown, Preparing, Mirroring, Pausing, Paused, Stopping, Stopped, Failed,
    ];

    /// Kafka's upper-case name, as the CLI and logs show it.
    pub fn name(self) -> &'static str {
        match self {
            Unknown => "UNKNOWN",
            Preparing => "PREPARING",
            Mirroring => "MIRRORING",
            Pausing => "PAUSING",
            Paused => "PAUSED",
            Stopping => "STOPPING",
            Stopped => "STOPPED",
            Failed => "FAILED",
        }
    }

    pub fn wire_value(self) -> i8 {
        self as i8
    }

    pub fn from_wire_value(value: i8) -> Result<Self, UnknownStateValue> {
        Self::ALL
            .into_iter()
            .find(|s| s.wire_value() == value)
            .ok_or(UnknownStateValue(value))
    }

    pub fn valid_from(self) -> ValidFrom {
        match self {
            Unknown => ValidFrom::Nothing,
            Preparing => ValidFrom::Only(&[Unknown, Mirroring, Stopped]),
            Mirroring => ValidFrom::Only(&[Preparing, Paused]),
            Pausing => ValidFrom::Only(&[Mirroring]),
            Paused => ValidFrom::Only(&[Pausing]),
            Stopping => ValidFrom::Only(&[Mirroring, Paused, Failed]),
            Stopped => ValidFrom::Only(&[Stopping]),
            Failed => ValidFrom::Any,
        }
    }

    pub fn can_move_to(self, target: Self) -> bool {
        match target.valid_from() {
            ValidFrom::Nothing => false,
            ValidFrom::Only(sources) => sources.contains(&self),
            ValidFrom::Any => true,
        }
    }

    /// Checks `self -> target` and returns `target` if it is valid.
    pub fn transition(self, target: Self) -> Result<Self, InvalidTransition> {
        if self.can_move_to(target) {
            Ok(target)
        } else {
            Err(InvalidTransition {
                from: self,
                to: target,
            })
        }
    }

    /// Clients may produce only once the partition has stopped mirroring.
    pub fn is_read_only(self) -> bool {
        self != Stopped
    }

    /// Only a MIRRORING partition has a mirror fetcher; only its topic gets
    /// configs, group offsets and ACLs synced (PAUSED gets none).
    pub fn is_mirroring(self) -> bool {
        self == Mirroring
    }
}

impl fmt::Display for MirrorPartitionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A wire or record value that is no known state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("{0} is not a mirror partition state")]
pub struct UnknownStateValue(pub i8);

/// A refused transition, saying which and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub struct InvalidTransition {
    pub from: MirrorPartitionState,
    pub to: MirrorPartitionState,
}

impl fmt::Display for InvalidTransition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid mirror partition state transition {} -> {}: ",
            self.from, self.to
        )?;
        match self.to.valid_from() {
            ValidFrom::Nothing => write!(f, "{} is never entered by a transition", self.to),
            ValidFrom::Any => write!(f, "{} is valid from any state", self.to),
            ValidFrom::Only(sources) => {
                let names: Vec<&str> = sources.iter().map(|s| s.name()).collect();
                write!(f, "{} is valid only from {}", self.to, names.join(", "))
            }
        }
    }
}

/// One partition's current and previous state; a refused transition leaves
/// both unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionStatus {
    pub state: MirrorPartitionState,
    pub previous: MirrorPartitionState,
}

impl Default for PartitionStatus {
    fn default() -> Self {
        Self {
            state: Unknown,
            previous: Unknown,
        }
    }
}

impl PartitionStatus {
    pub fn move_to(&mut self, target: MirrorPartitionState) -> Result<(), InvalidTransition> {
        let next = self.state.transition(target)?;
        self.previous = self.state;
        self.state = next;
        Ok(())
    }
}

/// What a partition's leader does next, from its state and what the operator
/// asked in `mirror.name`. The driver runs the step's work; which states each
/// step enters is [`NextStep::path`], checked against the valid-from table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextStep {
    /// PREPARING's work (align the log with the source), then MIRRORING.
    Prepare,
    /// Fetch from the source until the request changes.
    Fetch,
    /// Through PAUSING to PAUSED (a PAUSING partition finishes the pause
    /// whatever is asked now; PAUSED then resumes if asked).
    Pause,
    /// PAUSED back to MIRRORING.
    Resume,
    /// Removed before it ever mirrored here: through the states the seeds
    /// allow to where STOPPING may start, without truncating or fetching.
    PassThrough,
    /// STOPPING's work (failover), then STOPPED and writable.
    Stop,
    /// Nothing until the request changes: STOPPED and removed, PAUSED and
    /// paused, FAILED until removed.
    Wait,
}

impl NextStep {
    /// The states the step enters, in order. A leader that finds the
    /// partition in the step's first state resumes that state's work, so
    /// that state is not entered again.
    pub fn path(self, from: MirrorPartitionState) -> &'static [MirrorPartitionState] {
        let full: &'static [MirrorPartitionState] = match self {
            Self::Prepare | Self::PassThrough => &[Preparing, Mirroring],
            Self::Pause => &[Pausing, Paused],
            Self::Resume => &[Mirroring],
            Self::Stop => &[Stopping, Stopped],
            Self::Fetch | Self::Wait => &[],
        };
        match full.split_first() {
            Some((first, rest)) if *first == from => rest,
            _ => full,
        }
    }
}

/// The next step of a partition in `state` when `requested` is asked.
pub fn next_step(state: MirrorPartitionState, requested: RequestedMirroring) -> NextStep {
    use RequestedMirroring::{Mirror, Pause, Remove};
    match (state, requested) {
        (Mirroring, Mirror) => NextStep::Fetch,
        (Mirroring, Pause) | (Pausing, _) => NextStep::Pause,
        (Paused, Mirror) => NextStep::Resume,
        (Unknown | Stopped, Mirror | Pause) | (Preparing, _) => NextStep::Prepare,
        (Unknown, Remove) => NextStep::PassThrough,
        (Mirroring | Paused | Stopping | Failed, Remove) | (Stopping, _) => NextStep::Stop,
        (Stopped, Remove) | (Paused, Pause) | (Failed, _) => NextStep::Wait,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seeds' rules written out as pairs, independently of `valid_from`.
    const VALID: &[(MirrorPartitionState, MirrorPartitionState)] = &[
        (Unknown, Preparing),
        (Mirroring, Preparing),
        (Stopped, Preparing),
        (Preparing, Mirroring),
        (Paused, Mirroring),
        (Mirroring, Pausing),
        (Pausing, Paused),
        (Mirroring, Stopping),
        (Paused, Stopping),
        (Failed, Stopping),
        (Stopping, Stopped),
        (Unknown, Failed),
        (Preparing, Failed),
        (Mirroring, Failed),
        (Pausing, Failed),
        (Paused, Failed),
        (Stopping, Failed),
        (Stopped, Failed),
        (Failed, Failed),
    ];

    #[test]
    fn exactly_the_seed_transitions_are_valid() {
        for from in MirrorPartitionState::ALL {
            for to in MirrorPartitionState::ALL {
                let expected = VALID.contains(&(from, to));
                assert_eq!(from.can_move_to(to), expected, "{from} -> {to}");
                assert_eq!(from.transition(to).is_ok(), expected, "{from} -> {to}");
            }
        }
    }

    #[test]
    fn the_workflows_of_the_seeds_are_paths() {
        let start = [Unknown, Preparing, Mirroring];
        let pause_resume = [Mirroring, Pausing, Paused, Mirroring];
        let failover = [Mirroring, Stopping, Stopped];
        let failback = [Stopped, Preparing, Mirroring];
        let new_leader = [Mirroring, Preparing, Mirroring];
        let recover = [Mirroring, Failed, Stopping, Stopped, Preparing];
        for path in [
            &start[..],
            &pause_resume,
            &failover,
            &failback,
            &new_leader,
            &recover,
        ] {
            let mut status = PartitionStatus {
                state: path[0],
                previous: Unknown,
            };
            for &next in &path[1..] {
                status.move_to(next).unwrap();
            }
        }
    }

    #[test]
    fn a_refused_transition_says_which_and_is_not_applied() {
        let mut status = PartitionStatus {
            state: Paused,
            previous: Pausing,
        };
        let err = status.move_to(Pausing).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid mirror partition state transition PAUSED -> PAUSING: \
             PAUSING is valid only from MIRRORING"
        );
        assert_eq!(
            status,
            PartitionStatus {
                state: Paused,
                previous: Pausing
            }
        );
        let err = Stopped.transition(Unknown).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid mirror partition state transition STOPPED -> UNKNOWN: \
             UNKNOWN is never entered by a transition"
        );
        // Built by hand (the fields are public), it still prints.
        let odd = InvalidTransition {
            from: Stopped,
            to: Failed,
        };
        assert!(odd.to_string().ends_with("FAILED is valid from any state"));
    }

    #[test]
    fn a_move_records_the_previous_state() {
        let mut status = PartitionStatus::default();
        status.move_to(Preparing).unwrap();
        status.move_to(Mirroring).unwrap();
        assert_eq!(
            status,
            PartitionStatus {
                state: Mirroring,
                previous: Preparing
            }
        );
    }

    #[test]
    fn wire_values_round_trip_and_match_the_protocol_docs() {
        for state in MirrorPartitionState::ALL {
            assert_eq!(
                MirrorPartitionState::from_wire_value(state.wire_value()),
                Ok(state)
            );
        }
        assert_eq!(
            Unknown.wire_value(),
            ottla_protocol::mirror::states::UNKNOWN_STATE
        );
        assert_eq!(Preparing.wire_value(), 0);
        assert_eq!(Failed.wire_value(), 7);
        assert_eq!(
            MirrorPartitionState::from_wire_value(1),
            Err(UnknownStateValue(1))
        );
    }

    #[test]
    fn only_stopped_is_writable_and_only_mirroring_fetches() {
        for state in MirrorPartitionState::ALL {
            assert_eq!(state.is_read_only(), state != Stopped);
            assert_eq!(state.is_mirroring(), state == Mirroring);
        }
    }

    const REQUESTS: [RequestedMirroring; 3] = [
        RequestedMirroring::Mirror,
        RequestedMirroring::Pause,
        RequestedMirroring::Remove,
    ];

    #[test]
    fn every_step_enters_only_valid_states() {
        for state in MirrorPartitionState::ALL {
            for requested in REQUESTS {
                let step = next_step(state, requested);
                let mut at = state;
                for &next in step.path(state) {
                    assert!(
                        at.can_move_to(next),
                        "{state} asked {requested:?}: {step:?} moves {at} -> {next}"
                    );
                    at = next;
                }
            }
        }
    }

    /// Whatever the state, a request settles within a few steps into
    /// fetching or waiting, in the state the request means.
    #[test]
    fn every_request_settles() {
        for start in MirrorPartitionState::ALL {
            for requested in REQUESTS {
                let mut state = start;
                let mut steps = Vec::new();
                loop {
                    let step = next_step(state, requested);
                    steps.push(step);
                    if matches!(step, NextStep::Fetch | NextStep::Wait) {
                        break;
                    }
                    assert!(
                        steps.len() < 4,
                        "{start} asked {requested:?} loops: {steps:?}"
                    );
                    state = *step.path(state).last().unwrap_or(&state);
                }
                let settled = match requested {
                    RequestedMirroring::Mirror => [Mirroring, Failed],
                    RequestedMirroring::Pause => [Paused, Failed],
                    RequestedMirroring::Remove => [Stopped, Stopped],
                };
                assert!(
                    settled.contains(&state),
                    "{start} asked {requested:?} settles in {state} after {steps:?}"
                );
            }
        }
    }

    #[test]
    fn steps_resume_the_state_they_find() {
        assert_eq!(NextStep::Prepare.path(Preparing), &[Mirroring]);
        assert_eq!(NextStep::Prepare.path(Stopped), &[Preparing, Mirroring]);
        assert_eq!(NextStep::Stop.path(Stopping), &[Stopped]);
        assert_eq!(NextStep::Stop.path(Failed), &[Stopping, Stopped]);
        assert_eq!(NextStep::Pause.path(Pausing), &[Paused]);
        assert_eq!(
            next_step(Pausing, RequestedMirroring::Mirror),
            NextStep::Pause,
            "a pause under way finishes before resuming"
        );
        assert_eq!(
            next_step(Failed, RequestedMirroring::Mirror),
            NextStep::Wait
        );
        assert_eq!(
            next_step(Failed, RequestedMirroring::Remove),
            NextStep::Stop
        );
        assert_eq!(
            next_step(Unknown, RequestedMirroring::Remove),
            NextStep::PassThrough
        );
    }
}
