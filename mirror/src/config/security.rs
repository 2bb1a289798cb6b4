//! How the mirror connects to the source: Kafka client settings with
//! Kafka's names, limited to what Ottla's client can do (PEM and PKCS12
//! stores; SASL PLAIN and SCRAM), so a mirror is refused at creation rather
//! than failing at its first connection.

use ottla_client::stores::{self, Certificates, KeyPair, StoreType};
use ottla_client::{ClientSasl, ClientSecurity, ClientTls};

use super::{ConfigError, Entries};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    fn parse(value: &str) -> Option<Self> {
        // Kafka accepts the names in any case.
        match value.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(Self::Plaintext),
            "SSL" => Some(Self::Ssl),
            "SASL_PLAINTEXT" => Some(Self::SaslPlaintext),
            "SASL_SSL" => Some(Self::SaslSsl),
            _ => None,
        }
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    pub fn uses_sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }
}

pub use ottla_client::SaslMechanism;

fn sasl_mechanism(value: &str) -> Result<SaslMechanism, String> {
    match value {
        "PLAIN" => Ok(SaslMechanism::Plain),
        "SCRAM-SHA-256" => Ok(SaslMechanism::ScramSha256),
        "SCRAM-SHA-512" => Ok(SaslMechanism::ScramSha512),
        "GSSAPI" | "OAUTHBEARER" => Err(format!("{value} is not supported by Ottla's client")),
        _ => Err("expected PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512".into()),
    }
}

/// A secret: kept for the connection, never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[hidden]")
    }
}

/// A key or trust store: a file (Kafka's `ssl.*.location`), or inline PEM
/// (`ssl.truststore.certificates`, `ssl.keystore.certificate.chain` +
/// `ssl.keystore.key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSource {
    File {
        path: String,
        /// `ssl.*.type`; unset, the file's contents tell PEM from PKCS12.
        store_type: Option<StoreType>,
        /// `ssl.*.password`, which opens a PKCS12 store.
        password: Option<Password>,
    },
    Inline(Password),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// None: the system's trusted roots.
    pub truststore: Option<StoreSource>,
    /// A client certificate and key, for sources that require one.
    pub keystore: Option<StoreSource>,
    /// Decrypts an encrypted private key.
    pub key_password: Option<Password>,
    /// `ssl.endpoint.identification.algorithm`: `https` (the default)
    /// checks the host name, empty turns the check off.
    pub verify_hostname: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslSettings {
    pub mechanism: SaslMechanism,
    /// `sasl.jaas.config`, parsed by the client that logs in.
    pub jaas_config: Password,
}

/// The validated client security settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceSecurity {
    pub protocol: SecurityProtocol,
    pub tls: Option<TlsSettings>,
    pub sasl: Option<SaslSettings>,
}

pub(super) const KEYS: &[&str] = &[
    "security.protocol",
    "sasl.mechanism",
    "sasl.jaas.config",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.password",
    "ssl.truststore.password",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
];

/// Keys whose values are secrets.
pub(super) const SENSITIVE_KEYS: &[&str] = &[
    "sasl.jaas.config",
    "ssl.truststore.certificates",
    "ssl.keystore.key",
    "ssl.keystore.password",
    "ssl.truststore.password",
    "ssl.key.password",
];

fn store_type(entries: &Entries<'_>, key: &'static str) -> Result<Option<StoreType>, ConfigError> {
    entries
        .get(key)
        .map(|value| {
            StoreType::parse(key, value).map_err(|reason| ConfigError::invalid(key, value, &reason))
        })
        .transpose()
}

fn store_source(
    entries: &Entries<'_>,
    location_key: &'static str,
    inline_key: &'static str,
    store: (&'static str, &'static str),
) -> Result<Option<StoreSource>, ConfigError> {
    match (entries.get(location_key), entries.get(inline_key)) {
        (Some(_), Some(_)) => Err(ConfigError::Conflict(location_key, inline_key)),
        (Some(path), None) => file_store(entries, path, store).map(Some),
        (None, Some(pem)) => Ok(Some(StoreSource::Inline(Password(pem.to_owned())))),
        (None, None) => Ok(None),
    }
}

