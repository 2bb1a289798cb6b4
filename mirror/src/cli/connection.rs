//! One connection to the destination cluster: the first bootstrap server
//! that accepts it, asked for its API versions so that a broker without the
//! mirror APIs is named as such instead of closing the connection on us.

use std::fmt::Write as _;

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest};
use kafka_protocol::protocol::{Request, StrBytes};
use ottla_client::{ClientError, KafkaClient};
use ottla_protocol::mirror::MirrorRequest;
use ottla_protocol::names::error_name;
use thiserror::Error;

use super::args::ServerAddress;
use super::settings::ClientSettings;

/// Every mirror API is at v0.
const MIRROR_API_VERSION: i16 = 0;
/// ApiVersions v3: the first flexible version, served by Kafka 2.4 and later.
const API_VERSIONS_VERSION: i16 = 3;
/// A DescribeMirrors answer for many partitions can be large.
const MAX_RESPONSE_BYTES: usize = 256 << 20;

#[derive(Debug, Error)]
pub enum ConnectionError {
    #[error("cannot connect to any bootstrap server: {}", tried(.0))]
    NoServer(Vec<(ServerAddress, ClientError)>),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("--command-config: {0}")]
    Security(String),
    #[error("{addr} answered ApiVersions with {}", error_name(*.code))]
    ApiVersions { addr: String, code: i16 },
    #[error("{addr} does not serve {api} (API key {key} v{MIRROR_API_VERSION}): is it an Ottla broker with cluster mirroring?")]
    Unsupported {
        addr: String,
        api: &'static str,
        key: i16,
    },
    #[error("{addr} does not serve {api:?} at a version ottla mirrors knows")]
    UnsupportedKafka { addr: String, api: ApiKey },
}

fn tried(failures: &[(ServerAddress, ClientError)]) -> String {
    let mut text = String::new();
    for (i, (server, error)) in failures.iter().enumerate() {
        let sep = if i == 0 { "" } else { "; " };
        // ClientError names the address itself; repeat it only if it does not.
        let error = error.to_string();
        if error.contains(&server.to_string()) {
            let _ = write!(text, "{sep}{error}");
        } else {
            let _ = write!(text, "{sep}{server}: {error}");
        }
    }
    text
}

pub struct Connection {
    client: KafkaClient,
    settings: ClientSettings,
    api_versions: Vec<ApiVersion>,
}

impl Connection {
    /// Connects to the first of `servers` that accepts, in order.
    pub async fn open(
        servers: &[ServerAddress],
        settings: &ClientSettings,
    ) -> Result<Self, ConnectionError> {
        let security = settings
            .security
            .client_security()
            .map_err(ConnectionError::Security)?;
        let mut failures = Vec::new();
        for server in servers {
            match KafkaClient::connect_with(
                &server.host,
                server.port,
                &settings.client_id,
                MAX_RESPONSE_BYTES,
                settings.connect_timeout,
                &security,
            )
            .await
            {
                Ok(client) => return Self::handshake(client, settings.clone()).await,
                Err(e) => failures.push((server.clone(), e)),
            }
        }
        Err(ConnectionError::NoServer(failures))
    }

    async fn handshake(
        mut client: KafkaClient,
        settings: ClientSettings,
    ) -> Result<Self, ConnectionError> {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("ottla-mirrors"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let response = client
            .send(API_VERSIONS_VERSION, &request, settings.request_timeout)
            .await?;
        if response.error_code != 0 {
            return Err(ConnectionError::ApiVersions {
                addr: client.addr().to_string(),
                code: response.error_code,
            });
        }
        Ok(Self {
            client,
            settings,
            api_versions: response.api_keys,
        })
    }

    /// Sends one mirror request, if the broker serves it.
    pub async fn send<R: MirrorRequest>(
        &mut self,
        request: &R,
    ) -> Result<R::Response, ConnectionError> {
        let key = R::API_KEY.as_i16();
        let served = self.api_versions.iter().any(|v| {
            v.api_key == key && (v.min_version..=v.max_version).contains(&MIRROR_API_VERSION)
        });
        if !served {
            return Err(ConnectionError::Unsupported {
                addr: self.client.addr().to_string(),
                api: R::NAME.strip_suffix("Request").unwrap_or(R::NAME),
                key,
            });
        }
        Ok(self
            .client
            .send_mirror(MIRROR_API_VERSION, request, self.settings.request_timeout)
            .await?)
    }

    /// Sends one Kafka request at the highest version both sides know, up
    /// to `max_version`, if the broker serves it.
    pub async fn send_kafka<R: Request>(
        &mut self,
        key: ApiKey,
        max_version: i16,
        request: &R,
    ) -> Result<R::Response, ConnectionError> {
        let version = self
            .api_versions
            .iter()
            .find(|v| v.api_key == key as i16 && v.min_version <= max_version)
            .map(|v| v.max_version.min(max_version))
            .ok_or_else(|| ConnectionError::UnsupportedKafka {
                addr: self.client.addr().to_string(),
                api: key,
            })?;
        Ok(self
            .client
            .send(version, request, self.settings.request_timeout)
            .await?)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn addr(host: &str, port: u16) -> ServerAddress {
        ServerAddress {
            host: host.into(),
            port,
        }
    }

    /// A port nothing listens on: bound, then released.
    fn closed_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    #[test]
    fn every_failed_address_is_named() {
        let (p1, p2) = (closed_port(), closed_port());
        let servers = [addr("127.0.0.1", p1), addr("127.0.0.1", p2)];
        let settings = ClientSettings {
            connect_timeout: Duration::from_secs(5),
            ..ClientSettings::default()
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let Err(e) = runtime.block_on(Connection::open(&servers, &settings)) else {
            panic!("connected to a closed port");
        };
        let text = e.to_string();
        assert!(
            text.starts_with(&format!(
                "cannot connect to any bootstrap server: cannot connect to 127.0.0.1:{p1}: "
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!("; cannot connect to 127.0.0.1:{p2}: ")),
            "{text}"
        );
    }
}
