//! A small async Kafka client: one connection, one request in flight,
//! kafka-protocol for the messages. Inter-broker replication uses it, and
//! the mirror fetcher and the CLI build on it.

use std::time::Duration;

use bytes::{Buf, BufMut, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use thiserror::Error;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::frame::{FrameError, FrameReader};

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
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let correlation_id = self.correlation_id;
        let encode_error = |message: String| ClientError::Encode {
            key: R::KEY,
            version,
            message,
        };
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_string(self.client_id.clone())));
        let mut frame = BytesMut::new();
        frame.put_i32(0);
        header
            .encode(&mut frame, R::header_version(version))
            .map_err(|e| encode_error(e.to_string()))?;
        req.encode(&mut frame, version)
            .map_err(|e| encode_error(e.to_string()))?;
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
        let decode_error = |message: String| ClientError::Decode {
            addr: self.addr.clone(),
            key: R::KEY,
            version,
            message,
        };
        let response_header =
            ResponseHeader::decode(&mut reply, R::Response::header_version(version))
                .map_err(|e| decode_error(e.to_string()))?;
        if response_header.correlation_id != correlation_id {
            return Err(decode_error(format!(
                "correlation id {} instead of {correlation_id}",
                response_header.correlation_id
            )));
        }
        let response =
            R::Response::decode(&mut reply, version).map_err(|e| decode_error(e.to_string()))?;
        if reply.has_remaining() {
            return Err(decode_error(format!(
                "{} bytes after the response",
                reply.remaining()
            )));
        }
        Ok(response)
    }
}
