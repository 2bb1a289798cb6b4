//! Client quota enforcement, as Kafka's ClientQuotaManager does it: each
//! (user, client id) is measured against the most specific quota stored
//! for it, over `quota.window.num` windows of `quota.window.size.seconds`,
//! and a client above its quota is answered with a throttle time and not
//! read from until it has passed (KIP-219).
//!
//! Produce bytes, consumer fetch bytes and request handling time (as a
//! percentage of one thread) are measured; replication is not.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ResponseKind;
use ottla_controller::quotas::{
    ClientQuotas, QuotaEntity, CLIENT_ID, CONNECTION_CREATION_RATE, CONSUMER_BYTE_RATE, IP,
    PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE, USER,
};
use ottla_controller::Controller;
use parking_lot::Mutex;

use crate::network::ConnectionRateQuotas;
use crate::sampled_rate::{SampledRate, WINDOW, WINDOWS};

/// Sensors of clients idle this long are dropped (Kafka: one hour).
const SENSOR_EXPIRY: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuotaType {
    Produce,
    Fetch,
    Request,
}

impl QuotaType {
    pub const ALL: [QuotaType; 3] = [Self::Produce, Self::Fetch, Self::Request];

    fn index(self) -> usize {
        self as usize
    }

    fn key(self) -> &'static str {
        match self {
            Self::Produce => PRODUCER_BYTE_RATE,
            Self::Fetch => CONSUMER_BYTE_RATE,
            Self::Request => REQUEST_PERCENTAGE,
        }
    }

    /// Kafka bounds request-time throttles by one window; byte-rate
    /// throttles by the whole measured span.
    fn max_throttle(self) -> Duration {
        match self {
            Self::Request => WINDOW,
            Self::Produce | Self::Fetch => WINDOW * WINDOWS,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Produce => "produce",
            Self::Fetch => "fetch",
            Self::Request => "request",
        }
    }
}

/// Whose usage a sensor measures: the user and client id parts of the
/// entity whose quota applies ("" where the entity does not name that type).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SensorKey {
    quota: QuotaType,
    user: String,
    client_id: String,
}

/// The quota applying to `user` with `client_id` for `key`, in Kafka's
/// order of precedence, and whose usage it limits.
fn resolve(
    quotas: &ClientQuotas,
    key: &str,
    user: &str,
    client_id: &str,
) -> Option<(f64, String, String)> {
    let entity = |u: Option<Option<&str>>, c: Option<Option<&str>>| {
        let mut e = QuotaEntity::new();
        if let Some(u) = u {
            e.insert(USER.to_string(), u.map(str::to_string));
        }
        if let Some(c) = c {
            e.insert(CLIENT_ID.to_string(), c.map(str::to_string));
        }
        e
    };
    let (u, c) = (Some(user), Some(client_id));
    let precedence = [
        entity(Some(u), Some(c)),
        entity(Some(u), Some(None)),
        entity(Some(u), None),
        entity(Some(None), Some(c)),
        entity(Some(None), Some(None)),
        entity(Some(None), None),
        entity(None, Some(c)),
        entity(None, Some(None)),
    ];
    precedence.into_iter().find_map(|e| {
        let value = quotas.get(&e)?.get(key)?.0;
        let user_part = if e.contains_key(USER) { user } else { "" };
        let client_part = if e.contains_key(CLIENT_ID) {
            client_id
        } else {
            ""
        };
        Some((value, user_part.to_string(), client_part.to_string()))
    })
}

#[derive(Default)]
pub struct ClientQuotaManager {
    sensors: Mutex<HashMap<SensorKey, SampledRate>>,
    /// Throttled responses and their throttle time, per [`QuotaType::ALL`].
    throttled: [AtomicU64; 3],
    throttled_ms: [AtomicU64; 3],
}

impl ClientQuotaManager {
    /// Records `value` (bytes, or percent-seconds of a thread for
    /// [`QuotaType::Request`]) and returns how long the client must wait;
    /// zero when no quota applies or it is within it.
    pub fn record(
        &self,
        quotas: &ClientQuotas,
        quota: QuotaType,
        user: &str,
        client_id: &str,
        value: f64,
    ) -> Duration {
        let throttle = self.add(quotas, quota, user, client_id, value);
        if !throttle.is_zero() {
            let i = quota.index();
            self.throttled[i].fetch_add(1, Ordering::Relaxed);
            self.throttled_ms[i].fetch_add(throttle.as_millis() as u64, Ordering::Relaxed);
        }
        throttle
    }

    /// Takes back a recorded value whose response was not sent (a
    /// throttled fetch is answered empty).
    pub fn unrecord(
        &self,
        quotas: &ClientQuotas,
        quota: QuotaType,
        user: &str,
        client_id: &str,
        value: f64,
    ) {
        self.add(quotas, quota, user, client_id, -value);
    }

