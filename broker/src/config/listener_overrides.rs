//! Per-listener settings, `listener.name.<listener>.<key>`, as Kafka allows
//! for TLS and SASL keys: `listener.name.sasl_ssl.ssl.keystore.location`,
//! `listener.name.sasl_ssl.plain.sasl.jaas.config`. They take precedence
//! over the unprefixed key for that listener.

use super::defs::{self, ConfigDef};

const PREFIX: &str = "listener.name.";

/// Keys that may be set per listener, besides `<mechanism>.sasl.jaas.config`
/// and the stores of `TLS_STORES`.
const SCOPED: &[&str] = &[
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.principal.mapping.rules",
    "sasl.enabled.mechanisms",
    "sasl.server.max.receive.size",
    "connections.max.reauth.ms",
    "max.connection.creation.rate",
    "max.connections",
];

/// Scoped keys applied to a listener that is already bound (Kafka's
/// SocketServer.ListenerReconfigurableConfigs).
const RECONFIGURABLE: &[&str] = &["max.connection.creation.rate", "max.connections"];

/// The scoped keys that locate a listener's certificates: reloaded at
/// runtime (Kafka's SslConfigs.RECONFIGURABLE_CONFIGS Ottla knows).
const TLS_STORES: &[&str] = &[
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.truststore.password",
];

pub(super) fn is_tls_store(rest: &str) -> bool {
    TLS_STORES.contains(&rest)
}

/// Whether scoped key `rest` changes a bound listener: its stores are
/// reloaded, its connection limits read at each accept.
pub(super) fn applies_to_bound_listener(rest: &str) -> bool {
    is_tls_store(rest) || RECONFIGURABLE.contains(&rest)
}

/// Mechanisms whose JAAS config may be set per listener.
const JAAS_MECHANISMS: &[&str] = &["plain", "scram-sha-256", "scram-sha-512"];

/// A `listener.name.` key: the upper-cased listener name and the rest.
pub(super) fn split(key: &str) -> Option<(String, &str)> {
    let rest = key.strip_prefix(PREFIX)?;
    let (listener, key) = rest.split_once('.')?;
    (!listener.is_empty()).then(|| (listener.to_ascii_uppercase(), key))
}

/// The definition that types the scoped key `rest`, if it may be scoped.
pub(super) fn scoped_def(rest: &str) -> Option<&'static ConfigDef> {
    if let Some(mechanism) = rest.strip_suffix(".sasl.jaas.config") {
        return JAAS_MECHANISMS
            .contains(&mechanism)
            .then(|| defs::def("sasl.jaas.config"))
            .flatten();
    }
    (SCOPED.contains(&rest) || is_tls_store(rest))
        .then(|| defs::def(rest))
        .flatten()
}

/// The full key for `listener` and `rest`, as Kafka spells it (lower case).
pub(super) fn key(listener: &str, rest: &str) -> String {
    format!("{PREFIX}{}.{rest}", listener.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scoped_keys() {
        assert_eq!(
            split("listener.name.sasl_ssl.plain.sasl.jaas.config"),
            Some(("SASL_SSL".to_string(), "plain.sasl.jaas.config"))
        );
        assert_eq!(split("listener.name..x"), None);
        assert!(scoped_def("plain.sasl.jaas.config").is_some());
        assert!(scoped_def("gssapi.sasl.jaas.config").is_none());
        assert!(scoped_def("ssl.keystore.location").is_some());
        assert!(scoped_def("num.partitions").is_none());
        assert_eq!(
            key("SASL_SSL", "ssl.client.auth"),
            "listener.name.sasl_ssl.ssl.client.auth"
        );
    }
}
