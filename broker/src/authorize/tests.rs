//! Gate tests: refused resources come back as errors beside the allowed
//! ones.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::{ProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ProduceRequest, RequestKind, ResponseKind, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::acls::{operation, pattern, permission, resource, Acl};
use ottla_controller::{MetadataImage, MetadataRecord};
use uuid::Uuid;

use super::{gate, Gate};
use crate::security::authorizer::{Access, Authorizer};
use crate::security::KafkaPrincipal;

/// alice's access to an image holding `acls`.
pub(super) fn access(acls: &[Acl]) -> Arc<Access> {
    let mut image = MetadataImage::empty();
    for (i, acl) in acls.iter().enumerate() {
        let record = MetadataRecord::AccessControlEntry {
            id: Uuid::from_u128(i as u128 + 1),
            acl: acl.clone(),
        };
        image.apply(i as i64, &record);
    }
    Arc::new(Access::new(
        Some(Arc::new(Authorizer::default())),
        Arc::new(image),
        &KafkaPrincipal::user("alice"),
        IpAddr::V4(Ipv4Addr::LOCALHOST),
    ))
}

fn topic(name: &str) -> TopicProduceData {
    TopicProduceData::default()
        .with_name(TopicName(StrBytes::from_string(name.into())))
        .with_partition_data(vec![PartitionProduceData::default().with_index(0)])
}

fn produce_gate(access: &Arc<Access>, req: ProduceRequest) -> (Vec<String>, ProduceResponse) {
    let Gate::Pass(RequestKind::Produce(passed), patch) = gate(access, true, 9, req.into()) else {
        panic!("produce is always passed on");
    };
    let kept = passed
        .topic_data
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    let mut response = ResponseKind::Produce(
        ProduceResponse::default().with_responses(vec![TopicProduceResponse::default()]),
    );
    if let Some(patch) = patch {
        patch(&mut response);
    }
    let ResponseKind::Produce(r) = response else {
        unreachable!()
    };
    (kept, r)
}

#[test]
fn produce_keeps_allowed_topics_and_reports_the_others() {
    let write = |pt, name: &str, rt| Acl {
        resource_type: rt,
        resource_name: name.into(),
        pattern_type: pt,
        principal: "User:alice".into(),
        host: "*".into(),
        operation: operation::WRITE,
        permission: permission::ALLOW,
    };
    let a = access(&[write(pattern::PREFIXED, "app-", resource::TOPIC)]);
    let req = ProduceRequest::default().with_topic_data(vec![topic("app-1"), topic("other")]);
    let (kept, r) = produce_gate(&a, req);
    assert_eq!(kept, ["app-1"]);
    assert_eq!(r.responses.len(), 2, "the handler's answer and the refusal");
    assert_eq!(r.responses[1].name.as_str(), "other");
    assert_eq!(
        r.responses[1].partition_responses[0].error_code,
        ResponseError::TopicAuthorizationFailed.code()
    );

    // A transactional producer must be allowed its id before any topic.
    let req = ProduceRequest::default()
        .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("tx"))))
        .with_topic_data(vec![topic("app-1")]);
    let (kept, r) = produce_gate(&a, req);
    assert!(kept.is_empty());
    assert_eq!(
        r.responses[1].partition_responses[0].error_code,
        ResponseError::TransactionalIdAuthorizationFailed.code()
    );
    let a = access(&[
        write(pattern::PREFIXED, "app-", resource::TOPIC),
        write(pattern::LITERAL, "tx", resource::TRANSACTIONAL_ID),
    ]);
    let req = ProduceRequest::default()
        .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("tx"))))
        .with_topic_data(vec![topic("app-1")]);
    let (kept, r) = produce_gate(&a, req);
    assert_eq!(kept, ["app-1"]);
    assert_eq!(r.responses.len(), 1);
}
