//! The metadata side of Ottla: KRaft-style metadata records, the metadata
//! image brokers read, and the controller that validates changes and commits
//! them to the metadata log.

pub mod acls;
pub mod controller;
pub mod elections;
pub mod features;
pub mod image;
pub mod mirrors;
pub mod partition_change;
pub mod quotas;
pub mod raft;
pub mod reassignment;
pub mod records;
pub mod scram;
pub mod service;
pub mod voters;

pub use controller::{
    AlterOp, Controller, ControllerError, ControllerResult, ControllerSettings, CreatedTopic,
    NewTopic, TopicDefaults,
};
pub use image::{DeletedTopics, MetadataImage, PartitionImage, TopicImage};
pub use raft::{
    DynamicQuorum, Node, QuorumConfig, QuorumError, QuorumSummary, QuorumVoters, VoterSummary,
};
pub use records::MetadataRecord;
