//! The `metrics.listener` endpoint: `GET /metrics` in the Prometheus text
//! format, 404 for any other path. One request per connection, with a
//! bounded request head, read and write timeouts, and a cap on concurrent
//! scrapes (further connections wait in the listen backlog). Encoding runs on
//! the blocking pool because it briefly takes partition log locks, so a
//! scrape never holds up an async worker serving Kafka requests.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::prometheus_text;
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// Request heads are a line and a few headers; anything longer is refused.
const MAX_HEAD: usize = 8 * 1024;
const READ_TIMEOUT: Duration = Duration::from_secs(10);
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
const MAX_CONCURRENT: usize = 4;

pub struct MetricsServer {
    listener: TcpListener,
}

impl MetricsServer {
    /// Binds now, so a taken port fails start-up; serving starts later.
    pub async fn bind(addr: SocketAddr) -> io::Result<Self> {
        let listener = TcpListener::bind(addr).await.map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot bind metrics.listener {addr}: {e}"),
            )
        })?;
        Ok(Self { listener })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves scrapes of `registry` until `shutdown`.
    pub async fn serve(self, registry: Arc<Registry>, shutdown: CancellationToken) {
        if let Ok(addr) = self.listener.local_addr() {
            info!("metrics listening on http://{addr}/metrics");
        }
        let slots = Arc::new(Semaphore::new(MAX_CONCURRENT));
        loop {
            let slot = tokio::select! {
                _ = shutdown.cancelled() => return,
                slot = slots.clone().acquire_owned() => slot.expect("never closed"),
            };
            let accepted = tokio::select! {
                _ = shutdown.cancelled() => return,
                accepted = self.listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, _)) => {
                    let registry = registry.clone();
                    tokio::spawn(async move {
                        if let Err(e) = handle(stream, registry).await {
                            debug!("metrics request failed: {e}");
                        }
                        drop(slot);
                    });
                }
                Err(e) => {
                    warn!("metrics accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
}

async fn handle(mut stream: TcpStream, registry: Arc<Registry>) -> io::Result<()> {
    let head = tokio::time::timeout(READ_TIMEOUT, read_head(&mut stream))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "request head timed out"))??;
    let response = match head {
        Some(head) => respond(&head, &registry).await,
        None => reply(
            431,
            "Request Header Fields Too Large",
            "",
            b"request head too large\n",
        ),
    };
    tokio::time::timeout(WRITE_TIMEOUT, stream.write_all(&response))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "response write timed out"))??;
    stream.shutdown().await
}

/// Reads up to the blank line ending the head; None if it exceeds MAX_HEAD.
async fn read_head(stream: &mut TcpStream) -> io::Result<Option<Vec<u8>>> {
    let mut buf = vec![0u8; MAX_HEAD];
    let mut len = 0;
    loop {
        if let Some(end) = head_end(&buf[..len]) {
            buf.truncate(end);
            return Ok(Some(buf));
        }
        if len == MAX_HEAD {
            return Ok(None);
        }
        match stream.read(&mut buf[len..]).await? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => len += n,
        }
    }
}

fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

async fn respond(head: &[u8], registry: &Arc<Registry>) -> Vec<u8> {
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return reply(400, "Bad Request", "", b"malformed request line\n");
    };
    if !version.starts_with(b"HTTP/1.") {
        return reply(400, "Bad Request", "", b"HTTP/1.x only\n");
    }
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    if path != b"/metrics" {
        return reply(
            404,
            "Not Found",
            "",
            b"not found; metrics are at /metrics\n",
        );
    }
    let head_only = match method {
        b"GET" => false,
        b"HEAD" => true,
        _ => return reply(405, "Method Not Allowed", "Allow: GET, HEAD\r\n", b""),
    };
    let registry = registry.clone();
    let rendered = tokio::task::spawn_blocking(move || super::render(&registry)).await;
    match rendered {
        Ok(Ok(body)) => {
            let mut response = reply(
                200,
                "OK",
                &format!("Content-Type: {}\r\n", prometheus_text::CONTENT_TYPE),
                body.as_bytes(),
            );
            if head_only {
                response.truncate(response.len() - body.len());
            }
            response
        }
        _ => reply(500, "Internal Server Error", "", b"encoding failed\n"),
    }
}

/// A whole response; `headers` are extra `Name: value\r\n` lines.
fn reply(status: u16, reason: &str, headers: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn exchange(addr: SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(request).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn serves_metrics_and_nothing_else() {
        let server = MetricsServer::bind("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let addr = server.local_addr().unwrap();
        let mut registry = Registry::default();
        registry.register_collector(Box::new(super::super::process::ProcessCollector));
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(server.serve(Arc::new(registry), shutdown.clone()));

        let ok = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(
            ok.contains("Content-Type: text/plain; version=0.0.4"),
            "{ok}"
        );
        assert!(ok.contains("\nprocess_resident_memory_bytes "), "{ok}");
        let (head, body) = ok.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("Content-Length: {}\r\n", body.len())));

        let head_only = exchange(addr, b"HEAD /metrics?x=1 HTTP/1.0\r\n\r\n").await;
        assert!(head_only.starts_with("HTTP/1.1 200 OK\r\n"), "{head_only}");
        assert!(head_only.ends_with("\r\n\r\n"), "{head_only}");

        let other = exchange(addr, b"GET / HTTP/1.1\r\n\r\n").await;
        assert!(other.starts_with("HTTP/1.1 404 Not Found\r\n"), "{other}");
        let post = exchange(addr, b"POST /metrics HTTP/1.1\r\n\r\n").await;
        assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
        let junk = exchange(addr, b"hello\r\n\r\n").await;
        assert!(junk.starts_with("HTTP/1.1 400 "), "{junk}");
        // A head that never ends is cut off at MAX_HEAD (sent exactly, so
        // no unread bytes turn the close into a reset).
        let mut huge = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
        huge.resize(MAX_HEAD, b'a');
        let too_big = exchange(addr, &huge).await;
        assert!(too_big.starts_with("HTTP/1.1 431 "), "{too_big}");

        shutdown.cancel();
        task.await.unwrap();
    }
}
