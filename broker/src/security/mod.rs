//! Listener security: TLS (SSL, SASL_SSL), SASL authentication
//! (SASL_PLAINTEXT, SASL_SSL) and the principal each connection runs as.

pub mod authorizer;
mod listener;
pub mod pem;
pub mod principal;
pub mod sasl;
pub mod tls;
pub mod tls_reload;
pub mod x509_name;

pub use listener::{controller_client, inter_broker_client, ListenerSecurity};
pub use principal::KafkaPrincipal;
