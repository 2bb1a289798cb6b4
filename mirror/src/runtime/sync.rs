//! Periodic metadata sync of each mirror from its source, while its topics
//! are mirrored: topic configs and partition counts
//! (`mirror.metadata.refresh.interval.ms`), consumer-group offsets
//! (`mirror.groups.sync.interval.ms`) and ACLs (`mirror.acls.sync.interval.ms`).
//!
//! One broker does it for the whole cluster: the live broker with the lowest
//! id (every broker can tell from its image). New partitions are then picked
//! up by the mirror manager like any other mirror partition.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{BrokerId, GroupId, TopicName};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::acls::Acl;
use ottla_controller::mirrors::{MirrorTopic, MirrorTopicOp};
use ottla_controller::records::{is_mirror_binding_config, CONFIG_RESOURCE_TOPIC};
use ottla_controller::{AlterOp, MetadataImage};
use ottla_storage::manager::TopicPartition;
use parking_lot::Mutex;
use tracing::{debug, info, warn};

use super::source::{SourceCluster, SourceOffset};
use super::MirrorServices;
use crate::config::{AclBinding, MirrorConfig};
use crate::name::RequestedMirroring;

const OFFSET_COMMIT_VERSION: i16 = 8;
const LIST_OFFSETS_VERSION: i16 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum SyncKind {
    Metadata,
    Groups,
    Acls,
}

/// When each mirror's syncs last started, and which are running.
#[derive(Default)]
pub struct SyncSchedule {
    last: Mutex<HashMap<(String, SyncKind), Instant>>,
    running: Mutex<HashSet<(String, SyncKind)>>,
}

/// Whether this broker syncs the cluster's mirrors: the lowest live id.
fn owns_sync(image: &MetadataImage, node_id: i32) -> bool {
    image.live_brokers().map(|b| b.id).min() == Some(node_id)
}

/// The topics `mirror` is mirroring now (not paused, not removed).
fn mirrored_topics(image: &MetadataImage, mirror: &str) -> Vec<String> {
    super::topics_of(image, mirror)
        .into_iter()
        .filter(|(_, requested)| *requested == RequestedMirroring::Mirror)
        .map(|(topic, _)| topic)
        .collect()
}

/// Starts the syncs that are due. Call periodically on every services.
pub fn run_due(services: &Arc<MirrorServices>, schedule: &Arc<SyncSchedule>) {
    let image = services.controller.image();
    if !owns_sync(&image, services.node_id) {
        return;
    }
    for (mirror, _) in image.mirrors() {
        let Ok(config) = services.configs.get(&image, mirror) else {
            continue;
        };
        if mirrored_topics(&image, mirror).is_empty() && config.topics.include.is_empty() {
            continue;
        }
        for (kind, interval) in [
            (SyncKind::Metadata, config.metadata_refresh_interval),
            (SyncKind::Groups, config.groups_sync_interval),
            (SyncKind::Acls, config.acls_sync_interval),
        ] {
            let key = (mirror.to_string(), kind);
            let due = schedule
                .last
                .lock()
                .get(&key)
                .is_none_or(|at| at.elapsed() >= interval);
            if !due || !schedule.running.lock().insert(key.clone()) {
                continue;
            }
            schedule.last.lock().insert(key.clone(), Instant::now());
            let (services, schedule, config) = (services.clone(), schedule.clone(), config.clone());
            tokio::spawn(async move {
                let result = match kind {
                    SyncKind::Metadata => sync_metadata(&services, &config).await,
                    SyncKind::Groups => sync_groups(&services, &config).await,
                    SyncKind::Acls => sync_acls(&services, &config).await,
                };
                if let Err(e) = result {
                    warn!(mirror = %config.name, ?kind, error = %e, "mirror sync failed; retrying next interval");
                }
                schedule.running.lock().remove(&key);
            });
        }
    }
}

fn source_of(services: &MirrorServices, config: &MirrorConfig) -> Result<SourceCluster, String> {
    SourceCluster::new(
        config,
        format!("ottla-mirror-sync-{}-{}", config.name, services.node_id),
    )
}

