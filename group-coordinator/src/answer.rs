//! Answers held back until the offsets partition's ISR has what the
//! coordinator wrote for them ([`Shard::once_replicated`]): when it does
//! not in time, what reported success reports the error clients retry.
//!
//! [`Shard::once_replicated`]: super::Shard::once_replicated

use kafka_protocol::error::ResponseError;

use super::consumer_heartbeat::HeartbeatError;
use super::member::{JoinResult, SyncResult};
use super::offsets::PartitionCodes;
use super::streams_heartbeat::StreamsError;

/// An answer whose successes a failed replication turns into `error`.
pub trait GatedAnswer {
    fn fail(&mut self, error: ResponseError);
}

impl GatedAnswer for JoinResult {
    fn fail(&mut self, error: ResponseError) {
        if self.error == 0 {
            *self = JoinResult::error(&self.member_id, error);
        }
    }
}

impl GatedAnswer for SyncResult {
    fn fail(&mut self, error: ResponseError) {
        if self.error == 0 {
            *self = SyncResult::error(error);
        }
    }
}

impl<T> GatedAnswer for Result<T, ResponseError> {
    fn fail(&mut self, error: ResponseError) {
        if self.is_ok() {
            *self = Err(error);
        }
    }
}

impl<T> GatedAnswer for Result<T, HeartbeatError> {
    fn fail(&mut self, error: ResponseError) {
        if self.is_ok() {
            *self = Err(HeartbeatError {
                error,
                message: None,
            });
        }
    }
}

impl<T> GatedAnswer for Result<T, StreamsError> {
    fn fail(&mut self, error: ResponseError) {
        if self.is_ok() {
            *self = Err(StreamsError {
                error,
                message: None,
            });
        }
    }
}

/// Per-member or per-group codes (LeaveGroup, DeleteGroups).
impl GatedAnswer for Vec<i16> {
    fn fail(&mut self, error: ResponseError) {
        for code in self.iter_mut().filter(|c| **c == 0) {
            *code = error.code();
        }
    }
}

impl GatedAnswer for PartitionCodes {
    fn fail(&mut self, error: ResponseError) {
        for (_, partitions) in self.iter_mut() {
            partitions.fail(error);
        }
    }
}

impl GatedAnswer for Vec<(i32, i16)> {
    fn fail(&mut self, error: ResponseError) {
        for (_, code) in self.iter_mut().filter(|(_, c)| *c == 0) {
            *code = error.code();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_successes_take_the_error() {
        let e = ResponseError::CoordinatorNotAvailable;
        let mut codes: PartitionCodes = vec![("t".into(), vec![(0, 0), (1, 3)])];
        codes.fail(e);
        assert_eq!(codes, vec![("t".to_string(), vec![(0, e.code()), (1, 3)])]);
        let mut join = JoinResult::error("m", ResponseError::UnknownMemberId);
        join.fail(e);
        assert_eq!(join.error, ResponseError::UnknownMemberId.code());
        let mut ok: Result<(), ResponseError> = Ok(());
        ok.fail(e);
        assert_eq!(ok, Err(e));
    }
}
