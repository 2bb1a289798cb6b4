//! The API versions a listener advertises, built from what it actually serves.
//!
//! Handlers register each API key they answer with a version range; the table
//! then drives both the ApiVersions answer and the gate in front of the
//! decoder, so Ottla never advertises an API it does not answer nor decodes a
//! version it did not advertise.
//!
//! Ranges are capped by [`servable_range`]: kafka-protocol 0.18 is generated
//! from the Kafka 4.1 schemas with the KIP-896 floors applied (Produce 3–13,
//! Fetch 4–18, ListOffsets 1–10, ...), so it is exactly "what Kafka 4.x serves
//! that this crate can decode and encode", plus the ShareFetch and
//! ShareAcknowledge v2 that [`crate::share_v2`] adds.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;
pub use kafka_protocol::protocol::VersionRange;
use thiserror::Error;

use crate::own_api::OwnApiKey;
pub use crate::share_v2::servable_range;

/// Kafka 4.x advertises Produce from v0 although it rejects v0–2: librdkafka
/// silently disables compression against a broker whose Produce minimum is 3
/// (KAFKA-18659, librdkafka #4956). Receipt of v0–2 still closes the
/// connection, as in Kafka: no response can be encoded at those versions.
const PRODUCE_ADVERTISED_MIN: i16 = 0;

#[derive(Debug, Error, PartialEq)]
pub enum ApiTableError {
    #[error("{key:?} versions {range} are outside what Ottla can decode ({servable})")]
    OutOfRange {
        key: ApiKey,
        range: VersionRange,
        servable: VersionRange,
    },
    #[error("{0:?} is registered twice")]
    Duplicate(ApiKey),
    #[error("ApiVersions is answered by the network layer and cannot be registered")]
    ApiVersionsReserved,
}

/// A feature's supported range (`SupportedFeatures` in ApiVersions v3+).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupportedFeature {
    pub name: String,
    pub min_version: i16,
    pub max_version: i16,
}

/// Feature flags carried by ApiVersions v3+ (KIP-584): what this node
/// supports, and the cluster-wide finalized levels with the metadata epoch
/// they were finalized at (-1 when unknown, which omits the field). The
/// finalized part is shared and follows the metadata as it changes.
#[derive(Debug, Clone, Default)]
pub struct Features {
    pub supported: Vec<SupportedFeature>,
    pub finalized: Arc<FinalizedFeatures>,
}

impl Features {
    pub fn support(mut self, name: &str, min_version: i16, max_version: i16) -> Self {
        self.supported.push(SupportedFeature {
            name: name.to_owned(),
            min_version,
            max_version,
        });
        self
    }

    /// Answers with `finalized` (shared with whoever updates it).
    pub fn finalized_by(mut self, finalized: Arc<FinalizedFeatures>) -> Self {
        self.finalized = finalized;
        self
    }
}

/// The cluster's finalized feature levels and their epoch.
#[derive(Debug)]
pub struct FinalizedFeatures(RwLock<(Vec<(String, i16)>, i64)>);

impl Default for FinalizedFeatures {
    fn default() -> Self {
        Self(RwLock::new((Vec::new(), -1)))
    }
}

