//! The handlers of the mirror APIs (keys 95-106): decode the body, check
//! the caller may do this, act, encode the answer.
//!
//! Authorization (with an authorizer configured), on Ottla's CLUSTER_MIRROR
//! resource (the mirror's name) or, for every mirror at once, the cluster:
//! CreateMirror needs CREATE on the mirror (or ALTER on the cluster),
//! DeleteMirror DELETE on it (or ALTER on the cluster), the topic
//! operations ALTER on it (or on the cluster) plus READ on each topic,
//! whose refusal fails that topic alone; ListMirrors and DescribeMirrors
//! show the mirrors the caller may DESCRIBE (or all, with DESCRIBE on the
//! cluster). LastMirroredEpochs (asked by a cluster failing back) needs
//! DESCRIBE on the cluster, and the broker-to-broker APIs
//! (Read/WriteMirrorStates, BumpLeaderEpochs) CLUSTER_ACTION.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use ottla_controller::acls::{operation, resource};
use ottla_controller::mirrors::{MirrorTopic as ControllerMirrorTopic, MirrorTopicOp};
use ottla_controller::ControllerError;
use ottla_mirror::config::{ConfigError, MirrorConfig};
use ottla_mirror::records::MirrorPartitionKey;
use ottla_mirror::state::MirrorPartitionState;
use ottla_protocol::mirror::admin::{
    CreateMirrorRequest, CreateMirrorResponse, DeleteMirrorRequest, DeleteMirrorResponse,
    DescribeMirrorsRequest, DescribedMirror, ListMirrorsRequest, ListMirrorsResponse, ListedMirror,
};
use ottla_protocol::mirror::epochs::{
    BumpLeaderEpochsPartitionResult, BumpLeaderEpochsRequest, BumpLeaderEpochsResponse,
    BumpLeaderEpochsTopicResult, LastMirroredEpochsPartitionResult, LastMirroredEpochsRequest,
    LastMirroredEpochsResponse, LastMirroredEpochsTopicResult,
};
use ottla_protocol::mirror::errors::{self, MIRROR_AUTHORIZATION_FAILED};
use ottla_protocol::mirror::states::{
    ReadMirrorStatesPartitionResult, ReadMirrorStatesRequest, ReadMirrorStatesResponse,
    ReadMirrorStatesTopicResult, WriteMirrorStatesPartitionResult, WriteMirrorStatesRequest,
    WriteMirrorStatesResponse, WriteMirrorStatesTopicResult, NO_EPOCH,
};
use ottla_protocol::mirror::topics::{MirrorTopic, MirrorTopicResult};
use ottla_protocol::mirror::{topics, MirrorApiKey, MirrorMessage};
use ottla_protocol::own_api::OwnApiKey;
use tracing::info;

use crate::broker::Broker;
use crate::broker::BrokerSlot;
use crate::metrics::network;
use crate::network::{OwnHandlerFuture, RequestContext, RequestHandler};
use crate::security::authorizer::Access;
use ottla_mirror::runtime::source::SourceCluster;
use ottla_mirror::runtime::state_writes::StateWrite;
use ottla_mirror::runtime::{describe, readd, topics_of};

/// Serves the mirror APIs on the broker listeners.
pub struct MirrorApis {
    pub broker: BrokerSlot,
}

