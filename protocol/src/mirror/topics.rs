//! The topic-set operations on a mirror: AddTopicsToMirror (95),
//! RemoveTopicsFromMirror (96), PauseMirrorTopics (102) and
//! ResumeMirrorTopics (103). Sent by an admin client to any destination
//! broker; the controller validates them and records the change on each
//! topic (`mirror.name`, with a `.removed` or `.paused` suffix for remove and
//! pause). The four share one shape.
//!
//! ```json
//! {
//!   "apiKey": 95,  // 96, 102, 103
//!   "type": "request",
//!   "listeners": ["broker"],
//!   "name": "AddTopicsToMirrorRequest", // RemoveTopicsFromMirrorRequest, PauseMirrorTopicsRequest, ResumeMirrorTopicsRequest
//!   "validVersions": "0",
//!   "flexibleVersions": "0+",
//!   "fields": [
//!     { "name": "MirrorName", "type": "string", "versions": "0+",
//!       "about": "The mirror the topics are added to, removed from, paused or resumed in." },
//!     { "name": "Topics", "type": "[]MirrorTopic", "versions": "0+",
//!       "about": "The topics, by name. Duplicates are answered once, with INVALID_REQUEST.", "fields": [
//!       { "name": "Name", "type": "string", "versions": "0+", "entityType": "topicName",
//!         "about": "The topic name, the same on the source and the destination." }
//!     ]},
//!     { "name": "DiscardLocalWrites", "type": "bool", "versions": "0+", "taggedVersions": "0+", "tag": 0,
//!       "default": "false", "about": "AddTopicsToMirror only: re-add a stopped topic even when the source cannot tell its last mirrored epoch, discarding what was written on the destination since failover." }
//!   ]
//! }
//! ```
//!
//! ```json
//! {
//!   "apiKey": 95,  // 96, 102, 103
//!   "type": "response",
//!   "name": "AddTopicsToMirrorResponse", // ...
//!   "validVersions": "0",
//!   "flexibleVersions": "0+",
//!   "fields": [
//!     { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+",
//!       "about": "The duration in milliseconds for which the request was throttled, or zero." },
//!     { "name": "ErrorCode", "type": "int16", "versions": "0+",
//!       "about": "A mirror-level error (UNKNOWN_MIRROR, MIRROR_AUTHORIZATION_FAILED, ...), or 0; when set, Topics is empty." },
//!     { "name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null",
//!       "about": "The mirror-level error message, or null." },
//!     { "name": "Topics", "type": "[]MirrorTopicResult", "versions": "0+",
//!       "about": "One result per requested topic.", "fields": [
//!       { "name": "Name", "type": "string", "versions": "0+", "entityType": "topicName",
//!         "about": "The topic name." },
//!       { "name": "TopicId", "type": "uuid", "versions": "0+",
//!         "about": "The topic id (the source's, which the destination topic shares), or zero if unknown." },
//!       { "name": "ErrorCode", "type": "int16", "versions": "0+",
//!         "about": "The topic's error, or 0." },
//!       { "name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null",
//!         "about": "The topic's error message, or null." }
//!     ]}
//!   ]
//! }
//! ```
//!
//! Typical topic errors: AddTopicsToMirror answers UNKNOWN_TOPIC_OR_PARTITION
//! when the source has no such topic and TOPIC_ALREADY_IN_MIRROR;
//! RemoveTopicsFromMirror TOPIC_NOT_IN_MIRROR; PauseMirrorTopics
//! MIRROR_TOPIC_ALREADY_PAUSED; ResumeMirrorTopics MIRROR_TOPIC_NOT_PAUSED.

use uuid::Uuid;

use super::MirrorApiKey;

/// AddTopicsToMirror's tagged field DiscardLocalWrites.
const DISCARD_LOCAL_WRITES_TAG: u32 = 0;

wire_struct! {
    /// One topic named in a request.
    pub struct MirrorTopic {
        pub name: String,
    }
}

wire_struct! {
    /// The outcome for one topic.
    pub struct MirrorTopicResult {
        pub name: String,
        /// The source's topic id, shared by the destination topic; nil if unknown.
        pub topic_id: Uuid,
        pub error_code: i16,
        pub error_message: Option<String>,
    }
}

/// Declares one of the four request/response pairs with the shared shape.
macro_rules! topic_set_api {
    ($key:expr, $request:ident, $response:ident, $what:literal) => {
        wire_struct! {
            #[doc = concat!("Asks the controller to ", $what, ".")]
            pub struct $request {
                pub mirror_name: String,
                pub topics: Vec<MirrorTopic>,
            }
        }

        wire_struct! {
            #[doc = concat!("The answer to [`", stringify!($request), "`].")]
            pub struct $response {
                pub throttle_time_ms: i32,
                /// A mirror-level error; the topics list is then empty.
                pub error_code: i16,
                pub error_message: Option<String>,
                pub topics: Vec<MirrorTopicResult>,
            }
        }

        mirror_api!($key, $request => $response);
    };
}

topic_set_api!(
    MirrorApiKey::AddTopicsToMirror,
    AddTopicsToMirrorRequest,
    AddTopicsToMirrorResponse,
    "start mirroring topics (creating missing destination topics with the source's id and partition count)"
);
topic_set_api!(
    MirrorApiKey::RemoveTopicsFromMirror,
    RemoveTopicsFromMirrorRequest,
    RemoveTopicsFromMirrorResponse,
    "stop mirroring topics and make them writable (failover)"
);
topic_set_api!(
    MirrorApiKey::PauseMirrorTopics,
    PauseMirrorTopicsRequest,
    PauseMirrorTopicsResponse,
    "pause mirror topics: no fetching and no metadata sync, still read-only"
);
topic_set_api!(
    MirrorApiKey::ResumeMirrorTopics,
    ResumeMirrorTopicsRequest,
    ResumeMirrorTopicsResponse,
    "resume paused mirror topics"
);

/// The tagged field is kept with the unknown ones, which the codec already
/// reads and writes in tag order.
impl AddTopicsToMirrorRequest {
    /// Whether the operator confirmed discarding local writes the source
    /// cannot vouch for.
    pub fn discard_local_writes(&self) -> bool {
        self.unknown_tagged_fields.flag(DISCARD_LOCAL_WRITES_TAG)
    }

    pub fn with_discard_local_writes(mut self, discard: bool) -> Self {
        self.unknown_tagged_fields
            .set_flag(DISCARD_LOCAL_WRITES_TAG, discard);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::wire::WireField;
    use crate::streams::TopicInfo;

    fn codes(value: &impl WireField) -> Vec<i16> {
        let mut codes = Vec::new();
        value.error_codes(false, &mut |c| codes.push(c));
        codes
    }

    #[test]
    fn error_codes_are_gathered_from_every_level_and_only_from_error_code_fields() {
        let topic = |error_code| MirrorTopicResult {
            error_code,
            ..Default::default()
        };
        let response = AddTopicsToMirrorResponse {
            throttle_time_ms: 7,
            error_code: 0,
            topics: vec![topic(3), topic(0), topic(29)],
            ..Default::default()
        };
        assert_eq!(codes(&response), [0, 3, 0, 29]);
        // Other i16 fields are not error codes.
        let info = TopicInfo {
            replication_factor: 3,
            ..Default::default()
        };
        assert_eq!(codes(&info), Vec::<i16>::new());
    }
}
