//! The ACL model the metadata records: Kafka's resource, pattern,
//! operation and permission codes, one ACL (a resource pattern and an access
//! control entry), and the image's ACLs by id (KRaft's
//! AccessControlEntryRecord).

use std::collections::BTreeMap;

use uuid::Uuid;

/// Kafka's ResourceType codes.
pub mod resource {
    pub const ANY: i8 = 1;
    pub const TOPIC: i8 = 2;
    pub const GROUP: i8 = 3;
    pub const CLUSTER: i8 = 4;
    pub const TRANSACTIONAL_ID: i8 = 5;
    pub const DELEGATION_TOKEN: i8 = 6;
    pub const USER: i8 = 7;
    /// Ottla's mirrors (KIP-1279's ClusterMirror resource), named by mirror
    /// name. Not a Kafka code: Kafka's stop at 7, and 64 matches the mirror
    /// config resource type.
    pub const CLUSTER_MIRROR: i8 = 64;
    /// The resource types an ACL may name.
    pub const CONCRETE: &[i8] = &[
        TOPIC,
        GROUP,
        CLUSTER,
        TRANSACTIONAL_ID,
        DELEGATION_TOKEN,
        USER,
        CLUSTER_MIRROR,
    ];
}

/// Kafka's PatternType codes.
pub mod pattern {
    pub const ANY: i8 = 1;
    pub const MATCH: i8 = 2;
    pub const LITERAL: i8 = 3;
    pub const PREFIXED: i8 = 4;
}

/// Kafka's AclOperation codes.
pub mod operation {
    pub const ANY: i8 = 1;
    pub const ALL: i8 = 2;
    pub const READ: i8 = 3;
    pub const WRITE: i8 = 4;
    pub const CREATE: i8 = 5;
    pub const DELETE: i8 = 6;
    pub const ALTER: i8 = 7;
    pub const DESCRIBE: i8 = 8;
    pub const CLUSTER_ACTION: i8 = 9;
    pub const DESCRIBE_CONFIGS: i8 = 10;
    pub const ALTER_CONFIGS: i8 = 11;
    pub const IDEMPOTENT_WRITE: i8 = 12;
    pub const CREATE_TOKENS: i8 = 13;
    pub const DESCRIBE_TOKENS: i8 = 14;
    pub const TWO_PHASE_COMMIT: i8 = 15;
}

/// Kafka's AclPermissionType codes.
pub mod permission {
    pub const ANY: i8 = 1;
    pub const DENY: i8 = 2;
    pub const ALLOW: i8 = 3;
}

/// The wildcard resource name and host.
pub const WILDCARD: &str = "*";

/// One ACL: a resource pattern and an access control entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Acl {
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    /// `<type>:<name>`, e.g. `User:alice` or `User:*`.
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission: i8,
}

/// ACLs by their id.
pub type Acls = BTreeMap<Uuid, Acl>;
