//! Snapshots of the metadata image, as KRaft keeps them: record batches.
//!
//! A snapshot is a first batch holding one record (format byte 0 + postcard
//! of openraft's `SnapshotMeta`: last log id, membership, snapshot id),
//! followed by batches of metadata records which, applied in order to an
//! empty image, rebuild the image. The same bytes are the file on disk
//! (`quorum-snapshot`) and what a leader streams to a lagging follower.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

use openraft::SnapshotMeta;
use parking_lot::Mutex;

use super::batches::{put_batch, read_batches};
use super::state_file::write_atomically;
use super::{epoch_of, offset_of, LogId, Node};
use crate::image::{MetadataImage, TopicImage};
use crate::records::MetadataRecord;

pub(crate) const SNAPSHOT_FILE: &str = "quorum-snapshot";
const META_FORMAT: u8 = 0;
const RECORDS_PER_BATCH: usize = 1000;

pub(crate) type Meta = SnapshotMeta<u64, Node>;

pub(crate) fn encode(meta: &Meta, image: &MetadataImage) -> Vec<u8> {
    let epoch = meta.last_log_id.map_or(0, |id| epoch_of(id.leader_id.term));
    let mut value = vec![META_FORMAT];
    value.extend(postcard::to_allocvec(meta).expect("in-memory serialization cannot fail"));
    let mut out = Vec::new();
    put_batch(&mut out, 0, epoch, vec![value]);
    let records = image_records(image);
    let mut offset = 1;
    for chunk in records.chunks(RECORDS_PER_BATCH) {
        put_batch(
            &mut out,
            offset,
            epoch,
            chunk.iter().map(MetadataRecord::encode).collect(),
        );
        offset += chunk.len() as i64;
    }
    out
}

pub(crate) fn decode(bytes: &[u8]) -> Result<(Meta, MetadataImage), String> {
    let batches = read_batches(bytes).map_err(|e| e.to_string())?;
    let (first, rest) = batches.split_first().ok_or("empty snapshot")?;
    let meta: Meta = match first.values.as_slice() {
        [value] => match value.split_first() {
            Some((&META_FORMAT, body)) => {
                postcard::from_bytes(body).map_err(|e| format!("bad snapshot header: {e}"))?
            }
            _ => return Err("unknown snapshot format".into()),
        },
        _ => return Err("bad snapshot header batch".into()),
    };
    let offset = meta.last_log_id.map_or(-1, |id| offset_of(id.index));
    let records: Vec<&[u8]> = rest
        .iter()
        .flat_map(|b| b.values.iter().map(Vec::as_slice))
        .collect();
    Ok((meta, replay(offset, &records)?))
}

/// The image at `offset` that `records` (from [`encoded_image`]) rebuild.
pub(crate) fn image_from(offset: i64, records: &[Vec<u8>]) -> Result<MetadataImage, String> {
    let records: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
    replay(offset, &records)
}

/// Applies a snapshot's records to an empty image. Snapshots written before
/// fencing was made explicit carry a fence record only for fenced brokers,
/// so a broker without one is unfenced (a registration alone would replay
/// as fenced, as it does in the log).
fn replay(offset: i64, records: &[&[u8]]) -> Result<MetadataImage, String> {
    let mut image = MetadataImage::empty();
    let mut fence_recorded = BTreeSet::new();
    for bytes in records {
        let record = MetadataRecord::decode(bytes)
            .map_err(|e| format!("snapshot at offset {offset}: {e}"))?;
        if let MetadataRecord::BrokerFence { broker_id, .. } = &record {
            fence_recorded.insert(*broker_id);
        }
        image.apply(offset, &record);
    }
    for broker in image.brokers.values_mut() {
        if !fence_recorded.contains(&broker.id) {
            broker.fenced = false;
        }
    }
    image.offset = offset;
    Ok(image)
}

/// `image` as encoded records that rebuild it from an empty one.
pub(crate) fn encoded_image(image: &MetadataImage) -> Vec<Vec<u8>> {
    image_records(image)
        .iter()
        .map(MetadataRecord::encode)
        .collect()
}

