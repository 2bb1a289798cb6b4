//! Kafka principals (`User:alice`): who a connection authenticated as.

use std::fmt;

/// A principal as Kafka writes it, `<type>:<name>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KafkaPrincipal {
    pub principal_type: String,
    pub name: String,
}

impl KafkaPrincipal {
    /// `User:<name>`: SASL user names and TLS subject DNs.
    pub fn user(name: impl Into<String>) -> Self {
        Self {
            principal_type: "User".to_string(),
            name: name.into(),
        }
    }

    /// `User:ANONYMOUS`: PLAINTEXT connections, and TLS ones without a
    /// client certificate.
    pub fn anonymous() -> Self {
        Self::user("ANONYMOUS")
    }
}

impl fmt::Display for KafkaPrincipal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}
