//! Kafka's StandardAuthorizer decision over a set of ACLs: super users,
//! literal / wildcard / prefixed resource patterns, `User:*` and `*` hosts,
//! DENY before ALLOW, the operations ALLOW ACLs imply, and the rule for
//! resources that have no ACL at all.

use std::collections::HashSet;

use ottla_controller::acls::{operation, pattern, permission, Acl, WILDCARD};

/// The authorizer's settings (`super.users`, `allow.everyone.if.no.acl.found`).
#[derive(Debug, Clone, Default)]
pub struct Rules {
    /// Principals, as `User:name`, allowed everything.
    pub super_users: HashSet<String>,
    pub allow_if_no_acl: bool,
}

/// Who asks: the principal as `type:name`, its wildcard form, and the host.
pub struct Requester<'a> {
    pub principal: &'a str,
    pub wildcard_principal: String,
    pub host: &'a str,
}

impl<'a> Requester<'a> {
    pub fn new(principal: &'a str, host: &'a str) -> Self {
        let kind = principal.split_once(':').map_or(principal, |(t, _)| t);
        Self {
            principal,
            wildcard_principal: format!("{kind}:{WILDCARD}"),
            host,
        }
    }

    fn matches(&self, acl: &Acl) -> bool {
        (acl.principal == self.principal || acl.principal == self.wildcard_principal)
            && (acl.host == self.host || acl.host == WILDCARD)
    }
}

/// Whether `acl`'s pattern covers the resource `(resource_type, name)`.
fn covers(acl: &Acl, resource_type: i8, name: &str) -> bool {
    acl.resource_type == resource_type
        && match acl.pattern_type {
            pattern::LITERAL => acl.resource_name == name || acl.resource_name == WILDCARD,
            pattern::PREFIXED => name.starts_with(&acl.resource_name),
            _ => false,
        }
}

/// Whether an ACL with `acl_op` and `perm` applies to `op`. ALLOW ACLs imply
/// DESCRIBE (from READ, WRITE, DELETE, ALTER) and DESCRIBE_CONFIGS (from
/// ALTER_CONFIGS); DENY ACLs deny only their own operation (or ALL).
fn applies(acl_op: i8, perm: i8, op: i8) -> bool {
    if acl_op == operation::ALL || acl_op == op {
        return true;
    }
    perm == permission::ALLOW
        && match op {
            operation::DESCRIBE => matches!(
                acl_op,
                operation::READ | operation::WRITE | operation::DELETE | operation::ALTER
            ),
            operation::DESCRIBE_CONFIGS => acl_op == operation::ALTER_CONFIGS,
            _ => false,
        }
}

impl Rules {
    pub fn is_super_user(&self, who: &Requester) -> bool {
        self.super_users.contains(who.principal)
    }

    /// May `who` perform `op` on the resource `(resource_type, name)`?
    pub fn authorize<'a>(
        &self,
        acls: impl Iterator<Item = &'a Acl>,
        who: &Requester,
        op: i8,
        resource_type: i8,
        name: &str,
    ) -> bool {
        if self.is_super_user(who) {
            return true;
        }
        let mut any_acl = false;
        let mut allowed = false;
        for acl in acls.filter(|a| covers(a, resource_type, name)) {
            any_acl = true;
            if !who.matches(acl) || !applies(acl.operation, acl.permission, op) {
                continue;
            }
            if acl.permission == permission::DENY {
                return false;
            }
            allowed = true;
        }
        allowed || (!any_acl && self.allow_if_no_acl)
    }

    /// Kafka's authorizeByResourceType: may `who` perform `op` on at least
    /// one resource of the type? True when some ALLOW pattern is not covered
    /// by a DENY pattern (InitProducerId asks this of WRITE on topics).
    pub fn authorize_any<'a>(
        &self,
        acls: impl Iterator<Item = &'a Acl> + Clone,
        who: &Requester,
        op: i8,
        resource_type: i8,
    ) -> bool {
        // As Kafka: a hard-coded name answers for super users and for the
        // no-ACL rule.
        if self.authorize(acls.clone(), who, op, resource_type, "hardcode") {
            return true;
        }
        let relevant = acls.filter(|a| {
            a.resource_type == resource_type
                && who.matches(a)
                && (a.operation == op || a.operation == operation::ALL)
        });
        let (denies, allows): (Vec<&Acl>, Vec<&Acl>) =
            relevant.partition(|a| a.permission == permission::DENY);
        let denied = |allow: &Acl| {
            denies.iter().any(|d| match d.pattern_type {
                pattern::LITERAL => {
                    d.resource_name == WILDCARD
                        || (allow.pattern_type == pattern::LITERAL
                            && d.resource_name == allow.resource_name)
                }
                _ => allow.resource_name.starts_with(&d.resource_name),
            })
        };
        allows.into_iter().any(|a| !denied(a))
    }
}

