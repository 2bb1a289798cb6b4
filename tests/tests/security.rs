//! TLS and SASL listeners against stock clients: the Java CLI tools and
//! librdkafka (confluent-kafka) over SSL, SASL_PLAINTEXT (PLAIN,
//! SCRAM-SHA-256, SCRAM-SHA-512) and SASL_SSL, SCRAM users made with
//! kafka-configs.sh, and the failures: wrong passwords, expired or missing
//! client certificates, plaintext clients on TLS ports, requests before
//! authentication. Certificates are made at test time.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::{MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;
use ottla_tests::certs::TestPki;
use ottla_tests::ottla::{Ottla, STANDARD_AUTHORIZER};
use ottla_tests::tools::{kafka_tool, ok, python_script, refused};
use ottla_tests::wire::WireClient;

const PLAIN_JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
    user_admin=\"admin-secret\" user_alice=\"alice-secret\";";

/// A broker with TLS material and PLAIN users, plus the files clients need.
struct Secured {
    node: Ottla,
    pki: TestPki,
    dir: tempfile::TempDir,
}

fn start(protocols: &[&str], extra: &[(&str, &str)]) -> Secured {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new(dir.path());
    let keystore = pki.server.keystore.display().to_string();
    let ca = pki.ca.display().to_string();
    let mut overrides = vec![
        ("ssl.keystore.type", "PEM"),
        ("ssl.keystore.location", keystore.as_str()),
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.location", ca.as_str()),
        (
            "sasl.enabled.mechanisms",
            "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        ),
        ("sasl.jaas.config", PLAIN_JAAS),
        ("group.initial.rebalance.delay.ms", "0"),
    ];
    overrides.extend_from_slice(extra);
    let node = Ottla::start_with_listeners(protocols, &overrides);
    Secured { node, pki, dir }
}

impl Secured {
    /// Writes a Java client config file.
    fn java_config(&self, name: &str, lines: &[String]) -> PathBuf {
        let path = self.dir.path().join(format!("{name}.properties"));
        std::fs::write(&path, lines.join("\n")).unwrap();
        path
    }

    fn ca(&self) -> String {
        self.pki.ca.display().to_string()
    }
}

fn sasl_jaas(mechanism: &str, user: &str, password: &str) -> String {
    let module = if mechanism == "PLAIN" {
        "org.apache.kafka.common.security.plain.PlainLoginModule"
    } else {
        "org.apache.kafka.common.security.scram.ScramLoginModule"
    };
    format!("{module} required username=\"{user}\" password=\"{password}\";")
}

fn java_sasl(protocol: &str, mechanism: &str, user: &str, password: &str) -> Vec<String> {
    vec![
        format!("security.protocol={protocol}"),
        format!("sasl.mechanism={mechanism}"),
        format!("sasl.jaas.config={}", sasl_jaas(mechanism, user, password)),
    ]
}

fn java_tls(s: &Secured) -> Vec<String> {
    vec![
        "ssl.truststore.type=PEM".into(),
        format!("ssl.truststore.location={}", s.ca()),
    ]
}

/// kafka-topics.sh creates `topic`, the console producer writes `n`
/// records and the console consumer reads exactly them back.
fn java_round_trip(bootstrap: &str, config: &Path, topic: &str, n: usize) {
    let config = config.display().to_string();
    let common = ["--bootstrap-server", bootstrap, "--command-config", &config];
    let mut create = common.to_vec();
    create.extend(["--create", "--topic", topic, "--partitions", "2"]);
    let created = ok(kafka_tool("kafka-topics.sh", &create, None));
    assert!(
        created.contains(&format!("Created topic {topic}")),
        "{created}"
    );
    let input: String = (0..n).map(|i| format!("{topic}-{i}\n")).collect();
    let mut produce = common.to_vec();
    produce.extend(["--topic", topic]);
    ok(kafka_tool(
        "kafka-console-producer.sh",
        &produce,
        Some(&input),
    ));
    let mut consume = common.to_vec();
    let max = n.to_string();
    consume.extend([
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        &max,
        "--timeout-ms",
        "30000",
    ]);
    let out = ok(kafka_tool("kafka-console-consumer.sh", &consume, None));
    let mut got: Vec<&str> = out.lines().filter(|l| l.starts_with(topic)).collect();
    got.sort_unstable();
    let mut want: Vec<String> = (0..n).map(|i| format!("{topic}-{i}")).collect();
    want.sort_unstable();
    assert_eq!(got, want, "{out}");
}

/// confluent-kafka produces `n` records and consumes exactly them back.
const PY_ROUND_TRIP: &str = r#"
import json, sys, time
from confluent_kafka import Consumer, Producer
bootstrap, topic, n, conf = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
pause = float(sys.argv[5]) if len(sys.argv) > 5 else 0
base = dict(conf, **{"bootstrap.servers": bootstrap})
errors = []
def delivered(err, msg):
    if err is not None:
        errors.append(str(err))
p = Producer(base)
for i in range(n):
    p.produce(topic, value=f"{topic}-{i}".encode(), on_delivery=delivered)
    if pause:
        p.flush(10)
        time.sleep(pause)
left = p.flush(30)
if left or errors:
    print(f"produce failed: {left} undelivered, errors {errors[:3]}")
    sys.exit(1)
c = Consumer(dict(base, **{"group.id": f"g-{topic}", "auto.offset.reset": "earliest"}))
c.subscribe([topic])
seen = []
deadline = time.time() + 60
while len(seen) < n and time.time() < deadline:
    m = c.poll(1.0)
    if m is None or m.error():
        continue
    seen.append(m.value().decode())
c.close()
want = sorted(f"{topic}-{i}" for i in range(n))
print(f"consumed {len(seen)}")
sys.exit(0 if sorted(seen) == want else 1)
"#;

/// Connects with `conf` and prints every client error for ten seconds.
const PY_ERRORS: &str = r#"
import json, sys, time
from confluent_kafka import Producer
conf = dict(json.loads(sys.argv[2]), **{"bootstrap.servers": sys.argv[1]})
errors = []
conf["error_cb"] = lambda e: errors.append(f"{e.name()}: {e.str()}")
p = Producer(conf)
p.produce("t", b"x")
deadline = time.time() + 10
while time.time() < deadline and not errors:
    p.poll(0.5)
left = p.flush(2)
print("\n".join(errors))
print(f"undelivered {left}")
"#;

fn python_round_trip(bootstrap: &str, topic: &str, n: usize, conf: &str) {
    let out = python_script(PY_ROUND_TRIP, &[bootstrap, topic, &n.to_string(), conf]);
    let stdout = ok(out);
    assert!(stdout.contains(&format!("consumed {n}")), "{stdout}");
}

fn python_errors(bootstrap: &str, conf: &str) -> String {
    ok(python_script(PY_ERRORS, &[bootstrap, conf]))
}

fn py_sasl(
    protocol: &str,
    mechanism: &str,
    user: &str,
    password: &str,
    ca: Option<&str>,
) -> String {
    let ca = ca.map_or(String::new(), |ca| {
        format!(r#", "ssl.ca.location": "{ca}""#)
    });
    format!(
        r#"{{"security.protocol": "{protocol}", "sasl.mechanism": "{mechanism}", "sasl.username": "{user}", "sasl.password": "{password}"{ca}}}"#
    )
}

/// Creates SCRAM-SHA-256 and SCRAM-SHA-512 credentials for `user` with
/// kafka-configs.sh over the PLAINTEXT listener, one call per mechanism:
/// like Kafka, the broker refuses two changes of one user in one request.
fn add_scram_user(node: &Ottla, user: &str, password: &str) {
    for config in [
        format!("SCRAM-SHA-256=[iterations=4096,password={password}]"),
        format!("SCRAM-SHA-512=[password={password}]"),
    ] {
        let out = ok(kafka_tool(
            "kafka-configs.sh",
            &[
                "--bootstrap-server",
                &node.bootstrap(),
                "--alter",
                "--add-config",
                &config,
                "--entity-type",
                "users",
                "--entity-name",
                user,
            ],
            None,
        ));
        assert!(
            out.contains(&format!("Completed updating config for user {user}")),
            "{out}"
        );
    }
}

#[test]
fn ssl_listener_serves_java_tools_and_librdkafka() {
    let s = start(&["SSL"], &[]);
    let bootstrap = s.node.bootstrap_of("SSL");
    let mut config = vec!["security.protocol=SSL".to_string()];
    config.extend(java_tls(&s));
    let config = s.java_config("ssl", &config);
    java_round_trip(&bootstrap, &config, "java-ssl", 40);
    let conf = format!(
        r#"{{"security.protocol": "SSL", "ssl.ca.location": "{}"}}"#,
        s.ca()
    );
    python_round_trip(&bootstrap, "py-ssl", 30, &conf);
}

/// Stores made with keytool, as Kafka's documentation makes them, and
/// configured as for Kafka (no store types: Kafka's default, JKS): the
/// broker serves Java clients over mutual TLS, and a wrong store password
/// stops its start with the key to fix.
#[test]
fn java_key_and_trust_stores_serve_java_clients_over_mutual_tls() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, client) =
        ottla_tests::keytool::broker_and_client_stores(dir.path(), "java-client");
    let mut overrides = broker.settings();
    overrides.push(("ssl.client.auth", "required".into()));
    let overrides: Vec<(&str, &str)> = overrides.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let node = Ottla::start_with_listeners(&["SSL"], &overrides);
    let bootstrap = node.bootstrap_of("SSL");
    let mut config = vec!["security.protocol=SSL".to_string()];
    config.extend(client.settings().iter().map(|(k, v)| format!("{k}={v}")));
    let config_file = dir.path().join("client.properties");
    std::fs::write(&config_file, config.join("\n")).unwrap();
    java_round_trip(&bootstrap, &config_file, "java-stores", 30);

    let wrong = failed_start(
        dir.path(),
        "SSL",
        &[
            format!("ssl.keystore.location={}", broker.keystore.display()),
            "ssl.keystore.password=guess".to_string(),
        ],
    );
    assert!(wrong.contains("wrong ssl.keystore.password"), "{wrong}");
}