/// New source topics the mirror's `mirror.topics.include` selects, topics
/// deleted on the source, topic configs and partition counts.
async fn sync_metadata(
    services: &Arc<MirrorServices>,
    config: &MirrorConfig,
) -> Result<(), String> {
    let source = source_of(services, config)?;
    if !config.topics.include.is_empty() {
        add_new_topics(services, config, &source).await?;
    }
    let image = services.controller.image();
    for topic in mirrored_topics(&image, config.name.as_str()) {
        let Some((found, _)) = source.topic(&topic).await? else {
            // As the seeds say: a topic deleted on the source stops
            // mirroring (and becomes writable here).
            info!(
                topic,
                "the topic is gone from the source: removing it from the mirror"
            );
            change_topics(services, config, MirrorTopicOp::Remove, vec![(topic, None)]).await?;
            continue;
        };
        let ours = image
            .topic_by_name(&topic)
            .map_or(0, |t| t.partitions.len());
        if found.partitions.len() > ours {
            let (name, count) = (topic.clone(), found.partitions.len() as i32);
            info!(
                topic,
                from = ours,
                to = count,
                "the source added partitions: expanding the mirror topic"
            );
            services
                .controller
                .create_partitions(&name, count, None, false)
                .await
                .map_err(|e| e.to_string())?;
        }
        let wanted: BTreeMap<String, String> = source
            .topic_configs(&topic)
            .await?
            .into_iter()
            .filter(|(k, v)| {
                config.syncs_topic_property(k)
                    && ottla_storage::config::validate_topic_config(k, v).is_ok()
            })
            .collect();
        let current = image
            .configs_of(CONFIG_RESOURCE_TOPIC, &topic)
            .cloned()
            .unwrap_or_default();
        let mut changes: Vec<(String, AlterOp, Option<String>)> = wanted
            .iter()
            .filter(|(k, v)| current.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), AlterOp::Set, Some(v.clone())))
            .collect();
        changes.extend(
            current
                .keys()
                .filter(|k| {
                    !is_mirror_binding_config(k)
                        && config.syncs_topic_property(k)
                        && !wanted.contains_key(*k)
                })
                .map(|k| (k.clone(), AlterOp::Delete, None)),
        );
        if changes.is_empty() {
            continue;
        }
        info!(
            topic,
            changes = changes.len(),
            "syncing topic configs from the source"
        );
        let name = topic.clone();
        services
            .controller
            .alter_configs(CONFIG_RESOURCE_TOPIC, &name, &changes, false, false)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Binds the source topics the include filter selects that are not bound
/// to any mirror here yet.
async fn add_new_topics(
    services: &Arc<MirrorServices>,
    config: &MirrorConfig,
    source: &SourceCluster,
) -> Result<(), String> {
    let image = services.controller.image();
    let new: Vec<(String, Option<(uuid::Uuid, i32)>)> = source
        .topics()
        .await?
        .into_iter()
        .filter(|(name, _, _)| config.topics.matches(name) && image.mirror_binding(name).is_none())
        .map(|(name, id, partitions)| (name, Some((id, partitions))))
        .collect();
    if new.is_empty() {
        return Ok(());
    }
    info!(mirror = %config.name, topics = ?new.iter().map(|(n, _)| n).collect::<Vec<_>>(), "mirroring new source topics");
    change_topics(services, config, MirrorTopicOp::Add, new).await
}

/// Applies `op` to topics of the mirror through the controller.
async fn change_topics(
    services: &Arc<MirrorServices>,
    config: &MirrorConfig,
    op: MirrorTopicOp,
    topics: Vec<(String, Option<(uuid::Uuid, i32)>)>,
) -> Result<(), String> {
    let mirror = config.name.to_string();
    let topics: Vec<MirrorTopic> = topics
        .into_iter()
        .map(|(name, source)| MirrorTopic {
            name,
            source,
            discard_local_writes: false,
        })
        .collect();
    let results = services
        .controller
        .change_mirror_topics(&mirror, op, &topics)
        .await;
    for (topic, result) in results {
        if let Err(e) = result {
            warn!(topic, error = %e, ?op, "mirror topic change refused");
        }
    }
    Ok(())
}

/// Consumer-group offsets of the mirrored topics, for groups with no
/// active member here (a commit from outside a live group is refused by
/// its coordinator, which is exactly that rule), clamped to this cluster's
/// log range.
async fn sync_groups(services: &Arc<MirrorServices>, config: &MirrorConfig) -> Result<(), String> {
    let source = source_of(services, config)?;
    let image = services.controller.image();
    let topics: HashSet<String> = mirrored_topics(&image, config.name.as_str())
        .into_iter()
        .collect();
    for group in source.groups().await? {
        if !config.groups.matches(&group) {
            continue;
        }
        let offsets: Vec<SourceOffset> = match source.committed_offsets(&group).await {
            Ok(offsets) => offsets
                .into_iter()
                .filter(|o| topics.contains(&o.topic))
                .collect(),
            Err(e) => {
                debug!(group, error = %e, "cannot read the source group's offsets");
                continue;
            }
        };
        if offsets.is_empty() {
            continue;
        }
        if let Err(e) = commit_offsets(services, &group, offsets).await {
            debug!(group, error = %e, "group offsets not synced (active here, or not ready)");
        }
    }
    Ok(())
}

