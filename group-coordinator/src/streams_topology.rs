//! A streams topology configured against the cluster's topics (Kafka's
//! InternalTopicManager): the partition counts of the internal topics, the
//! tasks of each subtopology, and why the group is not ready when it is not
//! (source topics missing, copartitioned topics that differ, internal
//! topics still to create).

use std::collections::{BTreeMap, BTreeSet};

use ottla_controller::MetadataImage;
use ottla_protocol::streams::heartbeat::{Status, StatusCode};
use ottla_protocol::streams::{Subtopology, Topology};

/// An internal topic the group needs and the cluster lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalTopic {
    pub name: String,
    pub partitions: i32,
    /// -1: the broker's default.
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfiguredTopology {
    /// Subtopology id → number of tasks (one per input partition).
    pub tasks: BTreeMap<String, i32>,
    /// Subtopologies with state stores (standby tasks apply to them).
    pub stateful: BTreeSet<String>,
    /// Why the group cannot run yet; empty when ready.
    pub statuses: Vec<Status>,
    pub to_create: Vec<InternalTopic>,
    /// Every topic the topology reads or writes that the group's epoch
    /// follows: sources, repartition and changelog topics.
    pub required_topics: BTreeSet<String>,
}

impl ConfiguredTopology {
    pub fn is_ready(&self) -> bool {
        self.statuses.is_empty()
    }
}

/// A topology no cluster can run (STREAMS_INVALID_TOPOLOGY).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidTopology(pub String);

/// At most three names, then how many more, as Kafka words its statuses.
fn summarize(names: &BTreeSet<String>) -> String {
    let shown: Vec<&str> = names.iter().take(3).map(String::as_str).collect();
    match names.len() {
        n if n > 3 => format!("{} and {} additional topics", shown.join(", "), n - 3),
        _ => shown.join(", "),
    }
}

pub fn configure(
    topology: &Topology,
    image: &MetadataImage,
) -> Result<ConfiguredTopology, InvalidTopology> {
    let existing = |name: &str| image.topic_by_name(name).map(|t| t.partitions.len() as i32);
    let mut configured = ConfiguredTopology::default();
    for s in &topology.subtopologies {
        configured
            .required_topics
            .extend(s.source_topics.iter().cloned());
        configured
            .required_topics
            .extend(s.repartition_source_topics.iter().map(|t| t.name.clone()));
        configured
            .required_topics
            .extend(s.state_changelog_topics.iter().map(|t| t.name.clone()));
    }
    let missing: BTreeSet<String> = topology
        .subtopologies
        .iter()
        .flat_map(|s| &s.source_topics)
        .filter(|t| existing(t).is_none())
        .cloned()
        .collect();
    if !missing.is_empty() {
        configured.statuses.push(Status::new(
            StatusCode::MissingSourceTopics,
            format!("Source topics {} are missing.", summarize(&missing)),
        ));
        return Ok(configured);
    }
    let mut repartition = repartition_counts(topology, &existing)?;
    let mut incorrect = Vec::new();
    for s in &topology.subtopologies {
        enforce_copartitioning(s, &existing, &mut repartition, &mut incorrect);
    }
    let mut internal: BTreeMap<String, (i32, &ottla_protocol::streams::TopicInfo)> =
        BTreeMap::new();
    for s in &topology.subtopologies {
        let inputs = s.source_topics.iter().filter_map(|t| existing(t)).chain(
            s.repartition_source_topics
                .iter()
                .filter_map(|t| repartition.get(&t.name).copied()),
        );
        let tasks = inputs.max().ok_or_else(|| {
            InvalidTopology(format!(
                "No source topics found for subtopology {}",
                s.subtopology_id
            ))
        })?;
        configured.tasks.insert(s.subtopology_id.clone(), tasks);
        if !s.state_changelog_topics.is_empty() {
            configured.stateful.insert(s.subtopology_id.clone());
        }
        for t in &s.repartition_source_topics {
            internal.insert(t.name.clone(), (repartition[&t.name], t));
        }
        for t in &s.state_changelog_topics {
            // A source topic reused as the changelog is not internal.
            if !s.source_topics.contains(&t.name) {
                internal.insert(t.name.clone(), (tasks, t));
            }
        }
    }
    let mut to_create = BTreeSet::new();
    for (name, (partitions, info)) in &internal {
        match existing(name) {
            Some(found) if found != *partitions => incorrect.push(format!(
                "Existing topic {name} has different number of partitions: expected {partitions}, found {found}"
            )),
            Some(_) => {}
            None => {
                to_create.insert(name.clone());
                configured.to_create.push(InternalTopic {
                    name: name.clone(),
                    partitions: *partitions,
                    replication_factor: match info.replication_factor {
                        0 => -1,
                        rf => rf,
                    },
                    configs: info
                        .topic_configs
                        .iter()
                        .map(|kv| (kv.key.clone(), kv.value.clone()))
                        .collect(),
                });
            }
        }
    }
    if !incorrect.is_empty() {
        configured.statuses.push(Status::new(
            StatusCode::IncorrectlyPartitionedTopics,
            incorrect.join("; "),
        ));
    }
    if !to_create.is_empty() {
        configured.statuses.push(Status::new(
            StatusCode::MissingInternalTopics,
            format!("Internal topics are missing: {}", summarize(&to_create)),
        ));
    }
    Ok(configured)
}

