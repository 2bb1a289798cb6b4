//! Controller listeners carry two protocols: Kafka requests (ApiVersions,
//! DescribeQuorum...) and the metadata quorum's own RPC between
//! controllers. A quorum connection is recognised by its first frame's API
//! key, read without consuming it.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ottla_controller::raft::{RpcHandler, RPC_KEY};
use tokio::net::TcpStream;

/// The quorum's RPC handler, set once the controller has started.
pub type QuorumSlot = Arc<OnceLock<RpcHandler>>;

/// How long a new connection may take to send its first frame header.
const FIRST_FRAME_WAIT: Duration = Duration::from_secs(10);

/// The quorum handler to serve `stream` with, if its first frame is a
/// quorum RPC; None for Kafka clients (and for anything unclear, which the
/// Kafka side then refuses as it would).
pub async fn quorum_peer(slot: Option<&QuorumSlot>, stream: &TcpStream) -> Option<RpcHandler> {
    let handler = slot?.get()?.clone();
    let mut head = [0u8; 6];
    let peeked = tokio::time::timeout(FIRST_FRAME_WAIT, async {
        loop {
            match stream.peek(&mut head).await {
                Ok(n) if n >= head.len() => return true,
                Ok(0) | Err(_) => return false,
                Ok(_) => tokio::time::sleep(Duration::from_millis(1)).await,
            }
        }
    })
    .await
    .unwrap_or(false);
    (peeked && i16::from_be_bytes([head[4], head[5]]) == RPC_KEY).then_some(handler)
}