async fn commit_offsets(
    services: &Arc<MirrorServices>,
    group: &str,
    offsets: Vec<SourceOffset>,
) -> Result<(), String> {
    let mut by_topic: BTreeMap<String, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for o in offsets {
        let tp = TopicPartition::new(o.topic.clone(), o.partition);
        let Some((start, end)) = log_range(services, &tp).await else {
            continue;
        };
        by_topic.entry(o.topic).or_default().push(
            OffsetCommitRequestPartition::default()
                .with_partition_index(o.partition)
                .with_committed_offset(o.offset.clamp(start, end))
                .with_committed_leader_epoch(o.leader_epoch)
                .with_committed_metadata(o.metadata.map(StrBytes::from_string)),
        );
    }
    if by_topic.is_empty() {
        return Ok(());
    }
    let coordinator = services.groups.coordinator_of(group)?;
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(StrBytes::from_static_str(""))
        .with_topics(
            by_topic
                .into_iter()
                .map(|(name, partitions)| {
                    OffsetCommitRequestTopic::default()
                        .with_name(TopicName(StrBytes::from_string(name)))
                        .with_partitions(partitions)
                })
                .collect(),
        );
    let response = services
        .brokers
        .send(coordinator, OFFSET_COMMIT_VERSION, &request)
        .await?;
    let refused: Vec<i16> = response
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| p.error_code)
        .filter(|&c| c != 0)
        .collect();
    match refused.first() {
        None => Ok(()),
        Some(code) => Err(format!("OffsetCommit answered error code {code}")),
    }
}

/// A destination partition's (log start, high watermark), from its leader.
async fn log_range(services: &Arc<MirrorServices>, tp: &TopicPartition) -> Option<(i64, i64)> {
    let leader = services
        .controller
        .image()
        .topic_by_name(&tp.topic)?
        .partitions
        .get(&tp.partition)?
        .leader;
    if leader == services.node_id {
        let partition = services.replicas.hosted_partition(tp)?;
        let log = partition.log().read();
        return Some((log.log_start_offset(), log.high_watermark()));
    }
    let ask = |timestamp: i64| {
        ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(tp.topic.clone())))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(tp.partition)
                    .with_timestamp(timestamp)])])
    };
    let mut range = [0i64; 2];
    for (slot, timestamp) in range.iter_mut().zip([-2, -1]) {
        let response = services
            .brokers
            .send(leader, LIST_OFFSETS_VERSION, &ask(timestamp))
            .await
            .ok()?;
        *slot = response
            .topics
            .first()?
            .partitions
            .first()
            .filter(|p| p.error_code == 0)?
            .offset;
    }
    Some((range[0], range[1]))
}

/// Mirrors whose source was last seen without an authorizer.
static NO_SOURCE_AUTHORIZER: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// ACLs the mirror's rules select that this cluster lacks are created
/// (the sync adds; it never deletes ACLs made here).
async fn sync_acls(services: &Arc<MirrorServices>, config: &MirrorConfig) -> Result<(), String> {
    let source = source_of(services, config)?;
    let Some(acls) = source.acls().await? else {
        // A source without an authorizer has no ACLs to sync: said once.
        if NO_SOURCE_AUTHORIZER.lock().insert(config.name.to_string()) {
            info!(mirror = %config.name, "the source has no authorizer (SECURITY_DISABLED): no ACLs to sync");
        }
        return Ok(());
    };
    NO_SOURCE_AUTHORIZER.lock().remove(config.name.as_str());
    let image = services.controller.image();
    let missing: Vec<Acl> = acls
        .into_iter()
        .filter(|acl| {
            AclBinding::names(acl.resource_type, acl.operation, acl.permission).is_some_and(
                |(resource_type, operation, permission)| {
                    config.syncs_acl(&AclBinding {
                        resource_type,
                        resource_name: &acl.resource_name,
                        operation,
                        permission,
                        principal: &acl.principal,
                    })
                },
            )
        })
        .filter(|acl| !image.acls.values().any(|have| have == acl))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    info!(mirror = %config.name, acls = missing.len(), "syncing ACLs from the source");
    let results = services.controller.create_acls(&missing).await;
    match results.into_iter().find_map(Result::err) {
        None => Ok(()),
        Some(e) => Err(e.to_string()),
    }
}

/// How often [`run_due`] should be called.
pub const TICK: Duration = Duration::from_millis(500);
