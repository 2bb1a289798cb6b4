//! docker-compose.yml and the per-node configs under docker/ (issue 4).
//!
//! - `compose_file_agrees_with_node_configs`: no Docker needed. Reads
//!   docker-compose.yml (a small YAML reader below, which refuses whatever it
//!   does not understand), docker/config/*.properties, docker/prometheus.yml
//!   and scripts/docker.sh, and checks that node ids, voter lists, listeners,
//!   advertised addresses, published ports, volumes, health checks, cluster
//!   ids and scrape targets agree.
//! - `compose_config_is_valid`: `scripts/docker.sh config`, Compose's own
//!   schema check, offline (installs Debian's docker-compose when missing).
//! - `compose_clusters_run_in_docker`: builds the `FROM scratch` image from
//!   the binaries of this build, starts both clusters under the compose
//!   project `ottla-test`, and checks every node from the host (published
//!   EXTERNAL listener: all three brokers of its cluster, each under its
//!   EXTERNAL address), from the other containers (service names resolve),
//!   its metrics listener, and a restart keeping its data. Installs and
//!   starts the Docker engine when missing (scripts/docker.sh engine) and
//!   stops it again if it started it. Uses the host ports 19092-19094 and
//!   29092-29094, so a compose cluster of your own must be down meanwhile.
//!
//! None of them skips: a missing tool is installed or the test fails.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use kafka_protocol::messages::MetadataRequest;
use ottla_tests::ottla::ottla_binary;
use ottla_tests::wire::WireClient;