#[cfg(test)]
mod tests {
    use ottla_controller::acls::resource;

    use super::*;

    fn acl(pt: i8, name: &str, principal: &str, host: &str, op: i8, perm: i8) -> Acl {
        Acl {
            resource_type: resource::TOPIC,
            resource_name: name.into(),
            pattern_type: pt,
            principal: principal.into(),
            host: host.into(),
            operation: op,
            permission: perm,
        }
    }

    fn allow(pt: i8, name: &str, principal: &str, op: i8) -> Acl {
        acl(pt, name, principal, "*", op, permission::ALLOW)
    }

    fn deny(pt: i8, name: &str, principal: &str, op: i8) -> Acl {
        acl(pt, name, principal, "*", op, permission::DENY)
    }

    fn check(rules: &Rules, acls: &[Acl], principal: &str, op: i8, topic: &str) -> bool {
        let who = Requester::new(principal, "10.0.0.1");
        rules.authorize(acls.iter(), &who, op, resource::TOPIC, topic)
    }

    const ALICE: &str = "User:alice";

    #[test]
    fn literal_wildcard_and_prefixed_patterns_match() {
        let r = Rules::default();
        let acls = [
            allow(pattern::LITERAL, "orders", ALICE, operation::READ),
            allow(pattern::PREFIXED, "logs-", ALICE, operation::WRITE),
            allow(pattern::LITERAL, "*", "User:bob", operation::READ),
        ];
        assert!(check(&r, &acls, ALICE, operation::READ, "orders"));
        assert!(!check(&r, &acls, ALICE, operation::READ, "orders2"));
        assert!(check(&r, &acls, ALICE, operation::WRITE, "logs-app"));
        assert!(!check(&r, &acls, ALICE, operation::WRITE, "logs"));
        assert!(!check(&r, &acls, ALICE, operation::WRITE, "orders"));
        assert!(check(&r, &acls, "User:bob", operation::READ, "anything"));
        assert!(!check(&r, &acls, "User:carol", operation::READ, "orders"));
    }

    #[test]
    fn wildcard_principals_and_hosts_match() {
        let r = Rules::default();
        let acls = [
            allow(pattern::LITERAL, "orders", "User:*", operation::READ),
            acl(
                pattern::LITERAL,
                "orders",
                ALICE,
                "10.0.0.9",
                operation::WRITE,
                permission::ALLOW,
            ),
        ];
        assert!(check(&r, &acls, "User:anyone", operation::READ, "orders"));
        assert!(
            !check(&r, &acls, ALICE, operation::WRITE, "orders"),
            "other host"
        );
        let who = Requester::new(ALICE, "10.0.0.9");
        assert!(r.authorize(
            acls.iter(),
            &who,
            operation::WRITE,
            resource::TOPIC,
            "orders"
        ));
    }

