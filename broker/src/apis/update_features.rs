//! UpdateFeatures: finalizes feature levels (`kafka-features.sh upgrade`,
//! `downgrade`). A level must be one every node supports. metadata.version
//! never moves down (Kafka refuses unsafe metadata downgrades, and Ottla
//! has no safe one yet); other features move down when the request says it
//! is a downgrade, as in Kafka.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::{ControllerError, MetadataImage};

use crate::broker::Broker;
use crate::features::{self, supported_range, METADATA_VERSION};

pub fn handle(broker: &Broker, version: i16, req: UpdateFeaturesRequest) -> UpdateFeaturesResponse {
    let image = broker.controller.image();
    let validate_only = version >= 1 && req.validate_only;
    let checked: Vec<(String, Result<i16, ControllerError>)> = req
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
            let level = check(&image, &feature, u.max_version_level, downgrade);
            (feature, level)
        })
        .collect();
    let valid: Vec<(String, i16)> = checked
        .iter()
        .filter_map(|(f, r)| r.as_ref().ok().map(|l| (f.clone(), *l)))
        .collect();
    let committed = if validate_only || valid.is_empty() {
        Ok(())
    } else {
        broker
            .controller
            .block_on(broker.controller.set_feature_levels(valid))
    };
    let results = checked
        .into_iter()
        .map(|(feature, r)| {
            let outcome = r.and_then(|_| committed.clone());
            let (code, message) = match outcome {
                Ok(()) => (0, None),
                Err(e) => (e.code, Some(StrBytes::from_string(e.message))),
            };
            UpdatableFeatureResult::default()
                .with_feature(StrBytes::from_string(feature))
                .with_error_code(code)
                .with_error_message(message)
        })
        .collect();
    UpdateFeaturesResponse::default().with_results(results)
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
