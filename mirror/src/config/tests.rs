use super::*;
use ottla_client::stores::StoreType;

fn entries(pairs: &[(&str, &str)]) -> Vec<(String, Option<String>)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Some(v.to_string())))
        .collect()
}

fn parse(pairs: &[(&str, &str)]) -> Result<MirrorConfig, ConfigError> {
    MirrorConfig::parse("dr", &entries(pairs))
}

fn error(pairs: &[(&str, &str)]) -> String {
    parse(pairs).unwrap_err().to_string()
}

#[test]
fn defaults() {
    let config = parse(&[("bootstrap.servers", "a:9092, b:9093")]).unwrap();
    assert_eq!(config.name.as_str(), "dr");
    let servers: Vec<String> = config
        .bootstrap_servers
        .iter()
        .map(|b| b.to_string())
        .collect();
    assert_eq!(servers, ["a:9092", "b:9093"]);
    assert_eq!(config.security.protocol, SecurityProtocol::Plaintext);
    assert!(config.security.tls.is_none() && config.security.sasl.is_none());
    // Topics: only those added by name; groups: all; ACLs: all.
    assert!(!config.topics.matches("orders"));
    assert!(config.groups.matches("billing"));
    assert!(config.syncs_acl(&AclBinding {
        resource_type: "TOPIC",
        resource_name: "orders",
        operation: "READ",
        permission: "ALLOW",
        principal: "User:a",
    }));
    assert!(!config.syncs_topic_property("min.insync.replicas"));
    assert!(!config.syncs_topic_property("mirror.name"));
    assert!(config.syncs_topic_property("retention.ms"));
    assert_eq!(config.metadata_refresh_interval, Duration::from_secs(30));
    assert_eq!(config.groups_sync_interval, Duration::from_secs(30));
    assert_eq!(config.acls_sync_interval, Duration::from_secs(30));
}

#[test]
fn filters_and_intervals() {
    let config = parse(&[
        ("bootstrap.servers", "[::1]:9092"),
        ("mirror.topics.include", "orders.*,payments"),
        ("mirror.topics.exclude", "orders-tmp.*"),
        ("mirror.groups.exclude", "console-consumer-.*"),
        ("mirror.topic.properties.exclude", "retention.ms"),
        ("mirror.groups.sync.interval.ms", "5000"),
    ])
    .unwrap();
    assert_eq!(config.bootstrap_servers[0].host, "::1");
    assert_eq!(config.bootstrap_servers[0].to_string(), "[::1]:9092");
    assert!(config.topics.matches("orders-eu"));
    assert!(!config.topics.matches("orders-tmp-1"));
    assert!(
        !config.topics.matches("__consumer_offsets"),
        "the explicit exclude replaced __.*, but include does not match it"
    );
    assert!(!config.groups.matches("console-consumer-42"));
    // The explicit list replaces the default, and mirror.name is always added.
    assert!(!config.syncs_topic_property("retention.ms"));
    assert!(config.syncs_topic_property("min.insync.replicas"));
    assert!(!config.syncs_topic_property("mirror.name"));
    assert_eq!(config.groups_sync_interval, Duration::from_secs(5));
}

#[test]
fn null_values_take_defaults() {
    let mut given = entries(&[("bootstrap.servers", "a:1")]);
    given.push(("mirror.topics.exclude".into(), None));
    let config = MirrorConfig::parse("dr", &given).unwrap();
    assert!(!config.topics.matches("__x"));
    assert_eq!(config.topics.exclude[0].as_str(), "__.*");
}

#[test]
fn security_settings() {
    let config = parse(&[
        ("bootstrap.servers", "src:9093"),
        ("security.protocol", "sasl_ssl"),
        ("sasl.mechanism", "SCRAM-SHA-512"),
        ("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"m\" password=\"p\";"),
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.location", "/etc/ottla/source-ca.pem"),
        ("ssl.endpoint.identification.algorithm", ""),
    ])
    .unwrap();
    let security = &config.security;
    assert_eq!(security.protocol, SecurityProtocol::SaslSsl);
    assert_eq!(
        security.sasl.as_ref().unwrap().mechanism,
        SaslMechanism::ScramSha512
    );
    let tls = security.tls.as_ref().unwrap();
    assert_eq!(
        tls.truststore,
        Some(StoreSource::File {
            path: "/etc/ottla/source-ca.pem".into(),
            store_type: Some(StoreType::Pem),
            password: None,
        })
    );
    assert!(!tls.verify_hostname);
    // Secrets never reach Debug output.
    let debug = format!("{config:?}");
    assert!(!debug.contains("password=\\\"p\\\""), "{debug}");
    assert!(debug.contains("[hidden]"));
    assert!(MirrorConfig::is_sensitive("sasl.jaas.config"));
    assert!(!MirrorConfig::is_sensitive("bootstrap.servers"));
}

#[test]
fn inline_client_certificate() {
    let config = parse(&[
        ("bootstrap.servers", "src:9093"),
        ("security.protocol", "SSL"),
        (
            "ssl.keystore.certificate.chain",
            "-----BEGIN CERTIFICATE-----",
        ),
        ("ssl.keystore.key", "-----BEGIN PRIVATE KEY-----"),
    ])
    .unwrap();
    let tls = config.security.tls.unwrap();
    assert!(matches!(tls.keystore, Some(StoreSource::Inline(_))));
    assert!(tls.verify_hostname);
    assert!(tls.truststore.is_none());
}

