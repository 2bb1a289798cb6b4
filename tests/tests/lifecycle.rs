//! A node's life cycle as an operator sees it, on live `ottla` processes:
//!
//! - its data dirs are locked: a second process on the same `log.dirs`
//!   refuses to start, naming the dir, and a node killed with SIGKILL
//!   leaves no lock behind;
//! - SIGTERM with idle client connections open stops it cleanly at once.
//!   (`cluster.rs` times a cluster node's SIGTERM: its quorum peers' idle
//!   connections used to hold it for the listener's whole grace period.)

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kafka_protocol::messages::ApiVersionsRequest;
use kafka_protocol::protocol::StrBytes;
use ottla_tests::ottla::{free_port, ottla_binary, Ottla};
use ottla_tests::wire::WireClient;

/// Runs `ottla server` on `log_dir` with ports of its own and waits for
/// it to exit; returns its exit code and its output.
fn run_second_node(log_dir: &str) -> (Option<i32>, String) {
    let controller = free_port();
    let client = free_port();
    let mut child = Command::new(ottla_binary())
        .arg("server")
        .args([
            "--override".to_string(),
            format!("listeners=PLAINTEXT://127.0.0.1:{client},CONTROLLER://127.0.0.1:{controller}"),
            "--override".to_string(),
            format!("controller.quorum.voters=1@127.0.0.1:{controller}"),
            "--override".to_string(),
            format!("log.dirs={log_dir}"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a second ottla");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "a second ottla on {log_dir} still runs after 20 s:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[test]
fn a_second_node_on_the_same_log_dirs_is_refused_until_the_first_is_gone() {
    let mut first = Ottla::start(&[]);
    let log_dir = first.data_dir.join("logs").display().to_string();
    let (code, output) = run_second_node(&log_dir);
    assert!(
        code.is_some_and(|c| c != 0),
        "the second node exited with {code:?}:\n{output}"
    );
    assert!(
        output.contains(&log_dir) && output.contains("in use by another process"),
        "the refusal names the dir and why:\n{output}"
    );
    assert!(first.is_running());
    // SIGKILL gives the first node no chance to clean up; the kernel still
    // drops its lock, so the same node starts again on the same dirs.
    first.kill9();
    first.restart();
    // One "locked data dir" line per start (the log file is appended to).
    assert_eq!(
        first.log().matches("locked data dir").count(),
        2,
        "log:\n{}",
        first.log()
    );
    assert_eq!(first.stop(), Some(0), "log:\n{}", first.log());
}

#[test]
fn sigterm_with_idle_client_connections_stops_cleanly_at_once() {
    let mut node = Ottla::start(&[]);
    // Clients that asked something and now wait, as idle producers and
    // admin clients do.
    let idle: Vec<WireClient> = (0..3)
        .map(|_| {
            let mut client = WireClient::connect(&node.bootstrap());
            let request = ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("ottla-tests"))
                .with_client_software_version(StrBytes::from_static_str("1.0"));
            let versions = client.send(3, &request);
            assert_eq!(versions.error_code, 0);
            client
        })
        .collect();
    let started = Instant::now();
    let code = node.stop();
    let took = started.elapsed();
    assert_eq!(code, Some(0), "log:\n{}", node.log());
    assert!(
        took < Duration::from_secs(2),
        "SIGTERM took {took:?}; log:\n{}",
        node.log()
    );
    assert!(
        node.data_dir
            .join("logs")
            .join(".kafka_cleanshutdown")
            .exists(),
        "no clean-shutdown marker; log:\n{}",
        node.log()
    );
    assert!(!node.log().contains("still busy"), "{}", node.log());
    drop(idle);
}
