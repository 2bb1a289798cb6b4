//! KRaft-style metadata records and their binary encoding.
//!
//! Encoding (big-endian), one record per Kafka record value in the metadata
//! log:
//! ```text
//! record  := type u16, version u16, body
//! string  := len i32 (-1 = null), utf-8 bytes
//! bytes   := len i32, bytes
//! uuid    := 16 bytes
//! array   := count i32, elements
//! ```
//! A record type is never reused; a new field means a new version, and
//! decoders accept every version they know. Unknown types are an error: a
//! broker must not apply a log it does not understand.

use ottla_protocol::schema::wire;
use thiserror::Error;
use uuid::Uuid;

pub mod acl;
pub mod quota;
pub mod scram;

use acl::Acl;
use quota::QuotaValue;
use scram::{ScramCredential, ScramMechanism};

#[derive(Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("metadata record truncated")]
    Truncated,
    #[error("unknown metadata record type {0} version {1}")]
    Unknown(u16, u16),
    #[error("invalid metadata record: {0}")]
    Invalid(&'static str),
}

/// Kafka's ConfigResource types as they appear in records.
pub const CONFIG_RESOURCE_TOPIC: i8 = 2;
pub const CONFIG_RESOURCE_BROKER: i8 = 4;
pub const CONFIG_RESOURCE_GROUP: i8 = 32;
/// Ottla's mirrors: one config resource per mirror, its CreateMirror
/// configs as keys (not a Kafka resource type; Kafka's stop at 32).
pub const CONFIG_RESOURCE_MIRROR: i8 = 64;
/// The topic config binding a topic to a mirror (`<mirror>`, `<mirror>.paused`
/// or `<mirror>.removed`); written only by the mirror operations.
pub const MIRROR_NAME_CONFIG: &str = "mirror.name";
/// Set (`true`) with the binding when the operator re-added the topic with
/// `--discard-local-writes`: PREPARING may then discard local writes the
/// source cannot vouch for. Written only by the mirror operations.
pub const MIRROR_DISCARD_LOCAL_WRITES_CONFIG: &str = "mirror.discard.local.writes";

