//! The APIs Ottla decodes with its own schema codec ([`crate::schema`])
//! because kafka-protocol does not know them: the mirror APIs and the
//! streams-group APIs. Their keys, and their framing on a broker: the
//! request header (v2) is decoded with kafka-protocol, the body is left to
//! the handler, and the response head (size prefix and header v1) is
//! written here.

use std::fmt;
use std::ops::RangeInclusive;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::RequestHeader;
use kafka_protocol::protocol::Decodable;

use crate::mirror::{MirrorApiKey, REQUEST_HEADER_VERSION};
use crate::request::{guarded, RequestError, RequestPrefix};
use crate::streams::StreamsApiKey;

/// Which API a request is for: one of Kafka's (kafka-protocol's codec) or
/// one of Ottla's own codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Kafka(kafka_protocol::messages::ApiKey),
    Own(OwnApiKey),
}

impl From<kafka_protocol::messages::ApiKey> for Api {
    fn from(key: kafka_protocol::messages::ApiKey) -> Self {
        Self::Kafka(key)
    }
}

impl From<OwnApiKey> for Api {
    fn from(key: OwnApiKey) -> Self {
        Self::Own(key)
    }
}

impl Api {
    /// The API key on the wire.
    pub fn as_i16(self) -> i16 {
        match self {
            Self::Kafka(key) => key as i16,
            Self::Own(key) => key.as_i16(),
        }
    }
}

/// An API served through Ottla's own codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OwnApiKey {
    Mirror(MirrorApiKey),
    Streams(StreamsApiKey),
}

impl OwnApiKey {
    pub fn from_i16(key: i16) -> Option<Self> {
        MirrorApiKey::from_i16(key)
            .map(Self::Mirror)
            .or_else(|| StreamsApiKey::from_i16(key).map(Self::Streams))
    }

    pub fn as_i16(self) -> i16 {
        match self {
            Self::Mirror(k) => k.as_i16(),
            Self::Streams(k) => k.as_i16(),
        }
    }

    pub fn versions(self) -> RangeInclusive<i16> {
        match self {
            Self::Mirror(k) => k.versions(),
            Self::Streams(k) => k.versions(),
        }
    }
}

/// The API's name, as Kafka's `ApiKeys` prints it.
impl fmt::Display for OwnApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Mirror(k) => write!(f, "{k:?}"),
            Self::Streams(k) => write!(f, "{k:?}"),
        }
    }
}

/// A request with its header decoded and its body still encoded.
#[derive(Debug)]
pub struct OwnRequestFrame {
    pub key: OwnApiKey,
    pub header: RequestHeader,
    pub body: Bytes,
}

/// Decodes the header of a frame whose API key is one of [`OwnApiKey`]'s.
/// Versions `accepts` refuses are never decoded.
pub fn decode_own_request(
    frame: Bytes,
    key: OwnApiKey,
    accepts: impl Fn(OwnApiKey, i16) -> bool,
) -> Result<OwnRequestFrame, RequestError> {
    let prefix = RequestPrefix::peek(&frame)?;
    if !accepts(key, prefix.api_version) {
        let api = key.to_string();
        return Err(RequestError::UnsupportedOwnApiVersion { api, prefix });
    }
    let mut body = frame;
    let header = guarded(|| RequestHeader::decode(&mut body, REQUEST_HEADER_VERSION))
        .map_err(|reason| RequestError::InvalidHeader { prefix, reason })?;
    Ok(OwnRequestFrame { key, header, body })
}

/// The size prefix and response header v1 (correlation id, no tagged
/// fields) for a body of `body_len` bytes.
pub fn own_response_head(correlation_id: i32, body_len: usize) -> Option<Bytes> {
    // Correlation id plus the empty tagged-field section (one zero byte).
    const HEADER_LEN: usize = 5;
    let size = i32::try_from(HEADER_LEN + body_len).ok()?;
    let mut head = BytesMut::with_capacity(4 + HEADER_LEN);
    head.put_i32(size);
    head.put_i32(correlation_id);
    head.put_u8(0);
    Some(head.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mirror::admin::ListMirrorsRequest;
    use crate::mirror::MirrorMessage;
    use crate::streams::heartbeat::StreamsGroupHeartbeatRequest;
    use crate::streams::StreamsMessage;
    use kafka_protocol::messages::ResponseHeader;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    const LIST_MIRRORS: OwnApiKey = OwnApiKey::Mirror(MirrorApiKey::ListMirrors);

    fn frame(version: i16) -> Bytes {
        let mut buf = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(MirrorApiKey::ListMirrors.as_i16())
            .with_request_api_version(version)
            .with_correlation_id(9)
            .with_client_id(Some(StrBytes::from_static_str("cli")))
            .encode(&mut buf, REQUEST_HEADER_VERSION)
            .unwrap();
        buf.extend_from_slice(&ListMirrorsRequest::default().encode(0).unwrap());
        buf.freeze()
    }

    #[test]
    fn header_is_decoded_and_the_body_left_whole() {
        let req = decode_own_request(frame(0), LIST_MIRRORS, |_, v| v == 0).unwrap();
        assert_eq!(req.header.correlation_id, 9);
        assert_eq!(req.header.client_id.as_deref(), Some("cli"));
        assert_eq!(
            ListMirrorsRequest::decode(&req.body, 0).unwrap(),
            ListMirrorsRequest::default()
        );
    }

    #[test]
    fn refused_versions_are_not_decoded() {
        let err = decode_own_request(frame(3), LIST_MIRRORS, |_, v| v == 0).unwrap_err();
        assert!(matches!(err, RequestError::UnsupportedOwnApiVersion { .. }));
        let short = Bytes::from_static(&[0, 98, 0, 0, 0, 0, 0, 1, 0xff]);
        assert!(decode_own_request(short, LIST_MIRRORS, |_, _| true).is_err());
    }

    #[test]
    fn keys_are_mirror_then_streams_and_nothing_else() {
        assert_eq!(
            OwnApiKey::from_i16(106),
            Some(OwnApiKey::Mirror(MirrorApiKey::CreateMirror))
        );
        let heartbeat = OwnApiKey::from_i16(88).unwrap();
        assert_eq!(
            heartbeat,
            OwnApiKey::Streams(StreamsApiKey::StreamsGroupHeartbeat)
        );
        assert_eq!(heartbeat.to_string(), "StreamsGroupHeartbeat");
        assert_eq!(heartbeat.versions(), 0..=1);
        assert_eq!(OwnApiKey::from_i16(0), None);
        // A streams body decodes through the same framing.
        let body = StreamsGroupHeartbeatRequest::default().encode(0).unwrap();
        assert!(StreamsGroupHeartbeatRequest::decode(&body, 0).is_ok());
    }

    #[test]
    fn response_head_is_header_v1() {
        let mut head = own_response_head(7, 3).unwrap();
        assert_eq!(&head[..4], &8i32.to_be_bytes());
        let _ = bytes::Buf::copy_to_bytes(&mut head, 4);
        let header = ResponseHeader::decode(&mut head, 1).unwrap();
        assert_eq!(header.correlation_id, 7);
        assert!(head.is_empty());
    }
}
