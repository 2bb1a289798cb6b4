//! Committed offsets (Kafka's OffsetMetadataManager, non-transactional
//! part): OffsetCommit, OffsetFetch and OffsetDelete against one shard.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use kafka_protocol::error::ResponseError;

use super::classic::{ClassicGroup, GroupState};
use super::records::{CoordinatorRecord, OffsetCommitValue};
use super::writer::Ctx;

/// group -> topic -> partition -> committed offset.
#[derive(Debug, Default)]
pub struct OffsetStore {
    by_group: HashMap<String, BTreeMap<String, BTreeMap<i32, OffsetCommitValue>>>,
}

impl OffsetStore {
    pub fn get(&self, group: &str, topic: &str, partition: i32) -> Option<&OffsetCommitValue> {
        self.by_group.get(group)?.get(topic)?.get(&partition)
    }

    pub fn group(
        &self,
        group: &str,
    ) -> Option<&BTreeMap<String, BTreeMap<i32, OffsetCommitValue>>> {
        self.by_group.get(group)
    }

    fn put(&mut self, group: &str, topic: &str, partition: i32, value: OffsetCommitValue) {
        self.by_group
            .entry(group.to_string())
            .or_default()
            .entry(topic.to_string())
            .or_default()
            .insert(partition, value);
    }

    fn remove(&mut self, group: &str, topic: &str, partition: i32) {
        let Some(topics) = self.by_group.get_mut(group) else {
            return;
        };
        if let Some(partitions) = topics.get_mut(topic) {
            partitions.remove(&partition);
            if partitions.is_empty() {
                topics.remove(topic);
            }
        }
        if topics.is_empty() {
            self.by_group.remove(group);
        }
    }

    /// Tombstones for every group's offsets of `topics`.
    pub fn tombstones_of_topics(&self, topics: &BTreeSet<String>) -> Vec<CoordinatorRecord> {
        let mut out = Vec::new();
        for (group, by_topic) in &self.by_group {
            for topic in topics {
                if let Some(partitions) = by_topic.get(topic) {
                    out.extend(partitions.keys().map(|&p| tombstone(group, topic, p)));
                }
            }
        }
        out
    }

    /// Tombstones for every offset of `group`.
    pub fn tombstones(&self, group: &str) -> Vec<CoordinatorRecord> {
        let Some(topics) = self.by_group.get(group) else {
            return Vec::new();
        };
        topics
            .iter()
            .flat_map(|(topic, partitions)| {
                partitions.keys().map(move |&p| tombstone(group, topic, p))
            })
            .collect()
    }
}

pub(super) fn tombstone(group: &str, topic: &str, partition: i32) -> CoordinatorRecord {
    CoordinatorRecord::OffsetCommit {
        group: group.to_string(),
        topic: topic.to_string(),
        partition,
        value: None,
    }
}

/// Applies an offset record, on load and after a successful append. An
/// offset for an unknown group creates a "simple" group (an empty classic
/// group without protocol type), as Kafka does.
pub fn apply(
    groups: &mut HashMap<String, ClassicGroup>,
    store: &mut OffsetStore,
    group: &str,
    topic: &str,
    partition: i32,
    value: Option<OffsetCommitValue>,
    now: i64,
) {
    match value {
        Some(v) => {
            groups
                .entry(group.to_string())
                .or_insert_with(|| ClassicGroup::new(group, now));
            store.put(group, topic, partition, v);
        }
        None => store.remove(group, topic, partition),
    }
}

#[derive(Debug, Clone)]
pub struct PartitionCommit {
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

#[derive(Debug, Clone)]
pub struct CommitRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// OffsetCommit v2-4; -1 for the broker's retention.
    pub retention_time_ms: i64,
    pub api_version: i16,
    pub topics: Vec<(String, Vec<PartitionCommit>)>,
}

/// Per topic, per partition: the error code (0 on success).
pub type PartitionCodes = Vec<(String, Vec<(i32, i16)>)>;

