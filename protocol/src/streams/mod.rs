//! The streams-group APIs (KIP-1071), which kafka-protocol 0.18 does not
//! know: StreamsGroupHeartbeat (key 88) and StreamsGroupDescribe (key 89),
//! written from Kafka 4.4's JSON message specs
//! (`clients/src/main/resources/common/message/StreamsGroup*.json`).
//!
//! Both are served at version 0. Version 1 (KIP-1331) adds the topology
//! description (a response flag and the StreamsGroupTopologyDescriptionUpdate
//! API) and the MISSING_CLIENT_TAGS status; clients negotiate version 0
//! when the broker advertises it as its highest.
//!
//! The structs shared by requests, responses and the `__consumer_offsets`
//! records (topology, task ids, endpoints) are declared once here: the
//! records' values are the same flexible encoding.

use std::ops::RangeInclusive;

use bytes::BytesMut;

use crate::schema::wire::{DecodeError, EncodeError, WireField};

/// The streams-group API keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i16)]
pub enum StreamsApiKey {
    StreamsGroupHeartbeat = 88,
    StreamsGroupDescribe = 89,
}

impl StreamsApiKey {
    pub const ALL: [StreamsApiKey; 2] = [Self::StreamsGroupHeartbeat, Self::StreamsGroupDescribe];

    pub fn from_i16(key: i16) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_i16() == key)
    }

    pub fn as_i16(self) -> i16 {
        self as i16
    }

    /// The versions served, for ApiVersions.
    pub fn versions(self) -> RangeInclusive<i16> {
        0..=0
    }
}

/// A top-level streams-group request or response body.
pub trait StreamsMessage: WireField {
    const API_KEY: StreamsApiKey;
    const NAME: &'static str;

    fn encode(&self, version: i16) -> Result<BytesMut, EncodeError> {
        crate::schema::encode_body(self, Self::NAME, Self::API_KEY.versions(), version)
    }

    fn decode(body: &[u8], version: i16) -> Result<Self, DecodeError> {
        crate::schema::decode_body(body, Self::NAME, Self::API_KEY.versions(), version)
    }
}

macro_rules! streams_message {
    ($key:expr, $($name:ident),+) => {$(
        impl $crate::streams::StreamsMessage for $name {
            const API_KEY: $crate::streams::StreamsApiKey = $key;
            const NAME: &'static str = stringify!($name);
        }
    )+};
}

wire_struct! {
    /// A key and value (a topic config, a client tag).
    pub struct KeyValue {
        pub key: String,
        pub value: String,
    }
}

wire_struct! {
    /// An internal topic the group asks for (0 partitions or replication
    /// factor: the broker decides).
    pub struct TopicInfo {
        pub name: String,
        pub partitions: i32,
        pub replication_factor: i16,
        pub topic_configs: Vec<KeyValue>,
    }
}

wire_struct! {
    /// Indexes into the subtopology's topic lists of topics that must have
    /// the same partition count.
    pub struct CopartitionGroup {
        pub source_topics: Vec<i16>,
        pub source_topic_regex: Vec<i16>,
        pub repartition_source_topics: Vec<i16>,
    }
}

wire_struct! {
    pub struct Subtopology {
        pub subtopology_id: String,
        pub source_topics: Vec<String>,
        pub source_topic_regex: Vec<String>,
        pub state_changelog_topics: Vec<TopicInfo>,
        pub repartition_sink_topics: Vec<String>,
        pub repartition_source_topics: Vec<TopicInfo>,
        pub copartition_groups: Vec<CopartitionGroup>,
    }
}

wire_struct! {
    /// A streams application's topology, as a member sends it on joining and
    /// as StreamsGroupTopologyValue stores it.
    pub struct Topology {
        pub epoch: i32,
        pub subtopologies: Vec<Subtopology>,
    }
}

wire_struct! {
    /// An Interactive Queries endpoint.
    pub struct Endpoint {
        pub host: String,
        pub port: u16,
    }
}

wire_struct! {
    pub struct TaskOffset {
        pub subtopology_id: String,
        pub partition: i32,
        pub offset: i64,
    }
}

wire_struct! {
    /// The tasks of one subtopology: one per partition listed.
    pub struct TaskIds {
        pub subtopology_id: String,
        pub partitions: Vec<i32>,
    }
}

nullable_struct!(Topology, Endpoint);

pub mod describe;
pub mod heartbeat;
pub mod records;
#[cfg(test)]
mod tests;
