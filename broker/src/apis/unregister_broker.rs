//! UnregisterBroker: removes a broker's registration
//! (`kafka-cluster.sh unregister --id N`), for a broker taken out of
//! service; the controller moves its leaderships, ISR and ELR places first.

use kafka_protocol::messages::{UnregisterBrokerRequest, UnregisterBrokerResponse};
use kafka_protocol::protocol::StrBytes;

use crate::broker::Broker;

pub fn handle(
    broker: &Broker,
    _version: i16,
    req: UnregisterBrokerRequest,
) -> UnregisterBrokerResponse {
    let id = req.broker_id.0;
    match broker
        .controller
        .block_on(broker.controller.unregister_broker(id))
    {
        Ok(()) => UnregisterBrokerResponse::default(),
        Err(e) => UnregisterBrokerResponse::default()
            .with_error_code(e.code)
            .with_error_message(Some(StrBytes::from_string(e.message))),
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::error::ResponseError;
    use kafka_protocol::messages::BrokerId;

    use super::*;
    use crate::apis::test_support::{off_runtime, test_broker};

    #[test]
    fn an_unknown_broker_is_refused_and_a_known_one_leaves_the_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        let unregister = |id| {
            let req = UnregisterBrokerRequest::default().with_broker_id(BrokerId(id));
            off_runtime(|| handle(&broker, 0, req))
        };
        let unknown = unregister(7);
        assert_eq!(
            unknown.error_code,
            ResponseError::BrokerIdNotRegistered.code()
        );
        assert_eq!(
            unknown.error_message.as_deref(),
            Some("Broker ID 7 is not currently registered")
        );
        assert!(broker.controller.image().brokers.contains_key(&1));
        assert_eq!(unregister(1).error_code, 0);
        assert!(!broker.controller.image().brokers.contains_key(&1));
    }
}