impl FinalizedFeatures {
    pub fn set(&self, levels: Vec<(String, i16)>, epoch: i64) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = (levels, epoch);
    }

    pub fn get(&self) -> (Vec<(String, i16)>, i64) {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// What one listener serves. ApiVersions (0–4) is always present.
#[derive(Debug, Clone)]
pub struct ApiVersionsTable {
    apis: BTreeMap<i16, (ApiKey, VersionRange)>,
    /// The APIs of Ottla's own codec (keys kafka-protocol does not know).
    own_apis: BTreeMap<i16, VersionRange>,
    features: Features,
}

impl ApiVersionsTable {
    pub fn new(features: Features) -> Self {
        let apis = BTreeMap::from([(
            ApiKey::ApiVersions as i16,
            (ApiKey::ApiVersions, servable_range(ApiKey::ApiVersions)),
        )]);
        Self {
            apis,
            own_apis: BTreeMap::new(),
            features,
        }
    }

    /// Declares that the own-codec API `key` is answered at all its versions.
    pub fn add_own(&mut self, key: OwnApiKey) {
        let versions = key.versions();
        self.own_apis.insert(
            key.as_i16(),
            VersionRange {
                min: *versions.start(),
                max: *versions.end(),
            },
        );
    }

    /// Whether an own-codec request at this key and version may be decoded.
    pub fn accepts_own(&self, key: OwnApiKey, version: i16) -> bool {
        self.own_apis
            .get(&key.as_i16())
            .is_some_and(|r| (r.min..=r.max).contains(&version))
    }

    /// Declares that `key` is answered at `range`.
    pub fn add(&mut self, key: ApiKey, range: VersionRange) -> Result<(), ApiTableError> {
        if key == ApiKey::ApiVersions {
            return Err(ApiTableError::ApiVersionsReserved);
        }
        let servable = servable_range(key);
        if range.is_empty() || range.intersect(&servable) != range {
            return Err(ApiTableError::OutOfRange {
                key,
                range,
                servable,
            });
        }
        if self.apis.contains_key(&(key as i16)) {
            return Err(ApiTableError::Duplicate(key));
        }
        self.apis.insert(key as i16, (key, range));
        Ok(())
    }

    /// The range actually accepted (Produce starts at 3 here, not 0).
    pub fn range(&self, key: ApiKey) -> Option<VersionRange> {
        self.apis.get(&(key as i16)).map(|&(_, range)| range)
    }

    /// Whether a request at this key and version may be decoded.
    pub fn accepts(&self, key: ApiKey, version: i16) -> bool {
        self.range(key)
            .is_some_and(|r| (r.min..=r.max).contains(&version))
    }

    pub fn api_keys(&self) -> impl Iterator<Item = ApiKey> + '_ {
        self.apis.values().map(|&(key, _)| key)
    }

    /// The answer to an ApiVersions request at a supported `version`.
    pub fn response(&self, request: &ApiVersionsRequest, version: i16) -> ApiVersionsResponse {
        if version >= 3
            && !(is_valid_software_token(&request.client_software_name)
                && is_valid_software_token(&request.client_software_version))
        {
            return ApiVersionsResponse::default()
                .with_error_code(ResponseError::InvalidRequest.code());
        }
        let mut response = ApiVersionsResponse::default().with_api_keys(self.advertised());
        if version >= 3 {
            let (levels, epoch) = self.features.finalized.get();
            response = response
                .with_supported_features(self.supported_features(version))
                .with_finalized_features(finalized_features(levels))
                .with_finalized_features_epoch(epoch);
        }
        response
    }

    /// The KIP-511 answer to an ApiVersions request at a version we do not
    /// know, to be encoded at v0: UNSUPPORTED_VERSION plus our ApiVersions
    /// range, from which the client picks its retry version. Like Kafka, only
    /// the ApiVersions entry is listed.
    pub fn unsupported_version_response(&self) -> ApiVersionsResponse {
        let range = servable_range(ApiKey::ApiVersions);
        ApiVersionsResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code())
            .with_api_keys(vec![ApiVersion::default()
                .with_api_key(ApiKey::ApiVersions as i16)
                .with_min_version(range.min)
                .with_max_version(range.max)])
    }

    /// Kafka's APIs and the own-codec ones, in key order.
    fn advertised(&self) -> Vec<ApiVersion> {
        let mut advertised: Vec<ApiVersion> = self
            .apis
            .values()
            .map(|&(key, range)| {
                let min = if key == ApiKey::Produce {
                    PRODUCE_ADVERTISED_MIN
                } else {
                    range.min
                };
                ApiVersion::default()
                    .with_api_key(key as i16)
                    .with_min_version(min)
                    .with_max_version(range.max)
            })
            .chain(self.own_apis.iter().map(|(&key, range)| {
                ApiVersion::default()
                    .with_api_key(key)
                    .with_min_version(range.min)
                    .with_max_version(range.max)
            }))
            .collect();
        advertised.sort_by_key(|v| v.api_key);
        advertised
    }

    /// Before v4, features whose minimum level is 0 are left out, as Kafka
    /// does: older clients fail to read such a range (KAFKA-17492).
    fn supported_features(&self, version: i16) -> Vec<SupportedFeatureKey> {
        self.features
            .supported
            .iter()
            .filter(|f| version >= 4 || f.min_version > 0)
            .map(|f| {
                SupportedFeatureKey::default()
                    .with_name(StrBytes::from_string(f.name.clone()))
                    .with_min_version(f.min_version)
                    .with_max_version(f.max_version)
            })
            .collect()
    }
}

/// Kafka's rule for ClientSoftwareName/Version (v3+):
/// `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`.
fn is_valid_software_token(s: &str) -> bool {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'.')
        }
        _ => false,
    }
}