impl RequestHandler for MirrorApis {
    fn handle_own<'a>(
        &'a self,
        ctx: &'a RequestContext,
        key: OwnApiKey,
        body: Bytes,
    ) -> OwnHandlerFuture<'a> {
        Box::pin(async move {
            let OwnApiKey::Mirror(key) = key else {
                anyhow::bail!("the mirror handler does not serve {key}");
            };
            let b = self
                .broker
                .get()
                .ok_or_else(|| anyhow::anyhow!("request before the broker was started"))?
                .clone();
            let version = ctx.api_version;
            let access = Arc::new(b.access(&ctx.principal, ctx.peer.ip()));
            let cluster = |op| access.cluster(op);
            let on_mirror =
                |op, cluster_op, name: &str| may_on_mirror(&access, op, cluster_op, name);
            macro_rules! serve {
                ($request:ty, |$r:ident| $allowed:expr, $refuse:expr, $handle:expr) => {{
                    let request = <$request as MirrorMessage>::decode(&body, version)
                        .with_context(|| format!("decoding {key:?}"))?;
                    let allowed = {
                        let $r = &request;
                        $allowed
                    };
                    let response = if allowed {
                        #[allow(clippy::redundant_closure_call)]
                        ($handle)(b.clone(), request).await
                    } else {
                        #[allow(clippy::redundant_closure_call)]
                        ($refuse)(request)
                    };
                    network().own_response_errors(OwnApiKey::Mirror(key), &response);
                    response.encode(version)?.freeze()
                }};
            }
            // The four topic-set APIs: ALTER on the mirror (READ on each
            // topic is checked per topic).
            macro_rules! topic_op {
                ($request:ty, $response:ty, $op:ident, $discard:expr) => {
                    serve!(
                        $request,
                        |r| on_mirror(operation::ALTER, operation::ALTER, &r.mirror_name),
                        |_| refused_topics!($response),
                        |b, r: $request| {
                            let access = Arc::clone(&access);
                            async move {
                                #[allow(clippy::redundant_closure_call)]
                                let discard_local_writes = ($discard)(&r);
                                let (error_code, error_message, topics) = change_topics(
                                    b,
                                    &access,
                                    &r.mirror_name,
                                    MirrorTopicOp::$op,
                                    r.topics,
                                    discard_local_writes,
                                )
                                .await;
                                <$response>::default().with_outcome(
                                    error_code,
                                    error_message,
                                    topics,
                                )
                            }
                        }
                    )
                };
            }
            let encoded = match key {
                MirrorApiKey::CreateMirror => serve!(
                    CreateMirrorRequest,
                    |r| on_mirror(operation::CREATE, operation::ALTER, &r.mirror_name),
                    |_| CreateMirrorResponse {
                        error_code: MIRROR_AUTHORIZATION_FAILED.code,
                        error_message: Some(MIRROR_AUTHORIZATION_FAILED.message.into()),
                        ..Default::default()
                    },
                    create_mirror
                ),
                MirrorApiKey::DeleteMirror => serve!(
                    DeleteMirrorRequest,
                    |r| on_mirror(operation::DELETE, operation::ALTER, &r.mirror_name),
                    |_| DeleteMirrorResponse {
                        error_code: MIRROR_AUTHORIZATION_FAILED.code,
                        error_message: Some(MIRROR_AUTHORIZATION_FAILED.message.into()),
                        ..Default::default()
                    },
                    delete_mirror
                ),
                MirrorApiKey::ListMirrors => serve!(
                    ListMirrorsRequest,
                    |_r| true,
                    |_| unreachable!("listing is filtered, never refused"),
                    |b, r| {
                        let access = Arc::clone(&access);
                        async move {
                            let mut listed = list_mirrors(b, r).await;
                            listed.mirrors.retain(|m| {
                                may_on_mirror(
                                    &access,
                                    operation::DESCRIBE,
                                    operation::DESCRIBE,
                                    &m.mirror_name,
                                )
                            });
                            listed
                        }
                    }
                ),
                MirrorApiKey::DescribeMirrors => serve!(
                    DescribeMirrorsRequest,
                    |_r| true,
                    |_| unreachable!("describing is filtered, never refused"),
                    |b: Arc<Broker>, r: DescribeMirrorsRequest| {
                        let access = Arc::clone(&access);
                        async move {
                            let named = r.mirror_names.is_some();
                            let mut described = describe::describe_mirrors(&b.mirrors, r).await;
                            let may = |name: &str| {
                                may_on_mirror(
                                    &access,
                                    operation::DESCRIBE,
                                    operation::DESCRIBE,
                                    name,
                                )
                            };
                            if named {
                                for m in &mut described.mirrors {
                                    if !may(&m.mirror_name) {
                                        *m = DescribedMirror {
                                            mirror_name: std::mem::take(&mut m.mirror_name),
                                            error_code: MIRROR_AUTHORIZATION_FAILED.code,
                                            error_message: Some(
                                                MIRROR_AUTHORIZATION_FAILED.message.into(),
                                            ),
                                            ..Default::default()
                                        };
                                    }
                                }
                            } else {
                                described.mirrors.retain(|m| may(&m.mirror_name));
                            }
                            described
                        }
                    }
                ),
                MirrorApiKey::AddTopicsToMirror => topic_op!(
                    topics::AddTopicsToMirrorRequest,
                    topics::AddTopicsToMirrorResponse,
                    Add,
                    |r: &topics::AddTopicsToMirrorRequest| r.discard_local_writes()
                ),
                MirrorApiKey::RemoveTopicsFromMirror => topic_op!(
                    topics::RemoveTopicsFromMirrorRequest,
                    topics::RemoveTopicsFromMirrorResponse,
                    Remove,
                    |_| false
                ),
                MirrorApiKey::PauseMirrorTopics => topic_op!(
                    topics::PauseMirrorTopicsRequest,
                    topics::PauseMirrorTopicsResponse,
                    Pause,
                    |_| false
                ),
                MirrorApiKey::ResumeMirrorTopics => topic_op!(
                    topics::ResumeMirrorTopicsRequest,
                    topics::ResumeMirrorTopicsResponse,
                    Resume,
                    |_| false
                ),
                MirrorApiKey::ReadMirrorStates => serve!(
                    ReadMirrorStatesRequest,
                    |_r| cluster(operation::CLUSTER_ACTION),
                    |r: ReadMirrorStatesRequest| read_states_refused(r),
                    read_states
                ),
                MirrorApiKey::WriteMirrorStates => serve!(
                    WriteMirrorStatesRequest,
                    |_r| cluster(operation::CLUSTER_ACTION),
                    |r: WriteMirrorStatesRequest| write_states_answer(&r, |_| {
                        ResponseError::ClusterAuthorizationFailed.code()
                    }),
                    write_states
                ),
                MirrorApiKey::LastMirroredEpochs => serve!(
                    LastMirroredEpochsRequest,
                    |_r| cluster(operation::DESCRIBE),
                    |r: LastMirroredEpochsRequest| last_mirrored_epochs_answer(&r, |_, _| {
                        (ResponseError::ClusterAuthorizationFailed.code(), NO_EPOCH)
                    }),
                    last_mirrored_epochs
                ),
                MirrorApiKey::BumpLeaderEpochs => serve!(
                    BumpLeaderEpochsRequest,
                    |_r| cluster(operation::CLUSTER_ACTION),
                    |_| BumpLeaderEpochsResponse {
                        error_code: ResponseError::ClusterAuthorizationFailed.code(),
                        ..Default::default()
                    },
                    bump_leader_epochs
                ),
            };
            Ok(encoded)
        })
    }
}

