//! ACLs with the StandardAuthorizer against stock clients: kafka-acls.sh
//! adds, lists and removes them; SASL/PLAIN users without ACLs are refused
//! by the console producer and consumer, the Java admin and librdkafka; the
//! right ACLs let them through (literal, prefixed, DENY over ALLOW), super
//! users need none, Metadata hides what a user may not describe, and ACLs
//! survive a restart.
//!
//! The PLAINTEXT listener runs as User:ANONYMOUS, listed in super.users as
//! brokers need (it is also how these tests administer the broker).

use std::path::PathBuf;
use std::process::Output;

use ottla_tests::ottla::{Ottla, STANDARD_AUTHORIZER};
use ottla_tests::tools::{kafka_tool, ok, python_script};
use ottla_tests::topics::describe;

const JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
    user_admin=\"admin-secret\" user_alice=\"alice-secret\" user_bob=\"bob-secret\";";

struct Secured {
    node: Ottla,
    dir: tempfile::TempDir,
}

fn start() -> Secured {
    let node = Ottla::start_with_listeners(
        &["SASL_PLAINTEXT"],
        &[
            ("sasl.enabled.mechanisms", "PLAIN"),
            ("sasl.jaas.config", JAAS),
            ("authorizer.class.name", STANDARD_AUTHORIZER),
            ("super.users", "User:ANONYMOUS;User:admin"),
            ("group.initial.rebalance.delay.ms", "0"),
        ],
    );
    Secured {
        node,
        dir: tempfile::tempdir().unwrap(),
    }
}

impl Secured {
    fn sasl(&self) -> String {
        self.node.bootstrap_of("SASL_PLAINTEXT")
    }

    /// A Java client config for a PLAIN user.
    fn config(&self, user: &str) -> String {
        let path: PathBuf = self.dir.path().join(format!("{user}.properties"));
        std::fs::write(
            &path,
            format!(
                "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n\
                 sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule \
                 required username=\"{user}\" password=\"{user}-secret\";\n"
            ),
        )
        .unwrap();
        path.display().to_string()
    }

    /// kafka-acls.sh over the PLAINTEXT listener (a super user).
    fn acls(&self, args: &[&str]) -> String {
        let bootstrap = self.node.bootstrap();
        let mut all = vec!["--bootstrap-server", bootstrap.as_str()];
        all.extend_from_slice(args);
        ok(kafka_tool("kafka-acls.sh", &all, None))
    }

    /// Creates a topic as the super user.
    fn create_topic(&self, topic: &str) {
        let out = ok(kafka_tool(
            "kafka-topics.sh",
            &[
                "--bootstrap-server",
                &self.node.bootstrap(),
                "--create",
                "--topic",
                topic,
                "--partitions",
                "2",
            ],
            None,
        ));
        assert!(out.contains(&format!("Created topic {topic}")), "{out}");
    }

    /// The console producer as `user` writing `n` records to `topic`.
    fn produce(&self, user: &str, topic: &str, n: usize) -> Output {
        let config = self.config(user);
        let input: String = (0..n).map(|i| format!("{topic}-{i}\n")).collect();
        kafka_tool(
            "kafka-console-producer.sh",
            &[
                "--bootstrap-server",
                &self.sasl(),
                "--producer.config",
                &config,
                "--topic",
                topic,
                "--producer-property",
                "max.block.ms=10000",
            ],
            Some(&input),
        )
    }

    /// The console consumer as `user` in `group`, reading up to `n` records.
    fn consume(&self, user: &str, topic: &str, group: &str, n: usize) -> Output {
        let config = self.config(user);
        let max = n.to_string();
        kafka_tool(
            "kafka-console-consumer.sh",
            &[
                "--bootstrap-server",
                &self.sasl(),
                "--consumer.config",
                &config,
                "--topic",
                topic,
                "--group",
                group,
                "--from-beginning",
                "--max-messages",
                &max,
                "--timeout-ms",
                "20000",
            ],
            None,
        )
    }

