//! The two properties files: `--command-config` (how the CLI reaches the
//! destination cluster) and `--mirror-config` (the new mirror's entries,
//! checked by the broker, not here).

use std::path::{Path, PathBuf};
use std::time::Duration;

use ottla_protocol::mirror::admin::MirrorConfigEntry;

use crate::config::{MirrorConfig, SecurityProtocol, SourceSecurity};
use ottla_protocol::properties::{self, SyntaxError};
use thiserror::Error;

/// The keys of `--command-config` the CLI uses (besides the security ones).
pub const CLIENT_ID: &str = "client.id";
pub const REQUEST_TIMEOUT_MS: &str = "request.timeout.ms";
pub const CONNECT_TIMEOUT_MS: &str = "socket.connection.setup.timeout.ms";

#[derive(Debug, Error)]
pub enum SettingsError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Syntax { path: PathBuf, source: SyntaxError },
    #[error("{}: {message}", path.display())]
    Security { path: PathBuf, message: String },
    #[error("{}: {key}={value}: {message}", path.display())]
    Value {
        path: PathBuf,
        key: &'static str,
        value: String,
        message: String,
    },
}

/// How to talk to the destination cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSettings {
    pub client_id: String,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    /// `security.protocol` and its TLS / SASL settings.
    pub security: SourceSecurity,
}

impl Default for ClientSettings {
    /// Kafka's admin client defaults.
    fn default() -> Self {
        Self {
            client_id: "ottla-mirrors".to_string(),
            connect_timeout: Duration::from_millis(10_000),
            request_timeout: Duration::from_millis(30_000),
            security: SourceSecurity {
                protocol: SecurityProtocol::Plaintext,
                tls: None,
                sasl: None,
            },
        }
    }
}

