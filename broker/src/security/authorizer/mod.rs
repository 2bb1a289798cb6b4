//! Authorization: Kafka's StandardAuthorizer over the ACLs in the metadata
//! image. Off unless `authorizer.class.name` names StandardAuthorizer; then
//! every request is checked through an [`Access`] (who asks, from where,
//! against which image).
//!
//! Brokers reach each other over the inter-broker listener as whatever
//! principal that listener gives them (`User:ANONYMOUS` on PLAINTEXT), and
//! replica fetches, transaction markers and AddPartitionsToTxn verification
//! need CLUSTER_ACTION: put that principal in `super.users`.

pub mod access;
mod rules;

use std::collections::HashSet;

pub use access::Access;
pub use rules::{Requester, Rules};

use crate::config::{keys, BrokerConfig};

/// The only `authorizer.class.name` Ottla implements (Kafka's KRaft authorizer).
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

/// The enabled authorizer's settings.
#[derive(Debug, Clone, Default)]
pub struct Authorizer {
    pub rules: Rules,
}

impl Authorizer {
    /// The authorizer `config` asks for, if any.
    pub fn from_config(config: &BrokerConfig) -> Option<Self> {
        if config.get(keys::AUTHORIZER_CLASS_NAME) != STANDARD_AUTHORIZER {
            return None;
        }
        let super_users: HashSet<String> = config
            .get(keys::SUPER_USERS)
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        Some(Self {
            rules: Rules {
                super_users,
                allow_if_no_acl: config.get(keys::ALLOW_EVERYONE_IF_NO_ACL_FOUND),
            },
        })
    }
}
