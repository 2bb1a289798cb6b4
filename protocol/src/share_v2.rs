//! ShareFetch and ShareAcknowledge v2 (Kafka 4.4: KIP-1206's acquire mode,
//! KIP-1222's renew acknowledgements), and DescribeShareGroupOffsets v1
//! (KIP-1226's lag, `share_lag`), which kafka-protocol 0.18, generated from
//! Kafka 4.1's schemas, does not know.
//!
//! v2 only inserts fields at one place of v1's layout, so a v2 request is
//! decoded by lifting the new fields out ([`lift`]) and handing the rest to
//! kafka-protocol as v1. ShareFetch v2's response is laid out as v1's;
//! ShareAcknowledge v2's is v1's with AcquisitionLockTimeoutMs inserted after
//! the top-level error message ([`encode_share_acknowledge_response`]).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ShareAcknowledgeResponse};
use kafka_protocol::protocol::{Encodable, VersionRange};

use crate::schema::wire::{DecodeError, Reader};

/// The version these fields arrived in.
pub const V2: i16 = 2;

/// ShareFetch's ShareAcquireMode: acquire whole record batches, so a fetch
/// may hand out more than MaxRecords (Kafka's default).
pub const BATCH_OPTIMIZED: i8 = 0;
/// ShareFetch's ShareAcquireMode: hand out MaxRecords at most, splitting a
/// batch if need be.
pub const RECORD_LIMIT: i8 = 1;

/// The request fields v2 adds (v1's requests have their defaults).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShareRequestV2 {
    /// ShareFetch's ShareAcquireMode ([`BATCH_OPTIMIZED`] or
    /// [`RECORD_LIMIT`]; other values are the handler's to refuse).
    pub acquire_mode: i8,
    /// The acknowledgements may renew acquisition locks (type 4); a
    /// ShareFetch that sets it fetches nothing.
    pub is_renew_ack: bool,
}

/// The highest version Ottla serves of `key` where it exceeds
/// kafka-protocol's (by one version, laid out as the one before it apart
/// from the fields this module and `share_lag` handle).
pub fn served_max(key: ApiKey) -> Option<i16> {
    match key {
        ApiKey::ShareFetch | ApiKey::ShareAcknowledge => Some(V2),
        ApiKey::DescribeShareGroupOffsets
        | ApiKey::WriteShareGroupState
        | ApiKey::ReadShareGroupStateSummary => Some(crate::share_lag::V1),
        _ => None,
    }
}

/// The widest range Ottla can serve for `key`: kafka-protocol's, and the
/// later versions this module adds.
pub fn servable_range(key: ApiKey) -> VersionRange {
    let crate_range = key.valid_versions();
    VersionRange {
        max: served_max(key).unwrap_or(crate_range.max),
        ..crate_range
    }
}

/// The kafka-protocol version whose layout a `key` body at `version`
/// shares, apart from the fields this module handles.
pub fn layout_version(key: ApiKey, version: i16) -> i16 {
    match served_max(key) {
        Some(max) if version == max => max - 1,
        _ => version,
    }
}

/// Takes the v2 fields out of a request body, leaving v1's layout.
pub fn lift(
    key: ApiKey,
    version: i16,
    body: Bytes,
) -> Result<(Bytes, ShareRequestV2), DecodeError> {
    // Where the new fields sit: after GroupId, MemberId and these.
    let (before, len) = match key {
        ApiKey::WriteShareGroupState if version == crate::share_lag::V1 => {
            return Ok((
                crate::share_lag::write_state_as_v0(&body)?,
                ShareRequestV2::default(),
            ))
        }
        _ if version < V2 => return Ok((body, ShareRequestV2::default())),
        // ShareSessionEpoch, MaxWaitMs, MinBytes, MaxBytes, MaxRecords,
        // BatchSize; then ShareAcquireMode and IsRenewAck.
        ApiKey::ShareFetch => (6 * 4, 2),
        // ShareSessionEpoch; then IsRenewAck.
        ApiKey::ShareAcknowledge => (4, 1),
        _ => return Ok((body, ShareRequestV2::default())),
    };
    let mut r = Reader::new(&body);
    skip_compact_string(&mut r)?; // GroupId
    skip_compact_string(&mut r)?; // MemberId
    r.take(before)?;
    let at = body.len() - r.remaining();
    let acquire_mode = match key {
        ApiKey::ShareFetch => r.i8()?,
        _ => BATCH_OPTIMIZED,
    };
    let is_renew_ack = r.bool()?;
    let fields = ShareRequestV2 {
        acquire_mode,
        is_renew_ack,
    };
    Ok((without(&body, at, len), fields))
}

