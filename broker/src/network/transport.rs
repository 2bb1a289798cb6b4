//! From an accepted socket to a served connection: the TLS handshake on
//! SSL and SASL_SSL listeners (bounded in time, so a silent or plaintext
//! client cannot hold it), the connection's initial principal, and how each
//! transport writes response frames.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use crate::network::response_frame::ResponseFrame;
use tokio::io::{AsyncRead, AsyncWrite, WriteHalf};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use super::connection::{Auth, Connection};
use crate::security::sasl::session::SaslSession;
use crate::security::tls::peer_principal;
use crate::security::tls_reload::ReloadableTls;
use crate::security::KafkaPrincipal;

/// How long a client has to complete the TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `stream` on `connection`'s listener until it closes.
pub(super) async fn serve(connection: Connection, stream: TcpStream, shutdown: CancellationToken) {
    if let Some(tls) = connection.service.security.tls.clone() {
        // Boxed: a TLS session's state is kilobytes, which every plaintext
        // connection's task would otherwise reserve too.
        return Box::pin(serve_tls(connection, &tls, stream, shutdown)).await;
    }
    let auth = initial_auth(&connection, KafkaPrincipal::anonymous());
    let (read, write) = stream.into_split();
    connection.serve(read, write, auth, shutdown).await
}

/// The TLS handshake, bounded in time, then the connection over TLS.
async fn serve_tls(
    connection: Connection,
    tls: &ReloadableTls,
    stream: TcpStream,
    shutdown: CancellationToken,
) {
    let handshake = tokio::time::timeout(
        TLS_HANDSHAKE_TIMEOUT,
        tls.acceptor().accept(stream).into_fallible(),
    );
    let outcome = tokio::select! {
        _ = shutdown.cancelled() => return,
        outcome = handshake => outcome,
    };
    match outcome {
        Ok(Ok(tls)) => {
            let principal = peer_principal(tls.get_ref().1.peer_certificates());
            debug!(%principal, "TLS handshake complete");
            let auth = initial_auth(&connection, principal);
            let (read, write) = tokio::io::split(tls);
            connection.serve(read, write, auth, shutdown).await;
        }
        Ok(Err((e, stream))) => {
            // INFO as in Kafka: health checks and port scans end here too.
            info!("TLS handshake failed (is the client using TLS, with a valid certificate?): {e}");
            // As any failed authentication, closed only after the delay.
            tokio::time::sleep(connection.service.security.failed_auth_delay).await;
            drop(stream);
        }
        Err(_) => info!("TLS handshake not completed within {TLS_HANDSHAKE_TIMEOUT:?}"),
    }
}

/// SASL listeners start a SASL session; others run as the transport's
/// principal.
fn initial_auth(connection: &Connection, transport: KafkaPrincipal) -> Auth {
    match &connection.service.security.sasl {
        Some(settings) => Auth::Sasl(Box::new(SaslSession::new(settings.clone()))),
        None => Auth::Fixed(Arc::new(transport)),
    }
}

/// The write half of a served connection: writes whole response frames.
pub(super) trait FrameSink: AsyncWrite + Unpin + Send {
    fn send(&mut self, frame: ResponseFrame) -> impl Future<Output = io::Result<()>> + Send;
}

/// Plaintext: record sets go from the page cache to the socket
/// (`sendfile`), everything else in vectored writes.
impl FrameSink for OwnedWriteHalf {
    async fn send(&mut self, frame: ResponseFrame) -> io::Result<()> {
        frame.send_to(self.as_ref()).await
    }
}

/// TLS: the record sets must pass through the encryption, so they are read
/// from their files a piece at a time.
impl<S: AsyncRead + AsyncWrite + Unpin + Send> FrameSink for WriteHalf<S> {
    async fn send(&mut self, frame: ResponseFrame) -> io::Result<()> {
        frame.write_to(self).await
    }
}
