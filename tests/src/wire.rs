//! A tiny synchronous Kafka request client over `std::net::TcpStream`, for
//! tests that talk to a broker at the wire level: kafka-protocol encodes the
//! request header and body and decodes the response, one request in flight.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

/// Largest response frame accepted (Kafka's default socket.request.max.bytes).
const MAX_FRAME: usize = 100 * 1024 * 1024;

pub struct WireClient {
    stream: TcpStream,
    correlation_id: i32,
    client_id: String,
}

impl WireClient {
    pub fn connect(bootstrap: &str) -> Self {
        let stream = TcpStream::connect(bootstrap)
            .unwrap_or_else(|e| panic!("connecting to {bootstrap}: {e}"));
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        stream
            .set_write_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        Self {
            stream,
            correlation_id: 0,
            client_id: "ottla-wire-test".to_string(),
        }
    }

    /// Sends `req` at `version` and decodes the answer at the same version.
    pub fn send<R: Request>(&mut self, version: i16, req: &R) -> R::Response {
        let mut body = BytesMut::new();
        req.encode(&mut body, version)
            .unwrap_or_else(|e| panic!("encoding api key {} v{version}: {e}", R::KEY));
        let mut reply = self.send_raw(
            R::KEY,
            version,
            R::header_version(version),
            &body,
            <R::Response as HeaderVersion>::header_version(version),
        );
        let response = R::Response::decode(&mut reply, version)
            .unwrap_or_else(|e| panic!("decoding api key {} v{version} response: {e}", R::KEY));
        assert!(
            !reply.has_remaining(),
            "api key {} v{version}: {} bytes left after the response body",
            R::KEY,
            reply.remaining()
        );
        response
    }

    /// Sends a pre-encoded `body` under a request header of `header_version`
    /// claiming `api_key` / `version`; returns the response body after a
    /// response header of `response_header_version`.
    pub fn send_raw(
        &mut self,
        api_key: i16,
        version: i16,
        header_version: i16,
        body: &[u8],
        response_header_version: i16,
    ) -> Bytes {
        let correlation_id = self.write_request(api_key, version, header_version, body);
        self.read_response(api_key, version, correlation_id, response_header_version)
    }

    /// Sends `req` without waiting for an answer.
    pub fn send_only<R: Request>(&mut self, version: i16, req: &R) {
        let mut body = BytesMut::new();
        req.encode(&mut body, version)
            .expect("encoding the request");
        self.write_request(R::KEY, version, R::header_version(version), &body);
    }

    /// Whether the broker closes the connection (EOF or reset) within
    /// `within`, discarding anything it sends first.
    pub fn closed_within(&mut self, within: Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        let mut buf = [0u8; 4096];
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            match self.stream.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
    }

    fn write_request(
        &mut self,
        api_key: i16,
        version: i16,
        header_version: i16,
        body: &[u8],
    ) -> i32 {
        self.correlation_id += 1;
        let correlation_id = self.correlation_id;
        let header = RequestHeader::default()
            .with_request_api_key(api_key)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_string(self.client_id.clone())));
        let mut frame = BytesMut::new();
        frame.put_i32(0);
        header
            .encode(&mut frame, header_version)
            .expect("encoding the request header");
        frame.put_slice(body);
        let len = (frame.len() - 4) as i32;
        frame[..4].copy_from_slice(&len.to_be_bytes());
        self.stream
            .write_all(&frame)
            .unwrap_or_else(|e| panic!("writing api key {api_key} v{version}: {e}"));
        correlation_id
    }

    fn read_response(
        &mut self,
        api_key: i16,
        version: i16,
        correlation_id: i32,
        response_header_version: i16,
    ) -> Bytes {
        let mut size = [0u8; 4];
        self.stream
            .read_exact(&mut size)
            .unwrap_or_else(|e| panic!("reading the answer to api key {api_key} v{version}: {e}"));
        let size = i32::from_be_bytes(size);
        assert!(
            size >= 0 && (size as usize) <= MAX_FRAME,
            "response frame size {size}"
        );
        let mut buf = vec![0u8; size as usize];
        self.stream
            .read_exact(&mut buf)
            .unwrap_or_else(|e| panic!("reading the answer to api key {api_key} v{version}: {e}"));
        let mut buf = Bytes::from(buf);
        let header = ResponseHeader::decode(&mut buf, response_header_version)
            .expect("decoding the response header");
        assert_eq!(
            header.correlation_id, correlation_id,
            "response to api key {api_key} v{version} carries another correlation id"
        );
        buf
    }
}
