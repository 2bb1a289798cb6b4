//! Response encoding: size prefix, response header and body in one buffer,
//! ready for a single write.
//!
//! The header version comes from the request's API key and version
//! (ApiVersions always uses header v0, so a client that does not yet know the
//! broker's versions can parse it). Record bytes held by a body as `Bytes` are
//! copied once, into the response buffer; bodies pre-encoded by a handler can
//! skip even that by sending [`encode_response_head`] followed by the body.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Encodable;
use thiserror::Error;

use crate::frame::SIZE_PREFIX_LEN;

#[derive(Debug, Error)]
pub enum EncodeError {
    #[error("cannot encode {api_key:?} v{version} response: {reason}")]
    Invalid {
        api_key: ApiKey,
        version: i16,
        reason: String,
    },
    #[error("{api_key:?} response of {len} bytes does not fit a Kafka frame")]
    TooLarge { api_key: ApiKey, len: usize },
}

/// Encodes a complete response frame.
pub fn encode_response(
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Result<Bytes, EncodeError> {
    let fail = |e| invalid(api_key, api_version, e);
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0); // patched below, once the length is known
    write_header(&mut buf, api_key, api_version, correlation_id).map_err(fail)?;
    body.encode(&mut buf, api_version).map_err(fail)?;
    let len = buf.len() - SIZE_PREFIX_LEN;
    let size = i32::try_from(len).map_err(|_| EncodeError::TooLarge { api_key, len })?;
    buf[..SIZE_PREFIX_LEN].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

/// Encodes the size prefix and header for a body of `body_len` bytes that the
/// caller already holds encoded; write the two back to back.
pub fn encode_response_head(
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    body_len: usize,
) -> Result<Bytes, EncodeError> {
    let mut header = BytesMut::with_capacity(16);
    write_header(&mut header, api_key, api_version, correlation_id)
        .map_err(|e| invalid(api_key, api_version, e))?;
    let len = header.len() + body_len;
    let size = i32::try_from(len).map_err(|_| EncodeError::TooLarge { api_key, len })?;
    let mut head = BytesMut::with_capacity(SIZE_PREFIX_LEN + header.len());
    head.put_i32(size);
    head.put_slice(&header);
    Ok(head.freeze())
}

fn write_header(
    buf: &mut BytesMut,
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
) -> Result<(), anyhow::Error> {
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(buf, api_key.response_header_version(api_version))
}

fn invalid(api_key: ApiKey, version: i16, e: anyhow::Error) -> EncodeError {
    EncodeError::Invalid {
        api_key,
        version,
        reason: format!("{e:#}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Buf;
    use kafka_protocol::messages::{ApiVersionsResponse, MetadataResponse};
    use kafka_protocol::protocol::Decodable;

    fn split(mut frame: Bytes) -> (usize, Bytes) {
        let size = frame.get_i32() as usize;
        (size, frame)
    }

    #[test]
    fn api_versions_uses_header_v0_even_when_flexible() {
        let body = ResponseKind::ApiVersions(ApiVersionsResponse::default());
        let (size, mut rest) = split(encode_response(ApiKey::ApiVersions, 3, 9, &body).unwrap());
        assert_eq!(size, rest.len());
        let header = ResponseHeader::decode(&mut rest, 0).unwrap();
        assert_eq!(header.correlation_id, 9);
        let decoded = ApiVersionsResponse::decode(&mut rest, 3).unwrap();
        assert_eq!(decoded, ApiVersionsResponse::default());
        assert!(rest.is_empty());
    }

    #[test]
    fn flexible_apis_use_header_v1() {
        let body = ResponseKind::Metadata(MetadataResponse::default());
        let (_, mut rest) = split(encode_response(ApiKey::Metadata, 12, 5, &body).unwrap());
        let header = ResponseHeader::decode(&mut rest, 1).unwrap();
        assert_eq!(header.correlation_id, 5);
        MetadataResponse::decode(&mut rest, 12).unwrap();
        assert!(rest.is_empty());
    }

    #[test]
    fn head_matches_a_full_encoding() {
        let body = ResponseKind::Metadata(MetadataResponse::default());
        let full = encode_response(ApiKey::Metadata, 12, 5, &body).unwrap();
        let mut encoded_body = BytesMut::new();
        body.encode(&mut encoded_body, 12).unwrap();
        let head = encode_response_head(ApiKey::Metadata, 12, 5, encoded_body.len()).unwrap();
        assert_eq!([&head[..], &encoded_body[..]].concat(), &full[..]);
    }

    #[test]
    fn versions_the_schema_lacks_are_an_error() {
        let body = ResponseKind::ApiVersions(ApiVersionsResponse::default());
        assert!(matches!(
            encode_response(ApiKey::ApiVersions, 5, 1, &body),
            Err(EncodeError::Invalid { .. })
        ));
    }
}