fn file_store(
    entries: &Entries<'_>,
    path: &str,
    (type_key, password_key): (&'static str, &'static str),
) -> Result<StoreSource, ConfigError> {
    Ok(StoreSource::File {
        path: path.to_owned(),
        store_type: store_type(entries, type_key)?,
        password: entries.get(password_key).map(|p| Password(p.to_owned())),
    })
}

const KEY_STORE: (&str, &str) = ("ssl.keystore.type", "ssl.keystore.password");
const TRUST_STORE: (&str, &str) = ("ssl.truststore.type", "ssl.truststore.password");

fn tls(entries: &Entries<'_>) -> Result<TlsSettings, ConfigError> {
    // Checked even without a store to read: a mistyped type is refused.
    store_type(entries, KEY_STORE.0)?;
    store_type(entries, TRUST_STORE.0)?;
    let keystore = match (
        entries.get("ssl.keystore.certificate.chain"),
        entries.get("ssl.keystore.key"),
    ) {
        (Some(_), None) => {
            return Err(ConfigError::Requires(
                "ssl.keystore.certificate.chain",
                "ssl.keystore.key",
            ))
        }
        (None, Some(_)) => {
            return Err(ConfigError::Requires(
                "ssl.keystore.key",
                "ssl.keystore.certificate.chain",
            ))
        }
        // The chain and key travel together; the key is the secret part.
        (Some(chain), Some(key)) => {
            if entries.get("ssl.keystore.location").is_some() {
                return Err(ConfigError::Conflict(
                    "ssl.keystore.location",
                    "ssl.keystore.key",
                ));
            }
            Some(StoreSource::Inline(Password(format!("{chain}\n{key}"))))
        }
        (None, None) => entries
            .get("ssl.keystore.location")
            .map(|path| file_store(entries, path, KEY_STORE))
            .transpose()?,
    };
    let verify_hostname = match entries.get("ssl.endpoint.identification.algorithm") {
        None => true,
        Some(value) if value.eq_ignore_ascii_case("https") => true,
        Some("") => false,
        Some(value) => {
            return Err(ConfigError::invalid(
                "ssl.endpoint.identification.algorithm",
                value,
                "expected https or an empty value",
            ))
        }
    };
    Ok(TlsSettings {
        truststore: store_source(
            entries,
            "ssl.truststore.location",
            "ssl.truststore.certificates",
            TRUST_STORE,
        )?,
        keystore,
        key_password: entries
            .get("ssl.key.password")
            .map(|p| Password(p.to_owned())),
        verify_hostname,
    })
}

fn sasl(entries: &Entries<'_>) -> Result<SaslSettings, ConfigError> {
    let mechanism_value = entries.get("sasl.mechanism").unwrap_or("PLAIN");
    let mechanism = sasl_mechanism(mechanism_value)
        .map_err(|reason| ConfigError::invalid("sasl.mechanism", mechanism_value, &reason))?;
    let jaas_config = entries.get("sasl.jaas.config").ok_or(ConfigError::Missing(
        "sasl.jaas.config",
        "a SASL security.protocol",
    ))?;
    Ok(SaslSettings {
        mechanism,
        jaas_config: Password(jaas_config.to_owned()),
    })
}

/// A store's contents, read when the settings are taken up.
enum StoreContents {
    Pem(String),
    Pkcs12 {
        bytes: Vec<u8>,
        password: String,
        source: String,
    },
}

