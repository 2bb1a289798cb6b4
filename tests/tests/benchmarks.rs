//! The benchmark scripts keep working: their short modes, against Ottla
//! alone, take every figure they promise. (The figures themselves, and
//! the ratios against Apache Kafka, are the full runs' business.)

use std::ffi::OsStr;

use ottla_tests::ottla::ottla_binary;
use ottla_tests::tools::run_script;

/// `scripts/scale-bench.py` on 300 partitions and 500 connections: it
/// creates, describes, idles, opens connections and restarts a broker
/// (clean and kill -9), and every figure is a number.
#[test]
fn scale_bench_takes_every_figure_on_ottla() {
    let binary = ottla_binary();
    let args: Vec<&OsStr> = [
        "--brokers",
        "ottla",
        "--partitions",
        "300",
        "--connections",
        "500",
        "--active",
        "50",
        "--active-seconds",
        "1",
        "--idle-seconds",
        "1",
        "--metadata-runs",
        "2",
        "--only",
        "metadata,idle,connections,restart",
        // The script's own port, below the ephemeral range other tests'
        // nodes take theirs from.
        "--ottla-port",
        "29292",
        "--binary",
    ]
    .iter()
    .map(OsStr::new)
    .chain([binary.as_os_str()])
    .collect();
    let stdout = run_script("scale-bench.py", &args);
    for metric in [
        "create: all answer ListOffsets s",
        "metadata: Metadata ms",
        "idle: CPU % of a core",
        "connections: opened",
        "connections: RSS per connection KiB",
        "restart clean: all answer ListOffsets s",
        "restart kill -9: all answer ListOffsets s",
    ] {
        let row = stdout
            .lines()
            .find(|l| l.contains(metric))
            .unwrap_or_else(|| panic!("no {metric} row in:\n{stdout}"));
        // metric, Kafka ("-": not run), Ottla
        let ottla = row.split_whitespace().last().unwrap_or_default();
        let value: f64 = ottla
            .replace(',', "")
            .parse()
            .unwrap_or_else(|_| panic!("{metric}: {row}"));
        assert!(value >= 0.0, "{row}");
    }
    let opened = stdout
        .lines()
        .find(|l| l.contains("connections: opened"))
        .and_then(|l| l.split_whitespace().last())
        .unwrap_or_default()
        .replace(',', "");
    assert_eq!(opened, "500", "every connection was accepted");
}
