//! Talking to a mirror's source cluster as an ordinary client: bootstrap,
//! topic metadata, partition leaders, and LastMirroredEpochs.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::{
    ApiVersionsRequest, DescribeAclsRequest, DescribeConfigsRequest, FindCoordinatorRequest,
    GroupId, ListGroupsRequest, MetadataRequest, OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use ottla_client::list_offsets::{
    list_offsets_request, listed_offsets, LATEST_TIMESTAMP, LIST_OFFSETS_VERSION,
};
use ottla_client::ClientSecurity;
use ottla_client::KafkaClient;
use ottla_controller::acls::Acl;
use ottla_protocol::mirror::epochs::{LastMirroredEpochsRequest, LastMirroredEpochsTopic};
use ottla_protocol::mirror::MirrorApiKey;
use uuid::Uuid;

use crate::config::{BrokerAddress, MirrorConfig};
use crate::truncation::SourceLastMirroredEpoch;

const METADATA_VERSION: i16 = 12;
const API_VERSIONS_VERSION: i16 = 3;
const DESCRIBE_CONFIGS_VERSION: i16 = 4;
const LIST_GROUPS_VERSION: i16 = 4;
const FIND_COORDINATOR_VERSION: i16 = 4;
/// v8: batched groups; committed leader epochs.
const OFFSET_FETCH_VERSION: i16 = 8;
const DESCRIBE_ACLS_VERSION: i16 = 2;
/// Largest answer accepted from the source (a fetch is bounded below this).
const MAX_RESPONSE: usize = 128 << 20;

/// A source topic as its metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceTopic {
    pub id: Uuid,
    /// Partition -> (leader id, leader epoch).
    pub partitions: BTreeMap<i32, (i32, i32)>,
}

/// The source's answer about some topics by name: each one's description
/// (or why it has none), and the brokers.
pub type TopicsNamed = (BTreeMap<String, Result<SourceTopic, String>>, Brokers);

/// A mirror's source cluster.
#[derive(Debug, Clone)]
pub struct SourceCluster {
    bootstrap: Vec<BrokerAddress>,
    client_id: String,
    pub timeout: Duration,
    security: ClientSecurity,
}

impl SourceCluster {
    /// Refuses security settings the mirror client cannot use yet, so a
    /// mirror fails at creation rather than at its first fetch.
    pub fn new(config: &MirrorConfig, client_id: String) -> Result<Self, String> {
        Ok(Self {
            bootstrap: config.bootstrap_servers.clone(),
            client_id,
            timeout: Duration::from_secs(30),
            security: config.security.client_security()?,
        })
    }

    pub async fn connect(&self, host: &str, port: u16) -> Result<KafkaClient, String> {
        KafkaClient::connect_with(
            host,
            port,
            &self.client_id,
            MAX_RESPONSE,
            self.timeout,
            &self.security,
        )
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
        let (mut found, brokers) = self.topics_named(&[name.to_string()]).await?;
        Ok(found
            .remove(name)
            .transpose()?
            .map(|topic| (topic, brokers)))
    }

    /// The ids and partition leaders of `names`, in one Metadata request:
    /// a topic the source lacks is left out, one it cannot describe is an
    /// error of its own.
    pub async fn topics_named(&self, names: &[String]) -> Result<TopicsNamed, String> {
        let mut client = self.any_broker().await?;
        let request = MetadataRequest::default()
            .with_topics(Some(
                names
                    .iter()
                    .map(|name| {
                        MetadataRequestTopic::default()
                            .with_name(Some(TopicName(StrBytes::from_string(name.clone()))))
                    })
                    .collect(),
            ))
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
        let mut topics = BTreeMap::new();
        for topic in response.topics {
            let Some(name) = topic.name.map(|n| n.to_string()) else {
                continue;
            };
            let found = match topic.error_code {
                0 => Ok(SourceTopic {
                    id: topic.topic_id,
                    partitions: topic
                        .partitions
                        .iter()
                        .map(|p| (p.partition_index, (p.leader_id.0, p.leader_epoch)))
                        .collect(),
                }),
                3 => continue, // UNKNOWN_TOPIC_OR_PARTITION
                code => Err(format!(
                    "the source's metadata for topic {name} has error code {code}"
                )),
            };
            topics.insert(name, found);
        }
        Ok((topics, Brokers(brokers)))
    }

    /// Every topic the source has (internal ones left out): name, id and
    /// partition count.
    pub async fn topics(&self) -> Result<Vec<(String, Uuid, i32)>, String> {
        let mut client = self.any_broker().await?;
        let request = MetadataRequest::default()
            .with_topics(None)
            .with_allow_auto_topic_creation(false);
        let response = client
            .send(METADATA_VERSION, &request, self.timeout)
            .await
            .map_err(|e| e.to_string())?;
        Ok(response
            .topics
            .into_iter()
            .filter(|t| t.error_code == 0 && !t.is_internal)
            .filter_map(|t| {
                let name = t.name?.to_string();
                Some((name, t.topic_id, t.partitions.len() as i32))
            })
            .collect())
    }

