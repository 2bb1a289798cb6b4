//! TLS and SASL for [`KafkaClient`](crate::KafkaClient) connections:
//! what a client configured with Kafka's `security.protocol`,
//! `ssl.truststore.*`, `ssl.keystore.*` and `sasl.*` settings does before its
//! first request. SASL is Kafka's v1 handshake (SaslHandshake, then
//! SaslAuthenticate frames) with PLAIN or SCRAM-SHA-256/512 (RFC 5802).

use std::sync::Arc;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, Mac};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use sha2::{Digest, Sha256, Sha512};
use tokio_rustls::TlsConnector;

use crate::stores;

/// How a client secures its connections.
#[derive(Clone, Default)]
pub struct ClientSecurity {
    /// TLS (SSL and SASL_SSL).
    pub tls: Option<ClientTls>,
    /// SASL (SASL_PLAINTEXT and SASL_SSL).
    pub sasl: Option<ClientSasl>,
}

impl std::fmt::Debug for ClientSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSecurity")
            .field("tls", &self.tls.is_some())
            .field("sasl", &self.sasl.as_ref().map(|s| s.mechanism))
            .finish()
    }
}

/// A TLS client configuration, built once.
#[derive(Clone)]
pub struct ClientTls {
    connector: TlsConnector,
}

impl ClientTls {
    /// From PEM text: the CA certificates to trust, and optionally a client
    /// certificate chain with its (unencrypted) private key.
    pub fn from_pem(trusted: &str, client: Option<(&str, &str)>) -> Result<Self, String> {
        let certs = stores::pem_certificates(trusted, "the truststore")?;
        let client = client
            .map(|(chain, key)| stores::pem_key_pair(chain, key))
            .transpose()?;
        Self::from_der(certs, client)
    }

    /// From decoded certificates: the CAs to trust, and optionally a client
    /// certificate chain with its private key.
    pub fn from_der(
        trusted: Vec<CertificateDer<'static>>,
        client: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    ) -> Result<Self, String> {
        if trusted.is_empty() {
            return Err("the truststore holds no certificate".into());
        }
        let mut roots = rustls::RootCertStore::empty();
        for cert in trusted {
            roots
                .add(cert)
                .map_err(|e| format!("a truststore certificate is not usable: {e}"))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots);
        let config = match client {
            None => builder.with_no_client_auth(),
            Some((chain, key)) => builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("the keystore is not usable: {e}"))?,
        };
        Ok(Self {
            connector: TlsConnector::from(Arc::new(config)),
        })
    }

    pub(crate) fn connector(&self) -> &TlsConnector {
        &self.connector
    }

    /// The name a server's certificate must carry: an IP address or a DNS
    /// name, as given in the bootstrap address.
    pub(crate) fn server_name(host: &str) -> Result<ServerName<'static>, String> {
        ServerName::try_from(host.to_string())
            .map_err(|e| format!("{host} is not a valid TLS server name: {e}"))
    }
}

/// SASL mechanisms a client can log in with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    ScramSha256,
    ScramSha512,
}

impl SaslMechanism {
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::ScramSha256 => "SCRAM-SHA-256",
            Self::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

/// A SASL login.
#[derive(Clone)]
pub struct ClientSasl {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: String,
}

impl ClientSasl {
    /// From Kafka's `sasl.jaas.config`
    /// (`... required username="alice" password="secret";`).
    pub fn from_jaas(mechanism: SaslMechanism, jaas: &str) -> Result<Self, String> {
        let option = |name: &str| -> Result<String, String> {
            let start = jaas
                .find(&format!("{name}=\""))
                .ok_or_else(|| format!("sasl.jaas.config has no {name}=\"...\""))?
                + name.len()
                + 2;
            let end = jaas[start..]
                .find('"')
                .ok_or_else(|| format!("sasl.jaas.config: the {name} value is not closed"))?;
            Ok(jaas[start..start + end].to_string())
        };
        Ok(Self {
            mechanism,
            username: option("username")?,
            password: option("password")?,
        })
    }
}

/// One SASL exchange on the client side: the tokens to send, in turn.
pub(crate) enum SaslExchange {
    Plain,
    Scram(ScramClient),
}

impl SaslExchange {
    pub(crate) fn new(sasl: &ClientSasl) -> Self {
        match sasl.mechanism {
            SaslMechanism::Plain => Self::Plain,
            SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512 => {
                Self::Scram(ScramClient::new(sasl.mechanism, random_nonce()))
            }
        }
    }

    /// The first token.
    pub(crate) fn first(&mut self, sasl: &ClientSasl) -> Vec<u8> {
        match self {
            Self::Plain => format!("\0{}\0{}", sasl.username, sasl.password).into_bytes(),
            Self::Scram(scram) => scram.client_first(&sasl.username),
        }
    }