/// KIP-778 retired the finalized minimum; Kafka reports it equal to the level.
fn finalized_features(levels: Vec<(String, i16)>) -> Vec<FinalizedFeatureKey> {
    levels
        .into_iter()
        .map(|(name, level)| {
            FinalizedFeatureKey::default()
                .with_name(StrBytes::from_string(name))
                .with_min_version_level(level)
                .with_max_version_level(level)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mirror::MirrorApiKey;
    use crate::streams::StreamsApiKey;

    fn range(min: i16, max: i16) -> VersionRange {
        VersionRange { min, max }
    }

    fn table() -> ApiVersionsTable {
        let finalized = Arc::new(FinalizedFeatures::default());
        finalized.set(vec![("metadata.version".to_string(), 27)], 5);
        let mut t = ApiVersionsTable::new(
            Features::default()
                .support("metadata.version", 7, 27)
                .support("group.version", 0, 1)
                .finalized_by(finalized),
        );
        t.add(ApiKey::Produce, range(3, 11)).unwrap();
        t.add(ApiKey::Metadata, range(0, 12)).unwrap();
        t
    }

    fn request(name: &'static str, version: &'static str) -> ApiVersionsRequest {
        ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str(name))
            .with_client_software_version(StrBytes::from_static_str(version))
    }

    #[test]
    fn produce_is_advertised_from_zero_but_accepted_from_three() {
        let t = table();
        let resp = t.response(&request("x", "1"), 3);
        let produce = resp.api_keys.iter().find(|k| k.api_key == 0).unwrap();
        assert_eq!((produce.min_version, produce.max_version), (0, 11));
        assert!(!t.accepts(ApiKey::Produce, 2));
        assert!(t.accepts(ApiKey::Produce, 3));
        assert!(!t.accepts(ApiKey::Produce, 12));
        assert!(!t.accepts(ApiKey::Fetch, 12));
    }

    #[test]
    fn only_registered_apis_are_advertised_in_key_order() {
        let resp = table().response(&request("x", "1"), 0);
        let keys: Vec<i16> = resp.api_keys.iter().map(|k| k.api_key).collect();
        assert_eq!(keys, vec![0, 3, 18]);
        assert!(resp.supported_features.is_empty(), "features are v3+ only");
    }

    #[test]
    fn v3_carries_features() {
        let resp = table().response(&request("x", "1"), 3);
        // A range starting at 0 only from v4 (KAFKA-17492).
        assert_eq!(resp.supported_features.len(), 1);
        assert_eq!(resp.supported_features[0].name.as_str(), "metadata.version");
        let v4 = table().response(&request("x", "1"), 4);
        let names: Vec<&str> = v4
            .supported_features
            .iter()
            .map(|f| f.name.as_str())
            .collect();
        assert_eq!(names, ["metadata.version", "group.version"]);
        assert_eq!(resp.finalized_features[0].max_version_level, 27);
        assert_eq!(resp.finalized_features[0].min_version_level, 27);
        assert_eq!(resp.finalized_features_epoch, 5);
    }

    #[test]
    fn invalid_software_names_get_invalid_request_from_v3() {
        let t = table();
        for (name, version) in [("", "1"), ("-x", "1"), ("x", "1."), ("a b", "1")] {
            let resp = t.response(&request(name, version), 3);
            assert_eq!(resp.error_code, ResponseError::InvalidRequest.code());
            assert_eq!(t.response(&request(name, version), 2).error_code, 0);
        }
        assert_eq!(
            t.response(&request("apache-kafka-java", "4.1.0"), 4)
                .error_code,
            0
        );
    }

    #[test]
    fn kip_511_answer_lists_api_versions_only() {
        let resp = table().unsupported_version_response();
        assert_eq!(resp.error_code, ResponseError::UnsupportedVersion.code());
        assert_eq!(resp.api_keys.len(), 1);
        assert_eq!(resp.api_keys[0].api_key, 18);
        assert_eq!(resp.api_keys[0].max_version, 4);
    }

    #[test]
    fn registrations_are_checked() {
        let mut t = table();
        assert_eq!(
            t.add(ApiKey::Fetch, range(3, 18)),
            Err(ApiTableError::OutOfRange {
                key: ApiKey::Fetch,
                range: range(3, 18),
                servable: range(4, 18)
            })
        );
        assert!(t.add(ApiKey::Fetch, range(5, 4)).is_err());
        assert_eq!(
            t.add(ApiKey::Metadata, range(1, 2)),
            Err(ApiTableError::Duplicate(ApiKey::Metadata))
        );
        assert_eq!(
            t.add(ApiKey::ApiVersions, range(0, 4)),
            Err(ApiTableError::ApiVersionsReserved)
        );
    }

    #[test]
    fn own_apis_are_advertised_in_key_order_with_kafkas() {
        let mut t = table();
        let create = OwnApiKey::Mirror(MirrorApiKey::CreateMirror);
        assert!(!t.accepts_own(create, 0));
        for key in MirrorApiKey::ALL {
            t.add_own(OwnApiKey::Mirror(key));
        }
        t.add_own(OwnApiKey::Streams(StreamsApiKey::StreamsGroupHeartbeat));
        t.add(ApiKey::DescribeTopicPartitions, range(0, 0)).unwrap();
        assert!(t.accepts_own(create, 0));
        assert!(!t.accepts_own(create, 1));
        let resp = t.response(&ApiVersionsRequest::default(), 2);
        let keys: Vec<i16> = resp.api_keys.iter().map(|k| k.api_key).collect();
        assert_eq!(
            keys.iter().filter(|&&k| (95..=106).contains(&k)).count(),
            12
        );
        assert!(keys.contains(&88) && keys.contains(&75), "{keys:?}");
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "sorted: {keys:?}");
    }
}
