//! The consumer protocol embedded in classic JoinGroup and SyncGroup
//! (ConsumerProtocolSubscription and ConsumerProtocolAssignment, versions
//! 0-3, non-flexible, each prefixed with its `int16` version). A newer
//! version is read with the latest layout, as Kafka does: versions only add
//! fields at the end.

use std::collections::HashSet;

use bytes::Bytes;

use super::codec::{DecodeError, DecodeResult, Reader, Writer};

/// The `protocol_type` of consumers using the classic protocol.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// The newest embedded protocol version Ottla knows the layout of.
const LATEST_VERSION: i16 = 3;

/// Partitions by topic name, as the embedded protocol lists them.
pub type NamedPartitions = Vec<(String, Vec<i32>)>;

/// What a classic member's JoinGroup metadata says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subscription {
    pub version: i16,
    pub topics: Vec<String>,
    /// v1+: what the member owns as it joins (cooperative members keep
    /// partitions across a rebalance; eager ones report none).
    pub owned: NamedPartitions,
    /// v3+.
    pub rack: Option<String>,
}

pub fn parse_subscription(metadata: &[u8]) -> DecodeResult<Subscription> {
    let mut r = Reader::new(metadata);
    let version = r.i16()?;
    if version < 0 {
        return Err(DecodeError("negative consumer protocol version"));
    }
    let layout = version.min(LATEST_VERSION);
    let topics = (0..r.array_len()?)
        .map(|_| r.string())
        .collect::<DecodeResult<_>>()?;
    r.nullable_bytes()?; // user data, the client assignor's own
    let mut subscription = Subscription {
        version,
        topics,
        ..Subscription::default()
    };
    if layout >= 1 {
        subscription.owned = read_partitions(&mut r)?;
    }
    if layout >= 2 {
        r.i32()?; // generation id
    }
    if layout >= 3 {
        subscription.rack = r.nullable_string()?;
    }
    Ok(subscription)
}

/// The version of a member's embedded protocol: the first two bytes.
pub fn protocol_version(metadata: &[u8]) -> DecodeResult<i16> {
    Reader::new(metadata).i16()
}

/// A ConsumerProtocolAssignment at `version` (held to 0-3), no user data.
pub fn encode_assignment(version: i16, partitions: &NamedPartitions) -> Bytes {
    let mut w = Writer::default();
    w.i16(version.clamp(0, LATEST_VERSION))
        .i32(partitions.len() as i32);
    for (topic, ps) in partitions {
        w.string(topic).i32(ps.len() as i32);
        for &p in ps {
            w.i32(p);
        }
    }
    w.nullable_bytes(None);
    // Topic names are at most 249 bytes: nothing can be too long.
    Bytes::from(w.finish().unwrap_or_default())
}

/// The partitions of a stored classic assignment; an empty one (a member
/// that has not been assigned yet) has none.
pub fn parse_assignment(assignment: &[u8]) -> DecodeResult<NamedPartitions> {
    if assignment.is_empty() {
        return Ok(Vec::new());
    }
    let mut r = Reader::new(assignment);
    if r.i16()? < 0 {
        return Err(DecodeError("negative consumer protocol version"));
    }
    read_partitions(&mut r)
}

fn read_partitions(r: &mut Reader<'_>) -> DecodeResult<NamedPartitions> {
    (0..r.array_len()?)
        .map(|_| {
            let topic = r.string()?;
            let partitions = (0..r.array_len()?)
                .map(|_| r.i32())
                .collect::<DecodeResult<_>>()?;
            Ok((topic, partitions))
        })
        .collect()
}

pub fn subscribed_topics(metadata: &[u8]) -> DecodeResult<HashSet<String>> {
    let mut r = Reader::new(metadata);
    if r.i16()? < 0 {
        return Err(DecodeError("negative consumer protocol version"));
    }
    let count = r.array_len()?;
    let mut topics = HashSet::with_capacity(count.min(1024));
    for _ in 0..count {
        topics.insert(r.string()?);
    }
    Ok(topics)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Writer;

    #[test]
    fn reads_topics_of_any_version() {
        for version in [0i16, 1, 3] {
            let mut w = Writer::default();
            w.i16(version)
                .i32(2)
                .string("a")
                .string("b")
                .bytes(b"user-data");
            let topics = subscribed_topics(&w.finish().unwrap()).unwrap();
            assert_eq!(topics, HashSet::from(["a".to_string(), "b".to_string()]));
        }
        assert!(subscribed_topics(&[0]).is_err());
        assert!(subscribed_topics(&[0xff, 0xff, 0, 0, 0, 0]).is_err());
    }

    /// A subscription as the Java client writes it at `version`.
    fn subscription(version: i16) -> Vec<u8> {
        let mut w = Writer::default();
        w.i16(version).i32(1).string("orders").bytes(b"sticky");
        if version >= 1 {
            w.i32(1).string("orders").i32(2).i32(0).i32(3);
        }
        if version >= 2 {
            w.i32(7);
        }
        if version >= 3 {
            w.nullable_string(Some("rack-a"));
        }
        w.finish().unwrap()
    }

    #[test]
    fn reads_owned_partitions_and_rack_by_version() {
        let v0 = parse_subscription(&subscription(0)).unwrap();
        assert_eq!(v0.topics, ["orders"]);
        assert!(v0.owned.is_empty());
        let v3 = parse_subscription(&subscription(3)).unwrap();
        assert_eq!(v3.owned, vec![("orders".to_string(), vec![0, 3])]);
        assert_eq!(v3.rack.as_deref(), Some("rack-a"));
        // A newer version is read with the version-3 layout.
        let mut v9 = subscription(3);
        v9[1] = 9;
        let v9 = parse_subscription(&v9).unwrap();
        assert_eq!((v9.version, v9.rack.as_deref()), (9, Some("rack-a")));
        // A version that promises owned partitions must carry them.
        let mut short = subscription(0);
        short[1] = 1;
        assert!(parse_subscription(&short).is_err());
    }

    #[test]
    fn assignments_round_trip_at_the_members_version() {
        let partitions = vec![("a".to_string(), vec![0, 2]), ("b".to_string(), vec![1])];
        for version in [0i16, 3, 7] {
            let bytes = encode_assignment(version, &partitions);
            assert_eq!(protocol_version(&bytes).unwrap(), version.min(3));
            assert_eq!(parse_assignment(&bytes).unwrap(), partitions);
        }
        assert_eq!(parse_assignment(&[]).unwrap(), Vec::new());
        assert!(parse_assignment(&[0, 0, 0, 0, 0, 9]).is_err());
    }
}