/// `op` on the named mirror, or `cluster_op` on the cluster, which covers
/// every mirror.
fn may_on_mirror(access: &Access, op: i8, cluster_op: i8, mirror: &str) -> bool {
    access.cluster(cluster_op) || access.allowed(op, resource::CLUSTER_MIRROR, mirror)
}

/// The answer to a topic-set request the caller may not make.
macro_rules! refused_topics {
    ($response:ty) => {
        <$response>::default().with_error(
            MIRROR_AUTHORIZATION_FAILED.code,
            MIRROR_AUTHORIZATION_FAILED.message,
        )
    };
}
use refused_topics;

trait TopicSetResponse: Sized {
    fn with_error(self, code: i16, message: &str) -> Self;
    fn with_outcome(
        self,
        code: i16,
        message: Option<String>,
        topics: Vec<MirrorTopicResult>,
    ) -> Self;
}

macro_rules! impl_topic_set_response {
    ($($response:ty),*) => {$(
        impl TopicSetResponse for $response {
            fn with_error(mut self, code: i16, message: &str) -> Self {
                self.error_code = code;
                self.error_message = Some(message.to_string());
                self
            }

            fn with_outcome(
                mut self,
                code: i16,
                message: Option<String>,
                topics: Vec<MirrorTopicResult>,
            ) -> Self {
                self.error_code = code;
                self.error_message = message;
                self.topics = topics;
                self
            }
        }
    )*};
}
impl_topic_set_response!(
    topics::AddTopicsToMirrorResponse,
    topics::RemoveTopicsFromMirrorResponse,
    topics::PauseMirrorTopicsResponse,
    topics::ResumeMirrorTopicsResponse
);

