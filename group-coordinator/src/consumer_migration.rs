//! Online migration between the classic and the consumer group protocols
//! (KIP-848), as Kafka's group coordinator does it, so that a group's
//! consumers can be upgraded (or rolled back) one at a time without
//! stopping the group:
//!
//! - **upgrade**: the first consumer-protocol member joining a classic
//!   group whose members use the embedded consumer protocol turns it into
//!   a consumer group. Each classic member keeps its id, its generation
//!   becomes its member epoch and its last assignment its current and
//!   target assignment; it goes on as a classic member of the consumer
//!   group (`consumer_classic`).
//! - **downgrade**: when the last consumer-protocol member leaves and only
//!   classic members remain, the group becomes a classic group at its epoch
//!   as generation, each member holding its target assignment, and a
//!   rebalance starts. A classic static member replacing the last
//!   consumer-protocol static member downgrades it too, without rebalance.
//!
//! `group.consumer.migration.policy` (bidirectional by default, as Kafka)
//! says which directions are allowed.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use ottla_controller::MetadataImage;
use tracing::info;

use super::classic::{ClassicGroup, GroupState};
use super::config::GroupConfig;
use super::consumer_config::ConsumerGroupConfig;
use super::consumer_group::{metadata_hash, ConsumerGroup, MemberTimers};
use super::consumer_heartbeat::{consumer, fail, HeartbeatError};
use super::consumer_member::{
    Assignment, ClassicMetadata, ConsumerMember, CurrentAssignment, MemberState, MemberSubscription,
};
use super::consumer_records::ConsumerRecord;
use super::member::Member;
use super::records::CoordinatorRecord;
use super::subscription::{
    encode_assignment, parse_assignment, parse_subscription, protocol_version, NamedPartitions,
    CONSUMER_PROTOCOL_TYPE,
};

/// Which conversions `group.consumer.migration.policy` allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationPolicy {
    Disabled,
    Upgrade,
    Downgrade,
    Bidirectional,
}

impl MigrationPolicy {
    /// Kafka's names, in any case.
    pub fn parse(value: &str) -> Result<Self, String> {
        match value.trim().to_ascii_lowercase().as_str() {
            "disabled" => Ok(Self::Disabled),
            "upgrade" => Ok(Self::Upgrade),
            "downgrade" => Ok(Self::Downgrade),
            "bidirectional" => Ok(Self::Bidirectional),
            _ => Err("must be one of disabled, upgrade, downgrade, bidirectional".to_string()),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Disabled => "disabled",
            Self::Upgrade => "upgrade",
            Self::Downgrade => "downgrade",
            Self::Bidirectional => "bidirectional",
        }
    }

    pub fn upgrades(self) -> bool {
        matches!(self, Self::Upgrade | Self::Bidirectional)
    }

    pub fn downgrades(self) -> bool {
        matches!(self, Self::Downgrade | Self::Bidirectional)
    }
}

/// A group's move from one protocol to the other, once its records are
/// applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Migration {
    /// The classic group is now a consumer group: requests parked in its
    /// rebalance must be told to rejoin.
    Upgraded,
    /// The consumer group is now a classic group whose members must rejoin.
    Downgraded,
    /// The consumer group is now a classic group, and the joining static
    /// member took over its predecessor's assignment: no rebalance.
    DowngradedInPlace,
}

/// A classic group as a consumer group, and the records that say so.
pub struct Upgraded {
    pub group: ConsumerGroup,
    pub records: Vec<CoordinatorRecord>,
    /// Each member's session, by its classic session timeout.
    pub timers: Vec<(String, MemberTimers)>,
}

