//! DescribeMirrors: every partition of the mirrors asked, whichever broker
//! is asked. The broker asked describes the partitions it leads and asks
//! every other leader, in one DescribeMirrors (LeaderOnly) each, all at
//! once, for the rest. A leader describes a partition from its driver,
//! and the source's high watermark as its fetch session last vouched for it
//! (an answer leaving a partition out says it is unchanged); a figure older
//! than 2 s, or of a PAUSED partition (nothing is fetched), is asked of
//! the source while the describe is served (one ListOffsets per
//! source broker), so LAG is against the source's end now. A partition with
//! no driver, no leader or a silent leader is described from its stored
//! state, read in one ReadMirrorStates per `__mirror_state` coordinator.
//! A STOPPED partition carries what its failover did; with FailoverPlan
//! (`ottla mirrors --remove --dry-run`) every other partition a leader
//! drives carries what failover would do now.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ottla_controller::MetadataImage;
use ottla_coordinator_common::partition_writer::now_ms;
use ottla_protocol::mirror::admin::{
    DescribeMirrorsRequest, DescribeMirrorsResponse, DescribedMirror, DescribedMirrorPartition,
    DescribedMirrorTopic,
};
use ottla_protocol::mirror::errors;
use ottla_storage::manager::TopicPartition;
use uuid::Uuid;

use super::failover;
use super::manager::{MirrorManager, MirrorPartition};
use super::source::SourceCluster;
use super::topics_of;
use crate::state::MirrorPartitionState;

/// How long a describe waits for the source's high watermarks; past it,
/// the figures last fetched are shown with their age.
const SOURCE_ASK_TIMEOUT: Duration = Duration::from_secs(3);
/// A MIRRORING partition's source figure younger than this (a fetch
/// session answers at least every 500 ms) is shown as is; an older one is
/// asked of the source.
const FRESH_SOURCE_FIGURE_MS: i64 = 2_000;
/// How long the broker asked waits for the other leaders' answers; past
/// it, their partitions are described from the stored state.
const GATHER_TIMEOUT: Duration = Duration::from_secs(10);

/// (mirror, topic, partition)
type PartitionKey = (String, String, i32);

/// One partition to describe, where the metadata places it.
struct Located {
    mirror: String,
    topic: String,
    topic_id: Uuid,
    partition: i32,
    leader: i32,
}

impl Located {
    fn key(&self) -> PartitionKey {
        (self.mirror.clone(), self.topic.clone(), self.partition)
    }
}

pub async fn describe_mirrors(
    m: &MirrorManager,
    r: DescribeMirrorsRequest,
) -> DescribeMirrorsResponse {
    let leader_only = r.leader_only();
    let plan = r.failover_plan();
    let image = m.services().controller.image();
    let names: Vec<String> = match r.mirror_names {
        Some(names) => names,
        None => image.mirrors().map(|(name, _)| name.to_string()).collect(),
    };
    let (known, unknown): (Vec<String>, Vec<String>) = names
        .into_iter()
        .partition(|name| image.mirror_configs(name).is_some());
    let node_id = m.services().node_id;
    let located: Vec<Located> = locate(&image, &known)
        .into_iter()
        .filter(|p| !leader_only || p.leader == node_id)
        .collect();

    let (mine, others): (Vec<&Located>, Vec<&Located>) =
        located.iter().partition(|p| p.leader == node_id);
    let leaders: BTreeSet<i32> = others
        .iter()
        .map(|p| p.leader)
        .filter(|&l| l >= 0)
        .collect();
    let (mut described, gathered) = tokio::join!(
        describe_led(m, &mine, plan),
        gather(m, &known, leaders, plan)
    );
    described.extend(gathered);
    let unanswered: Vec<&Located> = located
        .iter()
        .filter(|p| !described.contains_key(&p.key()))
        .collect();
    described.extend(describe_stored(m, &unanswered).await);

    let mut mirrors: Vec<DescribedMirror> = unknown
        .into_iter()
        .map(|name| DescribedMirror {
            error_message: Some(format!("No mirror named '{name}' exists.")),
            mirror_name: name,
            error_code: errors::UNKNOWN_MIRROR.code,
            ..Default::default()
        })
        .collect();
    mirrors.extend(assemble(&known, &located, described));
    DescribeMirrorsResponse {
        mirrors,
        ..Default::default()
    }
}

/// Every partition of every topic bound to `mirrors`, with its leader.
fn locate(image: &MetadataImage, mirrors: &[String]) -> Vec<Located> {
    let mut located = Vec::new();
    for mirror in mirrors {
        for (topic, _) in topics_of(image, mirror) {
            let Some(t) = image.topic_by_name(&topic) else {
                continue;
            };
            for (&partition, p) in &t.partitions {
                located.push(Located {
                    mirror: mirror.clone(),
                    topic: topic.clone(),
                    topic_id: t.id,
                    partition,
                    leader: p.leader,
                });
            }
        }
    }
    located
}

