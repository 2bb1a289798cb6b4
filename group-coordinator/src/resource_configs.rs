//! The GROUP config resource (type 32, KIP-848's per-group settings):
//! `kafka-configs.sh --entity-type groups`. Each key overrides, for one
//! group, a broker setting (its synonym) within the broker's bounds; the
//! values are stored in the metadata as any config resource is. The keys,
//! defaults, checks and messages are Kafka 4.4's.

use std::collections::BTreeMap;

use ottla_controller::records::CONFIG_RESOURCE_GROUP;
use ottla_controller::MetadataImage;

/// DescribeConfigs type codes.
const TYPE_BOOLEAN: i8 = 1;
const TYPE_STRING: i8 = 2;
const TYPE_INT: i8 = 3;
const TYPE_LONG: i8 = 5;
const TYPE_LIST: i8 = 7;

/// A broker setting that bounds a group key, with its default.
#[derive(Clone, Copy)]
struct Bound(&'static str, i64);

impl Bound {
    fn value(self, broker: &BTreeMap<String, String>) -> i64 {
        broker
            .get(self.0)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(self.1)
    }
}

/// How a key's value is checked.
#[derive(Clone, Copy)]
enum Check {
    /// An INT of at least this much.
    AtLeast(i64),
    /// A LONG of at least this much.
    LongAtLeast(i64),
    /// An INT of at least `.0`, then within the broker's bounds.
    Within(i64, Bound, Bound),
    /// An INT of at least `.0`, then at most the broker's bound.
    AtMost(i64, Bound),
    Boolean,
    OneOf(&'static [&'static str]),
    /// `earliest`, `latest` or `by_duration:<ISO-8601 duration>`.
    AutoOffsetReset,
    /// One of the broker's `group.streams.assignors`.
    StreamsAssignor,
    /// A share group's dead-letter topic: not an internal topic's name.
    DlqTopicName,
    List,
}

pub struct GroupConfigKey {
    pub name: &'static str,
    /// The broker setting it overrides (the key itself for keys with no
    /// broker setting).
    pub synonym: &'static str,
    pub default: &'static str,
    check: Check,
    pub doc: &'static str,
    /// One of Kafka's internal configs: accepted, not described.
    pub internal: bool,
}

impl GroupConfigKey {
    pub fn type_code(&self) -> i8 {
        match self.check {
            Check::Boolean => TYPE_BOOLEAN,
            Check::List => TYPE_LIST,
            Check::OneOf(_)
            | Check::AutoOffsetReset
            | Check::StreamsAssignor
            | Check::DlqTopicName => TYPE_STRING,
            Check::AtLeast(_) | Check::Within(..) | Check::AtMost(..) => TYPE_INT,
            Check::LongAtLeast(_) => TYPE_LONG,
        }
    }