    fn list_topics(&self, user: &str) -> Vec<String> {
        let config = self.config(user);
        let out = ok(kafka_tool(
            "kafka-topics.sh",
            &[
                "--bootstrap-server",
                &self.sasl(),
                "--command-config",
                &config,
                "--list",
            ],
            None,
        ));
        out.lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect()
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn records(out: &Output, topic: &str) -> usize {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with(&format!("{topic}-")))
        .count()
}

#[test]
fn kafka_acls_add_list_remove_and_survive_a_restart() {
    let mut s = start();
    let added = s.acls(&[
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--operation",
        "Write",
        "--topic",
        "orders",
    ]);
    assert!(added.contains("operation=WRITE"), "{added}");
    s.acls(&[
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Write",
        "--resource-pattern-type",
        "prefixed",
        "--topic",
        "logs-",
    ]);
    s.acls(&[
        "--add",
        "--deny-principal",
        "User:bob",
        "--operation",
        "All",
        "--group",
        "g1",
        "--transactional-id",
        "tx1",
        "--cluster",
    ]);
    let listed = s.acls(&["--list"]);
    for want in [
        "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)",
        "ResourcePattern(resourceType=TOPIC, name=logs-, patternType=PREFIXED)",
        "ResourcePattern(resourceType=GROUP, name=g1, patternType=LITERAL)",
        "ResourcePattern(resourceType=TRANSACTIONAL_ID, name=tx1, patternType=LITERAL)",
        "ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)",
        "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
        "(principal=User:bob, host=*, operation=ALL, permissionType=DENY)",
    ] {
        assert!(listed.contains(want), "missing {want} in:\n{listed}");
    }
    // MATCH finds the literal and prefixed ACLs that apply to a name.
    let for_topic = s.acls(&[
        "--list",
        "--resource-pattern-type",
        "match",
        "--topic",
        "logs-app",
    ]);
    assert!(
        for_topic.contains("name=logs-, patternType=PREFIXED"),
        "{for_topic}"
    );
    assert!(!for_topic.contains("name=orders"), "{for_topic}");

    s.node.stop();
    s.node.restart();
    let listed = s.acls(&["--list", "--principal", "User:alice"]);
    assert_eq!(
        listed.matches("permissionType=ALLOW").count(),
        3,
        "{listed}"
    );

    s.acls(&["--remove", "--force", "--topic", "orders"]);
    let listed = s.acls(&["--list"]);
    assert!(!listed.contains("name=orders"), "{listed}");
    assert!(listed.contains("name=logs-"), "{listed}");
    s.acls(&[
        "--remove",
        "--force",
        "--resource-pattern-type",
        "prefixed",
        "--topic",
        "logs-",
    ]);
    s.acls(&[
        "--remove",
        "--force",
        "--group",
        "g1",
        "--transactional-id",
        "tx1",
        "--cluster",
    ]);
    let listed = s.acls(&["--list"]);
    assert!(!listed.contains("ResourcePattern"), "{listed}");
}

#[test]
fn users_need_acls_to_produce_and_consume() {
    let s = start();
    s.create_topic("orders");

    // No ACL: refused by the Java producer, consumer and admin client.
    let out = s.produce("alice", "orders", 5);
    let msg = text(&out);
    assert!(msg.contains("TopicAuthorizationException"), "{msg}");
    let out = s.consume("alice", "orders", "g-orders", 1);
    let msg = text(&out);
    assert!(msg.contains("AuthorizationException"), "{msg}");
    let config = s.config("alice");
    let out = kafka_tool(
        "kafka-topics.sh",
        &[
            "--bootstrap-server",
            &s.sasl(),
            "--command-config",
            &config,
            "--create",
            "--topic",
            "alices-own",
        ],
        None,
    );
    let msg = text(&out);
    assert!(!out.status.success(), "{msg}");
    assert!(msg.contains("TopicAuthorizationException"), "{msg}");

    // The group alone is not enough: the topic is refused.
    s.acls(&[
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--group",
        "g-orders",
    ]);
    let out = s.consume("alice", "orders", "g-orders", 1);
    let msg = text(&out);
    assert!(msg.contains("TopicAuthorizationException"), "{msg}");

    // WRITE (with --producer's DESCRIBE and CREATE) lets alice produce.
    s.acls(&[
        "--add",
        "--allow-principal",
        "User:alice",
        "--producer",
        "--topic",
        "orders",
    ]);
    let out = s.produce("alice", "orders", 30);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains("Exception"), "{}", text(&out));

    // READ on the topic: she reads exactly what she wrote.
    s.acls(&[
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--topic",
        "orders",
    ]);
    let out = s.consume("alice", "orders", "g-orders", 30);
    assert_eq!(records(&out, "orders"), 30, "{}", text(&out));
    assert!(out.status.success(), "{}", text(&out));

    // Another group is still refused.
    let out = s.consume("alice", "orders", "g-other", 1);
    let msg = text(&out);
    assert!(msg.contains("GroupAuthorizationException"), "{msg}");
}