#[test]
fn errors_name_the_key() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[], "bootstrap.servers is required with every mirror"),
        (
            &[("bootstrap.servers", "a")],
            "invalid value \"a\" for bootstrap.servers: \"a\" has no port",
        ),
        (
            &[("bootstrap.servers", "a:0")],
            "has no valid port (1-65535)",
        ),
        (
            &[("bootstrap.servers", "::1:9092")],
            "write IPv6 addresses as [address]:port",
        ),
        (&[("bootstrap.servers", " , ")], "no address given"),
        (
            &[("bootstrap.servers", "a:1"), ("bootstrap.server", "a:1")],
            "unknown mirror config \"bootstrap.server\"",
        ),
        (
            &[("bootstrap.servers", "a:1"), ("security.protocol", "TLS")],
            "expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
        ),
        (
            &[
                ("bootstrap.servers", "a:1"),
                ("security.protocol", "SASL_PLAINTEXT"),
            ],
            "sasl.jaas.config is required with a SASL security.protocol",
        ),
        (
            &[
                ("bootstrap.servers", "a:1"),
                ("security.protocol", "SASL_PLAINTEXT"),
                ("sasl.mechanism", "GSSAPI"),
                ("sasl.jaas.config", "x"),
            ],
            "GSSAPI is not supported by Ottla's client",
        ),
        (
            &[
                ("bootstrap.servers", "a:1"),
                ("security.protocol", "SSL"),
                ("ssl.truststore.type", "BCFKS"),
            ],
            "ssl.truststore.type=BCFKS is not supported: use PKCS12, JKS",
        ),
        (
            &[
                ("bootstrap.servers", "a:1"),
                ("security.protocol", "SSL"),
                ("ssl.truststore.location", "/a"),
                ("ssl.truststore.certificates", "x"),
            ],
            "ssl.truststore.location and ssl.truststore.certificates cannot both be set",
        ),
        (
            &[
                ("bootstrap.servers", "a:1"),
                ("security.protocol", "SSL"),
                ("ssl.keystore.key", "x"),
            ],
            "ssl.keystore.key requires ssl.keystore.certificate.chain",
        ),
        (
            &[
                ("bootstrap.servers", "a:1"),
                ("security.protocol", "SSL"),
                ("ssl.endpoint.identification.algorithm", "none"),
            ],
            "expected https or an empty value",
        ),
        (
            &[("bootstrap.servers", "a:1"), ("mirror.groups.include", "[")],
            "for mirror.groups.include: not a valid regular expression",
        ),
        (
            &[
                ("bootstrap.servers", "a:1"),
                ("mirror.acl.include", "TOPIC;*;SING"),
            ],
            "not an operation",
        ),
        (
            &[
                ("bootstrap.servers", "a:1"),
                ("mirror.acls.sync.interval.ms", "0"),
            ],
            "invalid value \"0\" for mirror.acls.sync.interval.ms",
        ),
        (
            &[
                ("bootstrap.servers", "a:1"),
                ("mirror.metadata.refresh.interval.ms", "3000000000"),
            ],
            "expected milliseconds from 1 to 2147483647",
        ),
    ];
    for (pairs, needle) in cases {
        let text = error(pairs);
        assert!(text.contains(needle), "{pairs:?}: {text}");
    }
}

#[test]
fn duplicates_and_bad_names_are_refused() {
    let given = entries(&[("bootstrap.servers", "a:1"), ("bootstrap.servers", "b:1")]);
    assert_eq!(
        MirrorConfig::parse("dr", &given).unwrap_err(),
        ConfigError::Duplicate("bootstrap.servers".into())
    );
    let given = entries(&[("bootstrap.servers", "a:1")]);
    assert!(matches!(
        MirrorConfig::parse("dr.removed", &given),
        Err(ConfigError::Name(InvalidMirrorName::ReservedSuffix(..)))
    ));
}

#[test]
fn secret_values_are_not_echoed_in_errors() {
    let err = ConfigError::invalid(
        "ssl.keystore.key",
        "-----BEGIN PRIVATE KEY----- secret",
        "bad",
    );
    assert!(!err.to_string().contains("secret"));
}

#[test]
fn open_transactions_at_stop_default_to_abort() {
    let base = [("bootstrap.servers", "src:9092")];
    assert_eq!(
        parse(&base).unwrap().open_transactions_at_stop,
        OpenTransactions::Abort
    );
    let truncate = parse(&[
        ("bootstrap.servers", "src:9092"),
        ("mirror.stop.open.transactions", "truncate"),
    ])
    .unwrap();
    assert_eq!(
        truncate.open_transactions_at_stop,
        OpenTransactions::Truncate
    );
    let bad = error(&[
        ("bootstrap.servers", "src:9092"),
        ("mirror.stop.open.transactions", "keep"),
    ]);
    assert!(
        bad.contains("mirror.stop.open.transactions") && bad.contains("abort or truncate"),
        "{bad}"
    );
}

#[test]
fn fetchers_per_source_broker_default_to_one_and_are_bounded() {
    let base = [("bootstrap.servers", "src:9092")];
    assert_eq!(parse(&base).unwrap().fetchers_per_source_broker, 1);
    let four = parse(&[
        ("bootstrap.servers", "src:9092"),
        ("mirror.num.fetchers", "4"),
    ])
    .unwrap();
    assert_eq!(four.fetchers_per_source_broker, 4);
    for bad in ["0", "65", "many"] {
        let error = error(&[
            ("bootstrap.servers", "src:9092"),
            ("mirror.num.fetchers", bad),
        ]);
        assert!(error.contains("mirror.num.fetchers"), "{error}");
    }
}