    /// The broker's value for this key: its synonym's static setting, if
    /// the broker sets it.
    pub fn broker_value<'a>(&self, broker: &'a BTreeMap<String, String>) -> Option<&'a str> {
        (self.synonym != self.name)
            .then(|| broker.get(self.synonym))
            .flatten()
            .map(String::as_str)
    }

    fn check(&self, value: &str, broker: &BTreeMap<String, String>) -> Result<(), String> {
        let invalid = |why: &str| {
            format!(
                "Invalid value {value} for configuration {}: {why}",
                self.name
            )
        };
        let int = |at_least: i64| -> Result<i64, String> {
            let v: i32 = value
                .trim()
                .parse()
                .map_err(|_| invalid("Not a number of type INT"))?;
            if i64::from(v) < at_least {
                return Err(invalid(&format!("Value must be at least {at_least}")));
            }
            Ok(i64::from(v))
        };
        match self.check {
            Check::AtLeast(at_least) => int(at_least).map(drop),
            Check::LongAtLeast(at_least) => {
                let v: i64 = value
                    .trim()
                    .parse()
                    .map_err(|_| invalid("Not a number of type LONG"))?;
                if v < at_least {
                    return Err(invalid(&format!("Value must be at least {at_least}")));
                }
                Ok(())
            }
            Check::Within(at_least, min, max) => {
                let v = int(at_least)?;
                let (lo, hi) = (min.value(broker), max.value(broker));
                if v < lo || v > hi {
                    return Err(format!(
                        "{} must be in the range {lo} to {hi} inclusive.",
                        self.name
                    ));
                }
                Ok(())
            }
            Check::AtMost(at_least, max) => {
                let v = int(at_least)?;
                let hi = max.value(broker);
                if v > hi {
                    return Err(format!("{} must be less than or equal to {hi}", self.name));
                }
                Ok(())
            }
            Check::Boolean => match value.trim().to_ascii_lowercase().as_str() {
                "true" | "false" => Ok(()),
                _ => Err(invalid("Expected value to be either true or false")),
            },
            Check::OneOf(options) => {
                if options.contains(&value) {
                    Ok(())
                } else {
                    Err(invalid(&format!(
                        "String must be one of: {}",
                        options.join(", ")
                    )))
                }
            }
            Check::AutoOffsetReset => {
                let ok = match value.strip_prefix("by_duration:") {
                    Some(duration) => is_iso_duration(duration),
                    None => matches!(value, "earliest" | "latest"),
                };
                if ok {
                    Ok(())
                } else {
                    Err(invalid(&format!(
                        "Invalid value `{value}` for configuration {}. The value must be either \
                         'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.",
                        self.name
                    )))
                }
            }
            Check::StreamsAssignor => {
                let registered = streams_assignors(broker);
                if registered.iter().any(|a| a == value) {
                    Ok(())
                } else {
                    Err(format!(
                        "{} '{value}' is not a registered task assignor. Registered assignors are: [{}].",
                        self.name,
                        registered.join(", ")
                    ))
                }
            }
            Check::DlqTopicName if value.starts_with("__") => Err(format!(
                "{}: DLQ topic name must not start with '__'",
                self.name
            )),
            Check::DlqTopicName | Check::List => Ok(()),
        }
    }
}

/// The broker's registered streams task assignors (short names).
fn streams_assignors(broker: &BTreeMap<String, String>) -> Vec<String> {
    broker
        .get("group.streams.assignors")
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| vec!["sticky".to_string()])
}

/// Java's `Duration.parse` grammar, non-negative: `P[nD][T[nH][nM][n[.n]S]]`
/// with at least one part.
fn is_iso_duration(s: &str) -> bool {
    let Some(rest) = s.strip_prefix('P').or_else(|| s.strip_prefix('p')) else {
        return false;
    };
    let (days, time) = match rest.split_once(['T', 't']) {
        Some((d, t)) => (d, Some(t)),
        None => (rest, None),
    };
    let number = |n: &str, fraction: bool| {
        let (whole, frac) = match n.split_once('.') {
            Some((w, f)) if fraction => (w, Some(f)),
            _ => (n, None),
        };
        !whole.is_empty()
            && whole.bytes().all(|b| b.is_ascii_digit())
            && frac.is_none_or(|f| {
                !f.is_empty() && f.len() <= 9 && f.bytes().all(|b| b.is_ascii_digit())
            })
    };
    let mut parts = 0;
    if !days.is_empty() {
        let Some(n) = days.strip_suffix(['D', 'd']) else {
            return false;
        };
        if !number(n, false) {
            return false;
        }
        parts += 1;
    }
    if let Some(mut t) = time {
        for (unit, fraction) in [(['H', 'h'], false), (['M', 'm'], false), (['S', 's'], true)] {
            if let Some(i) = t.find(unit) {
                if !number(&t[..i], fraction) {
                    return false;
                }
                t = &t[i + 1..];
                parts += 1;
            }
        }
        if !t.is_empty() || time == Some("") {
            return false;
        }
    }
    parts > 0
}

