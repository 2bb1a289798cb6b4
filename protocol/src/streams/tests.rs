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
    heartbeat_response_v1: StreamsGroupHeartbeatResponse; at version 1,
    describe_request: StreamsGroupDescribeRequest,
    describe_request_v1: StreamsGroupDescribeRequest; at version 1,
    describe_response: StreamsGroupDescribeResponse,
    describe_response_v1: StreamsGroupDescribeResponse; at version 1,
    topology_description_update: topology_description::StreamsGroupTopologyDescriptionUpdateRequest,
    topology_description_update_response: topology_description::StreamsGroupTopologyDescriptionUpdateResponse,
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
fn versions_past_those_served_are_refused() {
    let request = StreamsGroupDescribeRequest::default();
    assert!(request.encode(2).is_err());
    assert!(StreamsGroupDescribeRequest::decode(&[1, 0, 0], 2).is_err());
    let update = topology_description::StreamsGroupTopologyDescriptionUpdateRequest::default();
    assert!(update.encode(1).is_err());
    assert_eq!(
        StreamsApiKey::from_i16(88),
        Some(StreamsApiKey::StreamsGroupHeartbeat)
    );
    assert_eq!(
        StreamsApiKey::from_i16(93),
        Some(StreamsApiKey::StreamsGroupTopologyDescriptionUpdate)
    );
    assert_eq!(StreamsApiKey::from_i16(90), None);
}

/// The heartbeat response per version, written by hand from Kafka 4.4's
/// StreamsGroupHeartbeatResponse.json: v0 has the lag as an int32 after the
/// heartbeat interval; v1 has it as an int64 after the task offset
/// interval, and TopologyDescriptionRequired after the warm-up tasks.
#[test]
fn the_heartbeat_response_is_laid_out_per_version() {
    let response = StreamsGroupHeartbeatResponse {
        member_id: "m".into(),
        heartbeat_interval_ms: 5,
        acceptable_recovery_lag_legacy: 7,
        task_offset_interval_ms: 9,
        acceptable_recovery_lag: 10_000_000_000,
        topology_description_required: true,
        ..Default::default()
    };
    #[rustfmt::skip]
    let v0: &[u8] = &[
        0, 0, 0, 0, 0, 0, 0,    // throttle, error code, null message
        2, b'm', 0, 0, 0, 0,    // member id, member epoch
        0, 0, 0, 5,             // heartbeat interval
        0, 0, 0, 7,             // AcceptableRecoveryLagLegacy
        0, 0, 0, 9,             // task offset interval
        0, 0, 0, 0,             // status, active, standby, warm-up: null
        0, 0, 0, 0, 0,          // endpoint epoch, partitions by endpoint: null
        0,                      // tagged fields
    ];
    assert_eq!(&response.encode(0).unwrap()[..], v0);
    #[rustfmt::skip]
    let v1: &[u8] = &[
        0, 0, 0, 0, 0, 0, 0,
        2, b'm', 0, 0, 0, 0,
        0, 0, 0, 5,
        0, 0, 0, 9,                         // task offset interval
        0, 0, 0, 2, 0x54, 0x0b, 0xe4, 0,    // AcceptableRecoveryLag: 10^10
        0, 0, 0, 0,
        1,                                  // TopologyDescriptionRequired
        0, 0, 0, 0, 0,
        0,
    ];
    assert_eq!(&response.encode(1).unwrap()[..], v1);
    let back = StreamsGroupHeartbeatResponse::decode(v1, 1).unwrap();
    assert_eq!(
        (
            back.acceptable_recovery_lag,
            back.acceptable_recovery_lag_legacy
        ),
        (10_000_000_000, 0)
    );
}
