//! DescribeShareGroupOffsets v1 (Kafka 4.4, KIP-1226): each partition's
//! share-partition lag, the records not yet delivered to completion. The
//! request is laid out as v0's; the response is v0's with Lag after each
//! partition's LeaderEpoch, which kafka-protocol 0.18 does not know, so the
//! broker's answer (kafka-protocol's v0 struct) is written here with the
//! lags it computed.

use bytes::BytesMut;
use kafka_protocol::messages::DescribeShareGroupOffsetsResponse;
use uuid::Uuid;

use crate::schema::wire::{EncodeError, Writer};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::wire::Reader;
    use kafka_protocol::messages::describe_share_group_offsets_response::{
        DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
        DescribeShareGroupOffsetsResponseTopic,
    };
    use kafka_protocol::messages::{GroupId, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};

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
