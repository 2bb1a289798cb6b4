//! A listener's security settings, resolved from the broker configuration
//! (with `listener.name.<listener>.` overrides) when the listener is bound,
//! so bad certificates or JAAS entries stop the broker at start-up with a
//! message naming the key.

use std::sync::Arc;
use std::time::Duration;

use ottla_client::{ClientSasl, ClientSecurity, SaslMechanism};

use super::sasl::{jaas, Mechanism, SaslSettings, ScramCredentialStore};
use super::tls::{self, ClientAuth, TlsSettings};
use super::tls_reload::ReloadableTls;
use crate::config::{keys, BrokerConfig, Key, Listener};

const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";

/// How one listener authenticates its connections.
#[derive(Clone)]
pub struct ListenerSecurity {
    /// Swapped when the listener's certificates are rotated.
    pub tls: Option<Arc<ReloadableTls>>,
    pub sasl: Option<Arc<SaslSettings>>,
    /// connection.failed.authentication.delay.ms
    pub failed_auth_delay: Duration,
}

impl ListenerSecurity {
    /// PLAINTEXT: no TLS, no SASL, every connection is User:ANONYMOUS.
    pub fn plaintext() -> Self {
        Self {
            tls: None,
            sasl: None,
            failed_auth_delay: Duration::ZERO,
        }
    }

    pub fn from_config(
        config: &BrokerConfig,
        listener: &Listener,
        credentials: Arc<dyn ScramCredentialStore>,
    ) -> Result<Self, String> {
        let name = listener.name.as_str();
        let in_listener =
            |e: String| format!("listener {name} ({}): {e}", listener.protocol.name());
        let tls = listener
            .protocol
            .uses_tls()
            .then(|| ReloadableTls::new(tls_settings(config, name)?))
            .transpose()
            .map_err(in_listener)?
            .map(Arc::new);
        let sasl = listener
            .protocol
            .uses_sasl()
            .then(|| sasl_settings(config, name, credentials))
            .transpose()
            .map_err(in_listener)?
            .map(Arc::new);
        let delay = config.get(keys::CONNECTION_FAILED_AUTHENTICATION_DELAY_MS);
        Ok(Self {
            tls,
            sasl,
            failed_auth_delay: Duration::from_millis(delay.unsigned_abs().into()),
        })
    }
}

pub(super) fn tls_settings(config: &BrokerConfig, listener: &str) -> Result<TlsSettings, String> {
    let get = |key| config.get_for_listener(listener, key);
    let client_auth = get(keys::SSL_CLIENT_AUTH);
    Ok(TlsSettings {
        keystore_type: get(keys::SSL_KEYSTORE_TYPE),
        keystore_location: config.get_for_listener(listener, keys::SSL_KEYSTORE_LOCATION),
        keystore_certificate_chain: config
            .get_for_listener(listener, keys::SSL_KEYSTORE_CERTIFICATE_CHAIN),
        keystore_key: config.get_for_listener(listener, keys::SSL_KEYSTORE_KEY),
        keystore_password: config.get_for_listener(listener, keys::SSL_KEYSTORE_PASSWORD),
        truststore_type: get(keys::SSL_TRUSTSTORE_TYPE),
        truststore_location: config.get_for_listener(listener, keys::SSL_TRUSTSTORE_LOCATION),
        truststore_certificates: config
            .get_for_listener(listener, keys::SSL_TRUSTSTORE_CERTIFICATES),
        truststore_password: config.get_for_listener(listener, keys::SSL_TRUSTSTORE_PASSWORD),
        client_auth: ClientAuth::parse(&client_auth).ok_or_else(|| {
            format!("ssl.client.auth={client_auth} is not none, requested or required")
        })?,
        enabled_protocols: config.get_for_listener(listener, keys::SSL_ENABLED_PROTOCOLS),
    })
}

fn sasl_settings(
    config: &BrokerConfig,
    listener: &str,
    credentials: Arc<dyn ScramCredentialStore>,
) -> Result<SaslSettings, String> {
    let names = config.get_for_listener(listener, keys::SASL_ENABLED_MECHANISMS);
    let mut mechanisms = Vec::new();
    for name in names.iter().filter(|n| !n.is_empty()) {
        let mechanism = Mechanism::parse(name).ok_or_else(|| {
            format!(
                "sasl.enabled.mechanisms: {name} is not supported; \
                 use PLAIN, SCRAM-SHA-256 and/or SCRAM-SHA-512"
            )
        })?;
        mechanisms.push(mechanism);
    }
    if mechanisms.is_empty() {
        return Err("sasl.enabled.mechanisms must name at least one mechanism".into());
    }
    let plain_users = if mechanisms.contains(&Mechanism::Plain) {
        plain_users(config, listener)?
    } else {
        Default::default()
    };
    let max_receive = config.get_for_listener(listener, keys::SASL_SERVER_MAX_RECEIVE_SIZE);
    Ok(SaslSettings {
        mechanisms,
        plain_users,
        reauth_ms: config.get_for_listener(listener, keys::CONNECTIONS_MAX_REAUTH_MS),
        max_receive_size: usize::try_from(max_receive).unwrap_or(usize::MAX),
        credentials,
    })
}

