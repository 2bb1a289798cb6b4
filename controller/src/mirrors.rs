//! Mirror metadata (KIP-1279): mirrors as config resources, the
//! `mirror.name` binding of topics, and leader-epoch bumps for failover.
//!
//! A mirror is a [`CONFIG_RESOURCE_MIRROR`] resource whose keys are its
//! CreateMirror configs. A topic is bound to a mirror by its `mirror.name`
//! config, whose suffix records what was last asked: `<m>` mirror,
//! `<m>.paused` pause, `<m>.removed` stop and become writable (failover).
//! Partition leaders react to these values; the controller only checks
//! that each request makes sense from the current value.
//!
//! The broker validates names and configs (the `ottla-mirror` crate) before
//! calling in here; this module keeps the metadata consistent.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use ottla_protocol::mirror::errors::{self, MirrorError};
use uuid::Uuid;

use crate::controller::{Controller, ControllerError, ControllerResult, NewTopic};
use crate::image::MetadataImage;
use crate::records::{
    MetadataRecord, CONFIG_RESOURCE_MIRROR, CONFIG_RESOURCE_TOPIC,
    MIRROR_DISCARD_LOCAL_WRITES_CONFIG, MIRROR_NAME_CONFIG,
};

const PAUSED: &str = ".paused";
const REMOVED: &str = ".removed";

/// What a mirror topic request asks of each topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MirrorTopicOp {
    /// AddTopicsToMirror: start mirroring (also re-adds a removed topic).
    Add,
    /// RemoveTopicsFromMirror: fail over (stop, then writable).
    Remove,
    Pause,
    Resume,
}

/// One topic of a mirror topic request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorTopic {
    pub name: String,
    /// For [`MirrorTopicOp::Add`]: the source topic's id and partition
    /// count, with which a missing destination topic is created.
    pub source: Option<(Uuid, i32)>,
    /// For [`MirrorTopicOp::Add`]: the operator confirmed discarding local
    /// writes the source cannot vouch for (`--discard-local-writes`).
    pub discard_local_writes: bool,
}

fn mirror_error(e: MirrorError, message: impl Into<String>) -> ControllerError {
    ControllerError {
        code: e.code,
        message: message.into(),
    }
}

fn unknown_mirror(name: &str) -> ControllerError {
    mirror_error(
        errors::UNKNOWN_MIRROR,
        format!("No mirror named '{name}' exists."),
    )
}

fn binding_record(topic: &str, value: String) -> MetadataRecord {
    MetadataRecord::Config {
        resource_type: CONFIG_RESOURCE_TOPIC,
        resource_name: topic.to_string(),
        name: MIRROR_NAME_CONFIG.to_string(),
        value: Some(value),
    }
}

impl Controller {
    /// Creates mirror `name` with `configs` (already validated by the
    /// caller). With `validate_only`, only checks that the name is free.
    pub async fn create_mirror(
        &self,
        name: &str,
        configs: &BTreeMap<String, String>,
        validate_only: bool,
    ) -> ControllerResult<()> {
        self.run_fallible(|image| {
            if image.mirror_configs(name).is_some() {
                return Err(mirror_error(
                    errors::MIRROR_ALREADY_EXISTS,
                    format!("A mirror named '{name}' already exists."),
                ));
            }
            if configs.is_empty() {
                return Err(ControllerError::new(
                    ResponseError::InvalidConfig,
                    "a mirror needs at least bootstrap.servers",
                ));
            }
            if validate_only {
                return Ok(Vec::new());
            }
            Ok(configs
                .iter()
                .map(|(key, value)| MetadataRecord::Config {
                    resource_type: CONFIG_RESOURCE_MIRROR,
                    resource_name: name.to_string(),
                    name: key.clone(),
                    value: Some(value.clone()),
                })
                .collect())
        })
        .await
    }