/// Records that rebuild `image` from an empty one.
pub(crate) fn image_records(image: &MetadataImage) -> Vec<MetadataRecord> {
    let mut out = Vec::new();
    for (name, level) in &image.features {
        out.push(MetadataRecord::FeatureLevel {
            name: name.clone(),
            level: *level,
        });
    }
    for (controller_id, directory_id) in &image.controller_directories {
        out.push(MetadataRecord::ControllerDirectory {
            controller_id: *controller_id,
            directory_id: *directory_id,
        });
    }
    for b in image.brokers.values() {
        out.push(MetadataRecord::RegisterBroker {
            broker_id: b.id,
            incarnation_id: b.incarnation_id,
            endpoints: b.endpoints.clone(),
            rack: b.rack.clone(),
        });
        // Always explicit: a registration alone replays as fenced.
        out.push(MetadataRecord::BrokerFence {
            broker_id: b.id,
            fenced: b.fenced,
        });
    }
    let mut topics: Vec<&TopicImage> = image.topics.values().collect();
    // The topic a name resolves to goes last among those with that name, so
    // replaying leaves the name index as it was.
    topics.sort_by_key(|t| (&t.name, image.topic_ids.get(&t.name) == Some(&t.id), t.id));
    for t in topics {
        out.push(MetadataRecord::Topic {
            name: t.name.clone(),
            topic_id: t.id,
        });
        for (partition, p) in &t.partitions {
            out.push(MetadataRecord::Partition {
                topic_id: t.id,
                partition: *partition,
                replicas: p.replicas.clone(),
                isr: p.isr.clone(),
                leader: p.leader,
                leader_epoch: p.leader_epoch,
                partition_epoch: p.partition_epoch,
                elr: p.elr.clone(),
                last_known_elr: p.last_known_elr.clone(),
            });
            if !p.adding_replicas.is_empty() || !p.removing_replicas.is_empty() {
                out.push(MetadataRecord::PartitionReassignment {
                    topic_id: t.id,
                    partition: *partition,
                    adding: p.adding_replicas.clone(),
                    removing: p.removing_replicas.clone(),
                });
            }
        }
    }
    let mut configs: Vec<_> = image.configs.iter().collect();
    configs.sort_by(|a, b| a.0.cmp(b.0));
    for ((resource_type, resource_name), entries) in configs {
        for (name, value) in entries {
            out.push(MetadataRecord::Config {
                resource_type: *resource_type,
                resource_name: resource_name.clone(),
                name: name.clone(),
                value: Some(value.clone()),
            });
        }
    }
    for ((user, mechanism), credential) in &image.scram_credentials {
        out.push(MetadataRecord::ScramCredential {
            user: user.clone(),
            mechanism: *mechanism,
            credential: Some(credential.clone()),
        });
    }
    for (id, acl) in &image.acls {
        out.push(MetadataRecord::AccessControlEntry {
            id: *id,
            acl: acl.clone(),
        });
    }
    for (entity, keys) in &image.client_quotas {
        for (key, value) in keys {
            out.push(MetadataRecord::ClientQuota {
                entity: entity.clone().into_iter().collect(),
                key: key.clone(),
                value: Some(*value),
            });
        }
    }
    out.push(MetadataRecord::ProducerIds {
        broker_id: -1,
        next_producer_id: image.next_producer_id,
    });
    out
}

/// The snapshot file. Snapshots are built concurrently with installs, so a
/// save never replaces a newer snapshot with an older one: the log may
/// already be purged up to the newer one.
pub(crate) struct SnapshotStore {
    path: PathBuf,
    saved: Mutex<Option<Meta>>,
}