impl CommitRequest {
    /// `code` for every partition of the request.
    pub fn codes(&self, code: i16) -> PartitionCodes {
        self.topics
            .iter()
            .map(|(t, ps)| (t.clone(), ps.iter().map(|p| (p.partition, code)).collect()))
            .collect()
    }
}

/// Validates and stores a commit; the answer is given only once the
/// records are in the log.
pub fn commit(
    groups: &mut HashMap<String, ClassicGroup>,
    store: &mut OffsetStore,
    req: CommitRequest,
    ctx: &Ctx<'_>,
) -> PartitionCodes {
    if let Err(e) = validate_commit(groups, &req, ctx.now) {
        return req.codes(e.code());
    }
    store_commit(groups, store, &req, ctx)
}

/// Stores a commit the group has validated.
pub fn store_commit(
    groups: &mut HashMap<String, ClassicGroup>,
    store: &mut OffsetStore,
    req: &CommitRequest,
    ctx: &Ctx<'_>,
) -> PartitionCodes {
    let mut codes = req.codes(0);
    let expire_timestamp = (req.retention_time_ms != -1).then(|| ctx.now + req.retention_time_ms);
    let mut records = Vec::new();
    for ((topic, partitions), (_, topic_codes)) in req.topics.iter().zip(codes.iter_mut()) {
        for (p, (_, code)) in partitions.iter().zip(topic_codes.iter_mut()) {
            let metadata = p.metadata.clone().unwrap_or_default();
            // Kafka measures the metadata in UTF-16 units (Java's length()).
            if metadata.encode_utf16().count() > ctx.config.offset_metadata_max_bytes {
                *code = ResponseError::OffsetMetadataTooLarge.code();
                continue;
            }
            records.push(CoordinatorRecord::OffsetCommit {
                group: req.group_id.clone(),
                topic: topic.clone(),
                partition: p.partition,
                value: Some(OffsetCommitValue {
                    offset: p.offset,
                    leader_epoch: p.leader_epoch,
                    metadata,
                    commit_timestamp: ctx.now,
                    expire_timestamp,
                }),
            });
        }
    }
    if let Err(e) = ctx.writer.append(&records) {
        for (_, topic_codes) in codes.iter_mut() {
            for (_, code) in topic_codes.iter_mut().filter(|(_, c)| *c == 0) {
                *code = e.code();
            }
        }
        return codes;
    }
    for r in records {
        if let CoordinatorRecord::OffsetCommit {
            group,
            topic,
            partition,
            value,
        } = r
        {
            apply(groups, store, &group, &topic, partition, value, ctx.now);
        }
    }
    codes
}

