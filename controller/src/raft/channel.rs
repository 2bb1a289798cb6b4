//! One lazily opened connection to a controller, for request/response
//! exchanges over the quorum RPC framing.

use std::io;
use std::time::Duration;

use tokio::net::TcpStream;

use super::rpc::{read_frame, write_frame, Response};
use super::Node;

pub(crate) enum CallError {
    Connect(io::Error),
    Io(io::Error),
    Timeout,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Connect(e) => write!(f, "cannot connect: {e}"),
            Self::Io(e) => write!(f, "{e}"),
            Self::Timeout => write!(f, "timed out"),
        }
    }
}

pub(crate) struct Channel {
    node: Node,
    conn: Option<TcpStream>,
}

impl Channel {
    pub fn new(node: Node) -> Self {
        Self { node, conn: None }
    }

    pub fn node(&self) -> &Node {
        &self.node
    }

    /// One request/response exchange within `ttl`. The connection is taken
    /// out for the exchange, so a call abandoned half way (timeout, or the
    /// caller dropping the future) never leaves a response in the pipe.
    pub async fn call(&mut self, body: Vec<u8>, ttl: Duration) -> Result<Response, CallError> {
        let exchange = async {
            let mut conn = match self.conn.take() {
                Some(conn) => conn,
                None => {
                    let conn = TcpStream::connect((self.node.host.as_str(), self.node.port))
                        .await
                        .map_err(CallError::Connect)?;
                    let _ = conn.set_nodelay(true);
                    conn
                }
            };
            write_frame(&mut conn, &body).await.map_err(CallError::Io)?;
            let reply = read_frame(&mut conn)
                .await
                .and_then(|r| r.ok_or_else(|| io::ErrorKind::UnexpectedEof.into()))
                .and_then(|body| Response::decode(&body))
                .map_err(CallError::Io)?;
            self.conn = Some(conn);
            Ok(reply)
        };
        tokio::time::timeout(ttl, exchange)
            .await
            .unwrap_or(Err(CallError::Timeout))
    }
}
