//! The metadata image: the cluster state obtained by applying every committed
//! metadata record in order. Brokers read it; only records change it.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use uuid::Uuid;

use crate::records::acl::Acls;
use crate::records::quota::ClientQuotas;
use crate::records::scram::ScramCredentials;
use crate::records::{
    Endpoint, MetadataRecord, CONFIG_RESOURCE_MIRROR, CONFIG_RESOURCE_TOPIC, MIRROR_NAME_CONFIG,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionImage {
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// An ongoing reassignment's new replicas (already in `replicas`).
    pub adding_replicas: Vec<i32>,
    /// An ongoing reassignment's replicas to drop once it completes.
    pub removing_replicas: Vec<i32>,
    /// Eligible leader replicas (KIP-966): replicas out of the ISR that
    /// still hold every committed record, since they left while the ISR was
    /// below min.insync.replicas (when the high watermark cannot move).
    pub elr: Vec<i32>,
    /// The leader the partition last had, kept once the ISR and the ELR
    /// are both empty: the replica most likely to hold the most data.
    pub last_known_elr: Vec<i32>,
}

#[cfg(test)]
impl PartitionImage {
    /// A partition at epoch 0, with no reassignment and no ELR (tests).
    pub(crate) fn with(replicas: &[i32], isr: &[i32], leader: i32) -> Self {
        Self {
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            leader,
            leader_epoch: 0,
            partition_epoch: 0,
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
            elr: Vec::new(),
            last_known_elr: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicImage {
    pub name: String,
    pub id: Uuid,
    pub partitions: BTreeMap<i32, PartitionImage>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerImage {
    pub id: i32,
    pub incarnation_id: Uuid,
    pub endpoints: Vec<Endpoint>,
    pub rack: Option<String>,
    pub fenced: bool,
}

/// Topics deleted between two images.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeletedTopics {
    pub names: BTreeSet<String>,
    pub ids: BTreeSet<Uuid>,
}

impl DeletedTopics {
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataImage {
    /// Offset of the last record applied (-1 for an empty log).
    pub offset: i64,
    pub topics: HashMap<Uuid, TopicImage>,
    pub topic_ids: BTreeMap<String, Uuid>,
    pub brokers: BTreeMap<i32, BrokerImage>,
    /// (resource type, resource name) -> key -> value
    pub configs: HashMap<(i8, String), BTreeMap<String, String>>,
    pub next_producer_id: i64,
    pub features: BTreeMap<String, i16>,
    /// SCRAM credentials by (user, mechanism).
    pub scram_credentials: ScramCredentials,
    /// ACLs by id.
    pub acls: Acls,
    /// Client quotas by entity.
    pub client_quotas: ClientQuotas,
    /// The metadata log directory of each controller of a dynamic quorum
    /// (KIP-853), by controller id.
    pub controller_directories: BTreeMap<i32, Uuid>,
}

impl MetadataImage {
    pub fn empty() -> Self {
        Self {
            offset: -1,
            ..Self::default()
        }
    }

    pub fn topic_by_name(&self, name: &str) -> Option<&TopicImage> {
        self.topic_ids.get(name).and_then(|id| self.topics.get(id))
    }

    pub fn topic_by_id(&self, id: &Uuid) -> Option<&TopicImage> {
        self.topics.get(id)
    }

    /// The topics of `before` this image no longer has, by id (a topic
    /// deleted and created again under its name is among them): their
    /// names and ids.
    pub fn topics_deleted_since(&self, before: &MetadataImage) -> DeletedTopics {
        let mut deleted = DeletedTopics::default();
        for (id, topic) in &before.topics {
            if !self.topics.contains_key(id) {
                deleted.names.insert(topic.name.clone());
                deleted.ids.insert(*id);
            }
        }
        deleted
    }

    pub fn configs_of(&self, resource_type: i8, name: &str) -> Option<&BTreeMap<String, String>> {
        self.configs.get(&(resource_type, name.to_string()))
    }

    /// The names of the config resources of `kind` that hold any config,
    /// sorted.
    pub fn config_resource_names(&self, kind: i8) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .configs
            .iter()
            .filter(|((k, _), configs)| *k == kind && !configs.is_empty())
            .map(|((_, name), _)| name.as_str())
            .collect();
        names.sort_unstable();
        names
    }

    /// The mirrors and their configs, by name.
    pub fn mirrors(&self) -> impl Iterator<Item = (&str, &BTreeMap<String, String>)> {
        self.configs
            .iter()
            .filter(|((kind, _), _)| *kind == CONFIG_RESOURCE_MIRROR)
            .map(|((_, name), configs)| (name.as_str(), configs))
    }

    pub fn mirror_configs(&self, name: &str) -> Option<&BTreeMap<String, String>> {
        self.configs_of(CONFIG_RESOURCE_MIRROR, name)
    }

    /// A topic's own setting of config `key` (not its broker default).
    pub fn topic_config(&self, topic: &str, key: &str) -> Option<&str> {
        self.configs_of(CONFIG_RESOURCE_TOPIC, topic)
            .and_then(|c| c.get(key))
            .map(String::as_str)
    }

    /// A topic's `mirror.name` config: the mirror it is bound to, with the
    /// `.paused` / `.removed` suffix of what was last asked of it.
    pub fn mirror_binding(&self, topic: &str) -> Option<&str> {
        self.configs_of(CONFIG_RESOURCE_TOPIC, topic)
            .and_then(|c| c.get(MIRROR_NAME_CONFIG))
            .map(String::as_str)
    }

    pub fn live_brokers(&self) -> impl Iterator<Item = &BrokerImage> {
        self.brokers.values().filter(|b| !b.fenced)
    }

    /// Applies one committed record. Records that refer to unknown topics are
    /// ignored: the controller never writes them, and a broker must not
    /// crash on a log it can still mostly understand.
    pub fn apply(&mut self, offset: i64, record: &MetadataRecord) {
        self.offset = offset;
        match record {
            MetadataRecord::Topic { name, topic_id } => {
                // A re-registered id under a new name must not leave its old
                // name resolving to it.
                if let Some(old) = self.topics.get(topic_id) {
                    if old.name != *name && self.topic_ids.get(&old.name) == Some(topic_id) {
                        self.topic_ids.remove(&old.name);
                    }
                }
                self.topic_ids.insert(name.clone(), *topic_id);
                self.topics.insert(
                    *topic_id,
                    TopicImage {
                        name: name.clone(),
                        id: *topic_id,
                        partitions: BTreeMap::new(),
                    },
                );
            }
            MetadataRecord::Partition {
                topic_id,
                partition,
                replicas,
                isr,
                leader,
                leader_epoch,
                partition_epoch,
                elr,
                last_known_elr,
            } => {
                if let Some(t) = self.topics.get_mut(topic_id) {
                    t.partitions.insert(
                        *partition,
                        PartitionImage {
                            replicas: replicas.clone(),
                            isr: isr.clone(),
                            leader: *leader,
                            leader_epoch: *leader_epoch,
                            partition_epoch: *partition_epoch,
                            adding_replicas: Vec::new(),
                            removing_replicas: Vec::new(),
                            elr: elr.clone(),
                            last_known_elr: last_known_elr.clone(),
                        },
                    );
                }
            }
            MetadataRecord::PartitionChange {
                topic_id,
                partition,
                leader,
                isr,
                replicas,
                elr,
                last_known_elr,
            } => {
                let Some(p) = self
                    .topics
                    .get_mut(topic_id)
                    .and_then(|t| t.partitions.get_mut(partition))
                else {
                    return;
                };
                // As in KRaft: a leader change bumps the leader epoch; any
                // change bumps the partition epoch.
                if let Some(l) = leader {
                    p.leader = *l;
                    p.leader_epoch += 1;
                }
                if let Some(i) = isr {
                    p.isr = i.clone();
                }
                if let Some(r) = replicas {
                    p.replicas = r.clone();
                }
                if let Some(e) = elr {
                    p.elr = e.clone();
                }
                if let Some(e) = last_known_elr {
                    p.last_known_elr = e.clone();
                }
                p.partition_epoch += 1;
            }
            MetadataRecord::PartitionReassignment {
                topic_id,
                partition,
                adding,
                removing,
            } => {
                if let Some(p) = self
                    .topics
                    .get_mut(topic_id)
                    .and_then(|t| t.partitions.get_mut(partition))
                {
                    p.adding_replicas = adding.clone();
                    p.removing_replicas = removing.clone();
                }
            }
            MetadataRecord::LeaderEpochBump {
                topic_id,
                partition,
                leader_epoch,
            } => {
                if let Some(p) = self
                    .topics
                    .get_mut(topic_id)
                    .and_then(|t| t.partitions.get_mut(partition))
                {
                    // Epochs only ever rise.
                    if *leader_epoch > p.leader_epoch {
                        p.leader_epoch = *leader_epoch;
                        p.partition_epoch += 1;
                    }
                }
            }
            MetadataRecord::RemoveTopic { topic_id } => {
                if let Some(t) = self.topics.remove(topic_id) {
                    // The name may already resolve to a newer topic.
                    if self.topic_ids.get(&t.name) == Some(topic_id) {
                        self.topic_ids.remove(&t.name);
                        self.configs
                            .remove(&(crate::records::CONFIG_RESOURCE_TOPIC, t.name));
                    }
                }
            }
            MetadataRecord::Config {
                resource_type,
                resource_name,
                name,
                value,
            } => {
                let key = (*resource_type, resource_name.clone());
                match value {
                    Some(v) => {
                        self.configs
                            .entry(key)
                            .or_default()
                            .insert(name.clone(), v.clone());
                    }
                    None => {
                        if let Some(c) = self.configs.get_mut(&key) {
                            c.remove(name);
                            if c.is_empty() {
                                self.configs.remove(&key);
                            }
                        }
                    }
                }
            }
            MetadataRecord::RegisterBroker {
                broker_id,
                incarnation_id,
                endpoints,
                rack,
            } => {
                self.brokers.insert(
                    *broker_id,
                    BrokerImage {
                        id: *broker_id,
                        incarnation_id: *incarnation_id,
                        endpoints: endpoints.clone(),
                        rack: rack.clone(),
                        // As in KRaft: a broker registers fenced and is unfenced
                        // by its first heartbeat.
                        fenced: true,
                    },
                );
            }
            MetadataRecord::ProducerIds {
                next_producer_id, ..
            } => {
                self.next_producer_id = self.next_producer_id.max(*next_producer_id);
            }
            MetadataRecord::FeatureLevel { name, level } => {
                self.features.insert(name.clone(), *level);
            }
            MetadataRecord::BrokerFence { broker_id, fenced } => {
                if let Some(b) = self.brokers.get_mut(broker_id) {
                    b.fenced = *fenced;
                }
            }
            MetadataRecord::UnregisterBroker { broker_id } => {
                self.brokers.remove(broker_id);
            }
            MetadataRecord::ControllerDirectory {
                controller_id,
                directory_id,
            } => {
                self.controller_directories
                    .insert(*controller_id, *directory_id);
            }
            MetadataRecord::ScramCredential {
                user,
                mechanism,
                credential,
            } => crate::records::scram::apply(
                &mut self.scram_credentials,
                user,
                *mechanism,
                credential.as_ref(),
            ),
            MetadataRecord::AccessControlEntry { id, acl } => {
                self.acls.insert(*id, acl.clone());
            }
            MetadataRecord::RemoveAccessControlEntry { id } => {
                self.acls.remove(id);
            }
            MetadataRecord::ClientQuota { entity, key, value } => {
                crate::records::quota::apply(&mut self.client_quotas, entity, key, *value)
            }
        }
    }
}
