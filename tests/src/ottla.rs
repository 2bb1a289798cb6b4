//! Real `ottla` processes for integration tests: each gets its own data dir
//! and a free port on 127.0.0.1, is started with `ottla server --override`,
//! and is killed when the handle drops.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::netns::NodeNetwork;

const LOCALHOST: &str = "127.0.0.1";

/// The `ottla` binary built by cargo next to the test executable, or `$OTTLA_BIN`.
pub fn ottla_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("OTTLA_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test>-<hash> -> target/<profile>/ottla
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let bin = profile_dir.join("ottla");
    assert!(
        bin.exists(),
        "{} is missing: build the workspace first (cargo build --workspace)",
        bin.display()
    );
    bin
}

/// The async runtime's worker count for the next node started: one and two
/// in turn (so every multi-node test has both), or `TOKIO_WORKER_THREADS`
/// when the test's environment sets it. A call that blocks a worker stalls
/// a one-worker node at once, and tokio panics on the blocking waits it can
/// see, so the suite catches them whatever the machine's core count.
fn worker_threads() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static STARTED: AtomicUsize = AtomicUsize::new(0);
    std::env::var("TOKIO_WORKER_THREADS")
        .unwrap_or_else(|_| (1 + STARTED.fetch_add(1, Ordering::Relaxed) % 2).to_string())
}

/// `authorizer.class.name` for Kafka's (and Ottla's) ACL authorizer.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

/// A fresh Kafka cluster id: 16 random bytes in URL-safe base64.
fn cluster_id() -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(uuid::Uuid::new_v4().as_bytes())
}

/// The settings of node `i` (0-based) of a cluster beyond those all share.
type NodeOverrides<'a> = dyn Fn(usize) -> Vec<(String, String)> + 'a;

/// No setting of a node's own.
fn same_for_all(_node: usize) -> Vec<(String, String)> {
    Vec::new()
}

/// A port that was free a moment ago and that this process has not handed
/// out before: the kernel may offer a just-released port again, and a node
/// whose listeners got the same port would refuse to start.
pub fn free_port() -> u16 {
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut handed_out = HANDED_OUT.lock().unwrap();
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if !handed_out.contains(&port) {
            handed_out.push(port);
            return port;
        }
    }
}

/// A node's data directory, removed when the node is dropped unless
/// `OTTLA_TEST_KEEP_DIRS` is set (to read the logs of a failed run).
fn node_dir() -> tempfile::TempDir {
    let mut dir = tempfile::Builder::new()
        .prefix("ottla-node")
        .tempdir()
        .unwrap();
    if std::env::var_os("OTTLA_TEST_KEEP_DIRS").is_some() {
        dir.disable_cleanup(true);
        eprintln!("keeping {}", dir.path().display());
    }
    dir
}

/// One listener, on a free port, per security protocol name in `protocols`.
fn extra_listeners(protocols: &[&str]) -> Vec<(String, u16)> {
    protocols
        .iter()
        .map(|p| (p.to_string(), free_port()))
        .collect()
}

/// What a node runs (Kafka's `process.roles`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Combined,
    Controller,
    Broker,
}

pub struct Ottla {
    child: Option<Child>,
    pub role: Role,
    /// The address every listener binds (127.0.0.1 unless the node runs in
    /// a network namespace of its own).
    pub host: String,
    /// The network namespace the node runs in (see `netns`), if any.
    netns: Option<String>,
    pub port: u16,
    pub controller_port: u16,
    pub data_dir: PathBuf,
    pub log_file: PathBuf,
    /// Listeners besides PLAINTEXT, named after their security protocol.
    extra_listeners: Vec<(String, u16)>,
    overrides: Vec<(String, String)>,
    tmp: Option<tempfile::TempDir>,
}

impl Ottla {
    /// Starts a single node with `overrides` on top of the test defaults.
    pub fn start(overrides: &[(&str, &str)]) -> Self {
        Self::start_with_listeners(&[], overrides)
    }

    /// Like [`start`](Self::start), with one more listener per name in
    /// `protocols` (SSL, SASL_PLAINTEXT, SASL_SSL), each on a free port.
    pub fn start_with_listeners(protocols: &[&str], overrides: &[(&str, &str)]) -> Self {
        let mut node = Self::unstarted();
        node.extra_listeners = extra_listeners(protocols);
        node.overrides = overrides
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        node.spawn();
        node
    }