/// Client settings from `--command-config`, with the keys it does not use
/// (for a warning). `security.protocol`, `ssl.*` and `sasl.*` are checked
/// as a mirror's source settings are (PEM stores; PLAIN and SCRAM).
pub fn client_settings(
    path: Option<&Path>,
) -> Result<(ClientSettings, Vec<String>), SettingsError> {
    let mut settings = ClientSettings::default();
    let mut unused = Vec::new();
    let Some(path) = path else {
        return Ok((settings, unused));
    };
    let value_error = |key, value: &str, message: String| SettingsError::Value {
        path: path.to_owned(),
        key,
        value: value.to_string(),
        message,
    };
    let millis = |key, value: &str| {
        value
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|&ms| ms > 0)
            .map(|ms| Duration::from_millis(u64::from(ms)))
            .ok_or_else(|| value_error(key, value, "not a positive number of milliseconds".into()))
    };
    let mut security = Vec::new();
    for (key, value) in read(path)? {
        match key.as_str() {
            key if is_security_key(key) => security.push((key.to_string(), Some(value))),
            CLIENT_ID => settings.client_id = value,
            REQUEST_TIMEOUT_MS => settings.request_timeout = millis(REQUEST_TIMEOUT_MS, &value)?,
            CONNECT_TIMEOUT_MS => settings.connect_timeout = millis(CONNECT_TIMEOUT_MS, &value)?,
            _ => unused.push(key),
        }
    }
    settings.security =
        MirrorConfig::client_security_of(&security).map_err(|e| SettingsError::Security {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
    Ok((settings, unused))
}

fn is_security_key(key: &str) -> bool {
    key == "security.protocol" || key.starts_with("ssl.") || key.starts_with("sasl.")
}

/// The entries of a `--mirror-config` file, for CreateMirror.
pub fn mirror_configs(path: &Path) -> Result<Vec<MirrorConfigEntry>, SettingsError> {
    Ok(read(path)?
        .into_iter()
        .map(|(name, value)| MirrorConfigEntry {
            name,
            value: Some(value),
            ..Default::default()
        })
        .collect())
}

/// A properties file's entries in file order, a later duplicate key
/// replacing the earlier value (Java's rule) in the earlier place.
fn read(path: &Path) -> Result<Vec<(String, String)>, SettingsError> {
    let text = std::fs::read_to_string(path).map_err(|source| SettingsError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse(&text).map_err(|source| SettingsError::Syntax {
        path: path.to_owned(),
        source,
    })
}

fn parse(text: &str) -> Result<Vec<(String, String)>, SyntaxError> {
    let mut entries: Vec<(String, String)> = Vec::new();
    for p in properties::parse(text)? {
        match entries.iter_mut().find(|(k, _)| *k == p.key) {
            Some(entry) => entry.1 = p.value,
            None => entries.push((p.key, p.value)),
        }
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn file(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    #[test]
    fn duplicates_keep_the_first_place_and_the_last_value() {
        let entries = parse("a=1\nb=2\n# c=3\na = 4\n").unwrap();
        assert_eq!(
            entries,
            [("a".to_string(), "4".to_string()), ("b".into(), "2".into())]
        );
    }

    #[test]
    fn mirror_config_entries() {
        let f = file(
            "bootstrap.servers=source-1:9092,\\\n  source-2:9092\n\
             mirror.topics.include = orders-.*\n\
             sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n  username=\"u\";\n",
        );
        let entries = mirror_configs(f.path()).unwrap();
        let pairs: Vec<(&str, Option<&str>)> = entries
            .iter()
            .map(|e| (e.name.as_str(), e.value.as_deref()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("bootstrap.servers", Some("source-1:9092,source-2:9092")),
                ("mirror.topics.include", Some("orders-.*")),
                (
                    "sasl.jaas.config",
                    Some("org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\";")
                ),
            ]
        );
    }

    #[test]
    fn file_errors_name_the_file() {
        let e = mirror_configs(Path::new("/nonexistent/m.properties")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot read /nonexistent/m.properties: "),
            "{e}"
        );
        let f = file("ok=1\nbad=\\u12g4\n");
        let e = mirror_configs(f.path()).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: line 2: malformed \\uXXXX escape '\\u12g4'",
                f.path().display()
            )
        );
    }

    #[test]
    fn no_command_config_means_defaults() {
        assert_eq!(
            client_settings(None).unwrap(),
            (ClientSettings::default(), vec![])
        );
    }

    #[test]
    fn command_config_keys() {
        let f = file(
            "security.protocol=plaintext\nclient.id=ops\nrequest.timeout.ms=5000\n\
             socket.connection.setup.timeout.ms=2000\nretries=3\n",
        );
        let (settings, unused) = client_settings(Some(f.path())).unwrap();
        assert_eq!(
            settings,
            ClientSettings {
                client_id: "ops".into(),
                connect_timeout: Duration::from_secs(2),
                request_timeout: Duration::from_secs(5),
                ..ClientSettings::default()
            }
        );
        assert_eq!(unused, ["retries"]);
    }

    #[test]
    fn security_settings_are_taken_and_checked() {
        let f = file(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"ops\" password=\"x\";\n",
        );
        let (settings, unused) = client_settings(Some(f.path())).unwrap();
        assert!(unused.is_empty(), "{unused:?}");
        assert_eq!(settings.security.protocol, SecurityProtocol::SaslPlaintext);
        let client = settings.security.client_security().unwrap();
        assert!(client.sasl.is_some() && client.tls.is_none());
        // SASL without a login, and an unknown protocol, are refused.
        let f = file("security.protocol=SASL_SSL\n");
        let e = client_settings(Some(f.path())).unwrap_err().to_string();
        assert!(e.contains("sasl.jaas.config"), "{e}");
        let f = file("security.protocol=TLS\n");
        let e = client_settings(Some(f.path())).unwrap_err().to_string();
        assert!(e.contains("security.protocol"), "{e}");
        // TLS needs a truststore Ottla can read.
        let f = file("security.protocol=SSL\nssl.truststore.location=/nonexistent/ca.pem\n");
        let (settings, _) = client_settings(Some(f.path())).unwrap();
        let e = settings.security.client_security().err().unwrap();
        assert!(e.contains("/nonexistent/ca.pem"), "{e}");
    }

    #[test]
    fn bad_timeouts_are_refused() {
        let f = file("request.timeout.ms=soon\n");
        let e = client_settings(Some(f.path())).unwrap_err().to_string();
        assert!(
            e.ends_with("request.timeout.ms=soon: not a positive number of milliseconds"),
            "{e}"
        );
    }
}
