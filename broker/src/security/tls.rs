//! TLS for SSL and SASL_SSL listeners: a rustls server configuration from
//! Kafka's `ssl.*` settings (PEM or PKCS12 key stores and trust stores),
//! and the principal of a client certificate.

use std::sync::Arc;

use ottla_client::stores::{self, KeyPair, StoreType};
use ottla_client::ClientTls;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};
use tokio_rustls::TlsAcceptor;

use super::pem::{self, PemBlock};
use super::principal::KafkaPrincipal;
use super::x509_name::subject_dn;

/// `ssl.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

impl ClientAuth {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "none" => Some(Self::None),
            "requested" => Some(Self::Requested),
            "required" => Some(Self::Required),
            _ => None,
        }
    }
}

/// One listener's `ssl.*` settings (listener overrides already applied).
#[derive(Debug, Clone, PartialEq)]
pub struct TlsSettings {
    pub keystore_type: String,
    pub keystore_location: Option<String>,
    pub keystore_certificate_chain: Option<String>,
    pub keystore_key: Option<String>,
    /// Opens a PKCS12 key store.
    pub keystore_password: Option<String>,
    pub truststore_type: String,
    pub truststore_location: Option<String>,
    pub truststore_certificates: Option<String>,
    /// Opens a PKCS12 trust store.
    pub truststore_password: Option<String>,
    pub client_auth: ClientAuth,
    pub enabled_protocols: Vec<String>,
}

/// The acceptor for a listener; the error names the keys to fix.
pub fn acceptor(settings: &TlsSettings) -> Result<TlsAcceptor, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let (chain, key) = key_store(settings)?;
    let versions = protocol_versions(&settings.enabled_protocols)?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("ssl.enabled.protocols: {e}"))?;
    let builder = match settings.client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        auth => builder.with_client_cert_verifier(client_verifier(settings, auth, provider)?),
    };
    let config = builder.with_single_cert(chain, key).map_err(|e| {
        format!("ssl.keystore: the private key does not match the certificate or is unusable: {e}")
    })?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The principal of a verified client certificate chain: `User:<subject DN>`,
/// or ANONYMOUS without a certificate (as Kafka's default principal builder).
pub fn peer_principal(certs: Option<&[CertificateDer<'_>]>) -> KafkaPrincipal {
    certs
        .and_then(<[_]>::first)
        .and_then(|cert| subject_dn(cert))
        .map_or_else(KafkaPrincipal::anonymous, KafkaPrincipal::user)
}

fn require_pem(key: &str, ty: &str) -> Result<(), String> {
    match StoreType::parse(key, ty)? {
        StoreType::Pem => Ok(()),
        StoreType::Pkcs12 => Err(format!(
            "{key}={ty} needs a store file: inline certificates and keys are PEM; set {key}=PEM"
        )),
    }
}

/// The bytes of a PKCS12 store and its password; `location_key` and
/// `password_key` name the settings.
fn read_pkcs12<'a>(
    location_key: &str,
    path: &str,
    password_key: &str,
    password: Option<&'a str>,
) -> Result<(Vec<u8>, &'a str), String> {
    let password = password
        .ok_or_else(|| format!("{location_key} ({path}) is a PKCS12 store: set {password_key}"))?;
    let bytes =
        std::fs::read(path).map_err(|e| format!("{location_key}: cannot read {path}: {e}"))?;
    Ok((bytes, password))
}

