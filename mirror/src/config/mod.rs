//! A mirror's configuration, as CreateMirror carries it (`--mirror-config`):
//! Kafka client settings for the source plus the mirror's own `mirror.*`
//! keys, validated once so a bad mirror is refused at creation with an
//! error that names the key.
//!
//! | Key | Default | Meaning |
//! |-----|---------|---------|
//! | `bootstrap.servers` | required | The source's `host:port` list (`[v6]:port` for IPv6). |
//! | `security.protocol` | `PLAINTEXT` | `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL`. |
//! | `sasl.mechanism` | `PLAIN` | `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`. |
//! | `sasl.jaas.config` | required with SASL | The login module line, as for any Kafka client. |
//! | `ssl.truststore.*`, `ssl.keystore.*`, `ssl.key.password` | system roots, no client certificate | PEM stores, by `location` or inline. |
//! | `ssl.endpoint.identification.algorithm` | `https` | Empty turns host-name checks off. |
//! | `mirror.topics.include` | empty | Regexes of source topics to mirror automatically; empty: only topics added by name. |
//! | `mirror.topics.exclude` | `__.*` | Regexes never mirrored automatically (internal topics); wins over include. |
//! | `mirror.groups.include` | `.*` | Regexes of groups whose offsets are synced. |
//! | `mirror.groups.exclude` | empty | Groups never synced; wins over include. |
//! | `mirror.acl.include` | `*` | ACL rules synced (see [`AclRule`]). |
//! | `mirror.topic.properties.exclude` | see [`DEFAULT_EXCLUDED_TOPIC_PROPERTIES`] | Topic configs not synced; `mirror.name` never is. |
//! | `mirror.metadata.refresh.interval.ms` | 30000 | Topic configs, partition counts and new topics. |
//! | `mirror.groups.sync.interval.ms` | 30000 | Consumer-group offsets. |
//! | `mirror.acls.sync.interval.ms` | 30000 | ACLs. |
//! | `mirror.num.fetchers` | 1 | Fetch loops (one connection and fetch session each) per source broker on every destination broker; raise it when one loop cannot keep up, as `num.replica.fetchers`. |
//! | `mirror.stop.open.transactions` | `abort` | At failover, `abort` ends a transaction the source left open with an ABORT marker; `truncate` cuts the log back to the last stable offset (the seeds' rule: drops every record after the open transaction's first). |
//!
//! Choices where KIP-1279 is silent: one interval per kind of sync (the
//! prototype has only the first; MirrorMaker 2 users expect separate ones);
//! an unknown key is refused (CreateTopics refuses unknown topic configs the
//! same way) rather than ignored, so a misspelt filter cannot silently
//! mirror the wrong topics; a null value takes the default.

mod filters;
mod security;

use std::collections::BTreeMap;
use std::time::Duration;

use thiserror::Error;

pub use filters::{AclBinding, AclField, AclRule, NameFilter, NamePattern};
pub use security::{
    Password, SaslMechanism, SaslSettings, SecurityProtocol, SourceSecurity, StoreSource,
    TlsSettings,
};

use crate::name::{InvalidMirrorName, MirrorName, MIRROR_NAME_CONFIG};

/// What `mirror.topic.properties.exclude` defaults to: configs that describe
/// the destination cluster rather than the data (throttles, timestamp
/// bounds, election and durability policy), as in the KIP-1279 prototype.
pub const DEFAULT_EXCLUDED_TOPIC_PROPERTIES: &str = "follower.replication.throttled.replicas,\
leader.replication.throttled.replicas,message.timestamp.difference.max.ms,\
message.timestamp.before.max.ms,message.timestamp.after.max.ms,message.timestamp.type,\
unclean.leader.election.enable,min.insync.replicas";

const DEFAULT_SYNC_INTERVAL_MS: u64 = 30_000;

const MIRROR_KEYS: &[&str] = &[
    "bootstrap.servers",
    "mirror.topics.include",
    "mirror.topics.exclude",
    "mirror.groups.include",
    "mirror.groups.exclude",
    "mirror.acl.include",
    "mirror.topic.properties.exclude",
    "mirror.metadata.refresh.interval.ms",
    "mirror.groups.sync.interval.ms",
    "mirror.acls.sync.interval.ms",
    "mirror.stop.open.transactions",
    "mirror.num.fetchers",
];

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    #[error(transparent)]
    Name(#[from] InvalidMirrorName),
    #[error("unknown mirror config {0:?}")]
    UnknownKey(String),
    #[error("mirror config {0} is given twice")]
    Duplicate(String),
    #[error("{0} is required with {1}")]
    Missing(&'static str, &'static str),
    #[error("{0} requires {1}")]
    Requires(&'static str, &'static str),
    #[error("{0} and {1} cannot both be set")]
    Conflict(&'static str, &'static str),
    /// `value` is shown unless the key is sensitive.
    #[error("invalid value {value:?} for {key}: {reason}")]
    Invalid {
        key: &'static str,
        value: String,
        reason: String,
    },
}