/// The answer in the request's mirror order, topics and partitions in the
/// order the metadata lists them.
fn assemble(
    mirrors: &[String],
    located: &[Located],
    mut described: HashMap<PartitionKey, DescribedMirrorPartition>,
) -> Vec<DescribedMirror> {
    let mut topics: BTreeMap<&str, Vec<DescribedMirrorTopic>> = BTreeMap::new();
    for p in located {
        let mirror_topics = topics.entry(p.mirror.as_str()).or_default();
        if mirror_topics.last().is_none_or(|t| t.name != p.topic) {
            mirror_topics.push(DescribedMirrorTopic {
                name: p.topic.clone(),
                topic_id: p.topic_id,
                ..Default::default()
            });
        }
        let partition = described
            .remove(&p.key())
            .unwrap_or_else(|| DescribedMirrorPartition {
                partition_index: p.partition,
                ..Default::default()
            });
        mirror_topics
            .last_mut()
            .expect("pushed above")
            .partitions
            .push(partition);
    }
    mirrors
        .iter()
        .map(|name| DescribedMirror {
            mirror_name: name.clone(),
            topics: topics.remove(name.as_str()).unwrap_or_default(),
            ..Default::default()
        })
        .collect()
}

/// Asks each of `leaders` for the partitions of `mirrors` it leads.
async fn gather(
    m: &MirrorManager,
    mirrors: &[String],
    leaders: BTreeSet<i32>,
    plan: bool,
) -> HashMap<PartitionKey, DescribedMirrorPartition> {
    let request = DescribeMirrorsRequest {
        mirror_names: Some(mirrors.to_vec()),
        ..Default::default()
    }
    .with_leader_only(true)
    .with_failover_plan(plan);
    let mut asking = tokio::task::JoinSet::new();
    for leader in leaders {
        let brokers = m.services().brokers.clone();
        let request = request.clone();
        asking.spawn(async move { brokers.send_mirror(leader, &request).await });
    }
    let mut described = HashMap::new();
    let _ = tokio::time::timeout(GATHER_TIMEOUT, async {
        while let Some(answer) = asking.join_next().await {
            let Ok(Ok(response)) = answer else { continue };
            for m in response.mirrors.into_iter().filter(|m| m.error_code == 0) {
                for t in m.topics {
                    for p in t.partitions {
                        let key = (m.mirror_name.clone(), t.name.clone(), p.partition_index);
                        described.insert(key, p);
                    }
                }
            }
        }
    })
    .await;
    described
}

/// The partitions this broker leads: from their drivers, with the source's
/// current high watermarks (and, if `plan`, what failover would do); from
/// the stored state when no driver runs.
async fn describe_led(
    m: &MirrorManager,
    led: &[&Located],
    plan: bool,
) -> HashMap<PartitionKey, DescribedMirrorPartition> {
    let mut driven: BTreeMap<&str, Vec<(&Located, Arc<MirrorPartition>)>> = BTreeMap::new();
    let mut undriven = Vec::new();
    for &p in led {
        match m.partition(&TopicPartition::new(p.topic.clone(), p.partition)) {
            Some(run) => driven.entry(p.mirror.as_str()).or_default().push((p, run)),
            None => undriven.push(p),
        }
    }
    let mut described = describe_stored(m, &undriven).await;
    for (mirror, runs) in driven {
        // Only figures the fetch loop cannot vouch for: a PAUSED partition,
        // a MIRRORING one whose session answer is old. (A partition still
        // PREPARING, or failing over, has no lag worth a source round trip:
        // a describe polled during a 10,000-partition add asked for all.)
        let now = now_ms();
        let stale: Vec<_> = runs
            .iter()
            .filter(|(_, run)| match *run.state.lock() {
                MirrorPartitionState::Paused => true,
                MirrorPartitionState::Mirroring => {
                    !(0..FRESH_SOURCE_FIGURE_MS).contains(&run.stats.source_offset_age_ms(now))
                }
                _ => false,
            })
            .cloned()
            .collect();
        let source_ends = if stale.is_empty() {
            HashMap::new()
        } else {
            ask_source(m, mirror, &stale).await
        };
        let policy = plan
            .then(|| {
                let image = m.services().controller.image();
                let config = m.services().configs.get(&image, mirror);
                config.ok().map(|c| c.open_transactions_at_stop)
            })
            .flatten();
        for (p, run) in runs {
            let tp = TopicPartition::new(p.topic.clone(), p.partition);
            let source_end = source_ends.get(&(p.topic.clone(), p.partition)).copied();
            let mut partition = describe_driven(m, &tp, &run, source_end);
            if let Some(policy) = policy.filter(|_| partition.failover().is_none()) {
                let planned = m
                    .services()
                    .replicas
                    .hosted_partition(&tp)
                    .map(|replica| failover::plan(&replica.log().read(), policy, now_ms()).0);
                partition = partition.with_failover(planned.as_ref());
            }
            described.insert(p.key(), partition);
        }
    }
    described
}