const CLUSTERS: [(&str, u16); 2] = [("source", 19092), ("destination", 29092)];
const NODES: i32 = 3;
const PLAINTEXT_PORT: u16 = 9092;
const CONTROLLER_PORT: u16 = 9093;
const METRICS_PORT: u16 = 9308;
const CONFIG_IN_CONTAINER: &str = "/etc/ottla/server.properties";
const DATA_IN_CONTAINER: &str = "/var/lib/ottla";
const PROBE: &str = "/usr/local/bin/ottla-probe";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn read(rel: &str) -> String {
    let path = repo().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

// ------------------------------------------------------------- a YAML subset

/// What docker-compose.yml and prometheus.yml use of YAML: block mappings,
/// block sequences (of scalars or of mappings), flow sequences of scalars,
/// `{}`, plain, single- and double-quoted scalars, comments. Anything else
/// panics, naming the line, so a construct this reader misses is noticed.
#[derive(Debug, Clone, PartialEq)]
enum Yaml {
    Str(String),
    Seq(Vec<Yaml>),
    Map(Vec<(String, Yaml)>),
}

impl Yaml {
    fn get(&self, key: &str) -> Option<&Yaml> {
        match self {
            Yaml::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    fn at(&self, key: &str) -> &Yaml {
        self.get(key)
            .unwrap_or_else(|| panic!("no key {key} in {self:?}"))
    }
    fn str(&self) -> &str {
        match self {
            Yaml::Str(s) => s,
            other => panic!("expected a scalar, found {other:?}"),
        }
    }
    fn strs(&self) -> Vec<&str> {
        match self {
            Yaml::Seq(items) => items.iter().map(Yaml::str).collect(),
            other => panic!("expected a sequence of scalars, found {other:?}"),
        }
    }
    fn keys(&self) -> Vec<&str> {
        match self {
            Yaml::Map(entries) => entries.iter().map(|(k, _)| k.as_str()).collect(),
            other => panic!("expected a mapping, found {other:?}"),
        }
    }
}

struct Line {
    no: usize,
    indent: usize,
    text: String,
}

fn parse_yaml(src: &str) -> Yaml {
    let mut lines: Vec<Line> = Vec::new();
    for (i, raw) in src.lines().enumerate() {
        assert!(!raw.contains('\t'), "line {}: tab in YAML", i + 1);
        let text = strip_comment(raw, i + 1);
        if text.trim().is_empty() {
            continue;
        }
        let indent = text.len() - text.trim_start().len();
        lines.push(Line {
            no: i + 1,
            indent,
            text: text.trim().to_string(),
        });
    }
    let mut pos = 0;
    let doc = parse_block(&mut lines, &mut pos, 0);
    assert_eq!(pos, lines.len(), "line {}: unexpected indentation", {
        lines.get(pos).map_or(0, |l| l.no)
    });
    doc
}

/// The line without a trailing `# comment` (a `#` at the start or after a
/// blank, outside quotes).
fn strip_comment(line: &str, no: usize) -> String {
    let mut quote: Option<char> = None;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' && prev.is_whitespace() => return line[..i].trim_end().to_string(),
            None => {}
        }
        prev = c;
    }
    assert!(quote.is_none(), "line {no}: unterminated quote");
    line.trim_end().to_string()
}

fn parse_block(lines: &mut [Line], pos: &mut usize, indent: usize) -> Yaml {
    let first = &lines[*pos];
    assert_eq!(first.indent, indent, "line {}: bad indentation", first.no);
    if first.text == "-" || first.text.starts_with("- ") {
        let mut items = Vec::new();
        while *pos < lines.len() && lines[*pos].indent == indent {
            let line = &mut lines[*pos];
            let no = line.no;
            let rest = line
                .text
                .strip_prefix("- ")
                .unwrap_or_else(|| panic!("line {no}: expected a '- ' item"))
                .trim()
                .to_string();
            if split_key(&rest).is_some() {
                // `- key: value` opens a mapping indented past the dash.
                line.indent = indent + 2;
                line.text = rest;
                items.push(parse_block(lines, pos, indent + 2));
            } else {
                items.push(parse_inline(&rest, no));
                *pos += 1;
            }
        }
        return Yaml::Seq(items);
    }
    let mut entries: Vec<(String, Yaml)> = Vec::new();
    while *pos < lines.len() && lines[*pos].indent == indent {
        let no = lines[*pos].no;
        let (key, rest) = split_key(&lines[*pos].text)
            .unwrap_or_else(|| panic!("line {no}: expected 'key: value'"));
        assert!(
            !entries.iter().any(|(k, _)| *k == key),
            "line {no}: duplicate key {key}"
        );
        *pos += 1;
        let value = if !rest.is_empty() {
            parse_inline(&rest, no)
        } else if *pos < lines.len() && lines[*pos].indent > indent {
            let child = lines[*pos].indent;
            parse_block(lines, pos, child)
        } else {
            panic!("line {no}: key {key} has no value");
        };
        entries.push((key, value));
    }
    if *pos < lines.len() && lines[*pos].indent > indent {
        panic!("line {}: unexpected indentation", lines[*pos].no);
    }
    Yaml::Map(entries)
}

/// `key: rest` (key plain or quoted), or None when the text is no mapping entry.
fn split_key(text: &str) -> Option<(String, String)> {
    let (key, rest) = if let Some(q) = text.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let end = text[1..].find(q)? + 1;
        let rest = text[end + 1..].strip_prefix(':')?;
        (text[1..end].to_string(), rest)
    } else {
        let i = text
            .find(": ")
            .or_else(|| text.strip_suffix(':').map(|t| t.len()))?;
        let key = &text[..i];
        if key.contains(['[', '{', '"', '\'']) {
            return None;
        }
        (key.to_string(), &text[i + 1..])
    };
    if !rest.is_empty() && !rest.starts_with(' ') {
        return None;
    }
    Some((key, rest.trim().to_string()))
}

fn parse_inline(text: &str, no: usize) -> Yaml {
    if text == "{}" {
        return Yaml::Map(Vec::new());
    }
    if let Some(inner) = text.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .unwrap_or_else(|| panic!("line {no}: flow sequence must close on its line"));
        let mut items = Vec::new();
        let mut rest = inner.trim();
        while !rest.is_empty() {
            let (item, after) = scalar_prefix(rest, no);
            items.push(Yaml::Str(item));
            rest = after.trim_start();
            match rest.strip_prefix(',') {
                Some(r) => rest = r.trim_start(),
                None => assert!(rest.is_empty(), "line {no}: expected ',' in [{inner}]"),
            }
        }
        return Yaml::Seq(items);
    }
    assert!(
        !text.starts_with(['{', '&', '*', '!', '|', '>', '%', '@', '`']),
        "line {no}: unsupported YAML '{text}'"
    );
    let (s, rest) = scalar_prefix(text, no);
    assert!(rest.trim().is_empty(), "line {no}: text after a scalar");
    Yaml::Str(s)
}

