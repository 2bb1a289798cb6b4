//! Keys Kafka accepts that Ottla does not implement but tolerates, so that
//! existing `server.properties` files start: they are ignored with a warning.
//! Anything neither known nor listed here is an error.
//!
//! Only keys whose absence cannot weaken security or lose data belong here.
//! The remaining `ssl.`/`sasl.` keys qualify: `ssl.key.password` (a PKCS12
//! store's key has the store's password; encrypted PEM keys are refused), cipher suites (rustls offers
//! only strong ones), Kerberos and OAuth settings (those mechanisms are
//! refused in sasl.enabled.mechanisms); authorizer settings do not (they
//! are real keys: `authorizer.class.name`, `super.users`,
//! `allow.everyone.if.no.acl.found`).

const KEYS: &[&str] = &[
    "alter.config.policy.class.name",
    "alter.log.dirs.replication.quota.window.num",
    "alter.log.dirs.replication.quota.window.size.seconds",
    "auto.include.jmx.reporter",
    "background.threads",
    "client.quota.callback.class",
    "controlled.shutdown.enable",
    "controlled.shutdown.max.retries",
    "controlled.shutdown.retry.backoff.ms",
    "controller.quota.window.num",
    "controller.quota.window.size.seconds",
    "controller.socket.timeout.ms",
    "create.topic.policy.class.name",
    "delete.records.purgatory.purge.interval.requests",
    "early.start.listeners",
    "eligible.leader.replicas.enable",
    "fetch.purgatory.purge.interval.requests",
    "group.coordinator.append.linger.ms",
    "group.coordinator.threads",
    "inter.broker.protocol.version",
    "kafka.metrics.polling.interval.secs",
    "kafka.metrics.reporters",
    "leader.imbalance.per.broker.percentage",
    "log.dir.failure.timeout.ms",
    "log.initial.task.delay.ms",
    "log.local.retention.bytes",
    "log.local.retention.ms",
    "log.message.format.version",
    "metadata.log.max.snapshot.cache.size",
    "metric.reporters",
    "metrics.num.samples",
    "metrics.recording.level",
    "metrics.sample.window.ms",
    "num.replica.alter.log.dirs.threads",
    "offsets.load.buffer.size",
    "offsets.topic.compression.codec",
    "principal.builder.class",
    "producer.purgatory.purge.interval.requests",
    "queued.max.requests",
    "quota.window.num",
    "quota.window.size.seconds",
    "replica.fetch.backoff.max.ms",
    "replica.socket.receive.buffer.bytes",
    "replication.quota.window.num",
    "replication.quota.window.size.seconds",
    "reserved.broker.max.id",
    "security.providers",
    "socket.connection.setup.timeout.max.ms",
    "socket.connection.setup.timeout.ms",
    "telemetry.max.bytes",
    "transaction.state.log.load.buffer.size",
    "unstable.api.versions.enable",
    "unstable.feature.versions.enable",
];

/// Families of keys: TLS/SASL settings Ottla does not read, tiered
/// storage, share groups, ZooKeeper leftovers and config providers.
const PREFIXES: &[&str] = &[
    "config.providers",
    "delegation.token.",
    "group.share.",
    "password.encoder.",
    "remote.log.",
    "sasl.",
    "share.coordinator.",
    "ssl.",
    "zookeeper.",
];

/// Whether `key` is accepted and ignored.
pub fn is_ignored(key: &str) -> bool {
    KEYS.contains(&key) || PREFIXES.iter().any(|p| key.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::defs::def;

    #[test]
    fn ignored_keys_are_not_known_keys() {
        for key in KEYS {
            assert!(def(key).is_none(), "{key} is both known and ignored");
        }
        assert!(is_ignored("ssl.key.password"));
        assert!(is_ignored("ssl.cipher.suites"));
        assert!(!is_ignored("num.partitions"));
        assert!(!is_ignored("confluent.license"));
    }
}
