//! Streams groups' coordinator APIs (KIP-1071): StreamsGroupHeartbeat v0-v1,
//! StreamsGroupDescribe v0-v1 and StreamsGroupTopologyDescriptionUpdate v0
//! (KIP-1331; answered as Kafka answers it without a topology description
//! plugin), through Ottla's own codec (`ottla_protocol::streams`). The group logic is
//! `ottla_group_coordinator::streams_*`; this module authorizes, runs it on
//! the blocking pool (a shard may have to load, and appends are file I/O),
//! and asks the controller for the internal topics a group still needs,
//! without waiting for them (the members hear MISSING_INTERNAL_TOPICS until
//! they exist, as Kafka's do).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use ottla_controller::features::{self, STREAMS_VERSION};
use ottla_controller::{MetadataImage, NewTopic};
use ottla_group_coordinator::{
    configure_streams_topology, task_ids, task_offsets, InternalTopic, StreamsError, StreamsGroup,
    StreamsGroupSettings, StreamsHeartbeat, TaskRoles,
};
use ottla_protocol::own_api::OwnApiKey;
use ottla_protocol::streams::describe::{
    Assignment, DescribedGroup, DescribedMember, DescribedSubtopology, DescribedTopology,
    StreamsGroupDescribeRequest, StreamsGroupDescribeResponse, TopologyDescriptionStatus,
};
use ottla_protocol::streams::heartbeat::{
    StatusCode, StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse,
};
use ottla_protocol::streams::topology_description::{
    StreamsGroupTopologyDescriptionUpdateRequest, StreamsGroupTopologyDescriptionUpdateResponse,
};
use ottla_protocol::streams::{StreamsApiKey, StreamsMessage, TopicInfo};
use parking_lot::Mutex;
use tracing::{debug, info, warn};

use super::group::{client_host, ALL_GROUP_OPERATIONS};
use crate::blocking::blocking;
use crate::broker::Broker;
use crate::broker::BrokerSlot;
use crate::metrics::network;
use crate::network::{OwnHandlerFuture, RequestContext, RequestHandler};
use crate::replica::now_ms;
use ottla_controller::acls::operation;

/// A missing internal topic is asked for again only this long after the
/// last ask: every member's heartbeat reports it missing until it exists,
/// and a creation that fails (say, a replication factor above the broker
/// count) must not become a controller request per heartbeat.
const ASK_AGAIN_AFTER: Duration = Duration::from_secs(10);

pub struct StreamsApis {
    broker: BrokerSlot,
    asks: Arc<Mutex<TopicAsks>>,
}

/// The internal topics asked of the controller lately, and the creations
/// that failed: heartbeats report those in their MISSING_INTERNAL_TOPICS
/// status, as Kafka's do ("Creation failed: ...").
#[derive(Default)]
struct TopicAsks {
    asked: HashMap<String, Instant>,
    failed: HashMap<String, (String, Instant)>,
}

impl TopicAsks {
    /// The topics of `topics` not asked for within [`ASK_AGAIN_AFTER`],
    /// now recorded as asked.
    fn not_asked_lately(&mut self, topics: Vec<InternalTopic>, now: Instant) -> Vec<InternalTopic> {
        let fresh = |at: &Instant| now.duration_since(*at) < ASK_AGAIN_AFTER;
        self.asked.retain(|_, at| fresh(at));
        self.failed.retain(|_, (_, at)| fresh(at));
        topics
            .into_iter()
            .filter(|t| {
                let new = !self.asked.contains_key(&t.name);
                if new {
                    self.asked.insert(t.name.clone(), now);
                }
                new
            })
            .collect()
    }

    /// Appends to the MISSING_INTERNAL_TOPICS status what failed creating
    /// the `missing` topics, at most three of them.
    fn report_failures(&self, response: &mut StreamsGroupHeartbeatResponse, missing: &[String]) {
        let failures: Vec<String> = missing
            .iter()
            .filter_map(|t| {
                let why = &self.failed.get(t)?.0;
                Some(format!("{t}: {}", why.trim_end_matches('.')))
            })
            .collect();
        let Some(status) = response
            .status
            .iter_mut()
            .flatten()
            .find(|s| s.status_code == StatusCode::MissingInternalTopics as i8)
        else {
            return;
        };
        if failures.is_empty() {
            return;
        }
        let mut listed = failures[..failures.len().min(3)].join(", ");
        if failures.len() > 3 {
            listed.push_str(&format!(" and {} more", failures.len() - 3));
        }
        status.status_detail = format!("{}; Creation failed: {listed}.", status.status_detail);
    }
}

impl StreamsApis {
    pub fn new(broker: BrokerSlot) -> Self {
        Self {
            broker,
            asks: Default::default(),
        }
    }
}