impl ConfigError {
    fn invalid(key: &'static str, value: &str, reason: &str) -> Self {
        let value = if security::SENSITIVE_KEYS.contains(&key) {
            "[hidden]".to_owned()
        } else {
            value.to_owned()
        };
        Self::Invalid {
            key,
            value,
            reason: reason.to_owned(),
        }
    }
}

/// The given entries, keys checked, null values dropped (they take defaults).
struct Entries<'a>(BTreeMap<&'a str, &'a str>);

impl<'a> Entries<'a> {
    fn new(entries: &'a [(String, Option<String>)]) -> Result<Self, ConfigError> {
        let mut map = BTreeMap::new();
        let mut seen = std::collections::BTreeSet::new();
        for (key, value) in entries {
            if !MIRROR_KEYS.contains(&key.as_str()) && !security::KEYS.contains(&key.as_str()) {
                return Err(ConfigError::UnknownKey(key.clone()));
            }
            if !seen.insert(key.as_str()) {
                return Err(ConfigError::Duplicate(key.clone()));
            }
            if let Some(value) = value {
                map.insert(key.as_str(), value.as_str());
            }
        }
        Ok(Self(map))
    }

    fn get(&self, key: &str) -> Option<&'a str> {
        self.0.get(key).copied()
    }
}

/// One `bootstrap.servers` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerAddress {
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for BrokerAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

fn broker_address(entry: &str) -> Result<BrokerAddress, String> {
    let (host, port) = entry
        .rsplit_once(':')
        .ok_or_else(|| format!("{entry:?} has no port"))?;
    let host = match host.strip_prefix('[') {
        Some(v6) => v6
            .strip_suffix(']')
            .ok_or_else(|| format!("{entry:?} has an unclosed '['"))?,
        None if host.contains(':') => {
            return Err(format!("{entry:?}: write IPv6 addresses as [address]:port"))
        }
        None => host,
    };
    if host.is_empty() {
        return Err(format!("{entry:?} has no host"));
    }
    let port = port
        .parse::<u16>()
        .ok()
        .filter(|&p| p != 0)
        .ok_or_else(|| format!("{entry:?} has no valid port (1-65535)"))?;
    Ok(BrokerAddress {
        host: host.to_owned(),
        port,
    })
}

fn bootstrap_servers(entries: &Entries<'_>) -> Result<Vec<BrokerAddress>, ConfigError> {
    const KEY: &str = "bootstrap.servers";
    let value = entries
        .get(KEY)
        .ok_or(ConfigError::Missing(KEY, "every mirror"))?;
    let servers = filters::list_entries(value)
        .map(broker_address)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|reason| ConfigError::invalid(KEY, value, &reason))?;
    if servers.is_empty() {
        return Err(ConfigError::invalid(KEY, value, "no address given"));
    }
    Ok(servers)
}

fn interval(entries: &Entries<'_>, key: &'static str) -> Result<Duration, ConfigError> {
    let Some(value) = entries.get(key) else {
        return Ok(Duration::from_millis(DEFAULT_SYNC_INTERVAL_MS));
    };
    // Kafka's int range and atLeast(1), as for its *.interval.ms configs.
    value
        .trim()
        .parse::<i32>()
        .ok()
        .filter(|&ms| ms >= 1)
        .map(|ms| Duration::from_millis(ms as u64))
        .ok_or_else(|| {
            ConfigError::invalid(key, value, "expected milliseconds from 1 to 2147483647")
        })
}

/// `mirror.num.fetchers`: 1 to 64 (a bound, so a typo cannot open
/// thousands of connections to the source).
fn fetchers_per_source_broker(entries: &Entries<'_>) -> Result<usize, ConfigError> {
    const KEY: &str = "mirror.num.fetchers";
    let Some(value) = entries.get(KEY) else {
        return Ok(1);
    };
    value
        .trim()
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=64).contains(n))
        .ok_or_else(|| ConfigError::invalid(KEY, value, "expected a number from 1 to 64"))
}

