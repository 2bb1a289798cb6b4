//! Certificate rotation: a TLS listener's acceptor is swapped when its key
//! store or trust store settings change, as Kafka reloads them on a dynamic
//! per-broker `listener.name.<l>.ssl.keystore.location` (and the like).
//! Connections already open keep their session.

use std::collections::BTreeMap;
use std::sync::Arc;

use ottla_controller::records::CONFIG_RESOURCE_BROKER;
use ottla_controller::MetadataImage;
use parking_lot::{Mutex, RwLock};
use tokio_rustls::TlsAcceptor;
use tracing::{error, info};

use super::listener::tls_settings;
use super::tls::{acceptor, TlsSettings};
use crate::config::{is_reloadable_tls_key, BrokerConfig};

/// A listener's TLS acceptor and the settings it was built from.
pub struct ReloadableTls {
    current: RwLock<(TlsSettings, TlsAcceptor)>,
}

impl ReloadableTls {
    pub fn new(settings: TlsSettings) -> Result<Self, String> {
        let acceptor = acceptor(&settings)?;
        Ok(Self {
            current: RwLock::new((settings, acceptor)),
        })
    }

    /// The acceptor for the next connection.
    pub fn acceptor(&self) -> TlsAcceptor {
        self.current.read().1.clone()
    }

    /// Rebuilds the acceptor when `settings` differ from the current ones;
    /// true when it was replaced. On error the current one stays.
    pub fn update(&self, settings: TlsSettings) -> Result<bool, String> {
        if self.current.read().0 == settings {
            return Ok(false);
        }
        let acceptor = acceptor(&settings)?;
        *self.current.write() = (settings, acceptor);
        Ok(true)
    }
}

/// Checks that every TLS listener of `config` can be built: the key and
/// trust stores a dynamic change points at exist and hold what they should.
pub fn check_tls_listeners(config: &BrokerConfig) -> Result<(), String> {
    for listener in config.listeners.iter().filter(|l| l.protocol.uses_tls()) {
        tls_settings(config, &listener.name)
            .and_then(|settings| acceptor(&settings))
            .map_err(|e| format!("listener {}: {e}", listener.name))?;
    }
    Ok(())
}

/// Applies this node's dynamic TLS store settings to its TLS listeners.
pub struct TlsReloader {
    node_id: String,
    static_values: BTreeMap<String, String>,
    listeners: Mutex<Vec<(String, Arc<ReloadableTls>)>>,
    /// The dynamic TLS settings last applied.
    applied: Mutex<BTreeMap<String, String>>,
}

impl TlsReloader {
    pub fn new(
        node_id: i32,
        static_values: BTreeMap<String, String>,
        listeners: Vec<(String, Arc<ReloadableTls>)>,
    ) -> Self {
        Self {
            node_id: node_id.to_string(),
            static_values,
            listeners: Mutex::new(listeners),
            applied: Mutex::default(),
        }
    }

    /// Reloads listener `name`'s stores from now on (a listener added at
    /// runtime).
    pub fn track(&self, name: &str, tls: Arc<ReloadableTls>) {
        self.listeners.lock().push((name.to_string(), tls));
    }

    /// Forgets listener `name` (removed at runtime).
    pub fn forget(&self, name: &str) {
        self.listeners.lock().retain(|(n, _)| n != name);
    }

    /// Reloads the listeners whose stores `image` changes.
    pub fn apply(&self, image: &MetadataImage) {
        let dynamic: BTreeMap<String, String> = image
            .configs_of(CONFIG_RESOURCE_BROKER, &self.node_id)
            .into_iter()
            .flatten()
            .filter(|(key, _)| is_reloadable_tls_key(key))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        let mut applied = self.applied.lock();
        if *applied == dynamic {
            return;
        }
        let config = match BrokerConfig::layered(&self.static_values, &dynamic) {
            Ok(config) => config,
            Err(e) => {
                error!("cannot apply the dynamic TLS settings, keeping the current ones: {e}");
                return;
            }
        };
        for (name, tls) in self.listeners.lock().iter() {
            match tls_settings(&config, name).and_then(|settings| tls.update(settings)) {
                Ok(true) => info!(listener = %name, "TLS key store and trust store reloaded"),
                Ok(false) => {}
                Err(e) => error!(
                    listener = %name,
                    "cannot reload the TLS key store or trust store, keeping the current ones: {e}"
                ),
            }
        }
        *applied = dynamic;
    }
}
