//! UpdateFeatures: finalizes feature levels (`kafka-features.sh upgrade`,
//! `downgrade`). A level must be one every node supports. metadata.version
//! never moves down (Kafka refuses unsafe metadata downgrades, and Ottla
//! has no safe one yet); other features move down when the request says it
//! is a downgrade, as in Kafka. A request is applied whole or not at all.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::{ControllerError, MetadataImage};

use crate::broker::Broker;
use ottla_controller::features::{self, supported_range, METADATA_VERSION};

pub fn handle(broker: &Broker, version: i16, req: UpdateFeaturesRequest) -> UpdateFeaturesResponse {
    let image = broker.controller.image();
    let validate_only = version >= 1 && req.validate_only;
    let checked: Result<Vec<(String, i16)>, ControllerError> = req
        .feature_updates
        .iter()
        .map(|u| {
            let feature = u.feature.to_string();
            // v0 has a flag, v1+ an upgrade type (1 upgrade, 2 safe and 3
            // unsafe downgrade).
            let downgrade = if version >= 1 {
                u.upgrade_type >= 2
            } else {
                u.allow_downgrade
            };
            let level = check(&image, &feature, u.max_version_level, downgrade)?;
            Ok((feature, level))
        })
        .collect();
    // As Kafka's controller: all or nothing, the first refusal failing the
    // whole request.
    let committed = checked.and_then(|levels| {
        if validate_only || levels.is_empty() {
            Ok(())
        } else {
            broker
                .controller
                .block_on(broker.controller.set_feature_levels(levels))
        }
    });
    answer(&req, committed)
}

/// Kafka's answer: a top-level error and no results when the request
/// failed; otherwise a success per feature (v0-1; v2 has no results).
fn answer(
    req: &UpdateFeaturesRequest,
    outcome: Result<(), ControllerError>,
) -> UpdateFeaturesResponse {
    match outcome {
        Err(e) => UpdateFeaturesResponse::default()
            .with_error_code(e.code)
            .with_error_message(Some(StrBytes::from_string(e.message))),
        Ok(()) => UpdateFeaturesResponse::default().with_results(
            req.feature_updates
                .iter()
                .map(|u| UpdatableFeatureResult::default().with_feature(u.feature.clone()))
                .collect(),
        ),
    }
}

/// The level to finalize for `feature`, or why not.
fn check(
    image: &MetadataImage,
    feature: &str,
    level: i16,
    downgrade: bool,
) -> Result<i16, ControllerError> {
    let invalid = |m: String| Err(ControllerError::new(ResponseError::InvalidUpdateVersion, m));
    let Some((min, max)) = supported_range(feature) else {
        return invalid(format!(
            "The controller does not support the given feature {feature}."
        ));
    };
    if !(min..=max).contains(&level) {
        return invalid(format!(
            "Invalid update version {level} for feature {feature}. The controller supports versions {min}-{max}."
        ));
    }
    let current = features::level(image, feature);
    if level < current && feature == METADATA_VERSION {
        return invalid(format!(
            "Downgrading {feature} from {current} to {level} is not supported."
        ));
    }
    if level < current && !downgrade {
        return invalid(format!(
            "Can't downgrade the version of {feature} from {current} to {level} without setting the upgrade type to either safe or unsafe downgrade."
        ));
    }
    Ok(level)
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::update_features_request::FeatureUpdateKey;

    use super::*;
    use crate::apis::test_support::{off_runtime, test_broker};
    use ottla_controller::features::GROUP_VERSION;

    fn update(feature: &'static str, level: i16) -> FeatureUpdateKey {
        FeatureUpdateKey::default()
            .with_feature(StrBytes::from_static_str(feature))
            .with_max_version_level(level)
            .with_upgrade_type(2)
    }

    #[test]
    fn a_request_is_applied_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        let group_level = || features::level(&broker.controller.image(), GROUP_VERSION);
        assert_eq!(group_level(), 1);
        let send = |version: i16, updates: Vec<FeatureUpdateKey>| {
            let req = UpdateFeaturesRequest::default().with_feature_updates(updates);
            off_runtime(|| handle(&broker, version, req))
        };

        let refused = send(
            2,
            vec![update(GROUP_VERSION, 0), update(METADATA_VERSION, 0)],
        );
        assert_eq!(
            refused.error_code,
            ResponseError::InvalidUpdateVersion.code()
        );
        assert!(refused.error_message.is_some());
        assert!(refused.results.is_empty());
        assert_eq!(group_level(), 1, "nothing applied");

        let applied = send(1, vec![update(GROUP_VERSION, 0)]);
        assert_eq!(applied.error_code, 0);
        assert_eq!(applied.results.len(), 1);
        assert_eq!(applied.results[0].error_code, 0);
        assert_eq!(group_level(), 0);
    }
}