/// What failover (STOPPING) does with a transaction the source left open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OpenTransactions {
    /// Append an ABORT marker for it (KIP-1279's later design): its records
    /// become aborted, every record after it stays.
    #[default]
    Abort,
    /// Truncate the log to the last stable offset (the seeds' STOPPING
    /// step): the open transaction and everything after it are dropped.
    Truncate,
}

impl OpenTransactions {
    fn parse(entries: &Entries<'_>) -> Result<Self, ConfigError> {
        const KEY: &str = "mirror.stop.open.transactions";
        match entries.get(KEY).map(str::trim) {
            None | Some("abort") => Ok(Self::Abort),
            Some("truncate") => Ok(Self::Truncate),
            Some(other) => Err(ConfigError::invalid(
                KEY,
                other,
                "expected abort or truncate",
            )),
        }
    }
}

/// A validated mirror configuration.
#[derive(Debug, Clone)]
pub struct MirrorConfig {
    pub name: MirrorName,
    pub bootstrap_servers: Vec<BrokerAddress>,
    pub security: SourceSecurity,
    pub topics: NameFilter,
    pub groups: NameFilter,
    pub acls: Vec<AclRule>,
    /// Topic config names not synced (`mirror.name` is added).
    pub excluded_topic_properties: Vec<String>,
    pub metadata_refresh_interval: Duration,
    pub groups_sync_interval: Duration,
    pub acls_sync_interval: Duration,
    pub open_transactions_at_stop: OpenTransactions,
    /// `mirror.num.fetchers`: fetch loops per source broker.
    pub fetchers_per_source_broker: usize,
}

impl MirrorConfig {
    /// Validates a CreateMirror request's name and config entries.
    pub fn parse(name: &str, entries: &[(String, Option<String>)]) -> Result<Self, ConfigError> {
        let name = MirrorName::new(name)?;
        let entries = Entries::new(entries)?;
        let or = |key: &str, default: &'static str| entries.get(key).unwrap_or(default);
        let mut excluded_topic_properties: Vec<String> = filters::list_entries(or(
            "mirror.topic.properties.exclude",
            DEFAULT_EXCLUDED_TOPIC_PROPERTIES,
        ))
        .map(str::to_owned)
        .collect();
        if !excluded_topic_properties
            .iter()
            .any(|p| p == MIRROR_NAME_CONFIG)
        {
            excluded_topic_properties.push(MIRROR_NAME_CONFIG.to_owned());
        }
        Ok(Self {
            name,
            bootstrap_servers: bootstrap_servers(&entries)?,
            security: security::parse(&entries)?,
            topics: NameFilter::parse(
                "mirror.topics.include",
                or("mirror.topics.include", ""),
                "mirror.topics.exclude",
                or("mirror.topics.exclude", "__.*"),
            )?,
            groups: NameFilter::parse(
                "mirror.groups.include",
                or("mirror.groups.include", ".*"),
                "mirror.groups.exclude",
                or("mirror.groups.exclude", ""),
            )?,
            acls: filters::acl_rules(or("mirror.acl.include", "*"))?,
            excluded_topic_properties,
            metadata_refresh_interval: interval(&entries, "mirror.metadata.refresh.interval.ms")?,
            groups_sync_interval: interval(&entries, "mirror.groups.sync.interval.ms")?,
            acls_sync_interval: interval(&entries, "mirror.acls.sync.interval.ms")?,
            open_transactions_at_stop: OpenTransactions::parse(&entries)?,
            fetchers_per_source_broker: fetchers_per_source_broker(&entries)?,
        })
    }

    /// The client security settings among a Kafka client's properties
    /// (`--command-config`): the other keys are ignored.
    pub fn client_security_of(
        entries: &[(String, Option<String>)],
    ) -> Result<SourceSecurity, ConfigError> {
        let security: Vec<(String, Option<String>)> = entries
            .iter()
            .filter(|(k, _)| security::KEYS.contains(&k.as_str()))
            .cloned()
            .collect();
        security::parse(&Entries::new(&security)?)
    }

    /// Whether a source topic config is copied to the destination topic.
    pub fn syncs_topic_property(&self, name: &str) -> bool {
        !self.excluded_topic_properties.iter().any(|p| p == name)
    }

    /// Whether an ACL is copied from the source.
    pub fn syncs_acl(&self, acl: &AclBinding<'_>) -> bool {
        self.acls.iter().any(|rule| rule.matches(acl))
    }

    /// Whether a config key holds a secret (for DescribeConfigs-style
    /// listings and logs).
    pub fn is_sensitive(key: &str) -> bool {
        security::SENSITIVE_KEYS.contains(&key)
    }
}

#[cfg(test)]
mod tests;