fn code_and_message(e: ControllerError) -> (i16, Option<String>) {
    (e.code, Some(e.message))
}

async fn create_mirror(b: Arc<Broker>, r: CreateMirrorRequest) -> CreateMirrorResponse {
    let entries: Vec<(String, Option<String>)> = r
        .configs
        .iter()
        .map(|c| (c.name.clone(), c.value.clone()))
        .collect();
    let refused = |code: i16, message: String| CreateMirrorResponse {
        error_code: code,
        error_message: Some(message),
        ..Default::default()
    };
    let config = match MirrorConfig::parse(&r.mirror_name, &entries) {
        Ok(config) => config,
        Err(e) => {
            let code = match e {
                ConfigError::Name(_) => ResponseError::InvalidRequest.code(),
                _ => ResponseError::InvalidConfig.code(),
            };
            return refused(code, e.to_string());
        }
    };
    if let Err(message) = SourceCluster::new(&config, String::new()) {
        return refused(ResponseError::InvalidConfig.code(), message);
    }
    let configs: BTreeMap<String, String> = entries
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect();
    match b
        .controller
        .create_mirror(&r.mirror_name, &configs, r.validate_only)
        .await
    {
        Ok(()) => CreateMirrorResponse::default(),
        Err(e) => refused(e.code, e.message),
    }
}

async fn delete_mirror(b: Arc<Broker>, r: DeleteMirrorRequest) -> DeleteMirrorResponse {
    let (error_code, error_message) = match b.controller.delete_mirror(&r.mirror_name).await {
        Ok(()) => (0, None),
        Err(e) => code_and_message(e),
    };
    DeleteMirrorResponse {
        error_code,
        error_message,
        ..Default::default()
    }
}

/// The topics bound to `mirror` (in any state), by name.
fn bound_topics(image: &ottla_controller::MetadataImage, mirror: &str) -> Vec<String> {
    topics_of(image, mirror)
        .into_iter()
        .map(|(topic, _)| topic)
        .collect()
}

async fn list_mirrors(b: Arc<Broker>, _r: ListMirrorsRequest) -> ListMirrorsResponse {
    let image = b.controller.image();
    let mut asking = tokio::task::JoinSet::new();
    let mut mirrors = Vec::new();
    for (index, (name, configs)) in image.mirrors().enumerate() {
        mirrors.push(ListedMirror {
            mirror_name: name.to_string(),
            source_bootstrap_servers: configs
                .get("bootstrap.servers")
                .cloned()
                .unwrap_or_default(),
            source_cluster_id: None,
            topic_names: bound_topics(&image, name),
            ..Default::default()
        });
        let source = b
            .mirrors
            .services()
            .configs
            .get(&image, name)
            .ok()
            .and_then(|config| SourceCluster::new(&config, "ottla-list-mirrors".into()).ok());
        if let Some(mut source) = source {
            source.timeout = SOURCE_CLUSTER_ID_TIMEOUT;
            asking.spawn(async move { (index, source.cluster_id().await) });
        }
    }
    // Each source is asked at once; one that does not answer in time is
    // listed without its id rather than holding the listing up.
    let _ = tokio::time::timeout(SOURCE_CLUSTER_ID_TIMEOUT, async {
        while let Some(answer) = asking.join_next().await {
            if let Ok((index, Ok(id))) = answer {
                mirrors[index].source_cluster_id = id;
            }
        }
    })
    .await;
    ListMirrorsResponse {
        mirrors,
        ..Default::default()
    }
}

/// How long ListMirrors waits for the sources' cluster ids.
const SOURCE_CLUSTER_ID_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

async fn change_topics(
    b: Arc<Broker>,
    access: &Access,
    mirror: &str,
    op: MirrorTopicOp,
    requested: Vec<MirrorTopic>,
    discard_local_writes: bool,
) -> (i16, Option<String>, Vec<MirrorTopicResult>) {
    // Mirroring a topic touches its data too: READ on it is needed as well.
    let (requested, unreadable): (Vec<_>, Vec<_>) = requested
        .into_iter()
        .partition(|t| access.topic(operation::READ, &t.name));
    let (error_code, error_message, mut topics) =
        change_readable_topics(b, mirror, op, requested, discard_local_writes).await;
    topics.extend(unreadable.into_iter().map(|t| MirrorTopicResult {
        error_code: ResponseError::TopicAuthorizationFailed.code(),
        error_message: Some(format!("Not authorized to read topic {}.", t.name)),
        name: t.name,
        ..Default::default()
    }));
    (error_code, error_message, topics)
}

