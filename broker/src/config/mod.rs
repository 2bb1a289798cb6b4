//! Kafka-style broker configuration: `server.properties` plus `--override
//! key=value`, checked against a table of known keys ([`defs`]).
//!
//! Unknown keys are errors naming the key, except keys Kafka accepts that
//! Ottla ignores ([`ignored`]), which are reported through
//! [`BrokerConfig::ignored_keys`] for a warning. Without a file, every default
//! applies and Ottla runs a single combined broker+controller node.

mod defs;
mod describe;
mod ignored;
mod listener_overrides;
mod listeners;
mod per_ip_overrides;
mod value;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use ottla_protocol::properties;
use thiserror::Error;

pub use defs::keys;
use defs::ConfigDef;
pub use describe::{ConfigEntry, ConfigSource, ConfigSynonym};
pub use listeners::{Endpoint, Listener, QuorumVoter, SecurityProtocol};
pub use ottla_protocol::properties::SyntaxError;
pub use per_ip_overrides::parse_per_ip_overrides;
pub use value::{ConfigType, FromValue, Key, Value};

/// Kafka's synonym group of broker key `name`, in precedence order
/// (`log.retention.ms`, `.minutes`, `.hours`), if it belongs to one.
pub fn synonym_group(name: &str) -> Option<&'static [&'static str]> {
    defs::SYNONYMS.iter().copied().find(|g| g.contains(&name))
}

/// Whether `key` is a known `listener.name.<listener>.<key>` setting.
pub fn is_listener_scoped(key: &str) -> bool {
    listener_overrides::split(key)
        .is_some_and(|(_, rest)| listener_overrides::scoped_def(rest).is_some())
}

/// Whether `key` is a listener's key store or trust store setting
/// (`listener.name.<l>.ssl.keystore.location`, ...), which Kafka lets change
/// per broker at runtime to rotate certificates.
pub fn is_reloadable_tls_key(key: &str) -> bool {
    listener_overrides::split(key).is_some_and(|(_, rest)| listener_overrides::is_tls_store(rest))
}

/// The default of broker key `name`: `None` when Ottla does not know the key,
/// `Some(None)` when its default is null (`log.retention.ms`).
pub fn default_of(name: &str) -> Option<Option<&'static str>> {
    defs::def(name).map(|d| d.default)
}

/// Where a setting came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    File { path: PathBuf, line: usize },
    Override,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File { path, line } => write!(f, "{} line {line}", path.display()),
            Self::Override => f.write_str("--override"),
        }
    }
}

/// One `key=value` as given, before validation.
#[derive(Debug, Clone)]
pub struct Setting {
    pub key: String,
    pub value: String,
    pub origin: Origin,
}

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Syntax { path: PathBuf, source: SyntaxError },
    #[error("unknown config key '{key}' ({origin})")]
    UnknownKey { key: String, origin: Origin },
    #[error("invalid value '{value}' for {key} ({origin}): {reason}")]
    InvalidValue {
        key: String,
        value: String,
        origin: Origin,
        reason: String,
    },
    #[error("invalid {key}: {reason}")]
    Invalid { key: &'static str, reason: String },
}

fn invalid(key: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        reason: reason.into(),
    }
}

/// A key's value and whether it was set or defaulted.
#[derive(Debug, Clone)]
struct Resolved {
    value: Option<Value>,
    source: ConfigSource,
}

/// Which KRaft roles this process plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessRoles {
    pub broker: bool,
    pub controller: bool,
}

