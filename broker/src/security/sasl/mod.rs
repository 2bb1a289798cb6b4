//! SASL authentication (SaslHandshake / SaslAuthenticate) for
//! SASL_PLAINTEXT and SASL_SSL listeners: PLAIN against JAAS-configured
//! users, SCRAM-SHA-256/512 against credentials in the metadata log.

pub mod jaas;
pub mod plain;
pub mod scram;
pub mod session;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ottla_controller::scram::{ScramCredential, ScramMechanism};

/// A mechanism Ottla serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    Scram(ScramMechanism),
}

impl Mechanism {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "PLAIN" => Some(Self::Plain),
            "SCRAM-SHA-256" => Some(Self::Scram(ScramMechanism::Sha256)),
            "SCRAM-SHA-512" => Some(Self::Scram(ScramMechanism::Sha512)),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::Scram(m) => m.name(),
        }
    }
}

/// Why an exchange failed. `Client` messages are safe to send to the
/// client (Kafka's SaslAuthenticationException); `Hidden` reasons are only
/// logged and the client gets a generic message, so it learns nothing
/// about which users exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthError {
    Client(String),
    Hidden(String),
}

/// Where SCRAM credentials are looked up (the metadata image).
pub trait ScramCredentialStore: Send + Sync + 'static {
    fn credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential>;
}

/// A SASL listener's settings.
pub struct SaslSettings {
    pub mechanisms: Vec<Mechanism>,
    /// PLAIN users and passwords, from the JAAS `user_<name>` options.
    pub plain_users: BTreeMap<String, String>,
    /// connections.max.reauth.ms; 0 means sessions never expire.
    pub reauth_ms: i64,
    /// sasl.server.max.receive.size: the frame cap before authentication.
    pub max_receive_size: usize,
    pub credentials: Arc<dyn ScramCredentialStore>,
}

impl std::fmt::Debug for SaslSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslSettings")
            .field("mechanisms", &self.mechanisms)
            .field("plain_users", &self.plain_users.len())
            .field("reauth_ms", &self.reauth_ms)
            .finish_non_exhaustive()
    }
}

impl SaslSettings {
    /// How long a session lasts, if it expires.
    pub fn session_lifetime(&self) -> Option<Duration> {
        (self.reauth_ms > 0).then(|| Duration::from_millis(self.reauth_ms.unsigned_abs()))
    }
}