    /// (quota type, throttled responses, total throttle time in ms).
    pub fn throttle_totals(&self) -> Vec<(QuotaType, u64, u64)> {
        QuotaType::ALL
            .iter()
            .map(|q| {
                let i = q.index();
                (
                    *q,
                    self.throttled[i].load(Ordering::Relaxed),
                    self.throttled_ms[i].load(Ordering::Relaxed),
                )
            })
            .collect()
    }

    fn add(
        &self,
        quotas: &ClientQuotas,
        quota: QuotaType,
        user: &str,
        client_id: &str,
        value: f64,
    ) -> Duration {
        if quotas.is_empty() {
            return Duration::ZERO;
        }
        let Some((bound, user, client_id)) = resolve(quotas, quota.key(), user, client_id) else {
            return Duration::ZERO;
        };
        let now = Instant::now();
        let key = SensorKey {
            quota,
            user,
            client_id,
        };
        let mut sensors = self.sensors.lock();
        if !sensors.contains_key(&key) {
            sensors.retain(|_, s| !s.idle_since(now, SENSOR_EXPIRY));
        }
        let sensor = sensors.entry(key).or_insert_with(|| SampledRate::new(now));
        sensor.record(value, now);
        let (rate, span) = sensor.rate(now);
        if rate <= bound {
            return Duration::ZERO;
        }
        span.mul_f64((rate - bound) / bound)
            .min(quota.max_throttle())
    }
}

/// `connection_creation_rate` quotas of IP entities in the metadata image:
/// the IP's own, else the default IP quota.
pub struct IpConnectionQuotas(pub Arc<Controller>);

impl ConnectionRateQuotas for IpConnectionQuotas {
    fn for_ip(&self, ip: IpAddr) -> Option<f64> {
        let image = self.0.image();
        if image.client_quotas.is_empty() {
            return None;
        }
        [Some(ip.to_string()), None].into_iter().find_map(|name| {
            let entity: QuotaEntity = [(IP.to_string(), name)].into();
            image
                .client_quotas
                .get(&entity)?
                .get(CONNECTION_CREATION_RATE)
                .map(|v| v.0)
        })
    }
}

/// The `throttle_time_ms` field of a response, where its version has one.
pub fn throttle_time_field(response: &mut ResponseKind, version: i16) -> Option<&mut i32> {
    macro_rules! field {
        ($($kind:ident from $floor:literal),* $(,)?) => {
            match response {
                $(ResponseKind::$kind(r) if version >= $floor => Some(&mut r.throttle_time_ms),)*
                _ => None,
            }
        };
    }
    field!(
        Produce from 3, Fetch from 1, ListOffsets from 2, Metadata from 3, OffsetCommit from 3,
        OffsetFetch from 3, FindCoordinator from 1, JoinGroup from 2, Heartbeat from 1,
        LeaveGroup from 1, SyncGroup from 1, DescribeGroups from 1, ListGroups from 1,
        CreateTopics from 2, DeleteTopics from 1, OffsetForLeaderEpoch from 2,
        DescribeConfigs from 1, DescribeLogDirs from 1, DescribeAcls from 1, CreateAcls from 1,
        DeleteAcls from 1, DeleteRecords from 0, InitProducerId from 0, AlterConfigs from 0,
        CreatePartitions from 0, DeleteGroups from 0, IncrementalAlterConfigs from 0,
        OffsetDelete from 0, DescribeCluster from 0, DescribeTopicPartitions from 0,
        ElectLeaders from 0, AlterPartitionReassignments from 0,
        ListPartitionReassignments from 0, UpdateFeatures from 0, ConsumerGroupHeartbeat from 0,
        ConsumerGroupDescribe from 0, AddPartitionsToTxn from 0, AddOffsetsToTxn from 0,
        EndTxn from 0, TxnOffsetCommit from 0, DescribeProducers from 0,
        DescribeTransactions from 0, ListTransactions from 0,
        DescribeUserScramCredentials from 0, AlterUserScramCredentials from 0,
        DescribeClientQuotas from 0, AlterClientQuotas from 0, ListConfigResources from 0,
    )
}

/// Whose quota a request counts against, and the quotas in force.
pub struct QuotaClient<'a> {
    pub manager: &'a ClientQuotaManager,
    pub quotas: &'a ClientQuotas,
    pub user: &'a str,
    pub client_id: &'a str,
}

impl QuotaClient<'_> {
    pub fn record(&self, quota: QuotaType, value: f64) -> Duration {
        self.manager
            .record(self.quotas, quota, self.user, self.client_id, value)
    }

    pub fn unrecord(&self, quota: QuotaType, value: f64) {
        self.manager
            .unrecord(self.quotas, quota, self.user, self.client_id, value)
    }

    /// The most a quota lets through in one measured span, if one applies:
    /// a fetch is capped at it (as Kafka does), so that a single response
    /// can always be sent and never throttles the client forever.
    pub fn window_allowance(&self, quota: QuotaType) -> Option<usize> {
        let (bound, _, _) = resolve(self.quotas, quota.key(), self.user, self.client_id)?;
        Some((bound * (WINDOW * (WINDOWS - 1)).as_secs_f64()) as usize)
    }
}

