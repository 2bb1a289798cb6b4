//! `ottla`: a Kafka-wire-compatible broker.
//!
//! `ottla server` with no arguments runs a single combined broker+controller
//! node on localhost:9092 (controller on 9093) with data in ./ottla-data.

use std::io::IsTerminal;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use ottla_broker::broker::BrokerSlot;
use ottla_broker::broker::{Broker, BrokerSettings, OpenLogFilesBudget};
use ottla_broker::broker_metrics;
use ottla_broker::config::{keys, BrokerConfig, Endpoint as ConfigEndpoint, Listener};
use ottla_broker::dynamic_broker_config::{dynamic_or, DynamicConnectionLimits};
use ottla_broker::dynamic_listeners::{ApiService, DynamicListeners};
use ottla_broker::handlers::controller_apis::{ControllerNode, ControllerSlot};
use ottla_broker::handlers::credentials::MetadataCredentials;
use ottla_broker::handlers::{self, broker_registry, controller_registry};
use ottla_broker::meta_properties::{self, Unformatted};
use ottla_broker::metrics::MetricsServer;
use ottla_broker::network::{
    bind_address, ListenerSpec, QuorumEndpoint, QuorumSlot, RequestHandlerPool, Server,
    ServerSettings,
};
use ottla_broker::quotas::IpConnectionQuotas;
use ottla_broker::replication::fetcher::FetchSettings;
use ottla_broker::security::authorizer::{Access, Authorizer};
use ottla_broker::security::sasl::ScramCredentialStore;
use ottla_broker::security::tls_reload::{ReloadableTls, TlsReloader};
use ottla_broker::security::{
    controller_client, inter_broker_client, KafkaPrincipal, ListenerSecurity,
};
use ottla_client::ClientSecurity;
use ottla_controller::acls::operation;
use ottla_controller::records::Endpoint;
use ottla_controller::{
    Controller, ControllerSettings, DynamicQuorum, Node, QuorumConfig, QuorumVoters, TopicDefaults,
};
use ottla_protocol::api_versions::FinalizedFeatures;
use ottla_storage::dir_lock::DirLocks;
use ottla_storage::manager::CleanerConfig;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};
use tracing_subscriber::EnvFilter;
use uuid::Uuid;

/// Requests are decoded by kafka-protocol, which reserves whatever array
/// length a request claims; this allocator makes such reservations lazy so a
/// hostile length cannot abort the process (see the ottla-allocator crate).
#[global_allocator]
static ALLOC: ottla_allocator::NoReserveAllocator = ottla_allocator::NoReserveAllocator;

#[derive(Parser)]
#[command(name = "ottla", version, about = "A Kafka-wire-compatible broker")]
struct Cli {
    /// Log output format. The level filter comes from RUST_LOG (default info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run a broker and/or controller node.
    Server {
        /// A Kafka-style server.properties file.
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Set a config key, overriding the file; repeatable.
        #[arg(long = "override", value_name = "KEY=VALUE", value_parser = parse_override)]
        overrides: Vec<(String, String)>,
    },
    /// Manage a destination cluster's mirrors (KIP-1279; bin/kafka-mirrors.sh).
    Mirrors(ottla_mirror::cli::MirrorsArgs),
}

fn parse_override(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_owned(), v.to_owned()))
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| format!("'{s}' is not KEY=VALUE"))
}

fn main() -> ExitCode {
    ottla_allocator::tune_system_allocator();
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ottla: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Server { config, overrides } => {
            init_logging(cli.log_format);
            raise_open_file_limit();
            let config = BrokerConfig::load(config.as_deref(), &overrides)?;
            for key in config.ignored_keys() {
                warn!("ignoring config key {key}: Ottla does not implement it");
            }
            // Before anything reads them; held until the process exits.
            let dir_locks = Arc::new(lock_data_dirs(&config)?);
            // One worker per core (TOKIO_WORKER_THREADS overrides it):
            // num.io.threads bounds the requests processed at once, a
            // pool resized at runtime (network::RequestHandlerPool).
            tokio::runtime::Builder::new_multi_thread()
                .thread_name("ottla-worker")
                .enable_all()
                .build()
                .context("cannot start the async runtime")?
                .block_on(serve(config, Arc::clone(&dir_locks)))?;
            // Let go only once the runtime, and whatever it ran, is gone.
            drop(dir_locks);
            Ok(ExitCode::SUCCESS)
        }
        // A command-line tool: its own output and exit status, no logging.
        Command::Mirrors(args) => Ok(ottla_mirror::cli::run(args)),
    }
}

fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stdout().is_terminal());
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Raises the soft open-file limit to the hard one, as the JVM does for
/// Kafka: every client connection is a descriptor and so is every open
/// segment, so a soft limit of 1,024 would cap a broker at a few hundred
/// connections and partitions.
fn raise_open_file_limit() {
    let Some(mut limit) = open_file_limit() else {
        return;
    };
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            ..limit
        };
        // SAFETY: setrlimit only reads the struct given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit = raised;
        }
    }
    info!(limit = limit.rlim_cur, "open file limit");
}

fn open_file_limit() -> Option<libc::rlimit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct given.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0).then_some(limit)
}

/// `log.segment.max.open.files`; by default a quarter of the open-file
/// limit: the rest is left to connections (index files are maps and hold
/// no descriptor).
fn max_open_log_files(config: &BrokerConfig) -> OpenLogFilesBudget {
    OpenLogFilesBudget {
        configured: config.get(keys::LOG_SEGMENT_MAX_OPEN_FILES),
        automatic: open_file_limit().map_or(usize::MAX, |l| {
            usize::try_from(l.rlim_cur / 4).unwrap_or(usize::MAX)
        }),
    }
}

/// Locks the dirs this node writes, as Kafka does: a broker's log dirs and
/// the metadata dir; a controller-only node's metadata dir alone.
fn lock_data_dirs(config: &BrokerConfig) -> Result<DirLocks> {
    let log_dirs = config.log_dirs.iter().filter(|_| config.roles.broker);
    let dirs = log_dirs.chain([&config.metadata_log_dir]);
    let locks = DirLocks::acquire(dirs.map(PathBuf::as_path))?;
    for dir in locks.dirs() {
        info!(dir = %dir.display(), "locked data dir");
    }
    Ok(locks)
}