    /// Deletes mirror `name`, refused while any topic is still mirrored or
    /// paused by it (remove the topics first).
    pub async fn delete_mirror(&self, name: &str) -> ControllerResult<()> {
        self.run_fallible(|image| {
            let configs = image
                .mirror_configs(name)
                .ok_or_else(|| unknown_mirror(name))?;
            let paused = format!("{name}{PAUSED}");
            let bound: Vec<&str> = image
                .topic_ids
                .keys()
                .filter(|t| {
                    image
                        .mirror_binding(t)
                        .is_some_and(|b| b == name || b == paused)
                })
                .map(String::as_str)
                .collect();
            if !bound.is_empty() {
                return Err(mirror_error(
                    errors::MIRROR_NOT_EMPTY,
                    format!(
                        "Mirror '{name}' still mirrors {}; remove them from the mirror first.",
                        bound.join(", ")
                    ),
                ));
            }
            Ok(configs
                .keys()
                .map(|key| MetadataRecord::Config {
                    resource_type: CONFIG_RESOURCE_MIRROR,
                    resource_name: name.to_string(),
                    name: key.clone(),
                    value: None,
                })
                .collect())
        })
        .await
    }

    /// Applies `op` to each topic of mirror `mirror`: per topic, its id or
    /// why it was refused. Adding a topic the destination lacks creates it
    /// with the source's id and partition count.
    pub async fn change_mirror_topics(
        &self,
        mirror: &str,
        op: MirrorTopicOp,
        topics: &[MirrorTopic],
    ) -> Vec<(String, ControllerResult<Uuid>)> {
        let (mut results, error) = self
            .run(|image| {
                let mut records = Vec::new();
                let mut results = Vec::new();
                let mut created: Vec<String> = Vec::new();
                for topic in topics {
                    let outcome = if image.mirror_configs(mirror).is_none() {
                        Err(unknown_mirror(mirror))
                    } else {
                        self.plan_mirror_topic(image, mirror, op, topic, &created)
                    };
                    let outcome = outcome.map(|(planned, id, creates)| {
                        records.extend(planned);
                        if creates {
                            created.push(topic.name.clone());
                        }
                        id
                    });
                    results.push((topic.name.clone(), outcome));
                }
                (records, results)
            })
            .await;
        if let Some(e) = error {
            for (_, r) in results.iter_mut().filter(|(_, r)| r.is_ok()) {
                *r = Err(e.clone());
            }
        }
        results
    }

