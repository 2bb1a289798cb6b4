//! A share group's settings (KIP-932): each is the group's own override
//! (`kafka-configs.sh --entity-type groups`), else the broker's
//! `group.share.*` setting, else Kafka's default; overrides were checked
//! against the broker's bounds when they were set.

use std::collections::BTreeMap;

use ottla_controller::features::{self, SHARE_VERSION};
use ottla_controller::MetadataImage;

use super::resource_configs::{broker_default, group_config_key, group_overrides};
use super::share_group::ShareLimits;

/// Where a share partition's delivery starts when the group first reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareStart {
    Earliest,
    Latest,
    /// The first record at or after this many milliseconds ago.
    ByDuration(i64),
}

/// `share.session.timeout.ms`'s default: the session a loaded member has
/// to heartbeat again in.
pub const DEFAULT_SESSION_TIMEOUT_MS: i64 = 45_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareGroupSettings {
    pub session_timeout_ms: i64,
    pub heartbeat_interval_ms: i32,
    pub record_lock_duration_ms: i64,
    pub delivery_count_limit: i16,
    pub partition_max_record_locks: i64,
    pub auto_offset_reset: ShareStart,
    pub read_committed: bool,
    /// `share.renew.acknowledge.enable`: members may renew their
    /// acquisition locks (KIP-1222).
    pub renew_acknowledge_enabled: bool,
    /// `group.share.max.size` (the broker's only).
    pub max_size: usize,
    /// `errors.deadletterqueue.topic.name`, while share.version 2 serves
    /// dead-letter queues (KIP-1191); None: the group has none.
    pub dead_letter_topic: Option<String>,
    /// `errors.deadletterqueue.copy.record.enable`: dead letters carry the
    /// record's key and value.
    pub copy_dead_letter_records: bool,
}

impl ShareGroupSettings {
    pub fn resolve(image: &MetadataImage, broker: &BTreeMap<String, String>, group: &str) -> Self {
        let overrides = group_overrides(image, group);
        let value = |name: &str| -> String {
            overrides
                .and_then(|o| o.get(name).cloned())
                .unwrap_or_else(|| {
                    broker_default(group_config_key(name).expect("a share group key"), broker)
                })
        };
        let int = |name: &str, default: i64| value(name).trim().parse().unwrap_or(default);
        Self {
            session_timeout_ms: int("share.session.timeout.ms", DEFAULT_SESSION_TIMEOUT_MS),
            heartbeat_interval_ms: int("share.heartbeat.interval.ms", 5_000) as i32,
            record_lock_duration_ms: int("share.record.lock.duration.ms", 30_000),
            delivery_count_limit: int("share.delivery.count.limit", 5) as i16,
            partition_max_record_locks: int("share.partition.max.record.locks", 2_000),
            auto_offset_reset: parse_start(&value("share.auto.offset.reset")),
            read_committed: value("share.isolation.level").trim() == "read_committed",
            renew_acknowledge_enabled: !value("share.renew.acknowledge.enable")
                .trim()
                .eq_ignore_ascii_case("false"),
            max_size: broker_max_size(broker, "group.share.max.size", 200),
            dead_letter_topic: Some(
                value("errors.deadletterqueue.topic.name")
                    .trim()
                    .to_string(),
            )
            .filter(|t| !t.is_empty() && features::level(image, SHARE_VERSION) >= 2),
            copy_dead_letter_records: value("errors.deadletterqueue.copy.record.enable")
                .trim()
                .eq_ignore_ascii_case("true"),
        }
    }

    pub fn limits(&self) -> ShareLimits {
        ShareLimits {
            session_timeout_ms: self.session_timeout_ms,
            heartbeat_interval_ms: self.heartbeat_interval_ms,
            max_size: self.max_size,
        }
    }
}

/// `earliest`, `latest` or `by_duration:<ISO-8601 duration>` (checked when
/// set; anything else reads as Kafka's default, latest).
fn parse_start(value: &str) -> ShareStart {
    let value = value.trim();
    match value {
        "earliest" => ShareStart::Earliest,
        _ => value
            .strip_prefix("by_duration:")
            .and_then(iso_duration_ms)
            .map_or(ShareStart::Latest, ShareStart::ByDuration),
    }
}

/// An ISO-8601 duration of days, hours, minutes and seconds (`P1DT2H`,
/// `PT30M`, `PT1.5S`), as Java's `Duration.parse` reads it; in ms.
fn iso_duration_ms(text: &str) -> Option<i64> {
    let rest = text.trim().strip_prefix('P')?;
    let (days, time) = match rest.split_once('T') {
        Some((d, t)) => (d, t),
        None => (rest, ""),
    };
    let mut ms = 0f64;
    if !days.is_empty() {
        ms += days.strip_suffix('D')?.parse::<f64>().ok()? * 86_400_000.0;
    }
    let mut number = String::new();
    for c in time.chars() {
        let unit = match c {
            'H' => 3_600_000.0,
            'M' => 60_000.0,
            'S' => 1_000.0,
            _ => {
                number.push(c);
                continue;
            }
        };
        ms += number.parse::<f64>().ok()? * unit;
        number.clear();
    }
    (number.is_empty() && ms >= 0.0).then_some(ms as i64)
}

/// A broker's `group.<type>.max.size` (no group overrides it), at least 1.
pub(super) fn broker_max_size(
    broker: &BTreeMap<String, String>,
    key: &str,
    default: usize,
) -> usize {
    broker
        .get(key)
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(default)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_of_delivery_is_read_as_kafka_writes_it() {
        assert_eq!(parse_start("earliest"), ShareStart::Earliest);
        assert_eq!(parse_start("latest"), ShareStart::Latest);
        assert_eq!(
            parse_start("by_duration:P1DT2H"),
            ShareStart::ByDuration(26 * 3_600_000)
        );
        assert_eq!(
            parse_start("by_duration:PT1.5S"),
            ShareStart::ByDuration(1_500)
        );
        assert_eq!(parse_start("by_duration:1h"), ShareStart::Latest);
    }

    #[test]
    fn a_group_override_wins_over_the_broker_and_the_default() {
        let mut image = MetadataImage::default();
        let broker: BTreeMap<String, String> = [(
            "group.share.delivery.count.limit".to_string(),
            "7".to_string(),
        )]
        .into();
        let s = ShareGroupSettings::resolve(&image, &broker, "g");
        assert_eq!(
            (s.delivery_count_limit, s.record_lock_duration_ms),
            (7, 30_000)
        );
        assert_eq!(s.auto_offset_reset, ShareStart::Latest);
        image.configs.insert(
            (
                ottla_controller::records::CONFIG_RESOURCE_GROUP,
                "g".to_string(),
            ),
            [
                ("share.delivery.count.limit".to_string(), "3".to_string()),
                (
                    "share.auto.offset.reset".to_string(),
                    "earliest".to_string(),
                ),
            ]
            .into(),
        );
        let s = ShareGroupSettings::resolve(&image, &broker, "g");
        assert_eq!(s.delivery_count_limit, 3);
        assert_eq!(s.auto_offset_reset, ShareStart::Earliest);
    }
}