async fn serve(mut config: BrokerConfig, dir_locks: Arc<DirLocks>) -> Result<()> {
    // First: a SIGTERM that arrives while the node starts (its listeners
    // already accept) stops it cleanly instead of killing it.
    let signalled = CancellationToken::new();
    cancel_on_signal(signalled.clone())?;
    let cluster_id = format_dirs(&config).await?;
    // Checked before anything starts, so a bad login or trust store is
    // reported at once.
    let inter_broker = inter_broker_client(&config).map_err(anyhow::Error::msg)?;
    let to_controllers = controller_client(&config).map_err(anyhow::Error::msg)?;
    let slot: BrokerSlot = Arc::default();
    let kraft_version = if config.dynamic_quorum() { 1 } else { 0 };
    let finalized = ottla_broker::features::initial_finalized(kraft_version);
    let credentials: Arc<dyn ScramCredentialStore> = Arc::new(MetadataCredentials(slot.clone()));
    let quorum_slot = QuorumSlot::default();
    let server_settings = ServerSettings::from_config(&config);
    let handler_pool = server_settings.handler_pool.clone();
    let controller_slot = ControllerSlot::default();
    let controller_service = ApiService::new(
        controller_registry(controller_slot.clone(), finalized.clone())
            .context("building the controller API table")?,
    );
    let controller_specs = listener_specs(
        &config,
        config.controller_listeners(),
        &controller_service,
        Some(&quorum_slot),
        &credentials,
    )
    .await?;
    let mut tls_listeners = reloadable_tls(&controller_specs);
    let controller_server = Server::bind(server_settings.clone(), controller_specs).await?;
    // As configured, before port 0 becomes the bound port: what dynamic
    // listeners are compared with.
    let configured_broker_listeners: Vec<Listener> = config.broker_listeners().cloned().collect();
    let broker_server = if config.roles.broker {
        let service = ApiService::new(
            broker_registry(slot.clone(), finalized.clone()).context("building the API table")?,
        );
        let listeners = config.broker_listeners();
        let specs = listener_specs(&config, listeners, &service, None, &credentials).await?;
        tls_listeners.extend(reloadable_tls(&specs));
        Some((Server::bind(server_settings, specs).await?, service))
    } else {
        None
    };
    let metrics_server = match &config.metrics_listener {
        Some(_) if !config.roles.broker => {
            warn!("metrics.listener is served by nodes with the broker role only; this controller-only node ignores it");
            None
        }
        Some(endpoint) => {
            let addr = bind_address(&endpoint.host, endpoint.port)
                .await
                .with_context(|| format!("cannot resolve metrics.listener {endpoint}"))?;
            Some(MetricsServer::bind(addr).await?)
        }
        None => None,
    };
    let bound = controller_server.local_addrs().into_iter().chain(
        broker_server
            .iter()
            .flat_map(|(server, _)| server.local_addrs()),
    );
    for (name, addr) in bound {
        config.set_bound_port(&name, addr.port());
    }
    info!(
        node_id = config.node_id,
        advertised = ?config.advertised_listeners.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "ottla started"
    );
    let directory_id = metadata_directory_id(&config).await?;
    let controller_settings =
        controller_settings(&config, to_controllers, cluster_id.clone(), directory_id);
    let controller =
        tokio::task::spawn_blocking(move || Controller::start(controller_settings)).await??;
    if let Some(endpoint) = quorum_endpoint(&config, &controller) {
        let _ = quorum_slot.set(endpoint);
    }
    let _ = controller_slot.set(Arc::new(controller_node(
        &config,
        &controller,
        cluster_id.clone(),
    )));
    let tls_reloader = Arc::new(TlsReloader::new(
        config.node_id,
        config.static_values(),
        tls_listeners,
    ));
    tls_reloader.apply(&controller.image());
    tokio::spawn(reload_tls_on_change(
        tls_reloader.clone(),
        controller.subscribe(),
    ));
    // Still the static num.io.threads: nothing has resized the pool yet.
    let static_io_threads = handler_pool.size();
    tokio::spawn(resize_handler_pool_on_change(
        handler_pool.clone(),
        config.node_id,
        static_io_threads,
        controller.subscribe(),
    ));
    let stop_controller_listener = CancellationToken::new();
    let controller_listener = tokio::spawn(controller_server.run(stop_controller_listener.clone()));
    // A broker-only node serves nothing before it has the cluster's metadata.
    tokio::select! {
        () = controller.caught_up() => {}
        () = signalled.cancelled() => {}
    }
    let broker_server = broker_server.filter(|_| !signalled.is_cancelled());
    if let Some((broker_server, service)) = broker_server {
        let mut settings = broker_settings(&config, finalized.clone(), inter_broker, cluster_id);
        settings.dir_locks = Some(dir_locks.clone());
        let for_open = controller.clone();
        let broker =
            tokio::task::spawn_blocking(move || Broker::open(settings, for_open)).await??;
        let _ = slot.set(broker.clone());
        let (stop_background, background_stopped) = watch::channel(false);
        let background = tokio::spawn(
            broker
                .clone()
                .run_background(background_stopped, handlers::background_jobs()),
        );
        let stop_broker_listeners = CancellationToken::new();
        if let Some(metrics_server) = metrics_server {
            let registry = Arc::new(broker_metrics::registry(broker.clone(), handler_pool));
            tokio::spawn(metrics_server.serve(registry, stop_broker_listeners.clone()));
        }
        let broker_server = broker_server
            .with_connection_limits(Arc::new(DynamicConnectionLimits::new(
                controller.clone(),
                config.node_id,
                config.static_values(),
            )))
            .with_connection_rate_quotas(Arc::new(IpConnectionQuotas(controller.clone())));
        let (listener_control, serving) = broker_server.start(stop_broker_listeners.clone());
        let serving = tokio::spawn(serving);
        let dynamic_listeners = DynamicListeners::new(
            config.node_id,
            config.static_values(),
            configured_broker_listeners,
            listener_control,
            service,
            credentials.clone(),
            tls_reloader,
        );
        tokio::spawn(apply_listeners_on_change(
            dynamic_listeners,
            controller.subscribe(),
        ));
        signalled.cancelled().await;
        broker.controlled_shutdown().await;
        stop_broker_listeners.cancel();
        let _ = serving.await;
        let _ = stop_background.send(true);
        let _ = background.await;
        tokio::task::spawn_blocking(move || broker.shutdown()).await??;
    } else {
        signalled.cancelled().await;
    }
    stop_controller_listener.cancel();
    let _ = controller_listener.await;
    controller.close().await;
    info!("ottla stopped");
    Ok(())
}

