//! Dynamic broker configs through the stock `kafka-configs.sh`.

use crate::ottla::Ottla;
use crate::tools::{kafka_tool, ok};

/// `kafka-configs.sh --alter --entity-type brokers <entity> --add-config
/// <config>` through `node`; `entity` is `["--entity-default"]` or
/// `["--entity-name", id]`. Panics unless the tool reports success.
pub fn alter_broker_config(node: &Ottla, entity: &[&str], config: &str) {
    let bootstrap = node.bootstrap();
    let mut args = vec![
        "--bootstrap-server",
        &bootstrap,
        "--alter",
        "--entity-type",
        "brokers",
    ];
    args.extend_from_slice(entity);
    args.extend(["--add-config", config]);
    let altered = ok(kafka_tool("kafka-configs.sh", &args, None));
    assert!(altered.contains("Completed updating"), "{altered}");
}