/// The topic configs that belong to the mirror operations, not to clients
/// (AlterConfigs) or the source (config sync).
pub fn is_mirror_binding_config(key: &str) -> bool {
    key == MIRROR_NAME_CONFIG || key == MIRROR_DISCARD_LOCAL_WRITES_CONFIG
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub listener: String,
    pub host: String,
    pub port: u16,
    pub security_protocol: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataRecord {
    /// type 1
    Topic { name: String, topic_id: Uuid },
    /// type 2; version 1 adds the eligible leader replicas (KIP-966),
    /// written only when there are any.
    Partition {
        topic_id: Uuid,
        partition: i32,
        replicas: Vec<i32>,
        isr: Vec<i32>,
        leader: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        elr: Vec<i32>,
        last_known_elr: Vec<i32>,
    },
    /// type 3: leadership, ISR or ELR change; `None` leaves a field
    /// unchanged. Version 1 adds the ELR fields, written only when set.
    PartitionChange {
        topic_id: Uuid,
        partition: i32,
        leader: Option<i32>,
        isr: Option<Vec<i32>>,
        replicas: Option<Vec<i32>>,
        elr: Option<Vec<i32>>,
        last_known_elr: Option<Vec<i32>>,
    },
    /// type 4
    RemoveTopic { topic_id: Uuid },
    /// type 5: `value: None` deletes the key.
    Config {
        resource_type: i8,
        resource_name: String,
        name: String,
        value: Option<String>,
    },
    /// type 6
    RegisterBroker {
        broker_id: i32,
        incarnation_id: Uuid,
        endpoints: Vec<Endpoint>,
        rack: Option<String>,
    },
    /// type 7: the next block of producer ids starts at `next_producer_id`.
    ProducerIds {
        broker_id: i32,
        next_producer_id: i64,
    },
    /// type 8: `metadata.version`-like feature levels.
    FeatureLevel { name: String, level: i16 },
    /// type 9: fenced (true) or unfenced brokers.
    BrokerFence { broker_id: i32, fenced: bool },
    /// type 10: a user's SCRAM credential; `credential: None` removes it.
    ScramCredential {
        user: String,
        mechanism: ScramMechanism,
        credential: Option<ScramCredential>,
    },
    /// type 11: an ACL added (KRaft's AccessControlEntryRecord).
    AccessControlEntry { id: Uuid, acl: Acl },
    /// type 12: an ACL removed (KRaft's RemoveAccessControlEntryRecord).
    RemoveAccessControlEntry { id: Uuid },
    /// type 13: the replicas an ongoing reassignment adds and removes
    /// (both empty: none in progress).
    PartitionReassignment {
        topic_id: Uuid,
        partition: i32,
        adding: Vec<i32>,
        removing: Vec<i32>,
    },
    /// type 14: a partition's leader epoch raised to `leader_epoch` with the
    /// same leader (a mirror topic being failed over takes an epoch above
    /// every epoch it mirrored).
    LeaderEpochBump {
        topic_id: Uuid,
        partition: i32,
        leader_epoch: i32,
    },
    /// type 15: a client quota (KRaft's ClientQuotaRecord): `entity` maps
    /// entity types to names (`None`: the default entity); `value: None`
    /// removes the key.
    ClientQuota {
        entity: Vec<(String, Option<String>)>,
        key: String,
        value: Option<QuotaValue>,
    },
    /// type 16: a broker's registration removed (KRaft's
    /// UnregisterBrokerRecord, `kafka-cluster.sh unregister`).
    UnregisterBroker { broker_id: i32 },
    /// type 17: the directory a controller keeps its metadata log in, as
    /// that controller reported it when it joined a dynamic quorum
    /// (KIP-853): a voter is the pair (id, directory id), so a controller
    /// whose disk was replaced is a new replica, and RemoveRaftVoter names
    /// the pair.
    ControllerDirectory {
        controller_id: i32,
        directory_id: Uuid,
    },
}

impl MetadataRecord {
    pub fn type_id(&self) -> u16 {
        match self {
            Self::Topic { .. } => 1,
            Self::Partition { .. } => 2,
            Self::PartitionChange { .. } => 3,
            Self::RemoveTopic { .. } => 4,
            Self::Config { .. } => 5,
            Self::RegisterBroker { .. } => 6,
            Self::ProducerIds { .. } => 7,
            Self::FeatureLevel { .. } => 8,
            Self::BrokerFence { .. } => 9,
            Self::ScramCredential { .. } => 10,
            Self::AccessControlEntry { .. } => 11,
            Self::RemoveAccessControlEntry { .. } => 12,
            Self::PartitionReassignment { .. } => 13,
            Self::LeaderEpochBump { .. } => 14,
            Self::ClientQuota { .. } => 15,
            Self::UnregisterBroker { .. } => 16,
            Self::ControllerDirectory { .. } => 17,
        }
    }

    /// The version a record is written in: the oldest that holds it, so
    /// that a node of an older build reads every record it can.
    fn version(&self) -> u16 {
        match self {
            Self::Partition {
                elr,
                last_known_elr,
                ..
            } => u16::from(!elr.is_empty() || !last_known_elr.is_empty()),
            Self::PartitionChange {
                elr,
                last_known_elr,
                ..
            } => u16::from(elr.is_some() || last_known_elr.is_some()),
            _ => 0,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(64));
        w.u16(self.type_id());
        let version = self.version();
        w.u16(version);
        match self {
            Self::Topic { name, topic_id } => {
                w.string(Some(name));
                w.uuid(topic_id);
            }
            Self::Partition {
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
                w.uuid(topic_id);
                w.i32(*partition);
                w.i32s(replicas);
                w.i32s(isr);
                w.i32(*leader);
                w.i32(*leader_epoch);
                w.i32(*partition_epoch);
                if version >= 1 {
                    w.i32s(elr);
                    w.i32s(last_known_elr);
                }
            }
            Self::PartitionChange {
                topic_id,
                partition,
                leader,
                isr,
                replicas,
                elr,
                last_known_elr,
            } => {
                w.uuid(topic_id);
                w.i32(*partition);
                w.opt(leader.as_ref(), |w, v| w.i32(*v));
                w.opt(isr.as_ref(), |w, v| w.i32s(v));
                w.opt(replicas.as_ref(), |w, v| w.i32s(v));
                if version >= 1 {
                    w.opt(elr.as_ref(), |w, v| w.i32s(v));
                    w.opt(last_known_elr.as_ref(), |w, v| w.i32s(v));
                }
            }
            Self::RemoveTopic { topic_id } => w.uuid(topic_id),
            Self::Config {
                resource_type,
                resource_name,
                name,
                value,
            } => {
                w.0.push(*resource_type as u8);
                w.string(Some(resource_name));
                w.string(Some(name));
                w.string(value.as_deref());
            }
            Self::RegisterBroker {
                broker_id,
                incarnation_id,
                endpoints,
                rack,
            } => {
                w.i32(*broker_id);
                w.uuid(incarnation_id);
                w.i32(endpoints.len() as i32);
                for e in endpoints {
                    w.string(Some(&e.listener));
                    w.string(Some(&e.host));
                    w.u16(e.port);
                    w.string(Some(&e.security_protocol));
                }
                w.string(rack.as_deref());
            }
            Self::ProducerIds {
                broker_id,
                next_producer_id,
            } => {
                w.i32(*broker_id);
                w.0.extend_from_slice(&next_producer_id.to_be_bytes());
            }
            Self::FeatureLevel { name, level } => {
                w.string(Some(name));
                w.u16(*level as u16);
            }
            Self::BrokerFence { broker_id, fenced } => {
                w.i32(*broker_id);
                w.0.push(*fenced as u8);
            }
            Self::ScramCredential {
                user,
                mechanism,
                credential,
            } => encode_scram(&mut w, user, *mechanism, credential.as_ref()),
            Self::AccessControlEntry { id, acl } => encode_acl(&mut w, id, acl),
            Self::RemoveAccessControlEntry { id } => w.uuid(id),
            Self::PartitionReassignment {
                topic_id,
                partition,
                adding,
                removing,
            } => {
                w.uuid(topic_id);
                w.i32(*partition);
                w.i32s(adding);
                w.i32s(removing);
            }
            Self::LeaderEpochBump {
                topic_id,
                partition,
                leader_epoch,
            } => {
                w.uuid(topic_id);
                w.i32(*partition);
                w.i32(*leader_epoch);
            }
            Self::ClientQuota { entity, key, value } => {
                w.i32(entity.len() as i32);
                for (entity_type, name) in entity {
                    w.string(Some(entity_type));
                    w.string(name.as_deref());
                }
                w.string(Some(key));
                w.opt(value.as_ref(), |w, v| {
                    w.0.extend_from_slice(&v.0.to_bits().to_be_bytes())
                });
            }
            Self::UnregisterBroker { broker_id } => w.i32(*broker_id),
            Self::ControllerDirectory {
                controller_id,
                directory_id,
            } => {
                w.i32(*controller_id);
                w.uuid(directory_id);
            }
        }
        w.0
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader(wire::Reader::new(bytes));
        let type_id = r.u16()?;
        let version = r.u16()?;
        let newest = match type_id {
            2 | 3 => 1,
            _ => 0,
        };
        if version > newest {
            return Err(DecodeError::Unknown(type_id, version));
        }
        let record = match type_id {
            1 => Self::Topic {
                name: r.string()?.ok_or(DecodeError::Invalid("null topic name"))?,
                topic_id: r.uuid()?,
            },
            2 => Self::Partition {
                topic_id: r.uuid()?,
                partition: r.i32()?,
                replicas: r.i32s()?,
                isr: r.i32s()?,
                leader: r.i32()?,
                leader_epoch: r.i32()?,
                partition_epoch: r.i32()?,
                elr: if version >= 1 { r.i32s()? } else { Vec::new() },
                last_known_elr: if version >= 1 { r.i32s()? } else { Vec::new() },
            },
            3 => Self::PartitionChange {
                topic_id: r.uuid()?,
                partition: r.i32()?,
                leader: r.opt(|r| r.i32())?,
                isr: r.opt(|r| r.i32s())?,
                replicas: r.opt(|r| r.i32s())?,
                elr: if version >= 1 {
                    r.opt(|r| r.i32s())?
                } else {
                    None
                },
                last_known_elr: if version >= 1 {
                    r.opt(|r| r.i32s())?
                } else {
                    None
                },
            },
            4 => Self::RemoveTopic {
                topic_id: r.uuid()?,
            },
            5 => Self::Config {
                resource_type: r.u8()? as i8,
                resource_name: r.string()?.ok_or(DecodeError::Invalid("null resource"))?,
                name: r
                    .string()?
                    .ok_or(DecodeError::Invalid("null config name"))?,
                value: r.string()?,
            },
            6 => {
                let broker_id = r.i32()?;
                let incarnation_id = r.uuid()?;
                let n = r.count()?;
                let mut endpoints = Vec::with_capacity(n.min(16));
                for _ in 0..n {
                    endpoints.push(Endpoint {
                        listener: r.string()?.unwrap_or_default(),
                        host: r.string()?.unwrap_or_default(),
                        port: r.u16()?,
                        security_protocol: r.string()?.unwrap_or_default(),
                    });
                }
                Self::RegisterBroker {
                    broker_id,
                    incarnation_id,
                    endpoints,
                    rack: r.string()?,
                }
            }
            7 => Self::ProducerIds {
                broker_id: r.i32()?,
                next_producer_id: r.i64()?,
            },
            8 => Self::FeatureLevel {
                name: r.string()?.unwrap_or_default(),
                level: r.u16()? as i16,
            },
            9 => Self::BrokerFence {
                broker_id: r.i32()?,
                fenced: r.u8()? != 0,
            },
            10 => decode_scram(&mut r)?,
            11 => decode_acl(&mut r)?,
            12 => Self::RemoveAccessControlEntry { id: r.uuid()? },
            13 => Self::PartitionReassignment {
                topic_id: r.uuid()?,
                partition: r.i32()?,
                adding: r.i32s()?,
                removing: r.i32s()?,
            },
            14 => Self::LeaderEpochBump {
                topic_id: r.uuid()?,
                partition: r.i32()?,
                leader_epoch: r.i32()?,
            },
            15 => {
                let n = r.count()?;
                let entity = (0..n)
                    .map(|_| {
                        let entity_type = r
                            .string()?
                            .ok_or(DecodeError::Invalid("null quota entity type"))?;
                        Ok((entity_type, r.string()?))
                    })
                    .collect::<Result<_, DecodeError>>()?;
                Self::ClientQuota {
                    entity,
                    key: r.string()?.ok_or(DecodeError::Invalid("null quota key"))?,
                    value: r.opt(|r| Ok(QuotaValue(f64::from_bits(r.i64()? as u64))))?,
                }
            }
            16 => Self::UnregisterBroker {
                broker_id: r.i32()?,
            },
            17 => Self::ControllerDirectory {
                controller_id: r.i32()?,
                directory_id: r.uuid()?,
            },
            other => return Err(DecodeError::Unknown(other, version)),
        };
        if r.0.remaining() > 0 {
            return Err(DecodeError::Invalid("trailing bytes"));
        }
        Ok(record)
    }
}

fn encode_scram(
    w: &mut Writer,
    user: &str,
    mechanism: ScramMechanism,
    credential: Option<&ScramCredential>,
) {
    w.string(Some(user));
    w.0.push(mechanism.type_id() as u8);
    w.opt(credential, |w, c| {
        w.bytes(&c.salt);
        w.bytes(&c.stored_key);
        w.bytes(&c.server_key);
        w.i32(c.iterations);
    });
}

fn decode_scram(r: &mut Reader) -> Result<MetadataRecord, DecodeError> {
    Ok(MetadataRecord::ScramCredential {
        user: r.string()?.ok_or(DecodeError::Invalid("null SCRAM user"))?,
        mechanism: ScramMechanism::from_type(r.u8()? as i8)
            .ok_or(DecodeError::Invalid("unknown SCRAM mechanism"))?,
        credential: r.opt(|r| {
            Ok(ScramCredential {
                salt: r.bytes()?,
                stored_key: r.bytes()?,
                server_key: r.bytes()?,
                iterations: r.i32()?,
            })
        })?,
    })
}

fn encode_acl(w: &mut Writer, id: &Uuid, acl: &Acl) {
    w.uuid(id);
    w.0.push(acl.resource_type as u8);
    w.string(Some(&acl.resource_name));
    w.0.push(acl.pattern_type as u8);
    w.string(Some(&acl.principal));
    w.string(Some(&acl.host));
    w.0.push(acl.operation as u8);
    w.0.push(acl.permission as u8);
}

fn decode_acl(r: &mut Reader) -> Result<MetadataRecord, DecodeError> {
    let id = r.uuid()?;
    let string = |r: &mut Reader| r.string()?.ok_or(DecodeError::Invalid("null ACL field"));
    let acl = Acl {
        resource_type: r.u8()? as i8,
        resource_name: string(r)?,
        pattern_type: r.u8()? as i8,
        principal: string(r)?,
        host: string(r)?,
        operation: r.u8()? as i8,
        permission: r.u8()? as i8,
    };
    Ok(MetadataRecord::AccessControlEntry { id, acl })
}

struct Writer(Vec<u8>);

impl Writer {
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn uuid(&mut self, v: &Uuid) {
        self.0.extend_from_slice(v.as_bytes());
    }
    fn string(&mut self, s: Option<&str>) {
        match s {
            None => self.i32(-1),
            Some(s) => {
                self.i32(s.len() as i32);
                self.0.extend_from_slice(s.as_bytes());
            }
        }
    }
    fn bytes(&mut self, b: &[u8]) {
        self.i32(b.len() as i32);
        self.0.extend_from_slice(b);
    }
    fn i32s(&mut self, v: &[i32]) {
        self.i32(v.len() as i32);
        for x in v {
            self.i32(*x);
        }
    }
    fn opt<T>(&mut self, v: Option<&T>, f: impl FnOnce(&mut Self, &T)) {
        match v {
            None => self.0.push(0),
            Some(v) => {
                self.0.push(1);
                f(self, v);
            }
        }
    }
}

/// The shared big-endian reader, with this encoding's own strings, counts
/// and optional fields on top.
struct Reader<'a>(wire::Reader<'a>);

