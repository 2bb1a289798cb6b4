//! The share-group side of a shard: ShareGroupHeartbeat, ShareGroupDescribe,
//! ListGroups and DeleteGroups of share groups, and the timer that removes
//! members whose session ended. A group id names one group of one type:
//! share requests for a classic or consumer group are refused, as Kafka
//! refuses them ("Group X is not a share group").
//!
//! Share groups' membership is held in memory: a member whose coordinator
//! moved or restarted is told UNKNOWN_MEMBER_ID and joins again (at once,
//! as KafkaShareConsumer does); nothing it was delivered is lost, since
//! delivery state lives with the partition leaders.

use kafka_protocol::error::ResponseError;
use ottla_controller::MetadataImage;

use super::shard::{Shard, ShardState};
use super::share_group::{
    ShareGroup, ShareGroupState, ShareHeartbeat, ShareHeartbeatAnswer, ShareTimeouts,
};

impl ShardState {
    /// Whether `group_id` is a classic, consumer or streams group.
    fn is_other_type(&self, group_id: &str) -> bool {
        self.groups.contains_key(group_id)
            || self.consumer.contains(group_id)
            || self.streams.contains(group_id)
    }
}

impl Shard {
    pub fn share_heartbeat(
        &self,
        req: &ShareHeartbeat,
        timeouts: ShareTimeouts,
        image: &MetadataImage,
        now: i64,
    ) -> Result<ShareHeartbeatAnswer, ResponseError> {
        let mut st = self.state.lock();
        if st.is_other_type(&req.group_id) {
            return Err(ResponseError::GroupIdNotFound);
        }
        st.share.heartbeat(req, timeouts, image, now)
    }

    /// A share group as it stands; Err(GROUP_ID_NOT_FOUND) with whether
    /// the id is a group of another type.
    pub fn describe_share_group(&self, group_id: &str) -> Result<ShareGroup, bool> {
        let st = self.state.lock();
        st.share
            .get(group_id)
            .cloned()
            .ok_or_else(|| st.is_other_type(group_id))
    }

    pub fn is_share_group(&self, group_id: &str) -> bool {
        self.state.lock().share.contains(group_id)
    }

    /// Share groups in one of `states` (lower-case; none: all).
    pub fn list_share_groups(&self, states: &[String]) -> Vec<(String, ShareGroupState)> {
        self.state
            .lock()
            .share
            .list()
            .map(|(id, g)| (id.clone(), g.state()))
            .filter(|(_, s)| {
                states.is_empty() || states.iter().any(|f| f == &s.name().to_lowercase())
            })
            .collect()
    }
}
