//! ACLs in the metadata: the Kafka ACL model (resource patterns and access
//! control entries, with Kafka's wire codes), how the image keeps them (by
//! id, as KRaft's AccessControlEntryRecord), the binding filters of
//! DescribeAcls/DeleteAcls, and the CreateAcls/DeleteAcls changes
//! (Kafka's AclControlManager rules).

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use crate::image::MetadataImage;
use crate::records::MetadataRecord;
use crate::{Controller, ControllerError, ControllerResult};

pub use crate::records::acl::*;

/// A DescribeAcls / DeleteAcls filter; `None` strings match anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    pub resource_type: i8,
    pub resource_name: Option<String>,
    pub pattern_type: i8,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: i8,
    pub permission: i8,
}

impl AclFilter {
    /// Kafka's AclBindingFilter.matches: ANY matches every pattern type
    /// with an equal name, MATCH every pattern that would apply to the name.
    pub fn matches(&self, acl: &Acl) -> bool {
        let resource = (self.resource_type == resource::ANY
            || self.resource_type == acl.resource_type)
            && match (self.pattern_type, &self.resource_name) {
                (_, None) => {
                    matches!(self.pattern_type, pattern::ANY | pattern::MATCH)
                        || self.pattern_type == acl.pattern_type
                }
                (pattern::MATCH, Some(name)) => match acl.pattern_type {
                    pattern::LITERAL => *name == acl.resource_name || acl.resource_name == WILDCARD,
                    _ => name.starts_with(&acl.resource_name),
                },
                (pattern::ANY, Some(name)) => *name == acl.resource_name,
                (p, Some(name)) => p == acl.pattern_type && *name == acl.resource_name,
            };
        resource
            && self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && (self.operation == operation::ANY || self.operation == acl.operation)
            && (self.permission == permission::ANY || self.permission == acl.permission)
    }

    /// What Kafka refuses in a filter (AclBindingFilter.findIndefiniteField
    /// is allowed; UNKNOWN values are not).
    pub fn validate(&self) -> ControllerResult<()> {
        let known = |v: i8, max: i8| (1..=max).contains(&v);
        let resource_type =
            self.resource_type == resource::ANY || resource::CONCRETE.contains(&self.resource_type);
        if !resource_type
            || !known(self.pattern_type, pattern::PREFIXED)
            || !known(self.operation, operation::TWO_PHASE_COMMIT)
            || !known(self.permission, permission::ALLOW)
        {
            return Err(invalid(
                "The filter has an unknown resource type, pattern type, operation or permission",
            ));
        }
        Ok(())
    }
}

fn invalid(message: impl Into<String>) -> ControllerError {
    ControllerError::new(ResponseError::InvalidRequest, message)
}

/// Kafka's AclControlManager.validateNewAcl.
pub fn validate_new(acl: &Acl) -> ControllerResult<()> {
    if !resource::CONCRETE.contains(&acl.resource_type) {
        return Err(invalid("Invalid resource type: use TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER or CLUSTER_MIRROR (64)"));
    }
    if !matches!(acl.pattern_type, pattern::LITERAL | pattern::PREFIXED) {
        return Err(invalid(
            "Invalid pattern type: an ACL is LITERAL or PREFIXED",
        ));
    }
    if !(operation::ALL..=operation::TWO_PHASE_COMMIT).contains(&acl.operation) {
        return Err(invalid("Invalid operation"));
    }
    if !matches!(acl.permission, permission::DENY | permission::ALLOW) {
        return Err(invalid("Invalid permission type: an ACL is ALLOW or DENY"));
    }
    if acl.resource_name.is_empty() {
        return Err(invalid("Resource name must not be empty"));
    }
    if acl.resource_type == resource::CLUSTER && acl.resource_name != "kafka-cluster" {
        return Err(invalid(
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ));
    }
    match acl.principal.split_once(':') {
        Some((t, n)) if !t.is_empty() && !n.is_empty() => {}
        _ => {
            return Err(invalid(format!(
                "Could not parse principal {:?}: write it as <type>:<name>, e.g. User:alice",
                acl.principal
            )))
        }
    }
    if acl.host.is_empty() {
        return Err(invalid("Host must not be empty: use * for every host"));
    }
    Ok(())
}

/// Plans CreateAcls: an ACL that already exists is left as it is (Kafka
/// answers success without a second copy).
pub fn create_records(
    image: &MetadataImage,
    acls: &[Acl],
) -> (Vec<MetadataRecord>, Vec<ControllerResult<()>>) {
    let mut existing: BTreeSet<&Acl> = image.acls.values().collect();
    let mut records = Vec::new();
    let results = acls
        .iter()
        .map(|acl| {
            validate_new(acl)?;
            if existing.insert(acl) {
                records.push(MetadataRecord::AccessControlEntry {
                    id: Uuid::new_v4(),
                    acl: acl.clone(),
                });
            }
            Ok(())
        })
        .collect();
    (records, results)
}

/// One DeleteAcls filter's outcome: the ACLs it removed.
pub type DeleteResult = ControllerResult<Vec<(Uuid, Acl)>>;

