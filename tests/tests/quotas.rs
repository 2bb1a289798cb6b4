//! Client quotas with the stock tools: `kafka-configs.sh` sets and describes
//! them (users, clients, both, IPs, defaults), refuses invalid ones with
//! Kafka's messages, and a producer and a consumer over their byte-rate
//! quota are slowed down to it with nothing lost.

use std::time::Instant;

use ottla_tests::ottla::{free_port, Ottla};
use ottla_tests::tools::{kafka_tool, ok, python_script};

fn configs(bootstrap: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["--bootstrap-server", bootstrap];
    all.extend_from_slice(args);
    kafka_tool("kafka-configs.sh", &all, None)
}

fn throttled_total(metrics_port: u16, quota: &str) -> f64 {
    let text = ok(python_script(
        "import sys, urllib.request\nprint(urllib.request.urlopen(sys.argv[1]).read().decode())",
        &[&format!("http://127.0.0.1:{metrics_port}/metrics")],
    ));
    let prefix = format!("kafka_server_quota_throttled_responses_total{{quota=\"{quota}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {prefix} in the metrics:\n{text}"))
}

#[test]
fn kafka_configs_sets_describes_and_validates_client_quotas() {
    let node = Ottla::start(&[]);
    let b = node.bootstrap();
    ok(configs(
        &b,
        &[
            "--alter",
            "--entity-type",
            "clients",
            "--entity-name",
            "billing",
            "--add-config",
            "producer_byte_rate=1048576,consumer_byte_rate=2097152",
        ],
    ));
    ok(configs(
        &b,
        &[
            "--alter",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
            "--entity-type",
            "clients",
            "--entity-default",
            "--add-config",
            "request_percentage=25.5",
        ],
    ));
    ok(configs(
        &b,
        &[
            "--alter",
            "--entity-type",
            "ips",
            "--entity-name",
            "10.1.2.3",
            "--add-config",
            "connection_creation_rate=10",
        ],
    ));
    let billing = ok(configs(
        &b,
        &[
            "--describe",
            "--entity-type",
            "clients",
            "--entity-name",
            "billing",
        ],
    ));
    assert!(
        billing.contains("producer_byte_rate=1048576")
            && billing.contains("consumer_byte_rate=2097152"),
        "{billing}"
    );
    let alice = ok(configs(
        &b,
        &[
            "--describe",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
            "--entity-type",
            "clients",
            "--entity-default",
        ],
    ));
    assert!(alice.contains("request_percentage=25.5"), "{alice}");
    let ip = ok(configs(
        &b,
        &[
            "--describe",
            "--entity-type",
            "ips",
            "--entity-name",
            "10.1.2.3",
        ],
    ));
    assert!(ip.contains("connection_creation_rate=10"), "{ip}");

    // Kafka's validation, with its messages.
    for (entity, config, expected) in [
        (
            "clients",
            "producer_byte_rate=1.5",
            "producer_byte_rate cannot be a fractional value",
        ),
        (
            "clients",
            "request_percentage=0",
            "Quota request_percentage must be greater than 0",
        ),
    ] {
        let name = "other";
        let refused = configs(
            &b,
            &[
                "--alter",
                "--entity-type",
                entity,
                "--entity-name",
                name,
                "--add-config",
                config,
            ],
        );
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&refused.stdout),
            String::from_utf8_lossy(&refused.stderr)
        );
        assert!(text.contains(expected), "{config}: {text}");
    }

    // Removing a key leaves the others; the quotas survive a restart.
    ok(configs(
        &b,
        &[
            "--alter",
            "--entity-type",
            "clients",
            "--entity-name",
            "billing",
            "--delete-config",
            "consumer_byte_rate",
        ],
    ));
    let mut node = node;
    node.stop();
    node.restart();
    let billing = ok(configs(
        &b,
        &[
            "--describe",
            "--entity-type",
            "clients",
            "--entity-name",
            "billing",
        ],
    ));
    assert!(
        billing.contains("producer_byte_rate=1048576") && !billing.contains("consumer_byte_rate"),
        "{billing}"
    );
}

/// Seconds a run of `tool` took, after checking it succeeded.
fn timed(tool: &str, args: &[&str]) -> (f64, String) {
    let started = Instant::now();
    let out = ok(kafka_tool(tool, args, None));
    (started.elapsed().as_secs_f64(), out)
}

