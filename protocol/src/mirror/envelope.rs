//! Request and response framing for the mirror APIs on a broker: the
//! request header (v2) is decoded with kafka-protocol, the body is left to
//! the handler, and the response head (size prefix and header v1) is
//! written here.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::RequestHeader;
use kafka_protocol::protocol::Decodable;

use super::{MirrorApiKey, REQUEST_HEADER_VERSION};
use crate::request::{guarded, RequestError, RequestPrefix};

/// A mirror request with its header decoded and its body still encoded.
#[derive(Debug)]
pub struct MirrorRequestFrame {
    pub key: MirrorApiKey,
    pub header: RequestHeader,
    pub body: Bytes,
}

/// Decodes the header of a frame whose API key is a mirror key. Versions
/// `accepts` refuses are never decoded.
pub fn decode_mirror_request(
    frame: Bytes,
    key: MirrorApiKey,
    accepts: impl Fn(MirrorApiKey, i16) -> bool,
) -> Result<MirrorRequestFrame, RequestError> {
    let prefix = RequestPrefix::peek(&frame)?;
    if !accepts(key, prefix.api_version) {
        let api = format!("{key:?}");
        return Err(RequestError::UnsupportedOwnApiVersion { api, prefix });
    }
    let mut body = frame;
    let header = guarded(|| RequestHeader::decode(&mut body, REQUEST_HEADER_VERSION))
        .map_err(|reason| RequestError::InvalidHeader { prefix, reason })?;
    Ok(MirrorRequestFrame { key, header, body })
}

/// The size prefix and response header v1 (correlation id, no tagged
/// fields) for a body of `body_len` bytes.
pub fn mirror_response_head(correlation_id: i32, body_len: usize) -> Option<Bytes> {
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
    use kafka_protocol::messages::ResponseHeader;
    use kafka_protocol::protocol::{Encodable, StrBytes};

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
        let req =
            decode_mirror_request(frame(0), MirrorApiKey::ListMirrors, |_, v| v == 0).unwrap();
        assert_eq!(req.header.correlation_id, 9);
        assert_eq!(req.header.client_id.as_deref(), Some("cli"));
        assert_eq!(
            ListMirrorsRequest::decode(&req.body, 0).unwrap(),
            ListMirrorsRequest::default()
        );
    }

    #[test]
    fn refused_versions_are_not_decoded() {
        let err =
            decode_mirror_request(frame(3), MirrorApiKey::ListMirrors, |_, v| v == 0).unwrap_err();
        assert!(matches!(err, RequestError::UnsupportedOwnApiVersion { .. }));
        let short = Bytes::from_static(&[0, 98, 0, 0, 0, 0, 0, 1, 0xff]);
        assert!(decode_mirror_request(short, MirrorApiKey::ListMirrors, |_, _| true).is_err());
    }

    #[test]
    fn response_head_is_header_v1() {
        let mut head = mirror_response_head(7, 3).unwrap();
        assert_eq!(&head[..4], &8i32.to_be_bytes());
        let _ = bytes::Buf::copy_to_bytes(&mut head, 4);
        let header = ResponseHeader::decode(&mut head, 1).unwrap();
        assert_eq!(header.correlation_id, 7);
        assert!(head.is_empty());
    }
}
