//! A real single-node Apache Kafka broker (scripts/apache-kafka.sh) for
//! tests that compare Ottla with the reference, stopped when the handle
//! drops, panics included. A watchdog in its own process group also stops
//! it should the test process die without unwinding (SIGKILL, a timeout).

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use crate::tools::repo_root;

pub struct ApacheKafka {
    pub port: u16,
    pub bootstrap: String,
    dir: PathBuf,
    watchdog: Option<Child>,
    _tmp: tempfile::TempDir,
}

fn script() -> PathBuf {
    repo_root().join("scripts").join("apache-kafka.sh")
}

/// A free port whose successor (the controller's) is free too, below the
/// kernel's ephemeral range: the JVM binds them seconds later, and in that
/// time an outgoing connection or a `bind(0)` in another test could take a
/// port from the ephemeral range, but never one below it.
fn port_pair() -> u16 {
    let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let low = 10_000u16;
    let span = u128::from(ephemeral_start.saturating_sub(low + 1).max(1));
    loop {
        let p = low + (uuid::Uuid::new_v4().as_u128() % span) as u16;
        let free = |port: u16| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
        if free(p) && free(p + 1) {
            return p;
        }
    }
}

impl ApacheKafka {
    /// Starts a fresh broker on a free port (its controller on the next).
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a fresh broker with extra server properties.
    pub fn start_with(props: &[(&str, &str)]) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("kafka");
        let port = port_pair();
        let port_arg = port.to_string();
        let dir_arg = dir.display().to_string();
        let mut kafka = Self {
            port,
            bootstrap: String::new(),
            dir,
            watchdog: None,
            _tmp: tmp,
        };
        kafka.watchdog = Some(kafka.spawn_watchdog());
        let started = Instant::now();
        let mut args: Vec<String> = ["start", "--fresh", "--port", &port_arg, "--dir", &dir_arg]
            .map(String::from)
            .to_vec();
        for (k, v) in props {
            args.push("--prop".into());
            args.push(format!("{k}={v}"));
        }
        let out = Command::new("bash")
            .arg(script())
            .args(&args)
            .stderr(Stdio::inherit())
            .output()
            .expect("running scripts/apache-kafka.sh start");
        assert!(
            out.status.success(),
            "scripts/apache-kafka.sh start failed ({}); log: {}",
            out.status,
            std::fs::read_to_string(kafka.dir.join("server.log")).unwrap_or_default()
        );
        let stdout = String::from_utf8(out.stdout).unwrap();
        kafka.bootstrap = stdout
            .lines()
            .last()
            .expect("the bootstrap line")
            .trim()
            .to_string();
        eprintln!(
            "Apache Kafka up on {} in {:?}",
            kafka.bootstrap,
            started.elapsed()
        );
        kafka
    }

    /// Waits for this process to go away, then stops the broker.
    fn spawn_watchdog(&self) -> Child {
        let watched = std::process::id().to_string();
        Command::new("bash")
            .arg("-c")
            .arg(
                r#"while kill -0 "$1" 2>/dev/null; do sleep 1; done
                   exec bash "$2" stop --port "$3" --dir "$4" --timeout 20"#,
            )
            .args([
                "watchdog",
                watched.as_str(),
                &script().display().to_string(),
                &self.port.to_string(),
                &self.dir.display().to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("starting the Apache Kafka watchdog")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }
}

impl Drop for ApacheKafka {
    fn drop(&mut self) {
        let status = Command::new("bash")
            .arg(script())
            .args([
                "stop",
                "--port",
                &self.port.to_string(),
                "--dir",
                &self.dir.display().to_string(),
                "--timeout",
                "20",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .status();
        if !matches!(status, Ok(s) if s.success()) {
            eprintln!("stopping Apache Kafka on port {}: {status:?}", self.port);
        }
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}
