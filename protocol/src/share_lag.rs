//! KIP-1226's share-partition lag, in the versions Kafka 4.4 added and
//! kafka-protocol 0.18 does not know:
//!
//! - DescribeShareGroupOffsets v1: each partition's lag, the records not
//!   yet delivered to completion. The request is v0's; the response is v0's
//!   with Lag after each partition's LeaderEpoch, written here from the
//!   broker's answer (kafka-protocol's v0 struct) and the lags it computed.
//! - WriteShareGroupState v1: each partition's DeliveryCompleteCount after
//!   its StartOffset. The share coordinator counts from the state batches
//!   itself, so the field is dropped and the rest decoded as v0
//!   ([`write_state_as_v0`]); the response is v0's.
//! - ReadShareGroupStateSummary v1: the request is v0's; the response has
//!   each partition's DeliveryCompleteCount after its StartOffset
//!   ([`encode_state_summary_v1`]).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    DescribeShareGroupOffsetsResponse, ReadShareGroupStateSummaryResponse,
};
use uuid::Uuid;

use crate::schema::wire::{DecodeError, EncodeError, Writer};
use crate::schema::{decode_body, encode_body};

/// The version Lag arrived in.
pub const V1: i16 = 1;

/// Kafka's "unknown" lag (shown as `-` by kafka-share-groups.sh).
pub const UNKNOWN_LAG: i64 = -1;

/// A DescribeShareGroupOffsets v1 response body: `response` with the lag of
/// each (group, topic id, partition) from `lag`.
pub fn encode_describe_offsets_v1(
    response: &DescribeShareGroupOffsetsResponse,
    lag: impl Fn(&str, &Uuid, i32) -> i64,
) -> Result<BytesMut, EncodeError> {
    let mut w = Writer::new();
    w.i32(response.throttle_time_ms);
    w.compact_nullable_array(Some(&response.groups), |w, g| {
        w.compact_nullable_string(Some(g.group_id.as_str()))?;
        w.compact_nullable_array(Some(&g.topics), |w, t| {
            w.compact_nullable_string(Some(t.topic_name.as_str()))?;
            w.uuid(&t.topic_id);
            w.compact_nullable_array(Some(&t.partitions), |w, p| {
                w.i32(p.partition_index);
                w.i64(p.start_offset);
                w.i32(p.leader_epoch);
                w.i64(lag(g.group_id.as_str(), &t.topic_id, p.partition_index));
                w.i16(p.error_code);
                w.compact_nullable_string(p.error_message.as_deref())?;
                w.unsigned_varint(0);
                Ok(())
            })?;
            w.unsigned_varint(0);
            Ok(())
        })?;
        w.i16(g.error_code);
        w.compact_nullable_string(g.error_message.as_deref())?;
        w.unsigned_varint(0);
        Ok(())
    })?;
    w.unsigned_varint(0);
    Ok(w.into_bytes())
}

wire_struct! {
    pub struct WriteStateBatch {
        pub first_offset: i64,
        pub last_offset: i64,
        pub delivery_state: i8,
        pub delivery_count: i16,
    }
}

wire_struct! {
    pub struct WriteStatePartition {
        pub partition: i32,
        pub state_epoch: i32,
        pub leader_epoch: i32,
        pub start_offset: i64,
        pub delivery_complete_count: i32 = -1; versions 1..=32767,
        pub state_batches: Vec<WriteStateBatch>,
    }
}

wire_struct! {
    pub struct WriteStateTopic {
        pub topic_id: Uuid,
        pub partitions: Vec<WriteStatePartition>,
    }
}

wire_struct! {
    /// WriteShareGroupStateRequest.json's body.
    pub struct WriteShareGroupStateBody {
        pub group_id: String,
        pub topics: Vec<WriteStateTopic>,
    }
}

/// A WriteShareGroupState v1 request body in v0's layout, for
/// kafka-protocol to decode.
pub fn write_state_as_v0(body: &[u8]) -> Result<Bytes, DecodeError> {
    let name = "WriteShareGroupStateRequest";
    let request: WriteShareGroupStateBody = decode_body(body, name, V1..=V1, V1)?;
    let v0 = encode_body(&request, name, 0..=0, 0)
        .expect("a decoded request encodes: its lengths were read from the wire");
    Ok(v0.freeze())
}