/// Reads `store`: PEM when its type says so or, with no type, when the
/// file is PEM text; PKCS12 otherwise. `(type_key, password_key)` name
/// its settings.
fn read_store(
    store: &StoreSource,
    (type_key, password_key): (&str, &str),
) -> Result<StoreContents, String> {
    let (path, store_type, password) = match store {
        StoreSource::Inline(pem) => return Ok(StoreContents::Pem(pem.expose().to_string())),
        StoreSource::File {
            path,
            store_type,
            password,
        } => (path, store_type, password),
    };
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read the store {path}: {e}"))?;
    match store_type {
        Some(StoreType::Pem) => {}
        None if stores::is_pem(&bytes) => {}
        Some(StoreType::Pkcs12) | None => {
            let password = password
                .as_ref()
                .ok_or_else(|| format!("{path} is a PKCS12 store: set {password_key}"))?;
            return Ok(StoreContents::Pkcs12 {
                bytes,
                password: password.expose().to_string(),
                source: path.clone(),
            });
        }
    }
    String::from_utf8(bytes)
        .map(StoreContents::Pem)
        .map_err(|_| format!("{path} is not PEM text: set {type_key} to its format"))
}

impl StoreContents {
    fn trusted_certificates(self) -> Result<Certificates, String> {
        match self {
            Self::Pem(text) => stores::pem_certificates(&text, "the truststore"),
            Self::Pkcs12 {
                bytes,
                password,
                source,
            } => stores::pkcs12_trust_store(&bytes, &password, &source),
        }
    }

    /// `key_password`: whether `ssl.key.password` is set, which a PKCS12
    /// store's key shares with the store.
    fn key_pair(self, key_password: bool) -> Result<KeyPair, String> {
        match self {
            Self::Pem(_) if key_password => Err(
                "encrypted PEM keys (ssl.key.password) are not supported by Ottla's client \
                 yet: give an unencrypted PEM key, or a PKCS12 key store"
                    .into(),
            ),
            // The certificate chain and the key are in the same text.
            Self::Pem(text) => stores::pem_key_pair(&text, &text),
            Self::Pkcs12 {
                bytes,
                password,
                source,
            } => stores::pkcs12_key_store(&bytes, &password, &source),
        }
    }
}

/// Settings for a protocol that does not use them are accepted and unused,
/// as Kafka clients do.
pub(super) fn parse(entries: &Entries<'_>) -> Result<SourceSecurity, ConfigError> {
    let value = entries.get("security.protocol").unwrap_or("PLAINTEXT");
    let protocol = SecurityProtocol::parse(value).ok_or_else(|| {
        ConfigError::invalid(
            "security.protocol",
            value,
            "expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
        )
    })?;
    Ok(SourceSecurity {
        protocol,
        tls: protocol.uses_tls().then(|| tls(entries)).transpose()?,
        sasl: protocol.uses_sasl().then(|| sasl(entries)).transpose()?,
    })
}

impl SourceSecurity {
    /// The settings as Ottla's client uses them. Stores are read here, so
    /// a missing file is reported when the settings are taken up.
    pub fn client_security(&self) -> Result<ClientSecurity, String> {
        let tls = match &self.tls {
            Some(tls) if self.protocol.uses_tls() => {
                if !tls.verify_hostname {
                    return Err(
                        "ssl.endpoint.identification.algorithm= (no host name check) \
                                is not supported by Ottla's client yet"
                            .into(),
                    );
                }
                let trusted = tls.truststore.as_ref().ok_or(
                    "set ssl.truststore.location or ssl.truststore.certificates: Ottla's \
                     client does not use the system's trusted roots",
                )?;
                let trusted = read_store(trusted, TRUST_STORE)?.trusted_certificates()?;
                let own = tls
                    .keystore
                    .as_ref()
                    .map(|store| read_store(store, KEY_STORE)?.key_pair(tls.key_password.is_some()))
                    .transpose()?;
                Some(ClientTls::from_der(trusted, own)?)
            }
            _ => None,
        };
        let sasl = match &self.sasl {
            Some(sasl) if self.protocol.uses_sasl() => Some(ClientSasl::from_jaas(
                sasl.mechanism,
                sasl.jaas_config.expose(),
            )?),
            _ => None,
        };
        Ok(ClientSecurity { tls, sasl })
    }
}
