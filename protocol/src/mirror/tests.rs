//! Round trips of every mirror message, and the decoder's refusals.

use proptest::prelude::*;

use super::admin::*;
use super::epochs::*;
use super::states::*;
use super::topics::*;
use super::{MirrorApiKey, MirrorMessage};
use crate::schema::testing::{check_round_trip, Arbitrary};
use crate::schema::wire::{DecodeErrorKind, RawTaggedField, UnknownTaggedFields};

round_trips! {
    create_mirror_request: CreateMirrorRequest,
    create_mirror_response: CreateMirrorResponse,
    delete_mirror_request: DeleteMirrorRequest,
    delete_mirror_response: DeleteMirrorResponse,
    list_mirrors_request: ListMirrorsRequest,
    list_mirrors_response: ListMirrorsResponse,
    describe_mirrors_request: DescribeMirrorsRequest,
    describe_mirrors_response: DescribeMirrorsResponse,
    add_topics_request: AddTopicsToMirrorRequest,
    add_topics_response: AddTopicsToMirrorResponse,
    remove_topics_request: RemoveTopicsFromMirrorRequest,
    remove_topics_response: RemoveTopicsFromMirrorResponse,
    pause_topics_request: PauseMirrorTopicsRequest,
    pause_topics_response: PauseMirrorTopicsResponse,
    resume_topics_request: ResumeMirrorTopicsRequest,
    resume_topics_response: ResumeMirrorTopicsResponse,
    read_states_request: ReadMirrorStatesRequest,
    read_states_response: ReadMirrorStatesResponse,
    write_states_request: WriteMirrorStatesRequest,
    write_states_response: WriteMirrorStatesResponse,
    last_mirrored_epochs_request: LastMirroredEpochsRequest,
    last_mirrored_epochs_response: LastMirroredEpochsResponse,
    bump_leader_epochs_request: BumpLeaderEpochsRequest,
    bump_leader_epochs_response: BumpLeaderEpochsResponse,
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = DescribeMirrorsResponse::decode(&bytes, 0);
        let _ = WriteMirrorStatesRequest::decode(&bytes, 0);
        let _ = BumpLeaderEpochsRequest::decode(&bytes, 0);
        let _ = CreateMirrorRequest::decode(&bytes, 0);
    }
}

#[test]
fn known_encoding_of_a_request() {
    // Written out by hand from Kafka's flexible encoding rules.
    let request = AddTopicsToMirrorRequest {
        mirror_name: "m1".into(),
        topics: vec![MirrorTopic {
            name: "orders".into(),
            ..Default::default()
        }],
        unknown_tagged_fields: UnknownTaggedFields(vec![RawTaggedField {
            tag: 130,
            data: vec![0xab],
        }]),
    };
    let expected = [
        3, b'm', b'1', // MirrorName: length 2 + 1
        2,    // Topics: 1 + 1
        7, b'o', b'r', b'd', b'e', b'r', b's', // Name
        0,    // the topic's tagged fields
        1,    // one tagged field
        0x82, 0x01, // tag 130
        1, 0xab, // size 1, data
    ];
    assert_eq!(&request.encode(0).unwrap()[..], &expected);
    assert_eq!(
        AddTopicsToMirrorRequest::decode(&expected, 0).unwrap(),
        request
    );
}

#[test]
fn discard_local_writes_is_tagged_field_zero() {
    let plain = AddTopicsToMirrorRequest {
        mirror_name: "m".into(),
        ..Default::default()
    };
    assert!(!plain.discard_local_writes());
    let confirmed = plain.clone().with_discard_local_writes(true);
    let bytes = confirmed.encode(0).unwrap();
    // MirrorName, empty Topics, then one tagged field: tag 0, size 1, true.
    assert_eq!(&bytes[..], &[2, b'm', 1, 1, 0, 1, 1]);
    let decoded = AddTopicsToMirrorRequest::decode(&bytes, 0).unwrap();
    assert!(decoded.discard_local_writes());
    assert!(!decoded
        .with_discard_local_writes(false)
        .discard_local_writes());
}