impl SnapshotStore {
    /// Opens the store and loads the snapshot in `dir`, if there is one.
    pub fn open(dir: &Path) -> ottla_storage::Result<(Self, Option<(Meta, MetadataImage)>)> {
        let path = dir.join(SNAPSHOT_FILE);
        let loaded = match std::fs::read(&path) {
            Ok(bytes) => Some(
                decode(&bytes)
                    .map_err(|reason| ottla_storage::StorageError::corrupt_file(&path, reason))?,
            ),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e.into()),
        };
        let store = Self {
            path,
            saved: Mutex::new(loaded.as_ref().map(|(meta, _)| meta.clone())),
        };
        Ok((store, loaded))
    }

    /// Persists a snapshot unless a newer one is saved already.
    pub fn save(&self, meta: &Meta, bytes: &[u8]) -> io::Result<()> {
        let mut saved = self.saved.lock();
        let last: Option<LogId> = meta.last_log_id;
        if saved.as_ref().is_some_and(|s| s.last_log_id > last) {
            return Ok(());
        }
        write_atomically(&self.path, bytes)?;
        *saved = Some(meta.clone());
        Ok(())
    }

    /// The saved snapshot's bytes.
    pub fn read(&self) -> io::Result<Option<(Meta, Vec<u8>)>> {
        let saved = self.saved.lock();
        match saved.as_ref() {
            Some(meta) => Ok(Some((meta.clone(), std::fs::read(&self.path)?))),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use openraft::{CommittedLeaderId, Membership, StoredMembership};
    use uuid::Uuid;

    use super::*;
    use crate::records::acl::Acl;
    use crate::records::scram::{ScramCredential, ScramMechanism};
    use crate::records::{Endpoint, CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC};

    fn sample_image() -> MetadataImage {
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let records = vec![
            MetadataRecord::FeatureLevel {
                name: "metadata.version".into(),
                level: 27,
            },
            MetadataRecord::RegisterBroker {
                broker_id: 1,
                incarnation_id: Uuid::from_u128(9),
                endpoints: vec![Endpoint {
                    listener: "PLAINTEXT".into(),
                    host: "h1".into(),
                    port: 9092,
                    security_protocol: "PLAINTEXT".into(),
                }],
                rack: Some("r1".into()),
            },
            MetadataRecord::RegisterBroker {
                broker_id: 2,
                incarnation_id: Uuid::from_u128(10),
                endpoints: Vec::new(),
                rack: None,
            },
            MetadataRecord::BrokerFence {
                broker_id: 2,
                fenced: true,
            },
            MetadataRecord::BrokerFence {
                broker_id: 1,
                fenced: false,
            },
            MetadataRecord::Topic {
                name: "orders".into(),
                topic_id: a,
            },
            MetadataRecord::Partition {
                topic_id: a,
                partition: 0,
                replicas: vec![1, 2],
                isr: vec![1, 2],
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                elr: Vec::new(),
                last_known_elr: Vec::new(),
            },
            MetadataRecord::PartitionChange {
                topic_id: a,
                partition: 0,
                leader: Some(2),
                isr: Some(vec![2]),
                replicas: None,
                elr: Some(vec![1]),
                last_known_elr: None,
            },
            MetadataRecord::Topic {
                name: "users".into(),
                topic_id: b,
            },
            MetadataRecord::Config {
                resource_type: CONFIG_RESOURCE_TOPIC,
                resource_name: "users".into(),
                name: "cleanup.policy".into(),
                value: Some("compact".into()),
            },
            MetadataRecord::Config {
                resource_type: CONFIG_RESOURCE_BROKER,
                resource_name: "1".into(),
                name: "log.retention.ms".into(),
                value: Some("1000".into()),
            },
            MetadataRecord::ProducerIds {
                broker_id: 1,
                next_producer_id: 5000,
            },
            MetadataRecord::ScramCredential {
                user: "alice".into(),
                mechanism: ScramMechanism::Sha256,
                credential: Some(ScramCredential {
                    salt: vec![1],
                    stored_key: vec![2; 32],
                    server_key: vec![3; 32],
                    iterations: 4096,
                }),
            },
            MetadataRecord::AccessControlEntry {
                id: Uuid::from_u128(5),
                acl: Acl {
                    resource_type: 2,
                    resource_name: "orders".into(),
                    pattern_type: 3,
                    principal: "User:alice".into(),
                    host: "*".into(),
                    operation: 4,
                    permission: 3,
                },
            },
        ];
        let mut image = MetadataImage::empty();
        for (i, r) in records.iter().enumerate() {
            image.apply(i as i64, r);
        }
        image.offset = 41;
        image
    }

    fn meta() -> Meta {
        let voters = BTreeMap::from([(1, Node::default()), (2, Node::default())]);
        let membership = Membership::new(vec![BTreeSet::from([1, 2])], voters);
        let last = LogId::new(CommittedLeaderId::new(3, 1), 41);
        Meta {
            last_log_id: Some(last),
            last_membership: StoredMembership::new(
                Some(LogId::new(CommittedLeaderId::new(1, 1), 0)),
                membership,
            ),
            snapshot_id: "41-3".into(),
        }
    }

    #[test]
    fn snapshot_rebuilds_the_image() {
        let image = sample_image();
        let (meta2, image2) = decode(&encode(&meta(), &image)).unwrap();
        assert_eq!(meta2, meta());
        assert_eq!(image2, image);
        let (_, empty) = decode(&encode(&Meta::default(), &MetadataImage::empty())).unwrap();
        assert_eq!(empty, MetadataImage::empty());
    }

    #[test]
    fn unfenced_brokers_stay_unfenced() {
        let image = sample_image();
        assert!(!image.brokers[&1].fenced && image.brokers[&2].fenced);
        let (_, rebuilt) = decode(&encode(&meta(), &image)).unwrap();
        assert!(!rebuilt.brokers[&1].fenced, "{:?}", rebuilt.brokers);
        assert!(rebuilt.brokers[&2].fenced, "{:?}", rebuilt.brokers);
    }

    #[test]
    fn snapshots_without_unfence_records_are_read_as_written() {
        // Earlier builds wrote a fence record for fenced brokers only.
        let register = |broker_id| MetadataRecord::RegisterBroker {
            broker_id,
            incarnation_id: Uuid::from_u128(broker_id as u128),
            endpoints: Vec::new(),
            rack: None,
        };
        let records = [
            register(1),
            register(2),
            MetadataRecord::BrokerFence {
                broker_id: 2,
                fenced: true,
            },
        ];
        let mut bytes = Vec::new();
        let header = [vec![META_FORMAT], postcard::to_allocvec(&meta()).unwrap()].concat();
        put_batch(&mut bytes, 0, 3, vec![header]);
        put_batch(
            &mut bytes,
            1,
            3,
            records.iter().map(MetadataRecord::encode).collect(),
        );
        let (_, image) = decode(&bytes).unwrap();
        assert!(!image.brokers[&1].fenced && image.brokers[&2].fenced);
        assert_eq!(image.offset, 41);
        let sent: Vec<Vec<u8>> = records.iter().map(MetadataRecord::encode).collect();
        let image = image_from(41, &sent).unwrap();
        assert!(!image.brokers[&1].fenced && image.brokers[&2].fenced);
    }

    #[test]
    fn older_snapshots_never_replace_newer_ones() {
        let dir = tempfile::tempdir().unwrap();
        let (store, loaded) = SnapshotStore::open(dir.path()).unwrap();
        assert!(loaded.is_none() && store.read().unwrap().is_none());
        let new = meta();
        let mut old = meta();
        old.last_log_id = Some(LogId::new(CommittedLeaderId::new(3, 1), 40));
        store.save(&new, &encode(&new, &sample_image())).unwrap();
        store
            .save(&old, &encode(&old, &MetadataImage::empty()))
            .unwrap();
        assert_eq!(store.read().unwrap().unwrap().0, new);
        let (store, loaded) = SnapshotStore::open(dir.path()).unwrap();
        assert_eq!(loaded, Some((new.clone(), sample_image())));
        assert_eq!(store.read().unwrap().unwrap().0, new);
    }
}
