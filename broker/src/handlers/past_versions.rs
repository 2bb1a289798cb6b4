//! What some answers carry at versions kafka-protocol 0.18 does not know
//! (Kafka 4.4's ShareAcknowledge v2, DescribeShareGroupOffsets v1,
//! ReadShareGroupStateSummary v1): the handler leaves the values here, and
//! the answer is encoded by `ottla_protocol`'s `share_v2` and `share_lag`
//! instead of kafka-protocol.

use bytes::BytesMut;
use kafka_protocol::messages::ResponseKind;
use ottla_protocol::{share_lag, share_v2};

use crate::apis::share_lag::Lags;
use crate::apis::share_state::DeliveryCounts;

#[derive(Default)]
pub(super) struct PastVersionFields {
    /// ShareAcknowledge v2's AcquisitionLockTimeoutMs.
    pub share_lock_timeout_ms: Option<i32>,
    /// DescribeShareGroupOffsets v1's lags.
    pub share_offset_lags: Option<Lags>,
    /// ReadShareGroupStateSummary v1's delivery complete counts.
    pub share_delivery_counts: Option<DeliveryCounts>,
}

impl PastVersionFields {
    /// `response` encoded at `version` with these fields, if that version
    /// has them.
    pub fn encode(
        &self,
        response: &ResponseKind,
        version: i16,
    ) -> anyhow::Result<Option<BytesMut>> {
        let body = match response {
            ResponseKind::ShareAcknowledge(r) => match self.share_lock_timeout_ms {
                Some(timeout) => share_v2::encode_share_acknowledge_response(r, version, timeout)?,
                None => return Ok(None),
            },
            ResponseKind::DescribeShareGroupOffsets(r) if version >= share_lag::V1 => {
                let Some(lags) = &self.share_offset_lags else {
                    return Ok(None);
                };
                let lag = |g: &str, t: &uuid::Uuid, p: i32| {
                    let key = (g.to_string(), *t, p);
                    lags.get(&key).copied().unwrap_or(share_lag::UNKNOWN_LAG)
                };
                share_lag::encode_describe_offsets_v1(r, lag)?
            }
            ResponseKind::ReadShareGroupStateSummary(r) if version >= share_lag::V1 => {
                let Some(counts) = &self.share_delivery_counts else {
                    return Ok(None);
                };
                let count = |t: &uuid::Uuid, p: i32| counts.get(&(*t, p)).copied().unwrap_or(-1);
                share_lag::encode_state_summary_v1(r, count)?
            }
            _ => return Ok(None),
        };
        Ok(Some(body))
    }
}
