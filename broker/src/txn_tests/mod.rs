//! The transaction coordinator (`ottla-txn-coordinator`) through the
//! broker's request handlers, on a broker of its own.

mod marker_tests;
mod tests;

use crate::broker::Broker;
use ottla_txn_coordinator::Services;

fn services(broker: &Broker) -> Services<'_> {
    broker.txn_services()
}