/// The common name of the certificate the TLS listener at `bootstrap`
/// presents, as a client trusting `ca` sees it.
fn served_common_name(bootstrap: &str, ca: &str) -> String {
    let code = r#"
import socket, ssl, sys
host, port = sys.argv[1].rsplit(":", 1)
context = ssl.create_default_context(cafile=sys.argv[2])
with socket.create_connection((host, int(port)), timeout=10) as sock:
    with context.wrap_socket(sock, server_hostname=host) as tls:
        print(dict(field[0] for field in tls.getpeercert()["subject"])["commonName"])
"#;
    ok(python_script(code, &[bootstrap, ca])).trim().to_string()
}

/// Certificate rotation: a per-broker `listener.name.ssl.ssl.keystore.location`
/// takes effect for new connections without a restart; cluster-wide values
/// and unreadable stores are refused, and the current certificate stays.
#[test]
fn a_rotated_certificate_is_served_without_a_restart() {
    let s = start(&["SSL"], &[]);
    let bootstrap = s.node.bootstrap_of("SSL");
    assert_eq!(served_common_name(&bootstrap, &s.ca()), "localhost");
    let rotated = s.pki.another_server("rotated.ottla.test");
    let alter = |target: &str, value: &str| {
        let target_args: &[&str] = if target.is_empty() {
            &["--entity-default"]
        } else {
            &["--entity-name", target]
        };
        let setting = format!("listener.name.ssl.ssl.keystore.location={value}");
        let mut args = vec![
            "--bootstrap-server".to_string(),
            s.node.bootstrap(),
            "--alter".into(),
            "--entity-type".into(),
            "brokers".into(),
        ];
        args.extend(target_args.iter().map(|a| a.to_string()));
        args.extend(["--add-config".to_string(), setting]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        kafka_tool("kafka-configs.sh", &args, None)
    };
    let said = refused(alter("", &rotated.keystore.display().to_string()));
    assert!(said.contains("broker id must be specified"), "{said}");

    ok(alter("1", &rotated.keystore.display().to_string()));
    let deadline = Instant::now() + Duration::from_secs(20);
    while served_common_name(&bootstrap, &s.ca()) != "rotated.ottla.test" {
        assert!(Instant::now() < deadline, "{}", s.node.log());
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(s
        .node
        .log()
        .contains("TLS key store and trust store reloaded"));

    let said = refused(alter("1", "/nonexistent/keystore.pem"));
    assert!(
        said.contains("Validation of dynamic config update"),
        "{said}"
    );
    assert_eq!(
        served_common_name(&bootstrap, &s.ca()),
        "rotated.ottla.test"
    );
    // Java clients trusting the CA go on working over the new certificate.
    let mut config = vec!["security.protocol=SSL".to_string()];
    config.extend(java_tls(&s));
    let config = s.java_config("rotated", &config);
    java_round_trip(&bootstrap, &config, "after-rotation", 20);
}

#[test]
fn sasl_plaintext_plain_and_scram_users_from_kafka_configs() {
    let s = start(&["SASL_PLAINTEXT"], &[]);
    let bootstrap = s.node.bootstrap_of("SASL_PLAINTEXT");
    add_scram_user(&s.node, "bob", "bob-secret");
    let described = ok(kafka_tool(
        "kafka-configs.sh",
        &[
            "--bootstrap-server",
            &s.node.bootstrap(),
            "--describe",
            "--entity-type",
            "users",
        ],
        None,
    ));
    assert!(
        described.contains("SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=4096"),
        "{described}"
    );
    for (mechanism, user, password) in [
        ("PLAIN", "alice", "alice-secret"),
        ("SCRAM-SHA-256", "bob", "bob-secret"),
        ("SCRAM-SHA-512", "bob", "bob-secret"),
    ] {
        let topic = format!("java-{}", mechanism.to_lowercase());
        let config = s.java_config(
            &topic,
            &java_sasl("SASL_PLAINTEXT", mechanism, user, password),
        );
        java_round_trip(&bootstrap, &config, &topic, 25);
        let topic = format!("py-{}", mechanism.to_lowercase());
        let conf = py_sasl("SASL_PLAINTEXT", mechanism, user, password, None);
        python_round_trip(&bootstrap, &topic, 25, &conf);
    }
}

#[test]
fn sasl_ssl_with_listener_prefixed_settings() {
    // A listener named CLIENTS, mapped to SASL_SSL, with its own settings.
    let s = start(
        &["CLIENTS"],
        &[
            (
                "listener.security.protocol.map",
                "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,CLIENTS:SASL_SSL",
            ),
            ("listener.name.clients.sasl.enabled.mechanisms", "SCRAM-SHA-512,PLAIN"),
            (
                "listener.name.clients.plain.sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required user_carol=\"carol-secret\";",
            ),
        ],
    );
    let bootstrap = s.node.bootstrap_of("CLIENTS");
    add_scram_user(&s.node, "dave", "dave-secret");
    let mut config = java_sasl("SASL_SSL", "SCRAM-SHA-512", "dave", "dave-secret");
    config.extend(java_tls(&s));
    let config = s.java_config("sasl-ssl", &config);
    java_round_trip(&bootstrap, &config, "java-sasl-ssl", 30);
    let conf = py_sasl("SASL_SSL", "PLAIN", "carol", "carol-secret", Some(&s.ca()));
    python_round_trip(&bootstrap, "py-sasl-ssl", 30, &conf);
    // The listener's own JAAS users replace the global ones.
    let conf = py_sasl("SASL_SSL", "PLAIN", "alice", "alice-secret", Some(&s.ca()));
    let errors = python_errors(&bootstrap, &conf);
    assert!(errors.contains("Authentication failed"), "{errors}");
    // SCRAM-SHA-256 is not enabled on this listener.
    let conf = py_sasl(
        "SASL_SSL",
        "SCRAM-SHA-256",
        "dave",
        "dave-secret",
        Some(&s.ca()),
    );
    let errors = python_errors(&bootstrap, &conf);
    assert!(errors.contains("SCRAM-SHA-256"), "{errors}");
}

/// A SASL_PLAINTEXT listener added while the broker runs, with its own
/// mechanisms and JAAS users (`listener.name.late.*`, set together with
/// the listener through kafka-configs.sh, as Kafka's docs describe); the
/// settings of a listener already bound stay as they are. The listener is
/// not advertised (a KRaft broker's registration cannot change), so the
/// logins are checked on the wire rather than through a client's session.
#[test]
fn a_listener_added_at_runtime_brings_its_own_sasl_settings() {
    let s = start(&[], &[]);
    let late = format!("127.0.0.1:{}", ottla_tests::ottla::free_port());
    let alter = |configs: &str| {
        kafka_tool(
            "kafka-configs.sh",
            &[
                "--bootstrap-server",
                &s.node.bootstrap(),
                "--alter",
                "--entity-type",
                "brokers",
                "--entity-name",
                "1",
                "--add-config",
                configs,
            ],
            None,
        )
    };
    let listeners = format!(
        "listeners=[PLAINTEXT://127.0.0.1:{},CONTROLLER://127.0.0.1:{},LATE://{late}]",
        s.node.port, s.node.controller_port
    );
    let settings = [
        listeners.as_str(),
        "listener.security.protocol.map=[PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,LATE:SASL_PLAINTEXT]",
        "listener.name.late.sasl.enabled.mechanisms=PLAIN",
        // Brackets keep kafka-configs.sh from splitting the value at its '='.
        "listener.name.late.plain.sasl.jaas.config=[org.apache.kafka.common.security.plain.PlainLoginModule required user_erin=\"erin-secret\";]",
    ];
    ok(alter(&settings.join(",")));
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(&late).is_err() {
        assert!(Instant::now() < deadline, "{late} never opened");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Its own mechanisms: PLAIN only (the broker-wide list has SCRAM too).
    let scram = WireClient::connect(&late).send(1, &handshake("SCRAM-SHA-512"));
    assert_eq!(scram.error_code, 33, "UNSUPPORTED_SASL_MECHANISM");
    let mechanisms: Vec<&str> = scram.mechanisms.iter().map(|m| m.as_str()).collect();
    assert_eq!(mechanisms, ["PLAIN"]);
    // Its own users: erin logs in, the broker-wide alice does not.
    let login = |user: &str, password: &str| {
        let mut client = WireClient::connect(&late);
        assert_eq!(client.send(1, &handshake("PLAIN")).error_code, 0);
        let answer = client.send(2, &plain_token(user, password));
        (answer.error_code, client)
    };
    let (code, mut erin) = login("erin", "erin-secret");
    assert_eq!(code, 0);
    assert_eq!(erin.send(12, &MetadataRequest::default()).brokers.len(), 1);
    assert_eq!(
        login("alice", "alice-secret").0,
        58,
        "SASL_AUTHENTICATION_FAILED"
    );
    // Once bound, its settings change only with a restart.
    let text = refused(alter(
        "listener.name.late.sasl.enabled.mechanisms=SCRAM-SHA-512",
    ));
    assert!(
        text.contains("Configs cannot be updated dynamically for existing listener LATE"),
        "{text}"
    );
}

#[test]
fn wrong_passwords_are_refused_and_logged() {
    let s = start(&["SASL_PLAINTEXT"], &[]);
    let bootstrap = s.node.bootstrap_of("SASL_PLAINTEXT");
    add_scram_user(&s.node, "bob", "bob-secret");
    let config = s.java_config(
        "wrong",
        &java_sasl("SASL_PLAINTEXT", "SCRAM-SHA-512", "bob", "not-bobs"),
    );
    let config = config.display().to_string();
    let out = kafka_tool(
        "kafka-topics.sh",
        &[
            "--bootstrap-server",
            &bootstrap,
            "--command-config",
            &config,
            "--list",
        ],
        None,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("SaslAuthenticationException")
            && stderr.contains("invalid credentials with SASL mechanism SCRAM-SHA-512"),
        "{stderr}"
    );
    let conf = py_sasl("SASL_PLAINTEXT", "PLAIN", "alice", "wrong", None);
    let errors = python_errors(&bootstrap, &conf);
    assert!(
        errors.contains("Authentication failed: Invalid username or password"),
        "{errors}"
    );
    assert!(errors.contains("undelivered 1"), "{errors}");
    let log = s.node.log();
    assert!(log.contains("failed authentication"), "{log}");
    // The broker still serves the right password.
    python_round_trip(
        &bootstrap,
        "after-failures",
        5,
        &py_sasl("SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret", None),
    );
}

fn handshake(mechanism: &'static str) -> SaslHandshakeRequest {
    SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism))
}

fn plain_token(user: &str, password: &str) -> SaslAuthenticateRequest {
    SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(format!("\0{user}\0{password}")))
}