    /// What the source knows of the last epoch it mirrored from this
    /// cluster for a partition: a source without the API (Apache Kafka)
    /// never mirrored from us.
    pub async fn last_mirrored_epoch(
        &self,
        topic_id: Uuid,
        partition: i32,
    ) -> Result<SourceLastMirroredEpoch, String> {
        let mut answers = self.last_mirrored_epochs(topic_id, &[partition]).await?;
        answers
            .pop()
            .map(|(_, answer)| answer)
            .ok_or_else(|| "the source's LastMirroredEpochs answer lacks the partition".into())
    }

    /// [`Self::last_mirrored_epoch`] of several partitions of a topic in
    /// one request: `(partition, answer)` in the order asked.
    pub async fn last_mirrored_epochs(
        &self,
        topic_id: Uuid,
        partitions: &[i32],
    ) -> Result<Vec<(i32, SourceLastMirroredEpoch)>, String> {
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
            return Ok(partitions
                .iter()
                .map(|&p| (p, SourceLastMirroredEpoch::ApiUnsupported))
                .collect());
        }
        let request = LastMirroredEpochsRequest {
            topics: vec![LastMirroredEpochsTopic {
                topic_id,
                partitions: partitions.to_vec(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let response = client
            .send_mirror(0, &request, self.timeout)
            .await
            .map_err(|e| e.to_string())?;
        partitions
            .iter()
            .map(|&partition| {
                let answer = response
                    .topics
                    .iter()
                    .filter(|t| t.topic_id == topic_id)
                    .flat_map(|t| t.partitions.iter())
                    .find(|p| p.partition_index == partition)
                    .ok_or_else(|| {
                        format!(
                            "the source's LastMirroredEpochs answer lacks partition {partition}"
                        )
                    })?;
                SourceLastMirroredEpoch::from_response(
                    answer.error_code,
                    answer.last_mirrored_epoch,
                )
                .map(|lme| (partition, lme))
                .map_err(|e| e.to_string())
            })
            .collect()
    }
}

/// One committed offset of a source group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

impl SourceCluster {
    /// A topic's configs set on the source (not its defaults), by name.
    pub async fn topic_configs(&self, topic: &str) -> Result<BTreeMap<String, String>, String> {
        let mut client = self.any_broker().await?;
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_string(topic.to_string())),
        ]);
        let response = client
            .send(DESCRIBE_CONFIGS_VERSION, &request, self.timeout)
            .await
            .map_err(|e| e.to_string())?;
        let result = response
            .results
            .into_iter()
            .next()
            .ok_or("the source's DescribeConfigs answer is empty")?;
        if result.error_code != 0 {
            return Err(format!(
                "the source's configs of {topic}: error code {}",
                result.error_code
            ));
        }
        Ok(result
            .configs
            .into_iter()
            // Only what was set on the topic itself (DYNAMIC_TOPIC_CONFIG).
            .filter(|c| c.config_source == 1)
            .filter_map(|c| Some((c.name.to_string(), c.value?.to_string())))
            .collect())
    }

    /// Every consumer group the source lists.
    pub async fn groups(&self) -> Result<Vec<String>, String> {
        let mut client = self.any_broker().await?;
        let response = client
            .send(
                LIST_GROUPS_VERSION,
                &ListGroupsRequest::default(),
                self.timeout,
            )
            .await
            .map_err(|e| e.to_string())?;
        if response.error_code != 0 {
            return Err(format!(
                "the source's ListGroups: error code {}",
                response.error_code
            ));
        }
        Ok(response
            .groups
            .into_iter()
            .map(|g| g.group_id.to_string())
            .collect())
    }

