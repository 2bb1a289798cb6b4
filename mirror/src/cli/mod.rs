//! `ottla mirrors`: the command-line tool for a destination cluster's
//! mirrors, with the options of KIP-1279's proposed `kafka-mirrors.sh`
//! (`bin/kafka-mirrors.sh` runs it).
//!
//! ```text
//! ottla mirrors --bootstrap-server HOST:PORT[,HOST:PORT...] [--command-config FILE] [--json]
//!   --create --mirror NAME --mirror-config FILE [--validate-only]
//!   --delete --mirror NAME
//!   --list
//!   --describe [--mirror NAME]...
//!   --add | --remove | --pause | --resume --mirror NAME --topics T1,T2
//!   --add-acl | --remove-acl --mirror NAME --principal P --operation OP[,OP] [--host H] [--deny]
//!   --list-acls [--mirror NAME]
//! ```
//!
//! - [`args`]: the command line (clap) and its checks; usage errors exit 2.
//! - [`settings`]: `--command-config` (with TLS / SASL) and `--mirror-config`.
//! - [`connection`]: the first bootstrap server that connects, asked which
//!   mirror APIs it serves.
//! - [`commands`]: one request per action.
//! - [`acls`]: ACLs on the CLUSTER_MIRROR resource, which kafka-acls.sh
//!   cannot name.
//! - [`output`]: tables, result lines or one JSON document; errors (with the
//!   Kafka error name) on stderr and exit status 1.

pub mod acls;
pub mod args;
pub mod commands;
pub mod connection;
pub mod output;
pub mod settings;

use std::io::Write;
use std::process::ExitCode;

pub use args::{Invocation, MirrorsArgs};

/// Runs `ottla mirrors` and returns its exit status: 0, 1 if any error was
/// reported, 2 for a usage error.
pub fn run(args: MirrorsArgs) -> ExitCode {
    let invocation = match args.into_invocation() {
        Ok(invocation) => invocation,
        Err(usage) => usage.exit(),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return fail(&format!("cannot start the async runtime: {e}")),
    };
    let answer = runtime.block_on(commands::execute(&invocation, |warning| {
        let _ = writeln!(std::io::stderr(), "{warning}");
    }));
    match answer {
        Ok(answer) => {
            let rendered = output::render(&answer, invocation.json);
            // A closed stdout (`| head`) is not worth a panic.
            let _ = std::io::stdout().write_all(rendered.stdout.as_bytes());
            let _ = std::io::stderr().write_all(rendered.stderr.as_bytes());
            ExitCode::from(u8::from(rendered.failed))
        }
        Err(e) => fail(&e.to_string()),
    }
}

fn fail(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "Error: {message}");
    ExitCode::FAILURE
}