#[test]
fn prefixed_acls_deny_over_allow_and_super_users() {
    let s = start();
    for topic in ["app-1", "app-secret", "other"] {
        s.create_topic(topic);
    }
    s.acls(&[
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Write",
        "--resource-pattern-type",
        "prefixed",
        "--topic",
        "app-",
    ]);
    s.acls(&[
        "--add",
        "--deny-principal",
        "User:*",
        "--operation",
        "Write",
        "--topic",
        "app-secret",
    ]);

    let out = s.produce("alice", "app-1", 12);
    assert!(out.status.success(), "{}", text(&out));
    for refused in ["app-secret", "other"] {
        let out = s.produce("alice", refused, 3);
        assert!(
            text(&out).contains("TopicAuthorizationException"),
            "{refused}: {}",
            text(&out)
        );
    }
    // A super user needs no ACL, and a DENY for User:* does not stop it.
    let out = s.produce("admin", "app-secret", 7);
    assert!(out.status.success(), "{}", text(&out));
    let out = s.consume("admin", "app-secret", "g-admin", 7);
    assert_eq!(records(&out, "app-secret"), 7, "{}", text(&out));
    // What was written as alice is all there.
    let out = s.consume("admin", "app-1", "g-admin", 12);
    assert_eq!(records(&out, "app-1"), 12, "{}", text(&out));
}

#[test]
fn metadata_lists_only_describable_topics() {
    let s = start();
    for topic in ["visible", "hidden", "team-a", "team-b"] {
        s.create_topic(topic);
    }
    let listed = s.list_topics("bob");
    assert!(listed.is_empty(), "bob has no ACLs: {listed:?}");
    s.acls(&[
        "--add",
        "--allow-principal",
        "User:bob",
        "--operation",
        "Describe",
        "--topic",
        "visible",
    ]);
    s.acls(&[
        "--add",
        "--allow-principal",
        "User:bob",
        "--operation",
        "Read",
        "--resource-pattern-type",
        "prefixed",
        "--topic",
        "team-",
    ]);
    assert_eq!(s.list_topics("bob"), ["team-a", "team-b", "visible"]);
    let all = s.list_topics("admin");
    for topic in ["visible", "hidden", "team-a", "team-b"] {
        assert!(all.iter().any(|t| t == topic), "{all:?}");
    }
}

/// confluent-kafka produces one record and prints the delivery error.
const PY_PRODUCE: &str = r#"
import sys
from confluent_kafka import Producer
conf = {"bootstrap.servers": sys.argv[1], "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": sys.argv[2],
        "sasl.password": sys.argv[2] + "-secret", "message.timeout.ms": 10000}
results = []
p = Producer(conf)
p.produce(sys.argv[3], b"x", on_delivery=lambda err, msg: results.append(err.name() if err else "OK"))
p.flush(15)
print("delivery:", results)
"#;

#[test]
fn librdkafka_gets_an_authorization_error() {
    let s = start();
    s.create_topic("rd");
    let refused = ok(python_script(PY_PRODUCE, &[&s.sasl(), "alice", "rd"]));
    assert!(refused.contains("TOPIC_AUTHORIZATION_FAILED"), "{refused}");
    s.acls(&[
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Write",
        "--topic",
        "rd",
    ]);
    let allowed = ok(python_script(PY_PRODUCE, &[&s.sasl(), "alice", "rd"]));
    assert!(allowed.contains("delivery: ['OK']"), "{allowed}");
}

/// The ISR sizes of `topic`'s partitions, from kafka-topics.sh --describe.
fn isr_sizes(node: &Ottla, topic: &str) -> Vec<usize> {
    describe(node, topic)
        .values()
        .map(|p| p.isr.len())
        .collect()
}

