//! Listener URIs (`NAME://host:port`), security protocol maps, quorum voters
//! (`id@host:port`) and plain `host:port` endpoints.

use std::collections::{BTreeMap, HashSet};
use std::fmt;

/// Kafka's security protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    fn parse(s: &str) -> Option<Self> {
        Some(match s.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Self::Plaintext,
            "SSL" => Self::Ssl,
            "SASL_PLAINTEXT" => Self::SaslPlaintext,
            "SASL_SSL" => Self::SaslSsl,
            _ => return None,
        })
    }

    /// Whether connections are wrapped in TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    /// Whether clients authenticate with SASL.
    pub fn uses_sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::SaslSsl => "SASL_SSL",
        }
    }
}

/// A host and port. An empty host means "all interfaces" when binding.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// One configured listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// Upper-cased, as Kafka normalises listener names.
    pub name: String,
    pub endpoint: Endpoint,
    pub protocol: SecurityProtocol,
}

impl fmt::Display for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.name, self.endpoint)
    }
}

/// A static quorum voter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumVoter {
    pub id: i32,
    pub endpoint: Endpoint,
}

/// `host:port` or `[v6addr]:port`; the host may be empty.
pub fn parse_endpoint(s: &str) -> Result<Endpoint, String> {
    let (host, port) = s
        .rsplit_once(':')
        .ok_or_else(|| format!("'{s}' is not host:port"))?;
    let host = match host.strip_prefix('[') {
        Some(inner) => inner
            .strip_suffix(']')
            .ok_or_else(|| format!("'{s}' has an unterminated IPv6 bracket"))?,
        None if host.contains(':') => return Err(format!("IPv6 address in '{s}' needs brackets")),
        None => host,
    };
    let port = port
        .parse()
        .map_err(|_| format!("'{port}' in '{s}' is not a port (0-65535)"))?;
    Ok(Endpoint {
        host: host.to_owned(),
        port,
    })
}

/// `NAME://host:port`.
fn parse_listener_uri(s: &str) -> Result<(String, Endpoint), String> {
    let (name, rest) = s
        .split_once("://")
        .ok_or_else(|| format!("'{s}' is not NAME://host:port"))?;
    if name.is_empty() {
        return Err(format!("'{s}' has no listener name"));
    }
    Ok((name.to_ascii_uppercase(), parse_endpoint(rest)?))
}

/// `NAME:PROTOCOL,...`.
pub fn parse_protocol_map(items: &[String]) -> Result<BTreeMap<String, SecurityProtocol>, String> {
    items
        .iter()
        .filter(|i| !i.is_empty())
        .map(|item| {
            let (name, proto) = item
                .split_once(':')
                .ok_or_else(|| format!("'{item}' is not NAME:PROTOCOL"))?;
            let proto = SecurityProtocol::parse(proto.trim())
                .ok_or_else(|| format!("'{proto}' is not a security protocol"))?;
            Ok((name.trim().to_ascii_uppercase(), proto))
        })
        .collect()
}

/// Parses listener URIs, resolving each one's protocol from `map` (or from
/// its name when that is itself a protocol name, as Kafka allows). Names and
/// non-zero ports must be unique.
pub fn parse_listeners(
    uris: &[String],
    map: &BTreeMap<String, SecurityProtocol>,
) -> Result<Vec<Listener>, String> {
    let mut names = HashSet::new();
    let mut ports = HashSet::new();
    uris.iter()
        .filter(|u| !u.is_empty())
        .map(|uri| {
            let (name, endpoint) = parse_listener_uri(uri)?;
            let protocol = map
                .get(&name)
                .copied()
                .or_else(|| SecurityProtocol::parse(&name))
                .ok_or_else(|| {
                    format!("listener {name} has no entry in listener.security.protocol.map")
                })?;
            if !names.insert(name.clone()) {
                return Err(format!("listener name {name} is used twice"));
            }
            if endpoint.port != 0 && !ports.insert(endpoint.port) {
                return Err(format!("port {} is used by two listeners", endpoint.port));
            }
            Ok(Listener {
                name,
                endpoint,
                protocol,
            })
        })
        .collect()
}

/// `id@host:port,...`; ids must be unique.
pub fn parse_voters(items: &[String]) -> Result<Vec<QuorumVoter>, String> {
    let mut ids = HashSet::new();
    items
        .iter()
        .filter(|i| !i.is_empty())
        .map(|item| {
            let (id, endpoint) = item
                .split_once('@')
                .ok_or_else(|| format!("'{item}' is not id@host:port"))?;
            let id: i32 = id
                .parse()
                .ok()
                .filter(|id| *id >= 0)
                .ok_or_else(|| format!("'{id}' in '{item}' is not a node id"))?;
            if !ids.insert(id) {
                return Err(format!("voter {id} is listed twice"));
            }
            Ok(QuorumVoter {
                id,
                endpoint: parse_endpoint(endpoint)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn default_map() -> BTreeMap<String, SecurityProtocol> {
        parse_protocol_map(&strings(&["CONTROLLER:PLAINTEXT", "INTERNAL:SSL"])).unwrap()
    }

    #[test]
    fn listeners_resolve_protocols_from_map_or_name() {
        let l = parse_listeners(
            &strings(&[
                "plaintext://:9092",
                "CONTROLLER://[::1]:9093",
                "INTERNAL://h:1",
            ]),
            &default_map(),
        )
        .unwrap();
        assert_eq!(l[0].name, "PLAINTEXT");
        assert_eq!(l[0].endpoint.host, "");
        assert_eq!(l[1].endpoint.host, "::1");
        assert_eq!(l[1].to_string(), "CONTROLLER://[::1]:9093");
        assert_eq!(l[2].protocol, SecurityProtocol::Ssl);
    }

    #[test]
    fn listener_errors_are_specific() {
        let map = default_map();
        let err = |uris: &[&str]| parse_listeners(&strings(uris), &map).unwrap_err();
        assert_eq!(
            err(&["FOO://h:1"]),
            "listener FOO has no entry in listener.security.protocol.map"
        );
        assert_eq!(
            err(&["PLAINTEXT://h:1", "plaintext://h:2"]),
            "listener name PLAINTEXT is used twice"
        );
        assert_eq!(
            err(&["PLAINTEXT://h:1", "CONTROLLER://h:1"]),
            "port 1 is used by two listeners"
        );
        assert_eq!(err(&["h:1"]), "'h:1' is not NAME://host:port");
        assert_eq!(
            err(&["PLAINTEXT://h:99999"]),
            "'99999' in 'h:99999' is not a port (0-65535)"
        );
        assert_eq!(
            err(&["PLAINTEXT://::1:9092"]),
            "IPv6 address in '::1:9092' needs brackets"
        );
        assert!(parse_listeners(&strings(&["PLAINTEXT://:0", "CONTROLLER://:0"]), &map).is_ok());
    }

    #[test]
    fn voters() {
        let v = parse_voters(&strings(&["1@a:9093", "2@[::1]:9093"])).unwrap();
        assert_eq!(v[1].id, 2);
        assert_eq!(v[1].endpoint.host, "::1");
        assert_eq!(
            parse_voters(&strings(&["1@a:1", "1@b:2"])).unwrap_err(),
            "voter 1 is listed twice"
        );
        assert!(parse_voters(&strings(&["x@a:1"])).is_err());
        assert!(parse_voters(&strings(&["1:a:1"])).is_err());
    }

    #[test]
    fn protocol_map_errors() {
        assert_eq!(
            parse_protocol_map(&strings(&["A:TLS"])).unwrap_err(),
            "'TLS' is not a security protocol"
        );
    }
}
