//! DeleteTopics (v1-6; v6 names topics by name or by id), following Kafka's
//! controller: duplicates and ambiguous entries are refused, the rest are
//! resolved to ids and deleted in one metadata commit. Like Kafka, internal
//! topics may be deleted too (only `__cluster_metadata` is not a topic here).

use std::collections::{BTreeMap, HashSet};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_topics_request::DeleteTopicsRequest;
use kafka_protocol::messages::delete_topics_response::{
    DeletableTopicResult, DeleteTopicsResponse,
};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;
use ottla_controller::ControllerError;
use uuid::Uuid;

use crate::broker::Broker;

/// One answer: the topic as far as it is known, and the outcome.
struct Outcome {
    name: Option<String>,
    id: Uuid,
    error: Option<ControllerError>,
}

impl Outcome {
    fn failed(name: Option<&str>, id: Uuid, error: ResponseError, message: &str) -> Self {
        Self {
            name: name.map(str::to_string),
            id,
            error: Some(ControllerError::new(error, message)),
        }
    }
}

pub fn handle(broker: &Broker, version: i16, req: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let requested: Vec<(Option<String>, Uuid)> = if version >= 6 {
        req.topics
            .iter()
            .map(|t| (t.name.as_ref().map(|n| n.to_string()), t.topic_id))
            .collect()
    } else {
        req.topic_names
            .iter()
            .map(|n| (Some(n.to_string()), Uuid::nil()))
            .collect()
    };
    let outcomes = if broker.settings.delete_topic_enable {
        delete(broker, &requested)
    } else {
        // Before v3 clients did not know TOPIC_DELETION_DISABLED.
        let error = if version < 3 {
            ResponseError::InvalidRequest
        } else {
            ResponseError::TopicDeletionDisabled
        };
        requested
            .iter()
            .map(|(name, id)| {
                Outcome::failed(name.as_deref(), *id, error, "Topic deletion is disabled.")
            })
            .collect()
    };
    let responses = outcomes
        .into_iter()
        .map(|o| {
            let (code, message) = o.error.map_or((0, None), |e| (e.code, Some(e.message)));
            let mut r = DeletableTopicResult::default()
                .with_name(o.name.map(|n| TopicName(StrBytes::from_string(n))))
                .with_error_code(code);
            if version >= 5 {
                r = r.with_error_message(message.map(StrBytes::from_string));
            }
            if version >= 6 {
                r = r.with_topic_id(o.id);
            }
            r
        })
        .collect();
    DeleteTopicsResponse::default().with_responses(responses)
}

fn delete(broker: &Broker, requested: &[(Option<String>, Uuid)]) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    let mut names = Vec::new();
    let mut ids = Vec::new();
    for (name, id) in requested {
        match (name, id.is_nil()) {
            (None, true) => outcomes.push(Outcome::failed(
                None,
                *id,
                ResponseError::InvalidRequest,
                "Neither topic name nor id were specified.",
            )),
            (None, false) => ids.push(*id),
            (Some(n), true) => names.push(n.clone()),
            (Some(n), false) => outcomes.push(Outcome::failed(
                Some(n),
                *id,
                ResponseError::InvalidRequest,
                "You may not specify both topic name and topic id.",
            )),
        }
    }
    let (names, duplicate_names) = split_duplicates(names);
    let (ids, mut duplicate_ids) = split_duplicates(ids);
    for name in &duplicate_names {
        outcomes.push(Outcome::failed(
            Some(name),
            Uuid::nil(),
            ResponseError::InvalidRequest,
            "Duplicate topic name.",
        ));
    }
    for id in &duplicate_ids {
        outcomes.push(Outcome::failed(
            None,
            *id,
            ResponseError::InvalidRequest,
            "Duplicate topic id.",
        ));
    }
    let image = broker.controller.image();
    let mut targets: BTreeMap<Uuid, String> = BTreeMap::new();
    for id in ids {
        match image.topic_by_id(&id) {
            Some(t) => {
                targets.insert(id, t.name.clone());
            }
            None => outcomes.push(Outcome::failed(
                None,
                id,
                ResponseError::UnknownTopicId,
                "This server does not host this topic ID.",
            )),
        }
    }
    for name in names {
        let Some(t) = image.topic_by_name(&name) else {
            outcomes.push(Outcome::failed(
                Some(&name),
                Uuid::nil(),
                ResponseError::UnknownTopicOrPartition,
                "This server does not host this topic-partition.",
            ));
            continue;
        };
        // A name and an id for the same topic: Kafka deletes neither.
        if duplicate_ids.contains(&t.id) || targets.insert(t.id, name.clone()).is_some() {
            duplicate_ids.insert(t.id);
            targets.remove(&t.id);
            outcomes.push(Outcome::failed(
                Some(&name),
                t.id,
                ResponseError::InvalidRequest,
                "The provided topic name maps to an ID that was already supplied.",
            ));
        }
    }
    let to_delete: Vec<String> = targets.values().cloned().collect();
    for (name, result) in broker
        .controller
        .block_on(broker.controller.delete_topics(&to_delete))
    {
        let id = image.topic_by_name(&name).map_or(Uuid::nil(), |t| t.id);
        outcomes.push(Outcome {
            name: Some(name),
            id,
            error: result.err(),
        });
    }
    outcomes
}

