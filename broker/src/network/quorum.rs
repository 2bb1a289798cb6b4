//! Controller listeners carry two protocols: Kafka requests (ApiVersions,
//! DescribeQuorum...) and the metadata quorum's own RPC between
//! controllers. A controller connects as a Kafka client would (TLS
//! handshake and SASL login, as the listener asks), then sends quorum
//! frames, recognised by their API key; from the first one on the
//! connection belongs to the quorum, if the peer may take part.

use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use bytes::{Bytes, BytesMut};
use ottla_controller::raft::{RpcHandler, RPC_KEY};
use ottla_protocol::frame::FrameReader;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio_util::sync::CancellationToken;

use super::connection::Auth;
use crate::security::KafkaPrincipal;

/// Who may take part in the quorum: Kafka asks CLUSTER_ACTION on the
/// cluster of controllers' principals.
pub type QuorumAdmission = Box<dyn Fn(&KafkaPrincipal, IpAddr) -> bool + Send + Sync>;

/// The quorum's side of a controller listener, set once the controller has
/// started.
pub struct QuorumEndpoint {
    pub handler: RpcHandler,
    pub admits: QuorumAdmission,
}

pub type QuorumSlot = Arc<OnceLock<QuorumEndpoint>>;

/// Whether `frame` (a frame body, after its size) is a quorum RPC request.
pub(super) fn is_quorum_frame(frame: &[u8]) -> bool {
    matches!(frame, [k0, k1, ..] if i16::from_be_bytes([*k0, *k1]) == RPC_KEY)
}

/// A connection handed over to the quorum at its first quorum frame.
pub(super) struct QuorumSwitch<R> {
    handler: RpcHandler,
    first: Bytes,
    frames: FrameReader<R>,
}

impl<R: AsyncRead + Unpin> QuorumSwitch<R> {
    /// The switch for a connection authenticated as `auth` from `peer`, or
    /// why it is refused.
    pub(super) fn admit(
        endpoint: &QuorumEndpoint,
        auth: &Auth,
        peer: IpAddr,
        first: Bytes,
        frames: FrameReader<R>,
    ) -> Result<Self, String> {
        let principal = match auth {
            Auth::Fixed(principal) => principal,
            Auth::Sasl(session) => session
                .authenticated_as()
                .ok_or("a quorum RPC arrived before the SASL login completed")?,
        };
        if !(endpoint.admits)(principal, peer) {
            return Err(format!(
                "{principal} may not take part in the metadata quorum: controllers need \
                 CLUSTER_ACTION on the cluster (list their principal in super.users)"
            ));
        }
        Ok(Self {
            handler: endpoint.handler.clone(),
            first,
            frames,
        })
    }

    /// Serves quorum RPCs until the peer leaves, starting with the frame
    /// that made the switch, then what was read beyond it; at `shutdown`,
    /// once the RPC being answered (if any) is. Peers keep these
    /// connections open for good, so a listener's shutdown that waited for
    /// them waited out its whole grace period.
    pub(super) async fn serve<W: AsyncWrite + Unpin>(self, write: W, shutdown: CancellationToken) {
        let (read, buffered): (R, BytesMut) = self.frames.into_parts();
        let read = AsyncReadExt::chain(std::io::Cursor::new(buffered), read);
        self.handler
            .serve_connection(
                Some(self.first.to_vec()),
                read,
                write,
                shutdown.cancelled_owned(),
            )
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorum_frames_are_told_by_their_key() {
        let mut frame = RPC_KEY.to_be_bytes().to_vec();
        frame.extend_from_slice(&[0, 0, 1, 2, 3]);
        assert!(is_quorum_frame(&frame));
        assert!(!is_quorum_frame(&[0, 18, 0, 3]), "ApiVersions");
        assert!(!is_quorum_frame(&[0x75]), "too short for a key");
    }
}
