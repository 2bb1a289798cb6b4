//! The metadata quorum on 127.0.0.1: elections, replication, failover,
//! restarts (from the log and from a snapshot) and durability.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ottla_controller::raft::{Node, Observer, Quorum, QuorumConfig, QuorumError, QuorumVoters};
use ottla_controller::{MetadataImage, MetadataRecord};
use tempfile::TempDir;
use tokio::net::TcpListener;
use uuid::Uuid;

const PATIENCE: Duration = Duration::from_secs(15);

struct Cluster {
    _root: TempDir,
    dirs: BTreeMap<u64, PathBuf>,
    voters: BTreeMap<u64, Node>,
    nodes: BTreeMap<u64, Quorum>,
    config: QuorumConfig,
}

impl Cluster {
    async fn start(size: u64, config: QuorumConfig) -> Self {
        Self::start_with(size, config.clone(), |_| config.clone()).await
    }

    /// Starts node `id` with `config_of(id)`; restarts use `config`.
    async fn start_with(
        size: u64,
        config: QuorumConfig,
        config_of: impl Fn(u64) -> QuorumConfig,
    ) -> Self {
        let root = tempfile::tempdir().unwrap();
        let mut listeners = BTreeMap::new();
        let mut voters = BTreeMap::new();
        for id in 1..=size {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            voters.insert(
                id,
                Node {
                    host: "127.0.0.1".into(),
                    port,
                },
            );
            listeners.insert(id, listener);
        }
        let dirs = (1..=size)
            .map(|id| (id, root.path().join(format!("node-{id}"))))
            .collect();
        let mut cluster = Self {
            _root: root,
            dirs,
            voters,
            nodes: BTreeMap::new(),
            config,
        };
        for (id, listener) in listeners {
            cluster.launch_as(id, listener, config_of(id)).await;
        }
        cluster
    }

    async fn launch(&mut self, id: u64, listener: TcpListener) {
        self.launch_as(id, listener, self.config.clone()).await;
    }

    async fn launch_as(&mut self, id: u64, listener: TcpListener, config: QuorumConfig) {
        let quorum = Quorum::start(
            id,
            &self.dirs[&id],
            QuorumVoters::Static(self.voters.clone()),
            Some(listener),
            config,
        )
        .await
        .unwrap();
        self.nodes.insert(id, quorum);
    }

    async fn stop(&mut self, id: u64) {
        self.nodes.remove(&id).unwrap().shutdown().await;
    }

    /// Restarts a stopped node from its directory, on its old port.
    async fn restart(&mut self, id: u64) {
        let addr = format!("127.0.0.1:{}", self.voters[&id].port);
        let listener = wait_for(|| async { TcpListener::bind(&addr).await.ok() }).await;
        self.launch(id, listener).await;
    }

    async fn stop_all(&mut self) {
        for (_, q) in std::mem::take(&mut self.nodes) {
            q.shutdown().await;
        }
    }

    fn node(&self, id: u64) -> &Quorum {
        &self.nodes[&id]
    }

    /// The leader every running node agrees on.
    async fn leader(&self) -> u64 {
        wait_for(|| async {
            let seen: Vec<Option<u64>> = self.nodes.values().map(Quorum::leader).collect();
            match seen[0] {
                Some(l) if self.nodes.contains_key(&l) && seen.iter().all(|s| *s == Some(l)) => {
                    Some(l)
                }
                _ => None,
            }
        })
        .await
    }

    /// Waits until every running node has the same image as `id`, at least
    /// at `offset`, and returns it.
    async fn converged(&self, id: u64, offset: i64) -> Arc<MetadataImage> {
        wait_for(|| async {
            let image = self.node(id).image();
            (image.offset >= offset && self.nodes.values().all(|q| q.image() == image))
                .then_some(image)
        })
        .await
    }
}

async fn wait_for<T, F: std::future::Future<Output = Option<T>>>(
    mut probe: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "condition not reached in {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn topic(name: &str) -> MetadataRecord {
    MetadataRecord::Topic {
        name: name.into(),
        topic_id: Uuid::new_v4(),
    }
}

