//! The mirror's filters: which topics are discovered, which groups' offsets
//! and which ACLs are synced.
//!
//! Lists are Kafka list values: comma-separated, entries trimmed, empty
//! entries ignored (so a regex cannot contain a comma, as in Kafka). A regex
//! must match a whole name, as Java's `Pattern.matches` does; the syntax is
//! the `regex` crate's, which agrees with Java's for the usual
//! classes, quantifiers and alternations but has no look-around or
//! back-references.

use regex::Regex;

use super::ConfigError;

/// Splits a Kafka list value.
pub(super) fn list_entries(value: &str) -> impl Iterator<Item = &str> {
    value
        .split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
}

/// A whole-name regex.
#[derive(Debug, Clone)]
pub struct NamePattern {
    source: String,
    regex: Regex,
}

impl NamePattern {
    pub fn new(key: &'static str, pattern: &str) -> Result<Self, ConfigError> {
        let regex = Regex::new(&format!("^(?:{pattern})$")).map_err(|e| ConfigError::Invalid {
            key,
            value: pattern.to_owned(),
            reason: format!("not a valid regular expression: {e}"),
        })?;
        Ok(Self {
            source: pattern.to_owned(),
            regex,
        })
    }

    pub fn matches(&self, name: &str) -> bool {
        self.regex.is_match(name)
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }
}

fn patterns(key: &'static str, value: &str) -> Result<Vec<NamePattern>, ConfigError> {
    list_entries(value)
        .map(|p| NamePattern::new(key, p))
        .collect()
}

/// Include and exclude regex lists; exclude wins.
#[derive(Debug, Clone)]
pub struct NameFilter {
    pub include: Vec<NamePattern>,
    pub exclude: Vec<NamePattern>,
}

impl NameFilter {
    pub(super) fn parse(
        include_key: &'static str,
        include: &str,
        exclude_key: &'static str,
        exclude: &str,
    ) -> Result<Self, ConfigError> {
        Ok(Self {
            include: patterns(include_key, include)?,
            exclude: patterns(exclude_key, exclude)?,
        })
    }

    pub fn matches(&self, name: &str) -> bool {
        self.include.iter().any(|p| p.matches(name))
            && !self.exclude.iter().any(|p| p.matches(name))
    }
}

/// Kafka's ACL resource types, operations and permission types, by name.
const RESOURCE_TYPES: &[&str] = &[
    "TOPIC",
    "GROUP",
    "CLUSTER",
    "TRANSACTIONAL_ID",
    "DELEGATION_TOKEN",
    "USER",
];
const OPERATIONS: &[&str] = &[
    "ALL",
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "CLUSTER_ACTION",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
    "CREATE_TOKENS",
    "DESCRIBE_TOKENS",
];
const PERMISSIONS: &[&str] = &["ALLOW", "DENY"];

/// One field of an ACL rule: anything (`*` or omitted) or a value.
#[derive(Debug, Clone)]
pub enum AclField<T> {
    Any,
    Is(T),
}

impl<T> AclField<T> {
    fn check(&self, accepts: impl FnOnce(&T) -> bool) -> bool {
        match self {
            Self::Any => true,
            Self::Is(value) => accepts(value),
        }
    }
}

/// One `mirror.acl.include` rule:
/// `resourceType;resourceName;operation;permissionType;principal`, where
/// the name and principal are whole-name regexes, every field may be `*`,
/// and trailing fields may be left out (they are then `*`). Names are
/// compared case-insensitively for the enumerations, as Kafka parses them.
#[derive(Debug, Clone)]
pub struct AclRule {
    pub resource_type: AclField<&'static str>,
    pub resource_name: AclField<NamePattern>,
    pub operation: AclField<&'static str>,
    pub permission: AclField<&'static str>,
    pub principal: AclField<NamePattern>,
}

/// One ACL as the sync sees it, with Kafka's upper-case enumeration names.
#[derive(Debug, Clone, Copy)]
pub struct AclBinding<'a> {
    pub resource_type: &'a str,
    pub resource_name: &'a str,
    pub operation: &'a str,
    pub permission: &'a str,
    pub principal: &'a str,
}

impl AclBinding<'static> {
    /// The names of Kafka's ACL codes (resource type 2-7, operation 2-14,
    /// permission 2-3), None for a code that is not concrete.
    pub fn names(
        resource_type: i8,
        operation: i8,
        permission: i8,
    ) -> Option<(&'static str, &'static str, &'static str)> {
        let at = |list: &'static [&'static str], code: i8| {
            usize::try_from(code - 2)
                .ok()
                .and_then(|i| list.get(i))
                .copied()
        };
        let permission = match permission {
            2 => "DENY",
            3 => "ALLOW",
            _ => return None,
        };
        Some((
            at(RESOURCE_TYPES, resource_type)?,
            at(OPERATIONS, operation)?,
            permission,
        ))
    }
}

const ACL_KEY: &str = "mirror.acl.include";

fn enumeration(
    field: &str,
    what: &str,
    allowed: &'static [&'static str],
) -> Result<AclField<&'static str>, ConfigError> {
    if field == "*" {
        return Ok(AclField::Any);
    }
    allowed
        .iter()
        .find(|name| name.eq_ignore_ascii_case(field))
        .map(|name| AclField::Is(*name))
        .ok_or_else(|| ConfigError::Invalid {
            key: ACL_KEY,
            value: field.to_owned(),
            reason: format!("not {what}; expected * or one of {}", allowed.join(", ")),
        })
}