/// Plans DeleteAcls: every ACL matching a valid filter is removed once,
/// and listed under each filter it matched.
pub fn delete_records(
    image: &MetadataImage,
    filters: &[AclFilter],
) -> (Vec<MetadataRecord>, Vec<DeleteResult>) {
    let mut removed = BTreeSet::new();
    let results: Vec<DeleteResult> = filters
        .iter()
        .map(|f| {
            f.validate()?;
            let matched: Vec<(Uuid, Acl)> = image
                .acls
                .iter()
                .filter(|(_, acl)| f.matches(acl))
                .map(|(id, acl)| (*id, acl.clone()))
                .collect();
            removed.extend(matched.iter().map(|(id, _)| *id));
            Ok(matched)
        })
        .collect();
    let records = removed
        .into_iter()
        .map(|id| MetadataRecord::RemoveAccessControlEntry { id })
        .collect();
    (records, results)
}

impl Controller {
    /// Validates and commits CreateAcls; a failed commit fails every ACL.
    pub async fn create_acls(&self, acls: &[Acl]) -> Vec<ControllerResult<()>> {
        let (results, error) = self.run(|image| create_records(image, acls)).await;
        fail_all(results, error)
    }

    /// Commits DeleteAcls; a failed commit fails every filter.
    pub async fn delete_acls(&self, filters: &[AclFilter]) -> Vec<DeleteResult> {
        let (results, error) = self.run(|image| delete_records(image, filters)).await;
        fail_all(results, error)
    }
}

fn fail_all<T>(
    results: Vec<ControllerResult<T>>,
    error: Option<ControllerError>,
) -> Vec<ControllerResult<T>> {
    match error {
        None => results,
        Some(e) => results
            .into_iter()
            .map(|r| r.and_then(|_| Err(e.clone())))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn acl(pattern_type: i8, name: &str, principal: &str, op: i8, perm: i8) -> Acl {
        Acl {
            resource_type: resource::TOPIC,
            resource_name: name.into(),
            pattern_type,
            principal: principal.into(),
            host: WILDCARD.into(),
            operation: op,
            permission: perm,
        }
    }

    fn filter(pattern_type: i8, name: Option<&str>) -> AclFilter {
        AclFilter {
            resource_type: resource::ANY,
            resource_name: name.map(Into::into),
            pattern_type,
            principal: None,
            host: None,
            operation: operation::ANY,
            permission: permission::ANY,
        }
    }

    fn apply(image: &mut MetadataImage, records: &[MetadataRecord]) {
        for r in records {
            image.apply(image.offset + 1, r);
        }
    }

    #[test]
    fn filters_follow_kafkas_any_and_match_semantics() {
        let literal = acl(
            pattern::LITERAL,
            "orders",
            "User:a",
            operation::READ,
            permission::ALLOW,
        );
        let wildcard = acl(
            pattern::LITERAL,
            "*",
            "User:a",
            operation::READ,
            permission::ALLOW,
        );
        let prefixed = acl(
            pattern::PREFIXED,
            "ord",
            "User:a",
            operation::READ,
            permission::ALLOW,
        );
        let m = |f: &AclFilter| {
            [&literal, &wildcard, &prefixed]
                .map(|a| f.matches(a))
                .to_vec()
        };
        assert_eq!(
            m(&filter(pattern::ANY, Some("orders"))),
            [true, false, false]
        );
        assert_eq!(
            m(&filter(pattern::MATCH, Some("orders"))),
            [true, true, true]
        );
        assert_eq!(
            m(&filter(pattern::MATCH, Some("other"))),
            [false, true, false]
        );
        assert_eq!(
            m(&filter(pattern::PREFIXED, Some("ord"))),
            [false, false, true]
        );
        assert_eq!(m(&filter(pattern::LITERAL, None)), [true, true, false]);
        assert_eq!(m(&filter(pattern::ANY, None)), [true, true, true]);
        let mut f = filter(pattern::ANY, None);
        f.principal = Some("User:b".into());
        assert_eq!(m(&f), [false, false, false]);
        f.principal = None;
        f.operation = operation::WRITE;
        assert_eq!(m(&f), [false, false, false]);
    }

    #[test]
    fn create_and_delete_change_the_image() {
        let mut image = MetadataImage::empty();
        let a = acl(
            pattern::LITERAL,
            "orders",
            "User:a",
            operation::READ,
            permission::ALLOW,
        );
        let mut bad = a.clone();
        bad.principal = "alice".into();
        let mut cluster = a.clone();
        cluster.resource_type = resource::CLUSTER;
        let (records, results) = create_records(&image, &[a.clone(), a.clone(), bad, cluster]);
        assert_eq!(records.len(), 1, "a duplicate is stored once");
        assert!(results[0].is_ok() && results[1].is_ok());
        assert!(results[2]
            .as_ref()
            .unwrap_err()
            .message
            .contains("<type>:<name>"));
        assert!(results[3]
            .as_ref()
            .unwrap_err()
            .message
            .contains("kafka-cluster"));
        apply(&mut image, &records);
        assert_eq!(image.acls.values().collect::<Vec<_>>(), [&a]);
        let (records, _) = create_records(&image, std::slice::from_ref(&a));
        assert!(records.is_empty(), "an existing ACL is not added again");

        let (records, results) = delete_records(
            &image,
            &[
                filter(pattern::MATCH, Some("orders")),
                filter(pattern::ANY, None),
            ],
        );
        assert_eq!(records.len(), 1, "an ACL matched twice is removed once");
        assert_eq!(results[0].as_ref().unwrap().len(), 1);
        assert_eq!(results[1].as_ref().unwrap().len(), 1);
        apply(&mut image, &records);
        assert!(image.acls.is_empty());
    }
}
