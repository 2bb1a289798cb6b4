//! DescribeCluster (v0-2): the cluster id, a controller id and the nodes of
//! the endpoint type asked for (KIP-919). Like Kafka, a broker listener
//! answers with brokers and a controller listener with controllers
//! (`handlers/controller_apis.rs`); asking one for the other is
//! MISMATCHED_ENDPOINT_TYPE. Clients cannot reach the controller through a
//! broker listener, so there the controller id is a broker's, as Kafka
//! does: this node's.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_cluster_request::DescribeClusterRequest;
use kafka_protocol::messages::describe_cluster_response::{
    DescribeClusterBroker, DescribeClusterResponse,
};
use kafka_protocol::messages::BrokerId;
use kafka_protocol::protocol::StrBytes;

use crate::apis::metadata::{ALL_CLUSTER_OPERATIONS, OPERATIONS_NOT_REQUESTED};
use crate::broker::Broker;

/// KIP-919 endpoint types.
pub const BROKERS: i8 = 1;
pub const CONTROLLERS: i8 = 2;

fn type_name(endpoint_type: i8) -> &'static str {
    if endpoint_type == BROKERS {
        "BROKER"
    } else {
        "CONTROLLER"
    }
}

/// A broker listener's answer: the registered brokers on `listener`.
pub fn handle(
    broker: &Broker,
    version: i16,
    listener: &str,
    req: DescribeClusterRequest,
) -> DescribeClusterResponse {
    let include_fenced = version >= 2 && req.include_fenced_brokers;
    answer(
        version,
        req,
        BROKERS,
        &broker.cluster_id,
        broker.node_id(),
        || brokers(broker, version, listener, include_fenced),
    )
}

/// The answer of a listener of type `served` (BROKERS or CONTROLLERS),
/// listing `nodes()` if the request asks for that type.
pub fn answer(
    version: i16,
    req: DescribeClusterRequest,
    served: i8,
    cluster_id: &str,
    node_id: i32,
    nodes: impl FnOnce() -> Vec<DescribeClusterBroker>,
) -> DescribeClusterResponse {
    let wanted = if version >= 1 {
        req.endpoint_type
    } else {
        BROKERS
    };
    // Version 0 clients know neither endpoint-type error.
    let refuse = |error: ResponseError, message: String| {
        let error = if version == 0 {
            ResponseError::InvalidRequest
        } else {
            error
        };
        DescribeClusterResponse::default()
            .with_error_code(error.code())
            .with_error_message(Some(StrBytes::from_string(message)))
    };
    if wanted != BROKERS && wanted != CONTROLLERS {
        return refuse(
            ResponseError::UnsupportedEndpointType,
            format!("Unsupported endpoint type {wanted}"),
        );
    }
    if wanted != served {
        return refuse(
            ResponseError::MismatchedEndpointType,
            format!(
                "The request was sent to an endpoint of type {}, but we wanted an endpoint of type {}",
                type_name(served),
                type_name(wanted)
            ),
        );
    }
    let mut r = DescribeClusterResponse::default()
        .with_error_message(None)
        .with_cluster_id(StrBytes::from_string(cluster_id.to_string()))
        .with_controller_id(BrokerId(node_id))
        .with_brokers(nodes())
        .with_cluster_authorized_operations(if req.include_cluster_authorized_operations {
            ALL_CLUSTER_OPERATIONS
        } else {
            OPERATIONS_NOT_REQUESTED
        });
    if version >= 1 {
        r = r.with_endpoint_type(served);
    }
    r
}

/// Registered brokers with an endpoint on the client's listener.
fn brokers(
    broker: &Broker,
    version: i16,
    listener: &str,
    include_fenced: bool,
) -> Vec<DescribeClusterBroker> {
    let image = broker.controller.image();
    image
        .brokers
        .values()
        .filter(|b| include_fenced || !b.fenced)
        .filter_map(|b| {
            let e = b.endpoints.iter().find(|e| e.listener == listener)?;
            let mut r = DescribeClusterBroker::default()
                .with_broker_id(BrokerId(b.id))
                .with_host(StrBytes::from_string(e.host.clone()))
                .with_port(i32::from(e.port))
                .with_rack(b.rack.clone().map(StrBytes::from_string));
            if version >= 2 {
                r = r.with_is_fenced(b.fenced);
            }
            Some(r)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apis::test_support::{assert_encodes, test_broker};

    fn request(endpoint_type: i8) -> DescribeClusterRequest {
        DescribeClusterRequest::default()
            .with_include_cluster_authorized_operations(true)
            .with_endpoint_type(endpoint_type)
    }

    #[test]
    fn broker_listeners_describe_brokers() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        for version in [0, 1, 2] {
            let mut req = request(BROKERS);
            if version == 0 {
                req = DescribeClusterRequest::default();
            }
            if version == 2 {
                req = req.with_include_fenced_brokers(true);
            }
            let r = handle(&broker, version, "PLAINTEXT", req);
            assert_encodes(&r, version);
            assert_eq!(r.error_code, 0);
            assert_eq!(r.cluster_id.as_str(), broker.cluster_id);
            assert_eq!(r.controller_id, BrokerId(1));
            assert_eq!(r.brokers.len(), 1);
            let b = &r.brokers[0];
            assert_eq!(
                (b.broker_id, b.host.as_str(), b.port),
                (BrokerId(1), "localhost", 9092)
            );
            assert!(!b.is_fenced);
        }
        let r = handle(&broker, 0, "PLAINTEXT", DescribeClusterRequest::default());
        assert_eq!(r.cluster_authorized_operations, OPERATIONS_NOT_REQUESTED);
        let r = handle(&broker, 1, "PLAINTEXT", request(BROKERS));
        assert_eq!(r.cluster_authorized_operations, ALL_CLUSTER_OPERATIONS);
    }

    #[test]
    fn endpoint_types_must_match_the_listener() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        let r = handle(&broker, 1, "PLAINTEXT", request(CONTROLLERS));
        assert_encodes(&r, 1);
        assert_eq!(r.error_code, ResponseError::MismatchedEndpointType.code());
        let r = handle(&broker, 2, "PLAINTEXT", request(9));
        assert_encodes(&r, 2);
        assert_eq!(r.error_code, ResponseError::UnsupportedEndpointType.code());
        // A controller listener's answer lists controllers, and refuses
        // a request for brokers.
        let me = || vec![DescribeClusterBroker::default().with_broker_id(BrokerId(1))];
        let r = answer(2, request(CONTROLLERS), CONTROLLERS, "c", 1, me);
        assert_encodes(&r, 2);
        assert_eq!((r.error_code, r.endpoint_type), (0, CONTROLLERS));
        assert_eq!(r.brokers.len(), 1);
        let r = answer(1, request(BROKERS), CONTROLLERS, "c", 1, me);
        assert_eq!(r.error_code, ResponseError::MismatchedEndpointType.code());
    }
}
