//! The share-group dead-letter queue (KIP-1191): what a partition leader
//! writes to a group's queue topic for the records the group will never
//! deliver again (rejected, or delivered `share.delivery.count.limit`
//! times), and whether a topic may be that queue. The broker reads the
//! source records and writes these (`broker/src/apis/share_dead_letters.rs`).
//!
//! As Kafka 4.4 writes them: one record per offset, timestamped with the
//! broker's clock, with the source's key and value only when the group sets
//! `errors.deadletterqueue.copy.record.enable`, and headers naming where it
//! came from and why; uncompressed, without a producer id, to partition
//! `source partition % queue partitions`.

use std::collections::BTreeMap;

use ottla_protocol::batch::{BatchBuilder, BatchIter, SimpleRecord};
use ottla_protocol::records::{records_section, walk_records};

use crate::partition::DeadLetters;

pub const TOPIC_HEADER: &str = "__dlq.errors.topic";
pub const PARTITION_HEADER: &str = "__dlq.errors.partition";
pub const OFFSET_HEADER: &str = "__dlq.errors.offset";
pub const GROUP_HEADER: &str = "__dlq.errors.group";
pub const DELIVERY_COUNT_HEADER: &str = "__dlq.errors.delivery.count";
pub const MESSAGE_HEADER: &str = "__dlq.errors.message";

pub const REJECTED: &str = "Offset rejected by client.";
pub const DELIVERY_LIMIT_REACHED: &str = "Offset delivery count exceeded the threshold.";

/// Why records were dead-lettered: delivered as often as the group allows,
/// else rejected (how Kafka tells them apart, also for archiving offsets
/// a new leader finds persisted).
pub fn cause(delivery_count: i16, delivery_count_limit: i16) -> &'static str {
    if delivery_count >= delivery_count_limit {
        DELIVERY_LIMIT_REACHED
    } else {
        REJECTED
    }
}

/// What this broker knows of a group's configured queue topic.
#[derive(Debug, Clone, Copy)]
pub struct QueueTopic<'a> {
    pub name: &'a str,
    pub exists: bool,
    /// The topic's `errors.deadletterqueue.group.enable`.
    pub group_enabled: bool,
}

/// Whether `topic` may be `group`'s queue: Kafka's checks, in its order
/// and words. `prefix` is the broker's
/// `errors.deadletterqueue.topic.name.prefix`; `auto_create` its
/// `errors.deadletterqueue.auto.create.topics.enable`.
pub fn check_queue(
    group: &str,
    topic: &QueueTopic<'_>,
    prefix: &str,
    auto_create: bool,
) -> Result<(), String> {
    let name = topic.name;
    if name.is_empty() {
        return Err(format!(
            "Configured DLQ topic name in share group: {group} is empty."
        ));
    }
    if name.starts_with("__") {
        return Err(format!(
            "Configured DLQ topic name in share group: {group} cannot start with __, topic: {name}."
        ));
    }
    if topic.exists && !topic.group_enabled {
        return Err(format!(
            "DLQ is not enabled on configured DLQ topic for share group: {group}, topic: {name}."
        ));
    }
    if !topic.exists && !auto_create {
        return Err(format!(
            "DLQ topic does not exist and auto create is disabled on cluster for share group: {group}, topic: {name}."
        ));
    }
    if !prefix.is_empty() && !name.starts_with(prefix) {
        return Err(format!(
            "Configured DLQ topic name does not comply with the DLQ topic prefix in share group: {group}, topic: {name}, prefix: {prefix}."
        ));
    }
    Ok(())
}

/// A record's key and value.
pub type KeyValue = (Option<Vec<u8>>, Option<Vec<u8>>);

/// The keys and values of the records at `first..=last` in `records`
/// (batches as read from the log, compressed or not); a batch that cannot
/// be read is left out, and its offsets go to the queue without a copy.
pub fn copied_records(records: &[u8], first: i64, last: i64) -> BTreeMap<i64, KeyValue> {
    let mut out = BTreeMap::new();
    for batch in BatchIter::new(records).map_while(Result::ok) {
        if batch.is_control() || batch.last_offset() < first || batch.base_offset() > last {
            continue;
        }
        let Ok(section) = records_section(&batch) else {
            continue;
        };
        let base = batch.base_offset();
        let _ = walk_records(&section, |r| {
            let offset = base + i64::from(r.offset_delta);
            if (first..=last).contains(&offset) {
                out.insert(
                    offset,
                    (r.key.map(<[u8]>::to_vec), r.value.map(<[u8]>::to_vec)),
                );
            }
        });
    }
    out
}

/// Where the dead letters come from.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub group: &'a str,
}

/// The queue's records for `letters`: one per offset, with its copied key
/// and value if `copied` holds them.
pub fn dead_letter_records(
    source: &Source<'_>,
    letters: &DeadLetters,
    cause: &str,
    copied: &BTreeMap<i64, KeyValue>,
    now: i64,
) -> Vec<SimpleRecord> {
    let header = |name: &str, value: &str| (name.to_string(), Some(value.as_bytes().to_vec()));
    (letters.first..=letters.last)
        .map(|offset| {
            let (key, value) = copied.get(&offset).cloned().unwrap_or_default();
            SimpleRecord {
                timestamp: now,
                key,
                value,
                headers: vec![
                    header(TOPIC_HEADER, source.topic),
                    header(PARTITION_HEADER, &source.partition.to_string()),
                    header(OFFSET_HEADER, &offset.to_string()),
                    header(GROUP_HEADER, source.group),
                    header(DELIVERY_COUNT_HEADER, &letters.delivery_count.to_string()),
                    header(MESSAGE_HEADER, cause),
                ],
            }
        })
        .collect()
}

