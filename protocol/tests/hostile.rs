//! Hostile request frames: each must come back as an error, never as an
//! abort (a refused allocation) or a panic.

mod common;

use bytes::Bytes;
use common::{frame, frame_with_raw_body};
use kafka_protocol::messages::ApiKey;
use ottla_protocol::request::{decode_request, RequestError};

#[global_allocator]
static ALLOC: ottla_allocator::NoReserveAllocator = ottla_allocator::NoReserveAllocator;

fn decode(frame: Bytes) -> Result<ottla_protocol::request::Request, RequestError> {
    decode_request(frame, |_, _| true)
}

fn assert_body_error(frame: Bytes) {
    match decode(frame) {
        Err(RequestError::InvalidBody { reason, .. }) => {
            assert!(!reason.contains("panicked"), "decoder panicked: {reason}")
        }
        other => panic!("expected a body error, got {other:?}"),
    }
}

#[test]
fn metadata_v1_claiming_2_pow_31_topics() {
    // The 154 GB reservation that aborts a process on the system allocator.
    assert_body_error(frame(ApiKey::Metadata, 1, &[0x7f, 0xff, 0xff, 0xff]));
}

#[test]
fn metadata_v12_compact_array_claiming_2_pow_32_topics() {
    // Unsigned varint 0xffffffff: 2^32 - 2 elements.
    assert_body_error(frame(ApiKey::Metadata, 12, &[0xff, 0xff, 0xff, 0xff, 0x0f]));
}

#[test]
fn produce_v9_compact_topic_array_claim() {
    // transactional_id null, acks -1, timeout 1000, topic_data 2^32 - 2.
    let body = [
        0x00, 0xff, 0xff, 0, 0, 0x03, 0xe8, 0xff, 0xff, 0xff, 0xff, 0x0f,
    ];
    assert_body_error(frame(ApiKey::Produce, 9, &body));
}

#[test]
fn nested_claims_hold_two_huge_reservations_at_once() {
    // Produce v3: topic_data claims 2^31 - 1 topics; the first topic "t"
    // claims 2^31 - 1 partitions; then the frame ends.
    let body = [
        0xff, 0xff, // transactional_id null
        0xff, 0xff, // acks -1
        0, 0, 0x03, 0xe8, // timeout
        0x7f, 0xff, 0xff, 0xff, // topic_data
        0, 1, b't', // name
        0x7f, 0xff, 0xff, 0xff, // partition_data
    ];
    assert_body_error(frame(ApiKey::Produce, 3, &body));
}

#[test]
fn nested_compact_claims_in_flexible_create_topics() {
    // CreateTopics v5: one topic "t" whose assignments claim 2^32 - 2 entries.
    let body = [
        0x02, // topics: 1
        0x02, b't', // name
        0xff, 0xff, 0xff, 0xff, // num_partitions -1
        0xff, 0xff, // replication_factor -1
        0xff, 0xff, 0xff, 0xff, 0x0f, // assignments
    ];
    assert_body_error(frame(ApiKey::CreateTopics, 5, &body));
}

#[test]
fn concurrent_hostile_claims_on_many_threads() {
    let threads: Vec<_> = (0..8)
        .map(|_| {
            std::thread::spawn(|| {
                for _ in 0..50 {
                    assert_body_error(frame(ApiKey::Metadata, 1, &[0x7f, 0xff, 0xff, 0xff]));
                    assert_body_error(frame(ApiKey::Metadata, 12, &[0xff, 0xff, 0xff, 0xff, 0x0f]));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn frames_shorter_than_the_prefix() {
    for len in 0..8 {
        let f = Bytes::from(vec![0u8; len]);
        assert!(
            matches!(decode(f), Err(RequestError::Truncated { len: l }) if l == len),
            "{len} bytes"
        );
    }
}

#[test]
fn prefix_only_frames_fail_in_the_header() {
    // 8 bytes: a valid prefix and no client id.
    let f = Bytes::from_static(&[0, 3, 0, 1, 0, 0, 0, 1]);
    assert!(matches!(decode(f), Err(RequestError::InvalidHeader { .. })));
}

#[test]
fn unknown_api_keys() {
    for key in [-1i16, 4, 5, 6, 7, 88, 89, 93, 1000, i16::MAX, i16::MIN] {
        let f = frame_with_raw_body(key, 0, 1, &[]);
        assert!(
            matches!(decode(f), Err(RequestError::UnknownApiKey { prefix }) if prefix.api_key == key),
            "key {key}"
        );
    }
}

#[test]
fn versions_outside_the_crate_range() {
    for (key, version) in [
        (ApiKey::Metadata, 14),
        (ApiKey::Produce, 2),
        (ApiKey::Produce, 14),
        (ApiKey::Fetch, 3),
        (ApiKey::Fetch, -1),
        (ApiKey::ApiVersions, 5),
    ] {
        let f = frame_with_raw_body(key as i16, version, 2, &[]);
        let err = decode(f).unwrap_err();
        assert!(
            matches!(err, RequestError::UnsupportedVersion { api_key, .. } if api_key == key),
            "{key:?} v{version}: {err:?}"
        );
        assert_eq!(
            err.is_unsupported_api_versions(),
            key == ApiKey::ApiVersions
        );
    }
}

#[test]
fn negative_lengths() {
    // Array count -2 (only -1 means null, and topics is nullable only from v1).
    assert_body_error(frame(ApiKey::Metadata, 1, &[0xff, 0xff, 0xff, 0xfe]));
    // Topic name length -5.
    assert_body_error(frame(ApiKey::Metadata, 1, &[0, 0, 0, 1, 0xff, 0xfb]));
    // A varint longer than 5 bytes.
    assert_body_error(frame(ApiKey::Metadata, 12, &[0xff; 8]));
    // Client id length -3 in the header.
    let f = Bytes::from_static(&[0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xfd]);
    assert!(matches!(decode(f), Err(RequestError::InvalidHeader { .. })));
}

#[test]
fn truncated_valid_requests() {
    for seed in common::seed_frames().into_iter().take(200) {
        for len in 8..seed.len() {
            let _ = decode(seed.slice(..len));
        }
    }
}