    /// A source group's committed offsets, from its coordinator.
    pub async fn committed_offsets(&self, group: &str) -> Result<Vec<SourceOffset>, String> {
        let mut client = self.any_broker().await?;
        let found = client
            .send(
                FIND_COORDINATOR_VERSION,
                &FindCoordinatorRequest::default()
                    .with_key_type(0)
                    .with_coordinator_keys(vec![StrBytes::from_string(group.to_string())]),
                self.timeout,
            )
            .await
            .map_err(|e| e.to_string())?;
        let coordinator = found
            .coordinators
            .into_iter()
            .next()
            .filter(|c| c.error_code == 0)
            .ok_or_else(|| format!("the source has no coordinator for group {group} yet"))?;
        let mut client = self
            .connect(&coordinator.host, coordinator.port as u16)
            .await?;
        let request =
            OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
                .with_topics(None)]);
        let response = client
            .send(OFFSET_FETCH_VERSION, &request, self.timeout)
            .await
            .map_err(|e| e.to_string())?;
        let answer = response
            .groups
            .into_iter()
            .next()
            .ok_or("the source's OffsetFetch answer is empty")?;
        if answer.error_code != 0 {
            return Err(format!(
                "the source's offsets of group {group}: error code {}",
                answer.error_code
            ));
        }
        Ok(answer
            .topics
            .into_iter()
            .flat_map(|t| {
                let topic = t.name.to_string();
                t.partitions.into_iter().filter_map(move |p| {
                    (p.error_code == 0 && p.committed_offset >= 0).then(|| SourceOffset {
                        topic: topic.clone(),
                        partition: p.partition_index,
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata: p.metadata.map(|m| m.to_string()),
                    })
                })
            })
            .collect())
    }

    /// The source's current high watermarks of `partitions` (by topic
    /// name, the same on both sides): one Metadata request for their
    /// leaders, then one ListOffsets request per source leader, all at
    /// once. A partition the source does not answer for is left out.
    pub async fn high_watermarks(
        &self,
        partitions: &BTreeMap<String, Vec<i32>>,
    ) -> Result<HashMap<(String, i32), i64>, String> {
        let names: Vec<String> = partitions.keys().cloned().collect();
        let (topics, brokers) = self.topics_named(&names).await?;
        let mut by_leader: BTreeMap<i32, Vec<(String, i32)>> = BTreeMap::new();
        for (name, wanted) in partitions {
            let Some(Ok(topic)) = topics.get(name) else {
                continue;
            };
            for p in wanted {
                if let Some(&(leader, _)) = topic.partitions.get(p) {
                    by_leader
                        .entry(leader)
                        .or_default()
                        .push((name.clone(), *p));
                }
            }
        }
        let mut asking = tokio::task::JoinSet::new();
        for (leader, partitions) in by_leader {
            let Some((host, port)) = brokers.address(leader).cloned() else {
                continue;
            };
            let source = self.clone();
            asking.spawn(async move {
                let mut client = source.connect(&host, port).await?;
                list_offsets(&mut client, &partitions, LATEST_TIMESTAMP, source.timeout).await
            });
        }
        let mut found = HashMap::new();
        while let Some(answer) = asking.join_next().await {
            if let Ok(Ok(offsets)) = answer {
                found.extend(offsets);
            }
        }
        Ok(found)
    }

    /// The source's cluster id (None if it sends none), from a metadata
    /// request for no topics.
    pub async fn cluster_id(&self) -> Result<Option<String>, String> {
        let mut client = self.any_broker().await?;
        let request = MetadataRequest::default()
            .with_topics(Some(Vec::new()))
            .with_allow_auto_topic_creation(false);
        let response = client
            .send(METADATA_VERSION, &request, self.timeout)
            .await
            .map_err(|e| e.to_string())?;
        Ok(response.cluster_id.map(|id| id.to_string()))
    }

    /// Every ACL on the source, as Kafka's codes; None when the source has
    /// no authorizer (SECURITY_DISABLED), so nothing to sync.
    pub async fn acls(&self) -> Result<Option<Vec<Acl>>, String> {
        let mut client = self.any_broker().await?;
        // Null filters (kafka-protocol defaults nullable strings to "").
        let request = DescribeAclsRequest::default()
            .with_resource_type_filter(1)
            .with_resource_name_filter(None)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_pattern_type_filter(1)
            .with_operation(1)
            .with_permission_type(1);
        let response = client
            .send(DESCRIBE_ACLS_VERSION, &request, self.timeout)
            .await
            .map_err(|e| e.to_string())?;
        if response.error_code == ResponseError::SecurityDisabled.code() {
            return Ok(None);
        }
        if response.error_code != 0 {
            return Err(format!(
                "the source's DescribeAcls: error code {} {}",
                response.error_code,
                response
                    .error_message
                    .map(|m| m.to_string())
                    .unwrap_or_default()
            ));
        }
        Ok(response
            .resources
            .into_iter()
            .flat_map(|r| {
                let (resource_type, name, pattern_type) =
                    (r.resource_type, r.resource_name.to_string(), r.pattern_type);
                r.acls.into_iter().map(move |a| Acl {
                    resource_type,
                    resource_name: name.clone(),
                    pattern_type,
                    principal: a.principal.to_string(),
                    host: a.host.to_string(),
                    operation: a.operation,
                    permission: a.permission_type,
                })
            })
            .collect::<Vec<_>>()
            .into())
    }
}

/// The offsets at `timestamp` (-1: the high watermark, as a
/// read_uncommitted consumer sees it; -2: the log start) of `partitions`,
/// all led by the broker `client` talks to.
pub async fn list_offsets(
    client: &mut KafkaClient,
    partitions: &[(String, i32)],
    timestamp: i64,
    timeout: Duration,
) -> Result<Vec<((String, i32), i64)>, String> {
    let request = list_offsets_request(partitions, timestamp);
    let response = client
        .send(LIST_OFFSETS_VERSION, &request, timeout)
        .await
        .map_err(|e| e.to_string())?;
    Ok(listed_offsets(&response))
}

/// The source's brokers by id, from a metadata answer.
#[derive(Debug, Clone, Default)]
pub struct Brokers(BTreeMap<i32, (String, u16)>);

impl Brokers {
    pub fn address(&self, id: i32) -> Option<&(String, u16)> {
        self.0.get(&id)
    }
}
