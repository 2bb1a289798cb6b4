//! CreateTopics (v2-7): topics are validated and created by the controller.
//! From v5 a created topic (or, validating only, the topic that would be
//! created) comes back with its partition count, replication factor and
//! effective configs, as Kafka's controller answers.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult, CreateTopicsResponse,
};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::records::CONFIG_RESOURCE_TOPIC;
use ottla_controller::{ControllerError, CreatedTopic, MetadataImage, MetadataRecord, NewTopic};

use crate::broker::Broker;

/// The metadata log's own topic, which clients may not create.
const CLUSTER_METADATA_TOPIC: &str = "__cluster_metadata";

pub fn handle(broker: &Broker, version: i16, req: CreateTopicsRequest) -> CreateTopicsResponse {
    let mut occurrences: HashMap<&str, usize> = HashMap::new();
    for t in &req.topics {
        *occurrences.entry(t.name.as_str()).or_default() += 1;
    }
    let mut refused: HashMap<String, ControllerError> = HashMap::new();
    let mut to_create = Vec::new();
    for t in &req.topics {
        let name = t.name.as_str();
        // Kafka creates neither copy of a name given twice.
        if occurrences[name] > 1 {
            refused.insert(
                name.to_string(),
                ControllerError::new(ResponseError::InvalidRequest, "Duplicate topic name."),
            );
        } else if name == CLUSTER_METADATA_TOPIC {
            refused.insert(
                name.to_string(),
                ControllerError::new(
                    ResponseError::InvalidRequest,
                    format!("Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited."),
                ),
            );
        } else {
            match new_topic(t) {
                Ok(topic) => to_create.push(topic),
                Err(e) => {
                    refused.insert(name.to_string(), e);
                }
            }
        }
    }
    let overrides: HashMap<String, BTreeMap<String, Option<String>>> = to_create
        .iter()
        .map(|t| (t.name.clone(), t.configs.clone()))
        .collect();
    let outcomes: HashMap<String, Result<CreatedTopic, ControllerError>> = broker
        .controller
        .block_on(
            broker
                .controller
                .create_topics(to_create, req.validate_only),
        )
        .into_iter()
        .collect();
    let view = (version >= 5).then(|| config_view(broker, req.validate_only, &overrides));
    let mut answered = HashSet::new();
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in &req.topics {
        let name = t.name.as_str();
        if !answered.insert(name) {
            continue;
        }
        let outcome = match refused.remove(name) {
            Some(e) => Err(e),
            None => outcomes[name].clone(),
        };
        let result = CreatableTopicResult::default().with_name(t.name.clone());
        topics.push(match outcome {
            Err(e) => result
                .with_error_code(e.code)
                .with_error_message(Some(StrBytes::from_string(e.message))),
            Ok(created) => {
                let mut r = result.with_error_message(None);
                if let Some(view) = &view {
                    r = r
                        .with_num_partitions(created.num_partitions)
                        .with_replication_factor(created.replication_factor)
                        .with_configs(Some(effective_configs(broker, view, name)));
                }
                if version >= 7 {
                    r = r.with_topic_id(created.topic_id);
                }
                r
            }
        });
    }
    CreateTopicsResponse::default().with_topics(topics)
}

fn new_topic(t: &CreatableTopic) -> Result<NewTopic, ControllerError> {
    let mut assignments = BTreeMap::new();
    for a in &t.assignments {
        let replicas = a.broker_ids.iter().map(|b| b.0).collect();
        if assignments.insert(a.partition_index, replicas).is_some() {
            return Err(ControllerError::new(
                ResponseError::InvalidReplicaAssignment,
                format!(
                    "Found multiple manual partition assignments for partition {}",
                    a.partition_index
                ),
            ));
        }
    }
    Ok(NewTopic {
        name: t.name.to_string(),
        num_partitions: t.num_partitions,
        replication_factor: t.replication_factor,
        assignments,
        configs: t
            .configs
            .iter()
            .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
            .collect(),
        topic_id: None,
    })
}