fn wait_for_isr(node: &Ottla, topic: &str, want: usize) {
    let start = std::time::Instant::now();
    loop {
        let sizes = isr_sizes(node, topic);
        if !sizes.is_empty() && sizes.iter().all(|n| *n == want) {
            return;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "ISR sizes of {topic} stayed {sizes:?}, want {want}"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// Followers fetch as their inter-broker principal (User:broker over
/// SASL_PLAINTEXT) and need CLUSTER_ACTION: a DENY of it shrinks every ISR
/// to its leader, and removing it lets the followers back in. The
/// controllers, ANONYMOUS on their PLAINTEXT listener, keep theirs.
#[test]
fn replication_needs_cluster_action() {
    let jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required \
        username=\"broker\" password=\"broker-secret\" user_broker=\"broker-secret\";";
    let nodes = Ottla::cluster_with_listeners(
        3,
        &["SASL_PLAINTEXT"],
        &[
            ("broker.heartbeat.interval.ms", "300"),
            ("broker.session.timeout.ms", "2500"),
            ("replica.lag.time.max.ms", "3000"),
            ("replica.fetch.backoff.ms", "200"),
            ("sasl.enabled.mechanisms", "PLAIN"),
            ("listener.name.sasl_plaintext.plain.sasl.jaas.config", jaas),
            ("inter.broker.listener.name", "SASL_PLAINTEXT"),
            ("sasl.mechanism.inter.broker.protocol", "PLAIN"),
            ("authorizer.class.name", STANDARD_AUTHORIZER),
            // No super user: without ACLs everything is allowed.
            ("allow.everyone.if.no.acl.found", "true"),
        ],
    );
    let node = &nodes[0];
    let out = ok(kafka_tool(
        "kafka-topics.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "--create",
            "--topic",
            "replicated",
            "--partitions",
            "2",
            "--replication-factor",
            "3",
        ],
        None,
    ));
    assert!(out.contains("Created topic"), "{out}");
    wait_for_isr(node, "replicated", 3);

    let acls = |args: &[&str]| {
        let bootstrap = node.bootstrap();
        let mut all = vec!["--bootstrap-server", bootstrap.as_str()];
        all.extend_from_slice(args);
        ok(kafka_tool("kafka-acls.sh", &all, None))
    };
    // ALLOW ALL keeps the cluster administrable and the quorum running;
    // the DENY wins for the brokers' CLUSTER_ACTION.
    acls(&[
        "--add",
        "--allow-principal",
        "User:ANONYMOUS",
        "--allow-principal",
        "User:broker",
        "--operation",
        "All",
        "--cluster",
    ]);
    acls(&[
        "--add",
        "--deny-principal",
        "User:broker",
        "--operation",
        "ClusterAction",
        "--cluster",
    ]);
    wait_for_isr(node, "replicated", 1);

    acls(&[
        "--remove",
        "--force",
        "--deny-principal",
        "User:broker",
        "--operation",
        "ClusterAction",
        "--cluster",
    ]);
    wait_for_isr(node, "replicated", 3);
}

/// confluent-kafka runs one transaction of `n` records and prints how it
/// went and the delivery errors.
const PY_TRANSACTION: &str = r#"
import sys
from confluent_kafka import KafkaException, Producer
bootstrap, user, txn_id, topic, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
p = Producer({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanism": "PLAIN", "sasl.username": user,
              "sasl.password": user + "-secret", "transactional.id": txn_id})
errors = set()
def delivered(err, msg):
    if err is not None:
        errors.add(err.name())
try:
    p.init_transactions(20)
    p.begin_transaction()
    try:
        for i in range(n):
            p.produce(topic, f"{topic}-{i}".encode(), on_delivery=delivered)
    except KafkaException as e:
        # The transaction failed while records were still being produced
        # (_STATE); committing reports why.
        if e.args[0].name() != "_STATE":
            raise
    p.commit_transaction(30)
    print("committed")
except KafkaException as e:
    print("failed:", e.args[0].name(), e.args[0].str())
print("delivery errors:", sorted(errors))
"#;

#[test]
fn transactions_need_write_on_the_transactional_id_and_topics() {
    let s = start();
    s.create_topic("txn-out");
    let run = || {
        ok(python_script(
            PY_TRANSACTION,
            &[&s.sasl(), "alice", "tx-a", "txn-out", "15"],
        ))
    };
    let out = run();
    assert!(
        out.contains("failed: TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
        "{out}"
    );

    s.acls(&[
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Write",
        "--transactional-id",
        "tx-a",
    ]);
    // DESCRIBE shows the topic; adding it to the transaction needs WRITE.
    s.acls(&[
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Describe",
        "--topic",
        "txn-out",
    ]);
    let out = run();
    assert!(out.contains("failed:"), "{out}");
    assert!(out.contains("TOPIC_AUTHORIZATION_FAILED"), "{out}");

    s.acls(&[
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Write",
        "--topic",
        "txn-out",
    ]);
    let out = run();
    assert!(out.contains("committed"), "{out}");
    assert!(out.contains("delivery errors: []"), "{out}");
    let out = s.consume("admin", "txn-out", "g-txn", 15);
    assert_eq!(records(&out, "txn-out"), 15, "{}", text(&out));
}
