//! One request's view of authorization: its principal and host checked
//! against the ACLs of one metadata image. With the authorizer off every
//! check passes.

use std::net::IpAddr;
use std::sync::Arc;

use ottla_controller::acls::{operation, resource, Acl};
use ottla_controller::MetadataImage;

use super::{Authorizer, Requester};
use crate::security::KafkaPrincipal;

/// The name of the single CLUSTER resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";

pub struct Access {
    authorizer: Option<Arc<Authorizer>>,
    image: Arc<MetadataImage>,
    principal: String,
    host: String,
}

impl Access {
    pub fn new(
        authorizer: Option<Arc<Authorizer>>,
        image: Arc<MetadataImage>,
        principal: &KafkaPrincipal,
        host: IpAddr,
    ) -> Self {
        Self {
            authorizer,
            image,
            principal: principal.to_string(),
            host: java_host_address(host),
        }
    }

    pub fn enabled(&self) -> bool {
        self.authorizer.is_some()
    }

    /// The image the checks read (topic ids resolve through it too).
    pub fn image(&self) -> &MetadataImage {
        &self.image
    }

    fn acls(&self) -> impl Iterator<Item = &Acl> + Clone {
        self.image.acls.values()
    }

    /// May the requester perform `op` on `(resource_type, name)`?
    pub fn allowed(&self, op: i8, resource_type: i8, name: &str) -> bool {
        let Some(a) = &self.authorizer else {
            return true;
        };
        let who = Requester::new(&self.principal, &self.host);
        a.rules
            .authorize(self.acls(), &who, op, resource_type, name)
    }

    pub fn topic(&self, op: i8, name: &str) -> bool {
        self.allowed(op, resource::TOPIC, name)
    }

    pub fn group(&self, op: i8, name: &str) -> bool {
        self.allowed(op, resource::GROUP, name)
    }

    pub fn transactional_id(&self, op: i8, name: &str) -> bool {
        self.allowed(op, resource::TRANSACTIONAL_ID, name)
    }

    pub fn cluster(&self, op: i8) -> bool {
        self.allowed(op, resource::CLUSTER, CLUSTER_NAME)
    }

    /// May the requester perform `op` on some resource of the type?
    pub fn any_of_type(&self, op: i8, resource_type: i8) -> bool {
        let Some(a) = &self.authorizer else {
            return true;
        };
        let who = Requester::new(&self.principal, &self.host);
        a.rules.authorize_any(self.acls(), &who, op, resource_type)
    }

    /// Kafka's authorized-operations bit set: the operations of `supported`
    /// (a bit per operation code) the requester may perform on the resource;
    /// none for a resource it may not even DESCRIBE.
    pub fn operations(&self, supported: i32, resource_type: i8, name: &str) -> i32 {
        if !self.allowed(operation::DESCRIBE, resource_type, name) {
            return 0;
        }
        (0..31)
            .filter(|op| supported & (1 << op) != 0)
            .filter(|op| self.allowed(*op as i8, resource_type, name))
            .fold(0, |bits, op| bits | (1 << op))
    }
}

/// The host as Kafka writes it in ACLs (Java's InetAddress.getHostAddress):
/// IPv6 in full hex groups without `::`, IPv4-mapped addresses as IPv4.
fn java_host_address(host: IpAddr) -> String {
    match host {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6
                .segments()
                .iter()
                .map(|s| format!("{s:x}"))
                .collect::<Vec<_>>()
                .join(":"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_written_as_java_writes_them() {
        let host = |s: &str| java_host_address(s.parse().unwrap());
        assert_eq!(host("10.0.0.1"), "10.0.0.1");
        assert_eq!(host("::1"), "0:0:0:0:0:0:0:1");
        assert_eq!(host("fe80::1:ab"), "fe80:0:0:0:0:0:1:ab");
        assert_eq!(host("::ffff:192.168.1.2"), "192.168.1.2");
    }
}
