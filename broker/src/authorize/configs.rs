//! Gates of the topic and config admin APIs: CreateTopics (CREATE on the
//! cluster or the topic; the new topic's configs need DESCRIBE_CONFIGS), DeleteTopics (DELETE), CreatePartitions (ALTER),
//! DescribeConfigs (DESCRIBE_CONFIGS) and (Incremental)AlterConfigs
//! (ALTER_CONFIGS), on the topic, the group, or the cluster for broker
//! resources.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_configs_request::AlterConfigsRequest;
use kafka_protocol::messages::alter_configs_response::{
    AlterConfigsResourceResponse, AlterConfigsResponse,
};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsRequest;
use kafka_protocol::messages::create_partitions_response::{
    CreatePartitionsResponse, CreatePartitionsTopicResult,
};
use kafka_protocol::messages::create_topics_request::CreateTopicsRequest;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicResult, CreateTopicsResponse,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicsRequest;
use kafka_protocol::messages::delete_topics_response::{
    DeletableTopicResult, DeleteTopicsResponse,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsRequest;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResponse, DescribeConfigsResult,
};
use kafka_protocol::messages::incremental_alter_configs_request::IncrementalAlterConfigsRequest;
use kafka_protocol::messages::incremental_alter_configs_response as incremental;
use kafka_protocol::messages::RequestKind;
use kafka_protocol::protocol::StrBytes;
use ottla_controller::acls::operation;

use super::{patch, split, Gate};
use crate::security::authorizer::Access;

/// Kafka's ConfigResource types.
const CONFIG_TOPIC: i8 = 2;
const CONFIG_GROUP: i8 = 32;

const TOPIC_DENIED: ResponseError = ResponseError::TopicAuthorizationFailed;

fn message(e: ResponseError) -> Option<StrBytes> {
    Some(StrBytes::from_static_str(match e {
        ResponseError::TopicAuthorizationFailed => "Topic authorization failed.",
        ResponseError::GroupAuthorizationFailed => "Group authorization failed.",
        _ => "Cluster authorization failed.",
    }))
}

/// The check a config resource needs: `op` on the topic, the group, or
/// (brokers, loggers, client metrics) the cluster; the error if refused.
fn config_check(
    access: &Access,
    op: i8,
    resource_type: i8,
    name: &str,
) -> Result<(), ResponseError> {
    match resource_type {
        CONFIG_TOPIC if !access.topic(op, name) => Err(TOPIC_DENIED),
        CONFIG_GROUP if !access.group(op, name) => Err(ResponseError::GroupAuthorizationFailed),
        CONFIG_TOPIC | CONFIG_GROUP => Ok(()),
        _ if !access.cluster(op) => Err(ResponseError::ClusterAuthorizationFailed),
        _ => Ok(()),
    }
}

pub fn create_topics(access: &Arc<Access>, version: i16, mut req: CreateTopicsRequest) -> Gate {
    let may_create_all = access.cluster(operation::CREATE);
    let (kept, refused) = split(std::mem::take(&mut req.topics), |t| {
        may_create_all || access.topic(operation::CREATE, &t.name)
    });
    req.topics = kept;
    let access = access.clone();
    let p = patch!(CreateTopics, move |r: &mut CreateTopicsResponse| {
        // v5+ answers with the new topic's configs: only for DESCRIBE_CONFIGS.
        if version >= 5 {
            for t in r.topics.iter_mut().filter(|t| t.error_code == 0) {
                if !access.topic(operation::DESCRIBE_CONFIGS, &t.name) {
                    t.topic_config_error_code = TOPIC_DENIED.code();
                    t.num_partitions = -1;
                    t.replication_factor = -1;
                    t.configs = Some(Vec::new());
                }
            }
        }
        r.topics.extend(refused.into_iter().map(|t| {
            CreatableTopicResult::default()
                .with_name(t.name)
                .with_error_code(TOPIC_DENIED.code())
                .with_error_message(message(TOPIC_DENIED))
        }));
    });
    Gate::Pass(RequestKind::CreateTopics(req), p)
}