impl RequestHandler for StreamsApis {
    fn handle_own<'a>(
        &'a self,
        ctx: &'a RequestContext,
        key: OwnApiKey,
        body: Bytes,
    ) -> OwnHandlerFuture<'a> {
        Box::pin(async move {
            let broker = self
                .broker
                .get()
                .ok_or_else(|| anyhow::anyhow!("request before the broker was started"))?
                .clone();
            let version = ctx.api_version;
            let access = broker.access(&ctx.principal, ctx.peer.ip());
            let encoded = match key {
                OwnApiKey::Streams(StreamsApiKey::StreamsGroupHeartbeat) => {
                    let req = StreamsGroupHeartbeatRequest::decode(&body, version)
                        .with_context(|| format!("decoding {key}"))?;
                    let response = if access.group(operation::READ, &req.group_id) {
                        let (mut response, missing) = heartbeat(&broker, ctx, req).await?;
                        let names: Vec<String> = missing.iter().map(|t| t.name.clone()).collect();
                        let to_create = {
                            let mut asks = self.asks.lock();
                            asks.report_failures(&mut response, &names);
                            asks.not_asked_lately(missing, Instant::now())
                        };
                        create_internal_topics(&broker, &self.asks, to_create);
                        response
                    } else {
                        failed(
                            ResponseError::GroupAuthorizationFailed,
                            Some("Group authorization failed.".into()),
                        )
                    };
                    counted(response, version)?
                }
                OwnApiKey::Streams(StreamsApiKey::StreamsGroupDescribe) => {
                    let req = StreamsGroupDescribeRequest::decode(&body, version)
                        .with_context(|| format!("decoding {key}"))?;
                    let allowed: Vec<bool> = req
                        .group_ids
                        .iter()
                        .map(|id| access.group(operation::DESCRIBE, id))
                        .collect();
                    // Shard lookups may load a shard: the blocking pool.
                    let response = blocking(&broker, move |b| describe(b, req, &allowed)).await?;
                    counted(response, version)?
                }
                OwnApiKey::Streams(StreamsApiKey::StreamsGroupTopologyDescriptionUpdate) => {
                    let req = StreamsGroupTopologyDescriptionUpdateRequest::decode(&body, version)
                        .with_context(|| format!("decoding {key}"))?;
                    let image = broker.controller.image();
                    let allowed = access.group(operation::READ, &req.group_id);
                    counted(topology_description_update(&image, allowed), version)?
                }
                OwnApiKey::Mirror(_) => anyhow::bail!("the streams handler does not serve {key}"),
            };
            Ok(encoded.freeze())
        })
    }
}

/// `response` encoded at `version`, its error codes counted first (Kafka's
/// RequestMetrics ErrorsPerSec).
fn counted<M: StreamsMessage>(response: M, version: i16) -> anyhow::Result<bytes::BytesMut> {
    network().own_response_errors(OwnApiKey::Streams(M::API_KEY), &response);
    Ok(response.encode(version)?)
}

/// StreamsGroupTopologyDescriptionUpdate, as Kafka answers it without a
/// topology description plugin (its default): the heartbeat never asks for
/// a description, so a member sending one is told the broker keeps none.
fn topology_description_update(
    image: &MetadataImage,
    allowed: bool,
) -> StreamsGroupTopologyDescriptionUpdateResponse {
    let (error, message) = if let Some(why) = disabled(image) {
        (ResponseError::UnsupportedVersion, Some(why))
    } else if !allowed {
        (
            ResponseError::GroupAuthorizationFailed,
            Some("Group authorization failed.".to_string()),
        )
    } else {
        (
            ResponseError::UnsupportedVersion,
            Some("The broker has no streams group topology description plugin configured.".into()),
        )
    };
    StreamsGroupTopologyDescriptionUpdateResponse {
        error_code: error.code(),
        error_message: message,
        ..Default::default()
    }
}

fn failed(error: ResponseError, message: Option<String>) -> StreamsGroupHeartbeatResponse {
    StreamsGroupHeartbeatResponse {
        error_code: error.code(),
        error_message: message,
        ..Default::default()
    }
}

/// Why streams groups are off, if they are: Kafka then answers their APIs
/// UNSUPPORTED_VERSION.
fn disabled(image: &MetadataImage) -> Option<String> {
    (features::level(image, STREAMS_VERSION) < 1).then(|| {
        format!(
            "Streams groups are disabled: {STREAMS_VERSION} is 0 (kafka-features.sh upgrade --feature {STREAMS_VERSION}=1 enables them)."
        )
    })
}

