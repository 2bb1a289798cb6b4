//! SCRAM credentials as the metadata records them (salt, stored key,
//! server key, iterations; never a password), the image's credentials by
//! user and mechanism, and how a ScramCredential record changes them.

use std::collections::BTreeMap;

/// The SCRAM mechanisms, with Kafka's wire type ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    pub fn from_type(t: i8) -> Option<Self> {
        match t {
            1 => Some(Self::Sha256),
            2 => Some(Self::Sha512),
            _ => None,
        }
    }

    pub fn type_id(self) -> i8 {
        match self {
            Self::Sha256 => 1,
            Self::Sha512 => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Sha256 => "SCRAM-SHA-256",
            Self::Sha512 => "SCRAM-SHA-512",
        }
    }
}

/// One user's stored credential for one mechanism (RFC 5802 server side).
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

/// Keys and salts stay out of logs.
impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ScramCredential(iterations={}, [hidden])",
            self.iterations
        )
    }
}

/// Credentials by (user, mechanism).
pub type ScramCredentials = BTreeMap<(String, ScramMechanism), ScramCredential>;

/// Applies a ScramCredential record: `None` removes the credential.
pub(crate) fn apply(
    credentials: &mut ScramCredentials,
    user: &str,
    mechanism: ScramMechanism,
    credential: Option<&ScramCredential>,
) {
    let key = (user.to_string(), mechanism);
    match credential {
        Some(c) => {
            credentials.insert(key, c.clone());
        }
        None => {
            credentials.remove(&key);
        }
    }
}