#[test]
fn failed_logins_are_delayed_and_requests_before_login_close_the_connection() {
    let s = start(
        &["SASL_PLAINTEXT"],
        &[("connection.failed.authentication.delay.ms", "1500")],
    );
    let bootstrap = s.node.bootstrap_of("SASL_PLAINTEXT");

    let mut client = WireClient::connect(&bootstrap);
    assert_eq!(client.send(1, &handshake("PLAIN")).error_code, 0);
    let started = Instant::now();
    let answer = client.send(2, &plain_token("alice", "guess"));
    assert_eq!(answer.error_code, 58, "SASL_AUTHENTICATION_FAILED");
    assert!(
        started.elapsed() >= Duration::from_millis(1400),
        "{:?}",
        started.elapsed()
    );
    assert!(client.closed_within(Duration::from_secs(5)));

    // Nothing but ApiVersions and the handshake before authenticating.
    let mut client = WireClient::connect(&bootstrap);
    client.send_only(12, &MetadataRequest::default());
    assert!(client.closed_within(Duration::from_secs(5)));

    // An unknown mechanism is refused with the enabled list.
    let mut client = WireClient::connect(&bootstrap);
    let refused = client.send(1, &handshake("GSSAPI"));
    assert_eq!(refused.error_code, 33, "UNSUPPORTED_SASL_MECHANISM");
    assert_eq!(refused.mechanisms.len(), 3);

    // The right password, then a request served as alice.
    let mut client = WireClient::connect(&bootstrap);
    assert_eq!(client.send(1, &handshake("PLAIN")).error_code, 0);
    let answer = client.send(2, &plain_token("alice", "alice-secret"));
    assert_eq!(answer.error_code, 0);
    assert_eq!(answer.session_lifetime_ms, 0);
    let metadata = client.send(12, &MetadataRequest::default());
    assert_eq!(metadata.brokers.len(), 1);
    // SaslAuthenticate after authentication is ILLEGAL_SASL_STATE (34).
    assert_eq!(
        client
            .send(2, &plain_token("alice", "alice-secret"))
            .error_code,
        34
    );
}

