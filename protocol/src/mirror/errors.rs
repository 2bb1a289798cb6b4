//! Error codes for conditions Kafka's `Errors` has no code for, numbered as
//! in the KIP-1279 prototype (134 to 146, 135 unused there and here). They are
//! not allocated upstream; Apache Kafka 4.x stops at 133
//! (SHARE_SESSION_LIMIT_REACHED).
//!
//! Everything else is answered with Kafka's own codes: INVALID_REQUEST,
//! INVALID_CONFIG, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
//! FENCED_LEADER_EPOCH, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
//! CLUSTER_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED, ...
//!
//! Clients that do not know a code treat it as a non-retriable unknown server
//! error, so a stock producer writing to a mirror topic fails fast on
//! [`READ_ONLY_TOPIC`] instead of retrying.

/// One mirror-specific error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MirrorError {
    pub code: i16,
    /// Kafka's constant-style name, for logs and the CLI.
    pub name: &'static str,
    pub message: &'static str,
}

macro_rules! mirror_errors {
    ($($constant:ident = $code:literal, $message:literal;)*) => {
        $(
            pub const $constant: MirrorError = MirrorError {
                code: $code,
                name: stringify!($constant),
                message: $message,
            };
        )*

        /// Every mirror-specific code, for lookups by code.
        pub const ALL: &[MirrorError] = &[$($constant),*];
    };
}

mirror_errors! {
    READ_ONLY_TOPIC = 134, "The topic is a mirror topic and is read-only until it is removed from its mirror.";
    MIRROR_ALREADY_EXISTS = 136, "A mirror with this name already exists.";
    UNKNOWN_MIRROR = 137, "No mirror with this name exists.";
    TOPIC_ALREADY_IN_MIRROR = 138, "The topic already belongs to a mirror.";
    TOPIC_NOT_IN_MIRROR = 139, "The topic does not belong to this mirror.";
    MIRROR_TOPIC_ALREADY_PAUSED = 140, "The mirror topic is already paused.";
    MIRROR_TOPIC_NOT_PAUSED = 141, "The mirror topic is not paused.";
    MIRROR_TOPIC_BEING_STOPPED = 142, "The mirror topic is being removed from its mirror.";
    MIRROR_NOT_EMPTY = 143, "The mirror still has topics that are not stopped.";
    MIRROR_AUTHORIZATION_FAILED = 144, "Not authorized to act on this mirror.";
    INVALID_MIRROR_STATE = 145, "The mirror partition state change is not valid from its current state.";
    MIRROR_TOPIC_NOT_STOPPED = 146, "The mirror topic has not finished stopping.";
}

pub fn by_code(code: i16) -> Option<MirrorError> {
    ALL.iter().copied().find(|e| e.code == code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_beyond_kafkas() {
        let mut codes: Vec<i16> = ALL.iter().map(|e| e.code).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), ALL.len());
        assert!(codes.iter().all(|&c| c > 133));
        assert_eq!(by_code(137), Some(UNKNOWN_MIRROR));
        assert_eq!(by_code(135), None);
    }
}