async fn change_readable_topics(
    b: Arc<Broker>,
    mirror: &str,
    op: MirrorTopicOp,
    requested: Vec<MirrorTopic>,
    discard_local_writes: bool,
) -> (i16, Option<String>, Vec<MirrorTopicResult>) {
    let image = b.controller.image();
    let Some(configs) = image.mirror_configs(mirror) else {
        let e = errors::UNKNOWN_MIRROR;
        return (
            e.code,
            Some(format!("No mirror named '{mirror}' exists.")),
            Vec::new(),
        );
    };
    let mut topics = Vec::with_capacity(requested.len());
    let mut lookup_failures: BTreeMap<String, (i16, String)> = BTreeMap::new();
    if op == MirrorTopicOp::Add {
        let entries: Vec<(String, Option<String>)> = configs
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect();
        let source = MirrorConfig::parse(mirror, &entries)
            .map_err(|e| e.to_string())
            .and_then(|config| SourceCluster::new(&config, format!("ottla-mirror-admin-{mirror}")));
        let source = match source {
            Ok(source) => source,
            Err(message) => {
                return (
                    ResponseError::InvalidConfig.code(),
                    Some(message),
                    Vec::new(),
                )
            }
        };
        for t in &requested {
            match source.topic(&t.name).await {
                Ok(Some((found, _))) => {
                    let partitions = found.partitions.len() as i32;
                    let refusal = if discard_local_writes {
                        Ok(None)
                    } else {
                        readd::discard_refusal(
                            b.mirrors.services(),
                            &source,
                            &t.name,
                            found.id,
                            partitions,
                        )
                        .await
                    };
                    match refusal {
                        Ok(None) => topics.push(ControllerMirrorTopic {
                            name: t.name.clone(),
                            source: Some((found.id, partitions)),
                            discard_local_writes,
                        }),
                        Ok(Some(refusal)) => {
                            info!(mirror, topic = %t.name, records = refusal.records(), "re-add refused: it would discard local writes");
                            lookup_failures.insert(
                                t.name.clone(),
                                (ResponseError::PolicyViolation.code(), refusal.to_string()),
                            );
                        }
                        Err(e) => {
                            lookup_failures.insert(
                                t.name.clone(),
                                (
                                    ResponseError::NetworkException.code(),
                                    format!(
                                        "cannot ask the source for the last mirrored epochs: {e}"
                                    ),
                                ),
                            );
                        }
                    }
                }
                Ok(None) => topics.push(ControllerMirrorTopic {
                    name: t.name.clone(),
                    source: None,
                    discard_local_writes,
                }),
                Err(e) => {
                    lookup_failures.insert(
                        t.name.clone(),
                        (
                            ResponseError::NetworkException.code(),
                            format!("cannot reach the source cluster: {e}"),
                        ),
                    );
                }
            }
        }
    } else {
        topics.extend(requested.iter().map(|t| ControllerMirrorTopic {
            name: t.name.clone(),
            source: None,
            discard_local_writes: false,
        }));
    }
    let results = b.controller.change_mirror_topics(mirror, op, &topics).await;
    let mut by_name: BTreeMap<String, MirrorTopicResult> = results
        .into_iter()
        .map(|(name, r)| {
            let result = match r {
                Ok(topic_id) => MirrorTopicResult {
                    name: name.clone(),
                    topic_id,
                    ..Default::default()
                },
                Err(e) => MirrorTopicResult {
                    name: name.clone(),
                    error_code: e.code,
                    error_message: Some(e.message),
                    ..Default::default()
                },
            };
            (name, result)
        })
        .collect();
    for (name, (code, message)) in lookup_failures {
        by_name.insert(
            name.clone(),
            MirrorTopicResult {
                name,
                error_code: code,
                error_message: Some(message),
                ..Default::default()
            },
        );
    }
    let answers = requested
        .iter()
        .filter_map(|t| by_name.get(&t.name).cloned())
        .collect();
    (0, None, answers)
}

