//! Mirror configs, parsed once per change. Parsing compiles the filters'
//! regexes, and every partition's driver and every sync tick asks for its
//! mirror's config: at 10,000 partitions that was 30,000 compilations per
//! failover.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use ottla_controller::MetadataImage;
use parking_lot::Mutex;

use crate::config::MirrorConfig;

/// A mirror's config entries and what they parsed to.
type Parsed = (BTreeMap<String, String>, Arc<MirrorConfig>);

/// The last parse of each mirror's config entries.
#[derive(Default)]
pub struct ParsedConfigs {
    parsed: Mutex<HashMap<String, Parsed>>,
}

impl ParsedConfigs {
    /// `mirror`'s config as `image` holds it; an error names what is wrong.
    pub fn get(&self, image: &MetadataImage, mirror: &str) -> Result<Arc<MirrorConfig>, String> {
        let Some(entries) = image.mirror_configs(mirror) else {
            self.parsed.lock().remove(mirror);
            return Err(format!("mirror {mirror} does not exist"));
        };
        if let Some((parsed_from, config)) = self.parsed.lock().get(mirror) {
            if parsed_from == entries {
                return Ok(config.clone());
            }
        }
        let listed: Vec<(String, Option<String>)> = entries
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect();
        let config = Arc::new(
            MirrorConfig::parse(mirror, &listed).map_err(|e| format!("mirror {mirror}: {e}"))?,
        );
        self.parsed
            .lock()
            .insert(mirror.to_string(), (entries.clone(), config.clone()));
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ottla_controller::records::CONFIG_RESOURCE_MIRROR;
    use ottla_controller::MetadataRecord;

    fn set(image: &mut MetadataImage, name: &str, value: Option<&str>) {
        image.apply(
            0,
            &MetadataRecord::Config {
                resource_type: CONFIG_RESOURCE_MIRROR,
                resource_name: "m".into(),
                name: name.into(),
                value: value.map(str::to_string),
            },
        );
    }

    #[test]
    fn a_config_is_parsed_again_only_when_its_entries_change() {
        let mut image = MetadataImage::empty();
        set(&mut image, "bootstrap.servers", Some("source:9092"));
        let configs = ParsedConfigs::default();
        let first = configs.get(&image, "m").unwrap();
        assert!(Arc::ptr_eq(&first, &configs.get(&image, "m").unwrap()));
        set(&mut image, "mirror.num.fetchers", Some("3"));
        let changed = configs.get(&image, "m").unwrap();
        assert!(!Arc::ptr_eq(&first, &changed));
        assert_eq!(changed.fetchers_per_source_broker, 3);
        assert!(configs
            .get(&image, "other")
            .unwrap_err()
            .contains("does not exist"));
        set(&mut image, "mirror.num.fetchers", Some("0"));
        assert!(
            configs.get(&image, "m").is_err(),
            "an invalid change is an error"
        );
    }
}