pub fn delete_topics(access: &Access, version: i16, mut req: DeleteTopicsRequest) -> Gate {
    let allowed = |name: &str| access.topic(operation::DELETE, name);
    let refused: Vec<DeletableTopicResult> = if version >= 6 {
        let (kept, refused) = split(std::mem::take(&mut req.topics), |t| {
            match (&t.name, access.image().topic_by_id(&t.topic_id)) {
                (Some(n), _) => allowed(n),
                (None, Some(topic)) => allowed(&topic.name),
                // Unknown ids pass: the handler answers UNKNOWN_TOPIC_ID.
                (None, None) => true,
            }
        });
        req.topics = kept;
        refused
            .into_iter()
            .map(|t| {
                DeletableTopicResult::default()
                    .with_name(t.name)
                    .with_topic_id(t.topic_id)
            })
            .collect()
    } else {
        let (kept, refused) = split(std::mem::take(&mut req.topic_names), |n| allowed(n));
        req.topic_names = kept;
        refused
            .into_iter()
            .map(|n| DeletableTopicResult::default().with_name(Some(n)))
            .collect()
    };
    let p = if refused.is_empty() {
        None
    } else {
        patch!(DeleteTopics, move |r: &mut DeleteTopicsResponse| {
            r.responses.extend(refused.into_iter().map(|t| {
                let t = t.with_error_code(TOPIC_DENIED.code());
                if version >= 5 {
                    t.with_error_message(message(TOPIC_DENIED))
                } else {
                    t
                }
            }));
        })
    };
    Gate::Pass(RequestKind::DeleteTopics(req), p)
}

pub fn create_partitions(access: &Access, mut req: CreatePartitionsRequest) -> Gate {
    let (kept, refused) = split(std::mem::take(&mut req.topics), |t| {
        access.topic(operation::ALTER, &t.name)
    });
    req.topics = kept;
    let p = if refused.is_empty() {
        None
    } else {
        patch!(CreatePartitions, move |r: &mut CreatePartitionsResponse| {
            r.results.extend(refused.into_iter().map(|t| {
                CreatePartitionsTopicResult::default()
                    .with_name(t.name)
                    .with_error_code(TOPIC_DENIED.code())
                    .with_error_message(message(TOPIC_DENIED))
            }));
        })
    };
    Gate::Pass(RequestKind::CreatePartitions(req), p)
}

pub fn describe_configs(access: &Access, mut req: DescribeConfigsRequest) -> Gate {
    let mut refused = Vec::new();
    req.resources.retain(|res| {
        let check = config_check(
            access,
            operation::DESCRIBE_CONFIGS,
            res.resource_type,
            &res.resource_name,
        );
        if let Err(e) = check {
            refused.push(
                DescribeConfigsResult::default()
                    .with_error_code(e.code())
                    .with_error_message(message(e))
                    .with_resource_type(res.resource_type)
                    .with_resource_name(res.resource_name.clone()),
            );
        }
        check.is_ok()
    });
    let p = if refused.is_empty() {
        None
    } else {
        patch!(DescribeConfigs, move |r: &mut DescribeConfigsResponse| {
            r.results.extend(refused);
        })
    };
    Gate::Pass(RequestKind::DescribeConfigs(req), p)
}

pub fn alter_configs(access: &Access, mut req: AlterConfigsRequest) -> Gate {
    let mut refused = Vec::new();
    req.resources.retain(|res| {
        let check = config_check(
            access,
            operation::ALTER_CONFIGS,
            res.resource_type,
            &res.resource_name,
        );
        if let Err(e) = check {
            refused.push(
                AlterConfigsResourceResponse::default()
                    .with_error_code(e.code())
                    .with_error_message(message(e))
                    .with_resource_type(res.resource_type)
                    .with_resource_name(res.resource_name.clone()),
            );
        }
        check.is_ok()
    });
    let p = if refused.is_empty() {
        None
    } else {
        patch!(AlterConfigs, move |r: &mut AlterConfigsResponse| {
            r.responses.extend(refused);
        })
    };
    Gate::Pass(RequestKind::AlterConfigs(req), p)
}

pub fn incremental_alter_configs(access: &Access, mut req: IncrementalAlterConfigsRequest) -> Gate {
    let mut refused = Vec::new();
    req.resources.retain(|res| {
        let check = config_check(
            access,
            operation::ALTER_CONFIGS,
            res.resource_type,
            &res.resource_name,
        );
        if let Err(e) = check {
            refused.push(
                incremental::AlterConfigsResourceResponse::default()
                    .with_error_code(e.code())
                    .with_error_message(message(e))
                    .with_resource_type(res.resource_type)
                    .with_resource_name(res.resource_name.clone()),
            );
        }
        check.is_ok()
    });
    let p = if refused.is_empty() {
        None
    } else {
        patch!(
            IncrementalAlterConfigs,
            move |r: &mut incremental::IncrementalAlterConfigsResponse| {
                r.responses.extend(refused);
            }
        )
    };
    Gate::Pass(RequestKind::IncrementalAlterConfigs(req), p)
}