fn skip_compact_string(r: &mut Reader<'_>) -> Result<(), DecodeError> {
    if let Some(len) = r.compact_length()? {
        r.take(len)?;
    }
    Ok(())
}

/// `body` without the `len` bytes at `at`.
fn without(body: &Bytes, at: usize, len: usize) -> Bytes {
    let mut out = BytesMut::with_capacity(body.len() - len);
    out.extend_from_slice(&body[..at]);
    out.extend_from_slice(&body[at + len..]);
    out.freeze()
}

/// A ShareAcknowledge response body at `version`: v2 carries the group's
/// acquisition lock duration, which renewed records now hold.
pub fn encode_share_acknowledge_response(
    response: &ShareAcknowledgeResponse,
    version: i16,
    acquisition_lock_timeout_ms: i32,
) -> anyhow::Result<BytesMut> {
    let mut v1 = BytesMut::new();
    response.encode(&mut v1, layout_version(ApiKey::ShareAcknowledge, version))?;
    if version < V2 {
        return Ok(v1);
    }
    let mut r = Reader::new(&v1);
    r.take(4 + 2)?; // ThrottleTimeMs, ErrorCode
    skip_compact_string(&mut r)?; // ErrorMessage
    let at = v1.len() - r.remaining();
    let mut out = BytesMut::with_capacity(v1.len() + 4);
    out.extend_from_slice(&v1[..at]);
    out.extend_from_slice(&acquisition_lock_timeout_ms.to_be_bytes());
    out.extend_from_slice(&v1[at..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::wire::Writer;
    use kafka_protocol::messages::share_acknowledge_response::{
        PartitionData, ShareAcknowledgeTopicResponse,
    };
    use kafka_protocol::messages::{ShareAcknowledgeRequest, ShareFetchRequest};
    use kafka_protocol::protocol::Decodable;
    use uuid::Uuid;

    const TOPIC: Uuid = Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);

    /// ShareFetchRequest v2 written field by field from Kafka 4.4's
    /// ShareFetchRequest.json: one topic, one partition with one
    /// acknowledgement batch, no forgotten topics.
    fn share_fetch_v2(acquire_mode: i8, is_renew_ack: bool) -> Bytes {
        let mut w = Writer::new();
        w.compact_nullable_string(Some("group")).unwrap();
        w.compact_nullable_string(Some("member")).unwrap();
        for field in [3, 500, 1, 52_428_800, 7, 9] {
            // ShareSessionEpoch, MaxWaitMs, MinBytes, MaxBytes, MaxRecords, BatchSize
            w.i32(field);
        }
        w.i8(acquire_mode);
        w.bool(is_renew_ack);
        w.unsigned_varint(2); // Topics: one
        w.uuid(&TOPIC);
        w.unsigned_varint(2); // Partitions: one
        w.i32(4); // PartitionIndex
        w.unsigned_varint(2); // AcknowledgementBatches: one
        w.i64(10);
        w.i64(12);
        w.unsigned_varint(2); // AcknowledgeTypes: one
        w.i8(4);
        w.unsigned_varint(0); // batch tags
        w.unsigned_varint(0); // partition tags
        w.unsigned_varint(0); // topic tags
        w.unsigned_varint(1); // ForgottenTopicsData: none
        w.unsigned_varint(0); // tags
        w.into_bytes().freeze()
    }

    #[test]
    fn a_share_fetch_v2_decodes_as_v1_with_its_new_fields_lifted() {
        let (v1, v2) = lift(ApiKey::ShareFetch, 2, share_fetch_v2(RECORD_LIMIT, true)).unwrap();
        assert_eq!(
            v2,
            ShareRequestV2 {
                acquire_mode: RECORD_LIMIT,
                is_renew_ack: true
            }
        );
        let r = ShareFetchRequest::decode(&mut v1.clone(), 1).unwrap();
        assert_eq!(r.group_id.as_ref().map(|g| g.as_str()), Some("group"));
        assert_eq!(
            (r.share_session_epoch, r.max_records, r.batch_size),
            (3, 7, 9)
        );
        let batch = &r.topics[0].partitions[0].acknowledgement_batches[0];
        assert_eq!(r.topics[0].topic_id, TOPIC);
        assert_eq!(
            (
                batch.first_offset,
                batch.last_offset,
                batch.acknowledge_types.clone()
            ),
            (10, 12, vec![4])
        );
    }

    #[test]
    fn a_share_acknowledge_v2_decodes_as_v1_with_its_flag_lifted() {
        let mut w = Writer::new();
        w.compact_nullable_string(Some("g")).unwrap();
        w.compact_nullable_string(None).unwrap();
        w.i32(5);
        w.bool(true);
        w.unsigned_varint(1); // Topics: none
        w.unsigned_varint(0);
        let (v1, v2) = lift(ApiKey::ShareAcknowledge, 2, w.into_bytes().freeze()).unwrap();
        assert!(v2.is_renew_ack);
        let r = ShareAcknowledgeRequest::decode(&mut v1.clone(), 1).unwrap();
        assert_eq!((r.member_id, r.share_session_epoch), (None, 5));
    }

    #[test]
    fn v1_and_other_apis_pass_through_and_truncated_v2_is_an_error() {
        let body = share_fetch_v2(BATCH_OPTIMIZED, false);
        let (same, v2) = lift(ApiKey::ShareFetch, 1, body.clone()).unwrap();
        assert_eq!((same, v2), (body.clone(), ShareRequestV2::default()));
        // Other APIs' bodies are not touched, whatever they hold.
        for key in [ApiKey::Fetch, ApiKey::CreateTopics] {
            assert_eq!(
                lift(key, 7, Bytes::from_static(&[0xff])).unwrap().0,
                &[0xff][..]
            );
        }
        for len in [0, 3, 20, 33] {
            assert!(
                lift(ApiKey::ShareFetch, 2, body.slice(..len)).is_err(),
                "{len}"
            );
        }
    }

    #[test]
    fn a_share_acknowledge_v2_response_carries_the_lock_duration() {
        let response = ShareAcknowledgeResponse::default()
            .with_error_message(Some("why".into()))
            .with_responses(vec![ShareAcknowledgeTopicResponse::default()
                .with_topic_id(TOPIC)
                .with_partitions(
                    vec![PartitionData::default().with_partition_index(2)],
                )]);
        let v1 = encode_share_acknowledge_response(&response, 1, 15_000).unwrap();
        let v2 = encode_share_acknowledge_response(&response, 2, 15_000).unwrap();
        // ThrottleTimeMs, ErrorCode, ErrorMessage "why" (length 3 + 1), then
        // AcquisitionLockTimeoutMs.
        let at = 4 + 2 + 1 + 3;
        assert_eq!(&v2[..at], &v1[..at]);
        assert_eq!(&v2[at..at + 4], &15_000i32.to_be_bytes());
        assert_eq!(&v2[at + 4..], &v1[at..]);
    }
}
