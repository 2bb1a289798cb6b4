//! Java key and trust stores made with the JDK's `keytool`, as Kafka's
//! documentation has operators make them: a CA, a broker key store and a
//! client key store whose certificates the CA signs, and trust stores
//! holding the CA. keytool writes PKCS12 (since Java 9) into the `.jks`
//! files, as operators' stores are.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One party's stores and their passwords.
pub struct JavaStores {
    pub keystore: PathBuf,
    pub keystore_password: &'static str,
    pub truststore: PathBuf,
    pub truststore_password: &'static str,
}

impl JavaStores {
    /// The Kafka `ssl.*` settings naming these stores (no `*.type`: Kafka's
    /// default, JKS).
    pub fn settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("ssl.keystore.location", self.keystore.display().to_string()),
            ("ssl.keystore.password", self.keystore_password.into()),
            ("ssl.key.password", self.keystore_password.into()),
            (
                "ssl.truststore.location",
                self.truststore.display().to_string(),
            ),
            ("ssl.truststore.password", self.truststore_password.into()),
        ]
    }
}

/// Stores for a broker (its certificate valid for 127.0.0.1 and localhost)
/// and for a client named `client_cn`, in `dir`.
pub fn broker_and_client_stores(dir: &Path, client_cn: &str) -> (JavaStores, JavaStores) {
    let ca = Store {
        path: path(&dir.join("ca.p12")),
        password: "ca-secret",
    };
    ca.run(
        "-genkeypair",
        "ca",
        &["-dname", "CN=test-ca", "-ext", "bc:c"],
    );
    let ca_cert = path(&dir.join("ca.pem"));
    ca.run("-exportcert", "ca", &["-rfc", "-file", &ca_cert]);
    let party = |name: &str, dname: &str, san: Option<&str>, password: &'static str| {
        let keystore = dir.join(format!("{name}.keystore.jks"));
        let store = Store {
            path: path(&keystore),
            password,
        };
        store.run("-genkeypair", name, &["-dname", dname]);
        let request = path(&dir.join(format!("{name}.csr")));
        store.run("-certreq", name, &["-file", &request]);
        let signed = path(&dir.join(format!("{name}.pem")));
        let san = san.map(|s| format!("SAN={s}"));
        let mut sign = vec!["-rfc", "-infile", &request, "-outfile", &signed];
        if let Some(san) = &san {
            sign.extend(["-ext", san.as_str()]);
        }
        ca.run("-gencert", "ca", &sign);
        // The CA first, so keytool chains the signed certificate to it.
        store.run("-importcert", "ca", &["-noprompt", "-file", &ca_cert]);
        store.run("-importcert", name, &["-noprompt", "-file", &signed]);
        let truststore = Store {
            path: path(&dir.join(format!("{name}.truststore.jks"))),
            password: "trust-secret",
        };
        truststore.run("-importcert", "ca", &["-noprompt", "-file", &ca_cert]);
        JavaStores {
            keystore,
            keystore_password: password,
            truststore: PathBuf::from(&truststore.path),
            truststore_password: truststore.password,
        }
    };
    let broker = party(
        "broker",
        "CN=localhost",
        Some("ip:127.0.0.1,dns:localhost"),
        "broker-secret",
    );
    let client = party("client", &format!("CN={client_cn}"), None, "client-secret");
    (broker, client)
}

/// A store file and its password.
struct Store {
    path: String,
    password: &'static str,
}

impl Store {
    /// keytool `command` on the entry `alias` of this store.
    fn run(&self, command: &str, alias: &str, args: &[&str]) {
        // RSA keys, as Kafka's documentation makes them: rustls cannot use
        // the EC keys of Java stores, which lack their public key.
        let key = ["-keyalg", "RSA", "-keysize", "2048", "-validity", "2"];
        let key: &[&str] = if command == "-genkeypair" { &key } else { &[] };
        // The JDK the Kafka tools run on (scripts/_common.sh: JAVA_HOME, else PATH).
        let keytool = std::env::var_os("JAVA_HOME").map_or_else(
            || PathBuf::from("keytool"),
            |home| Path::new(&home).join("bin/keytool"),
        );
        let out = Command::new(keytool)
            .args([
                command,
                "-alias",
                alias,
                "-keystore",
                &self.path,
                "-storepass",
                self.password,
            ])
            .args(key)
            .args(args)
            .output()
            .expect("keytool (from the JDK) runs");
        assert!(
            out.status.success(),
            "keytool {command} {alias} {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn path(p: &Path) -> String {
    p.display().to_string()
}