const fn key(
    name: &'static str,
    synonym: &'static str,
    default: &'static str,
    check: Check,
    doc: &'static str,
) -> GroupConfigKey {
    GroupConfigKey {
        name,
        synonym,
        default,
        check,
        doc,
        internal: false,
    }
}

/// Every GROUP key, in name order.
pub const GROUP_CONFIG_KEYS: &[GroupConfigKey] = &[
    key(
        "consumer.assignment.interval.ms",
        "group.consumer.assignment.interval.ms",
        "1000",
        Check::AtLeast(0),
        "The interval between assignment computations of a consumer group.",
    ),
    key(
        "consumer.heartbeat.interval.ms",
        "group.consumer.heartbeat.interval.ms",
        "5000",
        Check::Within(
            1,
            Bound("group.consumer.min.heartbeat.interval.ms", 5000),
            Bound("group.consumer.max.heartbeat.interval.ms", 15000),
        ),
        "The heartbeat interval given to the members of a consumer group.",
    ),
    key(
        "consumer.session.timeout.ms",
        "group.consumer.session.timeout.ms",
        "45000",
        Check::Within(
            1,
            Bound("group.consumer.min.session.timeout.ms", 45000),
            Bound("group.consumer.max.session.timeout.ms", 60000),
        ),
        "The timeout to detect client failures when using the consumer group protocol.",
    ),
    key(
        "errors.deadletterqueue.copy.record.enable",
        "errors.deadletterqueue.copy.record.enable",
        "false",
        Check::Boolean,
        "Whether a share group's dead-letter records carry a copy of the original record.",
    ),
    key(
        "errors.deadletterqueue.topic.name",
        "errors.deadletterqueue.topic.name",
        "",
        Check::DlqTopicName,
        "The dead-letter topic of a share group; blank for none.",
    ),
    key(
        "share.assignment.interval.ms",
        "group.share.assignment.interval.ms",
        "1000",
        Check::AtLeast(0),
        "The interval between assignment computations of a share group.",
    ),
    key(
        "share.auto.offset.reset",
        "share.auto.offset.reset",
        "latest",
        Check::AutoOffsetReset,
        "The strategy to initialize the share-partition start offset.",
    ),
    key(
        "share.delivery.count.limit",
        "group.share.delivery.count.limit",
        "5",
        Check::Within(
            2,
            Bound("group.share.min.delivery.count.limit", 2),
            Bound("group.share.max.delivery.count.limit", 10),
        ),
        "The maximum number of delivery attempts for a record delivered to a share group.",
    ),
    key(
        "share.heartbeat.interval.ms",
        "group.share.heartbeat.interval.ms",
        "5000",
        Check::Within(
            1,
            Bound("group.share.min.heartbeat.interval.ms", 5000),
            Bound("group.share.max.heartbeat.interval.ms", 15000),
        ),
        "The heartbeat interval given to the members of a share group.",
    ),
    key(
        "share.isolation.level",
        "share.isolation.level",
        "read_uncommitted",
        Check::OneOf(&["read_committed", "read_uncommitted"]),
        "Controls how a share group reads records written transactionally.",
    ),
    key(
        "share.partition.max.record.locks",
        "group.share.partition.max.record.locks",
        "2000",
        Check::Within(
            100,
            Bound("group.share.min.partition.max.record.locks", 100),
            Bound("group.share.max.partition.max.record.locks", 4000),
        ),
        "Share-group record lock limit per share-partition.",
    ),
    key(
        "share.record.lock.duration.ms",
        "group.share.record.lock.duration.ms",
        "30000",
        Check::Within(
            1000,
            Bound("group.share.min.record.lock.duration.ms", 15000),
            Bound("group.share.max.record.lock.duration.ms", 60000),
        ),
        "The record acquisition lock duration of a share group.",
    ),
    key(
        "share.renew.acknowledge.enable",
        "share.renew.acknowledge.enable",
        "true",
        Check::Boolean,
        "Whether the renew acknowledge type is enabled for the share group.",
    ),
    key(
        "share.session.timeout.ms",
        "group.share.session.timeout.ms",
        "45000",
        Check::Within(
            1,
            Bound("group.share.min.session.timeout.ms", 45000),
            Bound("group.share.max.session.timeout.ms", 60000),
        ),
        "The timeout to detect client failures when using the share group protocol.",
    ),
    GroupConfigKey {
        internal: true,
        ..key(
            "streams.acceptable.recovery.lag",
            "group.streams.acceptable.recovery.lag",
            "10000",
            Check::LongAtLeast(0),
            "The maximum acceptable lag (number of offsets to catch up) for a client to be considered caught-up enough to receive an active task assignment.",
        )
    },
    key(
        "streams.assignment.interval.ms",
        "group.streams.assignment.interval.ms",
        "1000",
        Check::AtLeast(0),
        "The interval between assignment computations of a streams group.",
    ),
    key(
        "streams.assignor.name",
        "group.streams.assignors",
        "sticky",
        Check::StreamsAssignor,
        "The task assignor of a streams group, among the broker's group.streams.assignors.",
    ),
    key(
        "streams.heartbeat.interval.ms",
        "group.streams.heartbeat.interval.ms",
        "5000",
        Check::Within(
            1,
            Bound("group.streams.min.heartbeat.interval.ms", 5000),
            Bound("group.streams.max.heartbeat.interval.ms", 15000),
        ),
        "The heartbeat interval given to the members of a streams group.",
    ),
    key(
        "streams.initial.rebalance.delay.ms",
        "group.streams.initial.rebalance.delay.ms",
        "3000",
        Check::AtLeast(0),
        "The amount of time a new streams group waits for more members before its first assignment.",
    ),
    key(
        "streams.num.standby.replicas",
        "group.streams.num.standby.replicas",
        "0",
        Check::AtMost(0, Bound("group.streams.max.standby.replicas", 2)),
        "The number of standby replicas for each task of a streams group.",
    ),
    key(
        "streams.rack.aware.assignment.tags",
        "group.streams.rack.aware.assignment.tags",
        "",
        Check::List,
        "Client tag keys used to spread a streams group's standby tasks across racks.",
    ),
    key(
        "streams.session.timeout.ms",
        "group.streams.session.timeout.ms",
        "45000",
        Check::Within(
            1,
            Bound("group.streams.min.session.timeout.ms", 45000),
            Bound("group.streams.max.session.timeout.ms", 60000),
        ),
        "The timeout to detect client failures when using the streams group protocol.",
    ),
];

