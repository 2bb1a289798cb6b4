//! The consumer group protocol's APIs (KIP-848): ConsumerGroupHeartbeat
//! v0-1 and ConsumerGroupDescribe v0-1. v1 of the heartbeat adds the topic
//! regex and requires client-generated member ids; v1 of describe adds the
//! member type. The protocol itself is in `ottla_group_coordinator::consumer_*`.

use std::net::IpAddr;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_describe_response::{
    self as describe_response, DescribedGroup, Member,
};
use kafka_protocol::messages::consumer_group_heartbeat_response::{
    self as heartbeat_response, ConsumerGroupHeartbeatResponse,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    GroupId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::MetadataImage;
use uuid::Uuid;

use super::group::{client_host, ALL_GROUP_OPERATIONS};
use crate::broker::Broker;
use ottla_protocol::names::uuid_text;

use crate::replica::now_ms;
use ottla_controller::features::{self, GROUP_VERSION};
use ottla_group_coordinator::{
    validate_consumer_heartbeat, Assignment, ConsumerMember, HeartbeatError, HeartbeatRequest,
};

/// ConsumerGroupDescribe's member types (v1): members still on the classic
/// protocol (a group being migrated), and consumer-protocol members.
const CLASSIC_MEMBER_TYPE: i8 = 0;
const CONSUMER_MEMBER_TYPE: i8 = 1;

fn text(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// Why the consumer group protocol is off, if it is: Kafka then answers its
/// APIs UNSUPPORTED_VERSION, and Java consumers tell their users to fall
/// back to `group.protocol=classic`.
fn disabled(broker: &Broker, image: &MetadataImage) -> Option<String> {
    if !broker.groups.config().consumer.enabled {
        Some("The consumer group protocol is disabled: group.coordinator.rebalance.protocols does not list consumer.".to_string())
    } else if features::level(image, GROUP_VERSION) < 1 {
        Some(format!(
            "The consumer group protocol is disabled: {GROUP_VERSION} is 0 (kafka-features.sh upgrade --feature {GROUP_VERSION}=1 enables it)."
        ))
    } else {
        None
    }
}

pub fn heartbeat(
    broker: &Broker,
    version: i16,
    client_id: &str,
    client_addr: IpAddr,
    req: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    let image = broker.controller.image();
    if let Some(why) = disabled(broker, &image) {
        return ConsumerGroupHeartbeatResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code())
            .with_error_message(Some(text(why)));
    }
    let mut request = HeartbeatRequest {
        group_id: req.group_id.to_string(),
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        instance_id: req.instance_id.map(|s| s.to_string()),
        rack_id: req.rack_id.map(|s| s.to_string()),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        topic_names: req
            .subscribed_topic_names
            .map(|names| names.into_iter().map(|n| n.to_string()).collect()),
        topic_regex: req.subscribed_topic_regex.map(|s| s.to_string()),
        server_assignor: req.server_assignor.map(|s| s.to_string()),
        owned: req.topic_partitions.map(|tps| {
            let mut owned = Assignment::new();
            for tp in tps {
                owned.entry(tp.topic_id).or_default().extend(tp.partitions);
            }
            owned.retain(|_, ps| !ps.is_empty());
            owned
        }),
        client_id: client_id.to_string(),
        client_host: client_host(client_addr),
    };
    let answer =
        match validate_consumer_heartbeat(&request, version, &broker.groups.config().consumer) {
            Ok(()) => {
                // v0 joins without an id and gets one; from v1 (KIP-1082) the
                // client names itself. Kafka's ids are its Uuid strings.
                if request.member_id.is_empty() {
                    request.member_id = uuid_text(&Uuid::new_v4());
                }
                match broker.groups.shard_blocking(&request.group_id) {
                    Ok(shard) => {
                        let beat = shard.consumer_heartbeat(&request, &image, now_ms());
                        shard.once_replicated_blocking(beat)
                    }
                    Err(e) => Err(e.into()),
                }
            }
            Err(e) => Err(e),
        };
    match answer {
        Ok(a) => ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(text(a.member_id)))
            .with_member_epoch(a.member_epoch)
            .with_heartbeat_interval_ms(a.heartbeat_interval_ms)
            .with_assignment(a.assignment.map(|asg| {
                heartbeat_response::Assignment::default().with_topic_partitions(
                    asg.into_iter()
                        .map(|(topic, ps)| {
                            heartbeat_response::TopicPartitions::default()
                                .with_topic_id(topic)
                                .with_partitions(ps.into_iter().collect())
                        })
                        .collect(),
                )
            })),
        Err(HeartbeatError { error, message }) => ConsumerGroupHeartbeatResponse::default()
            .with_error_code(error.code())
            .with_error_message(message.map(text)),
    }
}