/// The source's high watermarks now, of the mirror partitions `runs`;
/// empty if the source does not answer in time.
async fn ask_source(
    m: &MirrorManager,
    mirror: &str,
    runs: &[(&Located, Arc<MirrorPartition>)],
) -> HashMap<(String, i32), i64> {
    let services = m.services();
    let image = m.services().controller.image();
    let source = services
        .configs
        .get(&image, mirror)
        .and_then(|config| SourceCluster::new(&config, format!("ottla-mirror-describe-{mirror}")));
    let Ok(mut source) = source else {
        return HashMap::new();
    };
    source.timeout = SOURCE_ASK_TIMEOUT;
    let mut partitions: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for (p, _) in runs {
        partitions
            .entry(p.topic.clone())
            .or_default()
            .push(p.partition);
    }
    match tokio::time::timeout(SOURCE_ASK_TIMEOUT, source.high_watermarks(&partitions)).await {
        Ok(Ok(ends)) => ends,
        _ => HashMap::new(),
    }
}

/// A partition's figures from its driver; `source_end` is the source's high
/// watermark just asked, if it answered.
fn describe_driven(
    m: &MirrorManager,
    tp: &TopicPartition,
    run: &MirrorPartition,
    source_end: Option<i64>,
) -> DescribedMirrorPartition {
    let destination = m
        .services()
        .replicas
        .hosted_partition(tp)
        .map_or(-1, |p| p.log().read().log_end_offset());
    let now = now_ms();
    if let Some(end) = source_end {
        run.stats.source_answered(end, destination);
    }
    let source = run.stats.source_high_watermark.load(Ordering::Relaxed);
    DescribedMirrorPartition {
        partition_index: tp.partition,
        state: run.state.lock().wire_value(),
        source_offset: source,
        destination_offset: destination,
        lag_records: if source >= 0 && destination >= 0 {
            (source - destination).max(0)
        } else {
            -1
        },
        lag_ms: run.stats.lag_ms(now),
        bytes_per_second: run.bytes_per_second(),
        fetch_errors: run.stats.fetch_errors.load(Ordering::Relaxed) as i64,
        last_mirrored_epoch: *run.last_mirrored_epoch.lock(),
        last_error: run.stats.last_error.lock().clone(),
        ..Default::default()
    }
    .with_source_offset_age_ms(run.stats.source_offset_age_ms(now))
    .with_failover(run.failover.lock().as_ref())
}

/// Partitions described from their stored state alone (state, last
/// mirrored epoch and last error; no figures), or with why it could not be
/// read (its `__mirror_state` coordinator down, until another takes over).
async fn describe_stored(
    m: &MirrorManager,
    partitions: &[&Located],
) -> HashMap<PartitionKey, DescribedMirrorPartition> {
    let mut by_mirror: BTreeMap<&str, Vec<(Uuid, i32)>> = BTreeMap::new();
    for p in partitions {
        by_mirror
            .entry(p.mirror.as_str())
            .or_default()
            .push((p.topic_id, p.partition));
    }
    let mut stored = HashMap::new();
    for (mirror, keys) in by_mirror {
        let read = m.services().read_stored_many(mirror, &keys).await;
        stored.insert(mirror.to_string(), read);
    }
    partitions
        .iter()
        .map(|p| {
            let mut described = DescribedMirrorPartition {
                partition_index: p.partition,
                ..Default::default()
            };
            let found = stored
                .get(&p.mirror)
                .and_then(|read| read.get(&(p.topic_id, p.partition)));
            match found {
                Some(Ok(state)) => {
                    if let Some(s) = &state.state {
                        described.state = s.state.wire_value();
                        described.last_error = s.error_message.clone();
                        described = described.with_failover(s.failover().as_ref());
                    }
                    if let Some(lme) = &state.last_mirrored_epoch {
                        described.last_mirrored_epoch = lme.last_mirrored_epoch;
                    }
                }
                Some(Err(e)) => {
                    described.last_error = Some(format!(
                        "leader {} did not answer and the stored state is unreadable: {e}",
                        p.leader
                    ));
                }
                None => {}
            }
            (p.key(), described)
        })
        .collect()
}
