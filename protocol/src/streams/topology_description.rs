//! StreamsGroupTopologyDescriptionUpdate (key 93), version 0 (KIP-1331): a
//! member the heartbeat asked for its topology's description sends it.
//!
//! ```json
//! { "apiKey": 93, "type": "request", "name": "StreamsGroupTopologyDescriptionUpdateRequest",
//!   "validVersions": "0", "flexibleVersions": "0+",
//!   "fields": [
//!     { "name": "GroupId", "type": "string" },
//!     { "name": "MemberId", "type": "string" },
//!     { "name": "TopologyEpoch", "type": "int32" },
//!     { "name": "TopologyDescription", "type": "TopologyDescription" } ] }
//!
//! { "apiKey": 93, "type": "response", "name": "StreamsGroupTopologyDescriptionUpdateResponse",
//!   "fields": [
//!     { "name": "ThrottleTimeMs", "type": "int32" },
//!     { "name": "ErrorCode", "type": "int16" },
//!     { "name": "ErrorMessage", "type": "string", "nullableVersions": "0+", "default": "null" } ] }
//! ```
//! (every field `"versions": "0+"`; TopologyDescription is in the module
//! above.)

use super::TopologyDescription;

wire_struct! {
    pub struct StreamsGroupTopologyDescriptionUpdateRequest {
        pub group_id: String,
        pub member_id: String,
        pub topology_epoch: i32,
        pub topology_description: TopologyDescription,
    }
}

wire_struct! {
    pub struct StreamsGroupTopologyDescriptionUpdateResponse {
        pub throttle_time_ms: i32,
        pub error_code: i16,
        pub error_message: Option<String>,
    }
}

streams_message!(
    super::StreamsApiKey::StreamsGroupTopologyDescriptionUpdate,
    StreamsGroupTopologyDescriptionUpdateRequest,
    StreamsGroupTopologyDescriptionUpdateResponse
);
