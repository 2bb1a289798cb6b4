//! Talking to a mirror's source cluster as an ordinary client: bootstrap,
//! topic metadata, partition leaders, and LastMirroredEpochs.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{ApiVersionsRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use ottla_mirror::config::{BrokerAddress, MirrorConfig, SecurityProtocol};
use ottla_mirror::truncation::SourceLastMirroredEpoch;
use ottla_protocol::client::KafkaClient;
use ottla_protocol::mirror::epochs::{LastMirroredEpochsRequest, LastMirroredEpochsTopic};
use ottla_protocol::mirror::MirrorApiKey;
use uuid::Uuid;

const METADATA_VERSION: i16 = 12;
const API_VERSIONS_VERSION: i16 = 3;
/// Largest answer accepted from the source (a fetch is bounded below this).
const MAX_RESPONSE: usize = 128 << 20;

/// A source topic as its metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceTopic {
    pub id: Uuid,
    /// Partition -> (leader id, leader epoch).
    pub partitions: BTreeMap<i32, (i32, i32)>,
}

/// A mirror's source cluster.
#[derive(Debug, Clone)]
pub struct SourceCluster {
    bootstrap: Vec<BrokerAddress>,
    client_id: String,
    pub timeout: Duration,
}

impl SourceCluster {
    /// Refuses security settings the mirror client cannot use yet, so a
    /// mirror fails at creation rather than at its first fetch.
    pub fn new(config: &MirrorConfig, client_id: String) -> Result<Self, String> {
        if config.security.protocol != SecurityProtocol::Plaintext {
            return Err(format!(
                "security.protocol={:?} for the source cluster is not supported yet: \
                 the mirror fetcher connects over PLAINTEXT only",
                config.security.protocol
            ));
        }
        Ok(Self {
            bootstrap: config.bootstrap_servers.clone(),
            client_id,
            timeout: Duration::from_secs(30),
        })
    }

    pub async fn connect(&self, host: &str, port: u16) -> Result<KafkaClient, String> {
        KafkaClient::connect(host, port, &self.client_id, MAX_RESPONSE, self.timeout)
            .await
            .map_err(|e| e.to_string())
    }

    /// A connection to the first bootstrap server that answers.
    async fn any_broker(&self) -> Result<KafkaClient, String> {
        let mut failures = Vec::new();
        for address in &self.bootstrap {
            match self.connect(&address.host, address.port).await {
                Ok(client) => return Ok(client),
                Err(e) => failures.push(e),
            }
        }
        Err(format!(
            "no source bootstrap server answered: {}",
            failures.join("; ")
        ))
    }

    /// The topic's id and partition leaders; None if the source lacks it.
    pub async fn topic(&self, name: &str) -> Result<Option<(SourceTopic, Brokers)>, String> {
        let mut client = self.any_broker().await?;
        let request = MetadataRequest::default()
            .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(
                TopicName(StrBytes::from_string(name.to_string())),
            ))]))
            .with_allow_auto_topic_creation(false);
        let response = client
            .send(METADATA_VERSION, &request, self.timeout)
            .await
            .map_err(|e| e.to_string())?;
        let brokers = response
            .brokers
            .iter()
            .map(|b| (b.node_id.0, (b.host.to_string(), b.port as u16)))
            .collect();
        let Some(topic) = response
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == name))
        else {
            return Ok(None);
        };
        match topic.error_code {
            0 => {}
            3 => return Ok(None), // UNKNOWN_TOPIC_OR_PARTITION
            code => {
                return Err(format!(
                    "the source's metadata for topic {name} has error code {code}"
                ))
            }
        }
        let partitions = topic
            .partitions
            .iter()
            .map(|p| (p.partition_index, (p.leader_id.0, p.leader_epoch)))
            .collect();
        Ok(Some((
            SourceTopic {
                id: topic.topic_id,
                partitions,
            },
            Brokers(brokers),
        )))
    }

    /// What the source knows of the last epoch it mirrored from this
    /// cluster for a partition: a source without the API (Apache Kafka)
    /// never mirrored from us.
    pub async fn last_mirrored_epoch(
        &self,
        topic_id: Uuid,
        partition: i32,
    ) -> Result<SourceLastMirroredEpoch, String> {
        let mut client = self.any_broker().await?;
        let versions = client
            .send(
                API_VERSIONS_VERSION,
                &ApiVersionsRequest::default()
                    .with_client_software_name(StrBytes::from_static_str("ottla-mirror"))
                    .with_client_software_version(StrBytes::from_static_str("1")),
                self.timeout,
            )
            .await
            .map_err(|e| e.to_string())?;
        let key = MirrorApiKey::LastMirroredEpochs.as_i16();
        if !versions.api_keys.iter().any(|k| k.api_key == key) {
            return Ok(SourceLastMirroredEpoch::ApiUnsupported);
        }
        let request = LastMirroredEpochsRequest {
            topics: vec![LastMirroredEpochsTopic {
                topic_id,
                partitions: vec![partition],
                ..Default::default()
            }],
            ..Default::default()
        };
        let response = client
            .send_mirror(0, &request, self.timeout)
            .await
            .map_err(|e| e.to_string())?;
        let answer = response
            .topics
            .iter()
            .filter(|t| t.topic_id == topic_id)
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == partition)
            .ok_or("the source's LastMirroredEpochs answer lacks the partition")?;
        SourceLastMirroredEpoch::from_response(answer.error_code, answer.last_mirrored_epoch)
            .map_err(|e| e.to_string())
    }
}

/// The source's brokers by id, from a metadata answer.
#[derive(Debug, Clone, Default)]
pub struct Brokers(BTreeMap<i32, (String, u16)>);

impl Brokers {
    pub fn address(&self, id: i32) -> Option<&(String, u16)> {
        self.0.get(&id)
    }
}