pub fn group_config_key(name: &str) -> Option<&'static GroupConfigKey> {
    GROUP_CONFIG_KEYS.iter().find(|k| k.name == name)
}

/// The value a group gets for `key` with no override of its own: the
/// broker's setting of the synonym, else Kafka's default (for the streams
/// assignor, the first registered one).
pub fn broker_default(key: &GroupConfigKey, broker: &BTreeMap<String, String>) -> String {
    if matches!(key.check, Check::StreamsAssignor) {
        return streams_assignors(broker).swap_remove(0);
    }
    key.broker_value(broker).unwrap_or(key.default).to_string()
}

/// Kafka's checks on a group's overrides as they would stand after an
/// alter (`overrides`): every key known, every value valid and within the
/// broker's bounds, and each protocol's session timeout above its
/// heartbeat interval.
pub fn validate(
    overrides: &BTreeMap<String, String>,
    broker: &BTreeMap<String, String>,
) -> Result<(), String> {
    for name in overrides.keys() {
        if group_config_key(name).is_none() {
            return Err(format!("Unknown group config name: {name}"));
        }
    }
    for k in GROUP_CONFIG_KEYS {
        if let Some(v) = overrides.get(k.name) {
            k.check(v, broker)?;
        }
    }
    for protocol in ["consumer", "share", "streams"] {
        let effective = |what: &str| -> i64 {
            let name = format!("{protocol}.{what}");
            let key = group_config_key(&name).expect("a protocol's timing keys");
            overrides
                .get(&name)
                .cloned()
                .unwrap_or_else(|| broker_default(key, broker))
                .trim()
                .parse()
                .unwrap_or(0)
        };
        if effective("session.timeout.ms") <= effective("heartbeat.interval.ms") {
            return Err(format!(
                "{protocol}.session.timeout.ms must be greater than {protocol}.heartbeat.interval.ms"
            ));
        }
    }
    Ok(())
}

