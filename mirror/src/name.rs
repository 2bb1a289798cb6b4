//! Mirror names and the `mirror.name` topic config that binds a topic to a
//! mirror.
//!
//! The seeds record what the operator asked for in the value's suffix:
//! `<mirror>` mirrors, `<mirror>.paused` pauses, `<mirror>.removed` stops
//! (failover). So a mirror name follows the topic naming rules (at most 249
//! of `[a-zA-Z0-9._-]`, not `.` or `..`) and may not itself end in `.paused`
//! or `.removed`; a value is parsed from the right.

use std::fmt;

use thiserror::Error;

/// The topic config key that binds a topic to a mirror. Never synced from
/// the source (see [`crate::config::MirrorConfig::syncs_topic_property`]).
pub const MIRROR_NAME_CONFIG: &str = "mirror.name";

const PAUSED_SUFFIX: &str = ".paused";
const REMOVED_SUFFIX: &str = ".removed";
/// Kafka's limit for topic names, which mirror names share.
const MAX_NAME_LENGTH: usize = 249;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InvalidMirrorName {
    #[error("a mirror name cannot be empty")]
    Empty,
    #[error("mirror name {0:?} is not allowed")]
    Dots(String),
    #[error("mirror name is {0} characters long, at most 249 are allowed")]
    TooLong(usize),
    #[error("mirror name {0:?} contains {1:?}: only ASCII letters, digits, '.', '_' and '-' are allowed")]
    IllegalCharacter(String, char),
    #[error(
        "mirror name {0:?} ends in {1:?}, which mirror.name reserves for paused and removed topics"
    )]
    ReservedSuffix(String, &'static str),
}

/// A valid mirror name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MirrorName(String);

impl MirrorName {
    pub fn new(name: impl Into<String>) -> Result<Self, InvalidMirrorName> {
        let name = name.into();
        if name.is_empty() {
            return Err(InvalidMirrorName::Empty);
        }
        if name == "." || name == ".." {
            return Err(InvalidMirrorName::Dots(name));
        }
        if name.chars().count() > MAX_NAME_LENGTH {
            return Err(InvalidMirrorName::TooLong(name.chars().count()));
        }
        if let Some(bad) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return Err(InvalidMirrorName::IllegalCharacter(name, bad));
        }
        for suffix in [PAUSED_SUFFIX, REMOVED_SUFFIX] {
            if name.ends_with(suffix) {
                return Err(InvalidMirrorName::ReservedSuffix(name, suffix));
            }
        }
        Ok(Self(name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MirrorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the operator asked for a topic, as recorded in `mirror.name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestedMirroring {
    /// AddTopicsToMirror or ResumeMirrorTopics: mirror.
    Mirror,
    /// PauseMirrorTopics: stop fetching, stay read-only.
    Pause,
    /// RemoveTopicsFromMirror: stop and become writable.
    Remove,
}

/// A parsed `mirror.name` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorBinding {
    pub mirror: MirrorName,
    pub requested: RequestedMirroring,
}

impl MirrorBinding {
    /// Parses from the right: the suffix first, then the mirror name.
    pub fn parse(value: &str) -> Result<Self, InvalidMirrorName> {
        let (name, requested) = if let Some(name) = value.strip_suffix(REMOVED_SUFFIX) {
            (name, RequestedMirroring::Remove)
        } else if let Some(name) = value.strip_suffix(PAUSED_SUFFIX) {
            (name, RequestedMirroring::Pause)
        } else {
            (value, RequestedMirroring::Mirror)
        };
        Ok(Self {
            mirror: MirrorName::new(name)?,
            requested,
        })
    }

    /// The `mirror.name` value.
    pub fn config_value(&self) -> String {
        let suffix = match self.requested {
            RequestedMirroring::Mirror => "",
            RequestedMirroring::Pause => PAUSED_SUFFIX,
            RequestedMirroring::Remove => REMOVED_SUFFIX,
        };
        format!("{}{suffix}", self.mirror)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_topic_rules() {
        assert!(MirrorName::new("us-east.dr_1").is_ok());
        assert_eq!(MirrorName::new(""), Err(InvalidMirrorName::Empty));
        assert!(matches!(
            MirrorName::new(".."),
            Err(InvalidMirrorName::Dots(_))
        ));
        assert_eq!(
            MirrorName::new("a".repeat(250)),
            Err(InvalidMirrorName::TooLong(250))
        );
        assert!(MirrorName::new("a".repeat(249)).is_ok());
        assert_eq!(
            MirrorName::new("a b"),
            Err(InvalidMirrorName::IllegalCharacter("a b".into(), ' '))
        );
        assert_eq!(
            MirrorName::new("dr.paused").unwrap_err().to_string(),
            "mirror name \"dr.paused\" ends in \".paused\", which mirror.name reserves for paused and removed topics"
        );
        assert!(MirrorName::new("paused").is_ok());
    }

    #[test]
    fn bindings_parse_from_the_right_and_round_trip() {
        for (value, requested) in [
            ("dr", RequestedMirroring::Mirror),
            ("dr.paused", RequestedMirroring::Pause),
            ("dr.removed", RequestedMirroring::Remove),
        ] {
            let binding = MirrorBinding::parse(value).unwrap();
            assert_eq!(binding.mirror.as_str(), "dr");
            assert_eq!(binding.requested, requested);
            assert_eq!(binding.config_value(), value);
        }
        // Only one suffix is stripped; the rest must be a valid name.
        assert!(MirrorBinding::parse("dr.paused.removed").is_err());
        assert!(MirrorBinding::parse(".removed").is_err());
    }
}