/// PLAIN's users: the `user_<name>="<password>"` options of the JAAS entry.
fn plain_users(
    config: &BrokerConfig,
    listener: &str,
) -> Result<std::collections::BTreeMap<String, String>, String> {
    let key = format!(
        "listener.name.{}.plain.sasl.jaas.config",
        listener.to_ascii_lowercase()
    );
    let text = config.jaas_config_for(listener, "PLAIN").ok_or_else(|| {
        format!(
            "PLAIN is enabled but neither {key} nor sasl.jaas.config is set; set it to \
                 {PLAIN_LOGIN_MODULE} required user_<name>=\"<password>\";"
        )
    })?;
    let entry = jaas::parse(&text).map_err(|e| format!("{key}: {e}"))?;
    if entry.login_module != PLAIN_LOGIN_MODULE {
        return Err(format!(
            "{key}: PLAIN needs {PLAIN_LOGIN_MODULE}, not {}",
            entry.login_module
        ));
    }
    let users: std::collections::BTreeMap<String, String> = entry
        .options
        .into_iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("user_")?.to_string(), v)))
        .collect();
    if users.is_empty() {
        return Err(format!(
            "{key}: no user_<name>=\"<password>\" option, so nobody can log in with PLAIN"
        ));
    }
    Ok(users)
}

/// How this broker's own clients (replica fetchers, transaction markers,
/// mirror-state RPCs) connect to other brokers' inter-broker listener: TLS
/// with the listener's trust store and key store, SASL with
/// `sasl.mechanism.inter.broker.protocol` and this broker's login from the
/// listener's JAAS entry (`username`/`password`).
pub fn inter_broker_client(config: &BrokerConfig) -> Result<ClientSecurity, String> {
    let name = config
        .inter_broker_listener_name
        .as_deref()
        .unwrap_or("PLAINTEXT");
    listener_client(config, name, &INTER_BROKER)
}

/// How this node connects to the controllers (quorum RPC, forwarded
/// writes, heartbeats): as the first of `controller.listener.names` asks,
/// logging in with `sasl.mechanism.controller.protocol`.
pub fn controller_client(config: &BrokerConfig) -> Result<ClientSecurity, String> {
    match config.get(keys::CONTROLLER_LISTENER_NAMES).first() {
        Some(name) => listener_client(config, name, &CONTROLLER),
        None => Ok(ClientSecurity::default()),
    }
}

/// One kind of connection a node opens to its peers.
struct PeerRole {
    what: &'static str,
    mechanism: Key<String>,
    who_logs_in: &'static str,
}

const INTER_BROKER: PeerRole = PeerRole {
    what: "inter-broker",
    mechanism: keys::SASL_MECHANISM_INTER_BROKER_PROTOCOL,
    who_logs_in: "brokers log in to each other",
};

const CONTROLLER: PeerRole = PeerRole {
    what: "controller",
    mechanism: keys::SASL_MECHANISM_CONTROLLER_PROTOCOL,
    who_logs_in: "nodes log in to the controllers",
};

/// The client side of listener `name`: its TLS trust and key stores, and
/// the login its JAAS entry gives this node.
fn listener_client(
    config: &BrokerConfig,
    name: &str,
    role: &PeerRole,
) -> Result<ClientSecurity, String> {
    let Some(listener) = config.listeners.iter().find(|l| l.name == name) else {
        return Ok(ClientSecurity::default());
    };
    let in_listener = |e: String| {
        format!(
            "{} listener {name} ({}): {e}",
            role.what,
            listener.protocol.name()
        )
    };
    let tls = listener
        .protocol
        .uses_tls()
        .then(|| tls::client(&tls_settings(config, name)?))
        .transpose()
        .map_err(in_listener)?;
    let sasl = listener
        .protocol
        .uses_sasl()
        .then(|| peer_login(config, name, role))
        .transpose()
        .map_err(in_listener)?;
    Ok(ClientSecurity { tls, sasl })
}

fn peer_login(
    config: &BrokerConfig,
    listener: &str,
    role: &PeerRole,
) -> Result<ClientSasl, String> {
    let name = config.get(role.mechanism);
    let mechanism = match name.as_str() {
        "PLAIN" => SaslMechanism::Plain,
        // As in Kafka: SCRAM credentials live in the metadata log, which
        // the controllers must already replicate to check them.
        "SCRAM-SHA-256" | "SCRAM-SHA-512" if role.what == CONTROLLER.what => {
            return Err(format!(
                "{}={name} cannot work: SCRAM credentials are kept in the metadata \
                 log the controllers replicate; log in to them with PLAIN",
                role.mechanism.name
            ))
        }
        "SCRAM-SHA-256" => SaslMechanism::ScramSha256,
        "SCRAM-SHA-512" => SaslMechanism::ScramSha512,
        other => {
            return Err(format!(
                "{}={other} is not supported: set PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
                role.mechanism.name
            ))
        }
    };
    let key = format!(
        "listener.name.{}.{}.sasl.jaas.config",
        listener.to_ascii_lowercase(),
        name.to_ascii_lowercase()
    );
    let jaas = config.jaas_config_for(listener, &name).ok_or_else(|| {
        format!(
            "{} with {name}: set {key} with username=\"...\" password=\"...\"",
            role.who_logs_in
        )
    })?;
    ClientSasl::from_jaas(mechanism, &jaas).map_err(|e| format!("{key}: {e}"))
}
