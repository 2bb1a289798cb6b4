//! The Prometheus endpoint (`metrics.listener`) of a live `ottla`: fetched
//! over plain HTTP, and its samples summed by name and labels.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// One HTTP/1.1 GET: the status code and the body.
pub fn get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((status, body.to_string()))
}

/// `/metrics`, retried while the endpoint is still starting.
pub fn scrape(port: u16) -> String {
    let start = Instant::now();
    loop {
        match get(port, "/metrics") {
            Ok((200, body)) => return body,
            other if start.elapsed() > Duration::from_secs(20) => {
                panic!("no metrics on port {port}: {other:?}")
            }
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// The value of the sample `series`: its name and labels exactly as
/// printed, e.g. `kafka_log_size_bytes{topic="t",partition="0"}`.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// Sum of the samples of `name` whose labels contain every one of `labels`
/// (`key="value"`); None when there is no such sample.
pub fn sum(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    let values: Vec<f64> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, ""));
            (n == name && labels.iter().all(|x| rest.contains(x))).then(|| value.parse().ok())?
        })
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}
