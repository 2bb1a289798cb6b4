//! InitProducerId (v0-5): a fresh producer id for idempotent producers;
//! transactional ids are served by the transaction coordinator.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::ProducerId;
use tracing::warn;

use crate::broker::Broker;
use crate::replica::now_ms;

const NO_PRODUCER_ID: i64 = -1;
const NO_PRODUCER_EPOCH: i16 = -1;

pub fn handle(broker: &Broker, version: i16, req: InitProducerIdRequest) -> InitProducerIdResponse {
    let r = InitProducerIdResponse::default();
    match init(broker, &req) {
        Ok((id, epoch)) => r
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch),
        // KIP-588: clients before v4 know INVALID_PRODUCER_EPOCH only.
        Err(ResponseError::ProducerFenced) if version < 4 => r
            .with_error_code(ResponseError::InvalidProducerEpoch.code())
            .with_producer_id(ProducerId(NO_PRODUCER_ID))
            .with_producer_epoch(NO_PRODUCER_EPOCH),
        Err(e) => r
            .with_error_code(e.code())
            .with_producer_id(ProducerId(NO_PRODUCER_ID))
            .with_producer_epoch(NO_PRODUCER_EPOCH),
    }
}

fn init(broker: &Broker, req: &InitProducerIdRequest) -> Result<(i64, i16), ResponseError> {
    // v3+ may name the producer's current id and epoch (KIP-360): both or neither.
    if (req.producer_id.0 == NO_PRODUCER_ID) != (req.producer_epoch == NO_PRODUCER_EPOCH) {
        return Err(ResponseError::InvalidRequest);
    }
    match req.transactional_id.as_deref().map(|t| t.as_str()) {
        // As in Kafka, an idempotent producer always gets a fresh id at
        // epoch 0, also when it asks to bump the epoch of its current one.
        None => broker.producer_ids.next().map(|id| (id, 0)).map_err(|e| {
            warn!(error = %e, "could not allocate producer ids");
            // Retriable for producers, as Kafka's answer while no id block is ready.
            ResponseError::CoordinatorLoadInProgress
        }),
        Some("") => Err(ResponseError::InvalidRequest),
        Some(id) => broker.txns.init_producer_id(
            &broker.txn_services(),
            id,
            req.transaction_timeout_ms,
            (req.producer_id.0 != NO_PRODUCER_ID)
                .then_some((req.producer_id.0, req.producer_epoch)),
            now_ms(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use kafka_protocol::messages::TransactionalId;
    use kafka_protocol::protocol::StrBytes;

    use super::*;
    use crate::apis::test_support::{assert_encodes, test_broker};

    fn init(
        broker: &Broker,
        version: i16,
        transactional_id: Option<&str>,
        producer_id: i64,
        producer_epoch: i16,
    ) -> (i16, i64, i16) {
        let req = InitProducerIdRequest::default()
            .with_transactional_id(
                transactional_id.map(|t| TransactionalId(StrBytes::from_string(t.to_string()))),
            )
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(producer_epoch);
        let r = handle(broker, version, req);
        assert_encodes(&r, version);
        (r.error_code, r.producer_id.0, r.producer_epoch)
    }

    #[test]
    fn idempotent_producers_get_unique_ids_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        let mut ids = HashSet::new();
        for version in 0..=5 {
            let (error, id, epoch) = init(&broker, version, None, -1, -1);
            assert_eq!((error, epoch), (0, 0));
            assert!(ids.insert(id), "id {id} handed out twice");
        }
        // KIP-360: asking to bump an idempotent producer's epoch gets a new id.
        let last = *ids.iter().max().unwrap();
        let (error, id, epoch) = init(&broker, 4, None, last, 0);
        assert_eq!((error, epoch), (0, 0));
        assert!(ids.insert(id));

        broker.shutdown().unwrap();
        drop(broker);
        let broker = test_broker(dir.path());
        let (error, id, _) = init(&broker, 5, None, -1, -1);
        assert_eq!(error, 0);
        assert!(!ids.contains(&id), "id {id} reused after a restart");

        // Unclean stop: the reserved block is in the metadata log already.
        ids.insert(id);
        drop(broker);
        let broker = test_broker(dir.path());
        let (_, id, _) = init(&broker, 5, None, -1, -1);
        assert!(!ids.contains(&id), "id {id} reused after a crash");
    }

    #[test]
    fn refusals() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        let invalid = (ResponseError::InvalidRequest.code(), -1, -1);
        assert_eq!(init(&broker, 3, None, 5, -1), invalid);
        assert_eq!(init(&broker, 3, None, -1, 0), invalid);
        assert_eq!(init(&broker, 0, Some(""), -1, -1), invalid);
        // Before FindCoordinator created the transaction log, no broker
        // coordinates the id.
        let not_coordinator = (ResponseError::NotCoordinator.code(), -1, -1);
        assert_eq!(init(&broker, 5, Some("tx"), -1, -1), not_coordinator);
    }
}