fn log_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".log"))
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_voters_elect_replicate_and_refuse_writes_on_followers() {
    let cluster = Cluster::start(3, QuorumConfig::default()).await;
    let leader = cluster.leader().await;
    let offset = cluster
        .node(leader)
        .write(vec![topic("orders"), topic("users")])
        .await
        .unwrap();
    let image = cluster.converged(leader, offset).await;
    assert!(image.topic_by_name("orders").is_some() && image.topic_by_name("users").is_some());
    assert_eq!(image.offset, offset);

    for (&id, q) in &cluster.nodes {
        if id != leader {
            match q.write(vec![topic("refused")]).await {
                Err(QuorumError::NotLeader { leader: l }) => assert_eq!(l, Some(leader)),
                other => panic!("follower {id} answered {other:?}"),
            }
        }
    }

    let summary = cluster.node(leader).summary().await.unwrap();
    assert_eq!(summary.leader, Some(leader));
    assert!(summary.epoch >= 1);
    assert_eq!(summary.high_watermark, offset + 1);
    assert_eq!(
        summary.voters.iter().map(|v| v.id).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    for v in &summary.voters {
        assert_eq!(v.log_end_offset, offset + 1, "voter {}", v.id);
        assert!(v.last_fetch_ms.is_some(), "voter {}", v.id);
    }
}

/// Waits until the observer's image is at `offset` or later and equal to
/// a voter's.
async fn caught_up(observer: &Observer, cluster: &Cluster, offset: i64) -> Arc<MetadataImage> {
    wait_for(|| async {
        let image = observer.image();
        let voter = cluster
            .nodes
            .values()
            .find(|q| q.image().offset >= offset)?;
        (image.offset >= offset && image == voter.image()).then_some(image)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_follows_the_leader_through_a_failover() {
    let mut cluster = Cluster::start(3, QuorumConfig::default()).await;
    let old = cluster.leader().await;
    let first = cluster
        .node(old)
        .write(vec![topic("before")])
        .await
        .unwrap();
    cluster.converged(old, first).await;
    // Refused under a voter's id, which would make it both.
    assert!(matches!(
        Observer::start(
            2,
            &QuorumVoters::Static(cluster.voters.clone()),
            &cluster.config
        ),
        Err(QuorumError::Config(_))
    ));
    let observer = Observer::start(
        10,
        &QuorumVoters::Static(cluster.voters.clone()),
        &cluster.config,
    )
    .unwrap();
    let image = caught_up(&observer, &cluster, first).await;
    assert!(image.topic_by_name("before").is_some());
    assert_eq!(observer.leader(), Some(old));
    assert!(observer.term() >= 1);
    let summary = cluster.node(old).summary().await.unwrap();
    assert_eq!(summary.voters.len(), 3);
    assert_eq!(
        summary.observers.iter().map(|o| o.id).collect::<Vec<_>>(),
        [10]
    );

    // Writes the observer waits for arrive while its fetch is held.
    let second = cluster.node(old).write(vec![topic("held")]).await.unwrap();
    assert!(caught_up(&observer, &cluster, second)
        .await
        .topic_by_name("held")
        .is_some());

    cluster.stop(old).await;
    let new = cluster.leader().await;
    let third = cluster.node(new).write(vec![topic("after")]).await.unwrap();
    let image = caught_up(&observer, &cluster, third).await;
    assert!(image.topic_by_name("after").is_some());
    assert_eq!(observer.leader(), Some(new));
    assert!(!observer.voters().contains_key(&10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_takes_over_and_the_old_one_catches_up_after_restart() {
    let mut cluster = Cluster::start(3, QuorumConfig::default()).await;
    let old = cluster.leader().await;
    let first = cluster
        .node(old)
        .write(vec![topic("before")])
        .await
        .unwrap();
    cluster.converged(old, first).await;

    cluster.stop(old).await;
    let stopped_at = Instant::now();
    let new = cluster.leader().await;
    assert_ne!(new, old);
    assert!(
        stopped_at.elapsed() < Duration::from_secs(6),
        "election took {:?}",
        stopped_at.elapsed()
    );
    let second = cluster.node(new).write(vec![topic("after")]).await.unwrap();
    assert!(second > first);

    cluster.restart(old).await;
    let image = cluster.converged(new, second).await;
    assert!(image.topic_by_name("before").is_some() && image.topic_by_name("after").is_some());
    // It caught up from the log: nothing was purged, no snapshot installed.
    assert_eq!(log_files(&cluster.dirs[&old]), ["00000000000000000000.log"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_behind_the_purged_log_catches_up_by_snapshot() {
    let config = QuorumConfig {
        snapshot_every: 5,
        logs_kept_after_snapshot: 0,
        ..QuorumConfig::default()
    };
    let mut cluster = Cluster::start(3, config).await;
    let leader = cluster.leader().await;
    let lagging = *cluster.nodes.keys().find(|&&id| id != leader).unwrap();
    let first = cluster.node(leader).write(vec![topic("t0")]).await.unwrap();
    cluster.converged(leader, first).await;
    cluster.stop(lagging).await;

    let mut last = first;
    for i in 1..=20 {
        last = cluster
            .node(leader)
            .write(vec![topic(&format!("t{i}"))])
            .await
            .unwrap();
    }
    cluster.restart(lagging).await;
    let image = cluster.converged(leader, last).await;
    assert_eq!(image.topics.len(), 21);
    // The leader's log no longer held what the node missed: it got a
    // snapshot, and its own log restarted after it.
    let files = log_files(&cluster.dirs[&lagging]);
    assert!(
        !files.contains(&"00000000000000000000.log".to_string()),
        "{files:?}"
    );

    // And it keeps following from the log afterwards.
    let more = cluster
        .node(leader)
        .write(vec![topic("after-snapshot")])
        .await
        .unwrap();
    cluster.converged(leader, more).await;
}

/// Issue 27: a node restarted from its own snapshot saw live brokers as
/// fenced, and the active controller, which saw them unfenced, never wrote
/// anything to correct it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_restarted_from_its_snapshot_sees_the_same_brokers_unfenced() {
    let config = QuorumConfig {
        snapshot_every: 5,
        ..QuorumConfig::default()
    };
    let mut cluster = Cluster::start(3, config).await;
    let leader = cluster.leader().await;
    for broker_id in 1..=3 {
        let registered = MetadataRecord::RegisterBroker {
            broker_id,
            incarnation_id: Uuid::new_v4(),
            endpoints: Vec::new(),
            rack: None,
        };
        let unfenced = MetadataRecord::BrokerFence {
            broker_id,
            fenced: false,
        };
        cluster
            .node(leader)
            .write(vec![registered, unfenced])
            .await
            .unwrap();
    }
    let mut last = 0;
    for i in 0..12 {
        last = cluster
            .node(leader)
            .write(vec![topic(&format!("t{i}"))])
            .await
            .unwrap();
    }
    cluster.converged(leader, last).await;
    let follower = *cluster.nodes.keys().find(|&&id| id != leader).unwrap();
    assert!(
        cluster.dirs[&follower].join("quorum-snapshot").exists(),
        "the follower took a snapshot"
    );
    cluster.stop(follower).await;
    cluster.restart(follower).await;
    let image = cluster.converged(leader, last).await;
    assert!(
        image.brokers.values().all(|b| !b.fenced),
        "{:?}",
        image.brokers
    );
}

/// Issue 27: nodes formatted with different cluster ids formed one
/// cluster. A voter of another cluster gets no votes, no entries and no
/// metadata, and neither does an observer of another cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_of_another_cluster_are_kept_out_of_the_quorum() {
    let ours = QuorumConfig {
        cluster_id: "MkU3OEVBNTcwNTJENDM2Qk".into(),
        ..QuorumConfig::default()
    };
    let theirs = QuorumConfig {
        cluster_id: "Zm9yZWlnbkNsdXN0ZXIxMg".into(),
        ..QuorumConfig::default()
    };
    // Node 1, which bootstraps the quorum, and node 3 are of our cluster.
    let cluster = Cluster::start_with(3, ours.clone(), |id| {
        if id == 2 {
            theirs.clone()
        } else {
            ours.clone()
        }
    })
    .await;
    let leader = wait_for(|| async {
        let l = cluster.node(1).leader()?;
        (cluster.node(3).leader() == Some(l)).then_some(l)
    })
    .await;
    assert_ne!(leader, 2, "the foreign node cannot have won a vote");
    let offset = cluster
        .node(leader)
        .write(vec![topic("ours")])
        .await
        .unwrap();
    wait_for(|| async { (cluster.node(3).image().offset >= offset).then_some(()) }).await;
    let stranger = observer_with(&cluster, 10, &theirs);
    let member = observer_with(&cluster, 11, &ours);
    caught_up(&member, &cluster, offset).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(cluster.node(2).image().offset, -1, "node 2 got entries");
    assert_eq!(cluster.node(2).leader(), None);
    assert_eq!(
        stranger.image().offset,
        -1,
        "the foreign observer got metadata"
    );
    let summary = cluster.node(leader).summary().await.unwrap();
    assert_eq!(
        summary.observers.iter().map(|o| o.id).collect::<Vec<_>>(),
        [11]
    );
}

fn observer_with(cluster: &Cluster, id: u64, config: &QuorumConfig) -> Observer {
    Observer::start(id, &QuorumVoters::Static(cluster.voters.clone()), config).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_voter_quorum_writes_and_restarts() {
    let mut cluster = Cluster::start(1, QuorumConfig::default()).await;
    assert_eq!(cluster.leader().await, 1);
    let offset = cluster.node(1).write(vec![topic("solo")]).await.unwrap();
    assert!(cluster.node(1).image().topic_by_name("solo").is_some());
    let before = cluster.node(1).image();
    assert_eq!(before.offset, offset);

    cluster.stop(1).await;
    cluster.restart(1).await;
    assert_eq!(
        cluster.node(1).image(),
        before,
        "replayed up to the saved commit point"
    );
    assert_eq!(cluster.leader().await, 1);
    let next = cluster.node(1).write(vec![topic("again")]).await.unwrap();
    assert!(next > offset);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_restart_keeps_every_committed_write() {
    let mut cluster = Cluster::start(3, QuorumConfig::default()).await;
    let leader = cluster.leader().await;
    let mut last = 0;
    for i in 0..5 {
        last = cluster
            .node(leader)
            .write(vec![topic(&format!("d{i}"))])
            .await
            .unwrap();
    }
    let before = cluster.converged(leader, last).await;

    cluster.stop_all().await;
    for id in [1, 2, 3] {
        cluster.restart(id).await;
    }
    // Replayed from the log up to the saved commit point, before any election.
    assert_eq!(cluster.node(leader).image(), before);
    let leader = cluster.leader().await;
    let image = cluster.converged(leader, before.offset).await;
    assert_eq!(image.topics, before.topics);
    assert_eq!(image.topic_ids, before.topic_ids);
    let offset = cluster
        .node(leader)
        .write(vec![topic("later")])
        .await
        .unwrap();
    assert!(offset > last);
}

#[tokio::test]
async fn misconfigured_voter_sets_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let node = |port| Node {
        host: "127.0.0.1".into(),
        port,
    };
    let start = |voters: BTreeMap<u64, Node>| async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        Quorum::start(
            1,
            dir.path(),
            QuorumVoters::Static(voters),
            Some(listener),
            QuorumConfig::default(),
        )
        .await
    };
    let not_a_voter = start(BTreeMap::from([(2, node(1))])).await;
    assert!(matches!(not_a_voter, Err(QuorumError::Config(_))));
    let shared = start(BTreeMap::from([(1, node(1)), (2, node(1))])).await;
    assert!(matches!(shared, Err(QuorumError::Config(_))));
}
