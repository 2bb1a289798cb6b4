//! Gates of Metadata and DescribeTopicPartitions: only topics the principal
//! may DESCRIBE are shown (listed ones silently, requested ones as
//! TOPIC_AUTHORIZATION_FAILED), auto-creation needs CREATE on the cluster or
//! the topic, and the authorized-operations fields hold the principal's.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_request::DescribeTopicPartitionsRequest;
use kafka_protocol::messages::describe_topic_partitions_response::{
    DescribeTopicPartitionsResponse, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::metadata_response::{MetadataResponse, MetadataResponseTopic};
use kafka_protocol::messages::RequestKind;
use ottla_controller::acls::{operation, resource};

use super::{patch, split, Gate};
use crate::apis::metadata::{
    is_internal_topic, ALL_CLUSTER_OPERATIONS, ALL_TOPIC_OPERATIONS, OPERATIONS_NOT_REQUESTED,
};
use crate::security::authorizer::access::CLUSTER_NAME;
use crate::security::authorizer::Access;

/// What a request topic names: by name, or (v10+) by id through the image.
fn requested_name(access: &Access, t: &MetadataRequestTopic) -> Option<String> {
    match &t.name {
        Some(n) => Some(n.to_string()),
        None => access
            .image()
            .topic_by_id(&t.topic_id)
            .map(|t| t.name.clone()),
    }
}

pub fn metadata(
    access: &Arc<Access>,
    version: i16,
    auto_create: bool,
    mut req: MetadataRequest,
) -> Gate {
    let mut refused = Vec::new();
    if let Some(topics) = req.topics.take() {
        let creating = auto_create && req.allow_auto_topic_creation;
        let may_create_all = access.cluster(operation::CREATE);
        let (kept, out) = split(topics, |t| match requested_name(access, t) {
            // Unknown ids pass: the handler answers UNKNOWN_TOPIC_ID.
            None => true,
            Some(name) => {
                access.topic(operation::DESCRIBE, &name)
                    && (!creating
                        || may_create_all
                        || access.image().topic_by_name(&name).is_some()
                        || access.topic(operation::CREATE, &name))
            }
        });
        req.topics = Some(kept);
        refused = out;
    }
    let listing_all = req.topics.is_none();
    let topic_ops = version >= 8 && req.include_topic_authorized_operations;
    let cluster_ops = (8..=10).contains(&version) && req.include_cluster_authorized_operations;
    let access = access.clone();
    let p = patch!(Metadata, move |r: &mut MetadataResponse| {
        if listing_all {
            r.topics.retain(|t| {
                t.name
                    .as_ref()
                    .is_some_and(|n| access.topic(operation::DESCRIBE, n))
            });
        }
        for t in &mut r.topics {
            if topic_ops && t.topic_authorized_operations != OPERATIONS_NOT_REQUESTED {
                if let Some(n) = &t.name {
                    t.topic_authorized_operations =
                        access.operations(ALL_TOPIC_OPERATIONS, resource::TOPIC, n);
                }
            }
        }
        r.topics.extend(refused.into_iter().map(|t| {
            let internal = t.name.as_ref().is_some_and(|n| is_internal_topic(n));
            let mut out = MetadataResponseTopic::default()
                .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                .with_name(t.name)
                .with_topic_id(if version >= 10 {
                    t.topic_id
                } else {
                    Default::default()
                });
            if version >= 1 {
                out = out.with_is_internal(internal);
            }
            out
        }));
        if cluster_ops {
            r.cluster_authorized_operations =
                access.operations(ALL_CLUSTER_OPERATIONS, resource::CLUSTER, CLUSTER_NAME);
        }
    });
    Gate::Pass(RequestKind::Metadata(req), p)
}

pub fn describe_topic_partitions(
    access: &Arc<Access>,
    req: DescribeTopicPartitionsRequest,
) -> Gate {
    let listing_all = req.topics.is_empty();
    let access = access.clone();
    let p = patch!(
        DescribeTopicPartitions,
        move |r: &mut DescribeTopicPartitionsResponse| {
            if listing_all {
                r.topics.retain(|t| {
                    t.name
                        .as_ref()
                        .is_some_and(|n| access.topic(operation::DESCRIBE, n))
                });
            }
            for t in &mut r.topics {
                let Some(name) = t.name.clone() else { continue };
                if access.topic(operation::DESCRIBE, &name) {
                    t.topic_authorized_operations =
                        access.operations(ALL_TOPIC_OPERATIONS, resource::TOPIC, &name);
                } else {
                    *t = DescribeTopicPartitionsResponseTopic::default()
                        .with_name(Some(name))
                        .with_error_code(ResponseError::TopicAuthorizationFailed.code());
                }
            }
        }
    );
    Gate::Pass(RequestKind::DescribeTopicPartitions(req), p)
}