/// The cluster id from the log dirs' `meta.properties` and `cluster.id`,
/// checked against each other and written where missing, before the
/// quorum starts: a node must never talk to its peers under an id they
/// do not share. Only a lone node makes one up when none is configured.
async fn format_dirs(config: &BrokerConfig) -> Result<String> {
    let unformatted = if config.is_lone_node() {
        Unformatted::Generate
    } else {
        Unformatted::Refuse
    };
    let log_dirs = config.log_dirs.clone();
    let metadata_dir = config.metadata_log_dir.clone();
    let node_id = config.node_id;
    let configured = config.get(keys::CLUSTER_ID);
    tokio::task::spawn_blocking(move || {
        meta_properties::ensure(
            &log_dirs,
            &metadata_dir,
            node_id,
            configured.as_deref(),
            unformatted,
        )
    })
    .await?
}

/// The `directory.id` of the metadata log's directory.
async fn metadata_directory_id(config: &BrokerConfig) -> Result<Uuid> {
    let dir = config.metadata_log_dir.clone();
    tokio::task::spawn_blocking(move || meta_properties::directory_id(&dir)).await?
}

/// The static voters, or how to find a dynamic quorum (KIP-853).
fn quorum_voters(config: &BrokerConfig, directory_id: Uuid) -> QuorumVoters {
    let node = |e: &ConfigEndpoint| Node {
        host: e.host.clone(),
        port: e.port,
    };
    let voters = |list: &[(i32, ConfigEndpoint)]| {
        list.iter()
            .map(|(id, endpoint)| (*id as u64, node(endpoint)))
            .collect()
    };
    if !config.dynamic_quorum() {
        return QuorumVoters::Static(voters(&config.initial_voters()));
    }
    QuorumVoters::Dynamic(DynamicQuorum {
        bootstrap: config.quorum_bootstrap_servers.iter().map(node).collect(),
        // A broker-only node publishes none: it never joins as a controller.
        own: config
            .own_controller_endpoint()
            .map(node)
            .unwrap_or_default(),
        directory_id,
        initial_voters: voters(&config.initial_voters()),
        auto_join: config.get(keys::CONTROLLER_QUORUM_AUTO_JOIN_ENABLE),
    })
}

/// What the controller needs from the configuration.
fn controller_settings(
    config: &BrokerConfig,
    peer_security: ClientSecurity,
    cluster_id: String,
    directory_id: Uuid,
) -> ControllerSettings {
    let ms = |v: i64| Duration::from_millis(v.clamp(1, i64::from(u32::MAX)) as u64);
    let election = ms(i64::from(
        config.get(keys::CONTROLLER_QUORUM_ELECTION_TIMEOUT_MS),
    ))
    .max(Duration::from_millis(2));
    ControllerSettings {
        node_id: config.node_id,
        dir: config.metadata_log_dir.join("__cluster_metadata-0"),
        voter: config.roles.controller,
        voters: quorum_voters(config, directory_id),
        quorum: QuorumConfig {
            // openraft waits out the leader lease (the range's top) and then
            // a random time in the range: 1.5-2 s of silence by default, as
            // KRaft's `controller.quorum.fetch.timeout.ms` of 2 s.
            election_timeout: (election / 2, election),
            write_timeout: ms(i64::from(
                config.get(keys::CONTROLLER_QUORUM_REQUEST_TIMEOUT_MS),
            ))
            .max(Duration::from_secs(5)),
            peer_security,
            cluster_id,
            ..QuorumConfig::default()
        },
        defaults: TopicDefaults {
            num_partitions: config.get(keys::NUM_PARTITIONS),
            replication_factor: i16::try_from(config.get(keys::DEFAULT_REPLICATION_FACTOR))
                .unwrap_or(1),
            min_insync_replicas: config.get(keys::MIN_INSYNC_REPLICAS),
        },
        session_timeout: ms(i64::from(config.get(keys::BROKER_SESSION_TIMEOUT_MS))),
        leader_rebalance_interval: config.get(keys::AUTO_LEADER_REBALANCE_ENABLE).then(|| {
            Duration::from_secs(
                config
                    .get(keys::LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS)
                    .unsigned_abs(),
            )
        }),
    }
}

/// The quorum's side of the controller listeners (None on a broker-only
/// node, which has none). As in Kafka, a peer needs CLUSTER_ACTION on the
/// cluster (with the authorizer on).
fn quorum_endpoint(config: &BrokerConfig, controller: &Arc<Controller>) -> Option<QuorumEndpoint> {
    let authorizer = Authorizer::from_config(config).map(Arc::new);
    let acls_from = Arc::clone(controller);
    Some(QuorumEndpoint {
        handler: controller.rpc_handler()?,
        admits: Box::new(move |principal: &KafkaPrincipal, host: IpAddr| {
            Access::new(authorizer.clone(), acls_from.image(), principal, host)
                .cluster(operation::CLUSTER_ACTION)
        }),
    })
}