/// The consumer group `classic` becomes when a consumer-protocol member
/// joins it, or GROUP_ID_NOT_FOUND with the reason it cannot.
pub fn upgrade(
    classic: &ClassicGroup,
    config: &ConsumerGroupConfig,
    image: &MetadataImage,
    now: i64,
) -> Result<Upgraded, HeartbeatError> {
    let id = &classic.id;
    let refuse = |why: String| {
        info!(group = %id, reason = %why, "cannot upgrade the classic group to a consumer group");
        Err(fail(
            ResponseError::GroupIdNotFound,
            format!("Group {id} is not a consumer group: {why}."),
        ))
    };
    if !config.migration_policy.upgrades() {
        return refuse(format!(
            "it is a classic group with members and group.consumer.migration.policy is {}",
            config.migration_policy.name()
        ));
    }
    if !classic.uses_consumer_protocol() {
        return refuse(format!(
            "its members use the protocol type {:?}, not the embedded consumer protocol",
            classic.protocol_type().unwrap_or_default()
        ));
    }
    let count = classic.members().count();
    if count > config.max_size {
        return refuse(format!(
            "its {count} members exceed group.consumer.max.size ({})",
            config.max_size
        ));
    }
    let generation = classic.generation_id();
    let mut members = Vec::with_capacity(count);
    for m in classic.members() {
        let protocol = classic
            .protocol_name()
            .or_else(|| m.protocols.first().map(|p| p.name.as_str()))
            .unwrap_or_default();
        let malformed = || {
            refuse(format!(
                "the embedded consumer protocol of member {} is malformed",
                m.id
            ))
        };
        let Ok(subscription) = parse_subscription(m.metadata(protocol).map_or(&[][..], |b| b))
        else {
            return malformed();
        };
        let Ok(assigned) = parse_assignment(&m.assignment) else {
            return malformed();
        };
        members.push(ConsumerMember {
            id: m.id.clone(),
            sub: MemberSubscription {
                instance_id: m.group_instance_id.clone(),
                rack_id: subscription.rack,
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                topic_names: subscription.topics.into_iter().collect(),
                topic_regex: None,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                server_assignor: None,
                classic: Some(ClassicMetadata {
                    session_timeout_ms: m.session_timeout_ms,
                    protocols: m.protocols.clone(),
                }),
            },
            current: CurrentAssignment {
                epoch: generation,
                previous_epoch: generation,
                state: MemberState::Stable,
                assigned: by_id(&assigned, image),
                pending_revocation: Assignment::new(),
            },
        });
    }
    let topics: BTreeSet<String> = members
        .iter()
        .flat_map(|m| m.sub.topic_names.iter().cloned())
        .collect();
    // Kafka's order: the classic group goes, then the members, the epoch,
    // the target assignment and the members' current assignments.
    let mut consumer_records: Vec<ConsumerRecord> = members
        .iter()
        .map(|m| ConsumerRecord::MemberMetadata {
            group: id.clone(),
            member: m.id.clone(),
            value: Some(m.sub.clone()),
        })
        .collect();
    consumer_records.push(ConsumerRecord::GroupMetadata {
        group: id.clone(),
        value: Some((generation, metadata_hash(&topics, image))),
    });
    consumer_records.extend(
        members
            .iter()
            .map(|m| ConsumerRecord::TargetAssignmentMember {
                group: id.clone(),
                member: m.id.clone(),
                value: Some(m.current.assigned.clone()),
            }),
    );
    consumer_records.push(ConsumerRecord::TargetAssignmentMetadata {
        group: id.clone(),
        value: Some(generation),
    });
    consumer_records.extend(members.iter().map(|m| ConsumerRecord::CurrentAssignment {
        group: id.clone(),
        member: m.id.clone(),
        value: Some(m.current.clone()),
    }));
    let mut group = ConsumerGroup::new(id);
    for r in &consumer_records {
        match r {
            ConsumerRecord::GroupMetadata {
                value: Some((epoch, hash)),
                ..
            } => (group.epoch, group.metadata_hash) = (*epoch, *hash),
            r => group.replay(r.clone()),
        }
    }
    let timers = members
        .iter()
        .map(|m| {
            let session = i64::from(m.session_timeout_ms(config.session_timeout_ms));
            (
                m.id.clone(),
                MemberTimers {
                    session_deadline: now + session,
                    ..MemberTimers::default()
                },
            )
        })
        .collect();
    let mut records = vec![CoordinatorRecord::GroupMetadata {
        group: id.clone(),
        value: None,
    }];
    records.extend(consumer_records.into_iter().map(consumer));
    info!(group = %id, generation, members = count, "upgrading the classic group to a consumer group");
    Ok(Upgraded {
        group,
        records,
        timers,
    })
}