wire_struct! {
    pub struct StateSummaryPartition {
        pub partition: i32,
        pub error_code: i16,
        pub error_message: Option<String>,
        pub state_epoch: i32,
        pub leader_epoch: i32,
        pub start_offset: i64,
        pub delivery_complete_count: i32 = -1; versions 1..=32767,
    }
}

wire_struct! {
    pub struct StateSummaryResult {
        pub topic_id: Uuid,
        pub partitions: Vec<StateSummaryPartition>,
    }
}

wire_struct! {
    /// ReadShareGroupStateSummaryResponse.json's body.
    pub struct StateSummaryResponseBody {
        pub results: Vec<StateSummaryResult>,
    }
}

/// A ReadShareGroupStateSummary v1 response body: `response` with the
/// delivery complete count of each (topic id, partition) from `count`.
pub fn encode_state_summary_v1(
    response: &ReadShareGroupStateSummaryResponse,
    count: impl Fn(&Uuid, i32) -> i32,
) -> Result<BytesMut, EncodeError> {
    let body = StateSummaryResponseBody {
        results: response
            .results
            .iter()
            .map(|t| StateSummaryResult {
                topic_id: t.topic_id,
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| StateSummaryPartition {
                        partition: p.partition,
                        error_code: p.error_code,
                        error_message: p.error_message.as_ref().map(|m| m.to_string()),
                        state_epoch: p.state_epoch,
                        leader_epoch: p.leader_epoch,
                        start_offset: p.start_offset,
                        delivery_complete_count: count(&t.topic_id, p.partition),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    encode_body(&body, "ReadShareGroupStateSummaryResponse", V1..=V1, V1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::testing::{check_round_trip, Arbitrary};
    use crate::schema::wire::Reader;
    use kafka_protocol::messages::describe_share_group_offsets_response::{
        DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
        DescribeShareGroupOffsetsResponseTopic,
    };
    use kafka_protocol::messages::{GroupId, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};
    use proptest::prelude::*;

    round_trips! {
        write_state_v0: WriteShareGroupStateBody,
        write_state_v1: WriteShareGroupStateBody; at version 1,
        state_summary_v1: StateSummaryResponseBody; at version 1,
    }

    /// The v0 schemas here agree with kafka-protocol's: its encoding of a
    /// request decodes here, and a v1 body becomes that same v0 body.
    #[test]
    fn a_v1_state_write_is_a_v0_write_without_the_count() {
        use kafka_protocol::messages::write_share_group_state_request::{
            PartitionData, StateBatch, WriteStateData,
        };
        use kafka_protocol::messages::WriteShareGroupStateRequest;
        use kafka_protocol::protocol::{Decodable, Encodable};
        let topic = Uuid::from_u128(9);
        let request = WriteShareGroupStateRequest::default()
            .with_group_id(StrBytes::from_static_str("g"))
            .with_topics(vec![WriteStateData::default()
                .with_topic_id(topic)
                .with_partitions(vec![PartitionData::default()
                    .with_partition(2)
                    .with_state_epoch(1)
                    .with_leader_epoch(3)
                    .with_start_offset(40)
                    .with_state_batches(vec![StateBatch::default()
                        .with_first_offset(40)
                        .with_last_offset(44)
                        .with_delivery_state(3)
                        .with_delivery_count(2)])])]);
        let mut v0 = BytesMut::new();
        request.encode(&mut v0, 0).unwrap();
        let mut body: WriteShareGroupStateBody = decode_body(&v0, "w", 0..=0, 0).unwrap();
        body.topics[0].partitions[0].delivery_complete_count = 5;
        let v1 = encode_body(&body, "w", 1..=1, 1).unwrap();
        assert_eq!(v1.len(), v0.len() + 4, "the count, after StartOffset");
        let back = write_state_as_v0(&v1).unwrap();
        assert_eq!(&back[..], &v0[..]);
        let decoded = WriteShareGroupStateRequest::decode(&mut back.clone(), 0).unwrap();
        assert_eq!(decoded, request);
        assert!(write_state_as_v0(&v1[..v1.len() - 1]).is_err(), "truncated");
    }

    #[test]
    fn the_v1_summary_is_v0_with_each_partitions_count_after_its_start() {
        use kafka_protocol::messages::read_share_group_state_summary_response::{
            PartitionResult, ReadStateSummaryResult,
        };
        let topic = Uuid::from_u128(4);
        let response = ReadShareGroupStateSummaryResponse::default().with_results(vec![
            ReadStateSummaryResult::default()
                .with_topic_id(topic)
                .with_partitions(vec![PartitionResult::default()
                    .with_partition(1)
                    .with_state_epoch(2)
                    .with_leader_epoch(3)
                    .with_start_offset(50)]),
        ]);
        let v1 = encode_state_summary_v1(&response, |t, p| {
            assert_eq!((*t, p), (topic, 1));
            7
        })
        .unwrap();
        let mut v0 = BytesMut::new();
        response.encode(&mut v0, 0).unwrap();
        assert_eq!(v1.len(), v0.len() + 4);
        let body: StateSummaryResponseBody = decode_body(&v1, "s", 1..=1, 1).unwrap();
        let p = &body.results[0].partitions[0];
        assert_eq!((p.start_offset, p.delivery_complete_count), (50, 7));
        // v0's bytes up to the start offset, then the count, then the rest.
        let at = v1.len() - 1 - 1 - 1 - 4; // tags (partition, result, body), count
        assert_eq!(&v1[..at], &v0[..at]);
        assert_eq!(&v1[at..at + 4], &7i32.to_be_bytes());
    }

    /// Read back field by field in Kafka 4.4's
    /// DescribeShareGroupOffsetsResponse.json order: v0's bytes with Lag
    /// inserted after LeaderEpoch.
    #[test]
    fn the_v1_answer_is_v0_with_each_partitions_lag_after_its_leader_epoch() {
        let topic = Uuid::from_u128(7);
        let response = DescribeShareGroupOffsetsResponse::default().with_groups(vec![
            DescribeShareGroupOffsetsResponseGroup::default()
                .with_group_id(GroupId(StrBytes::from_static_str("g")))
                .with_topics(vec![DescribeShareGroupOffsetsResponseTopic::default()
                    .with_topic_name(TopicName(StrBytes::from_static_str("t")))
                    .with_topic_id(topic)
                    .with_partitions(vec![
                        DescribeShareGroupOffsetsResponsePartition::default()
                            .with_partition_index(3)
                            .with_start_offset(40)
                            .with_leader_epoch(-1),
                    ])]),
        ]);
        let v1 = encode_describe_offsets_v1(&response, |g, t, p| {
            assert_eq!((g, *t, p), ("g", topic, 3));
            12
        })
        .unwrap();
        let mut v0 = BytesMut::new();
        response.encode(&mut v0, 0).unwrap();
        assert_eq!(v1.len(), v0.len() + 8);
        let mut r = Reader::new(&v1);
        assert_eq!(r.i32().unwrap(), 0);
        assert_eq!(r.unsigned_varint().unwrap(), 2);
        assert_eq!(r.compact_string().unwrap(), "g");
        assert_eq!(r.unsigned_varint().unwrap(), 2);
        assert_eq!(r.compact_string().unwrap(), "t");
        assert_eq!(r.uuid().unwrap(), topic);
        assert_eq!(r.unsigned_varint().unwrap(), 2);
        assert_eq!(
            (r.i32().unwrap(), r.i64().unwrap(), r.i32().unwrap()),
            (3, 40, -1)
        );
        assert_eq!(r.i64().unwrap(), 12, "Lag");
        // The rest is v0's, byte for byte.
        let lag_end = v1.len() - r.remaining();
        assert_eq!(&v1[..lag_end - 8], &v0[..lag_end - 8]);
        assert_eq!(&v1[lag_end..], &v0[lag_end - 8..]);
    }
}