fn read_states_refused(r: ReadMirrorStatesRequest) -> ReadMirrorStatesResponse {
    ReadMirrorStatesResponse {
        topics: r
            .topics
            .into_iter()
            .map(|t| ReadMirrorStatesTopicResult {
                topic_id: t.topic_id,
                partitions: t
                    .partitions
                    .into_iter()
                    .map(|partition_index| ReadMirrorStatesPartitionResult {
                        partition_index,
                        error_code: ResponseError::ClusterAuthorizationFailed.code(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

async fn read_states(b: Arc<Broker>, r: ReadMirrorStatesRequest) -> ReadMirrorStatesResponse {
    let mirror_name = r.mirror_name.clone();
    // A coordinator partition's first read loads it from its log.
    tokio::task::spawn_blocking(move || {
        let topics = r
            .topics
            .iter()
            .map(|t| ReadMirrorStatesTopicResult {
                topic_id: t.topic_id,
                partitions: t
                    .partitions
                    .iter()
                    .map(|&partition_index| {
                        let key = MirrorPartitionKey {
                            mirror_name: mirror_name.clone(),
                            topic_id: t.topic_id,
                            partition: partition_index,
                        };
                        let mut result = ReadMirrorStatesPartitionResult {
                            partition_index,
                            ..Default::default()
                        };
                        match b.mirrors.services().states.read(&key) {
                            Ok(stored) => {
                                if let Some(s) = stored.state {
                                    result = result.with_failover(s.failover().as_ref());
                                    result.state = s.state.wire_value();
                                    result.previous_state = s.previous_state.wire_value();
                                    result.leader_epoch = s.leader_epoch;
                                    result.error_message = s.error_message;
                                }
                                if let Some(lme) = stored.last_mirrored_epoch {
                                    result.last_mirrored_epoch = lme.last_mirrored_epoch;
                                }
                            }
                            Err(e) => result.error_code = e.code(),
                        }
                        result
                    })
                    .collect(),
                ..Default::default()
            })
            .collect();
        ReadMirrorStatesResponse {
            topics,
            ..Default::default()
        }
    })
    .await
    .expect("reading mirror states panicked")
}

fn write_states_answer(
    r: &WriteMirrorStatesRequest,
    mut code: impl FnMut(&MirrorPartitionKey) -> i16,
) -> WriteMirrorStatesResponse {
    WriteMirrorStatesResponse {
        topics: r
            .topics
            .iter()
            .map(|t| WriteMirrorStatesTopicResult {
                topic_id: t.topic_id,
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| {
                        let key = MirrorPartitionKey {
                            mirror_name: r.mirror_name.clone(),
                            topic_id: t.topic_id,
                            partition: p.partition_index,
                        };
                        WriteMirrorStatesPartitionResult {
                            partition_index: p.partition_index,
                            error_code: code(&key),
                            ..Default::default()
                        }
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

async fn write_states(b: Arc<Broker>, r: WriteMirrorStatesRequest) -> WriteMirrorStatesResponse {
    let states = &b.mirrors.services().states;
    let mut codes: BTreeMap<(uuid::Uuid, i32), i16> = BTreeMap::new();
    let mut writes = Vec::new();
    for t in &r.topics {
        for p in &t.partitions {
            let key = MirrorPartitionKey {
                mirror_name: r.mirror_name.clone(),
                topic_id: t.topic_id,
                partition: p.partition_index,
            };
            let Ok(state) = MirrorPartitionState::from_wire_value(p.state) else {
                codes.insert(
                    (t.topic_id, p.partition_index),
                    ResponseError::InvalidRequest.code(),
                );
                continue;
            };
            let previous = states
                .read(&key)
                .ok()
                .and_then(|s| s.state)
                .map_or(MirrorPartitionState::Unknown, |s| s.state);
            let write = StateWrite {
                key,
                leader_epoch: p.leader_epoch,
                state,
                previous,
                error: p.error_message.clone(),
                lme: (p.last_mirrored_epoch != NO_EPOCH).then_some(p.last_mirrored_epoch),
                failover: p.failover(),
            };
            writes.push(write);
        }
    }
    let values = writes.iter().map(|w| (w.key.clone(), w.values())).collect();
    let results = states.write_many(values).await;
    for (w, result) in writes.iter().zip(results) {
        let code = result.map_or_else(|e| e.code(), |()| 0);
        codes.insert((w.key.topic_id, w.key.partition), code);
    }
    write_states_answer(&r, |key| codes[&(key.topic_id, key.partition)])
}

fn last_mirrored_epochs_answer(
    r: &LastMirroredEpochsRequest,
    mut answer: impl FnMut(&uuid::Uuid, i32) -> (i16, i32),
) -> LastMirroredEpochsResponse {
    LastMirroredEpochsResponse {
        topics: r
            .topics
            .iter()
            .map(|t| LastMirroredEpochsTopicResult {
                topic_id: t.topic_id,
                partitions: t
                    .partitions
                    .iter()
                    .map(|&partition_index| {
                        let (error_code, last_mirrored_epoch) =
                            answer(&t.topic_id, partition_index);
                        LastMirroredEpochsPartitionResult {
                            partition_index,
                            error_code,
                            last_mirrored_epoch,
                            ..Default::default()
                        }
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// The LME this cluster recorded for each asked partition, under any of
/// its mirrors (the asking cluster does not know our mirror names), read
/// from whichever broker coordinates each (mirror, topic, partition).
async fn last_mirrored_epochs(
    b: Arc<Broker>,
    r: LastMirroredEpochsRequest,
) -> LastMirroredEpochsResponse {
    let image = b.controller.image();
    let mirrors: Vec<String> = image.mirrors().map(|(name, _)| name.to_string()).collect();
    let services = b.mirrors.services();
    let mut answers: BTreeMap<(uuid::Uuid, i32), (i16, i32)> = BTreeMap::new();
    for t in &r.topics {
        for &partition in &t.partitions {
            let mut answer = (0, NO_EPOCH);
            for mirror_name in &mirrors {
                let key = MirrorPartitionKey {
                    mirror_name: mirror_name.clone(),
                    topic_id: t.topic_id,
                    partition,
                };
                match services.read_stored(&key).await {
                    Ok(stored) => {
                        if let Some(lme) = stored.last_mirrored_epoch {
                            answer.1 = answer.1.max(lme.last_mirrored_epoch);
                        }
                    }
                    // Not knowing is not "never mirrored": let the asker retry.
                    Err(_) => answer = (ResponseError::CoordinatorNotAvailable.code(), NO_EPOCH),
                }
                if answer.0 != 0 {
                    break;
                }
            }
            answers.insert((t.topic_id, partition), answer);
        }
    }
    last_mirrored_epochs_answer(&r, |topic_id, partition| answers[&(*topic_id, partition)])
}

async fn bump_leader_epochs(
    b: Arc<Broker>,
    r: BumpLeaderEpochsRequest,
) -> BumpLeaderEpochsResponse {
    let asked: Vec<(uuid::Uuid, i32, i32, i32)> = r
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.topic_id,
                    p.partition_index,
                    p.leader_epoch,
                    p.min_leader_epoch,
                )
            })
        })
        .collect();
    let mut results = b
        .controller
        .bump_leader_epochs(r.broker_id, &asked)
        .await
        .into_iter();
    let topics = r
        .topics
        .iter()
        .map(|t| BumpLeaderEpochsTopicResult {
            topic_id: t.topic_id,
            partitions: t
                .partitions
                .iter()
                .map(|p| {
                    let (error_code, leader_epoch) = match results.next() {
                        Some(Ok(epoch)) => (0, epoch),
                        Some(Err(e)) => (e.code, NO_EPOCH),
                        None => (ResponseError::UnknownServerError.code(), NO_EPOCH),
                    };
                    BumpLeaderEpochsPartitionResult {
                        partition_index: p.partition_index,
                        error_code,
                        leader_epoch,
                        ..Default::default()
                    }
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    BumpLeaderEpochsResponse {
        topics,
        ..Default::default()
    }
}