/// The answer, and the internal topics the group still lacks.
async fn heartbeat(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: StreamsGroupHeartbeatRequest,
) -> anyhow::Result<(StreamsGroupHeartbeatResponse, Vec<InternalTopic>)> {
    let image = broker.controller.image();
    if let Some(why) = disabled(&image) {
        return Ok((
            failed(ResponseError::UnsupportedVersion, Some(why)),
            Vec::new(),
        ));
    }
    if let Err(e) = ottla_group_coordinator::validate_streams_heartbeat(&req) {
        return Ok((failed(e.error, e.message), Vec::new()));
    }
    let settings =
        StreamsGroupSettings::resolve(&image, &broker.settings.static_configs, &req.group_id);
    let hb = StreamsHeartbeat {
        request: req,
        api_version: ctx.api_version,
        client_id: ctx.client_id.to_string(),
        client_host: client_host(ctx.peer.ip()),
        settings,
    };
    let answer = blocking(broker, move |b| {
        let image = b.controller.image();
        match b.groups.shard_blocking(&hb.request.group_id) {
            Ok(shard) => {
                let answer = shard.streams_heartbeat(&hb, &image, now_ms());
                shard.once_replicated_blocking(answer)
            }
            Err(e) => Err(StreamsError::from(e)),
        }
    })
    .await?;
    Ok(match answer {
        Ok(answer) => answer,
        Err(e) => (failed(e.error, e.message), Vec::new()),
    })
}

/// Asks the controller for the topics and returns at once; a topic another
/// heartbeat asked for already is TOPIC_ALREADY_EXISTS, logged at debug.
fn create_internal_topics(
    broker: &Arc<Broker>,
    asks: &Arc<Mutex<TopicAsks>>,
    topics: Vec<InternalTopic>,
) {
    if topics.is_empty() {
        return;
    }
    let new_topics: Vec<NewTopic> = topics
        .into_iter()
        .map(|t| NewTopic {
            name: t.name,
            num_partitions: t.partitions,
            replication_factor: t.replication_factor,
            configs: t.configs.into_iter().map(|(k, v)| (k, Some(v))).collect(),
            ..NewTopic::default()
        })
        .collect();
    let controller = broker.controller.clone();
    let asks = asks.clone();
    broker.controller.spawn(async move {
        for (name, result) in controller.create_topics(new_topics, false).await {
            if let Err(e) = &result {
                if e.code != ResponseError::TopicAlreadyExists.code() {
                    let failure = (e.message.clone(), Instant::now());
                    asks.lock().failed.insert(name.clone(), failure);
                }
            }
            match result {
                Ok(t) => info!(
                    topic = name,
                    partitions = t.num_partitions,
                    "created a streams group's internal topic"
                ),
                Err(e) if e.code == ResponseError::TopicAlreadyExists.code() => {
                    debug!(topic = name, "internal topic already asked for")
                }
                Err(e) => warn!(topic = name, error = %e, "could not create a streams group's internal topic"),
            }
        }
    });
}

/// `allowed`: whether each group may be described, in request order.
fn describe(
    broker: &Broker,
    req: StreamsGroupDescribeRequest,
    allowed: &[bool],
) -> StreamsGroupDescribeResponse {
    let image = broker.controller.image();
    let groups = req
        .group_ids
        .iter()
        .zip(allowed)
        .map(|(id, &allowed)| {
            let failed = |e: ResponseError, message: Option<String>| DescribedGroup {
                error_code: e.code(),
                error_message: message,
                group_id: id.clone(),
                ..Default::default()
            };
            if !allowed {
                return failed(ResponseError::GroupAuthorizationFailed, None);
            }
            let shard = match broker.groups.shard_blocking(id) {
                Ok(shard) => shard,
                Err(e) => return failed(e, None),
            };
            match shard.describe_streams_group(id) {
                Ok(group) => {
                    let mut d = described(id, &group, &image);
                    if req.include_authorized_operations {
                        d.authorized_operations = ALL_GROUP_OPERATIONS;
                    }
                    // Kafka without a topology description plugin (off by
                    // default; Ottla has none) stores no descriptions.
                    if req.include_topology_description {
                        d.topology_description_status = TopologyDescriptionStatus::NotStored as i8;
                    }
                    let settings =
                        StreamsGroupSettings::resolve(&image, &broker.settings.static_configs, id);
                    d.assignor_name = Some(settings.assignor_name);
                    d
                }
                Err(true) => failed(
                    ResponseError::GroupIdNotFound,
                    Some(format!("Group {id} is not a streams group.")),
                ),
                Err(false) => failed(
                    ResponseError::GroupIdNotFound,
                    Some(format!("Group {id} not found.")),
                ),
            }
        })
        .collect();
    StreamsGroupDescribeResponse {
        groups,
        ..Default::default()
    }
}

fn assignment(roles: &TaskRoles) -> Assignment {
    Assignment {
        active_tasks: task_ids(&roles.active),
        standby_tasks: task_ids(&roles.standby),
        warmup_tasks: task_ids(&roles.warmup),
        ..Default::default()
    }
}

