//! Kafka's key and trust stores: PEM text, and PKCS12, which keytool has
//! written by default since Java 9, also into files typed JKS (Java reads
//! a PKCS12 file as a JKS store too). Stores in Java's older JKS and JCEKS
//! formats are refused with the keytool command that converts them.

use p12_keystore::error::Error;
use p12_keystore::{KeyStore, KeyStoreEntry, Pkcs12Archive, Pkcs12ImportPolicy};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// How a store is encoded (`ssl.keystore.type`, `ssl.truststore.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreType {
    Pem,
    Pkcs12,
}

impl StoreType {
    /// The type `value` of setting `key`.
    pub fn parse(key: &str, value: &str) -> Result<Self, String> {
        match value.to_ascii_uppercase().as_str() {
            "PEM" => Ok(Self::Pem),
            "PKCS12" | "JKS" => Ok(Self::Pkcs12),
            _ => Err(format!(
                "{key}={value} is not supported: use PKCS12, JKS (a store keytool \
                 wrote, which is PKCS12 since Java 9) or PEM"
            )),
        }
    }
}

/// Certificates, as rustls takes them.
pub type Certificates = Vec<CertificateDer<'static>>;

/// A certificate chain, leaf first, and its private key.
pub type KeyPair = (Certificates, PrivateKeyDer<'static>);

/// Every certificate in PEM `text`; `what` names it in errors.
pub fn pem_certificates(text: &str, what: &str) -> Result<Certificates, String> {
    CertificateDer::pem_slice_iter(text.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{what} is not valid PEM: {e}"))
}

/// A certificate chain and its (unencrypted) private key, in PEM.
pub fn pem_key_pair(chain: &str, key: &str) -> Result<KeyPair, String> {
    let chain = pem_certificates(chain, "the keystore certificate chain")?;
    let key = PrivateKeyDer::from_pem_slice(key.as_bytes())
        .map_err(|e| format!("the keystore key is not a PEM private key: {e}"))?;
    Ok((chain, key))
}

/// The one private key entry of a PKCS12 key store and its certificate
/// chain. `source` names the store in errors.
pub fn pkcs12_key_store(bytes: &[u8], password: &str, source: &str) -> Result<KeyPair, String> {
    refuse_other_formats(bytes, source, "ssl.keystore.type")?;
    let store = KeyStore::from_pkcs12(bytes, password, Pkcs12ImportPolicy::Strict)
        .map_err(|e| unreadable(e, source, "ssl.keystore.password"))?;
    let mut chains = store.entries().filter_map(|(alias, entry)| match entry {
        KeyStoreEntry::PrivateKeyChain(chain) => Some((alias, chain)),
        _ => None,
    });
    let Some((alias, chain)) = chains.next() else {
        return Err(format!(
            "{source}: no private key with its certificate (keytool -genkeypair makes one)"
        ));
    };
    if let Some((other, _)) = chains.next() {
        return Err(format!(
            "{source}: more than one private key ({alias}, {other}); keep exactly one"
        ));
    }
    let certificates = chain
        .certs()
        .iter()
        .map(|c| CertificateDer::from(c.as_der().to_vec()))
        .collect();
    let key = PrivatePkcs8KeyDer::from(chain.key().as_der().to_vec()).into();
    // Checked here, where the advice can name the store.
    rustls::crypto::ring::sign::any_supported_type(&key).map_err(|e| {
        format!(
            "{source}: the private key is unusable ({e}); EC keys from Java stores lack the \
             public key rustls needs: make the key with keytool -keyalg RSA"
        )
    })?;
    Ok((certificates, key))
}

/// The certificates a PKCS12 trust store trusts: its trusted certificate
/// entries (keytool -importcert), or every certificate of a store that
/// marks none (openssl pkcs12 -export -nokeys).
pub fn pkcs12_trust_store(
    bytes: &[u8],
    password: &str,
    source: &str,
) -> Result<Certificates, String> {
    refuse_other_formats(bytes, source, "ssl.truststore.type")?;
    let archive = Pkcs12Archive::from_pkcs12(bytes, password)
        .map_err(|e| unreadable(e, source, "ssl.truststore.password"))?;
    let any_trusted = archive.certs.iter().any(|bag| bag.trusted);
    let certificates: Vec<_> = archive
        .certs
        .iter()
        .filter(|bag| bag.trusted || !any_trusted)
        .map(|bag| CertificateDer::from(bag.cert.as_der().to_vec()))
        .collect();
    if certificates.is_empty() {
        return Err(format!("{source}: no certificate"));
    }
    Ok(certificates)
}

/// Whether a store file is PEM text rather than a binary store.
pub fn is_pem(bytes: &[u8]) -> bool {
    bytes.trim_ascii_start().starts_with(b"-----BEGIN")
}

/// PEM files (Kafka's default store type is JKS, so a PEM store without
/// its type lands here) and Java's legacy formats, by their first bytes.
fn refuse_other_formats(bytes: &[u8], source: &str, type_key: &str) -> Result<(), String> {
    if is_pem(bytes) {
        return Err(format!("{source} is a PEM file: set {type_key}=PEM"));
    }
    let format = match bytes.get(..4) {
        Some([0xfe, 0xed, 0xfe, 0xed]) => "JKS",
        Some([0xce, 0xce, 0xce, 0xce]) => "JCEKS",
        _ => return Ok(()),
    };
    Err(format!(
        "{source} is in Java's legacy {format} format, which Ottla does not read: convert it \
         with keytool -importkeystore -srckeystore <file> -destkeystore <file>.p12 \
         -deststoretype PKCS12"
    ))
}

fn unreadable(e: Error, source: &str, password_key: &str) -> String {
    match e {
        Error::MacError(_) => format!("{source}: wrong {password_key} (or a damaged store)"),
        e => format!("{source} is not a PKCS12 store Ottla can read: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p12_keystore::{Certificate, PrivateKey, PrivateKeyChain};

    /// A CA, a leaf it signs and the leaf's key, DER-encoded.
    fn pki() -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "test CA");
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca, ca_key);
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let mut leaf = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        leaf.distinguished_name
            .push(rcgen::DnType::CommonName, "broker");
        let leaf_cert = leaf.signed_by(&leaf_key, &issuer).unwrap();
        (
            ca_cert.der().to_vec(),
            leaf_cert.der().to_vec(),
            leaf_key.serialize_der(),
        )
    }

    fn write(store: &KeyStore, password: &str) -> Vec<u8> {
        store.writer(password).write().unwrap()
    }

    #[test]
    fn a_key_store_yields_its_chain_and_key() {
        let (ca, leaf, key) = pki();
        let mut store = KeyStore::new();
        let chain = PrivateKeyChain::new(
            b"id".to_vec(),
            PrivateKey::from_der(&key).unwrap(),
            [
                Certificate::from_der(&leaf).unwrap(),
                Certificate::from_der(&ca).unwrap(),
            ],
        );
        store.add_entry("broker", KeyStoreEntry::PrivateKeyChain(chain));
        let bytes = write(&store, "store-secret");
        let (certificates, private) = pkcs12_key_store(&bytes, "store-secret", "ks").unwrap();
        assert_eq!(certificates.len(), 2);
        assert_eq!(certificates[0].as_ref(), &leaf[..]);
        assert_eq!(certificates[1].as_ref(), &ca[..]);
        assert_eq!(private.secret_der(), &key[..]);
        let wrong = pkcs12_key_store(&bytes, "guess", "ks").unwrap_err();
        assert!(wrong.contains("wrong ssl.keystore.password"), "{wrong}");
    }

    #[test]
    fn a_trust_store_yields_its_trusted_certificates_only() {
        let (ca, leaf, key) = pki();
        let mut store = KeyStore::new();
        store.add_entry(
            "ca",
            KeyStoreEntry::Certificate(Certificate::from_der(&ca).unwrap()),
        );
        let bytes = write(&store, "trust-secret");
        let trusted = pkcs12_trust_store(&bytes, "trust-secret", "ts").unwrap();
        assert_eq!(trusted, vec![CertificateDer::from(ca.clone())]);
        // A key entry's certificates are not trusted ones.
        let chain = PrivateKeyChain::new(
            b"id".to_vec(),
            PrivateKey::from_der(&key).unwrap(),
            [Certificate::from_der(&leaf).unwrap()],
        );
        store.add_entry("broker", KeyStoreEntry::PrivateKeyChain(chain));
        let bytes = write(&store, "trust-secret");
        let trusted = pkcs12_trust_store(&bytes, "trust-secret", "ts").unwrap();
        assert_eq!(trusted, vec![CertificateDer::from(ca)]);
        let wrong = pkcs12_trust_store(&bytes, "guess", "ts").unwrap_err();
        assert!(wrong.contains("wrong ssl.truststore.password"), "{wrong}");
    }

    #[test]
    fn legacy_java_stores_and_garbage_are_refused_with_a_hint() {
        let jks = [0xfe, 0xed, 0xfe, 0xed, 0, 0, 0, 2];
        let e = pkcs12_key_store(&jks, "x", "server.jks").unwrap_err();
        assert!(
            e.contains("legacy JKS format") && e.contains("keytool -importkeystore"),
            "{e}"
        );
        let e = pkcs12_trust_store(b"\n-----BEGIN CERTIFICATE-----", "x", "ts").unwrap_err();
        assert_eq!(e, "ts is a PEM file: set ssl.truststore.type=PEM");
        let e = pkcs12_trust_store(b"not a store", "x", "ts").unwrap_err();
        assert!(e.contains("not a PKCS12 store"), "{e}");
        assert_eq!(
            StoreType::parse("ssl.keystore.type", "jks"),
            Ok(StoreType::Pkcs12)
        );
        assert!(StoreType::parse("ssl.keystore.type", "BCFKS").is_err());
    }
}
