//! The request handler pool (`num.io.threads`): its size and how long its
//! handlers have been busy, from which Kafka's RequestHandlerAvgIdlePercent
//! follows as `1 - rate(busy) / threads`.

use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use crate::metrics::{counter, gauge, NO_LABELS};
use crate::network::RequestHandlerPool;

#[derive(Debug)]
pub(super) struct RequestHandlerCollector(pub Arc<RequestHandlerPool>);

impl Collector for RequestHandlerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let pool = &self.0;
        gauge(
            &mut encoder,
            "kafka_server_kafkarequesthandlerpool_request_handler_threads",
            "Requests that may be processed at once (num.io.threads).",
            [(NO_LABELS, pool.size() as i64)],
        )?;
        counter(
            &mut encoder,
            "kafka_server_kafkarequesthandlerpool_request_handler_busy_seconds",
            "Time request handlers spent processing, summed over handlers; 1 - rate / threads is Kafka's RequestHandlerAvgIdlePercent.",
            [(NO_LABELS, pool.busy_seconds())],
        )
    }
}