    #[test]
    fn deny_beats_allow() {
        let r = Rules::default();
        let acls = [
            allow(pattern::PREFIXED, "", ALICE, operation::ALL),
            deny(pattern::LITERAL, "secret", "User:*", operation::READ),
        ];
        assert!(check(&r, &acls, ALICE, operation::READ, "orders"));
        assert!(!check(&r, &acls, ALICE, operation::READ, "secret"));
        assert!(check(&r, &acls, ALICE, operation::WRITE, "secret"));
        // DENY of READ does not deny the DESCRIBE it would imply as ALLOW.
        assert!(check(&r, &acls, ALICE, operation::DESCRIBE, "secret"));
        let all = [
            allow(pattern::LITERAL, "t", ALICE, operation::READ),
            deny(pattern::LITERAL, "*", ALICE, operation::ALL),
        ];
        assert!(!check(&r, &all, ALICE, operation::READ, "t"));
        assert!(!check(&r, &all, ALICE, operation::DESCRIBE, "t"));
    }

    #[test]
    fn allow_acls_imply_describe_and_describe_configs() {
        let r = Rules::default();
        for op in [
            operation::READ,
            operation::WRITE,
            operation::DELETE,
            operation::ALTER,
        ] {
            let acls = [allow(pattern::LITERAL, "t", ALICE, op)];
            assert!(check(&r, &acls, ALICE, operation::DESCRIBE, "t"), "op {op}");
        }
        let acls = [allow(pattern::LITERAL, "t", ALICE, operation::CREATE)];
        assert!(!check(&r, &acls, ALICE, operation::DESCRIBE, "t"));
        let acls = [allow(
            pattern::LITERAL,
            "t",
            ALICE,
            operation::ALTER_CONFIGS,
        )];
        assert!(check(&r, &acls, ALICE, operation::DESCRIBE_CONFIGS, "t"));
        assert!(!check(&r, &acls, ALICE, operation::ALTER, "t"));
        let acls = [allow(pattern::LITERAL, "t", ALICE, operation::ALL)];
        assert!(check(&r, &acls, ALICE, operation::DELETE, "t"));
    }

    #[test]
    fn super_users_and_the_no_acl_rule() {
        let mut r = Rules {
            super_users: HashSet::from(["User:admin".to_string()]),
            allow_if_no_acl: false,
        };
        let acls = [deny(pattern::LITERAL, "*", "User:*", operation::ALL)];
        assert!(check(&r, &acls, "User:admin", operation::WRITE, "t"));
        assert!(!check(&r, &acls, ALICE, operation::WRITE, "t"));
        assert!(!check(&r, &[], ALICE, operation::WRITE, "t"));
        r.allow_if_no_acl = true;
        assert!(check(&r, &[], ALICE, operation::WRITE, "t"));
        // Any ACL on the resource, even for someone else, ends the rule.
        let other = [allow(pattern::LITERAL, "t", "User:bob", operation::READ)];
        assert!(!check(&r, &other, ALICE, operation::WRITE, "t"));
        assert!(check(&r, &other, ALICE, operation::WRITE, "u"));
    }

    #[test]
    fn authorize_any_looks_for_an_allow_not_covered_by_a_deny() {
        let r = Rules::default();
        let who = Requester::new(ALICE, "h");
        let any =
            |acls: &[Acl]| r.authorize_any(acls.iter(), &who, operation::WRITE, resource::TOPIC);
        assert!(!any(&[]));
        assert!(any(&[allow(
            pattern::PREFIXED,
            "app-",
            ALICE,
            operation::WRITE
        )]));
        assert!(!any(&[allow(
            pattern::PREFIXED,
            "app-",
            ALICE,
            operation::READ
        )]));
        assert!(!any(&[
            allow(pattern::PREFIXED, "app-x", ALICE, operation::WRITE),
            deny(pattern::PREFIXED, "app-", ALICE, operation::WRITE),
        ]));
        assert!(any(&[
            allow(pattern::LITERAL, "a", ALICE, operation::WRITE),
            deny(pattern::LITERAL, "b", ALICE, operation::WRITE),
        ]));
        assert!(!any(&[
            allow(pattern::LITERAL, "a", ALICE, operation::WRITE),
            deny(pattern::LITERAL, "*", "User:*", operation::ALL),
        ]));
    }
}