/// The validated broker configuration. Structural settings are resolved into
/// fields; every key is readable, typed, through [`BrokerConfig::get`].
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub node_id: i32,
    pub roles: ProcessRoles,
    /// Every listener, controller listeners included.
    pub listeners: Vec<Listener>,
    /// What clients and other brokers are told to connect to.
    pub advertised_listeners: Vec<Listener>,
    /// Controller endpoints this node publishes to the quorum (KIP-853).
    pub advertised_controller_listeners: Vec<Listener>,
    pub controller_listener_names: Vec<String>,
    /// The listener brokers replicate over; `None` on controller-only nodes.
    pub inter_broker_listener_name: Option<String>,
    pub quorum_voters: Vec<QuorumVoter>,
    pub quorum_bootstrap_servers: Vec<Endpoint>,
    pub log_dirs: Vec<PathBuf>,
    pub metadata_log_dir: PathBuf,
    pub metrics_listener: Option<Endpoint>,
    /// log.retention.{ms,minutes,hours} by Kafka's precedence; -1 is unlimited.
    pub log_retention_ms: i64,
    /// log.roll.{ms,hours}.
    pub log_roll_ms: i64,
    /// log.roll.jitter.{ms,hours}.
    pub log_roll_jitter_ms: i64,
    /// log.flush.interval.ms, defaulting to log.flush.scheduler.interval.ms.
    pub log_flush_interval_ms: i64,
    /// offsets.retention.minutes in milliseconds.
    pub offsets_retention_ms: i64,
    values: BTreeMap<&'static str, Resolved>,
    /// `listener.name.<listener>.<key>` settings: (LISTENER, key) -> value.
    listener_values: BTreeMap<(String, String), Value>,
    ignored: Vec<String>,
}

