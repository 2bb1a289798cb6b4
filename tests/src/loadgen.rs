//! Running the light load generator (`ottla-loadgen`, a binary of this
//! package) from a test, and reading its one-line JSON report. Tests pass
//! its path as cargo gives it to them: `env!("CARGO_BIN_EXE_ottla-loadgen")`.

use std::process::{Command, Output};

/// Runs `binary` with `args`, whatever its outcome.
pub fn run(binary: &str, args: &[&str]) -> Output {
    Command::new(binary)
        .args(args)
        .output()
        .expect("run ottla-loadgen")
}

/// The report of a run that must succeed.
pub fn report(binary: &str, args: &[&str]) -> String {
    let out = run(binary, args);
    assert!(
        out.status.success(),
        "ottla-loadgen {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).expect("utf-8 report");
    stdout.lines().last().expect("a report line").to_string()
}

/// The whole-number field `name` of a report.
pub fn field(report: &str, name: &str) -> u64 {
    let key = format!("\"{name}\":");
    let at = report
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {report}"))
        + key.len();
    let digits: String = report[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("{name} is not a number in {report}"))
}