/// One scalar at the start of `text` (inside a flow sequence, a plain one
/// ends at ','), and what follows it.
fn scalar_prefix(text: &str, no: usize) -> (String, &str) {
    match text.chars().next() {
        Some('"') => {
            let mut out = String::new();
            let mut chars = text[1..].char_indices();
            while let Some((i, c)) = chars.next() {
                match c {
                    '"' => return (out, &text[i + 2..]),
                    '\\' => match chars.next() {
                        Some((_, '"')) => out.push('"'),
                        Some((_, '\\')) => out.push('\\'),
                        other => panic!("line {no}: unsupported escape {other:?}"),
                    },
                    c => out.push(c),
                }
            }
            panic!("line {no}: unterminated string")
        }
        Some('\'') => {
            let end = text[1..]
                .find('\'')
                .unwrap_or_else(|| panic!("line {no}: unterminated string"));
            (text[1..end + 1].to_string(), &text[end + 2..])
        }
        _ => {
            let end = text.find(',').unwrap_or(text.len());
            (text[..end].trim().to_string(), &text[end..])
        }
    }
}

#[test]
fn yaml_reader_understands_its_subset() {
    let doc = parse_yaml(
        "a: 1 # note\nb:\n  - x\n  - \"y # z\"\nc: [\"p\", 'q', r]\nd:\n  - k: v\n    l: w\n  - k: v2\ne: {}\n",
    );
    assert_eq!(doc.at("a").str(), "1");
    assert_eq!(doc.at("b").strs(), ["x", "y # z"]);
    assert_eq!(doc.at("c").strs(), ["p", "q", "r"]);
    let Yaml::Seq(d) = doc.at("d") else { panic!() };
    assert_eq!(d[0].at("l").str(), "w");
    assert_eq!(d[1].at("k").str(), "v2");
    assert_eq!(doc.at("e"), &Yaml::Map(Vec::new()));
    // The refusals panic; keep their messages out of the output (nextest
    // runs each test in a process of its own, so the hook is this test's).
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let accepted: Vec<&str> = [
        "a: &x 1\n",
        "a: |\n  t\n",
        "a:\n",
        "a: 1\n  b: 2\n",
        "a: 1\na: 2\n",
    ]
    .into_iter()
    .filter(|bad| std::panic::catch_unwind(|| parse_yaml(bad)).is_ok())
    .collect();
    std::panic::set_hook(hook);
    assert!(accepted.is_empty(), "accepted {accepted:?}");
}

// ------------------------------------------------------------ static checks

fn parse_properties(rel: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (i, line) in read(rel).lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (k, v) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("{rel}:{}: not key=value", i + 1));
        let previous = out.insert(k.trim().to_string(), v.trim().to_string());
        assert!(previous.is_none(), "{rel}: {k} is set twice");
    }
    out
}

/// `NAME://host:port,...` as name -> (host, port).
fn listener_map(value: &str) -> BTreeMap<String, (String, u16)> {
    value
        .split(',')
        .map(|uri| {
            let (name, rest) = uri.split_once("://").expect("NAME://host:port");
            let (host, port) = rest.rsplit_once(':').expect("host:port");
            (
                name.to_string(),
                (host.to_string(), port.parse().expect("a port")),
            )
        })
        .collect()
}

fn service_name(cluster: &str, node: i32) -> String {
    format!("{cluster}-{node}")
}

/// The host port of a node's EXTERNAL listener (published 1:1).
fn external_port(base: u16, node: i32) -> u16 {
    base + node as u16 - 1
}

