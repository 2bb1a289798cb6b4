//! The stock clients the tests drive: Apache Kafka's Java CLI tools (fetched
//! by scripts/kafka-tools.sh) and the Python venv with confluent-kafka and
//! kafka-python (scripts/python-env.sh). Both scripts install what is
//! missing, so a bare machine works.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn last_line_of(script: &str, args: &[&str]) -> PathBuf {
    let out = Command::new("bash")
        .arg(repo_root().join("scripts").join(script))
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("running {script}: {e}"));
    assert!(out.status.success(), "{script} failed");
    let stdout = String::from_utf8(out.stdout).unwrap();
    PathBuf::from(stdout.lines().last().expect("a result line").trim())
}

/// Directory holding kafka-topics.sh and friends.
pub fn kafka_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| last_line_of("kafka-tools.sh", &[]))
}

/// The venv's python.
pub fn python() -> &'static Path {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| last_line_of("python-env.sh", &[]))
}

/// JVM options for the tools the tests start: hundreds of short runs, so
/// the client compiler only, the serial collector, and the class-data
/// sharing archive kafka-tools.sh makes; each start then costs about a
/// third of the CPU, which the brokers under test get instead. (The
/// benchmarks run the tools with Kafka's own options.)
fn tool_jvm_options() -> &'static str {
    static OPTS: OnceLock<String> = OnceLock::new();
    OPTS.get_or_init(|| {
        let archive = last_line_of("kafka-tools.sh", &["--class-archive"]);
        format!(
            "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:SharedArchiveFile={} \
             -Xlog:cds=off -Xlog:cds+dynamic=off -Djava.awt.headless=true",
            archive.display()
        )
    })
}

/// A Kafka CLI tool, ready to run with the tests' JVM options.
pub fn kafka_tool_command(tool: &str) -> Command {
    let mut cmd = Command::new(kafka_bin().join(tool));
    cmd.env("KAFKA_JVM_PERFORMANCE_OPTS", tool_jvm_options());
    cmd
}

/// Runs a Kafka CLI tool, optionally feeding `stdin`.
pub fn kafka_tool(tool: &str, args: &[&str], stdin: Option<&str>) -> Output {
    run(kafka_tool_command(tool).args(args), stdin)
}

/// Runs `scripts/<script>` (a benchmark) in the test venv with `args`,
/// prints its output and returns it; fails the test if the script failed.
pub fn run_script(script: &str, args: &[&std::ffi::OsStr]) -> String {
    let out = Command::new(python())
        .arg(repo_root().join("scripts").join(script))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run scripts/{script}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{stdout}");
    assert!(
        out.status.success(),
        "scripts/{script} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Runs a Python snippet in the test venv with `args` in sys.argv[1:].
pub fn python_script(code: &str, args: &[&str]) -> Output {
    run(Command::new(python()).arg("-c").arg(code).args(args), None)
}

fn run(cmd: &mut Command, stdin: Option<&str>) -> Output {
    use std::io::Write;
    let mut child = cmd
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    child.wait_with_output().unwrap()
}

/// Asserts success and returns stdout, showing stderr on failure.
pub fn ok(out: Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "command failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    stdout
}

/// Asserts failure and returns what the command said, stdout then stderr
/// (the Kafka tools print an admin error on either).
pub fn refused(out: Output) -> String {
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "command succeeded:\n{said}");
    said
}