pub fn describe(
    broker: &Broker,
    version: i16,
    req: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    let image = broker.controller.image();
    let off = disabled(broker, &image);
    let groups = req
        .group_ids
        .into_iter()
        .map(|id| {
            if let Some(why) = &off {
                return DescribedGroup::default()
                    .with_group_id(id)
                    .with_error_code(ResponseError::UnsupportedVersion.code())
                    .with_error_message(Some(text(why.as_str())));
            }
            let mut d = describe_group(broker, version, &image, &id);
            if req.include_authorized_operations && d.error_code == 0 {
                d = d.with_authorized_operations(ALL_GROUP_OPERATIONS);
            }
            d.with_group_id(id)
        })
        .collect();
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}

fn describe_group(
    broker: &Broker,
    version: i16,
    image: &MetadataImage,
    id: &GroupId,
) -> DescribedGroup {
    let shard = match broker.groups.shard_blocking(id) {
        Ok(shard) => shard,
        Err(e) => return DescribedGroup::default().with_error_code(e.code()),
    };
    let Some(g) = shard.describe_consumer_group(id, &broker.groups.config().consumer) else {
        // Admin clients then fall back to DescribeGroups for classic groups.
        let message = if shard.describe(id).is_some() {
            format!("Group {} is not a consumer group.", id.as_str())
        } else {
            format!("Group {} not found.", id.as_str())
        };
        return DescribedGroup::default()
            .with_error_code(ResponseError::GroupIdNotFound.code())
            .with_error_message(Some(text(message)));
    };
    let members = g
        .members
        .iter()
        .map(|(m, target)| describe_member(version, image, m, target))
        .collect();
    DescribedGroup::default()
        .with_group_state(text(g.state.name()))
        .with_group_epoch(g.epoch)
        .with_assignment_epoch(g.assignment_epoch)
        .with_assignor_name(text(g.assignor))
        .with_members(members)
}

fn describe_member(
    version: i16,
    image: &MetadataImage,
    m: &ConsumerMember,
    target: &Assignment,
) -> Member {
    let member = Member::default()
        .with_member_id(text(m.id.as_str()))
        .with_instance_id(m.sub.instance_id.clone().map(text))
        .with_rack_id(m.sub.rack_id.clone().map(text))
        .with_member_epoch(m.current.epoch)
        .with_client_id(text(m.sub.client_id.as_str()))
        .with_client_host(text(m.sub.client_host.as_str()))
        .with_subscribed_topic_names(
            m.sub
                .topic_names
                .iter()
                .map(|t| TopicName(text(t.as_str())))
                .collect(),
        )
        .with_subscribed_topic_regex(m.sub.topic_regex.clone().map(text))
        .with_assignment(named(image, &m.current.assigned))
        .with_target_assignment(named(image, target));
    if version >= 1 {
        member.with_member_type(if m.uses_classic_protocol() {
            CLASSIC_MEMBER_TYPE
        } else {
            CONSUMER_MEMBER_TYPE
        })
    } else {
        member
    }
}

/// An assignment with topic names; topics no longer in the image are left
/// out, as Kafka does.
fn named(image: &MetadataImage, a: &Assignment) -> describe_response::Assignment {
    describe_response::Assignment::default().with_topic_partitions(
        a.iter()
            .filter_map(|(id, ps)| {
                let topic = image.topic_by_id(id)?;
                Some(
                    describe_response::TopicPartitions::default()
                        .with_topic_id(*id)
                        .with_topic_name(TopicName(text(topic.name.as_str())))
                        .with_partitions(ps.iter().copied().collect()),
                )
            })
            .collect(),
    )
}
