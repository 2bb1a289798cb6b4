//! A small async Kafka client: one connection, one request in flight,
//! kafka-protocol for the messages. Inter-broker replication uses it, and
//! the mirror fetcher and the CLI build on it.

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::security::{ClientSasl, ClientSecurity, ClientTls, SaslExchange};
use ottla_protocol::frame::{FrameError, FrameReader};
use ottla_protocol::mirror::{self, MirrorMessage, MirrorRequest};

#[derive(Debug, Error)]
pub enum ClientError {
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("i/o with {addr}: {source}")]
    Io {
        addr: String,
        source: std::io::Error,
    },
    #[error("frame from {addr}: {source}")]
    Frame { addr: String, source: FrameError },
    #[error("{addr} closed the connection")]
    Closed { addr: String },
    #[error("{addr} did not answer within {timeout:?}")]
    Timeout { addr: String, timeout: Duration },
    #[error("{addr}: {message}")]
    Security { addr: String, message: String },
    #[error("cannot encode api key {key} v{version}: {message}")]
    Encode {
        key: i16,
        version: i16,
        message: String,
    },
    #[error("bad answer from {addr} to api key {key} v{version}: {message}")]
    Decode {
        addr: String,
        key: i16,
        version: i16,
        message: String,
    },
}

pub struct KafkaClient {
    addr: String,
    client_id: String,
    writer: Box<dyn AsyncWrite + Send + Sync + Unpin>,
    reader: FrameReader<Box<dyn AsyncRead + Send + Sync + Unpin>>,
    correlation_id: i32,
}

impl KafkaClient {
    /// Connects to `host:port` over PLAINTEXT. `max_response` bounds
    /// response frames.
    pub async fn connect(
        host: &str,
        port: u16,
        client_id: &str,
        max_response: usize,
        timeout: Duration,
    ) -> Result<Self, ClientError> {
        Self::connect_with(
            host,
            port,
            client_id,
            max_response,
            timeout,
            &ClientSecurity::default(),
        )
        .await
    }

    /// Connects to `host:port`, then does the TLS handshake and the SASL
    /// login `security` asks for, before any request.
    pub async fn connect_with(
        host: &str,
        port: u16,
        client_id: &str,
        max_response: usize,
        timeout: Duration,
        security: &ClientSecurity,
    ) -> Result<Self, ClientError> {
        let addr = format!("{host}:{port}");
        let timed_out = || ClientError::Timeout {
            addr: addr.clone(),
            timeout,
        };
        let stream = tokio::time::timeout(timeout, TcpStream::connect((host, port)))
            .await
            .map_err(|_| timed_out())?
            .map_err(|source| ClientError::Connect {
                addr: addr.clone(),
                source,
            })?;
        let _ = stream.set_nodelay(true);
        let (read, writer): (
            Box<dyn AsyncRead + Send + Sync + Unpin>,
            Box<dyn AsyncWrite + Send + Sync + Unpin>,
        ) = match &security.tls {
            None => {
                let (read, write) = stream.into_split();
                (Box::new(read), Box::new(write))
            }
            Some(tls) => {
                let name =
                    ClientTls::server_name(host).map_err(|message| ClientError::Security {
                        addr: addr.clone(),
                        message,
                    })?;
                let tls_stream =
                    tokio::time::timeout(timeout, tls.connector().connect(name, stream))
                        .await
                        .map_err(|_| timed_out())?
                        .map_err(|e| ClientError::Security {
                            addr: addr.clone(),
                            message: format!("TLS handshake failed: {e}"),
                        })?;
                let (read, write) = tokio::io::split(tls_stream);
                (Box::new(read), Box::new(write))
            }
        };
        let mut client = Self {
            addr,
            client_id: client_id.to_string(),
            writer,
            reader: FrameReader::new(read, max_response),
            correlation_id: 0,
        };
        if let Some(sasl) = &security.sasl {
            client.authenticate(sasl, timeout).await?;
        }
        Ok(client)
    }

