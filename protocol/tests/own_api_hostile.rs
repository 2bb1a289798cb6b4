//! Hostile bodies of the own-codec APIs (mirror and streams-group): huge
//! claimed lengths must fail cleanly without any allocation larger than the
//! body itself. This binary runs on a counting allocator (not
//! `NoReserveAllocator`): the schema codec must not need that crutch.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use ottla_protocol::mirror::admin::{DescribeMirrorsResponse, ListMirrorsResponse};
use ottla_protocol::mirror::epochs::LastMirroredEpochsRequest;
use ottla_protocol::mirror::states::{WriteMirrorStatesRequest, WriteMirrorStatesTopic};
use ottla_protocol::mirror::topics::AddTopicsToMirrorRequest;
use ottla_protocol::mirror::MirrorMessage;
use ottla_protocol::schema::wire::{DecodeError, DecodeErrorKind};
use ottla_protocol::streams::heartbeat::StreamsGroupHeartbeatRequest;
use ottla_protocol::streams::{StreamsMessage, Subtopology, TopicInfo, Topology};

/// Records the largest single allocation made by the current thread.
struct LargestAllocation;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator unchanged; only observes sizes.
unsafe impl GlobalAlloc for LargestAllocation {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = LARGEST.try_with(|l| l.set(l.get().max(layout.size())));
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = LARGEST.try_with(|l| l.set(l.get().max(new_size)));
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOC: LargestAllocation = LargestAllocation;

/// Decodes `body` and returns the error and the largest allocation made.
fn decode_hostile<M: MirrorMessage + std::fmt::Debug>(body: &[u8]) -> (DecodeError, usize) {
    LARGEST.with(|l| l.set(0));
    let result = M::decode(body, 0);
    let largest = LARGEST.with(Cell::get);
    (result.expect_err("hostile body decoded"), largest)
}

/// Every allocation is bounded by the body, with room for small
/// per-element structs (the largest described here is under 200 bytes).
fn assert_bounded(largest: usize, body: &[u8]) {
    assert!(
        largest <= 256 * body.len().max(1),
        "allocated {largest} bytes for a {}-byte body",
        body.len()
    );
}

/// Unsigned varint 0xffffffff: a compact length of 2^32 - 2.
const HUGE_COMPACT_LENGTH: [u8; 5] = [0xff, 0xff, 0xff, 0xff, 0x0f];

#[test]
fn topic_array_claiming_2_pow_32_elements() {
    let mut body = vec![2, b'm'];
    body.extend_from_slice(&HUGE_COMPACT_LENGTH);
    let (err, largest) = decode_hostile::<AddTopicsToMirrorRequest>(&body);
    assert!(
        matches!(err.kind, DecodeErrorKind::Truncated { .. }),
        "{err}"
    );
    assert_eq!(err.field, Some("AddTopicsToMirrorRequest.topics"));
    assert_bounded(largest, &body);
}

#[test]
fn string_claiming_4_gib() {
    let (err, largest) = decode_hostile::<AddTopicsToMirrorRequest>(&HUGE_COMPACT_LENGTH);
    assert!(
        matches!(err.kind, DecodeErrorKind::Truncated { .. }),
        "{err}"
    );
    assert_bounded(largest, &HUGE_COMPACT_LENGTH);
}

#[test]
fn nested_claims_inside_a_valid_prefix() {
    // WriteMirrorStates: mirror "m", one topic (nil id) claiming 2^32 - 2
    // partitions.
    let mut body = vec![2, b'm', 2];
    body.extend_from_slice(&[0; 16]);
    body.extend_from_slice(&HUGE_COMPACT_LENGTH);
    let (err, largest) = decode_hostile::<WriteMirrorStatesRequest>(&body);
    assert_eq!(err.field, Some("WriteMirrorStatesTopic.partitions"));
    assert_bounded(largest, &body);
}

#[test]
fn array_claim_just_above_the_bytes_left() {
    // LastMirroredEpochs: 3 topics claimed, 2 bytes follow.
    let body = [4, 0, 0];
    let (err, largest) = decode_hostile::<LastMirroredEpochsRequest>(&body);
    assert!(
        matches!(err.kind, DecodeErrorKind::Truncated { .. }),
        "{err}"
    );
    assert_bounded(largest, &body);
}

#[test]
fn tagged_field_count_and_size_claims() {
    // ListMirrorsResponse: throttle, error, no mirrors, then 2^32 - 1 tagged
    // fields; then one tagged field claiming a 4 GiB payload.
    let mut many_fields = vec![0, 0, 0, 0, 0, 0, 1];
    many_fields.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    let (err, largest) = decode_hostile::<ListMirrorsResponse>(&many_fields);
    assert_eq!(err.field, Some("ListMirrorsResponse.tagged_fields"));
    assert_bounded(largest, &many_fields);

    let mut huge_payload = vec![0, 0, 0, 0, 0, 0, 1, 1, 0];
    huge_payload.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    let (err, largest) = decode_hostile::<ListMirrorsResponse>(&huge_payload);
    assert!(
        matches!(err.kind, DecodeErrorKind::Truncated { .. }),
        "{err}"
    );
    assert_bounded(largest, &huge_payload);
}

#[test]
fn every_byte_flip_of_a_deep_message_is_handled() {
    // A populated DescribeMirrors answer, then each byte replaced by 0xff:
    // decoding either succeeds or fails, with bounded allocations.
    let message = DescribeMirrorsResponse {
        mirrors: vec![ottla_protocol::mirror::admin::DescribedMirror {
            mirror_name: "m".into(),
            topics: vec![ottla_protocol::mirror::admin::DescribedMirrorTopic {
                name: "orders".into(),
                partitions: vec![Default::default(); 3],
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let bytes = message.encode(0).unwrap();
    for i in 0..bytes.len() {
        let mut hostile = bytes.to_vec();
        hostile[i] = 0xff;
        LARGEST.with(|l| l.set(0));
        let _ = DescribeMirrorsResponse::decode(&hostile, 0);
        assert_bounded(LARGEST.with(Cell::get), &hostile);
    }
}

#[test]
fn a_well_formed_message_still_decodes_under_the_counter() {
    let message = WriteMirrorStatesRequest {
        mirror_name: "m".into(),
        topics: vec![WriteMirrorStatesTopic::default()],
        ..Default::default()
    };
    let bytes = message.encode(0).unwrap();
    assert_eq!(
        WriteMirrorStatesRequest::decode(&bytes, 0).unwrap(),
        message
    );
}

#[test]
fn a_topology_claiming_2_pow_32_subtopologies() {
    // StreamsGroupHeartbeat: group "g", member "m", epochs, null instance
    // and rack, timeout, then a present topology (epoch 1) whose
    // subtopology array claims 2^32 - 2 elements.
    let mut body = vec![
        2, b'g', 2, b'm', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1,
    ];
    body.extend_from_slice(&HUGE_COMPACT_LENGTH);
    LARGEST.with(|l| l.set(0));
    let err = StreamsGroupHeartbeatRequest::decode(&body, 0).expect_err("hostile body decoded");
    assert_eq!(err.field, Some("Topology.subtopologies"));
    assert_bounded(LARGEST.with(Cell::get), &body);
}

#[test]
fn every_byte_flip_of_a_streams_heartbeat_is_handled() {
    let info = |name: &str| TopicInfo {
        name: name.into(),
        ..Default::default()
    };
    let message = StreamsGroupHeartbeatRequest {
        group_id: "app".into(),
        member_id: "m".into(),
        rebalance_timeout_ms: 30_000,
        topology: Some(Topology {
            epoch: 1,
            subtopologies: vec![Subtopology {
                subtopology_id: "0".into(),
                source_topics: vec!["in".into()],
                state_changelog_topics: vec![info("app-store-changelog")],
                repartition_source_topics: vec![info("app-rep")],
                ..Default::default()
            }],
            ..Default::default()
        }),
        active_tasks: Some(Vec::new()),
        standby_tasks: Some(Vec::new()),
        warmup_tasks: Some(Vec::new()),
        ..Default::default()
    };
    let bytes = message.encode(0).unwrap();
    assert_eq!(
        StreamsGroupHeartbeatRequest::decode(&bytes, 0).unwrap(),
        message
    );
    for i in 0..bytes.len() {
        let mut hostile = bytes.to_vec();
        hostile[i] = 0xff;
        LARGEST.with(|l| l.set(0));
        let _ = StreamsGroupHeartbeatRequest::decode(&hostile, 0);
        assert_bounded(LARGEST.with(Cell::get), &hostile);
    }
}