#[test]
fn producers_and_consumers_over_their_quota_are_slowed_to_it() {
    const QUOTA: u64 = 100 * 1024;
    const RECORDS: u64 = 1500;
    const RECORD_SIZE: u64 = 1000;
    let metrics_port = free_port();
    let listener = format!("http://127.0.0.1:{metrics_port}");
    let node = Ottla::start(&[("metrics.listener", listener.as_str())]);
    let b = node.bootstrap();
    for (key, client) in [
        ("producer_byte_rate", "slow-producer"),
        ("consumer_byte_rate", "slow-consumer"),
    ] {
        ok(configs(
            &b,
            &[
                "--alter",
                "--entity-type",
                "clients",
                "--entity-name",
                client,
                "--add-config",
                &format!("{key}={QUOTA}"),
            ],
        ));
    }
    // 1.5 MB: the first 10 s worth of quota (1 MB) goes at once, the rest
    // at 100 KiB/s, so about 5 s of throttling.
    let produce_as = |client_id: &str| {
        timed(
            "kafka-producer-perf-test.sh",
            &[
                "--topic",
                "metered",
                "--num-records",
                &RECORDS.to_string(),
                "--record-size",
                &RECORD_SIZE.to_string(),
                "--throughput",
                "-1",
                "--producer-props",
                &format!("bootstrap.servers={b}"),
                &format!("client.id={client_id}"),
                "acks=1",
            ],
        )
        .0
    };
    let produce_secs = produce_as("slow-producer");
    assert!(
        produce_secs > 3.5,
        "1.5 MB at a 100 KiB/s quota took only {produce_secs:.1} s"
    );
    assert!(throttled_total(metrics_port, "produce") > 0.0);

    let (consume_secs, consumed) = timed(
        "kafka-console-consumer.sh",
        &[
            "--bootstrap-server",
            &b,
            "--topic",
            "metered",
            "--from-beginning",
            "--max-messages",
            &RECORDS.to_string(),
            "--timeout-ms",
            "60000",
            "--consumer-property",
            "client.id=slow-consumer",
        ],
    );
    let records = consumed
        .lines()
        .filter(|l| l.len() as u64 == RECORD_SIZE)
        .count() as u64;
    assert_eq!(
        records,
        RECORDS,
        "records lost or doubled:\n{}",
        consumed
            .lines()
            .filter(|l| l.len() as u64 != RECORD_SIZE)
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        consume_secs > 3.5,
        "1.5 MB at a 100 KiB/s quota was consumed in {consume_secs:.1} s"
    );
    assert!(throttled_total(metrics_port, "fetch") > 0.0);

    // A client without a quota is not slowed down.
    let free_secs = produce_as("unmetered");
    assert!(
        free_secs < produce_secs,
        "unmetered {free_secs:.1} s, metered {produce_secs:.1} s"
    );
}

/// Whether a fresh connection to `bootstrap` gets an answer to ApiVersions
/// v0 (false: the broker closed it).
fn answered(bootstrap: &str) -> bool {
    answering(bootstrap).is_some()
}

/// A fresh connection to `bootstrap`, if it gets an answer to ApiVersions
/// v0 (None: the broker closed it).
fn answering(bootstrap: &str) -> Option<std::net::TcpStream> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(bootstrap).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    // size 10; key 18, version 0, correlation id 1, null client id.
    let request = [0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff];
    stream.write_all(&request).ok()?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).ok()?;
    let mut body = vec![0; u32::from_be_bytes(size) as usize];
    stream.read_exact(&mut body).ok()?;
    Some(stream)
}

/// How many of `n` connections opened at once from this host are served,
/// waiting (up to 20 s) for the count to settle at `expected`, since a
/// config change reaches the listeners through the metadata log.
fn served_at_once(bootstrap: &str, n: usize, expected: usize) -> usize {
    let deadline = Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let open: Vec<_> = (0..n).filter_map(|_| answering(bootstrap)).collect();
        if open.len() == expected || Instant::now() > deadline {
            return open.len();
        }
        drop(open);
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}

#[test]
fn an_ip_over_its_connection_creation_rate_is_refused() {
    let node = Ottla::start(&[]);
    let b = node.bootstrap();
    ok(configs(
        &b,
        &[
            "--alter",
            "--entity-type",
            "ips",
            "--entity-name",
            "127.0.0.1",
            "--add-config",
            "connection_creation_rate=3",
        ],
    ));
    // 3 per second, measured over 10 s: about 30 connections, some of
    // them already taken by kafka-configs.sh.
    let outcomes: Vec<bool> = (0..45).map(|_| answered(&b)).collect();
    let served = outcomes.iter().filter(|a| **a).count();
    assert!(
        (20..=30).contains(&served),
        "{served} of 45 connections served at 3/s"
    );
    assert!(!outcomes[44], "the last connection should be refused");
    assert!(node
        .log()
        .contains("connection_creation_rate quota is exceeded"));
}

