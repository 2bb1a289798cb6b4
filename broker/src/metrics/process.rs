//! The standard `process_*` metrics, read from `/proc/self` at scrape time
//! (Linux only; elsewhere they are simply absent).

use std::fmt;
use std::fs;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use super::{counter, gauge, NO_LABELS};

#[derive(Debug, Default, PartialEq)]
pub struct ProcessStats {
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
    pub virtual_bytes: u64,
    pub start_time_seconds: f64,
    pub threads: u64,
    pub open_fds: u64,
    pub max_fds: Option<u64>,
}

/// `sysconf`, or None when the value is unknown.
fn sysconf(name: libc::c_int) -> Option<u64> {
    // SAFETY: sysconf only reads a system constant.
    let v = unsafe { libc::sysconf(name) };
    u64::try_from(v).ok().filter(|&v| v > 0)
}

/// Parses `/proc/self/stat` (fields after the parenthesised command name,
/// which may itself hold spaces) with the boot time from `/proc/stat`.
fn parse_stat(stat: &str, boot_time: u64, ticks: u64, page: u64) -> Option<ProcessStats> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // Field 3 of proc(5) (state) is index 0 here.
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok());
    let (utime, stime) = (num(11)?, num(12)?);
    Some(ProcessStats {
        cpu_seconds: (utime + stime) as f64 / ticks as f64,
        threads: num(17)?,
        start_time_seconds: boot_time as f64 + num(19)? as f64 / ticks as f64,
        virtual_bytes: num(20)?,
        resident_bytes: num(21)? * page,
        open_fds: 0,
        max_fds: None,
    })
}

fn boot_time() -> Option<u64> {
    fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())
}

fn max_open_files() -> Option<u64> {
    let limits = fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    // "Max open files  <soft>  <hard>  files"; "unlimited" has no number.
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

pub fn read() -> Option<ProcessStats> {
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    let mut stats = parse_stat(
        &stat,
        boot_time()?,
        sysconf(libc::_SC_CLK_TCK)?,
        sysconf(libc::_SC_PAGESIZE)?,
    )?;
    stats.open_fds = fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    stats.max_fds = max_open_files();
    Some(stats)
}

#[derive(Debug)]
pub struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let Some(p) = read() else {
            return Ok(());
        };
        let e = &mut encoder;
        counter(
            e,
            "process_cpu_seconds",
            "User and system CPU time spent in seconds.",
            [(NO_LABELS, p.cpu_seconds)],
        )?;
        gauge(
            e,
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            [(NO_LABELS, p.resident_bytes)],
        )?;
        gauge(
            e,
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
            [(NO_LABELS, p.virtual_bytes)],
        )?;
        gauge(
            e,
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            [(NO_LABELS, p.start_time_seconds)],
        )?;
        gauge(
            e,
            "process_open_fds",
            "Number of open file descriptors.",
            [(NO_LABELS, p.open_fds)],
        )?;
        gauge(
            e,
            "process_max_fds",
            "Maximum number of open file descriptors.",
            p.max_fds.map(|n| (NO_LABELS, n)),
        )?;
        gauge(
            e,
            "process_threads",
            "Number of OS threads in the process.",
            [(NO_LABELS, p.threads)],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_found_after_the_command_name() {
        // pid (comm) state ppid ... as proc(5) lists them; the name has a
        // space and a parenthesis to make sure parsing starts after the last.
        let stat = "42 (ottla (x) y) S 1 42 42 0 -1 4194560 100 0 0 0 \
                    250 50 0 0 20 0 7 0 1000 123456789 2048 18446744073709551615";
        let s = parse_stat(stat, 1_700_000_000, 100, 4096).unwrap();
        assert_eq!(s.cpu_seconds, 3.0);
        assert_eq!(s.threads, 7);
        assert_eq!(s.start_time_seconds, 1_700_000_010.0);
        assert_eq!(s.virtual_bytes, 123_456_789);
        assert_eq!(s.resident_bytes, 2048 * 4096);
    }

    #[test]
    fn this_process_is_readable() {
        let s = read().expect("/proc/self");
        assert!(s.resident_bytes > 0 && s.open_fds > 0 && s.threads > 0);
        assert!(s.start_time_seconds > 1_600_000_000.0);
    }
}