fn validate_commit(
    groups: &mut HashMap<String, ClassicGroup>,
    req: &CommitRequest,
    now: i64,
) -> Result<(), ResponseError> {
    let Some(group) = groups.get_mut(&req.group_id) else {
        return if req.generation_id < 0 {
            // A simple commit (admin tools, manual assignment) creates the group.
            Ok(())
        } else if req.api_version >= 9 {
            Err(ResponseError::GroupIdNotFound)
        } else {
            // What clients before OffsetCommit v9 expect.
            Err(ResponseError::IllegalGeneration)
        };
    };
    group.validate_offset_commit(
        &req.member_id,
        req.group_instance_id.as_deref(),
        req.generation_id,
    )?;
    // A commit keeps a classic member's session alive.
    if matches!(
        group.state(),
        GroupState::Stable | GroupState::PreparingRebalance
    ) {
        group.reschedule_heartbeat(&req.member_id, now);
    }
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedOffset {
    pub partition: i32,
    /// -1 when nothing is committed.
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    /// UNSTABLE_OFFSET_COMMIT while a transaction holds an offset for the
    /// partition and the fetch asked for stable offsets; else 0.
    pub error: i16,
}

impl FetchedOffset {
    fn new(partition: i32, v: Option<&OffsetCommitValue>) -> Self {
        match v {
            Some(v) => Self {
                partition,
                offset: v.offset,
                leader_epoch: v.leader_epoch,
                metadata: v.metadata.clone(),
                error: 0,
            },
            None => Self {
                partition,
                offset: -1,
                leader_epoch: -1,
                metadata: String::new(),
                error: 0,
            },
        }
    }
}

/// The committed offsets of the requested partitions (-1 when none), or of
/// every partition with an offset when `topics` is None. Offsets of open
/// transactions are not in `store` (see `txn_offsets`).
pub fn fetch(
    store: &OffsetStore,
    group_id: &str,
    topics: Option<&[(String, Vec<i32>)]>,
) -> Vec<(String, Vec<FetchedOffset>)> {
    match topics {
        Some(topics) => topics
            .iter()
            .map(|(topic, partitions)| {
                let fetched = partitions
                    .iter()
                    .map(|&p| FetchedOffset::new(p, store.get(group_id, topic, p)))
                    .collect();
                (topic.clone(), fetched)
            })
            .collect(),
        None => store
            .group(group_id)
            .into_iter()
            .flatten()
            .map(|(topic, partitions)| {
                let fetched = partitions
                    .iter()
                    .map(|(&p, v)| FetchedOffset::new(p, Some(v)))
                    .collect();
                (topic.clone(), fetched)
            })
            .collect(),
    }
}

/// OffsetDelete: refused for a non-empty group that is not a consumer
/// group, and per topic for topics the group's members subscribe to.
pub fn delete(
    groups: &mut HashMap<String, ClassicGroup>,
    store: &mut OffsetStore,
    group_id: &str,
    topics: &[(String, Vec<i32>)],
    ctx: &Ctx<'_>,
) -> Result<PartitionCodes, ResponseError> {
    let group = groups.get(group_id).ok_or(ResponseError::GroupIdNotFound)?;
    if !group.is_empty() && !group.uses_consumer_protocol() {
        return Err(ResponseError::NonEmptyGroup);
    }
    let subscribed: HashSet<&str> = topics
        .iter()
        .map(|(t, _)| t.as_str())
        .filter(|t| group.is_subscribed_to_topic(t))
        .collect();
    delete_unsubscribed(groups, store, group_id, topics, &subscribed, ctx)
}

/// Deletes the offsets of `topics`, except those of `subscribed` topics
/// (GROUP_SUBSCRIBED_TO_TOPIC), in one batch of tombstones.
pub fn delete_unsubscribed(
    groups: &mut HashMap<String, ClassicGroup>,
    store: &mut OffsetStore,
    group_id: &str,
    topics: &[(String, Vec<i32>)],
    subscribed: &HashSet<&str>,
    ctx: &Ctx<'_>,
) -> Result<PartitionCodes, ResponseError> {
    let mut records = Vec::new();
    let codes = topics
        .iter()
        .map(|(topic, partitions)| {
            let subscribed = subscribed.contains(topic.as_str());
            let codes = partitions
                .iter()
                .map(|&p| {
                    if subscribed {
                        return (p, ResponseError::GroupSubscribedToTopic.code());
                    }
                    if store.get(group_id, topic, p).is_some() {
                        records.push(tombstone(group_id, topic, p));
                    }
                    (p, 0)
                })
                .collect();
            (topic.clone(), codes)
        })
        .collect();
    ctx.writer.append(&records)?;
    for r in records {
        if let CoordinatorRecord::OffsetCommit {
            topic, partition, ..
        } = r
        {
            apply(groups, store, group_id, &topic, partition, None, ctx.now);
        }
    }
    Ok(codes)
}
/// OffsetFetch v9's member check, as Kafka's: a fetch naming no member
/// with a negative epoch (an admin tool) passes; otherwise the member must
/// be one of `members`, its epoch judged by `check_epoch`.
pub(super) fn check_fetching_member<M>(
    members: &std::collections::BTreeMap<String, M>,
    member_id: Option<&str>,
    member_epoch: i32,
    check_epoch: impl FnOnce(&M, i32) -> Result<(), ResponseError>,
) -> Result<(), ResponseError> {
    if member_id.is_none() && member_epoch < 0 {
        return Ok(());
    }
    let member = members
        .get(member_id.unwrap_or_default())
        .ok_or(ResponseError::UnknownMemberId)?;
    check_epoch(member, member_epoch)
}
