//! Request envelopes: peek the fixed prefix, gate on key and version, then
//! decode header and body with kafka-protocol, zero-copy from the frame.
//!
//! Everything here is total over arbitrary input: short frames, unknown keys,
//! unsupported versions, malformed bodies and decoder panics all come back as
//! a [`RequestError`]. (Hostile array lengths additionally need the global
//! allocator from [`crate::alloc`].)

use std::any::Any;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind};
use kafka_protocol::protocol::Decodable;
use thiserror::Error;

use crate::share_v2::{self, servable_range, ShareRequestV2};

/// api_key (i16) + api_version (i16) + correlation_id (i32): the part of the
/// request header that is laid out the same in every header version.
pub const REQUEST_PREFIX_LEN: usize = 8;

/// The fixed start of every request header, read without trusting anything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestPrefix {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
}

impl RequestPrefix {
    /// Reads the prefix; frames shorter than [`REQUEST_PREFIX_LEN`] are an error
    /// (kafka-protocol's own header peek panics on them).
    pub fn peek(frame: &[u8]) -> Result<Self, RequestError> {
        let Some(p) = frame.first_chunk::<REQUEST_PREFIX_LEN>() else {
            return Err(RequestError::Truncated { len: frame.len() });
        };
        Ok(Self {
            api_key: i16::from_be_bytes([p[0], p[1]]),
            api_version: i16::from_be_bytes([p[2], p[3]]),
            correlation_id: i32::from_be_bytes([p[4], p[5], p[6], p[7]]),
        })
    }
}

impl fmt::Display for RequestPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match ApiKey::try_from(self.api_key) {
            Ok(key) => write!(f, "{key:?}")?,
            Err(()) => write!(f, "api key {}", self.api_key)?,
        }
        write!(
            f,
            " v{} (correlation id {})",
            self.api_version, self.correlation_id
        )
    }
}

/// A decoded request.
#[derive(Debug)]
pub struct Request {
    pub api_key: ApiKey,
    pub header: RequestHeader,
    pub body: RequestKind,
    /// ShareFetch and ShareAcknowledge v2's fields, which `body` (laid out
    /// as v1) has no place for.
    pub share_v2: ShareRequestV2,
}

impl Request {
    pub fn api_version(&self) -> i16 {
        self.header.request_api_version
    }

    pub fn correlation_id(&self) -> i32 {
        self.header.correlation_id
    }
}

/// Why a frame is not a request we can serve. Kafka closes the connection in
/// every case except [`RequestError::is_unsupported_api_versions`], which is
/// answered with the KIP-511 ApiVersions v0 response.
#[derive(Debug, Error)]
pub enum RequestError {
    #[error("request of {len} bytes is shorter than the {REQUEST_PREFIX_LEN}-byte header prefix")]
    Truncated { len: usize },
    #[error("{prefix}: unknown API key")]
    UnknownApiKey { prefix: RequestPrefix },
    #[error("{prefix}: unsupported version")]
    UnsupportedVersion {
        api_key: ApiKey,
        prefix: RequestPrefix,
    },
    /// An unsupported version of one of Ottla's own APIs (the mirror
    /// APIs), named by `api`.
    #[error("{prefix}: unsupported version of {api}")]
    UnsupportedOwnApiVersion { api: String, prefix: RequestPrefix },
    #[error("{prefix}: malformed request header: {reason}")]
    InvalidHeader {
        prefix: RequestPrefix,
        reason: String,
    },
    #[error("{prefix}: malformed request body: {reason}")]
    InvalidBody {
        prefix: RequestPrefix,
        reason: String,
    },
}

impl RequestError {
    /// The request prefix, when the frame was long enough to have one.
    pub fn prefix(&self) -> Option<RequestPrefix> {
        match self {
            Self::Truncated { .. } => None,
            Self::UnknownApiKey { prefix }
            | Self::UnsupportedVersion { prefix, .. }
            | Self::UnsupportedOwnApiVersion { prefix, .. }
            | Self::InvalidHeader { prefix, .. }
            | Self::InvalidBody { prefix, .. } => Some(*prefix),
        }
    }

    /// An ApiVersions request at a version we do not know: per KIP-511 the
    /// broker answers it (in v0) instead of closing, so the client can retry
    /// with a version from the answer.
    pub fn is_unsupported_api_versions(&self) -> bool {
        matches!(
            self,
            Self::UnsupportedVersion {
                api_key: ApiKey::ApiVersions,
                ..
            }
        )
    }
}

