//! Topic regexes of consumer-protocol subscriptions (KIP-848's
//! SubscribedTopicRegex). Kafka compiles them with RE2/J, whose syntax the
//! `regex` crate shares, and matches whole topic names, internal topics
//! included. They are resolved against the metadata image when it changes
//! or a new regex appears; results are stored as
//! ConsumerGroupRegularExpression records.

use std::collections::{BTreeMap, BTreeSet};

use ottla_controller::MetadataImage;
use regex::Regex;
use tracing::warn;

use super::consumer_group::ConsumerGroup;
use super::consumer_member::MemberSubscription;
use super::consumer_records::{ConsumerRecord, ResolvedRegex};
use super::records::CoordinatorRecord;

/// Kafka matches a subscription regex (RE2/J syntax) against whole topic
/// names.
pub fn compile(regex: &str) -> Result<Regex, regex::Error> {
    Regex::new(&format!("^(?:{regex})$"))
}

fn resolve(regex: &str, image: &MetadataImage) -> BTreeSet<String> {
    match compile(regex) {
        Ok(re) => image
            .topic_ids
            .keys()
            .filter(|t| re.is_match(t))
            .cloned()
            .collect(),
        Err(e) => {
            warn!(regex, error = %e, "ignoring a stored regex that does not compile");
            BTreeSet::new()
        }
    }
}

/// Resolves the regexes `subs` use against `image` (on a new image or a new
/// regex) and drops unused ones, adding their records; true when some
/// regex now matches other topics.
pub fn refresh(
    group: &ConsumerGroup,
    subs: &BTreeMap<&str, &MemberSubscription>,
    regexes: &mut BTreeMap<String, ResolvedRegex>,
    image: &MetadataImage,
    now: i64,
    records: &mut Vec<CoordinatorRecord>,
) -> bool {
    let in_use: BTreeSet<&str> = subs.values().filter_map(|s| s.regex()).collect();
    regexes.retain(|regex, _| {
        let used = in_use.contains(regex.as_str());
        if !used {
            records.push(CoordinatorRecord::Consumer(
                ConsumerRecord::RegularExpression {
                    group: group.id.clone(),
                    regex: regex.clone(),
                    value: None,
                },
            ));
        }
        used
    });
    let mut changed = false;
    for regex in in_use {
        let known = regexes.get(regex);
        if known.is_some_and(|r| r.version == image.offset) {
            continue;
        }
        let topics = resolve(regex, image);
        let differs = known.is_none_or(|r| r.topics != topics);
        changed |= known.map_or(!topics.is_empty(), |r| r.topics != topics);
        if differs {
            let resolved = ResolvedRegex {
                topics,
                version: image.offset,
                timestamp: now,
            };
            records.push(CoordinatorRecord::Consumer(
                ConsumerRecord::RegularExpression {
                    group: group.id.clone(),
                    regex: regex.to_string(),
                    value: Some(resolved.clone()),
                },
            ));
            regexes.insert(regex.to_string(), resolved);
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regexes_match_whole_names() {
        let re = compile("orders|pay.*").unwrap();
        assert!(re.is_match("orders") && re.is_match("payments"));
        assert!(!re.is_match("orders-1") && !re.is_match("repay"));
        assert!(compile("(").is_err());
    }
}