    /// The next token for the server's `challenge`; None once done.
    pub(crate) fn next(
        &mut self,
        sasl: &ClientSasl,
        challenge: &[u8],
    ) -> Result<Option<Vec<u8>>, String> {
        match self {
            Self::Plain => Ok(None),
            Self::Scram(scram) => scram.step(&sasl.password, challenge),
        }
    }
}

fn random_nonce() -> String {
    use rand::distr::{Alphanumeric, SampleString};
    Alphanumeric.sample_string(&mut rand::rng(), 24)
}

/// The client side of SCRAM (RFC 5802), as Kafka's ScramSaslClient speaks it
/// (no channel binding, user names with `=` and `,` escaped).
pub(crate) struct ScramClient {
    mechanism: SaslMechanism,
    nonce: String,
    client_first_bare: String,
    expected_server_signature: Option<Vec<u8>>,
}

impl ScramClient {
    fn new(mechanism: SaslMechanism, nonce: String) -> Self {
        Self {
            mechanism,
            nonce,
            client_first_bare: String::new(),
            expected_server_signature: None,
        }
    }

    fn client_first(&mut self, username: &str) -> Vec<u8> {
        let user = username.replace('=', "=3D").replace(',', "=2C");
        self.client_first_bare = format!("n={user},r={}", self.nonce);
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    fn step(&mut self, password: &str, challenge: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let text = std::str::from_utf8(challenge)
            .map_err(|_| "the server's SCRAM message is not UTF-8".to_string())?;
        if let Some(expected) = &self.expected_server_signature {
            // server-final: v=signature (or e=error)
            let verifier = attribute(text, 'v').ok_or_else(|| {
                format!(
                    "SCRAM authentication failed: {}",
                    attribute(text, 'e').unwrap_or(text)
                )
            })?;
            let got = BASE64
                .decode(verifier)
                .map_err(|_| "the server signature is not base64".to_string())?;
            return if &got == expected {
                Ok(None)
            } else {
                Err("the server's SCRAM signature is wrong: not the server we trust".into())
            };
        }
        let nonce = attribute(text, 'r').ok_or("the server-first message has no nonce")?;
        if !nonce.starts_with(&self.nonce) {
            return Err("the server's SCRAM nonce does not extend ours".into());
        }
        let salt = BASE64
            .decode(attribute(text, 's').ok_or("the server-first message has no salt")?)
            .map_err(|_| "the SCRAM salt is not base64".to_string())?;
        let iterations: u32 = attribute(text, 'i')
            .and_then(|i| i.parse().ok())
            .ok_or("the server-first message has no iteration count")?;
        let salted = self.salted_password(password, &salt, iterations);
        let client_final_bare = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{client_final_bare}", self.client_first_bare);
        let client_key = self.hmac(&salted, b"Client Key");
        let stored_key = self.hash(&client_key);
        let signature = self.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = self.hmac(&salted, b"Server Key");
        self.expected_server_signature = Some(self.hmac(&server_key, auth_message.as_bytes()));
        Ok(Some(
            format!("{client_final_bare},p={}", BASE64.encode(proof)).into_bytes(),
        ))
    }

    fn salted_password(&self, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
        match self.mechanism {
            SaslMechanism::ScramSha512 => {
                pbkdf2::pbkdf2_hmac_array::<Sha512, 64>(password.as_bytes(), salt, iterations)
                    .to_vec()
            }
            _ => pbkdf2::pbkdf2_hmac_array::<Sha256, 32>(password.as_bytes(), salt, iterations)
                .to_vec(),
        }
    }

    fn hmac(&self, key: &[u8], data: &[u8]) -> Vec<u8> {
        fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
            let mut mac = <M as hmac::digest::KeyInit>::new_from_slice(key)
                .expect("HMAC accepts keys of any length");
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        match self.mechanism {
            SaslMechanism::ScramSha512 => run::<Hmac<Sha512>>(key, data),
            _ => run::<Hmac<Sha256>>(key, data),
        }
    }

    fn hash(&self, data: &[u8]) -> Vec<u8> {
        match self.mechanism {
            SaslMechanism::ScramSha512 => Sha512::digest(data).to_vec(),
            _ => Sha256::digest(data).to_vec(),
        }
    }
}

/// The value of attribute `name` in a SCRAM message (`a=value,b=...`).
fn attribute(message: &str, name: char) -> Option<&str> {
    message
        .split(',')
        .find_map(|part| part.strip_prefix(name)?.strip_prefix('='))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's SCRAM-SHA-256 example exchange.
    #[test]
    fn scram_sha_256_follows_rfc_7677() {
        let mut client = ScramClient::new(
            SaslMechanism::ScramSha256,
            "rOprNGfwEbeRWgbNEkqO".to_string(),
        );
        assert_eq!(
            client.client_first("user"),
            b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
        );
        let server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let client_final = client.step("pencil", server_first).unwrap().unwrap();
        assert_eq!(
            String::from_utf8(client_final).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        let server_final = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";
        assert_eq!(client.step("pencil", server_final), Ok(None));
        let mut wrong = ScramClient::new(SaslMechanism::ScramSha256, "rOprNGfwEbeRWgbNEkqO".into());
        wrong.client_first("user");
        wrong.step("pencil", server_first).unwrap();
        assert!(wrong.step("pencil", b"v=AAAA").is_err());
        assert!(wrong.step("pencil", b"e=invalid-proof").is_err());
    }

    #[test]
    fn jaas_options_are_read() {
        let sasl = ClientSasl::from_jaas(
            SaslMechanism::Plain,
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="s3cret";"#,
        )
        .unwrap();
        assert_eq!(
            (sasl.username.as_str(), sasl.password.as_str()),
            ("alice", "s3cret")
        );
        assert!(ClientSasl::from_jaas(SaslMechanism::Plain, "x required;").is_err());
    }
}
