//! The metadata side of Ottla: KRaft-style metadata records, the metadata
//! image brokers read, and the controller that validates changes and commits
//! them to the metadata log.

pub mod controller;
pub mod image;
pub mod raft;
pub mod records;

pub use controller::{
    AlterOp, Controller, ControllerError, ControllerResult, CreatedTopic, NewTopic, TopicDefaults,
};
pub use image::{MetadataImage, PartitionImage, TopicImage};
pub use records::MetadataRecord;
