//! Cluster mirroring on the broker (KIP-1279): the broker's side of the
//! runtime's traits. The runtime itself (the manager, fetchers, state
//! store, syncs) is `ottla_mirror::runtime`; the mirror APIs' handlers are
//! `crate::apis::mirror`.

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Instant;

use ottla_mirror::runtime::{GroupCoordinators, MirrorReplicas};
use ottla_storage::log::AppendInfo;
use ottla_storage::manager::TopicPartition;

use crate::replica::ReplicaManager;
use ottla_group_coordinator::GroupCoordinator;

impl MirrorReplicas for ReplicaManager {
    fn append_mirrored(&self, tp: &TopicPartition, records: &[u8]) -> Result<AppendInfo, String> {
        let partition = self
            .partition(tp)
            .ok_or_else(|| format!("{tp} is no longer hosted on this broker"))?;
        ReplicaManager::append_mirrored(self, &partition, records).map_err(|e| e.to_string())
    }

    fn set_mirror_stopped(&self, tp: &TopicPartition, stopped: bool) {
        if let Some(partition) = self.partition(tp) {
            partition.set_mirror_stopped(stopped);
        }
    }

    fn followers_within(
        &self,
        tp: &TopicPartition,
        end: i64,
        since: Instant,
        all_replicas: bool,
    ) -> bool {
        self.partition(tp)
            .is_some_and(|p| ReplicaManager::followers_within(self, &p, end, since, all_replicas))
    }
}

/// The group coordinators, as the mirror's group sync finds them: by the
/// address on the inter-broker listener.
pub struct GroupsOnListener {
    pub groups: Arc<GroupCoordinator>,
    pub listener: String,
}

impl GroupCoordinators for GroupsOnListener {
    fn coordinator_of(&self, group: &str) -> Result<i32, String> {
        self.groups
            .find(group, &self.listener)
            .map(|node| node.node_id)
            .map_err(|e| format!("{e:?}"))
    }
}