#[test]
fn compose_file_agrees_with_node_configs() {
    let compose = parse_yaml(&read("docker-compose.yml"));
    let services = compose.at("services");
    let volumes: BTreeSet<&str> = compose.at("volumes").keys().into_iter().collect();
    let networks: BTreeSet<&str> = compose.at("networks").keys().into_iter().collect();

    let mut expected_services = BTreeSet::from(["metrics".to_string()]);
    let mut host_ports = BTreeSet::new();
    let mut cluster_ids = BTreeSet::new();
    let mut scrape_targets = Vec::new();
    for (cluster, base) in CLUSTERS {
        let mut ids_in_cluster = BTreeSet::new();
        let voters: Vec<String> = (1..=NODES)
            .map(|j| format!("{j}@{}:{CONTROLLER_PORT}", service_name(cluster, j)))
            .collect();
        for node in 1..=NODES {
            let name = service_name(cluster, node);
            let ctx = |what: &str| format!("{name}: {what}");
            expected_services.insert(name.clone());
            let svc = services
                .get(&name)
                .unwrap_or_else(|| panic!("docker-compose.yml has no service {name}"));
            let ext = external_port(base, node);

            // The service.
            assert_eq!(
                svc.at("image").str(),
                "${OTTLA_IMAGE:-ottla:local}",
                "{name}"
            );
            assert_eq!(svc.at("hostname").str(), name);
            assert_eq!(
                svc.at("command").strs(),
                ["server", "--config", CONFIG_IN_CONTAINER],
                "{name}"
            );
            assert!(
                svc.get("profiles").is_none(),
                "{}",
                ctx("must not be behind a profile")
            );
            let config_rel = format!("docker/config/{name}.properties");
            let data_volume = format!("{name}-data");
            assert_eq!(
                svc.at("volumes").strs(),
                [
                    format!("./{config_rel}:{CONFIG_IN_CONTAINER}:ro"),
                    format!("{data_volume}:{DATA_IN_CONTAINER}"),
                ],
                "{name}"
            );
            assert!(
                volumes.contains(data_volume.as_str()),
                "{}",
                ctx("volume undeclared")
            );
            for net in svc.at("networks").strs() {
                assert!(networks.contains(net), "{}", ctx("network undeclared"));
            }
            assert_eq!(svc.at("ports").strs(), [format!("127.0.0.1:{ext}:{ext}")]);
            assert!(host_ports.insert(ext), "host port {ext} published twice");
            let health = svc.at("healthcheck").at("test").strs();
            assert_eq!(
                health[..3],
                ["CMD", PROBE, format!("127.0.0.1:{PLAINTEXT_PORT}").as_str()],
                "{name}"
            );

            // Its config.
            let p = parse_properties(&config_rel);
            let key = |k: &str| {
                p.get(k)
                    .unwrap_or_else(|| panic!("{config_rel} lacks {k}"))
                    .as_str()
            };
            assert_eq!(key("node.id"), node.to_string(), "{config_rel}");
            assert!(ids_in_cluster.insert(node));
            assert_eq!(key("process.roles"), "broker,controller", "{config_rel}");
            assert_eq!(
                key("controller.quorum.voters"),
                voters.join(","),
                "{config_rel}"
            );
            assert_eq!(
                key("controller.listener.names"),
                "CONTROLLER",
                "{config_rel}"
            );
            assert_eq!(
                key("inter.broker.listener.name"),
                "PLAINTEXT",
                "{config_rel}"
            );
            assert_eq!(key("log.dirs"), DATA_IN_CONTAINER, "{config_rel}");
            assert_eq!(
                key("metrics.listener"),
                format!("http://0.0.0.0:{METRICS_PORT}"),
                "{config_rel}"
            );
            scrape_targets.push(format!("{name}:{METRICS_PORT}"));

            let id = key("cluster.id");
            assert!(
                id.len() == 22
                    && id
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
                "{config_rel}: cluster.id {id} is not a 22-character base64url UUID"
            );
            cluster_ids.insert((cluster, id.to_string()));

            let listeners = listener_map(key("listeners"));
            let expected: BTreeMap<String, (String, u16)> = [
                ("PLAINTEXT", PLAINTEXT_PORT),
                ("CONTROLLER", CONTROLLER_PORT),
                ("EXTERNAL", ext),
            ]
            .into_iter()
            .map(|(n, port)| (n.to_string(), ("0.0.0.0".to_string(), port)))
            .collect();
            assert_eq!(listeners, expected, "{config_rel}: listeners");
            let protocols: BTreeMap<&str, &str> = key("listener.security.protocol.map")
                .split(',')
                .map(|i| i.split_once(':').expect("NAME:PROTOCOL"))
                .collect();
            for name in listeners.keys() {
                assert_eq!(
                    protocols.get(name.as_str()),
                    Some(&"PLAINTEXT"),
                    "{config_rel}: {name} in listener.security.protocol.map"
                );
            }
            let advertised = listener_map(key("advertised.listeners"));
            assert_eq!(
                advertised,
                BTreeMap::from([
                    ("PLAINTEXT".to_string(), (name.clone(), PLAINTEXT_PORT)),
                    ("EXTERNAL".to_string(), ("localhost".to_string(), ext)),
                ]),
                "{config_rel}: advertised.listeners"
            );

            // Replication settings a three-node cluster can satisfy.
            let int = |k: &str| -> i32 { key(k).parse().expect("a number") };
            let rf = int("default.replication.factor");
            assert!(
                rf <= NODES && int("min.insync.replicas") <= rf,
                "{config_rel}"
            );
            assert!(
                int("offsets.topic.replication.factor") <= NODES,
                "{config_rel}"
            );
            let txn_rf = int("transaction.state.log.replication.factor");
            assert!(txn_rf <= NODES, "{config_rel}");
            assert!(
                int("transaction.state.log.min.isr") <= txn_rf,
                "{config_rel}"
            );
        }
        let ids: BTreeSet<&String> = cluster_ids
            .iter()
            .filter(|(c, _)| *c == cluster)
            .map(|(_, id)| id)
            .collect();
        assert_eq!(ids.len(), 1, "{cluster}: nodes disagree on cluster.id");
    }
    assert_eq!(
        cluster_ids
            .iter()
            .map(|(_, id)| id)
            .collect::<BTreeSet<_>>()
            .len(),
        CLUSTERS.len(),
        "the clusters must have different cluster.id values"
    );
    let all: BTreeSet<String> = services.keys().into_iter().map(str::to_string).collect();
    assert_eq!(all, expected_services, "services in docker-compose.yml");

    // Prometheus, only with --profile metrics, scraping every node.
    let metrics = services.at("metrics");
    assert_eq!(metrics.at("profiles").strs(), ["metrics"]);
    assert!(metrics
        .at("volumes")
        .strs()
        .contains(&"./docker/prometheus.yml:/etc/prometheus/prometheus.yml:ro"));
    for port in metrics.at("ports").strs() {
        let host_port: u16 = port.split(':').nth(1).unwrap().parse().unwrap();
        assert!(
            host_ports.insert(host_port),
            "host port {host_port} published twice"
        );
    }
    let prometheus = parse_yaml(&read("docker/prometheus.yml"));
    let Yaml::Seq(jobs) = prometheus.at("scrape_configs") else {
        panic!("scrape_configs is not a list")
    };
    let mut targets = Vec::new();
    for job in jobs {
        assert_eq!(job.at("metrics_path").str(), "/metrics");
        let Yaml::Seq(groups) = job.at("static_configs") else {
            panic!("static_configs is not a list")
        };
        for group in groups {
            targets.extend(group.at("targets").strs().into_iter().map(str::to_string));
        }
    }
    targets.sort();
    scrape_targets.sort();
    assert_eq!(targets, scrape_targets, "docker/prometheus.yml targets");

    // scripts/docker.sh waits for and probes the same services and ports.
    let script = read("scripts/docker.sh");
    let nodes_line = script
        .lines()
        .find_map(|l| l.strip_prefix("NODES=\""))
        .expect("scripts/docker.sh has a NODES=\"...\" line")
        .trim_end_matches('"');
    let expected_nodes: Vec<String> = CLUSTERS
        .iter()
        .flat_map(|(c, base)| {
            (1..=NODES).map(move |n| format!("{}:{}", service_name(c, n), external_port(*base, n)))
        })
        .collect();
    assert_eq!(
        nodes_line,
        expected_nodes.join(" "),
        "NODES in scripts/docker.sh"
    );

    // The image's own default config: one node, reachable as localhost:9092.
    let single = parse_properties("docker/server.properties");
    assert_eq!(single["node.id"], "1");
    assert_eq!(
        single["controller.quorum.voters"],
        format!("1@localhost:{CONTROLLER_PORT}")
    );
    assert_eq!(single["log.dirs"], DATA_IN_CONTAINER);
    assert_eq!(
        single["advertised.listeners"],
        format!("PLAINTEXT://localhost:{PLAINTEXT_PORT}")
    );
    let dockerfile = read("docker/Dockerfile");
    assert!(dockerfile.contains(&format!("\"{PROBE}\", \"127.0.0.1:{PLAINTEXT_PORT}\"")));
    assert!(dockerfile.contains(&format!("VOLUME {DATA_IN_CONTAINER}")));
}

