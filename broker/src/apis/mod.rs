//! Request handlers, one module per API (or per family of small APIs). Each
//! takes the decoded request and its version and returns the response.

pub mod acls;
pub mod client_quotas;
pub mod configs;
pub mod consumer_group;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_log_dirs;
pub mod describe_quorum;
pub mod describe_topic_partitions;
pub mod elect_leaders;
pub mod fetch;
pub mod group;
pub mod init_producer_id;
pub mod leader_hints;
pub mod list_config_resources;
pub mod list_offsets;
pub mod metadata;
pub mod mirror;
pub mod offset_for_leader_epoch;
pub mod partition_access;
pub mod produce;
pub mod raft_voters;
pub mod reassignments;
pub mod sasl;
pub mod scram_credentials;
pub mod share_fetch;
pub mod share_group;
pub mod share_lag;
pub mod share_persister;
pub mod share_state;
pub mod streams_group;
#[cfg(test)]
pub mod test_support;
pub mod txn;
pub mod unregister_broker;
pub mod update_features;