/// A group's overrides, from the metadata.
pub fn group_overrides<'a>(
    image: &'a MetadataImage,
    group: &str,
) -> Option<&'a BTreeMap<String, String>> {
    image.configs_of(CONFIG_RESOURCE_GROUP, group)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn keys_are_in_name_order_and_their_defaults_pass_their_checks() {
        let names: Vec<&str> = GROUP_CONFIG_KEYS.iter().map(|k| k.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted);
        let defaults: BTreeMap<String, String> = GROUP_CONFIG_KEYS
            .iter()
            .map(|k| (k.name.to_string(), k.default.to_string()))
            .collect();
        assert_eq!(validate(&defaults, &BTreeMap::new()), Ok(()));
    }

    #[test]
    fn values_are_checked_as_kafka_checks_them() {
        let broker = BTreeMap::new();
        let refused = |k: &str, v: &str| validate(&set(&[(k, v)]), &broker).unwrap_err();
        assert_eq!(
            refused("consumer.session.timeout.ms", "1000"),
            "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."
        );
        assert_eq!(
            refused("consumer.heartbeat.interval.ms", "0"),
            "Invalid value 0 for configuration consumer.heartbeat.interval.ms: Value must be at least 1"
        );
        assert_eq!(
            refused("consumer.session.timeout.ms", "abc"),
            "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"
        );
        assert_eq!(
            refused("streams.num.standby.replicas", "5"),
            "streams.num.standby.replicas must be less than or equal to 2"
        );
        assert_eq!(
            refused("share.isolation.level", "bogus"),
            "Invalid value bogus for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted"
        );
        assert_eq!(
            refused("streams.assignor.name", "nope"),
            "streams.assignor.name 'nope' is not a registered task assignor. Registered assignors are: [sticky]."
        );
        assert_eq!(
            refused("no.such", "1"),
            "Unknown group config name: no.such"
        );
        assert_eq!(
            refused("errors.deadletterqueue.topic.name", "__dlq"),
            "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'"
        );
        assert!(validate(
            &set(&[("errors.deadletterqueue.topic.name", "dlq.orders")]),
            &broker
        )
        .is_ok());
        assert!(validate(
            &set(&[("share.auto.offset.reset", "by_duration:PT1H")]),
            &broker
        )
        .is_ok());
        assert!(validate(
            &set(&[("share.auto.offset.reset", "by_duration:xx")]),
            &broker
        )
        .is_err());
        // The broker's bounds apply.
        let wide = set(&[("group.consumer.max.session.timeout.ms", "90000")]);
        assert!(validate(&set(&[("consumer.session.timeout.ms", "80000")]), &wide).is_ok());
        // The session must outlast the heartbeat interval.
        let tight = set(&[
            ("group.consumer.min.session.timeout.ms", "1000"),
            ("group.consumer.min.heartbeat.interval.ms", "1000"),
        ]);
        assert_eq!(
            validate(
                &set(&[
                    ("consumer.session.timeout.ms", "5000"),
                    ("consumer.heartbeat.interval.ms", "5000")
                ]),
                &tight
            )
            .unwrap_err(),
            "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
        );
    }

    #[test]
    fn iso_durations() {
        for ok in ["PT1H", "P1D", "P2DT3H4M5.5S", "PT0.5S", "pt10m"] {
            assert!(is_iso_duration(ok), "{ok}");
        }
        for bad in ["", "P", "PT", "1H", "PT1X", "P1H", "PT-1H", "PT1.S", "P1DT"] {
            assert!(!is_iso_duration(bad), "{bad}");
        }
    }
}