/// Certificate chain and private key from `ssl.keystore.location` (a PKCS12
/// store, or one PEM file with both) or the inline
/// `ssl.keystore.certificate.chain` and `ssl.keystore.key`.
fn key_store(s: &TlsSettings) -> Result<KeyPair, String> {
    let (source, blocks) = match (
        &s.keystore_location,
        &s.keystore_certificate_chain,
        &s.keystore_key,
    ) {
        (Some(path), None, None) => {
            let source = format!("ssl.keystore.location ({path})");
            if StoreType::parse("ssl.keystore.type", &s.keystore_type)? == StoreType::Pkcs12 {
                let password = s.keystore_password.as_deref();
                let (bytes, password) = read_pkcs12(
                    "ssl.keystore.location",
                    path,
                    "ssl.keystore.password",
                    password,
                )?;
                return stores::pkcs12_key_store(&bytes, password, &source);
            }
            (source, read_pem_file("ssl.keystore.location", path)?)
        }
        (None, Some(chain), Some(key)) => {
            require_pem("ssl.keystore.type", &s.keystore_type)?;
            let mut blocks = parse_pem("ssl.keystore.certificate.chain", chain)?;
            blocks.extend(parse_pem("ssl.keystore.key", key)?);
            (
                "ssl.keystore.certificate.chain and ssl.keystore.key".to_string(),
                blocks,
            )
        }
        (None, None, None) => {
            return Err(
                "an SSL listener needs a server certificate: set ssl.keystore.location (a \
                 PKCS12 store with ssl.keystore.password, or with ssl.keystore.type=PEM a PEM \
                 file with the private key and certificate chain), or \
                 ssl.keystore.certificate.chain and ssl.keystore.key"
                    .into(),
            )
        }
        _ => {
            return Err(
                "set either ssl.keystore.location, or both ssl.keystore.certificate.chain \
                 and ssl.keystore.key"
                    .into(),
            )
        }
    };
    let mut chain = Vec::new();
    let mut keys = Vec::new();
    for block in blocks {
        match block.label.as_str() {
            "CERTIFICATE" => chain.push(CertificateDer::from(block.der)),
            "PRIVATE KEY" => keys.push(PrivateKeyDer::Pkcs8(block.der.into())),
            "RSA PRIVATE KEY" => keys.push(PrivateKeyDer::Pkcs1(block.der.into())),
            "EC PRIVATE KEY" => keys.push(PrivateKeyDer::Sec1(block.der.into())),
            "ENCRYPTED PRIVATE KEY" => {
                return Err(format!(
                    "{source}: the private key is encrypted, which Ottla does not support: \
                     decrypt it (openssl pkcs8 -topk8 -nocrypt -in key.pem) and keep the \
                     file readable by the broker only"
                ))
            }
            _ => {}
        }
    }
    if chain.is_empty() {
        return Err(format!("{source}: no CERTIFICATE block"));
    }
    match keys.len() {
        1 => Ok((chain, keys.remove(0))),
        0 => Err(format!("{source}: no PRIVATE KEY block")),
        n => Err(format!("{source}: {n} private keys; keep exactly one")),
    }
}

fn client_verifier(
    s: &TlsSettings,
    auth: ClientAuth,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, String> {
    let certificates = trusted_certificates(
        s,
        "ssl.client.auth=required or requested needs the CA certificates that sign client \
         certificates",
    )?;
    let mut roots = RootCertStore::empty();
    for certificate in certificates {
        roots
            .add(certificate)
            .map_err(|e| format!("the truststore has an unusable CA certificate: {e}"))?;
    }
    let builder = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
    let builder = match auth {
        ClientAuth::Requested => builder.allow_unauthenticated(),
        _ => builder,
    };
    builder
        .build()
        .map_err(|e| format!("cannot verify client certificates: {e}"))
}

/// The CA certificates of `ssl.truststore.location` or
/// `ssl.truststore.certificates`; `why` says what needs them when neither
/// is set.
fn trusted_certificates(
    s: &TlsSettings,
    why: &str,
) -> Result<Vec<CertificateDer<'static>>, String> {
    let pkcs12 = StoreType::parse("ssl.truststore.type", &s.truststore_type)? == StoreType::Pkcs12;
    let blocks = match (&s.truststore_location, &s.truststore_certificates) {
        (Some(path), None) if pkcs12 => {
            let password = s.truststore_password.as_deref();
            let (bytes, password) = read_pkcs12(
                "ssl.truststore.location",
                path,
                "ssl.truststore.password",
                password,
            )?;
            let source = format!("ssl.truststore.location ({path})");
            return stores::pkcs12_trust_store(&bytes, password, &source);
        }
        (Some(path), None) => read_pem_file("ssl.truststore.location", path)?,
        (None, Some(certs)) => {
            require_pem("ssl.truststore.type", &s.truststore_type)?;
            parse_pem("ssl.truststore.certificates", certs)?
        }
        (None, None) => {
            return Err(format!(
                "{why}: set ssl.truststore.location (a PKCS12 store with \
                 ssl.truststore.password, or a PEM file with ssl.truststore.type=PEM) or \
                 ssl.truststore.certificates"
            ))
        }
        (Some(_), Some(_)) => {
            return Err(
                "set either ssl.truststore.location or ssl.truststore.certificates, not both"
                    .into(),
            )
        }
    };
    let certificates: Vec<_> = blocks
        .into_iter()
        .filter(|b| b.label == "CERTIFICATE")
        .map(|b| CertificateDer::from(b.der))
        .collect();
    if certificates.is_empty() {
        return Err("the truststore has no CERTIFICATE block".into());
    }
    Ok(certificates)
}