/// Whether `group` turns classic when `leaving` goes (and, with
/// `joining`, a classic static member takes its place): every other member
/// uses the classic protocol, one at least remains, and the policy and
/// `group.max.size` allow it.
pub fn downgrade_allowed(
    group: &ConsumerGroup,
    leaving: &str,
    joining: bool,
    config: &GroupConfig,
) -> bool {
    if !group.only_classic_members_besides(leaving) {
        return false;
    }
    let remaining = group.members.len() - 1 + usize::from(joining);
    let why = if remaining == 0 {
        return false;
    } else if !config.consumer.migration_policy.downgrades() {
        format!(
            "group.consumer.migration.policy is {}",
            config.consumer.migration_policy.name()
        )
    } else if remaining > config.max_group_size {
        format!(
            "its {remaining} members exceed group.max.size ({})",
            config.max_group_size
        )
    } else {
        return true;
    };
    info!(group = %group.id, reason = %why, "only classic members remain but the group stays a consumer group");
    false
}

/// A consumer group as a classic group.
pub struct Downgraded {
    pub records: Vec<CoordinatorRecord>,
    /// The protocol (client-side assignor) the classic group selected.
    pub protocol: String,
}

/// The records that turn `group` into a classic group without `leaving`,
/// with `joining` (a classic static member) in its place if given. Each
/// member's assignment is its target assignment, in the embedded protocol
/// version of its own subscription.
pub fn downgrade(
    group: &ConsumerGroup,
    leaving: &str,
    joining: Option<&ConsumerMember>,
    image: &MetadataImage,
    now: i64,
) -> Downgraded {
    let mut classic = ClassicGroup::new(&group.id, now);
    classic.generation_id = group.epoch;
    // Whose target assignment each member takes.
    let mut target_of: HashMap<String, &str> = HashMap::new();
    let remaining = group.members.values().filter(|m| m.id != leaving);
    for m in remaining.chain(joining) {
        let Some(c) = &m.sub.classic else {
            continue;
        };
        target_of.insert(
            m.id.clone(),
            if joining.is_some_and(|j| j.id == m.id) {
                leaving
            } else {
                &m.id
            },
        );
        classic.add(Member {
            id: m.id.clone(),
            group_instance_id: m.sub.instance_id.clone(),
            client_id: m.sub.client_id.clone(),
            client_host: m.sub.client_host.clone(),
            rebalance_timeout_ms: m.sub.rebalance_timeout_ms,
            session_timeout_ms: c.session_timeout_ms,
            protocol_type: CONSUMER_PROTOCOL_TYPE.to_string(),
            protocols: c.protocols.clone(),
            assignment: Bytes::new(),
            join_waiter: None,
            sync_waiter: None,
            is_new: false,
            heartbeat_deadline: None,
        });
    }
    classic.protocol_name = classic.select_protocol();
    classic.transition(GroupState::Stable, now);
    let protocol = classic.protocol_name().unwrap_or_default().to_string();
    let empty = Assignment::new();
    let assignments: HashMap<String, Bytes> = classic
        .members()
        .map(|m| {
            let target = group.targets.get(target_of[&m.id]).unwrap_or(&empty);
            let version = m
                .metadata(&protocol)
                .and_then(|md| protocol_version(md).ok())
                .unwrap_or(0);
            (
                m.id.clone(),
                encode_assignment(version, &by_name(target, image)),
            )
        })
        .collect();
    info!(group = %group.id, generation = group.epoch, members = assignments.len(), protocol, "downgrading the consumer group to a classic group");
    let mut records: Vec<CoordinatorRecord> =
        group.tombstones().into_iter().map(consumer).collect();
    records.push(classic.metadata_record(&assignments));
    Downgraded { records, protocol }
}

/// Partitions by topic id; topics that no longer exist are left out.
pub fn by_id(partitions: &NamedPartitions, image: &MetadataImage) -> Assignment {
    let mut a = Assignment::new();
    for (topic, ps) in partitions {
        if let (Some(id), false) = (image.topic_ids.get(topic), ps.is_empty()) {
            a.entry(*id).or_default().extend(ps.iter().copied());
        }
    }
    a
}

/// Partitions by topic name, for the embedded protocol; topics that no
/// longer exist are left out.
pub fn by_name(a: &Assignment, image: &MetadataImage) -> NamedPartitions {
    let named: BTreeMap<&str, Vec<i32>> = a
        .iter()
        .filter_map(|(id, ps)| {
            let topic = image.topic_by_id(id)?;
            Some((topic.name.as_str(), ps.iter().copied().collect()))
        })
        .collect();
    named
        .into_iter()
        .map(|(name, ps)| (name.to_string(), ps))
        .collect()
}
