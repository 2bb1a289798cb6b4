//! A node's life cycle as an operator sees it, on live `ottla` processes:
//!
//! - its data dirs are locked: a second process on the same `log.dirs`
//!   refuses to start, naming the dir, and a node killed with SIGKILL
//!   leaves no lock behind;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ottla_tests::ottla::{free_port, ottla_binary, Ottla};

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
