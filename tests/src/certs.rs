//! Certificates made at test time (rcgen): a CA, a server certificate for
//! 127.0.0.1 and localhost, and client certificates, written as PEM files
//! that the broker, the Java tools and librdkafka all read.

use std::path::{Path, PathBuf};

use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// PEM files of one certificate.
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Private key then certificate, the `ssl.keystore.type=PEM` layout.
    pub keystore: PathBuf,
}

pub struct TestPki {
    dir: PathBuf,
    ca_params: CertificateParams,
    ca_key: KeyPair,
    /// The CA certificate (trust store of clients and broker).
    pub ca: PathBuf,
    /// The broker's certificate.
    pub server: CertFiles,
}

impl TestPki {
    pub fn new(dir: &Path) -> Self {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.distinguished_name = rcgen::DistinguishedName::new();
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "Ottla test CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        ca_params.not_before = date_time_ymd(2024, 1, 1);
        ca_params.not_after = date_time_ymd(2099, 1, 1);
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, ca_cert.pem()).unwrap();
        let mut pki = Self {
            dir: dir.to_path_buf(),
            ca_params,
            ca_key,
            ca,
            server: CertFiles {
                cert: PathBuf::new(),
                key: PathBuf::new(),
                keystore: PathBuf::new(),
            },
        };
        pki.server = pki.issue("server", &["127.0.0.1", "localhost"], "localhost", false);
        pki
    }

    /// Another server certificate for 127.0.0.1 and localhost, with subject
    /// `CN=<cn>,O=Ottla Tests` (a rotated one).
    pub fn another_server(&self, cn: &str) -> CertFiles {
        self.issue(cn, &["127.0.0.1", "localhost"], cn, false)
    }

    /// A client certificate with subject `CN=<cn>,O=Ottla Tests`; expired
    /// ones were valid from 2020 to 2021.
    pub fn client(&self, cn: &str, expired: bool) -> CertFiles {
        self.issue(cn, &[], cn, expired)
    }

    fn issue(&self, file: &str, names: &[&str], cn: &str, expired: bool) -> CertFiles {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::OrganizationName, "Ottla Tests");
        params.distinguished_name.push(DnType::CommonName, cn);
        if expired {
            params.not_before = date_time_ymd(2020, 1, 1);
            params.not_after = date_time_ymd(2021, 1, 1);
        } else {
            params.not_before = date_time_ymd(2024, 1, 1);
            params.not_after = date_time_ymd(2099, 1, 1);
        }
        let issuer = Issuer::from_params(&self.ca_params, &self.ca_key);
        let cert = params.signed_by(&key, &issuer).unwrap();
        let files = CertFiles {
            cert: self.dir.join(format!("{file}.crt.pem")),
            key: self.dir.join(format!("{file}.key.pem")),
            keystore: self.dir.join(format!("{file}.keystore.pem")),
        };
        std::fs::write(&files.cert, cert.pem()).unwrap();
        std::fs::write(&files.key, key.serialize_pem()).unwrap();
        std::fs::write(
            &files.keystore,
            format!("{}{}", key.serialize_pem(), cert.pem()),
        )
        .unwrap();
        files
    }
}
