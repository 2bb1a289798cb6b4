//! Round trips of the streams-group messages, and their bytes checked by
//! hand against Kafka's encoding of nullable structs.

use proptest::prelude::*;

use super::describe::*;
use super::heartbeat::*;
use super::*;
use crate::schema::testing::{check_round_trip, Arbitrary};

round_trips! {
    heartbeat_request: StreamsGroupHeartbeatRequest,
    heartbeat_response: StreamsGroupHeartbeatResponse,
    describe_request: StreamsGroupDescribeRequest,
    describe_response: StreamsGroupDescribeResponse,
    group_metadata_value: records::StreamsGroupMetadataValue,
    member_metadata_value: records::StreamsGroupMemberMetadataValue,
    current_assignment_value: records::StreamsGroupCurrentMemberAssignmentValue,
}

#[test]
fn validated_topology_epoch_is_tag_0_and_absent_at_its_default() {
    let mut value = records::StreamsGroupMetadataValue::default();
    assert_eq!(value.validated_topology_epoch(), -1);
    value.set_validated_topology_epoch(4);
    assert_eq!(value.validated_topology_epoch(), 4);
    // Epoch 0, hash 0, one tagged field: tag 0, 4 bytes, the epoch.
    let bytes = crate::schema::encode_body(&value, "v", 0..=0, 0).unwrap();
    assert_eq!(&bytes[12..], &[1, 0, 4, 0, 0, 0, 4]);
    value.set_validated_topology_epoch(-1);
    assert!(value.unknown_tagged_fields.is_empty());
}

#[test]
fn a_null_topology_is_one_minus_one_byte_and_a_present_one_is_marked_1() {
    let request = StreamsGroupHeartbeatRequest {
        group_id: "g".into(),
        member_id: "m".into(),
        ..Default::default()
    };
    let bytes = request.encode(0).unwrap();
    #[rustfmt::skip]
    let expected: &[u8] = &[
        2, b'g', 2, b'm',       // group, member
        0, 0, 0, 0, 0, 0, 0, 0, // member epoch, endpoint epoch
        0, 0,                   // instance and rack: null strings
        0xff, 0xff, 0xff, 0xff, // rebalance timeout -1
        0xff,                   // topology: null struct
        0, 0, 0, 0,             // active, standby, warm-up tasks, process: null
        0xff,                   // user endpoint: null struct
        0, 0, 0,                // client tags, task offsets, end offsets: null
        0,                      // shutdown
        0,                      // tagged fields
    ];
    assert_eq!(&bytes[..], expected);

    let with_topology = StreamsGroupHeartbeatRequest {
        topology: Some(Topology {
            epoch: 3,
            ..Default::default()
        }),
        ..request
    };
    let bytes = with_topology.encode(0).unwrap();
    // Marker 1, epoch 3, no subtopologies, no tagged fields.
    assert_eq!(&bytes[18..25], &[1, 0, 0, 0, 3, 1, 0]);
    assert_eq!(
        StreamsGroupHeartbeatRequest::decode(&bytes, 0).unwrap(),
        with_topology
    );
}

#[test]
fn only_version_0_is_served() {
    let request = StreamsGroupDescribeRequest::default();
    assert!(request.encode(1).is_err());
    assert!(StreamsGroupDescribeRequest::decode(&[1, 0, 0], 1).is_err());
    assert_eq!(
        StreamsApiKey::from_i16(88),
        Some(StreamsApiKey::StreamsGroupHeartbeat)
    );
    assert_eq!(StreamsApiKey::from_i16(90), None);
}