/// The partition count of every repartition topic: its own when the
/// topology fixes one, else the most partitions among the inputs of the
/// subtopologies writing to it, found by repeating until nothing changes.
fn repartition_counts(
    topology: &Topology,
    existing: &impl Fn(&str) -> Option<i32>,
) -> Result<BTreeMap<String, i32>, InvalidTopology> {
    let mut counts: BTreeMap<String, i32> = BTreeMap::new();
    let mut unknown: BTreeSet<String> = BTreeSet::new();
    for t in topology
        .subtopologies
        .iter()
        .flat_map(|s| &s.repartition_source_topics)
    {
        if t.partitions > 0 {
            counts.insert(t.name.clone(), t.partitions);
        } else {
            unknown.insert(t.name.clone());
        }
    }
    while !unknown.is_empty() {
        let mut progressed = false;
        for name in unknown.clone() {
            let writers = topology
                .subtopologies
                .iter()
                .filter(|s| s.repartition_sink_topics.contains(&name));
            let mut best: Option<i32> = None;
            for s in writers {
                let inputs = s.source_topics.iter().map(|t| existing(t)).chain(
                    s.repartition_source_topics
                        .iter()
                        .map(|t| counts.get(&t.name).copied()),
                );
                for count in inputs.flatten() {
                    best = Some(best.map_or(count, |b| b.max(count)));
                }
            }
            if let Some(count) = best {
                counts.insert(name.clone(), count);
                unknown.remove(&name);
                progressed = true;
            }
        }
        if !progressed {
            return Err(InvalidTopology(
                "Failed to compute number of partitions for all repartition topics, because a repartition source topic is never used as a sink topic, or there are loops in the topology that cannot be resolved.".into(),
            ));
        }
    }
    Ok(counts)
}

/// Copartitioned source topics must agree; repartition topics without a
/// fixed count in a copartition group take the source topics' count (or
/// the largest of the group's repartition topics when it has none).
fn enforce_copartitioning(
    s: &Subtopology,
    existing: &impl Fn(&str) -> Option<i32>,
    repartition: &mut BTreeMap<String, i32>,
    incorrect: &mut Vec<String>,
) {
    let fixed: BTreeSet<&str> = s
        .repartition_source_topics
        .iter()
        .filter(|t| t.partitions > 0)
        .map(|t| t.name.as_str())
        .collect();
    for group in &s.copartition_groups {
        let sources: Vec<(&String, i32)> = group
            .source_topics
            .iter()
            .filter_map(|&i| s.source_topics.get(usize::try_from(i).ok()?))
            .filter_map(|t| Some((t, existing(t)?)))
            .collect();
        let repartitions: Vec<&String> = group
            .repartition_source_topics
            .iter()
            .filter_map(|&i| s.repartition_source_topics.get(usize::try_from(i).ok()?))
            .map(|t| &t.name)
            .collect();
        let counts: BTreeSet<i32> = sources.iter().map(|(_, c)| *c).collect();
        if counts.len() > 1 {
            let listed: Vec<String> = sources.iter().map(|(t, c)| format!("{t}={c}")).collect();
            incorrect.push(format!(
                "Following topics do not have the same number of partitions: [{{{}}}]",
                listed.join(", ")
            ));
            continue;
        }
        let target = counts.first().copied().or_else(|| {
            repartitions
                .iter()
                .filter_map(|t| repartition.get(*t).copied())
                .max()
        });
        let Some(target) = target else { continue };
        for t in repartitions {
            if fixed.contains(t.as_str()) {
                if repartition.get(t) != Some(&target) {
                    incorrect.push(format!(
                        "Number of partitions [{}] of repartition topic [{t}] doesn't match number of partitions [{target}] of the source topic.",
                        repartition.get(t).copied().unwrap_or(0)
                    ));
                }
            } else {
                repartition.insert(t.clone(), target);
            }
        }
    }
}
