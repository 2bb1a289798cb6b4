//! Share-partition lag (KIP-1226), which DescribeShareGroupOffsets v1
//! answers: of a partition's records up to its high watermark, those past
//! the group's start offset not yet delivered to completion (Kafka's
//! `end - start - delivery complete count`).

use std::collections::BTreeMap;
use std::sync::Arc;

use ottla_client::list_offsets::{
    list_offsets_request, listed_offsets, LATEST_TIMESTAMP, LIST_OFFSETS_VERSION,
};
use ottla_controller::MetadataImage;
use ottla_protocol::share_lag::UNKNOWN_LAG;
use ottla_storage::manager::TopicPartition;
use uuid::Uuid;

use super::share_persister::Summary;
use crate::blocking::blocking;
use crate::broker::Broker;

/// Each described (group, topic id, partition)'s lag.
pub type Lags = BTreeMap<(String, Uuid, i32), i64>;

/// The lag of a share partition whose state is `summary` and whose log
/// ends at `end`; unknown without either, or before its start is set.
pub(crate) fn lag(summary: Option<Summary>, end: Option<i64>) -> i64 {
    match (summary, end) {
        (Some(s), Some(end)) if s.start_offset >= 0 => {
            (end - s.start_offset - s.delivery_complete).max(0)
        }
        _ => UNKNOWN_LAG,
    }
}

/// The high watermark of each of `partitions`, from its leader: read here
/// for those led here, else one ListOffsets per leader broker. A
/// partition whose leader cannot say is left out.
pub(crate) async fn high_watermarks(
    broker: &Arc<Broker>,
    image: &MetadataImage,
    partitions: Vec<TopicPartition>,
) -> BTreeMap<TopicPartition, i64> {
    let mut by_leader: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
    for tp in partitions {
        let leader = image
            .topic_by_name(&tp.topic)
            .and_then(|t| t.partitions.get(&tp.partition))
            .map_or(-1, |p| p.leader);
        if leader >= 0 {
            by_leader.entry(leader).or_default().push(tp);
        }
    }
    let mut out = BTreeMap::new();
    for (leader, tps) in by_leader {
        if leader == broker.node_id() {
            let read = blocking(broker, move |b| {
                tps.into_iter()
                    .filter_map(|tp| {
                        let hw = b.replicas.partition(&tp)?.log.read().high_watermark();
                        Some((tp, hw))
                    })
                    .collect::<Vec<_>>()
            })
            .await;
            out.extend(read.unwrap_or_default());
            continue;
        }
        let asked: Vec<(String, i32)> =
            tps.into_iter().map(|tp| (tp.topic, tp.partition)).collect();
        let req = list_offsets_request(&asked, LATEST_TIMESTAMP);
        if let Ok(r) = broker
            .brokers
            .send(leader, LIST_OFFSETS_VERSION, &req)
            .await
        {
            out.extend(
                listed_offsets(&r)
                    .into_iter()
                    .map(|((topic, p), offset)| (TopicPartition::new(topic, p), offset)),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_is_what_is_past_the_start_and_not_done_with() {
        let summary = |start_offset, delivery_complete| {
            Some(Summary {
                start_offset,
                delivery_complete,
            })
        };
        assert_eq!(lag(summary(10, 3), Some(20)), 7);
        assert_eq!(lag(summary(20, 0), Some(20)), 0);
        assert_eq!(lag(summary(-1, 0), Some(20)), UNKNOWN_LAG, "start unset");
        assert_eq!(lag(summary(10, 0), None), UNKNOWN_LAG, "no end known");
        assert_eq!(lag(None, Some(20)), UNKNOWN_LAG);
    }
}