/// The group's topology with the partition counts the cluster gives its
/// internal topics (0 where they are not known yet).
fn described_topology(group: &StreamsGroup, image: &MetadataImage) -> Option<DescribedTopology> {
    let topology = group.topology.as_ref()?;
    let ready = configure_streams_topology(topology, image).is_ok_and(|c| c.is_ready());
    let with_count = |t: &TopicInfo| TopicInfo {
        partitions: image
            .topic_by_name(&t.name)
            .map_or(t.partitions, |found| found.partitions.len() as i32),
        ..t.clone()
    };
    let subtopologies = topology
        .subtopologies
        .iter()
        .map(|s| DescribedSubtopology {
            subtopology_id: s.subtopology_id.clone(),
            source_topics: s.source_topics.clone(),
            repartition_sink_topics: s.repartition_sink_topics.clone(),
            state_changelog_topics: s.state_changelog_topics.iter().map(with_count).collect(),
            repartition_source_topics: s.repartition_source_topics.iter().map(with_count).collect(),
            ..Default::default()
        })
        .collect();
    Some(DescribedTopology {
        epoch: topology.epoch,
        subtopologies: ready.then_some(subtopologies),
        ..Default::default()
    })
}

fn described(id: &str, group: &StreamsGroup, image: &MetadataImage) -> DescribedGroup {
    let members = group
        .members
        .iter()
        .map(|(member_id, m)| DescribedMember {
            member_id: member_id.clone(),
            member_epoch: m.current.epoch,
            instance_id: m.metadata.instance_id.clone(),
            rack_id: m.metadata.rack_id.clone(),
            client_id: m.metadata.client_id.clone(),
            client_host: m.metadata.client_host.clone(),
            topology_epoch: m.metadata.topology_epoch,
            process_id: m.metadata.process_id.clone(),
            user_endpoint: m.metadata.user_endpoint.clone(),
            client_tags: m.metadata.client_tags.clone(),
            task_offsets: task_offsets(&m.task_offsets.offsets),
            task_end_offsets: task_offsets(&m.task_offsets.end_offsets),
            assignment: assignment(&m.current.assigned),
            target_assignment: assignment(&group.target(member_id)),
            ..Default::default()
        })
        .collect();
    DescribedGroup {
        group_id: id.to_string(),
        group_state: group.state().name().to_string(),
        group_epoch: group.epoch(),
        assignment_epoch: group.assignment_epoch.max(0),
        topology: described_topology(group, image),
        members,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ottla_protocol::streams::heartbeat::Status;

    fn topic(name: &str) -> InternalTopic {
        InternalTopic {
            name: name.into(),
            partitions: 4,
            replication_factor: -1,
            configs: Default::default(),
        }
    }

    #[test]
    fn a_missing_topic_is_asked_for_once_per_window() {
        let mut asks = TopicAsks::default();
        let t0 = Instant::now();
        let names = |ts: Vec<InternalTopic>| ts.into_iter().map(|t| t.name).collect::<Vec<_>>();
        assert_eq!(names(asks.not_asked_lately(vec![topic("a")], t0)), ["a"]);
        let later = t0 + Duration::from_secs(1);
        assert_eq!(
            names(asks.not_asked_lately(vec![topic("a"), topic("b")], later)),
            ["b"]
        );
        let much_later = t0 + ASK_AGAIN_AFTER + Duration::from_secs(1);
        assert_eq!(
            names(asks.not_asked_lately(vec![topic("a")], much_later)),
            ["a"]
        );
    }

    #[test]
    fn failed_creations_are_reported_in_the_missing_topics_status() {
        let mut asks = TopicAsks::default();
        let now = Instant::now();
        for t in ["a", "b", "c", "d"] {
            asks.failed.insert(
                t.into(),
                (
                    "Replication factor: 3 larger than available brokers: 1.".into(),
                    now,
                ),
            );
        }
        let missing = |detail: &str| StreamsGroupHeartbeatResponse {
            status: Some(vec![Status::new(StatusCode::MissingInternalTopics, detail)]),
            ..Default::default()
        };
        let mut one = missing("Internal topics are missing: [a]");
        asks.report_failures(&mut one, &["a".into()]);
        assert_eq!(
            one.status.unwrap()[0].status_detail,
            "Internal topics are missing: [a]; Creation failed: a: Replication factor: 3 larger than available brokers: 1."
        );
        let mut many = missing("m");
        let names: Vec<String> = ["a", "b", "c", "d", "e"].map(String::from).to_vec();
        asks.report_failures(&mut many, &names);
        assert!(many.status.unwrap()[0]
            .status_detail
            .ends_with(" and 1 more."));
        // Nothing failed: the detail stays.
        let mut fine = missing("m");
        asks.report_failures(&mut fine, &["x".into()]);
        assert_eq!(fine.status.unwrap()[0].status_detail, "m");
    }
}
