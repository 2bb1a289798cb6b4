//! The topics a consumer subscribes to, read from its JoinGroup metadata
//! (ConsumerProtocolSubscription). Like Kafka, only the version-0 prefix is
//! read (`version int16, topics [string]`), which every later version keeps,
//! so future subscription versions parse too.

use std::collections::HashSet;

use super::codec::{DecodeError, DecodeResult, Reader};

/// The `protocol_type` of consumers using the classic protocol.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

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
    use crate::group::codec::Writer;

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
}