/// How this broker connects to another broker's TLS listener: trusting the
/// listener's trust store, and presenting its own key store (as Kafka does)
/// so `ssl.client.auth=required` holds between brokers too.
pub fn client(s: &TlsSettings) -> Result<ClientTls, String> {
    let trusted = trusted_certificates(s, "connecting to other brokers over TLS needs the CA certificates that sign their certificates")?;
    let own = key_store(s)?;
    ClientTls::from_der(trusted, Some(own))
}

fn protocol_versions(names: &[String]) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    let mut versions = Vec::new();
    for name in names.iter().filter(|n| !n.is_empty()) {
        match name.as_str() {
            "TLSv1.3" => versions.push(&rustls::version::TLS13),
            "TLSv1.2" => versions.push(&rustls::version::TLS12),
            other => {
                return Err(format!(
                    "ssl.enabled.protocols: {other} is not supported; use TLSv1.2 and/or TLSv1.3"
                ))
            }
        }
    }
    if versions.is_empty() {
        return Err("ssl.enabled.protocols must name TLSv1.2 and/or TLSv1.3".into());
    }
    Ok(versions)
}

fn read_pem_file(key: &str, path: &str) -> Result<Vec<PemBlock>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("{key}: cannot read {path}: {e}"))?;
    parse_pem(&format!("{key} ({path})"), &text)
}

fn parse_pem(what: &str, text: &str) -> Result<Vec<PemBlock>, String> {
    pem::parse(text).map_err(|e| format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> TlsSettings {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        let cert = params.self_signed(&key).unwrap();
        TlsSettings {
            keystore_type: "PEM".into(),
            keystore_location: None,
            // Inline PEM may arrive on one line, as in a properties file.
            keystore_certificate_chain: Some(cert.pem().replace('\n', " ")),
            keystore_key: Some(key.serialize_pem()),
            keystore_password: None,
            truststore_type: "PEM".into(),
            truststore_location: None,
            truststore_certificates: Some(cert.pem()),
            truststore_password: None,
            client_auth: ClientAuth::Required,
            enabled_protocols: vec!["TLSv1.3".into()],
        }
    }

    fn error(s: &TlsSettings) -> String {
        acceptor(s).err().expect("an error")
    }

    #[test]
    fn inline_pem_stores_build_an_acceptor() {
        assert!(acceptor(&settings()).is_ok());
    }

    #[test]
    fn store_problems_name_the_key_to_fix() {
        let mut s = settings();
        s.keystore_type = "JKS".into();
        assert!(error(&s).starts_with("ssl.keystore.type=JKS needs a store file"));
        s.keystore_type = "BCFKS".into();
        assert!(error(&s).starts_with("ssl.keystore.type=BCFKS is not supported"));

        let mut s = settings();
        s.keystore_key = Some(
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAQID\n-----END ENCRYPTED PRIVATE KEY-----"
                .into(),
        );
        assert!(error(&s).contains("the private key is encrypted"));

        let mut s = settings();
        s.keystore_location = Some("/no/such/file.pem".into());
        assert!(error(&s).starts_with("set either ssl.keystore.location"));

        let mut s = settings();
        s.truststore_certificates = None;
        assert!(error(&s).contains("set ssl.truststore.location"));
        s.client_auth = ClientAuth::None;
        assert!(
            acceptor(&s).is_ok(),
            "no trust store is needed without client auth"
        );

        let mut s = settings();
        s.enabled_protocols = vec!["TLSv1.1".into()];
        assert!(error(&s).contains("TLSv1.1 is not supported"));

        let mut s = settings();
        s.keystore_key = Some(rcgen::KeyPair::generate().unwrap().serialize_pem());
        assert!(error(&s).contains("does not match the certificate"));
    }
}
