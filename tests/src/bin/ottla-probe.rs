//! `ottla-probe HOST:PORT [--brokers N] [--timeout SECS]`: a health check that
//! needs no shell, for the `FROM scratch` image built by `scripts/docker.sh`
//! (Docker's `HEALTHCHECK CMD ["/usr/local/bin/ottla-probe", ...]`).
//!
//! It sends ApiVersions v0 and exits 0 when the broker answers with no error.
//! With `--brokers N` it also sends Metadata v1 (no topics) and requires at
//! least N brokers in the answer, which tells a node that has joined its
//! cluster from one that only runs. Std only, hand-encoded requests; exit
//! code 1 and one line on stderr on any failure.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

const API_VERSIONS: i16 = 18;
const METADATA: i16 = 3;
const MAX_FRAME: usize = 16 * 1024 * 1024;

struct Args {
    addr: String,
    brokers: Option<usize>,
    timeout: Duration,
}

fn parse_args() -> Result<Args, String> {
    let mut addr = None;
    let mut brokers = None;
    let mut timeout = Duration::from_secs(5);
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--brokers" => {
                let n = it.next().ok_or("--brokers needs a number")?;
                brokers = Some(n.parse().map_err(|_| format!("bad --brokers {n}"))?);
            }
            "--timeout" => {
                let s = it.next().ok_or("--timeout needs seconds")?;
                let secs: u64 = s.parse().map_err(|_| format!("bad --timeout {s}"))?;
                timeout = Duration::from_secs(secs.max(1));
            }
            "-h" | "--help" => {
                return Err("usage: ottla-probe HOST:PORT [--brokers N] [--timeout SECS]".into())
            }
            _ if addr.is_none() && !arg.starts_with('-') => addr = Some(arg),
            _ => return Err(format!("unexpected argument {arg}")),
        }
    }
    Ok(Args {
        addr: addr.ok_or("usage: ottla-probe HOST:PORT [--brokers N] [--timeout SECS]")?,
        brokers,
        timeout,
    })
}

/// One request (header v1: key, version, correlation id, client id) and the
/// body of its answer (after the v0 response header, checked).
fn call(
    stream: &mut TcpStream,
    key: i16,
    version: i16,
    correlation: i32,
    body: &[u8],
) -> Result<Vec<u8>, String> {
    let client_id = b"ottla-probe";
    let mut frame = Vec::with_capacity(64 + body.len());
    let len = 2 + 2 + 4 + 2 + client_id.len() + body.len();
    frame.extend_from_slice(&(len as i32).to_be_bytes());
    frame.extend_from_slice(&key.to_be_bytes());
    frame.extend_from_slice(&version.to_be_bytes());
    frame.extend_from_slice(&correlation.to_be_bytes());
    frame.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    frame.extend_from_slice(client_id);
    frame.extend_from_slice(body);
    stream
        .write_all(&frame)
        .map_err(|e| format!("sending api key {key}: {}", io_error(&e)))?;
    let mut size = [0u8; 4];
    stream
        .read_exact(&mut size)
        .map_err(|e| format!("reading the answer to api key {key}: {}", io_error(&e)))?;
    let size = i32::from_be_bytes(size);
    if size < 4 || size as usize > MAX_FRAME {
        return Err(format!("answer to api key {key} has size {size}"));
    }
    let mut reply = vec![0u8; size as usize];
    stream
        .read_exact(&mut reply)
        .map_err(|e| format!("reading the answer to api key {key}: {}", io_error(&e)))?;
    let got = i32::from_be_bytes(reply[..4].try_into().unwrap());
    if got != correlation {
        return Err(format!(
            "answer to api key {key} has correlation id {got}, not {correlation}"
        ));
    }
    reply.drain(..4);
    Ok(reply)
}

/// Socket timeouts surface as EAGAIN; say what they mean.
fn io_error(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => "no answer in time".into(),
        _ => e.to_string(),
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        if self.0.len() < n {
            return Err("answer is truncated".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn i16(&mut self) -> Result<i16, String> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into().unwrap()))
    }
    fn i32(&mut self) -> Result<i32, String> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().unwrap()))
    }
    /// A (nullable) int16-length string.
    fn string(&mut self) -> Result<Option<String>, String> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        let bytes = self.take(len as usize)?;
        Ok(Some(String::from_utf8_lossy(bytes).into_owned()))
    }
}

fn probe(args: &Args) -> Result<String, String> {
    let addrs: Vec<_> = args
        .addr
        .to_socket_addrs()
        .map_err(|e| format!("resolving {}: {e}", args.addr))?
        .collect();
    let addr = addrs
        .first()
        .ok_or_else(|| format!("{} resolves to nothing", args.addr))?;
    let mut stream = TcpStream::connect_timeout(addr, args.timeout)
        .map_err(|e| format!("connecting to {addr}: {e}"))?;
    stream.set_read_timeout(Some(args.timeout)).ok();
    stream.set_write_timeout(Some(args.timeout)).ok();

    let reply = call(&mut stream, API_VERSIONS, 0, 1, &[])?;
    let error = Reader(&reply).i16()?;
    if error != 0 {
        return Err(format!("ApiVersions answered error code {error}"));
    }
    let Some(want) = args.brokers else {
        return Ok(format!("{addr}: ApiVersions ok"));
    };

    // Metadata v1 with an empty topic array: brokers and controller only.
    let reply = call(&mut stream, METADATA, 1, 2, &0i32.to_be_bytes())?;
    let mut r = Reader(&reply);
    let count = r.i32()?;
    let mut brokers = Vec::new();
    for _ in 0..count.max(0) {
        let id = r.i32()?;
        let host = r.string()?.unwrap_or_default();
        let port = r.i32()?;
        let _rack = r.string()?;
        brokers.push(format!("{id}@{host}:{port}"));
    }
    let controller = r.i32()?;
    let summary = format!(
        "{addr}: {} broker(s) [{}], controller {controller}",
        brokers.len(),
        brokers.join(", ")
    );
    if brokers.len() < want {
        return Err(format!("{summary}; want at least {want}"));
    }
    Ok(summary)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match probe(&args) {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ottla-probe: {e}");
            ExitCode::FAILURE
        }
    }
}
