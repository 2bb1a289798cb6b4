//! Dynamic broker configs through the stock `kafka-configs.sh`.

use crate::ottla::Ottla;
use crate::tools::kafka_tool;

/// `kafka-configs.sh --alter --entity-type brokers` through `node`, with
/// `args` (the entity and the change): whether the tool reported success,
/// and its stdout and stderr.
pub fn try_alter_broker_configs(node: &Ottla, args: &[&str]) -> (bool, String) {
    let bootstrap = node.bootstrap();
    let mut all = vec![
        "--bootstrap-server",
        &bootstrap,
        "--alter",
        "--entity-type",
        "brokers",
    ];
    all.extend_from_slice(args);
    let out = kafka_tool("kafka-configs.sh", &all, None);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.success() && text.contains("Completed updating"),
        text,
    )
}

/// Sets `config` (`key=value`) on broker entity `entity`
/// (`["--entity-default"]` or `["--entity-name", id]`) through `node`;
/// panics unless the tool reports success.
pub fn alter_broker_config(node: &Ottla, entity: &[&str], config: &str) {
    let mut args = entity.to_vec();
    args.extend(["--add-config", config]);
    let (done, out) = try_alter_broker_configs(node, &args);
    assert!(done, "{out}");
}