/// The queue partition a source partition's dead letters go to.
pub fn queue_partition(source_partition: i32, queue_partitions: i32) -> i32 {
    source_partition.rem_euclid(queue_partitions.max(1))
}

/// Uncompressed batches (no producer id) of `records`, each within
/// `max_bytes` (the queue topic's `max.message.bytes`) unless one record
/// alone is bigger.
pub fn batches(records: &[SimpleRecord], max_bytes: usize) -> Vec<Vec<u8>> {
    // A batch's header, and a bound on a record's framing (varints).
    const BATCH_OVERHEAD: usize = 61;
    const RECORD_OVERHEAD: usize = 21;
    let size = |r: &SimpleRecord| {
        let bytes = |b: &Option<Vec<u8>>| b.as_ref().map_or(0, Vec::len) + 5;
        RECORD_OVERHEAD
            + bytes(&r.key)
            + bytes(&r.value)
            + r.headers
                .iter()
                .map(|(k, v)| k.len() + 5 + bytes(v))
                .sum::<usize>()
    };
    let builder = BatchBuilder::default();
    let mut out = Vec::new();
    let mut from = 0;
    let mut bytes = BATCH_OVERHEAD;
    for (i, r) in records.iter().enumerate() {
        let s = size(r);
        if i > from && bytes + s > max_bytes {
            out.push(builder.build(&records[from..i]));
            from = i;
            bytes = BATCH_OVERHEAD;
        }
        bytes += s;
    }
    if from < records.len() {
        out.push(builder.build(&records[from..]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ottla_protocol::batch::BatchView;

    #[test]
    fn a_queue_topic_is_checked_as_kafka_checks_it() {
        let topic = |name, exists, group_enabled| QueueTopic {
            name,
            exists,
            group_enabled,
        };
        assert!(check_queue("g", &topic("dlq.orders", true, true), "dlq.", false).is_ok());
        let refused = |t: QueueTopic<'_>, prefix: &str, auto: bool| {
            check_queue("g", &t, prefix, auto).unwrap_err()
        };
        assert_eq!(
            refused(topic("__dlq", true, true), "", false),
            "Configured DLQ topic name in share group: g cannot start with __, topic: __dlq."
        );
        assert_eq!(
            refused(topic("dlq.orders", true, false), "dlq.", false),
            "DLQ is not enabled on configured DLQ topic for share group: g, topic: dlq.orders."
        );
        assert_eq!(
            refused(topic("dlq.orders", false, false), "dlq.", false),
            "DLQ topic does not exist and auto create is disabled on cluster for share group: g, topic: dlq.orders."
        );
        assert!(check_queue("g", &topic("dlq.orders", false, false), "dlq.", true).is_ok());
        assert_eq!(
            refused(topic("orders.dlq", true, true), "dlq.", false),
            "Configured DLQ topic name does not comply with the DLQ topic prefix in share group: g, topic: orders.dlq, prefix: dlq.."
        );
        assert!(
            check_queue("g", &topic("orders.dlq", true, true), "", false).is_ok(),
            "an empty prefix allows any name"
        );
    }

    #[test]
    fn each_offset_becomes_one_record_with_kafkas_headers() {
        let source_batch = BatchBuilder {
            base_offset: 10,
            ..BatchBuilder::default()
        }
        .build(&[
            SimpleRecord {
                timestamp: 1,
                key: Some(b"k10".to_vec()),
                value: Some(b"v10".to_vec()),
                headers: Vec::new(),
            },
            SimpleRecord {
                timestamp: 1,
                key: None,
                value: Some(b"v11".to_vec()),
                headers: Vec::new(),
            },
        ]);
        let copied = copied_records(&source_batch, 11, 12);
        assert_eq!(copied.len(), 1, "10 is outside, 12 is not a record");
        let letters = DeadLetters {
            first: 11,
            last: 12,
            delivery_count: 5,
        };
        let source = Source {
            topic: "orders",
            partition: 7,
            group: "g",
        };
        let records = dead_letter_records(&source, &letters, cause(5, 5), &copied, 99);
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].key, None);
        assert_eq!(records[0].value.as_deref(), Some(&b"v11"[..]));
        assert_eq!(
            (records[1].key.clone(), records[1].value.clone()),
            (None, None)
        );
        let headers: Vec<(&str, &[u8])> = records[0]
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_deref().unwrap()))
            .collect();
        assert_eq!(
            headers,
            vec![
                (TOPIC_HEADER, &b"orders"[..]),
                (PARTITION_HEADER, b"7"),
                (OFFSET_HEADER, b"11"),
                (GROUP_HEADER, b"g"),
                (DELIVERY_COUNT_HEADER, b"5"),
                (MESSAGE_HEADER, DELIVERY_LIMIT_REACHED.as_bytes()),
            ]
        );
        assert_eq!(cause(2, 5), REJECTED);
        assert_eq!(queue_partition(7, 3), 1);
    }

    #[test]
    fn batches_stay_within_the_queue_topics_record_batch_limit() {
        let record = SimpleRecord {
            timestamp: 0,
            key: None,
            value: Some(vec![0; 100]),
            headers: Vec::new(),
        };
        let records = vec![record; 10];
        let built = batches(&records, 400);
        assert!(built.len() > 1);
        let mut count = 0;
        for b in &built {
            assert!(b.len() <= 400, "{} bytes", b.len());
            let view = BatchView::parse(b).unwrap();
            assert_eq!(view.producer_id(), -1);
            count += view.record_count();
        }
        assert_eq!(count, 10);
        assert_eq!(batches(&records[..1], 10).len(), 1, "alone if too big");
    }
}
