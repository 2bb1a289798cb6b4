//! UpdateFeatures: finalizes feature levels (`kafka-features.sh upgrade`).
//! metadata.version may move up within what every node supports; it never
//! moves down (Kafka refuses unsafe metadata downgrades, and Ottla has no
//! safe one yet).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::{ControllerError, MetadataImage};

use crate::broker::Broker;
use crate::features::{finalized_levels, supported_range};

pub fn handle(broker: &Broker, version: i16, req: UpdateFeaturesRequest) -> UpdateFeaturesResponse {
    let image = broker.controller.image();
    let validate_only = version >= 1 && req.validate_only;
    let checked: Vec<(String, Result<i16, ControllerError>)> = req
        .feature_updates
        .iter()
        .map(|u| {
            let feature = u.feature.to_string();
            let level = check(&image, &feature, u.max_version_level);
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
        broker.controller.set_feature_levels(valid)
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
fn check(image: &MetadataImage, feature: &str, level: i16) -> Result<i16, ControllerError> {
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
    let current = finalized_levels(image)
        .into_iter()
        .find(|(f, _)| f == feature)
        .map_or(0, |(_, l)| l);
    if level < current {
        return invalid(format!(
            "Downgrading {feature} from {current} to {level} is not supported."
        ));
    }
    Ok(level)
}
