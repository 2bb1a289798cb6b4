//! The streams-group APIs (KIP-1071), which kafka-protocol 0.18 does not
//! know: StreamsGroupHeartbeat (key 88) and StreamsGroupDescribe (key 89),
//! written from Kafka 4.4's JSON message specs
//! (`clients/src/main/resources/common/message/StreamsGroup*.json`).
//!
//! Both are served at versions 0-1. Version 1 (KIP-1331) adds topology
//! descriptions (a heartbeat flag asking a member for one, pushed with
//! StreamsGroupTopologyDescriptionUpdate, key 93, `topology_description`;
//! describe returns them), the group's assignor name, the acceptable
//! recovery lag as an int64, and the MISSING_CLIENT_TAGS status. Kafka keeps
//! descriptions only through a broker plugin (a Java class), off by default;
//! Ottla serves the APIs as Kafka does with it off.
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
    StreamsGroupTopologyDescriptionUpdate = 93,
}

impl StreamsApiKey {
    pub const ALL: [StreamsApiKey; 3] = [
        Self::StreamsGroupHeartbeat,
        Self::StreamsGroupDescribe,
        Self::StreamsGroupTopologyDescriptionUpdate,
    ];

    pub fn from_i16(key: i16) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_i16() == key)
    }

    pub fn as_i16(self) -> i16 {
        self as i16
    }

    /// The versions served, for ApiVersions.
    pub fn versions(self) -> RangeInclusive<i16> {
        match self {
            Self::StreamsGroupHeartbeat | Self::StreamsGroupDescribe => 0..=1,
            Self::StreamsGroupTopologyDescriptionUpdate => 0..=0,
        }
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

wire_struct! {
    /// A node of a topology description: a source, processor or sink.
    pub struct TopologyDescriptionNode {
        pub name: String,
        pub node_type: i8,
        pub source_topics: Vec<String>,
        pub sink_topic: Option<String>,
        pub stores: Vec<String>,
        pub successors: Vec<String>,
    }
}

wire_struct! {
    pub struct TopologyDescriptionSubtopology {
        pub subtopology_id: String,
        pub nodes: Vec<TopologyDescriptionNode>,
    }
}

wire_struct! {
    pub struct TopologyDescriptionGlobalStore {
        pub source: TopologyDescriptionNode,
        pub processor: TopologyDescriptionNode,
    }
}

wire_struct! {
    /// A streams application's topology as its `Topology.describe()`
    /// shows it (KIP-1331).
    pub struct TopologyDescription {
        pub subtopologies: Vec<TopologyDescriptionSubtopology>,
        pub global_stores: Vec<TopologyDescriptionGlobalStore>,
    }
}

nullable_struct!(Topology, Endpoint, TopologyDescription);

pub mod describe;
pub mod heartbeat;
pub mod records;
#[cfg(test)]
mod tests;
pub mod topology_description;
