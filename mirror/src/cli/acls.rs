//! ACLs on Ottla's CLUSTER_MIRROR resource (type 64, named by mirror), which
//! `kafka-acls.sh` cannot name: the operations they grant, and the
//! CreateAcls / DeleteAcls / DescribeAcls requests that manage them.

use kafka_protocol::messages::create_acls_request::{AclCreation, CreateAclsRequest};
use kafka_protocol::messages::delete_acls_request::{DeleteAclsFilter, DeleteAclsRequest};
use kafka_protocol::messages::describe_acls_response::DescribeAclsResponse;
use kafka_protocol::messages::DescribeAclsRequest;
use kafka_protocol::protocol::StrBytes;
use serde::Serialize;

/// The CLUSTER_MIRROR resource type.
pub const CLUSTER_MIRROR: i8 = 64;
const PATTERN_ANY: i8 = 1;
const PATTERN_LITERAL: i8 = 3;
const ANY: i8 = 1;
const DENY: i8 = 2;
const ALLOW: i8 = 3;

/// The operations a mirror ACL may grant, with Kafka's codes.
const OPERATIONS: [(&str, i8); 7] = [
    ("ALL", 2),
    ("CREATE", 5),
    ("DELETE", 6),
    ("ALTER", 7),
    ("DESCRIBE", 8),
    ("DESCRIBE_CONFIGS", 10),
    ("ALTER_CONFIGS", 11),
];

/// One `--operation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AclOperation(pub i8);

impl AclOperation {
    /// A name as `kafka-acls.sh` takes it (any case, `-` or `_`).
    pub fn parse(name: &str) -> Result<Self, String> {
        let wanted = name.trim().to_ascii_uppercase().replace('-', "_");
        OPERATIONS
            .iter()
            .find(|(n, _)| *n == wanted)
            .map(|(_, code)| Self(*code))
            .ok_or_else(|| {
                let names: Vec<&str> = OPERATIONS.iter().map(|(n, _)| *n).collect();
                format!(
                    "'{name}' is not a mirror operation: use {}",
                    names.join(", ")
                )
            })
    }

    pub fn name(self) -> String {
        OPERATIONS
            .iter()
            .find(|(_, code)| *code == self.0)
            .map_or_else(|| format!("UNKNOWN({})", self.0), |(n, _)| n.to_string())
    }
}

/// Who, from where, may (or, denied, may not) do what on a mirror.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorAcl {
    pub mirror: String,
    pub principal: String,
    pub host: String,
    pub operations: Vec<AclOperation>,
    pub deny: bool,
}

impl MirrorAcl {
    fn permission(&self) -> i8 {
        if self.deny {
            DENY
        } else {
            ALLOW
        }
    }

    pub fn create_request(&self) -> CreateAclsRequest {
        CreateAclsRequest::default().with_creations(
            self.operations
                .iter()
                .map(|op| {
                    AclCreation::default()
                        .with_resource_type(CLUSTER_MIRROR)
                        .with_resource_name(text(&self.mirror))
                        .with_resource_pattern_type(PATTERN_LITERAL)
                        .with_principal(text(&self.principal))
                        .with_host(text(&self.host))
                        .with_operation(op.0)
                        .with_permission_type(self.permission())
                })
                .collect(),
        )
    }

    /// Filters matching exactly the ACLs [`create_request`](Self::create_request) makes.
    pub fn delete_request(&self) -> DeleteAclsRequest {
        DeleteAclsRequest::default().with_filters(
            self.operations
                .iter()
                .map(|op| {
                    DeleteAclsFilter::default()
                        .with_resource_type_filter(CLUSTER_MIRROR)
                        .with_resource_name_filter(Some(text(&self.mirror)))
                        .with_pattern_type_filter(PATTERN_LITERAL)
                        .with_principal_filter(Some(text(&self.principal)))
                        .with_host_filter(Some(text(&self.host)))
                        .with_operation(op.0)
                        .with_permission_type(self.permission())
                })
                .collect(),
        )
    }
}

/// Every mirror ACL, or those of `mirror`.
pub fn describe_request(mirror: Option<&str>) -> DescribeAclsRequest {
    // kafka-protocol's defaults are empty strings, which match nothing.
    DescribeAclsRequest::default()
        .with_resource_type_filter(CLUSTER_MIRROR)
        .with_resource_name_filter(mirror.map(text))
        .with_pattern_type_filter(PATTERN_ANY)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(ANY)
        .with_permission_type(ANY)
}

/// One listed ACL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AclRow {
    pub mirror: String,
    pub principal: String,
    pub host: String,
    pub operation: String,
    pub permission: String,
}

/// The rows of a DescribeAcls answer, sorted.
pub fn rows(response: &DescribeAclsResponse) -> Vec<AclRow> {
    let mut rows: Vec<AclRow> = response
        .resources
        .iter()
        .flat_map(|r| {
            r.acls.iter().map(|a| AclRow {
                mirror: r.resource_name.to_string(),
                principal: a.principal.to_string(),
                host: a.host.to_string(),
                operation: AclOperation(a.operation).name(),
                permission: if a.permission_type == DENY {
                    "DENY".into()
                } else {
                    "ALLOW".into()
                },
            })
        })
        .collect();
    rows.sort_by(|a, b| {
        (&a.mirror, &a.principal, &a.operation).cmp(&(&b.mirror, &b.principal, &b.operation))
    });
    rows
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_parse_as_kafka_acls_writes_them() {
        assert_eq!(AclOperation::parse("alter").unwrap(), AclOperation(7));
        assert_eq!(
            AclOperation::parse("Describe-Configs").unwrap(),
            AclOperation(10)
        );
        let e = AclOperation::parse("read").unwrap_err();
        assert!(e.contains("'read' is not a mirror operation"), "{e}");
        assert_eq!(AclOperation(6).name(), "DELETE");
    }

    #[test]
    fn listing_filters_only_on_the_resource() {
        let all = describe_request(None);
        assert_eq!(all.resource_type_filter, CLUSTER_MIRROR);
        assert_eq!(
            (
                &all.resource_name_filter,
                &all.principal_filter,
                &all.host_filter
            ),
            (&None, &None, &None)
        );
        let one = describe_request(Some("east"));
        assert_eq!(one.resource_name_filter.as_deref(), Some("east"));
    }

    #[test]
    fn removal_filters_match_what_creation_makes() {
        let acl = MirrorAcl {
            mirror: "east".into(),
            principal: "User:alice".into(),
            host: "*".into(),
            operations: vec![AclOperation(7), AclOperation(8)],
            deny: true,
        };
        let created = acl.create_request();
        let deleted = acl.delete_request();
        assert_eq!(created.creations.len(), 2);
        for (c, d) in created.creations.iter().zip(&deleted.filters) {
            assert_eq!(c.resource_type, d.resource_type_filter);
            assert_eq!(Some(&c.resource_name), d.resource_name_filter.as_ref());
            assert_eq!(c.resource_pattern_type, d.pattern_type_filter);
            assert_eq!(Some(&c.principal), d.principal_filter.as_ref());
            assert_eq!(
                (c.operation, c.permission_type),
                (d.operation, d.permission_type)
            );
            assert_eq!(c.permission_type, DENY);
        }
    }
}
