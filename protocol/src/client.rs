//! A small async Kafka client: one connection, one request in flight,
//! kafka-protocol for the messages. Inter-broker replication uses it, and
//! the mirror fetcher and the CLI build on it.

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use thiserror::Error;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::frame::{FrameError, FrameReader};
use crate::mirror::{self, MirrorMessage, MirrorRequest};

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
    writer: tokio::net::tcp::OwnedWriteHalf,
    reader: FrameReader<tokio::net::tcp::OwnedReadHalf>,
    correlation_id: i32,
}

impl KafkaClient {
    /// Connects to `host:port`. `max_response` bounds response frames.
    pub async fn connect(
        host: &str,
        port: u16,
        client_id: &str,
        max_response: usize,
        timeout: Duration,
    ) -> Result<Self, ClientError> {
        let addr = format!("{host}:{port}");
        let stream = tokio::time::timeout(timeout, TcpStream::connect((host, port)))
            .await
            .map_err(|_| ClientError::Timeout {
                addr: addr.clone(),
                timeout,
            })?
            .map_err(|source| ClientError::Connect {
                addr: addr.clone(),
                source,
            })?;
        let _ = stream.set_nodelay(true);
        let (read, writer) = stream.into_split();
        Ok(Self {
            addr,
            client_id: client_id.to_string(),
            writer,
            reader: FrameReader::new(read, max_response),
            correlation_id: 0,
        })
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