fn pattern_field(field: &str) -> Result<AclField<NamePattern>, ConfigError> {
    if field == "*" {
        Ok(AclField::Any)
    } else {
        NamePattern::new(ACL_KEY, field).map(AclField::Is)
    }
}

impl AclRule {
    pub fn parse(rule: &str) -> Result<Self, ConfigError> {
        let fields: Vec<&str> = rule.split(';').map(str::trim).collect();
        if fields.len() > 5 || fields.iter().any(|f| f.is_empty()) {
            return Err(ConfigError::Invalid {
                key: ACL_KEY,
                value: rule.to_owned(),
                reason: "expected resourceType;resourceName;operation;permissionType;principal \
                         (trailing fields may be left out, none may be empty)"
                    .into(),
            });
        }
        let field = |i: usize| fields.get(i).copied().unwrap_or("*");
        Ok(Self {
            resource_type: enumeration(field(0), "a resource type", RESOURCE_TYPES)?,
            resource_name: pattern_field(field(1))?,
            operation: enumeration(field(2), "an operation", OPERATIONS)?,
            permission: enumeration(field(3), "a permission type", PERMISSIONS)?,
            principal: pattern_field(field(4))?,
        })
    }

    pub fn matches(&self, acl: &AclBinding<'_>) -> bool {
        self.resource_type
            .check(|t| t.eq_ignore_ascii_case(acl.resource_type))
            && self.resource_name.check(|p| p.matches(acl.resource_name))
            && self
                .operation
                .check(|o| o.eq_ignore_ascii_case(acl.operation))
            && self
                .permission
                .check(|p| p.eq_ignore_ascii_case(acl.permission))
            && self.principal.check(|p| p.matches(acl.principal))
    }
}

pub(super) fn acl_rules(value: &str) -> Result<Vec<AclRule>, ConfigError> {
    list_entries(value).map(AclRule::parse).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl<'a>(
        resource_type: &'a str,
        name: &'a str,
        operation: &'a str,
        principal: &'a str,
    ) -> AclBinding<'a> {
        AclBinding {
            resource_type,
            resource_name: name,
            operation,
            permission: "ALLOW",
            principal,
        }
    }

    #[test]
    fn acl_codes_have_kafkas_names() {
        assert_eq!(AclBinding::names(2, 3, 3), Some(("TOPIC", "READ", "ALLOW")));
        assert_eq!(
            AclBinding::names(7, 14, 2),
            Some(("USER", "DESCRIBE_TOKENS", "DENY"))
        );
        assert_eq!(AclBinding::names(1, 3, 3), None); // ANY is a filter, not a type
        assert_eq!(AclBinding::names(2, 3, 1), None);
    }

    #[test]
    fn patterns_match_whole_names() {
        let filter =
            NameFilter::parse("i", "orders.*, payments", "e", "__.*,orders-internal").unwrap();
        assert!(filter.matches("orders-eu"));
        assert!(filter.matches("payments"));
        assert!(!filter.matches("payments-v2"));
        assert!(!filter.matches("orders-internal"));
        assert!(!filter.matches("__consumer_offsets"));
        let none = NameFilter::parse("i", "", "e", "").unwrap();
        assert!(!none.matches("anything"));
    }

    #[test]
    fn a_bad_regex_names_the_key_and_the_pattern() {
        let err = NameFilter::parse("mirror.topics.include", "a(", "e", "").unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with(
                "invalid value \"a(\" for mirror.topics.include: not a valid regular expression"
            ),
            "{text}"
        );
    }

    #[test]
    fn acl_rules_with_omitted_fields() {
        let rules = acl_rules("TOPIC;orders.*, group;*;read;allow;User:(alice|bob)").unwrap();
        assert_eq!(rules.len(), 2);
        assert!(rules[0].matches(&acl("TOPIC", "orders-1", "WRITE", "User:carol")));
        assert!(!rules[0].matches(&acl("GROUP", "orders-1", "WRITE", "User:carol")));
        assert!(!rules[0].matches(&acl("TOPIC", "payments", "READ", "User:alice")));
        assert!(rules[1].matches(&acl("GROUP", "g", "READ", "User:bob")));
        assert!(!rules[1].matches(&acl("GROUP", "g", "READ", "User:carol")));
        assert!(acl_rules("*").unwrap()[0].matches(&acl(
            "CLUSTER",
            "kafka-cluster",
            "ALTER",
            "User:x"
        )));
    }

    #[test]
    fn acl_rule_errors_are_specific() {
        for (rule, needle) in [
            ("QUEUE", "not a resource type"),
            ("TOPIC;*;FLY", "not an operation"),
            ("TOPIC;*;READ;MAYBE", "not a permission type"),
            ("TOPIC;*;READ;ALLOW;User:a;extra", "expected resourceType"),
            ("TOPIC;;READ", "none may be empty"),
            ("TOPIC;(", "not a valid regular expression"),
        ] {
            let err = AclRule::parse(rule).unwrap_err().to_string();
            assert!(err.contains(needle), "{rule}: {err}");
        }
    }
}
