//! Streams groups (KIP-1071) on a live `ottla`, driven by a Kafka Streams
//! 4.4 application with `group.protocol=streams` (`tests/java/
//! StreamsWordCount.java`: a word count through a repartition topic into a
//! state store, exactly_once_v2) and by kafka-streams-groups.sh:
//!
//! - offsets committed for the application's group id before it first runs
//!   (an empty classic group, as a mirror's offset sync leaves) are where the
//!   streams group starts;
//! - the group creates its internal topics, and the counts are exact: every
//!   word's counts read committed are 1, 2, ..., n, once each;
//! - a second instance shares the tasks; a killed instance's tasks move to
//!   the other once its session ends, with no count lost or repeated;
//! - the group and its assignment survive a broker kill -9 and restart;
//! - a static instance (`group.instance.id`, RocksDB stores) restarted
//!   within its session gets its tasks back with no rebalance;
//! - the tool lists and describes (state with the assignor, members) the
//!   group over the v1 APIs (KIP-1331; no topology description stored, as
//!   Kafka without a description plugin), resets and deletes its offsets,
//!   and deletes it with its internal topics;
//! - on three nodes, standby tasks go to the other instance, and the group
//!   survives its coordinator's death.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ottla_tests::groups::{committed, coordinator_of, GROUP_KEY};
use ottla_tests::metrics::{scrape, sum};
use ottla_tests::ottla::{free_port, Ottla};
use ottla_tests::tools::{kafka_bin, kafka_tool, ok, refused, repo_root};
use ottla_tests::topics::{create_topic, produce_keyed};

const APP: &str = "wc-app";
const INPUT: &str = "wc-in";
const OUTPUT: &str = "wc-out";

/// Sessions short enough for a killed instance to be noticed in seconds.
const STREAMS_OVERRIDES: &[(&str, &str)] = &[
    ("group.streams.min.session.timeout.ms", "1000"),
    ("group.streams.session.timeout.ms", "6000"),
    ("group.streams.min.heartbeat.interval.ms", "500"),
    ("group.streams.heartbeat.interval.ms", "1000"),
    ("offsets.topic.num.partitions", "3"),
];

/// One instance of the word count, its output in the node's data dir.
struct StreamsApp {
    child: Option<Child>,
    out: PathBuf,
}

impl StreamsApp {
    /// Starts instance `name` against `bootstrap`, its files in `dir`.
    fn start(bootstrap: &str, dir: &Path, name: &str) -> Self {
        Self::start_with(bootstrap, dir, name, &[])
    }