#[test]
fn reauthentication_keeps_long_lived_clients_connected() {
    let s = start(
        &["SASL_PLAINTEXT"],
        &[("connections.max.reauth.ms", "2000")],
    );
    let bootstrap = s.node.bootstrap_of("SASL_PLAINTEXT");
    add_scram_user(&s.node, "bob", "bob-secret");

    let mut client = WireClient::connect(&bootstrap);
    client.send(1, &handshake("PLAIN"));
    let answer = client.send(2, &plain_token("alice", "alice-secret"));
    assert_eq!(answer.session_lifetime_ms, 2000);

    // librdkafka re-authenticates (KIP-368) while producing for 6 s, so
    // the broker never has to close an expired session.
    let conf = py_sasl("SASL_PLAINTEXT", "SCRAM-SHA-256", "bob", "bob-secret", None);
    let out = ok(python_script(
        PY_ROUND_TRIP,
        &[&bootstrap, "reauth", "20", &conf, "0.3"],
    ));
    assert!(out.contains("consumed 20"), "{out}");
    // So does the Java producer, sending 5 records a second for 6 s.
    let config = s.java_config(
        "reauth",
        &java_sasl("SASL_PLAINTEXT", "SCRAM-SHA-512", "bob", "bob-secret"),
    );
    let out = ok(kafka_tool(
        "kafka-producer-perf-test.sh",
        &[
            "--bootstrap-server",
            &bootstrap,
            "--command-config",
            &config.display().to_string(),
            "--topic",
            "java-reauth",
            "--num-records",
            "30",
            "--record-size",
            "100",
            "--throughput",
            "5",
        ],
        None,
    ));
    assert!(out.contains("30 records sent"), "{out}");
    assert!(!s.node.log().contains("expired"), "{}", s.node.log());

    // A client that does not re-authenticate is disconnected at expiry.
    std::thread::sleep(Duration::from_millis(2200));
    client.send_only(12, &MetadataRequest::default());
    assert!(client.closed_within(Duration::from_secs(5)));
    assert!(s.node.log().contains("expired"), "{}", s.node.log());
}