    /// The records for one topic, its id, and whether they create it.
    fn plan_mirror_topic(
        &self,
        image: &MetadataImage,
        mirror: &str,
        op: MirrorTopicOp,
        topic: &MirrorTopic,
        created: &[String],
    ) -> ControllerResult<(Vec<MetadataRecord>, Uuid, bool)> {
        let name = topic.name.as_str();
        let current = image.mirror_binding(name);
        let paused = format!("{mirror}{PAUSED}");
        let removed = format!("{mirror}{REMOVED}");
        let is = |value: &str| current == Some(value);
        let not_in_mirror = || {
            mirror_error(
                errors::TOPIC_NOT_IN_MIRROR,
                match current {
                    Some(other) => format!(
                        "Topic '{name}' is not mirrored by '{mirror}' (mirror.name={other})."
                    ),
                    None => format!("Topic '{name}' is not a mirror topic."),
                },
            )
        };
        let existing = image.topic_by_name(name);
        if op != MirrorTopicOp::Add && existing.is_none() {
            return Err(ControllerError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("Topic '{name}' does not exist."),
            ));
        }
        let rebind = |value: String| {
            let id = existing.map(|t| t.id).unwrap_or_default();
            Ok((vec![binding_record(name, value)], id, false))
        };
        match op {
            MirrorTopicOp::Add => self.plan_add(image, mirror, topic, current, created),
            MirrorTopicOp::Remove if is(mirror) || is(&paused) => rebind(removed),
            MirrorTopicOp::Remove if is(&removed) => Err(mirror_error(
                errors::MIRROR_TOPIC_BEING_STOPPED,
                format!("Topic '{name}' was already removed from mirror '{mirror}'."),
            )),
            MirrorTopicOp::Pause if is(mirror) => rebind(paused),
            MirrorTopicOp::Pause if is(&paused) => Err(mirror_error(
                errors::MIRROR_TOPIC_ALREADY_PAUSED,
                format!("Topic '{name}' is already paused."),
            )),
            MirrorTopicOp::Resume if is(&paused) => rebind(mirror.to_string()),
            MirrorTopicOp::Resume if is(mirror) => Err(mirror_error(
                errors::MIRROR_TOPIC_NOT_PAUSED,
                format!("Topic '{name}' is not paused."),
            )),
            MirrorTopicOp::Remove | MirrorTopicOp::Pause | MirrorTopicOp::Resume => {
                Err(not_in_mirror())
            }
        }
    }

    fn plan_add(
        &self,
        image: &MetadataImage,
        mirror: &str,
        topic: &MirrorTopic,
        current: Option<&str>,
        created: &[String],
    ) -> ControllerResult<(Vec<MetadataRecord>, Uuid, bool)> {
        let name = topic.name.as_str();
        if let Some(bound) = current.filter(|b| !b.ends_with(REMOVED)) {
            return Err(mirror_error(
                errors::TOPIC_ALREADY_IN_MIRROR,
                format!("Topic '{name}' already belongs to a mirror (mirror.name={bound})."),
            ));
        }
        let Some((source_id, partitions)) = topic.source else {
            return Err(ControllerError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("Topic '{name}' does not exist on the source cluster."),
            ));
        };
        let binding = binding_record(name, mirror.to_string());
        // Each add states the confirmation afresh: an earlier one does not
        // carry over to a later failback.
        let confirmed = topic.discard_local_writes.then(|| "true".to_string());
        let has_confirmation = image
            .configs_of(CONFIG_RESOURCE_TOPIC, name)
            .is_some_and(|c| c.contains_key(MIRROR_DISCARD_LOCAL_WRITES_CONFIG));
        let confirmation =
            (confirmed.is_some() || has_confirmation).then(|| MetadataRecord::Config {
                resource_type: CONFIG_RESOURCE_TOPIC,
                resource_name: name.to_string(),
                name: MIRROR_DISCARD_LOCAL_WRITES_CONFIG.to_string(),
                value: confirmed,
            });
        match image.topic_by_name(name) {
            Some(t) if t.id != source_id => Err(ControllerError::new(
                ResponseError::InconsistentTopicId,
                format!(
                    "Topic '{name}' exists on the destination with id {} but has id {source_id} \
                     on the source; mirroring keeps topic ids, so delete the destination topic \
                     first.",
                    t.id
                ),
            )),
            Some(t) => Ok((
                std::iter::once(binding).chain(confirmation).collect(),
                t.id,
                false,
            )),
            None => {
                let new_topic = NewTopic {
                    name: name.to_string(),
                    num_partitions: partitions,
                    replication_factor: -1,
                    topic_id: Some(source_id),
                    ..NewTopic::default()
                };
                let (mut records, topic) = self.plan_topic(image, created, new_topic)?;
                records.push(binding);
                Ok((records, topic.topic_id, true))
            }
        }
    }

    /// BumpLeaderEpochs from the leader `broker_id`: raises each partition's
    /// leader epoch (which the leader last saw as `seen_epoch`) to
    /// `max(current + 1, min_epoch)`. Per partition, the new epoch or why
    /// not (FENCED_LEADER_EPOCH / NOT_LEADER_OR_FOLLOWER for a stale caller).
    pub async fn bump_leader_epochs(
        &self,
        broker_id: i32,
        partitions: &[(Uuid, i32, i32, i32)],
    ) -> Vec<ControllerResult<i32>> {
        let (mut results, error) = self.run(|image| {
            let mut records = Vec::new();
            let results: Vec<_> = partitions
                .iter()
                .map(|&(topic_id, partition, seen_epoch, min_epoch)| {
                    let p = image
                        .topic_by_id(&topic_id)
                        .and_then(|t| t.partitions.get(&partition))
                        .ok_or_else(|| {
                            ControllerError::new(
                                ResponseError::UnknownTopicOrPartition,
                                format!("partition {partition} of topic {topic_id} does not exist"),
                            )
                        })?;
                    if p.leader != broker_id {
                        return Err(ControllerError::new(
                            ResponseError::NotLeaderOrFollower,
                            format!("broker {broker_id} does not lead partition {partition} of topic {topic_id}"),
                        ));
                    }
                    if p.leader_epoch != seen_epoch {
                        return Err(ControllerError::new(
                            ResponseError::FencedLeaderEpoch,
                            format!(
                                "leader epoch {seen_epoch} is stale: the partition is at {}",
                                p.leader_epoch
                            ),
                        ));
                    }
                    let leader_epoch = (p.leader_epoch + 1).max(min_epoch);
                    records.push(MetadataRecord::LeaderEpochBump {
                        topic_id,
                        partition,
                        leader_epoch,
                    });
                    Ok(leader_epoch)
                })
                .collect();
            (records, results)
        }).await;
        if let Some(e) = error {
            for r in results.iter_mut().filter(|r| r.is_ok()) {
                *r = Err(e.clone());
            }
        }
        results
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::tests::controller;
    use crate::AlterOp;

    fn code(r: &ControllerResult<Uuid>) -> i16 {
        r.as_ref().map_or_else(|e| e.code, |_| 0)
    }

    #[test]
    fn mirror_topics_follow_the_binding_rules() {
        let dir = tempfile::tempdir().unwrap();
        let c = controller(dir.path());
        let configs = BTreeMap::from([("bootstrap.servers".to_string(), "src:9092".to_string())]);
        c.block_on(c.create_mirror("east", &configs, false))
            .unwrap();
        assert_eq!(
            c.block_on(c.create_mirror("east", &configs, false))
                .unwrap_err()
                .code,
            errors::MIRROR_ALREADY_EXISTS.code
        );
        let id = Uuid::from_u128(42);
        let orders = MirrorTopic {
            name: "orders".into(),
            source: Some((id, 3)),
            discard_local_writes: false,
        };
        let added = c.block_on(c.change_mirror_topics(
            "east",
            MirrorTopicOp::Add,
            std::slice::from_ref(&orders),
        ));
        assert_eq!(added[0].1, Ok(id));
        let image = c.image();
        let topic = image.topic_by_name("orders").unwrap();
        assert_eq!((topic.id, topic.partitions.len()), (id, 3));
        assert_eq!(image.mirror_binding("orders"), Some("east"));
        let again = c.block_on(c.change_mirror_topics(
            "east",
            MirrorTopicOp::Add,
            std::slice::from_ref(&orders),
        ));
        assert_eq!(code(&again[0].1), errors::TOPIC_ALREADY_IN_MIRROR.code);

        // Configs of a bound topic can still change, and the binding stays.
        c.block_on(c.alter_configs(
            CONFIG_RESOURCE_TOPIC,
            "orders",
            &[("retention.ms".into(), AlterOp::Set, Some("1000".into()))],
            false,
            false,
        ))
        .unwrap();
        assert_eq!(c.image().mirror_binding("orders"), Some("east"));

        let op = |op| {
            c.block_on(c.change_mirror_topics("east", op, std::slice::from_ref(&orders)))
                .remove(0)
                .1
        };
        assert_eq!(
            code(&op(MirrorTopicOp::Resume)),
            errors::MIRROR_TOPIC_NOT_PAUSED.code
        );
        assert_eq!(op(MirrorTopicOp::Pause), Ok(id));
        assert_eq!(c.image().mirror_binding("orders"), Some("east.paused"));
        assert_eq!(
            code(&op(MirrorTopicOp::Pause)),
            errors::MIRROR_TOPIC_ALREADY_PAUSED.code
        );
        assert_eq!(
            c.block_on(c.delete_mirror("east")).unwrap_err().code,
            errors::MIRROR_NOT_EMPTY.code
        );
        assert_eq!(op(MirrorTopicOp::Remove), Ok(id));
        assert_eq!(c.image().mirror_binding("orders"), Some("east.removed"));
        assert_eq!(
            code(&op(MirrorTopicOp::Remove)),
            errors::MIRROR_TOPIC_BEING_STOPPED.code
        );
        c.block_on(c.delete_mirror("east")).unwrap();
        assert!(c.image().mirror_configs("east").is_none());
        let gone = c.block_on(c.change_mirror_topics("east", MirrorTopicOp::Add, &[orders]));
        assert_eq!(code(&gone[0].1), errors::UNKNOWN_MIRROR.code);

        // A destination topic with another id is refused.
        c.block_on(c.create_mirror("west", &configs, false))
            .unwrap();
        let other = MirrorTopic {
            name: "orders".into(),
            source: Some((Uuid::from_u128(7), 3)),
            discard_local_writes: false,
        };
        let refused = c.block_on(c.change_mirror_topics("west", MirrorTopicOp::Add, &[other]));
        assert_eq!(
            code(&refused[0].1),
            ResponseError::InconsistentTopicId.code()
        );
    }

    #[test]
    fn a_discard_confirmation_holds_for_one_add_only() {
        let dir = tempfile::tempdir().unwrap();
        let c = controller(dir.path());
        let configs = BTreeMap::from([("bootstrap.servers".to_string(), "src:9092".to_string())]);
        c.block_on(c.create_mirror("east", &configs, false))
            .unwrap();
        let id = Uuid::from_u128(11);
        let add = |discard_local_writes| {
            let topic = MirrorTopic {
                name: "t".into(),
                source: Some((id, 1)),
                discard_local_writes,
            };
            let added = c.block_on(c.change_mirror_topics("east", MirrorTopicOp::Add, &[topic]));
            assert!(added[0].1.is_ok(), "{added:?}");
        };
        let remove = || {
            let topic = MirrorTopic {
                name: "t".into(),
                source: None,
                discard_local_writes: false,
            };
            c.block_on(c.change_mirror_topics("east", MirrorTopicOp::Remove, &[topic]));
        };
        let confirmation = || {
            c.image()
                .configs_of(CONFIG_RESOURCE_TOPIC, "t")
                .and_then(|c| c.get(MIRROR_DISCARD_LOCAL_WRITES_CONFIG).cloned())
        };
        add(false);
        assert_eq!(confirmation(), None);
        remove();
        add(true);
        assert_eq!(confirmation().as_deref(), Some("true"));
        remove();
        add(false);
        assert_eq!(confirmation(), None);
    }

    #[test]
    fn leader_epochs_are_bumped_above_what_is_asked() {
        let dir = tempfile::tempdir().unwrap();
        let c = controller(dir.path());
        let configs = BTreeMap::from([("bootstrap.servers".to_string(), "src:9092".to_string())]);
        c.block_on(c.create_mirror("east", &configs, false))
            .unwrap();
        let id = Uuid::from_u128(9);
        let topic = MirrorTopic {
            name: "t".into(),
            source: Some((id, 1)),
            discard_local_writes: false,
        };
        c.block_on(c.change_mirror_topics("east", MirrorTopicOp::Add, &[topic]));
        let epoch = c.image().topic_by_id(&id).unwrap().partitions[&0].leader_epoch;
        assert_eq!(
            c.block_on(c.bump_leader_epochs(1, &[(id, 0, epoch, 17)])),
            vec![Ok(17)]
        );
        assert_eq!(
            c.image().topic_by_id(&id).unwrap().partitions[&0].leader_epoch,
            17
        );
        // A stale epoch or another broker is refused; a low minimum still bumps.
        let stale = c.block_on(c.bump_leader_epochs(1, &[(id, 0, epoch, 30)]));
        assert_eq!(
            stale[0].as_ref().unwrap_err().code,
            ResponseError::FencedLeaderEpoch.code()
        );
        let other = c.block_on(c.bump_leader_epochs(2, &[(id, 0, 17, 30)]));
        assert_eq!(
            other[0].as_ref().unwrap_err().code,
            ResponseError::NotLeaderOrFollower.code()
        );
        assert_eq!(
            c.block_on(c.bump_leader_epochs(1, &[(id, 0, 17, 0)])),
            vec![Ok(18)]
        );
    }
}