/// This node as its controller listeners' APIs see it.
fn controller_node(
    config: &BrokerConfig,
    controller: &Arc<Controller>,
    cluster_id: String,
) -> ControllerNode {
    ControllerNode {
        node_id: config.node_id,
        cluster_id,
        controller: controller.clone(),
        controller_listener: config.controller_listener_names[0].clone(),
        endpoints: config
            .advertised_controller_listeners
            .iter()
            .map(|l| (l.name.clone(), l.endpoint.host.clone(), l.endpoint.port))
            .collect(),
        rack: config.get(keys::BROKER_RACK),
        authorizer: Authorizer::from_config(config).map(Arc::new),
    }
}

/// What the broker core needs from the configuration.
fn broker_settings(
    config: &BrokerConfig,
    finalized_features: Arc<FinalizedFeatures>,
    inter_broker: ClientSecurity,
    cluster_id: String,
) -> BrokerSettings {
    let ms = |v: i64| Duration::from_millis(v.clamp(1, i64::from(u32::MAX)) as u64);
    BrokerSettings {
        node_id: config.node_id,
        log_dirs: config.log_dirs.clone(),
        metadata_dir: config.metadata_log_dir.clone(),
        cluster_id: Some(cluster_id),
        advertised: config
            .advertised_listeners
            .iter()
            .map(|l| Endpoint {
                listener: l.name.clone(),
                host: l.endpoint.host.clone(),
                port: l.endpoint.port,
                security_protocol: l.protocol.name().to_string(),
            })
            .collect(),
        finalized_features,
        controller_listener: config
            .controller_listener_names
            .first()
            .cloned()
            .unwrap_or_else(|| "CONTROLLER".to_string()),
        rack: config.get(keys::BROKER_RACK),
        rack_aware_reads: config.get(keys::REPLICA_SELECTOR_CLASS).is_some(),
        auto_create_topics: config.get(keys::AUTO_CREATE_TOPICS_ENABLE),
        delete_topic_enable: config.get(keys::DELETE_TOPIC_ENABLE),
        num_partitions: config.get(keys::NUM_PARTITIONS),
        default_replication_factor: i16::try_from(config.get(keys::DEFAULT_REPLICATION_FACTOR))
            .unwrap_or(1),
        fetch_session_slots: usize::try_from(
            config.get(keys::MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS),
        )
        .unwrap_or(0),
        retention_check_interval: ms(config.get(keys::LOG_RETENTION_CHECK_INTERVAL_MS)),
        flush_check_interval: ms(config.get(keys::LOG_FLUSH_SCHEDULER_INTERVAL_MS).min(1000)),
        max_open_log_files: max_open_log_files(config),
        checkpoint_interval: ms(i64::from(
            config.get(keys::LOG_FLUSH_OFFSET_CHECKPOINT_INTERVAL_MS),
        )),
        cleaner_backoff: ms(config.get(keys::LOG_CLEANER_BACKOFF_MS)),
        cleaner: CleanerConfig {
            threads: usize::try_from(config.get(keys::LOG_CLEANER_THREADS)).unwrap_or(0),
            io_max_bytes_per_second: config.get(keys::LOG_CLEANER_IO_MAX_BYTES_PER_SECOND),
            dedupe_buffer_size: u64::try_from(config.get(keys::LOG_CLEANER_DEDUPE_BUFFER_SIZE))
                .unwrap_or(0),
            io_buffer_load_factor: config.get(keys::LOG_CLEANER_IO_BUFFER_LOAD_FACTOR),
            io_buffer_size: usize::try_from(config.get(keys::LOG_CLEANER_IO_BUFFER_SIZE))
                .unwrap_or(0),
        },
        recovery_threads_per_dir: usize::try_from(
            config.get(keys::NUM_RECOVERY_THREADS_PER_DATA_DIR),
        )
        .unwrap_or(1),
        producer_expiration_check_interval: ms(i64::from(
            config.get(keys::PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS),
        )),
        producer_id_expiration: ms(i64::from(config.get(keys::PRODUCER_ID_EXPIRATION_MS))),
        static_configs: config.static_values(),
        heartbeat_interval: ms(i64::from(config.get(keys::BROKER_HEARTBEAT_INTERVAL_MS))),
        replica_lag_max: ms(config.get(keys::REPLICA_LAG_TIME_MAX_MS)),
        replica_fetch: FetchSettings {
            max_wait: ms(i64::from(config.get(keys::REPLICA_FETCH_WAIT_MAX_MS))),
            min_bytes: config.get(keys::REPLICA_FETCH_MIN_BYTES),
            max_bytes: config.get(keys::REPLICA_FETCH_MAX_BYTES),
            response_max_bytes: config.get(keys::REPLICA_FETCH_RESPONSE_MAX_BYTES),
            backoff: ms(i64::from(config.get(keys::REPLICA_FETCH_BACKOFF_MS))),
            socket_timeout: ms(i64::from(config.get(keys::REPLICA_SOCKET_TIMEOUT_MS))),
            listener: config
                .inter_broker_listener_name
                .clone()
                .unwrap_or_else(|| "PLAINTEXT".to_string()),
            security: inter_broker,
            fetchers_per_leader: usize::try_from(config.get(keys::NUM_REPLICA_FETCHERS))
                .unwrap_or(1),
        },
        controlled_shutdown_timeout: Duration::from_secs(30),
        authorizer: Authorizer::from_config(config).map(Arc::new),
        dir_locks: None,
    }
}