/// `max.connection.creation.rate` (KIP-612), set and removed at runtime:
/// over it the acceptor waits before taking each new connection on, so a
/// burst is slowed, and nothing is refused.
#[test]
fn the_connection_creation_rate_slows_the_acceptor() {
    let metrics_port = free_port();
    let metrics = format!("http://127.0.0.1:{metrics_port}");
    let node = Ottla::start(&[("metrics.listener", metrics.as_str())]);
    let b = node.bootstrap();
    let burst = |n: usize| {
        let started = Instant::now();
        let served = (0..n).filter(|_| answered(&b)).count();
        (served, started.elapsed().as_secs_f64())
    };
    let (served, free_secs) = burst(20);
    assert_eq!(served, 20);
    let brokers = |change: &[&str]| {
        let mut args = vec!["--alter", "--entity-type", "brokers", "--entity-default"];
        args.extend_from_slice(change);
        ok(configs(&b, &args))
    };
    // 2 a second, measured over 10 s: the burst above already used it up.
    brokers(&["--add-config", "max.connection.creation.rate=2"]);
    let (served, slow_secs) = burst(8);
    assert_eq!(served, 8, "throttled, not refused");
    assert!(
        slow_secs >= 4.0,
        "8 connections over the rate took {slow_secs:.1} s (20 free ones {free_secs:.1} s)"
    );
    let text = ok(python_script(
        "import sys, urllib.request\nprint(urllib.request.urlopen(sys.argv[1]).read().decode())",
        &[&format!("{metrics}/metrics")],
    ));
    let throttled: f64 = text
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                r#"kafka_network_connection_accept_throttle_ms_total{listener="PLAINTEXT"} "#,
            )
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(throttled >= 3000.0, "{throttled} ms throttled");
    brokers(&["--delete-config", "max.connection.creation.rate"]);
    let (served, secs) = burst(8);
    assert_eq!(served, 8);
    assert!(
        secs < slow_secs / 2.0,
        "{secs:.1} s once the rate is removed"
    );
}

/// `max.connections.per.ip` and its overrides change at runtime through
/// `kafka-configs.sh --entity-type brokers`, cluster-wide and per broker.
#[test]
fn connection_limits_change_without_a_restart() {
    let node = Ottla::start(&[]);
    let b = node.bootstrap();
    let brokers = |target: &[&str], change: &[&str]| {
        let mut args = vec!["--alter", "--entity-type", "brokers"];
        args.extend_from_slice(target);
        args.extend_from_slice(change);
        configs(&b, &args)
    };
    assert_eq!(served_at_once(&b, 6, 6), 6);
    ok(brokers(
        &["--entity-default"],
        &["--add-config", "max.connections.per.ip=3"],
    ));
    assert_eq!(
        served_at_once(&b, 6, 3),
        3,
        "cluster-wide max.connections.per.ip=3"
    );
    assert!(node.log().contains("max.connections.per.ip reached"));
    ok(brokers(
        &["--entity-name", "1"],
        &[
            "--add-config",
            "max.connections.per.ip.overrides=[127.0.0.1:5]",
        ],
    ));
    assert_eq!(
        served_at_once(&b, 6, 5),
        5,
        "an override of 5 for 127.0.0.1"
    );
    let refused = brokers(
        &["--entity-name", "1"],
        &[
            "--add-config",
            "max.connections.per.ip.overrides=[localhost:5]",
        ],
    );
    let stderr = String::from_utf8_lossy(&refused.stderr).to_string()
        + &String::from_utf8_lossy(&refused.stdout);
    assert!(!refused.status.success());
    assert!(stderr.contains("not an IP address"), "{stderr}");
    ok(brokers(
        &["--entity-name", "1"],
        &["--delete-config", "max.connections.per.ip.overrides"],
    ));
    ok(brokers(
        &["--entity-default"],
        &["--delete-config", "max.connections.per.ip"],
    ));
    assert_eq!(served_at_once(&b, 6, 6), 6, "limits removed");
}