/// The image the answer's configs are resolved in: the controller's after
/// creation; when only validating, a copy holding the requested overrides.
fn config_view(
    broker: &Broker,
    validate_only: bool,
    overrides: &HashMap<String, BTreeMap<String, Option<String>>>,
) -> Arc<MetadataImage> {
    let image = broker.controller.image();
    if !validate_only {
        return image;
    }
    let mut candidate = (*image).clone();
    for (topic, configs) in overrides {
        for (key, value) in configs {
            let record = MetadataRecord::Config {
                resource_type: CONFIG_RESOURCE_TOPIC,
                resource_name: topic.clone(),
                name: key.clone(),
                value: value.clone(),
            };
            candidate.apply(image.offset, &record);
        }
    }
    Arc::new(candidate)
}

/// Every topic config, sorted by name, as Kafka's controller reports them.
fn effective_configs(
    broker: &Broker,
    image: &MetadataImage,
    topic: &str,
) -> Vec<CreatableTopicConfigs> {
    let mut resolved = broker.configs.describe_in(image, topic);
    resolved.sort_by_key(|c| c.key.name);
    resolved
        .into_iter()
        .map(|c| {
            CreatableTopicConfigs::default()
                .with_name(StrBytes::from_static_str(c.key.name))
                .with_value(Some(StrBytes::from_string(c.value)))
                .with_read_only(false)
                .with_config_source(c.source.code())
                .with_is_sensitive(false)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::create_topics_request::{
        CreatableReplicaAssignment, CreatableTopicConfig,
    };
    use kafka_protocol::messages::{BrokerId, TopicName};

    use super::*;
    use crate::apis::test_support::{assert_encodes, test_broker};

    pub(crate) fn topic(name: &str, partitions: i32) -> CreatableTopic {
        CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_string())))
            .with_num_partitions(partitions)
            .with_replication_factor(-1)
    }

    fn config(name: &str, value: &str) -> CreatableTopicConfig {
        CreatableTopicConfig::default()
            .with_name(StrBytes::from_string(name.to_string()))
            .with_value(Some(StrBytes::from_string(value.to_string())))
    }

    fn request(topics: Vec<CreatableTopic>, validate_only: bool) -> CreateTopicsRequest {
        CreateTopicsRequest::default()
            .with_topics(topics)
            .with_timeout_ms(30_000)
            .with_validate_only(validate_only)
    }

    fn by_name<'a>(r: &'a CreateTopicsResponse, name: &str) -> &'a CreatableTopicResult {
        r.topics.iter().find(|t| t.name.as_str() == name).unwrap()
    }

    fn config_value<'a>(t: &'a CreatableTopicResult, key: &str) -> &'a CreatableTopicConfigs {
        t.configs
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.name.as_str() == key)
            .unwrap()
    }

    #[test]
    fn creates_topics_and_reports_their_configs() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        let compacted =
            topic("compacted", 3).with_configs(vec![config("cleanup.policy", "compact")]);
        let r = handle(
            &broker,
            7,
            request(vec![compacted, topic("plain", -1)], false),
        );
        assert_encodes(&r, 7);
        let c = by_name(&r, "compacted");
        assert_eq!(c.error_code, 0);
        assert_eq!(c.error_message, None);
        assert_eq!((c.num_partitions, c.replication_factor), (3, 1));
        let image = broker.controller.image();
        assert_eq!(c.topic_id, image.topic_by_name("compacted").unwrap().id);
        let policy = config_value(c, "cleanup.policy");
        assert_eq!(policy.value.as_deref(), Some("compact"));
        assert_eq!(policy.config_source, 1);
        let retention = config_value(c, "retention.ms");
        assert_eq!(retention.value.as_deref(), Some("604800000"));
        assert_eq!(retention.config_source, 5);
        let names: Vec<&str> = c
            .configs
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert!(
            names.windows(2).all(|w| w[0] < w[1]),
            "configs are sorted by name"
        );
        assert_eq!(
            by_name(&r, "plain").num_partitions,
            1,
            "-1 takes num.partitions"
        );
        assert_eq!(
            image.topic_by_name("compacted").unwrap().partitions.len(),
            3
        );
    }

    #[test]
    fn validate_only_reports_would_be_values_and_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        let t = topic("dry", 2).with_configs(vec![config("retention.ms", "1000")]);
        let r = handle(&broker, 5, request(vec![t], true));
        assert_encodes(&r, 5);
        let dry = by_name(&r, "dry");
        assert_eq!(dry.error_code, 0);
        assert_eq!(dry.num_partitions, 2);
        let retention = config_value(dry, "retention.ms");
        assert_eq!(
            (retention.value.as_deref(), retention.config_source),
            (Some("1000"), 1)
        );
        assert!(broker.controller.image().topic_by_name("dry").is_none());
        assert!(broker
            .controller
            .image()
            .configs_of(CONFIG_RESOURCE_TOPIC, "dry")
            .is_none());
    }

    #[test]
    fn refusals_carry_kafka_error_codes() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        handle(&broker, 7, request(vec![topic("taken", 1)], false));
        let manual = topic("manual", -1).with_assignments(vec![
            CreatableReplicaAssignment::default()
                .with_partition_index(0)
                .with_broker_ids(vec![BrokerId(1)]),
            CreatableReplicaAssignment::default()
                .with_partition_index(0)
                .with_broker_ids(vec![BrokerId(1)]),
        ]);
        let topics = vec![
            topic("bad name", 1),
            topic("taken", 1),
            topic("twice", 1),
            topic("twice", 2),
            topic("bad-config", 1).with_configs(vec![config("retention.ms", "soon")]),
            topic("unknown-config", 1).with_configs(vec![config("no.such.key", "1")]),
            topic("zero", 0),
            topic("rf3", 1).with_replication_factor(3),
            topic("__cluster_metadata", 1),
            manual,
        ];
        for version in [2, 7] {
            let r = handle(&broker, version, request(topics.clone(), false));
            assert_encodes(&r, version);
            let code = |n: &str| by_name(&r, n).error_code;
            assert_eq!(
                code("bad name"),
                ResponseError::InvalidTopicException.code()
            );
            assert_eq!(code("taken"), ResponseError::TopicAlreadyExists.code());
            assert_eq!(code("twice"), ResponseError::InvalidRequest.code());
            assert_eq!(
                r.topics
                    .iter()
                    .filter(|t| t.name.as_str() == "twice")
                    .count(),
                1
            );
            assert_eq!(code("bad-config"), ResponseError::InvalidConfig.code());
            assert_eq!(code("unknown-config"), ResponseError::InvalidConfig.code());
            assert_eq!(code("zero"), ResponseError::InvalidPartitions.code());
            assert_eq!(code("rf3"), ResponseError::InvalidReplicationFactor.code());
            assert_eq!(
                code("__cluster_metadata"),
                ResponseError::InvalidRequest.code()
            );
            assert_eq!(
                code("manual"),
                ResponseError::InvalidReplicaAssignment.code()
            );
            assert!(by_name(&r, "taken")
                .error_message
                .as_deref()
                .unwrap()
                .contains("already exists"));
            assert_eq!(by_name(&r, "taken").num_partitions, -1);
        }
        assert_eq!(broker.controller.image().topics.len(), 1);
    }

    #[test]
    fn manual_assignments_set_partitions_and_replication() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        let assignment = |p| {
            CreatableReplicaAssignment::default()
                .with_partition_index(p)
                .with_broker_ids(vec![BrokerId(1)])
        };
        let manual = topic("manual", -1).with_assignments(vec![assignment(0), assignment(1)]);
        let r = handle(&broker, 6, request(vec![manual], false));
        assert_encodes(&r, 6);
        let m = by_name(&r, "manual");
        assert_eq!(
            (m.error_code, m.num_partitions, m.replication_factor),
            (0, 2, 1)
        );
    }
}