#[test]
fn client_certificates_are_required_and_expired_ones_refused() {
    let s = start(&["SSL"], &[("ssl.client.auth", "required")]);
    let bootstrap = s.node.bootstrap_of("SSL");
    let good = s.pki.client("client-1", false);
    let expired = s.pki.client("client-old", true);
    let tls = |cert: &Path, key: &Path| {
        format!(
            r#"{{"security.protocol": "SSL", "ssl.ca.location": "{}", "ssl.certificate.location": "{}", "ssl.key.location": "{}"}}"#,
            s.ca(),
            cert.display(),
            key.display()
        )
    };
    python_round_trip(&bootstrap, "mtls", 20, &tls(&good.cert, &good.key));

    let errors = python_errors(&bootstrap, &tls(&expired.cert, &expired.key));
    assert!(errors.contains("undelivered 1"), "{errors}");
    assert!(errors.contains("SSL"), "{errors}");
    let log = s.node.log();
    assert!(
        log.contains("TLS handshake failed") && log.contains("xpired"),
        "{log}"
    );

    let no_cert = format!(
        r#"{{"security.protocol": "SSL", "ssl.ca.location": "{}"}}"#,
        s.ca()
    );
    let errors = python_errors(&bootstrap, &no_cert);
    assert!(errors.contains("undelivered 1"), "{errors}");

    // The Java tools present a PEM key store.
    let mut config = vec![
        "security.protocol=SSL".to_string(),
        "ssl.keystore.type=PEM".to_string(),
        format!("ssl.keystore.location={}", good.keystore.display()),
    ];
    config.extend(java_tls(&s));
    let config = s.java_config("mtls", &config);
    java_round_trip(&bootstrap, &config, "java-mtls", 20);
}