// ------------------------------------------------- scripts/docker.sh helpers

fn output_text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// scripts/docker.sh with the test's image, project and binaries.
fn docker_sh(args: &[&str]) -> Output {
    let bin_dir = ottla_binary().parent().unwrap().to_path_buf();
    Command::new(repo().join("scripts/docker.sh"))
        .args(args)
        .env("OTTLA_IMAGE", "ottla:test")
        .env("COMPOSE_PROJECT_NAME", "ottla-test")
        .env("OTTLA_DOCKER_CARGO", "0")
        .env("OTTLA_TARGET_DIR", &bin_dir)
        .output()
        .unwrap_or_else(|e| panic!("running scripts/docker.sh {args:?}: {e}"))
}

fn docker_sh_ok(args: &[&str]) -> String {
    let start = Instant::now();
    let out = docker_sh(args);
    let text = output_text(&out);
    assert!(
        out.status.success(),
        "scripts/docker.sh {args:?} failed ({}):\n{text}",
        out.status
    );
    eprintln!("scripts/docker.sh {args:?}: {:.1?}", start.elapsed());
    text
}

fn docker(args: &[&str]) -> String {
    let out = Command::new("docker")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running docker {args:?}: {e}"));
    assert!(
        out.status.success(),
        "docker {args:?} failed:\n{}",
        output_text(&out)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn compose_config_is_valid() {
    docker_sh_ok(&["config"]);
}

/// Takes the test project down (with its volumes) however the test ends, and
/// stops the engine if this test started it.
struct Cleanup {
    stop_engine: bool,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let out = docker_sh(&["down", "--volumes"]);
        if !out.status.success() {
            eprintln!("cleanup: down failed:\n{}", output_text(&out));
        }
        if self.stop_engine {
            let out = docker_sh(&["engine-stop"]);
            eprintln!("cleanup: {}", output_text(&out).trim());
        }
    }
}

fn container(service: &str) -> String {
    let id = docker(&[
        "ps",
        "-q",
        "--filter",
        "label=com.docker.compose.project=ottla-test",
        "--filter",
        &format!("label=com.docker.compose.service={service}"),
    ]);
    assert!(!id.is_empty(), "no running container for {service}");
    id
}

fn wait_healthy(id: &str, what: &str) {
    let start = Instant::now();
    loop {
        let state = docker(&["inspect", "--format", "{{.State.Health.Status}}", id]);
        if state == "healthy" {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "{what} is {state} after 90 s:\n{}",
            docker(&["logs", "--tail", "30", id])
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn http_get(host: &str, port: u16, path: &str) -> String {
    let mut s = TcpStream::connect((host, port))
        .unwrap_or_else(|e| panic!("connecting to {host}:{port}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn compose_clusters_run_in_docker() {
    let engine_was_up = Command::new("docker")
        .arg("info")
        .output()
        .is_ok_and(|o| o.status.success());
    docker_sh_ok(&["engine"]);
    let _cleanup = Cleanup {
        stop_engine: !engine_was_up,
    };
    docker_sh_ok(&["down", "--volumes"]); // leftovers of an earlier run
    docker_sh_ok(&["build"]);
    docker_sh_ok(&["up"]);

    for (cluster, base) in CLUSTERS {
        for node in 1..=NODES {
            let name = service_name(cluster, node);
            let ext = external_port(base, node);

            // From the host, through the published EXTERNAL listener: the
            // node lists all three brokers of its cluster (registration may
            // lag the health check a little), each under its EXTERNAL address.
            let expected: BTreeMap<i32, (String, i32)> = (1..=NODES)
                .map(|id| {
                    let port = i32::from(external_port(base, id));
                    (id, ("localhost".to_string(), port))
                })
                .collect();
            let start = Instant::now();
            let brokers = loop {
                let mut client = WireClient::connect(&format!("127.0.0.1:{ext}"));
                let metadata =
                    client.send(12, &MetadataRequest::default().with_topics(Some(vec![])));
                let brokers: BTreeMap<i32, (String, i32)> = metadata
                    .brokers
                    .iter()
                    .map(|b| (b.node_id.0, (b.host.to_string(), b.port)))
                    .collect();
                if brokers == expected || start.elapsed() > Duration::from_secs(60) {
                    break brokers;
                }
                std::thread::sleep(Duration::from_millis(500));
            };
            assert_eq!(
                brokers, expected,
                "{name}: brokers in Metadata over EXTERNAL"
            );

            // From another container, by service name, on PLAINTEXT: the
            // name resolves in the scratch image and the node advertises it.
            let peer = service_name(cluster, node % NODES + 1);
            let out = docker(&[
                "exec",
                &container(&peer),
                PROBE,
                &format!("{name}:{PLAINTEXT_PORT}"),
                "--brokers",
                "1",
            ]);
            assert!(
                out.contains(&format!("{node}@{name}:{PLAINTEXT_PORT}")),
                "{peer} -> {name}: {out}"
            );
        }
    }

    // The metrics listener Prometheus scrapes (from the host, by container IP).
    let id = container("destination-2");
    let ip = docker(&[
        "inspect",
        "--format",
        "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
        &id,
    ]);
    let page = http_get(&ip, METRICS_PORT, "/metrics");
    assert!(
        page.starts_with("HTTP/1.1 200") && page.contains("kafka_network_requests_total"),
        "metrics of destination-2 at {ip}:{METRICS_PORT}:\n{page}"
    );

    // A restart (SIGTERM, then start) keeps the node's data and identity and
    // finds a clean shutdown.
    let id = container("source-2");
    let started = |logs: &str| -> Vec<String> {
        logs.lines()
            .filter(|l| l.contains("broker started"))
            .filter_map(|l| l.split("cluster_id=").nth(1))
            .map(|s| s.split_whitespace().next().unwrap_or("").to_string())
            .collect()
    };
    let logs_of = |id: &str| {
        let out = Command::new("docker")
            .args(["logs", id])
            .output()
            .expect("docker logs");
        output_text(&out)
    };
    docker(&["restart", "--time", "30", &id]);
    wait_healthy(&id, "source-2 after a restart");
    let logs = logs_of(&id);
    let ids = started(&logs);
    assert_eq!(ids.len(), 2, "source-2 should have started twice:\n{logs}");
    assert_eq!(ids[0], ids[1], "source-2 changed cluster id on restart");
    assert!(
        logs.contains("shut down cleanly") && logs.contains("clean_shutdown=true"),
        "source-2 did not shut down and restart cleanly:\n{logs}"
    );
    docker_sh_ok(&["status"]);
}