    pub fn bootstrap(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The address of the extra listener named `protocol`.
    pub fn bootstrap_of(&self, protocol: &str) -> String {
        let (_, port) = self
            .extra_listeners
            .iter()
            .find(|(name, _)| name == protocol)
            .unwrap_or_else(|| panic!("no {protocol} listener was started"));
        format!("{}:{port}", self.host)
    }

    /// The node's settings, in the order given to `ottla server`: the
    /// harness's, then the test's overrides (the later wins).
    fn settings(&self) -> Vec<(String, String)> {
        let mut settings = Vec::new();
        let mut push = |k: &str, v: String| settings.push((k.to_string(), v));
        let extra: String = self
            .extra_listeners
            .iter()
            .map(|(name, port)| format!(",{name}://{}:{port}", self.host))
            .collect();
        let client = format!("PLAINTEXT://{}:{}{extra}", self.host, self.port);
        let controller = format!("CONTROLLER://{}:{}", self.host, self.controller_port);
        match self.role {
            Role::Combined => push("listeners", format!("{client},{controller}")),
            Role::Controller => push("listeners", controller),
            Role::Broker => push("listeners", client.clone()),
        }
        if self.role != Role::Controller {
            push("advertised.listeners", client);
        }
        let roles = match self.role {
            Role::Combined => "broker,controller",
            Role::Controller => "controller",
            Role::Broker => "broker",
        };
        push("process.roles", roles.into());
        push("controller.listener.names", "CONTROLLER".into());
        // A lone voter, unless the test names the quorum.
        if !self
            .overrides
            .iter()
            .any(|(k, _)| k.starts_with("controller.quorum."))
        {
            push(
                "controller.quorum.voters",
                format!("1@{}:{}", self.host, self.controller_port),
            );
        }
        push("log.dirs", self.data_dir.join("logs").display().to_string());
        for (k, v) in &self.overrides {
            push(k, v.clone());
        }
        settings
    }

    /// The node's settings as a server.properties file (for tools that
    /// read a node's configuration, such as `kafka-metadata-quorum.sh
    /// add-controller --command-config`).
    pub fn properties_file(&self) -> PathBuf {
        let path = self.data_dir.join("server.properties");
        let text: String = self
            .settings()
            .iter()
            .map(|(k, v)| format!("{k}={v}\n"))
            .collect();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn spawn(&mut self) {
        let mut args: Vec<String> = vec!["server".into()];
        for (k, v) in self.settings() {
            args.push("--override".into());
            args.push(format!("{k}={v}"));
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_file)
            .unwrap();
        let mut command = match &self.netns {
            Some(ns) => {
                // `ip netns exec` execs the binary: the child is the node.
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(ottla_binary());
                c
            }
            None => Command::new(ottla_binary()),
        };
        let child = command
            .args(&args)
            .env("TOKIO_WORKER_THREADS", worker_threads())
            .env(
                "RUST_LOG",
                std::env::var("OTTLA_TEST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start ottla");
        self.child = Some(child);
        self.wait_ready(Duration::from_secs(30));
    }

    /// Waits until the client listener (a controller's controller
    /// listener) accepts connections.
    pub fn wait_ready(&mut self, timeout: Duration) {
        let addr: SocketAddr = match self.role {
            Role::Controller => format!("{}:{}", self.host, self.controller_port),
            Role::Combined | Role::Broker => self.bootstrap(),
        }
        .parse()
        .unwrap();
        let start = Instant::now();
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return;
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
                panic!(
                    "ottla exited with {status} before serving; log:\n{}",
                    self.log()
                );
            }
            assert!(
                start.elapsed() < timeout,
                "ottla did not listen within {timeout:?}; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_file).unwrap_or_default()
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// SIGKILL, no chance to flush.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait for a clean exit; returns the exit status code.
    pub fn stop(&mut self) -> Option<i32> {
        let mut c = self.child.take()?;
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let start = Instant::now();
        loop {
            if let Some(status) = c.try_wait().unwrap() {
                return status.code();
            }
            if start.elapsed() > Duration::from_secs(30) {
                let _ = c.kill();
                let _ = c.wait();
                panic!(
                    "ottla did not stop within 30 s of SIGTERM; log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts `n` combined broker+controller nodes (ids 1..=n) forming one
    /// cluster, each with `overrides`, and waits until every node's metadata
    /// lists all `n` brokers.
    pub fn cluster(n: usize, overrides: &[(&str, &str)]) -> Vec<Ottla> {
        Self::cluster_with_listeners(n, &[], overrides)
    }

    /// Like [`cluster`](Self::cluster), each node with one more listener
    /// per name in `protocols`, as [`start_with_listeners`](Self::start_with_listeners).
    pub fn cluster_with_listeners(
        n: usize,
        protocols: &[&str],
        overrides: &[(&str, &str)],
    ) -> Vec<Ottla> {
        Self::launch(
            &vec![Role::Combined; n],
            protocols,
            overrides,
            &same_for_all,
        )
    }

    /// Like [`cluster`](Self::cluster), node `i` in rack `racks[i]`.
    pub fn cluster_in_racks(racks: &[&str], overrides: &[(&str, &str)]) -> Vec<Ottla> {
        let rack_of = |i: usize| vec![("broker.rack".to_string(), racks[i].to_string())];
        Self::launch(&vec![Role::Combined; racks.len()], &[], overrides, &rack_of)
    }

    /// A cluster of separate roles: `controllers` controller-only nodes
    /// (ids 1..) forming the quorum, then `brokers` broker-only nodes.
    /// Returns once every broker's metadata lists all the brokers.
    pub fn split_cluster(
        controllers: usize,
        brokers: usize,
        overrides: &[(&str, &str)],
    ) -> Vec<Ottla> {
        let mut roles = vec![Role::Controller; controllers];
        roles.extend(vec![Role::Broker; brokers]);
        Self::launch(&roles, &[], overrides, &same_for_all)
    }

    /// Starts one node per role (ids 1..), the voters being the nodes with
    /// the controller role, node `i` with `overrides` and then
    /// `node_overrides(i)`, and waits until every broker's metadata lists
    /// all the brokers.
    fn launch(
        roles: &[Role],
        protocols: &[&str],
        overrides: &[(&str, &str)],
        node_overrides: &NodeOverrides<'_>,
    ) -> Vec<Ottla> {
        let cluster_id = cluster_id();
        let nodes = Self::spawn_quorum(roles, protocols, overrides, node_overrides, None, |_| {
            cluster_id.clone()
        });
        let brokers = roles.iter().filter(|r| **r != Role::Controller).count();
        for node in nodes.iter().filter(|n| n.role != Role::Controller) {
            node.wait_for_brokers(brokers, Duration::from_secs(60));
        }
        nodes
    }

    /// Combined nodes listed as the voters of one quorum (ids 1..), node
    /// `i` given `cluster_ids[i]` as its `cluster.id`. Returns once each
    /// listens, without waiting for them to form a cluster (they must not
    /// when the ids differ).
    pub fn voters_of_clusters(cluster_ids: &[&str], overrides: &[(&str, &str)]) -> Vec<Ottla> {
        let roles = vec![Role::Combined; cluster_ids.len()];
        Self::spawn_quorum(&roles, &[], overrides, &same_for_all, None, |i| {
            cluster_ids[i].to_string()
        })
    }

    /// Combined nodes forming one cluster, node `i` in namespace
    /// `first_slot + i` of `network` (one node per namespace), so the
    /// network between them can be cut; two clusters can share a network in
    /// different slots. Returns once every node's metadata lists every
    /// broker.
    pub fn cluster_in(
        network: &NodeNetwork,
        first_slot: usize,
        n: usize,
        overrides: &[(&str, &str)],
    ) -> Vec<Ottla> {
        let cluster_id = cluster_id();
        let roles = vec![Role::Combined; n];
        let slots = Some((network, first_slot));
        let nodes = Self::spawn_quorum(&roles, &[], overrides, &same_for_all, slots, |_| {
            cluster_id.clone()
        });
        for node in &nodes {
            node.wait_for_brokers(n, Duration::from_secs(60));
        }
        nodes
    }

    /// Starts one node per role (ids 1..), the voters being the nodes with
    /// the controller role, node `i` with `cluster_id_of(i)`, in slot
    /// `first + i` of `network` when there is one.
    fn spawn_quorum(
        roles: &[Role],
        protocols: &[&str],
        overrides: &[(&str, &str)],
        node_overrides: &NodeOverrides<'_>,
        network: Option<(&NodeNetwork, usize)>,
        cluster_id_of: impl Fn(usize) -> String,
    ) -> Vec<Ottla> {
        let host_of = |i: usize| {
            network.map_or_else(|| LOCALHOST.to_string(), |(n, first)| n.host(first + i))
        };
        let ports: Vec<(u16, u16)> = roles.iter().map(|_| (free_port(), free_port())).collect();
        let voters = ports
            .iter()
            .zip(roles)
            .enumerate()
            .filter(|(_, (_, role))| **role != Role::Broker)
            .map(|(i, ((_, c), _))| format!("{}@{}:{c}", i + 1, host_of(i)))
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes: Vec<Ottla> = ports
            .iter()
            .zip(roles)
            .enumerate()
            .map(|(i, ((port, controller_port), role))| {
                let mut all: Vec<(String, String)> = overrides
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .chain(node_overrides(i))
                    .collect();
                all.push(("node.id".into(), (i + 1).to_string()));
                all.push(("controller.quorum.voters".into(), voters.clone()));
                all.push(("cluster.id".into(), cluster_id_of(i)));
                let mut node = Ottla::unstarted();
                node.role = *role;
                node.host = host_of(i);
                node.netns = network.map(|(n, first)| n.namespace(first + i));
                node.port = *port;
                node.controller_port = *controller_port;
                node.extra_listeners = extra_listeners(protocols);
                node.overrides = all;
                node
            })
            .collect();
        for node in &mut nodes {
            node.spawn();
        }
        nodes
    }

    /// A combined node on 127.0.0.1 with a data dir of its own and free
    /// ports, not started.
    fn unstarted() -> Ottla {
        let tmp = node_dir();
        let data_dir = tmp.path().to_path_buf();
        Ottla {
            child: None,
            role: Role::Combined,
            host: LOCALHOST.into(),
            netns: None,
            port: free_port(),
            controller_port: free_port(),
            log_file: data_dir.join("ottla.log"),
            data_dir,
            extra_listeners: Vec::new(),
            overrides: Vec::new(),
            tmp: Some(tmp),
        }
    }

    /// Nodes of `roles` (ids 1..) forming a dynamic quorum (KIP-853), whose
    /// first `initial` nodes, controllers, start it: node 1 alone (its only bootstrap server is
    /// itself, as `format --standalone`), or the first `initial` listed in
    /// `controller.quorum.voters` (`--initial-controllers`). The other
    /// controllers join through them and follow the log until they are made
    /// voters; broker-only nodes follow it. Returns once every broker's
    /// metadata lists every broker.
    pub fn dynamic_quorum(
        roles: &[Role],
        initial: usize,
        overrides: &[(&str, &str)],
    ) -> Vec<Ottla> {
        let cluster_id = cluster_id();
        let mut nodes: Vec<Ottla> = roles
            .iter()
            .map(|role| {
                let mut node = Ottla::unstarted();
                node.role = *role;
                node
            })
            .collect();
        let first = &nodes[..initial];
        let bootstrap = first
            .iter()
            .map(|node| format!("{}:{}", node.host, node.controller_port))
            .collect::<Vec<_>>()
            .join(",");
        let voters = first
            .iter()
            .enumerate()
            .map(|(i, node)| format!("{}@{}:{}", i + 1, node.host, node.controller_port))
            .collect::<Vec<_>>()
            .join(",");
        for (i, node) in nodes.iter_mut().enumerate() {
            node.overrides = overrides
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let mut push = |k: &str, v: String| node.overrides.push((k.into(), v));
            push("node.id", (i + 1).to_string());
            push("controller.quorum.bootstrap.servers", bootstrap.clone());
            if initial > 1 {
                push("controller.quorum.voters", voters.clone());
            }
            push("cluster.id", cluster_id.clone());
        }
        for node in &mut nodes {
            node.spawn();
        }
        let brokers = roles.iter().filter(|r| **r != Role::Controller).count();
        for node in nodes.iter().filter(|n| n.role != Role::Controller) {
            node.wait_for_brokers(brokers, Duration::from_secs(60));
        }
        nodes
    }

    /// Waits until this node's metadata lists `n` live brokers.
    pub fn wait_for_brokers(&self, n: usize, timeout: Duration) {
        use kafka_protocol::messages::MetadataRequest;
        let start = Instant::now();
        loop {
            let live = std::panic::catch_unwind(|| {
                let mut client = crate::wire::WireClient::connect(&self.bootstrap());
                client.send(12, &MetadataRequest::default()).brokers.len()
            })
            .unwrap_or(0);
            if live >= n {
                return;
            }
            assert!(
                start.elapsed() < timeout,
                "node on port {} sees {live} of {n} brokers after {timeout:?}; log:\n{}",
                self.port,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Starts the same node again on the same data and ports.
    pub fn restart(&mut self) {
        self.spawn();
    }
}

impl Drop for Ottla {
    fn drop(&mut self) {
        self.kill9();
        // A failing test keeps its nodes' logs and data to read.
        if std::thread::panicking() {
            if let Some(tmp) = &mut self.tmp {
                tmp.disable_cleanup(true);
                eprintln!("test failed: keeping {}", self.data_dir.display());
            }
        }
    }
}
