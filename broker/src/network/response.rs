//! Response encoding: size prefix, response header and body, ready for a
//! single (vectored) write.
//!
//! The header version comes from the request's API key and version
//! (ApiVersions always uses header v0, so a client that does not yet know the
//! broker's versions can parse it). A Fetch's record sets are not copied
//! into the response: [`encode_response_frame`] sends them as chunks of
//! their own, or as file ranges where the Fetch holds stand-ins for them
//! (see `response_frame` and `file_records`); bodies pre-encoded by a
//! handler are sent after [`encode_response_head`].

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::buf::ByteBufMut;
use kafka_protocol::protocol::Encodable;
use thiserror::Error;

use ottla_protocol::frame::SIZE_PREFIX_LEN;
use ottla_protocol::share_v2::layout_version;

use super::file_records::FileRecords;
use super::response_frame::{ResponseFrame, SpliceBuf, SPLICE_MIN};

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
    #[error("{api_key:?} response: {spliced} of {stand_ins} file-backed record sets were found while encoding")]
    StandInsLeft {
        api_key: ApiKey,
        spliced: usize,
        stand_ins: usize,
    },
    #[error("{api_key:?} response: reading its record sets failed: {source}")]
    Read {
        api_key: ApiKey,
        source: std::io::Error,
    },
}

/// Encodes a complete response frame in one buffer.
pub fn encode_response(
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Result<Bytes, EncodeError> {
    let none = FileRecords::default();
    encode_spliced(api_key, api_version, correlation_id, body, &[], &none, 256)?
        .into_bytes()
        .map_err(|source| EncodeError::Read { api_key, source })
}

/// Encodes a complete response frame whose Fetch record sets are not
/// copied but sent from the buffers they were read into, or from their
/// files where `files` holds the stand-ins the body carries for them.
pub fn encode_response_frame(
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    body: &ResponseKind,
    files: &FileRecords,
) -> Result<ResponseFrame, EncodeError> {
    let shared = record_sets(body);
    // Everything but the record sets: a few dozen bytes per partition.
    let capacity = 256 + 64 * (shared.len() + files.len());
    encode_spliced(
        api_key,
        api_version,
        correlation_id,
        body,
        &shared,
        files,
        capacity,
    )
}

/// The record sets of a Fetch response worth splicing.
fn record_sets(body: &ResponseKind) -> Vec<Bytes> {
    let ResponseKind::Fetch(fetch) = body else {
        return Vec::new();
    };
    fetch
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .filter_map(|p| p.records.clone())
        .filter(|r| r.len() >= SPLICE_MIN)
        .collect()
}

fn encode_spliced(
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    body: &ResponseKind,
    shared: &[Bytes],
    files: &FileRecords,
    capacity: usize,
) -> Result<ResponseFrame, EncodeError> {
    let fail = |e| invalid(api_key, api_version, e);
    let mut first = BytesMut::with_capacity(capacity);
    first.put_i32(0); // patched below, once the length is known
    let mut buf = SpliceBuf::new(first, shared, files);
    write_header(&mut buf, api_key, api_version, correlation_id).map_err(fail)?;
    match body {
        // Only Fetch carries record sets to splice; `ResponseKind` itself
        // encodes into a BytesMut alone.
        ResponseKind::Fetch(fetch) => fetch.encode(&mut buf, api_version),
        other => other.encode(buf.unspliced(), layout_version(api_key, api_version)),
    }
    .map_err(fail)?;
    // A stand-in the encoder did not meet would reach the client as zeros.
    if buf.files_spliced() != files.len() {
        return Err(EncodeError::StandInsLeft {
            api_key,
            spliced: buf.files_spliced(),
            stand_ins: files.len(),
        });
    }
    let len = buf.offset() - SIZE_PREFIX_LEN;
    let size = i32::try_from(len).map_err(|_| EncodeError::TooLarge { api_key, len })?;
    Ok(buf.finish(|first| first[..SIZE_PREFIX_LEN].copy_from_slice(&size.to_be_bytes())))
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

fn write_header<B: ByteBufMut>(
    buf: &mut B,
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
    fn fetch_record_sets_are_spliced_not_copied() {
        use kafka_protocol::messages::fetch_response::{
            FetchResponse, FetchableTopicResponse, PartitionData,
        };
        use ottla_storage::file_range::FileRange;
        use std::io::Write;
        let big = Bytes::from(vec![3u8; 3 * SPLICE_MIN]);
        let small = Bytes::from_static(b"tiny");
        let in_file = Bytes::from(vec![9u8; 2 * SPLICE_MIN]);
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&[0u8; 10]).unwrap();
        file.write_all(&in_file).unwrap();
        let mut files = FileRecords::default();
        let stand_in = files
            .stand_in(FileRange {
                file: std::sync::Arc::new(file),
                position: 10,
                len: in_file.len(),
            })
            .unwrap();
        let fetch = |third: Bytes| {
            let partitions = vec![
                PartitionData::default().with_records(Some(big.clone())),
                PartitionData::default()
                    .with_partition_index(1)
                    .with_records(Some(small.clone())),
                PartitionData::default()
                    .with_partition_index(2)
                    .with_records(Some(third)),
            ];
            ResponseKind::Fetch(FetchResponse::default().with_responses(vec![
                FetchableTopicResponse::default().with_partitions(partitions),
            ]))
        };
        let body = fetch(stand_in);
        let plain = fetch(in_file.clone());
        for version in [4, 11, 12, 16] {
            let frame = encode_response_frame(ApiKey::Fetch, version, 8, &body, &files).unwrap();
            // head, big, the bytes between, the file range, and a tail only
            // where tagged fields follow (flexible versions).
            assert_eq!(
                frame.chunk_count(),
                if version >= 12 { 5 } else { 4 },
                "v{version}"
            );
            assert_eq!(frame.file_chunk_count(), 1, "v{version}");
            let whole = encode_response(ApiKey::Fetch, version, 8, &plain).unwrap();
            assert_eq!(frame.into_bytes().unwrap(), whole, "v{version}");
        }
    }

    #[test]
    fn a_stand_in_left_out_of_the_body_is_an_error() {
        use kafka_protocol::messages::fetch_response::FetchResponse;
        use ottla_storage::file_range::FileRange;
        let mut files = FileRecords::default();
        files
            .stand_in(FileRange {
                file: std::sync::Arc::new(tempfile::tempfile().unwrap()),
                position: 0,
                len: SPLICE_MIN,
            })
            .unwrap();
        let body = ResponseKind::Fetch(FetchResponse::default());
        assert!(matches!(
            encode_response_frame(ApiKey::Fetch, 12, 1, &body, &files),
            Err(EncodeError::StandInsLeft {
                spliced: 0,
                stand_ins: 1,
                ..
            })
        ));
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
