//! SaslHandshake and SaslAuthenticate outside a SASL exchange: on
//! PLAINTEXT and SSL listeners, or SaslAuthenticate on an authenticated
//! connection. SASL listeners answer the exchange itself in the network
//! layer; what reaches here is answered ILLEGAL_SASL_STATE, as Kafka's
//! KafkaApis does.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslAuthenticateResponse, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;

pub fn handshake() -> SaslHandshakeResponse {
    SaslHandshakeResponse::default().with_error_code(ResponseError::IllegalSaslState.code())
}

pub fn authenticate() -> SaslAuthenticateResponse {
    SaslAuthenticateResponse::default()
        .with_error_code(ResponseError::IllegalSaslState.code())
        .with_error_message(Some(StrBytes::from_static_str(
            "SaslAuthenticate request received after successful authentication",
        )))
}