#[test]
fn describe_tagged_fields_round_trip_in_tag_order() {
    let plain = DescribeMirrorsRequest::default();
    assert!(!plain.leader_only());
    let leader_only = plain.with_leader_only(true);
    // Null MirrorNames, then one tagged field: tag 0, size 1, true.
    let bytes = leader_only.encode(0).unwrap();
    assert_eq!(&bytes[..], &[0, 1, 0, 1, 1]);
    assert!(DescribeMirrorsRequest::decode(&bytes, 0)
        .unwrap()
        .leader_only());

    let partition = DescribedMirrorPartition::default();
    assert_eq!(partition.source_offset_age_ms(), -1);
    let mut aged = partition.with_source_offset_age_ms(1_500);
    aged.unknown_tagged_fields.set(7, Some(vec![9]));
    let aged = aged.with_source_offset_age_ms(2_500);
    let tags: Vec<u32> = aged.unknown_tagged_fields.0.iter().map(|f| f.tag).collect();
    assert_eq!(tags, [0, 7], "replacing a field keeps tag order");
    assert_eq!(aged.source_offset_age_ms(), 2_500);
    assert_eq!(
        aged.with_source_offset_age_ms(-1).source_offset_age_ms(),
        -1
    );

    let plan = DescribeMirrorsRequest::default().with_failover_plan(true);
    assert!(!plan.leader_only());
    assert!(DescribeMirrorsRequest::decode(&plan.encode(0).unwrap(), 0)
        .unwrap()
        .failover_plan());
    let summary = FailoverSummary {
        open_transactions_policy: "abort".into(),
        open_transactions: vec![OpenTransactionSummary {
            producer_id: 7,
            first_offset: 120,
            idle_ms: 30_000,
            ..Default::default()
        }],
        last_mirrored_epoch: 4,
        ..Default::default()
    };
    let stopped = DescribedMirrorPartition::default().with_failover(Some(&summary));
    let response = DescribeMirrorsResponse {
        mirrors: vec![DescribedMirror {
            topics: vec![DescribedMirrorTopic {
                partitions: vec![stopped.clone()],
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let decoded = DescribeMirrorsResponse::decode(&response.encode(0).unwrap(), 0).unwrap();
    assert_eq!(
        decoded.mirrors[0].topics[0].partitions[0].failover(),
        Some(summary)
    );
    assert_eq!(stopped.with_failover(None).failover(), None);
}

#[test]
fn schema_defaults_follow_kafkas_conventions() {
    let state = ReadMirrorStatesPartitionResult::default();
    assert_eq!(
        (state.state, state.previous_state),
        (UNKNOWN_STATE, UNKNOWN_STATE)
    );
    assert_eq!(
        (state.leader_epoch, state.last_mirrored_epoch),
        (NO_EPOCH, NO_EPOCH)
    );
    assert_eq!(
        WriteMirrorStatesPartition::default().last_mirrored_epoch,
        NO_EPOCH
    );
    assert_eq!(DescribedMirrorPartition::default().source_offset, -1);
    assert_eq!(BumpLeaderEpochsRequest::default().broker_epoch, -1);
}

#[test]
fn unsupported_versions_are_refused_both_ways() {
    let request = DeleteMirrorRequest::default();
    assert!(request.encode(1).is_err());
    let err = DeleteMirrorRequest::decode(&[1, 0], 1).unwrap_err();
    assert!(matches!(
        err.kind,
        DecodeErrorKind::UnsupportedVersion { version: 1, .. }
    ));
}

#[test]
fn null_in_a_non_nullable_field_names_the_field() {
    // MirrorName null (0), then an empty topic list and no tagged fields.
    let err = PauseMirrorTopicsRequest::decode(&[0, 1, 0], 0).unwrap_err();
    assert_eq!(err.kind, DecodeErrorKind::UnexpectedNull("string"));
    assert_eq!(err.field, Some("PauseMirrorTopicsRequest.mirror_name"));
}

#[test]
fn tagged_fields_out_of_order_are_refused() {
    // DeleteMirrorRequest "m", then tags 5 and 5.
    let body = [2, b'm', 2, 5, 0, 5, 0];
    let err = DeleteMirrorRequest::decode(&body, 0).unwrap_err();
    assert_eq!(
        err.kind,
        DecodeErrorKind::TagOutOfOrder {
            tag: 5,
            previous: 5
        }
    );
    let unsorted = DeleteMirrorRequest {
        mirror_name: "m".into(),
        unknown_tagged_fields: UnknownTaggedFields(vec![
            RawTaggedField {
                tag: 9,
                data: vec![],
            },
            RawTaggedField {
                tag: 2,
                data: vec![],
            },
        ]),
    };
    assert!(unsorted.encode(0).is_err());
}

#[test]
fn over_long_varints_are_refused() {
    // A 5-byte varint whose last byte carries more than 4 bits.
    let err = DeleteMirrorRequest::decode(&[0xff, 0xff, 0xff, 0xff, 0x1f], 0).unwrap_err();
    assert_eq!(err.kind, DecodeErrorKind::VarintTooLong);
}

#[test]
fn invalid_utf8_is_refused() {
    let err = DeleteMirrorRequest::decode(&[2, 0xff, 0], 0).unwrap_err();
    assert_eq!(err.kind, DecodeErrorKind::InvalidUtf8);
}

#[test]
fn api_keys_are_the_prototypes() {
    let keys: Vec<i16> = MirrorApiKey::ALL.iter().map(|k| k.as_i16()).collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (95..=106).collect::<Vec<_>>());
    assert_eq!(
        MirrorApiKey::from_i16(97),
        Some(MirrorApiKey::LastMirroredEpochs)
    );
    assert_eq!(MirrorApiKey::from_i16(93), None);
    assert_eq!(CreateMirrorRequest::API_KEY, MirrorApiKey::CreateMirror);
    assert_eq!(BumpLeaderEpochsResponse::API_KEY.as_i16(), 105);
}