/// Splits values into those given once and those given more than once.
fn split_duplicates<T: Clone + Eq + std::hash::Hash>(values: Vec<T>) -> (Vec<T>, HashSet<T>) {
    let mut seen = HashSet::new();
    let mut duplicates = HashSet::new();
    for v in &values {
        if !seen.insert(v.clone()) {
            duplicates.insert(v.clone());
        }
    }
    let mut once = Vec::new();
    for v in values {
        if !duplicates.contains(&v) && !once.contains(&v) {
            once.push(v);
        }
    }
    (once, duplicates)
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::delete_topics_request::DeleteTopicState;

    use super::*;

    /// Creates a topic and returns its id.
    fn created(broker: &Broker, name: &str, partitions: i32) -> Uuid {
        create_topic(broker, name, partitions);
        broker.controller.image().topic_by_name(name).unwrap().id
    }
    use crate::apis::test_support::{assert_encodes, create_topic, test_settings};
    use crate::broker::Broker;

    fn by_names(names: &[&str]) -> DeleteTopicsRequest {
        DeleteTopicsRequest::default()
            .with_topic_names(
                names
                    .iter()
                    .map(|n| TopicName(StrBytes::from_string(n.to_string())))
                    .collect(),
            )
            .with_timeout_ms(30_000)
    }

    fn state(name: Option<&str>, id: Uuid) -> DeleteTopicState {
        DeleteTopicState::default()
            .with_name(name.map(|n| TopicName(StrBytes::from_string(n.to_string()))))
            .with_topic_id(id)
    }

    fn code_of(r: &DeleteTopicsResponse, name: Option<&str>, id: Uuid) -> i16 {
        r.responses
            .iter()
            .find(|t| t.name.as_ref().map(|n| n.as_str()) == name && t.topic_id == id)
            .unwrap_or_else(|| panic!("no answer for {name:?} {id}"))
            .error_code
    }

    #[test]
    fn deletes_by_name_and_refuses_unknown_and_duplicate_names() {
        let dir = tempfile::tempdir().unwrap();
        let broker = crate::apis::test_support::open_broker(test_settings(dir.path())).unwrap();
        create_topic(&broker, "a", 1);
        create_topic(&broker, "b", 1);
        create_topic(&broker, "__consumer_offsets", 1);
        let r = handle(
            &broker,
            1,
            by_names(&["a", "missing", "b", "b", "__consumer_offsets"]),
        );
        assert_encodes(&r, 1);
        let nil = Uuid::nil();
        assert_eq!(code_of(&r, Some("a"), nil), 0);
        assert_eq!(
            code_of(&r, Some("missing"), nil),
            ResponseError::UnknownTopicOrPartition.code()
        );
        assert_eq!(
            code_of(&r, Some("b"), nil),
            ResponseError::InvalidRequest.code()
        );
        assert_eq!(
            code_of(&r, Some("__consumer_offsets"), nil),
            0,
            "Kafka lets clients delete internal topics"
        );
        let image = broker.controller.image();
        assert!(image.topic_by_name("a").is_none());
        assert!(image.topic_by_name("b").is_some());
        let r = handle(&broker, 5, by_names(&["gone"]));
        assert_encodes(&r, 5);
        assert!(r.responses[0].error_message.is_some());
    }

    #[test]
    fn v6_deletes_by_id() {
        let dir = tempfile::tempdir().unwrap();
        let broker = crate::apis::test_support::open_broker(test_settings(dir.path())).unwrap();
        let a = created(&broker, "a", 2);
        let b = created(&broker, "b", 1);
        let c = created(&broker, "c", 1);
        let unknown = Uuid::new_v4();
        let req = DeleteTopicsRequest::default().with_topics(vec![
            state(None, a),
            state(None, unknown),
            state(Some("b"), b),
            state(None, Uuid::nil()),
            state(None, c),
            state(Some("c"), Uuid::nil()),
        ]);
        let r = handle(&broker, 6, req);
        assert_encodes(&r, 6);
        assert_eq!(
            code_of(&r, Some("a"), a),
            0,
            "the name comes back for an id"
        );
        assert_eq!(
            code_of(&r, None, unknown),
            ResponseError::UnknownTopicId.code()
        );
        assert_eq!(
            code_of(&r, Some("b"), b),
            ResponseError::InvalidRequest.code()
        );
        assert_eq!(
            code_of(&r, None, Uuid::nil()),
            ResponseError::InvalidRequest.code()
        );
        assert_eq!(
            code_of(&r, Some("c"), c),
            ResponseError::InvalidRequest.code()
        );
        let image = broker.controller.image();
        assert!(image.topic_by_id(&a).is_none());
        assert!(image.topic_by_id(&b).is_some());
        assert!(
            image.topic_by_id(&c).is_some(),
            "name and id of one topic: neither deletes"
        );
    }

    #[test]
    fn disabled_deletion_refuses_every_topic() {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = test_settings(dir.path());
        settings.delete_topic_enable = false;
        let broker = crate::apis::test_support::open_broker(settings).unwrap();
        let id = created(&broker, "kept", 1);
        let r = handle(&broker, 2, by_names(&["kept"]));
        assert_encodes(&r, 2);
        assert_eq!(
            r.responses[0].error_code,
            ResponseError::InvalidRequest.code()
        );
        let r = handle(
            &broker,
            6,
            DeleteTopicsRequest::default().with_topics(vec![state(None, id)]),
        );
        assert_encodes(&r, 6);
        assert_eq!(
            r.responses[0].error_code,
            ResponseError::TopicDeletionDisabled.code()
        );
        assert!(broker.controller.image().topic_by_id(&id).is_some());
    }
}
