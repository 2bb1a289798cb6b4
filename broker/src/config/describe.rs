//! The broker's configuration as DescribeConfigs reports it: every known key
//! with its value, source, type, documentation and synonyms, following
//! Kafka's rules (a set key lists its static value, then its default; keys in
//! a synonym group list the whole group).

use super::defs::{self, ConfigDef};
use super::value::{ConfigType, Value};
use super::BrokerConfig;

/// Where a value comes from. Ottla has no dynamic configs yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    /// Set in server.properties or by --override.
    Static,
    Default,
}

impl ConfigSource {
    /// The DescribeConfigs `ConfigSource` code.
    pub fn kafka_code(self) -> i8 {
        match self {
            Self::Static => 4,
            Self::Default => 5,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigSynonym {
    pub name: &'static str,
    pub value: Option<String>,
    pub source: ConfigSource,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    pub name: &'static str,
    /// `None` when null, or withheld because the key is sensitive.
    pub value: Option<String>,
    pub source: ConfigSource,
    pub is_sensitive: bool,
    pub config_type: ConfigType,
    pub documentation: &'static str,
    /// Highest precedence first; the entry's source is the first one's.
    pub synonyms: Vec<ConfigSynonym>,
}

impl BrokerConfig {
    /// Every known key, in table order.
    pub fn describe(&self) -> Vec<ConfigEntry> {
        defs::DEFS.iter().map(|def| self.entry(def)).collect()
    }

    fn entry(&self, def: &'static ConfigDef) -> ConfigEntry {
        let sensitive = def.ty == ConfigType::Password;
        let synonyms: Vec<ConfigSynonym> = synonym_group(def.name)
            .iter()
            .flat_map(|name| self.sources_of(name, sensitive))
            .collect();
        let resolved = &self.values[def.name];
        ConfigEntry {
            name: def.name,
            value: render(resolved.value.as_ref(), sensitive),
            source: synonyms.first().map_or(ConfigSource::Default, |s| s.source),
            is_sensitive: sensitive,
            config_type: def.ty,
            documentation: def.doc.trim(),
            synonyms,
        }
    }

    /// The static value (if set) and the default (if not null) of `name`.
    fn sources_of(&self, name: &'static str, sensitive: bool) -> Vec<ConfigSynonym> {
        let def = defs::def(name).expect("synonym groups only name known keys");
        let resolved = &self.values[name];
        let mut out = Vec::new();
        if resolved.source == ConfigSource::Static {
            out.push(ConfigSynonym {
                name,
                value: render(resolved.value.as_ref(), sensitive),
                source: ConfigSource::Static,
            });
        }
        if let Some(raw) = def.default {
            let default = Value::parse(def.ty, raw).ok();
            out.push(ConfigSynonym {
                name,
                value: render(default.as_ref(), sensitive),
                source: ConfigSource::Default,
            });
        }
        out
    }
}

fn synonym_group(name: &'static str) -> Vec<&'static str> {
    defs::SYNONYMS
        .iter()
        .find(|group| group.contains(&name))
        .map_or_else(|| vec![name], |group| group.to_vec())
}

fn render(value: Option<&Value>, sensitive: bool) -> Option<String> {
    value.filter(|_| !sensitive).map(Value::to_string)
}