/// Decodes a request frame (size prefix already stripped).
///
/// `accepts(key, version)` is the broker's gate: versions it rejects are never
/// handed to the decoder. Header and body are decoded from `frame` itself, so
/// byte fields (records, strings) borrow the frame's allocation.
pub fn decode_request(
    frame: Bytes,
    accepts: impl Fn(ApiKey, i16) -> bool,
) -> Result<Request, RequestError> {
    let prefix = RequestPrefix::peek(&frame)?;
    let api_key =
        ApiKey::try_from(prefix.api_key).map_err(|()| RequestError::UnknownApiKey { prefix })?;
    let version = prefix.api_version;
    // What Ottla can decode is checked too: header_version() and decode()
    // are only meaningful inside it.
    let known = servable_range(api_key);
    if !(known.min..=known.max).contains(&version) || !accepts(api_key, version) {
        return Err(RequestError::UnsupportedVersion { api_key, prefix });
    }
    let mut buf = frame;
    let header_version = api_key.request_header_version(version);
    let header = guarded(|| RequestHeader::decode(&mut buf, header_version))
        .map_err(|reason| RequestError::InvalidHeader { prefix, reason })?;
    let invalid_body = |reason| RequestError::InvalidBody { prefix, reason };
    let (mut buf, share_v2) =
        share_v2::lift(api_key, version, buf).map_err(|e| invalid_body(e.to_string()))?;
    let layout = share_v2::layout_version(api_key, version);
    let body = guarded(|| RequestKind::decode(api_key, &mut buf, layout)).map_err(invalid_body)?;
    Ok(Request {
        api_key,
        header,
        body,
        share_v2,
    })
}

/// Runs a kafka-protocol decoder, turning both its errors and its panics into
/// a message. The decoder only touches the buffer it is given, which is
/// discarded on failure, so observing a half-done decode is impossible.
pub(crate) fn guarded<T, E: fmt::Display>(
    decode: impl FnOnce() -> Result<T, E>,
) -> Result<T, String> {
    match panic::catch_unwind(AssertUnwindSafe(decode)) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(format!("{e:#}")),
        Err(payload) => Err(format!("decoder panicked: {}", panic_message(&*payload))),
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("non-string panic payload")
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::MetadataRequest;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn frame(key: ApiKey, version: i16, body: &impl Encodable) -> Bytes {
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(42)
            .with_client_id(Some(StrBytes::from_static_str("test")));
        let mut buf = BytesMut::new();
        header
            .encode(&mut buf, key.request_header_version(version))
            .unwrap();
        body.encode(&mut buf, version).unwrap();
        buf.freeze()
    }

    #[test]
    fn decodes_a_valid_request_zero_copy() {
        let f = frame(ApiKey::Metadata, 12, &MetadataRequest::default());
        let req = decode_request(f, |_, _| true).unwrap();
        assert_eq!(req.api_key, ApiKey::Metadata);
        assert_eq!(req.correlation_id(), 42);
        assert_eq!(req.api_version(), 12);
        assert_eq!(req.header.client_id.as_deref(), Some("test"));
        assert!(matches!(req.body, RequestKind::Metadata(_)));
    }

    #[test]
    fn gate_rejections_keep_the_prefix() {
        let f = frame(ApiKey::Metadata, 12, &MetadataRequest::default());
        let err = decode_request(f, |_, v| v < 12).unwrap_err();
        assert!(matches!(
            err,
            RequestError::UnsupportedVersion { api_key: ApiKey::Metadata, prefix } if prefix.correlation_id == 42
        ));
        assert!(!err.is_unsupported_api_versions());
    }

    #[test]
    fn prefix_display_names_the_api() {
        let p = RequestPrefix::peek(&[0, 3, 0, 12, 0, 0, 0, 7]).unwrap();
        assert_eq!(p.to_string(), "Metadata v12 (correlation id 7)");
        let p = RequestPrefix::peek(&[0x7f, 0, 0, 1, 0, 0, 0, 7]).unwrap();
        assert_eq!(p.to_string(), "api key 32512 v1 (correlation id 7)");
    }

    #[test]
    fn panics_become_errors() {
        let r: Result<(), String> = guarded(|| -> Result<(), String> { panic!("boom") });
        assert_eq!(r.unwrap_err(), "decoder panicked: boom");
    }
}
