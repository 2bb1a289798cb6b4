//! Producer ids for idempotent producers (InitProducerId without a
//! transactional id), handed out from blocks the controller reserves in the
//! metadata log, so ids are never reused across restarts.

use std::sync::Arc;

use ottla_controller::{Controller, ControllerResult};
use parking_lot::Mutex;

pub struct ProducerIdManager {
    controller: Arc<Controller>,
    node_id: i32,
    /// (next id, end of the current block)
    block: Mutex<(i64, i64)>,
}

impl ProducerIdManager {
    pub fn new(controller: Arc<Controller>, node_id: i32) -> Self {
        Self {
            controller,
            node_id,
            block: Mutex::new((0, 0)),
        }
    }

    pub fn next(&self) -> ControllerResult<i64> {
        let mut block = self.block.lock();
        if block.0 >= block.1 {
            let (start, len) = self
                .controller
                .block_on(self.controller.allocate_producer_ids(self.node_id))?;
            *block = (start, start + len);
        }
        let id = block.0;
        block.0 += 1;
        Ok(id)
    }
}