/// One spec per listener, all sharing one registry.
async fn listener_specs<'a>(
    config: &BrokerConfig,
    listeners: impl Iterator<Item = &'a Listener>,
    service: &ApiService,
    quorum: Option<&QuorumSlot>,
    credentials: &Arc<dyn ScramCredentialStore>,
) -> Result<Vec<ListenerSpec>> {
    let mut specs = Vec::new();
    for l in listeners {
        let addr = bind_address(&l.endpoint.host, l.endpoint.port)
            .await
            .with_context(|| format!("cannot resolve listener {l}"))?;
        specs.push(ListenerSpec {
            name: l.name.clone(),
            addr,
            api_versions: Arc::clone(&service.api_versions),
            handler: Arc::clone(&service.handler),
            quorum: quorum.cloned(),
            security: ListenerSecurity::from_config(config, l, credentials.clone())
                .map_err(anyhow::Error::msg)?,
        });
    }
    Ok(specs)
}

/// The TLS listeners among `specs`, whose certificates can be rotated.
fn reloadable_tls(specs: &[ListenerSpec]) -> Vec<(String, Arc<ReloadableTls>)> {
    specs
        .iter()
        .filter_map(|spec| Some((spec.name.clone(), spec.security.tls.clone()?)))
        .collect()
}

/// Serves the dynamic broker listeners: those of the current image, then
/// of each image that arrives.
async fn apply_listeners_on_change(
    listeners: DynamicListeners,
    mut images: watch::Receiver<Arc<ottla_controller::MetadataImage>>,
) {
    loop {
        let image = images.borrow_and_update().clone();
        listeners.apply(&image).await;
        if images.changed().await.is_err() {
            return;
        }
    }
}

/// Applies dynamic TLS store settings as metadata images arrive.
async fn reload_tls_on_change(
    reloader: Arc<TlsReloader>,
    mut images: watch::Receiver<Arc<ottla_controller::MetadataImage>>,
) {
    while images.changed().await.is_ok() {
        let image = images.borrow_and_update().clone();
        reloader.apply(&image);
    }
}

/// Sizes the request handler pool to `num.io.threads` as metadata images
/// arrive: the dynamic value for this node, else the cluster-wide one, else
/// `static_size`.
async fn resize_handler_pool_on_change(
    pool: Arc<RequestHandlerPool>,
    node_id: i32,
    static_size: usize,
    mut images: watch::Receiver<Arc<ottla_controller::MetadataImage>>,
) {
    loop {
        let image = images.borrow_and_update().clone();
        let size = dynamic_or(&image, node_id, keys::NUM_IO_THREADS.name, static_size).max(1);
        if size != pool.size() {
            info!(num_io_threads = size, "resizing the request handler pool");
            pool.resize(size);
        }
        if images.changed().await.is_err() {
            return;
        }
    }
}

/// From now on, SIGINT or SIGTERM starts a graceful shutdown. The handlers
/// are installed before this returns, not when a task first runs.
fn cancel_on_signal(shutdown: CancellationToken) -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => info!("SIGTERM received"),
            _ = int.recv() => info!("SIGINT received"),
        }
        shutdown.cancel();
    });
    Ok(())
}