#[test]
fn plaintext_client_on_tls_port_fails_cleanly() {
    let s = start(&["SSL"], &[]);
    let bootstrap = s.node.bootstrap_of("SSL");
    // A silent client holds a connection while others are served.
    let mut silent = std::net::TcpStream::connect(&bootstrap).unwrap();
    let silent_since = Instant::now();
    for _ in 0..3 {
        let mut client = WireClient::connect(&bootstrap);
        client.send_only(12, &MetadataRequest::default());
        assert!(client.closed_within(Duration::from_secs(5)));
    }
    // The Java tools configured for PLAINTEXT give up instead of hanging.
    let config = s.java_config(
        "plaintext",
        &[
            "request.timeout.ms=3000".into(),
            "default.api.timeout.ms=6000".into(),
        ],
    );
    let config = config.display().to_string();
    let started = Instant::now();
    let out = kafka_tool(
        "kafka-topics.sh",
        &[
            "--bootstrap-server",
            &bootstrap,
            "--command-config",
            &config,
            "--list",
        ],
        None,
    );
    assert!(!out.status.success());
    assert!(started.elapsed() < Duration::from_secs(60));
    let conf = format!(
        r#"{{"security.protocol": "SSL", "ssl.ca.location": "{}"}}"#,
        s.ca()
    );
    python_round_trip(&bootstrap, "still-serving", 10, &conf);
    assert!(s.node.log().contains("TLS handshake failed"));
    // The silent client is cut off once the handshake time (10 s) is up.
    use std::io::Read;
    silent
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut byte = [0u8; 1];
    assert!(matches!(silent.read(&mut byte), Ok(0) | Err(_)));
    let held = silent_since.elapsed();
    assert!(held < Duration::from_secs(20), "held for {held:?}");
    // The broker logs the timeout as it closes; the line may land just after.
    let logged = Instant::now();
    while !s.node.log().contains("TLS handshake not completed") {
        assert!(
            logged.elapsed() < Duration::from_secs(5),
            "{}",
            s.node.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn scram_credentials_reach_every_node_and_survive_restarts() {
    let mut nodes = Ottla::cluster_with_listeners(
        3,
        &["SASL_PLAINTEXT"],
        &[
            ("sasl.enabled.mechanisms", "SCRAM-SHA-512"),
            ("offsets.topic.replication.factor", "3"),
            ("group.initial.rebalance.delay.ms", "0"),
        ],
    );
    add_scram_user(&nodes[0], "erin", "erin-secret");
    let conf = py_sasl(
        "SASL_PLAINTEXT",
        "SCRAM-SHA-512",
        "erin",
        "erin-secret",
        None,
    );
    // Written through node 1, checked by node 3 from its own metadata image.
    python_round_trip(
        &nodes[2].bootstrap_of("SASL_PLAINTEXT"),
        "everywhere",
        10,
        &conf,
    );
    nodes[2].stop();
    nodes[2].restart();
    nodes[2].wait_for_brokers(3, Duration::from_secs(60));
    let bootstrap = nodes[2].bootstrap_of("SASL_PLAINTEXT");
    python_round_trip(&bootstrap, "after-restart", 10, &conf);
    let wrong = py_sasl(
        "SASL_PLAINTEXT",
        "SCRAM-SHA-512",
        "erin",
        "erin-guess",
        None,
    );
    let errors = python_errors(&bootstrap, &wrong);
    assert!(errors.contains("Authentication failed"), "{errors}");
}

/// A 3-node cluster whose brokers replicate, send transaction markers and
/// reach each other only over SASL_SSL (PLAIN login, TLS with the CA):
/// acks=all with min.insync.replicas=3 succeeds only if every follower
/// fetches over it.
/// Brokers replicate, and controllers run the metadata quorum, only over
/// SASL_SSL listeners (PLAIN): the cluster forms, replicates with a full
/// ISR, and a logged-in user without CLUSTER_ACTION cannot join the quorum.
#[test]
fn brokers_and_controllers_talk_only_over_sasl_ssl() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new(dir.path());
    let keystore = pki.server.keystore.display().to_string();
    let ca = pki.ca.display().to_string();
    let jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required \
        username=\"broker\" password=\"broker-secret\" user_broker=\"broker-secret\" \
        user_intruder=\"intruder-secret\";";
    let nodes = Ottla::cluster_with_listeners(
        3,
        &["SASL_SSL"],
        &[
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.location", keystore.as_str()),
            ("ssl.truststore.type", "PEM"),
            ("ssl.truststore.location", ca.as_str()),
            ("sasl.enabled.mechanisms", "PLAIN"),
            (
                "listener.security.protocol.map",
                "CONTROLLER:SASL_SSL,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
            ),
            ("listener.name.sasl_ssl.plain.sasl.jaas.config", jaas),
            ("listener.name.controller.plain.sasl.jaas.config", jaas),
            ("inter.broker.listener.name", "SASL_SSL"),
            ("sasl.mechanism.inter.broker.protocol", "PLAIN"),
            ("sasl.mechanism.controller.protocol", "PLAIN"),
            ("authorizer.class.name", STANDARD_AUTHORIZER),
            // ANONYMOUS for the test's own tools on the PLAINTEXT listener.
            ("super.users", "User:broker;User:ANONYMOUS"),
        ],
    );
    intruder_cannot_join_the_quorum(&nodes[0], &pki.ca);
    let bootstrap = nodes[0].bootstrap();
    ok(kafka_tool(
        "kafka-topics.sh",
        &[
            "--bootstrap-server",
            &bootstrap,
            "--create",
            "--topic",
            "guarded",
            "--partitions",
            "3",
            "--replication-factor",
            "3",
            "--config",
            "min.insync.replicas=3",
        ],
        None,
    ));
    ok(kafka_tool(
        "kafka-producer-perf-test.sh",
        &[
            "--topic",
            "guarded",
            "--num-records",
            "3000",
            "--record-size",
            "100",
            "--throughput",
            "-1",
            "--producer-props",
            &format!("bootstrap.servers={bootstrap}"),
            "acks=all",
            "delivery.timeout.ms=60000",
        ],
        None,
    ));
    let described = ok(kafka_tool(
        "kafka-topics.sh",
        &[
            "--bootstrap-server",
            &bootstrap,
            "--describe",
            "--topic",
            "guarded",
        ],
        None,
    ));
    let full_isr = described
        .lines()
        .filter(|l| l.contains("Partition:"))
        .filter(|l| {
            l.split("Isr:")
                .nth(1)
                .is_some_and(|isr| isr.split(',').count() == 3)
        })
        .count();
    assert_eq!(full_isr, 3, "{described}");
    drop(nodes);
}

/// A PLAIN user that logs in on the controller listener and then speaks
/// the quorum's RPC is refused for want of CLUSTER_ACTION.
fn intruder_cannot_join_the_quorum(node: &Ottla, ca: &Path) {
    use ottla_client::KafkaClient;
    use ottla_client::{ClientSasl, ClientSecurity, ClientTls, SaslMechanism};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let security = ClientSecurity {
        tls: Some(ClientTls::from_pem(&std::fs::read_to_string(ca).unwrap(), None).unwrap()),
        sasl: Some(ClientSasl {
            mechanism: SaslMechanism::Plain,
            username: "intruder".into(),
            password: "intruder-secret".into(),
        }),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let answer = runtime.block_on(async {
        let timeout = Duration::from_secs(10);
        let client = KafkaClient::connect_with(
            "127.0.0.1",
            node.controller_port,
            "intruder",
            1 << 20,
            timeout,
            &security,
        )
        .await
        .expect("the intruder's PLAIN login itself is valid");
        let (mut read, mut write) = client.into_stream();
        // A quorum RPC frame: size, key 30000, version 0, a body.
        let mut frame = 8u32.to_be_bytes().to_vec();
        frame.extend_from_slice(&30_000i16.to_be_bytes());
        frame.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
        write.write_all(&frame).await.unwrap();
        let mut buf = Vec::new();
        tokio::time::timeout(timeout, read.read_to_end(&mut buf))
            .await
            .expect("the connection is closed, not left hanging")
            .map(|_| buf)
    });
    assert!(
        answer.as_ref().is_ok_and(Vec::is_empty),
        "closed without an answer: {answer:?}"
    );
    let log = node.log();
    assert!(
        log.contains("refusing a quorum RPC connection: User:intruder may not take part"),
        "{log}"
    );
}

#[test]
fn an_inter_broker_listener_without_a_broker_login_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::new(dir.path());
    let keystore = pki.server.keystore.display().to_string();
    let ca = pki.ca.display().to_string();
    let stderr = failed_start(
        dir.path(),
        "SASL_SSL",
        &[
            "inter.broker.listener.name=SASL_SSL".into(),
            "sasl.mechanism.inter.broker.protocol=PLAIN".into(),
            "sasl.enabled.mechanisms=PLAIN".into(),
            format!("sasl.jaas.config={PLAIN_JAAS}"),
            "ssl.keystore.type=PEM".into(),
            format!("ssl.keystore.location={keystore}"),
            "ssl.truststore.type=PEM".into(),
            format!("ssl.truststore.location={ca}"),
        ],
    );
    assert!(
        stderr.contains("inter-broker listener SASL_SSL") && stderr.contains("username=\"...\""),
        "{stderr}"
    );
}

/// Starts a broker with a `protocol` listener and `overrides` that must stop
/// its start; what it printed.
fn failed_start(dir: &Path, protocol: &str, overrides: &[String]) -> String {
    let [plain, port, controller] = [(); 3].map(|_| ottla_tests::ottla::free_port());
    let data = dir.join("failed-start");
    let mut all = vec![
        format!(
            "listeners=PLAINTEXT://127.0.0.1:{plain},{protocol}://127.0.0.1:{port},\
             CONTROLLER://127.0.0.1:{controller}"
        ),
        format!("controller.quorum.voters=1@127.0.0.1:{controller}"),
        format!("log.dirs={}", data.display()),
    ];
    all.extend_from_slice(overrides);
    let out = std::process::Command::new(ottla_tests::ottla::ottla_binary())
        .arg("server")
        .args(all.iter().flat_map(|o| ["--override", o.as_str()]))
        .output()
        .unwrap();
    assert!(!out.status.success(), "the broker started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}