/// A request's handling time in Kafka's request-quota unit: percent of one
/// thread, over one second.
pub fn thread_percent(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 100.0
}

#[cfg(test)]
mod tests {
    use ottla_controller::quotas::QuotaValue;

    use super::*;

    /// (entity as (type, name) pairs, key, value)
    type Entry<'a> = (&'a [(&'a str, Option<&'a str>)], &'a str, f64);

    fn quotas(entries: &[Entry]) -> ClientQuotas {
        let mut q = ClientQuotas::new();
        for (entity, key, value) in entries {
            let e: QuotaEntity = entity
                .iter()
                .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
                .collect();
            q.entry(e)
                .or_default()
                .insert(key.to_string(), QuotaValue(*value));
        }
        q
    }

    #[test]
    fn the_most_specific_quota_applies() {
        let q = quotas(&[
            (&[(CLIENT_ID, None)], PRODUCER_BYTE_RATE, 1.0),
            (&[(CLIENT_ID, Some("app"))], PRODUCER_BYTE_RATE, 2.0),
            (&[(USER, None)], PRODUCER_BYTE_RATE, 3.0),
            (&[(USER, Some("alice"))], PRODUCER_BYTE_RATE, 4.0),
            (
                &[(USER, Some("alice")), (CLIENT_ID, Some("app"))],
                PRODUCER_BYTE_RATE,
                5.0,
            ),
        ]);
        let found = |u: &str, c: &str| resolve(&q, PRODUCER_BYTE_RATE, u, c);
        assert_eq!(
            found("alice", "app"),
            Some((5.0, "alice".into(), "app".into()))
        );
        assert_eq!(
            found("alice", "other"),
            Some((4.0, "alice".into(), "".into()))
        );
        // A default user quota applies to each user separately.
        assert_eq!(found("bob", "app"), Some((3.0, "bob".into(), "".into())));
        assert_eq!(resolve(&q, CONSUMER_BYTE_RATE, "bob", "app"), None);
        let clients_only = quotas(&[
            (&[(CLIENT_ID, None)], PRODUCER_BYTE_RATE, 1.0),
            (&[(CLIENT_ID, Some("app"))], PRODUCER_BYTE_RATE, 2.0),
        ]);
        let found = |c: &str| resolve(&clients_only, PRODUCER_BYTE_RATE, "bob", c);
        assert_eq!(found("app"), Some((2.0, "".into(), "app".into())));
        assert_eq!(found("x"), Some((1.0, "".into(), "x".into())));
    }

    #[test]
    fn a_client_over_its_quota_is_throttled_in_proportion() {
        let q = quotas(&[(&[(CLIENT_ID, Some("app"))], PRODUCER_BYTE_RATE, 1000.0)]);
        let manager = ClientQuotaManager::default();
        // 10 s at 1000 B/s is 10,000 bytes: within the quota.
        let within = manager.record(&q, QuotaType::Produce, "u", "app", 10_000.0);
        assert_eq!(within, Duration::ZERO);
        // Twice the quota over the 10 s span: wait as long again.
        let over = manager.record(&q, QuotaType::Produce, "u", "app", 10_000.0);
        assert!(
            (over.as_secs_f64() - 10.0).abs() < 0.1,
            "throttled {over:?}"
        );
        manager.unrecord(&q, QuotaType::Produce, "u", "app", 10_000.0);
        assert_eq!(
            manager.throttle_totals()[0],
            (QuotaType::Produce, 1, 10_000)
        );
        assert_eq!(
            manager.record(&q, QuotaType::Produce, "u", "app", 0.0),
            Duration::ZERO
        );
        // Other clients and other quota types are not affected.
        assert_eq!(
            manager.record(&q, QuotaType::Produce, "u", "other", 1e9),
            Duration::ZERO
        );
        assert_eq!(
            manager.record(&q, QuotaType::Fetch, "u", "app", 1e9),
            Duration::ZERO
        );
    }

    #[test]
    fn request_throttles_are_bounded_by_one_window() {
        let q = quotas(&[(&[(USER, None)], REQUEST_PERCENTAGE, 1.0)]);
        let manager = ClientQuotaManager::default();
        let throttle = manager.record(
            &q,
            QuotaType::Request,
            "alice",
            "",
            thread_percent(Duration::from_secs(5)),
        );
        assert_eq!(throttle, WINDOW);
    }

    #[test]
    fn throttle_times_go_only_where_the_version_has_the_field() {
        let mut metadata = ResponseKind::Metadata(Default::default());
        assert!(throttle_time_field(&mut metadata, 2).is_none());
        *throttle_time_field(&mut metadata, 3).unwrap() = 250;
        let ResponseKind::Metadata(m) = metadata else {
            unreachable!()
        };
        assert_eq!(m.throttle_time_ms, 250);
        let mut quorum = ResponseKind::DescribeQuorum(Default::default());
        assert!(throttle_time_field(&mut quorum, 2).is_none());
    }
}
