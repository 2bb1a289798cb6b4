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
    let ca_store = dir.join("ca.p12");
    let ca = path(&ca_store);
    keytool(&[
        "-genkeypair",
        "-alias",
        "ca",
        "-dname",
        "CN=test-ca",
        "-ext",
        "bc:c",
        "-keystore",
        &ca,
        "-storepass",
        "ca-secret",
    ]);
    let ca_pem = dir.join("ca.pem");
    keytool(&[
        "-exportcert",
        "-rfc",
        "-alias",
        "ca",
        "-keystore",
        &ca,
        "-storepass",
        "ca-secret",
        "-file",
        &path(&ca_pem),
    ]);
    let party = |name: &str, dname: &str, san: Option<&str>, password: &'static str| {
        let keystore = dir.join(format!("{name}.keystore.jks"));
        let store = path(&keystore);
        keytool(&[
            "-genkeypair",
            "-alias",
            name,
            "-dname",
            dname,
            "-keystore",
            &store,
            "-storepass",
            password,
        ]);
        let request = path(&dir.join(format!("{name}.csr")));
        keytool(&[
            "-certreq",
            "-alias",
            name,
            "-keystore",
            &store,
            "-storepass",
            password,
            "-file",
            &request,
        ]);
        let signed = path(&dir.join(format!("{name}.pem")));
        let mut sign = vec![
            "-gencert",
            "-rfc",
            "-alias",
            "ca",
            "-keystore",
            &ca,
            "-storepass",
            "ca-secret",
            "-infile",
            &request,
            "-outfile",
            &signed,
        ];
        let san = san.map(|s| format!("SAN={s}"));
        if let Some(san) = &san {
            sign.extend(["-ext", san.as_str()]);
        }
        keytool(&sign);
        let ca_cert = path(&ca_pem);
        keytool(&[
            "-importcert",
            "-noprompt",
            "-alias",
            "ca",
            "-file",
            &ca_cert,
            "-keystore",
            &store,
            "-storepass",
            password,
        ]);
        keytool(&[
            "-importcert",
            "-alias",
            name,
            "-file",
            &signed,
            "-keystore",
            &store,
            "-storepass",
            password,
        ]);
        let truststore = dir.join(format!("{name}.truststore.jks"));
        let trust_password = "trust-secret";
        keytool(&[
            "-importcert",
            "-noprompt",
            "-alias",
            "ca",
            "-file",
            &ca_cert,
            "-keystore",
            &path(&truststore),
            "-storepass",
            trust_password,
        ]);
        JavaStores {
            keystore,
            keystore_password: password,
            truststore,
            truststore_password: trust_password,
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

fn path(p: &Path) -> String {
    p.display().to_string()
}

fn keytool(args: &[&str]) {
    // RSA, as Kafka's documentation makes them: rustls cannot use the EC
    // keys of Java stores, which lack their public key.
    // The JDK the Kafka tools run on (scripts/_common.sh: JAVA_HOME, else PATH).
    let keytool = std::env::var_os("JAVA_HOME").map_or_else(
        || PathBuf::from("keytool"),
        |home| Path::new(&home).join("bin/keytool"),
    );
    let out = Command::new(keytool)
        .args(args)
        .args(if args[0] == "-genkeypair" {
            &["-keyalg", "RSA", "-keysize", "2048", "-validity", "2"][..]
        } else {
            &[][..]
        })
        .output()
        .expect("keytool (from the JDK) runs");
    assert!(
        out.status.success(),
        "keytool {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
