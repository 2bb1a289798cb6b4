//! Kafka's text forms of protocol values, as its tools and logs print them:
//! error names (`Errors.name()`, Ottla's mirror codes included) and UUIDs
//! (topic ids: URL-safe base64 without padding).

use base64::Engine;
use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use crate::mirror::errors as mirror_errors;

/// Kafka's name for an error code, e.g. `NOT_LEADER_OR_FOLLOWER`; `NONE` for
/// 0, the mirror codes' own names (`UNKNOWN_MIRROR`), `UNKNOWN_<code>` for a
/// code nobody knows.
pub fn error_name(code: i16) -> String {
    if let Some(mirror) = mirror_errors::by_code(code) {
        return mirror.name.to_string();
    }
    let Some(error) = ResponseError::try_from_code(code) else {
        return "NONE".to_string();
    };
    if let ResponseError::Unknown(code) = error {
        return format!("UNKNOWN_{code}");
    }
    // The variants are Kafka's names in CamelCase.
    let camel = format!("{error:?}");
    let mut name = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            name.push('_');
        }
        name.push(c.to_ascii_uppercase());
    }
    name
}

/// Kafka's text form of a UUID (`Uuid.toString()`): URL-safe base64 of its
/// 16 bytes, without padding.
pub fn uuid_text(id: &Uuid) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.as_bytes())
}

/// The UUID of Kafka's text form, if `text` is one.
pub fn uuid_from_text(text: &str) -> Option<Uuid> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .ok()?;
    Uuid::from_slice(&bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_kafka() {
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(0), "NONE");
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(6), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(error_name(35), "UNSUPPORTED_VERSION");
        assert_eq!(error_name(137), "UNKNOWN_MIRROR");
        assert_eq!(error_name(135), "UNKNOWN_135");
        assert_eq!(error_name(999), "UNKNOWN_999");
    }

    #[test]
    fn uuids_are_base64url() {
        assert_eq!(uuid_text(&Uuid::nil()), "AAAAAAAAAAAAAAAAAAAAAA");
        let id = Uuid::new_v4();
        assert_eq!(uuid_from_text(&uuid_text(&id)), Some(id));
        assert_eq!(uuid_from_text("not a uuid"), None);
        let id = Uuid::from_u128(0xf724_14c1_0f21_4f84_acdc_fb79_9269_2b13);
        assert_eq!(uuid_text(&id), "9yQUwQ8hT4Ss3Pt5kmkrEw");
    }
}