    /// Kafka's SASL login: SaslHandshake v1 naming the mechanism, then
    /// SaslAuthenticate v2 frames until the mechanism is done.
    async fn authenticate(
        &mut self,
        sasl: &ClientSasl,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        let failed = |addr: &str, message: String| ClientError::Security {
            addr: addr.to_string(),
            message,
        };
        let handshake = self
            .send(
                1,
                &SaslHandshakeRequest::default()
                    .with_mechanism(StrBytes::from_static_str(sasl.mechanism.name())),
                timeout,
            )
            .await?;
        if handshake.error_code != 0 {
            let enabled: Vec<&str> = handshake.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(failed(
                &self.addr,
                format!(
                    "the broker does not offer SASL mechanism {} (it offers {})",
                    sasl.mechanism.name(),
                    enabled.join(", ")
                ),
            ));
        }
        let mut exchange = SaslExchange::new(sasl);
        let mut token = Some(exchange.first(sasl));
        while let Some(out) = token.take() {
            let answer = self
                .send(
                    2,
                    &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(out)),
                    timeout,
                )
                .await?;
            if answer.error_code != 0 {
                return Err(failed(
                    &self.addr,
                    format!(
                        "SASL {} login as {} failed: {}",
                        sasl.mechanism.name(),
                        sasl.username,
                        answer.error_message.as_deref().unwrap_or("no reason given")
                    ),
                ));
            }
            token = exchange
                .next(sasl, &answer.auth_bytes)
                .map_err(|message| failed(&self.addr, message))?;
        }
        Ok(())
    }

    /// The connection itself, secured and logged in, for a caller that
    /// speaks another protocol over it from now on (the metadata quorum's
    /// RPC). Bytes already read are replayed first.
    pub fn into_stream(
        self,
    ) -> (
        impl AsyncRead + Send + Sync + Unpin + 'static,
        Box<dyn AsyncWrite + Send + Sync + Unpin>,
    ) {
        let (read, buffered) = self.reader.into_parts();
        (
            AsyncReadExt::chain(std::io::Cursor::new(buffered.freeze()), read),
            self.writer,
        )
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends `req` at `version` and waits up to `timeout` for its answer.
    /// After an error the connection must be dropped: a late answer may
    /// still be on its way.
    pub async fn send<R: Request>(
        &mut self,
        version: i16,
        req: &R,
        timeout: Duration,
    ) -> Result<R::Response, ClientError> {
        let mut body = BytesMut::new();
        req.encode(&mut body, version)
            .map_err(|e| encode_error(R::KEY, version, e.to_string()))?;
        let mut reply = self
            .exchange(
                R::KEY,
                version,
                R::header_version(version),
                &body,
                R::Response::header_version(version),
                timeout,
            )
            .await?;
        let response = R::Response::decode(&mut reply, version)
            .map_err(|e| self.decode_error(R::KEY, version, e.to_string()))?;
        if reply.has_remaining() {
            return Err(self.decode_error(
                R::KEY,
                version,
                format!("{} bytes after the response", reply.remaining()),
            ));
        }
        Ok(response)
    }

    /// Sends one of Ottla's mirror requests (flexible from v0: request
    /// header v2, response header v1). Same contract as [`Self::send`].
    pub async fn send_mirror<R: MirrorRequest>(
        &mut self,
        version: i16,
        req: &R,
        timeout: Duration,
    ) -> Result<R::Response, ClientError> {
        let key = R::API_KEY.as_i16();
        let body = req
            .encode(version)
            .map_err(|e| encode_error(key, version, e.to_string()))?;
        let reply = self
            .exchange(
                key,
                version,
                mirror::REQUEST_HEADER_VERSION,
                &body,
                mirror::RESPONSE_HEADER_VERSION,
                timeout,
            )
            .await?;
        <R::Response as MirrorMessage>::decode(&reply, version)
            .map_err(|e| self.decode_error(key, version, e.to_string()))
    }

    /// Writes one request frame (header, then the encoded `body`) and reads
    /// its answer: the response body after a checked response header.
    async fn exchange(
        &mut self,
        key: i16,
        version: i16,
        header_version: i16,
        body: &[u8],
        response_header_version: i16,
        timeout: Duration,
    ) -> Result<Bytes, ClientError> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let correlation_id = self.correlation_id;
        let header = RequestHeader::default()
            .with_request_api_key(key)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_string(self.client_id.clone())));
        let mut frame = BytesMut::with_capacity(64 + body.len());
        frame.put_i32(0);
        header
            .encode(&mut frame, header_version)
            .map_err(|e| encode_error(key, version, e.to_string()))?;
        frame.put_slice(body);
        let len = (frame.len() - 4) as i32;
        frame[..4].copy_from_slice(&len.to_be_bytes());
        let exchange = async {
            self.writer
                .write_all(&frame)
                .await
                .map_err(|source| ClientError::Io {
                    addr: self.addr.clone(),
                    source,
                })?;
            self.reader
                .next_frame()
                .await
                .map_err(|source| ClientError::Frame {
                    addr: self.addr.clone(),
                    source,
                })?
                .ok_or_else(|| ClientError::Closed {
                    addr: self.addr.clone(),
                })
        };
        let mut reply = tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| ClientError::Timeout {
                addr: self.addr.clone(),
                timeout,
            })??;
        let response_header = ResponseHeader::decode(&mut reply, response_header_version)
            .map_err(|e| self.decode_error(key, version, e.to_string()))?;
        if response_header.correlation_id != correlation_id {
            return Err(self.decode_error(
                key,
                version,
                format!(
                    "correlation id {} instead of {correlation_id}",
                    response_header.correlation_id
                ),
            ));
        }
        Ok(reply)
    }

    fn decode_error(&self, key: i16, version: i16, message: String) -> ClientError {
        ClientError::Decode {
            addr: self.addr.clone(),
            key,
            version,
            message,
        }
    }
}

fn encode_error(key: i16, version: i16, message: String) -> ClientError {
    ClientError::Encode {
        key,
        version,
        message,
    }
}