    /// Starts an instance with the word count's optional arguments (store,
    /// instance id).
    fn start_with(bootstrap: &str, dir: &Path, name: &str, options: &[&str]) -> Self {
        let libs = kafka_bin().parent().unwrap().join("libs");
        let out = dir.join(format!("{name}.out"));
        let child = Command::new("java")
            .arg("-cp")
            .arg(format!("{}/*", libs.display()))
            .arg(repo_root().join("tests/java/StreamsWordCount.java"))
            .args([bootstrap, APP, INPUT, OUTPUT, "streams"])
            .arg(dir.join(format!("{name}-state")))
            .args(options)
            .stdin(Stdio::null())
            .stdout(File::create(&out).unwrap())
            .stderr(File::create(dir.join(format!("{name}.err"))).unwrap())
            .spawn()
            .expect("starting java");
        Self {
            child: Some(child),
            out,
        }
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM: the application closes and leaves the group.
    fn stop(&mut self) {
        let Some(mut c) = self.child.take() else {
            return;
        };
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let start = Instant::now();
        while c.try_wait().unwrap().is_none() {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the app ignored SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for StreamsApp {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Produces 40 lines of two words each and adds them to `expected`.
fn produce_words(node: &Ottla, batch: usize, expected: &mut BTreeMap<String, u64>) {
    let mut input = String::new();
    for i in 0..40 {
        let words = [
            format!("w{}", (i * 7 + batch) % 13),
            format!("w{}", (i + batch * 3) % 5),
        ];
        for w in &words {
            *expected.entry(w.clone()).or_default() += 1;
        }
        input.push_str(&format!("k{i}:{}\n", words.join(" ")));
    }
    produce_keyed(node, INPUT, &input);
}

/// Each word's counts as the output topic holds them, read committed.
fn committed_counts(node: &Ottla) -> BTreeMap<String, Vec<u64>> {
    let out = ok(kafka_tool(
        "kafka-console-consumer.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "--topic",
            OUTPUT,
            "--from-beginning",
            "--isolation-level",
            "read_committed",
            "--timeout-ms",
            "4000",
        ],
        None,
    ));
    let mut counts: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for line in out.lines() {
        if let Some((word, count)) = line.split_once('=') {
            counts
                .entry(word.to_string())
                .or_default()
                .push(count.parse().expect("a count"));
        }
    }
    counts
}

/// Waits until every word reached its expected count, then checks that
/// each count was written once: 1, 2, ..., n (exactly once).
fn await_exact_counts(node: &Ottla, expected: &BTreeMap<String, u64>) {
    let start = Instant::now();
    loop {
        let counts = committed_counts(node);
        let reached = expected
            .iter()
            .all(|(w, n)| counts.get(w).and_then(|c| c.last()) == Some(n));
        if reached {
            for (word, seen) in &counts {
                let want: Vec<u64> = (1..=expected[word]).collect();
                assert_eq!(seen, &want, "counts of {word}");
            }
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(150),
            "counts never reached {expected:?}; last read {counts:?}"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn streams_groups(node: &Ottla, args: &[&str]) -> String {
    let bootstrap = node.bootstrap();
    let mut all = vec!["--bootstrap-server", bootstrap.as_str()];
    all.extend_from_slice(args);
    ok(kafka_tool("kafka-streams-groups.sh", &all, None))
}

/// The member lines of `--describe --members`: (process, assignment);
/// none while the group does not exist yet.
fn members(node: &Ottla) -> Vec<(String, String)> {
    let bootstrap = node.bootstrap();
    let args = [
        "--bootstrap-server",
        &bootstrap,
        "--describe",
        "--group",
        APP,
        "--members",
    ];
    let out = kafka_tool("kafka-streams-groups.sh", &args, None);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with(APP))
        .map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            (fields[2].to_string(), fields[4..].join(" "))
        })
        .collect()
}

fn await_members(node: &Ottla, processes: usize, threads: usize) -> Vec<(String, String)> {
    let start = Instant::now();
    loop {
        let m = members(node);
        let distinct: std::collections::BTreeSet<&String> = m.iter().map(|(p, _)| p).collect();
        if m.len() == threads
            && distinct.len() == processes
            && m.iter().all(|(_, a)| a.contains("ACTIVE: "))
        {
            return m;
        }
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "never {threads} members of {processes} processes, each with tasks: {m:?}"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn a_kafka_streams_word_count_runs_exactly_once_as_a_streams_group() {
    let mut node = Ottla::start(STREAMS_OVERRIDES);
    create_topic(&node, INPUT, 4, &[]);
    create_topic(&node, OUTPUT, 1, &[]);
    // Words before the committed offsets are never counted.
    produce_words(&node, 9, &mut BTreeMap::new());
    ok(kafka_tool(
        "kafka-consumer-groups.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "--reset-offsets",
            "--group",
            APP,
            "--topic",
            INPUT,
            "--to-latest",
            "--execute",
        ],
        None,
    ));
    let mut expected = BTreeMap::new();
    produce_words(&node, 0, &mut expected);

    let mut a = StreamsApp::start(&node.bootstrap(), &node.data_dir, "a");
    await_exact_counts(&node, &expected);
    assert!(a.output().contains("STATE RUNNING"), "{}", a.output());
    // The group made its repartition and changelog topics, with as many
    // partitions as the input.
    let topics = ok(kafka_tool(
        "kafka-topics.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "--describe",
            "--topic",
            "wc-app-words-repartition",
        ],
        None,
    ));
    assert!(topics.contains("PartitionCount: 4"), "{topics}");
    assert!(streams_groups(&node, &["--list"])
        .lines()
        .any(|l| l.trim() == APP));

    // A second instance shares the tasks: two processes, two threads each.
    let mut b = StreamsApp::start(&node.bootstrap(), &node.data_dir, "b");
    await_members(&node, 2, 4);
    produce_words(&node, 1, &mut expected);
    await_exact_counts(&node, &expected);

    // An instance killed: the other takes its tasks once its session ends.
    a.kill9();
    produce_words(&node, 2, &mut expected);
    await_exact_counts(&node, &expected);
    await_members(&node, 1, 2);

    // The broker killed and restarted: the group goes on from its records.
    node.kill9();
    node.restart();
    produce_words(&node, 3, &mut expected);
    await_exact_counts(&node, &expected);
    let state = streams_groups(&node, &["--describe", "--group", APP, "--state"]);
    assert!(state.contains("Stable"), "{state}");
    // StreamsGroupDescribe v1 (KIP-1331): the group's assignor, and no
    // topology description stored, as Kafka without a description plugin.
    let assignor = state
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().nth(3));
    assert_eq!(assignor, Some("sticky"), "{state}");
    let topology = refused(kafka_tool(
        "kafka-streams-groups.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "--describe",
            "--group",
            APP,
            "--topology",
        ],
        None,
    ));
    assert!(
        topology.contains("No topology description is stored for streams group 'wc-app'."),
        "{topology}"
    );

    // The last instance leaves; the empty group can be deleted.
    b.stop();
    let start = Instant::now();
    while !streams_groups(&node, &["--describe", "--group", APP, "--state"]).contains("Empty") {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the group never emptied"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // Offsets of an empty group can be reset and deleted, and the group
    // deleted with its internal topics.
    streams_groups(
        &node,
        &[
            "--reset-offsets",
            "--group",
            APP,
            "--input-topic",
            INPUT,
            "--to-earliest",
            "--execute",
        ],
    );
    let reset = committed(&node, APP, INPUT);
    assert_eq!(reset, (0..4).map(|p| (p, 0)).collect(), "{reset:?}");
    streams_groups(
        &node,
        &["--delete-offsets", "--group", APP, "--input-topic", INPUT],
    );
    assert!(committed(&node, APP, INPUT).is_empty());
    streams_groups(
        &node,
        &["--delete", "--group", APP, "--delete-all-internal-topics"],
    );
    assert!(!streams_groups(&node, &["--list"])
        .lines()
        .any(|l| l.trim() == APP));
    let start = Instant::now();
    while ok(kafka_tool(
        "kafka-topics.sh",
        &["--bootstrap-server", &node.bootstrap(), "--list"],
        None,
    ))
    .contains("wc-app-")
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "internal topics left"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The group epoch `--describe --state --verbose` shows.
fn group_epoch(node: &Ottla) -> i32 {
    let out = streams_groups(
        node,
        &["--describe", "--group", APP, "--state", "--verbose"],
    );
    let line = out
        .lines()
        .find(|l| l.starts_with(APP))
        .expect("a state line");
    let fields: Vec<&str> = line.split_whitespace().collect();
    // ... STATE GROUP-EPOCH TARGET-ASSIGNMENT-EPOCH #MEMBERS
    fields[fields.len() - 3].parse().expect("an epoch")
}

/// The member epochs `--describe --members --verbose` shows.
fn member_epochs(node: &Ottla) -> Vec<i32> {
    let out = streams_groups(
        node,
        &["--describe", "--group", APP, "--members", "--verbose"],
    );
    out.lines()
        .filter(|l| l.starts_with(APP))
        // GROUP TARGET-ASSIGNMENT-EPOCH TOPOLOGY-EPOCH MEMBER PROTOCOL EPOCH ...
        .map(|l| l.split_whitespace().nth(5).unwrap().parse().unwrap())
        .collect()
}

/// Static members (`group.instance.id`) with RocksDB stores: an instance
/// closed leaves temporarily (member epoch -2) keeping its tasks, and
/// restarted within its session it rejoins under new member ids into the
/// same tasks with no rebalance (the group epoch stays), reporting its
/// stores' offsets; the counts stay exact throughout.
#[test]
fn a_static_instance_restarts_into_its_tasks_without_a_rebalance() {
    let mut overrides = STREAMS_OVERRIDES.to_vec();
    // Long enough for a JVM to restart within it.
    overrides.retain(|(k, _)| *k != "group.streams.session.timeout.ms");
    overrides.push(("group.streams.session.timeout.ms", "30000"));
    let metrics_port = free_port();
    let metrics = format!("http://127.0.0.1:{metrics_port}");
    overrides.push(("metrics.listener", &metrics));
    let node = Ottla::start(&overrides);
    create_topic(&node, INPUT, 4, &[]);
    create_topic(&node, OUTPUT, 1, &[]);
    let mut expected = BTreeMap::new();
    produce_words(&node, 0, &mut expected);
    let dir = &node.data_dir;
    let mut a = StreamsApp::start_with(&node.bootstrap(), dir, "a", &["rocksdb", "a"]);
    let mut b = StreamsApp::start_with(&node.bootstrap(), dir, "b", &["rocksdb", "b"]);
    let before = await_members(&node, 2, 4);
    await_exact_counts(&node, &expected);
    let epoch = group_epoch(&node);

    // Closed: both of a's members leave temporarily, keeping their tasks.
    a.stop();
    let start = Instant::now();
    while member_epochs(&node).iter().filter(|&&e| e == -2).count() != 2 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "a's members never left temporarily: {:?}",
            member_epochs(&node)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(members(&node).len(), 4, "a's members stay in the group");
    produce_words(&node, 1, &mut expected);

    // Restarted: the same tasks for the same process, no new group epoch.
    let _a = StreamsApp::start_with(&node.bootstrap(), dir, "a", &["rocksdb", "a"]);
    let start = Instant::now();
    while member_epochs(&node).iter().any(|&e| e < 0) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "a never rejoined: {:?}",
            member_epochs(&node)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let mut after = await_members(&node, 2, 4);
    let mut before = before;
    before.sort();
    after.sort();
    assert_eq!(after, before, "the tasks stayed where they were");
    assert_eq!(group_epoch(&node), epoch, "no rebalance");
    await_exact_counts(&node, &expected);
    b.stop();
    // The streams APIs, served by Ottla's own codec, are in the request
    // metrics as Kafka's are.
    let text = scrape(metrics_port);
    for api in ["StreamsGroupHeartbeat", "StreamsGroupDescribe"] {
        let request = format!("request=\"{api}\"");
        let served = sum(&text, "kafka_network_requests_total", &[&request]);
        assert!(served.is_some_and(|n| n >= 1.0), "{api}: {served:?}");
        // A heartbeat may be in flight while the metrics are read.
        let timed = sum(
            &text,
            "kafka_network_request_duration_seconds_count",
            &[&request],
        );
        assert!(
            timed.is_some_and(|t| t >= 1.0 && Some(t) <= served),
            "{api}: {timed:?} timed of {served:?}"
        );
    }
}

/// Three nodes, every topic with three replicas: standby tasks sit on the
/// other instance, and the group's coordinator dies mid-stream; the new
/// coordinator loads the group from `__consumer_offsets` and the counts
/// stay exact.
#[test]
fn on_three_nodes_standbys_are_placed_and_the_coordinator_can_die() {
    let mut overrides = STREAMS_OVERRIDES.to_vec();
    overrides.push(("default.replication.factor", "3"));
    let mut nodes = Ottla::cluster(3, &overrides);
    let bootstrap: String = nodes
        .iter()
        .map(|n| n.bootstrap())
        .collect::<Vec<_>>()
        .join(",");
    create_topic(&nodes[0], INPUT, 4, &[]);
    create_topic(&nodes[0], OUTPUT, 1, &[]);
    ok(kafka_tool(
        "kafka-configs.sh",
        &[
            "--bootstrap-server",
            &nodes[0].bootstrap(),
            "--alter",
            "--entity-type",
            "groups",
            "--entity-name",
            APP,
            "--add-config",
            "streams.num.standby.replicas=1",
        ],
        None,
    ));
    let mut expected = BTreeMap::new();
    produce_words(&nodes[0], 0, &mut expected);
    let _a = StreamsApp::start(&bootstrap, &nodes[0].data_dir, "a");
    let _b = StreamsApp::start(&bootstrap, &nodes[1].data_dir, "b");
    let members = await_members(&nodes[0], 2, 4);
    assert!(
        members.iter().any(|(_, a)| a.contains("STANDBY: ")),
        "no standby task: {members:?}"
    );
    await_exact_counts(&nodes[0], &expected);

    // Node ids are 1, 2, 3.
    let coordinator = coordinator_of(&nodes[0], GROUP_KEY, APP);
    let dead = coordinator as usize - 1;
    nodes[dead].kill9();
    let alive = (dead + 1) % nodes.len();
    produce_words(&nodes[alive], 1, &mut expected);
    await_exact_counts(&nodes[alive], &expected);
    assert_ne!(coordinator_of(&nodes[alive], GROUP_KEY, APP), coordinator);
    await_members(&nodes[alive], 2, 4);
}