impl BrokerConfig {
    /// Reads `file` (if any), applies `overrides` on top, and validates.
    pub fn load(file: Option<&Path>, overrides: &[(String, String)]) -> Result<Self, ConfigError> {
        let mut settings = Vec::new();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.to_owned(),
                source,
            })?;
            let props = properties::parse(&text).map_err(|source| ConfigError::Syntax {
                path: path.to_owned(),
                source,
            })?;
            settings.extend(props.into_iter().map(|p| Setting {
                key: p.key,
                value: p.value,
                origin: Origin::File {
                    path: path.to_owned(),
                    line: p.line,
                },
            }));
        }
        settings.extend(overrides.iter().map(|(key, value)| Setting {
            key: key.clone(),
            value: value.clone(),
            origin: Origin::Override,
        }));
        Self::from_settings(settings)
    }

    /// The configuration of `static_values` (see [`static_values`](Self::static_values))
    /// with `dynamic` values on top: how dynamic broker configs are
    /// type-checked and applied.
    pub fn layered(
        static_values: &BTreeMap<String, String>,
        dynamic: &BTreeMap<String, String>,
    ) -> Result<Self, ConfigError> {
        let settings = static_values
            .iter()
            .chain(dynamic)
            .map(|(key, value)| Setting {
                key: key.clone(),
                value: value.clone(),
                origin: Origin::Override,
            })
            .collect();
        Self::from_settings(settings)
    }

    /// Validates settings (later ones win) over the defaults.
    pub fn from_settings(settings: Vec<Setting>) -> Result<Self, ConfigError> {
        let mut values = defaults();
        let mut listener_values = BTreeMap::new();
        let mut ignored = Vec::new();
        for s in settings {
            if let Some((listener, rest)) = listener_overrides::split(&s.key) {
                match listener_overrides::scoped_def(rest) {
                    Some(def) => {
                        let value = parse_setting(def, &s)?;
                        listener_values.insert((listener, rest.to_string()), value);
                    }
                    None if ignored::is_ignored(rest) => ignored.push(s.key),
                    None => {
                        return Err(ConfigError::UnknownKey {
                            key: s.key,
                            origin: s.origin,
                        })
                    }
                }
                continue;
            }
            let Some(def) = defs::def(&s.key) else {
                if ignored::is_ignored(&s.key) {
                    ignored.push(s.key);
                    continue;
                }
                return Err(ConfigError::UnknownKey {
                    key: s.key,
                    origin: s.origin,
                });
            };
            let value = parse_setting(def, &s)?;
            values.insert(
                def.name,
                Resolved {
                    value: Some(value),
                    source: ConfigSource::Static,
                },
            );
        }
        ignored.sort();
        ignored.dedup();
        Self::resolve(values, listener_values, ignored)
    }

    /// The value of a TLS/SASL key for `listener`: its
    /// `listener.name.<listener>.` setting if there is one, else the key's.
    pub fn get_for_listener<T: FromValue>(&self, listener: &str, key: Key<T>) -> T {
        let scoped = self
            .listener_values
            .get(&(listener.to_string(), key.name.to_string()));
        match scoped {
            Some(value) => T::from_value(Some(value)).unwrap_or_else(|| {
                panic!(
                    "config key table and typed handle disagree for {}",
                    key.name
                )
            }),
            None => self.get(key),
        }
    }

    /// The JAAS config of `mechanism` (e.g. PLAIN) on `listener`:
    /// `listener.name.<listener>.<mechanism>.sasl.jaas.config`, else
    /// `sasl.jaas.config`.
    pub fn jaas_config_for(&self, listener: &str, mechanism: &str) -> Option<String> {
        let rest = format!("{}.sasl.jaas.config", mechanism.to_ascii_lowercase());
        match self.listener_values.get(&(listener.to_string(), rest)) {
            Some(value) => Some(value.to_string()),
            None => self.get(keys::SASL_JAAS_CONFIG),
        }
    }

    /// The `listener.name.<listener>.` settings of `listener` that only
    /// apply when it is bound: every scoped key but its key and trust
    /// stores (which are reloaded) and its connection limits, rendered as
    /// DescribeConfigs does.
    pub fn listener_bind_settings(&self, listener: &str) -> BTreeMap<&str, String> {
        self.listener_values
            .iter()
            .filter(|((l, rest), _)| {
                l == listener && !listener_overrides::applies_to_bound_listener(rest)
            })
            .map(|((_, rest), value)| (rest.as_str(), value.to_string()))
            .collect()
    }

    /// `listener`'s own `listener.name.<listener>.` value of `key`, if it
    /// has one (no fallback to the broker-wide value).
    pub fn scoped<T: FromValue>(&self, listener: &str, key: Key<T>) -> Option<T> {
        self.listener_values
            .get(&(listener.to_string(), key.name.to_string()))
            .and_then(|value| T::from_value(Some(value)))
    }

    /// The value of any key, typed by its handle.
    pub fn get<T: FromValue>(&self, key: Key<T>) -> T {
        let value = self.values.get(key.name).and_then(|r| r.value.as_ref());
        T::from_value(value).unwrap_or_else(|| {
            panic!(
                "config key table and typed handle disagree for {}",
                key.name
            )
        })
    }

    /// Every known key that was set (file or override), by Kafka name, with
    /// its value normalised as DescribeConfigs renders it. Broker-level topic
    /// defaults (log.retention.ms, ...) are resolved from these.
    pub fn static_values(&self) -> BTreeMap<String, String> {
        let scoped = self
            .listener_values
            .iter()
            .map(|((listener, rest), value)| {
                (listener_overrides::key(listener, rest), value.to_string())
            });
        self.values
            .iter()
            .filter(|(_, r)| r.source == ConfigSource::Static)
            .filter_map(|(name, r)| Some((name.to_string(), r.value.as_ref()?.to_string())))
            .chain(scoped)
            .collect()
    }

    /// Keys Kafka accepts that were set but are ignored by Ottla.
    pub fn ignored_keys(&self) -> &[String] {
        &self.ignored
    }

    /// Listeners serving client and inter-broker traffic.
    pub fn broker_listeners(&self) -> impl Iterator<Item = &Listener> {
        self.listeners
            .iter()
            .filter(|l| !self.controller_listener_names.contains(&l.name))
    }

    /// Listeners serving the controller quorum.
    pub fn controller_listeners(&self) -> impl Iterator<Item = &Listener> {
        self.listeners
            .iter()
            .filter(|l| self.controller_listener_names.contains(&l.name))
    }

    /// Replaces port 0 (bind to any free port) with the port actually bound,
    /// in both listeners and advertised listeners.
    pub fn set_bound_port(&mut self, listener: &str, port: u16) {
        for l in self
            .listeners
            .iter_mut()
            .chain(self.advertised_listeners.iter_mut())
            .chain(self.advertised_controller_listeners.iter_mut())
        {
            if l.name == listener && l.endpoint.port == 0 {
                l.endpoint.port = port;
            }
        }
    }

    fn resolve(
        values: BTreeMap<&'static str, Resolved>,
        listener_values: BTreeMap<(String, String), Value>,
        ignored: Vec<String>,
    ) -> Result<Self, ConfigError> {
        let mut config = Self {
            node_id: 0,
            roles: ProcessRoles {
                broker: false,
                controller: false,
            },
            listeners: Vec::new(),
            advertised_listeners: Vec::new(),
            advertised_controller_listeners: Vec::new(),
            controller_listener_names: Vec::new(),
            inter_broker_listener_name: None,
            quorum_voters: Vec::new(),
            quorum_bootstrap_servers: Vec::new(),
            log_dirs: Vec::new(),
            metadata_log_dir: PathBuf::new(),
            metrics_listener: None,
            log_retention_ms: 0,
            log_roll_ms: 0,
            log_roll_jitter_ms: 0,
            log_flush_interval_ms: 0,
            offsets_retention_ms: 0,
            values,
            listener_values,
            ignored,
        };
        config.resolve_identity()?;
        config.resolve_listeners()?;
        config.resolve_quorum()?;
        config.resolve_storage()?;
        config.resolve_single_node();
        config.resolve_durations();
        Ok(config)
    }

    fn resolve_identity(&mut self) -> Result<(), ConfigError> {
        let roles = self.get(keys::PROCESS_ROLES);
        let has = |r: &str| roles.iter().any(|x| x == r);
        if roles.is_empty() || roles.iter().filter(|r| !r.is_empty()).count() != roles.len() {
            return Err(invalid(
                "process.roles",
                "must list broker, controller or both",
            ));
        }
        if roles.len() != usize::from(has("broker")) + usize::from(has("controller")) {
            return Err(invalid("process.roles", "lists a role twice"));
        }
        self.roles = ProcessRoles {
            broker: has("broker"),
            controller: has("controller"),
        };
        self.node_id = self.get(keys::NODE_ID);
        let broker_id = self.get(keys::BROKER_ID);
        if broker_id != -1 && broker_id != self.node_id {
            return Err(invalid(
                "broker.id",
                format!("{broker_id} differs from node.id {}", self.node_id),
            ));
        }
        if let Some(id) = self.get(keys::CLUSTER_ID) {
            let ok = id.len() == 22
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !ok {
                return Err(invalid(
                    "cluster.id",
                    format!("'{id}' is not a 22-character base64url UUID"),
                ));
            }
        }
        Ok(())
    }

    fn resolve_listeners(&mut self) -> Result<(), ConfigError> {
        let map = listeners::parse_protocol_map(&self.get(keys::LISTENER_SECURITY_PROTOCOL_MAP))
            .map_err(|e| invalid("listener.security.protocol.map", e))?;
        self.listeners = listeners::parse_listeners(&self.get(keys::LISTENERS), &map)
            .map_err(|e| invalid("listeners", e))?;
        self.controller_listener_names = self
            .get(keys::CONTROLLER_LISTENER_NAMES)
            .into_iter()
            .filter(|n| !n.is_empty())
            .map(|n| n.to_ascii_uppercase())
            .collect();
        let listed = |name: &String| self.listeners.iter().any(|l| &l.name == name);
        if self.controller_listener_names.is_empty() {
            return Err(invalid(
                "controller.listener.names",
                "must name at least one listener",
            ));
        }
        if self.roles.controller {
            if let Some(missing) = self.controller_listener_names.iter().find(|n| !listed(n)) {
                return Err(invalid(
                    "controller.listener.names",
                    format!("{missing} is not in listeners"),
                ));
            }
        } else if let Some(n) = self.controller_listener_names.iter().find(|n| listed(n)) {
            return Err(invalid(
                "controller.listener.names",
                format!("{n} must not be in listeners when process.roles lacks controller"),
            ));
        }
        self.resolve_advertised(&map)?;
        if self.roles.broker {
            if self.advertised_listeners.is_empty() {
                return Err(invalid(
                    "listeners",
                    "a broker needs a non-controller listener",
                ));
            }
            self.resolve_inter_broker_listener()?;
        }
        // The scheme is optional: `http://0.0.0.0:9308` or `0.0.0.0:9308`.
        self.metrics_listener = self
            .get(keys::METRICS_LISTENER)
            .map(|s| listeners::parse_endpoint(s.strip_prefix("http://").unwrap_or(&s)))
            .transpose()
            .map_err(|e| invalid("metrics.listener", e))?;
        Ok(())
    }

    /// advertised.listeners, or the listeners themselves, with an empty host
    /// replaced by this machine's host name (as Kafka does). Controller
    /// listeners may be advertised too (KIP-853), on controllers only.
    fn resolve_advertised(
        &mut self,
        map: &BTreeMap<String, SecurityProtocol>,
    ) -> Result<(), ConfigError> {
        let key = "advertised.listeners";
        let mut advertised = match self.get(keys::ADVERTISED_LISTENERS) {
            Some(uris) => {
                let parsed = listeners::parse_listeners(&uris, map).map_err(|e| invalid(key, e))?;
                if let Some(l) = parsed
                    .iter()
                    .find(|a| !self.listeners.iter().any(|l| l.name == a.name))
                {
                    return Err(invalid(key, format!("{} is not in listeners", l.name)));
                }
                parsed
            }
            None => self.listeners.clone(),
        };
        for l in &mut advertised {
            match l.endpoint.host.as_str() {
                "0.0.0.0" | "::" => {
                    return Err(invalid(
                        key,
                        format!(
                        "{} would advertise the non-routable address {}; set advertised.listeners",
                        l.name, l.endpoint.host
                    ),
                    ))
                }
                "" => l.endpoint.host = local_host_name(),
                _ => {}
            }
        }
        // As Kafka, a controller listener advertised.listeners does not name
        // is published at its listeners address.
        for l in &self.listeners {
            let is_controller = self.controller_listener_names.contains(&l.name);
            if is_controller && !advertised.iter().any(|a| a.name == l.name) {
                let mut l = l.clone();
                if l.endpoint.host.is_empty() {
                    l.endpoint.host = local_host_name();
                }
                advertised.push(l);
            }
        }
        let (controller, broker) = advertised
            .into_iter()
            .partition(|l| self.controller_listener_names.contains(&l.name));
        self.advertised_listeners = broker;
        self.advertised_controller_listeners = controller;
        Ok(())
    }

    fn resolve_inter_broker_listener(&mut self) -> Result<(), ConfigError> {
        let explicit = self.get(keys::INTER_BROKER_LISTENER_NAME);
        let protocol_set =
            self.values["security.inter.broker.protocol"].source == ConfigSource::Static;
        let name = match explicit {
            Some(_) if protocol_set => {
                return Err(invalid(
                    "inter.broker.listener.name",
                    "set either it or security.inter.broker.protocol, not both",
                ))
            }
            Some(name) => name.to_ascii_uppercase(),
            None => self.get(keys::SECURITY_INTER_BROKER_PROTOCOL),
        };
        if !self.advertised_listeners.iter().any(|l| l.name == name) {
            return Err(invalid(
                "inter.broker.listener.name",
                format!("{name} is not an advertised broker listener"),
            ));
        }
        self.inter_broker_listener_name = Some(name);
        Ok(())
    }

    fn resolve_quorum(&mut self) -> Result<(), ConfigError> {
        self.quorum_voters = listeners::parse_voters(&self.get(keys::CONTROLLER_QUORUM_VOTERS))
            .map_err(|e| invalid("controller.quorum.voters", e))?;
        self.quorum_bootstrap_servers = self
            .get(keys::CONTROLLER_QUORUM_BOOTSTRAP_SERVERS)
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| listeners::parse_endpoint(s))
            .collect::<Result<_, _>>()
            .map_err(|e| invalid("controller.quorum.bootstrap.servers", e))?;
        // Ottla's single-node voter default must not shadow a dynamic quorum
        // (KIP-853) configured through bootstrap servers alone.
        let voters_set = self.values["controller.quorum.voters"].source == ConfigSource::Static;
        if !voters_set && !self.quorum_bootstrap_servers.is_empty() {
            self.quorum_voters.clear();
        }
        if self.quorum_voters.is_empty() && self.quorum_bootstrap_servers.is_empty() {
            return Err(invalid(
                "controller.quorum.voters",
                "set it or controller.quorum.bootstrap.servers",
            ));
        }
        if self.roles.controller
            && self.dynamic_quorum()
            && !self
                .own_controller_endpoint()
                .is_some_and(|e| !matches!(e.host.as_str(), "0.0.0.0" | "::"))
        {
            return Err(invalid(
                "advertised.listeners",
                "a controller of a dynamic quorum (controller.quorum.bootstrap.servers) publishes its first controller listener to its peers: advertise that listener with a routable host",
            ));
        }
        // A dynamic quorum's initial voters need not name a controller that
        // joins later.
        if self.roles.controller
            && !self.dynamic_quorum()
            && !self.quorum_voters.iter().any(|v| v.id == self.node_id)
        {
            return Err(invalid(
                "controller.quorum.voters",
                format!("this controller's node.id {} is not a voter", self.node_id),
            ));
        }
        if !self.roles.controller && self.quorum_voters.iter().any(|v| v.id == self.node_id) {
            return Err(invalid(
                "controller.quorum.voters",
                format!(
                    "lists this broker-only node's node.id {}: a node with process.roles=broker cannot vote; give it an id no voter has",
                    self.node_id
                ),
            ));
        }
        Ok(())
    }

    /// This controller's endpoint on its first controller listener: what it
    /// publishes to a dynamic quorum (KIP-853's default listener).
    pub fn own_controller_endpoint(&self) -> Option<&Endpoint> {
        let name = self.controller_listener_names.first()?;
        self.advertised_controller_listeners
            .iter()
            .find(|l| &l.name == name)
            .map(|l| &l.endpoint)
    }

    /// Whether the voters can change (KIP-853's `kraft.version` 1): the
    /// quorum is found through `controller.quorum.bootstrap.servers`, and
    /// `controller.quorum.voters`, if set too, names only its first voters.
    pub fn dynamic_quorum(&self) -> bool {
        !self.quorum_bootstrap_servers.is_empty()
    }

    /// The voters a new dynamic quorum starts with, by id. Those of
    /// `controller.quorum.voters` (Kafka's `kafka-storage.sh format
    /// --initial-controllers`); else this controller alone if its only
    /// bootstrap server is itself (`--standalone`); else none: this
    /// controller joins a running quorum (`--no-initial-controllers`).
    pub fn initial_voters(&self) -> Vec<(i32, Endpoint)> {
        if !self.quorum_voters.is_empty() {
            return self
                .quorum_voters
                .iter()
                .map(|v| (v.id, v.endpoint.clone()))
                .collect();
        }
        match (
            self.roles.controller,
            self.quorum_bootstrap_servers.as_slice(),
        ) {
            (true, [only]) if Some(only) == self.own_controller_endpoint() => {
                vec![(self.node_id, only.clone())]
            }
            _ => Vec::new(),
        }
    }

    /// A node alone in its cluster: both roles, and the only voter.
    pub fn is_lone_node(&self) -> bool {
        self.roles.broker
            && self.roles.controller
            && matches!(self.initial_voters().as_slice(), [(id, _)] if *id == self.node_id)
    }

    /// A lone node (both roles, the only voter) cannot place more than one
    /// replica, so the internal topics' replication settings it was not
    /// given become 1, as Kafka's sample single-node server.properties sets
    /// them; as if set there, they are static values. Any other node keeps
    /// Kafka's defaults (3 replicas, 2 in sync).
    fn resolve_single_node(&mut self) {
        if !self.is_lone_node() {
            return;
        }
        for name in SINGLE_NODE_KEYS {
            let resolved = self
                .values
                .get_mut(name)
                .expect("the single-node keys are in the key table");
            if resolved.source == ConfigSource::Default {
                let def = defs::def(name).expect("the single-node keys are in the key table");
                resolved.value = Some(Value::parse(def.ty, "1").expect("1 is an int or a short"));
                resolved.source = ConfigSource::Static;
            }
        }
    }

    fn resolve_storage(&mut self) -> Result<(), ConfigError> {
        let dirs = match self.get(keys::LOG_DIRS) {
            Some(dirs) if !dirs.is_empty() => dirs,
            _ => vec![self.get(keys::LOG_DIR)],
        };
        if dirs.iter().any(String::is_empty) {
            return Err(invalid("log.dirs", "contains an empty directory name"));
        }
        self.log_dirs = dirs.into_iter().map(PathBuf::from).collect();
        self.metadata_log_dir = match self.get(keys::METADATA_LOG_DIR) {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => self.log_dirs[0].clone(),
        };
        Ok(())
    }

    /// Kafka's precedence: the finest unit that is set wins; negative
    /// retention means unlimited.
    fn resolve_durations(&mut self) {
        const MINUTE: i64 = 60_000;
        const HOUR: i64 = 60 * MINUTE;
        let retention = self.get(keys::LOG_RETENTION_MS).unwrap_or_else(|| {
            match self.get(keys::LOG_RETENTION_MINUTES) {
                Some(minutes) => i64::from(minutes) * MINUTE,
                None => i64::from(self.get(keys::LOG_RETENTION_HOURS)) * HOUR,
            }
        });
        self.log_retention_ms = if retention < 0 { -1 } else { retention };
        self.log_roll_ms = self
            .get(keys::LOG_ROLL_MS)
            .unwrap_or_else(|| i64::from(self.get(keys::LOG_ROLL_HOURS)) * HOUR);
        self.log_roll_jitter_ms = self
            .get(keys::LOG_ROLL_JITTER_MS)
            .unwrap_or_else(|| i64::from(self.get(keys::LOG_ROLL_JITTER_HOURS)) * HOUR);
        self.log_flush_interval_ms = self
            .get(keys::LOG_FLUSH_INTERVAL_MS)
            .unwrap_or_else(|| self.get(keys::LOG_FLUSH_SCHEDULER_INTERVAL_MS));
        self.offsets_retention_ms = i64::from(self.get(keys::OFFSETS_RETENTION_MINUTES)) * MINUTE;
    }
}

