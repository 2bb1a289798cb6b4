//! librdkafka (confluent-kafka) and kafka-python against a live `ottla`:
//! every compression codec, both clients producing and consuming through
//! consumer groups, duplicate header keys. Runs tests/python with pytest.

use ottla_tests::ottla::Ottla;
use ottla_tests::tools::{python, repo_root};

#[test]
fn python_clients_round_trip_every_codec() {
    let node = Ottla::start(&[("group.initial.rebalance.delay.ms", "0")]);
    let out = std::process::Command::new(python())
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(repo_root().join("tests/python"))
        .env("OTTLA_BOOTSTRAP", node.bootstrap())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "pytest failed:\n{stdout}\n{}\nbroker log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        node.log()
    );
    // 5 codecs x 2 clients + the headers test; none may be skipped.
    assert!(stdout.contains("11 passed"), "{stdout}");
    assert!(!stdout.contains("skipped"), "{stdout}");
}