impl From<wire::DecodeError> for DecodeError {
    fn from(e: wire::DecodeError) -> Self {
        match e.kind {
            wire::DecodeErrorKind::Truncated { .. } => Self::Truncated,
            _ => Self::Invalid("malformed field"),
        }
    }
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        Ok(self.0.take(n as u64)?)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.0.i8()? as u8)
    }
    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(self.0.u16()?)
    }
    fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(self.0.i32()?)
    }
    fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(self.0.i64()?)
    }
    fn uuid(&mut self) -> Result<Uuid, DecodeError> {
        Ok(self.0.uuid()?)
    }
    /// An element count, bounded by the bytes left (no element is empty).
    fn count(&mut self) -> Result<usize, DecodeError> {
        let n = self.i32()?;
        if n < 0 || n as usize > self.0.remaining() {
            return Err(DecodeError::Invalid("bad element count"));
        }
        Ok(n as usize)
    }
    fn string(&mut self) -> Result<Option<String>, DecodeError> {
        let n = self.i32()?;
        if n < 0 {
            return Ok(None);
        }
        let b = self.take(n as usize)?;
        String::from_utf8(b.to_vec())
            .map(Some)
            .map_err(|_| DecodeError::Invalid("string is not utf-8"))
    }
    fn bytes(&mut self) -> Result<Vec<u8>, DecodeError> {
        let n = self.count()?;
        Ok(self.take(n)?.to_vec())
    }
    fn i32s(&mut self) -> Result<Vec<i32>, DecodeError> {
        let n = self.count()?;
        (0..n).map(|_| self.i32()).collect()
    }
    fn opt<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Option<T>, DecodeError> {
        match self.u8()? {
            0 => Ok(None),
            _ => f(self).map(Some),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<MetadataRecord> {
        let id = Uuid::from_u128(7);
        vec![
            MetadataRecord::Topic {
                name: "orders".into(),
                topic_id: id,
            },
            MetadataRecord::Partition {
                topic_id: id,
                partition: 3,
                replicas: vec![1, 2, 3],
                isr: vec![1, 2],
                leader: 1,
                leader_epoch: 4,
                partition_epoch: 9,
                elr: Vec::new(),
                last_known_elr: Vec::new(),
            },
            MetadataRecord::Partition {
                topic_id: id,
                partition: 4,
                replicas: vec![1, 2, 3],
                isr: Vec::new(),
                leader: -1,
                leader_epoch: 4,
                partition_epoch: 9,
                elr: vec![2, 3],
                last_known_elr: vec![1],
            },
            MetadataRecord::PartitionChange {
                topic_id: id,
                partition: 3,
                leader: Some(2),
                isr: None,
                replicas: Some(vec![2, 3]),
                elr: None,
                last_known_elr: None,
            },
            MetadataRecord::PartitionChange {
                topic_id: id,
                partition: 3,
                leader: None,
                isr: Some(vec![1]),
                replicas: None,
                elr: Some(vec![2]),
                last_known_elr: None,
            },
            MetadataRecord::RemoveTopic { topic_id: id },
            MetadataRecord::Config {
                resource_type: CONFIG_RESOURCE_TOPIC,
                resource_name: "orders".into(),
                name: "retention.ms".into(),
                value: None,
            },
            MetadataRecord::RegisterBroker {
                broker_id: 1,
                incarnation_id: Uuid::from_u128(9),
                endpoints: vec![Endpoint {
                    listener: "PLAINTEXT".into(),
                    host: "localhost".into(),
                    port: 9092,
                    security_protocol: "PLAINTEXT".into(),
                }],
                rack: Some("r1".into()),
            },
            MetadataRecord::ProducerIds {
                broker_id: 1,
                next_producer_id: 5000,
            },
            MetadataRecord::FeatureLevel {
                name: "metadata.version".into(),
                level: 27,
            },
            MetadataRecord::BrokerFence {
                broker_id: 2,
                fenced: true,
            },
            MetadataRecord::ScramCredential {
                user: "alice".into(),
                mechanism: ScramMechanism::Sha512,
                credential: Some(ScramCredential {
                    salt: vec![1, 2],
                    stored_key: vec![3; 64],
                    server_key: vec![4; 64],
                    iterations: 8192,
                }),
            },
            MetadataRecord::ScramCredential {
                user: "alice".into(),
                mechanism: ScramMechanism::Sha256,
                credential: None,
            },
            MetadataRecord::PartitionReassignment {
                topic_id: id,
                partition: 2,
                adding: vec![4, 5],
                removing: vec![1],
            },
            MetadataRecord::AccessControlEntry {
                id: Uuid::from_u128(11),
                acl: Acl {
                    resource_type: 2,
                    resource_name: "orders-".into(),
                    pattern_type: 4,
                    principal: "User:alice".into(),
                    host: "*".into(),
                    operation: 3,
                    permission: 3,
                },
            },
            MetadataRecord::RemoveAccessControlEntry {
                id: Uuid::from_u128(11),
            },
            MetadataRecord::LeaderEpochBump {
                topic_id: id,
                partition: 1,
                leader_epoch: 12,
            },
            MetadataRecord::ClientQuota {
                entity: vec![
                    ("user".into(), Some("alice".into())),
                    ("client-id".into(), None),
                ],
                key: "request_percentage".into(),
                value: Some(QuotaValue(12.5)),
            },
            MetadataRecord::ClientQuota {
                entity: vec![("ip".into(), None)],
                key: "connection_creation_rate".into(),
                value: None,
            },
            MetadataRecord::UnregisterBroker { broker_id: 3 },
            MetadataRecord::ControllerDirectory {
                controller_id: 2,
                directory_id: Uuid::from_u128(7),
            },
        ]
    }

    #[test]
    fn every_record_round_trips() {
        for r in samples() {
            assert_eq!(MetadataRecord::decode(&r.encode()).unwrap(), r);
        }
    }

    #[test]
    fn partition_records_without_an_elr_keep_version_0() {
        let versions: Vec<(u16, u16)> = samples()[1..5]
            .iter()
            .map(|r| {
                let b = r.encode();
                (
                    u16::from_be_bytes([b[0], b[1]]),
                    u16::from_be_bytes([b[2], b[3]]),
                )
            })
            .collect();
        assert_eq!(versions, [(2, 0), (2, 1), (3, 0), (3, 1)]);
        assert_eq!(
            MetadataRecord::decode(&[0, 3, 0, 2]),
            Err(DecodeError::Unknown(3, 2))
        );
    }

    #[test]
    fn truncated_or_unknown_records_are_errors() {
        for r in samples() {
            let b = r.encode();
            for cut in 0..b.len() {
                assert!(MetadataRecord::decode(&b[..cut]).is_err());
            }
        }
        assert_eq!(
            MetadataRecord::decode(&[0, 99, 0, 0]),
            Err(DecodeError::Unknown(99, 0))
        );
    }
}