/// Parses and checks one setting against its definition.
fn parse_setting(def: &ConfigDef, s: &Setting) -> Result<Value, ConfigError> {
    let bad = |reason: String| ConfigError::InvalidValue {
        key: s.key.clone(),
        value: s.value.clone(),
        origin: s.origin.clone(),
        reason,
    };
    let value = Value::parse(def.ty, &s.value).map_err(bad)?;
    def.valid.check(&value).map_err(bad)?;
    Ok(value)
}

/// The internal topics' replication settings a lone node sets to 1.
pub const SINGLE_NODE_KEYS: [&str; 7] = [
    "offsets.topic.replication.factor",
    "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
    "mirror.state.topic.replication.factor",
    "mirror.state.topic.min.isr",
    "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr",
];

/// Every key at its default.
fn defaults() -> BTreeMap<&'static str, Resolved> {
    defs::DEFS
        .iter()
        .map(|d| {
            let value = d.default.map(|raw| {
                Value::parse(d.ty, raw).expect("defaults are checked by the key table's tests")
            });
            (
                d.name,
                Resolved {
                    value,
                    source: ConfigSource::Default,
                },
            )
        })
        .collect()
}

/// This machine's host name, for listeners bound without a host.
fn local_host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

#[cfg(test)]
mod tests;
