//! Dynamic `listeners`: binds the broker listeners a node's dynamic configs
//! add, and stops the ones they remove, as Kafka's DynamicListenerConfig
//! does. What may change was checked when the configs were stored
//! (`apis::configs::dynamic`): advertised and controller listeners stay as
//! they are, existing listeners keep their security protocol.

use std::collections::BTreeMap;
use std::sync::Arc;

use ottla_controller::records::CONFIG_RESOURCE_BROKER;
use ottla_controller::MetadataImage;
use ottla_protocol::api_versions::ApiVersionsTable;
use tracing::{error, info};

use crate::config::{BrokerConfig, Listener};
use crate::dynamic_broker_config::layered_for_node;
use crate::handlers::HandlerRegistry;
use crate::network::{bind_address, ListenerControl, ListenerSpec, RequestHandler};
use crate::security::sasl::ScramCredentialStore;
use crate::security::tls_reload::TlsReloader;
use crate::security::ListenerSecurity;

/// The APIs a kind of listener serves: its ApiVersions table and handler.
pub struct ApiService {
    pub api_versions: Arc<ApiVersionsTable>,
    pub handler: Arc<dyn RequestHandler>,
}

impl ApiService {
    pub fn new(registry: HandlerRegistry) -> Self {
        Self {
            api_versions: Arc::new(registry.api_versions().clone()),
            handler: Arc::new(registry),
        }
    }
}

/// What serving one more broker listener takes, and the listeners served.
pub struct DynamicListeners {
    node_id: i32,
    static_values: BTreeMap<String, String>,
    control: ListenerControl,
    service: ApiService,
    credentials: Arc<dyn ScramCredentialStore>,
    tls: Arc<TlsReloader>,
    applied: tokio::sync::Mutex<Applied>,
}

#[derive(Default)]
struct Applied {
    /// The broker listeners served (ports as configured, 0 too).
    listeners: Vec<Listener>,
    /// The cluster-wide and node-level dynamic configs they come from.
    dynamic: [BTreeMap<String, String>; 2],
}

impl DynamicListeners {
    /// `listeners` are the broker listeners of the static configuration
    /// (`static_values`) that `control` serves, with their ports as
    /// configured.
    pub fn new(
        node_id: i32,
        static_values: BTreeMap<String, String>,
        listeners: Vec<Listener>,
        control: ListenerControl,
        service: ApiService,
        credentials: Arc<dyn ScramCredentialStore>,
        tls: Arc<TlsReloader>,
    ) -> Self {
        Self {
            node_id,
            static_values,
            control,
            service,
            credentials,
            tls,
            applied: tokio::sync::Mutex::new(Applied {
                listeners,
                ..Applied::default()
            }),
        }
    }

    /// Serves the broker listeners `image`'s configs give this node: new
    /// ones are bound, removed ones stop, a moved one is rebound.
    pub async fn apply(&self, image: &MetadataImage) {
        let mut applied = self.applied.lock().await;
        let dynamic = [String::new(), self.node_id.to_string()].map(|level| {
            image
                .configs_of(CONFIG_RESOURCE_BROKER, &level)
                .cloned()
                .unwrap_or_default()
        });
        if applied.dynamic == dynamic {
            return;
        }
        applied.dynamic = dynamic;
        let config = match layered_for_node(image, self.node_id, &self.static_values) {
            Ok(config) => config,
            Err(e) => {
                error!("cannot apply the dynamic listeners, keeping the current ones: {e}");
                return;
            }
        };
        let wanted: Vec<Listener> = config.broker_listeners().cloned().collect();
        for gone in applied.listeners.iter().filter(|l| !wanted.contains(l)) {
            self.control.remove(&gone.name);
            self.tls.forget(&gone.name);
        }
        let mut served: Vec<Listener> = applied
            .listeners
            .iter()
            .filter(|l| wanted.contains(l))
            .cloned()
            .collect();
        for new in wanted.iter().filter(|l| !applied.listeners.contains(l)) {
            match self.serve(&config, new).await {
                Ok(()) => served.push(new.clone()),
                Err(e) => error!(
                    listener = %new.name,
                    "cannot add listener {new}: {e}; fix or remove it in the broker's dynamic listeners"
                ),
            }
        }
        applied.listeners = served;
    }

    async fn serve(&self, config: &BrokerConfig, listener: &Listener) -> Result<(), String> {
        let addr = bind_address(&listener.endpoint.host, listener.endpoint.port)
            .await
            .map_err(|e| format!("cannot resolve {}: {e}", listener.endpoint.host))?;
        let security = ListenerSecurity::from_config(config, listener, self.credentials.clone())?;
        let tls = security.tls.clone();
        let bound = self
            .control
            .add(ListenerSpec {
                name: listener.name.clone(),
                addr,
                api_versions: Arc::clone(&self.service.api_versions),
                handler: Arc::clone(&self.service.handler),
                quorum: None,
                security,
            })
            .map_err(|e| e.to_string())?;
        if let Some(tls) = tls {
            self.tls.track(&listener.name, tls);
        }
        info!(listener = %listener.name, %bound, "listener added");
        Ok(())
    }
}
