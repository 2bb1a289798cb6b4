//! The command line, in the option names of KIP-1279's `kafka-mirrors.sh`,
//! and its check into one [`Invocation`].
//!
//! clap enforces what it can express (exactly one action, what each action
//! requires, what belongs to which action); [`MirrorsArgs::into_invocation`]
//! adds the one rule it cannot (`--mirror` repeats only with `--describe`),
//! so every usage error is clap's and exits with status 2.

use std::fmt;
use std::path::PathBuf;

use clap::builder::NonEmptyStringValueParser;
use clap::error::ErrorKind;
use clap::{Args, CommandFactory, Parser};

use super::acls::{AclOperation, MirrorAcl};

const EXAMPLES: &str = "\
Examples:
  ottla mirrors --bootstrap-server dest:9092 --create --mirror m1 --mirror-config m1.properties
  ottla mirrors --bootstrap-server dest:9092 --add --mirror m1 --topics orders,payments
  ottla mirrors --bootstrap-server dest:9092 --describe --mirror m1
  ottla mirrors --bootstrap-server dest:9092 --remove --mirror m1 --topics orders --dry-run   # what failover would do
  ottla mirrors --bootstrap-server dest:9092 --remove --mirror m1 --topics orders   # failover
  ottla mirrors --bootstrap-server dest:9092 --add-acl --mirror m1 --principal User:ops --operation ALTER";

/// Manages the cluster mirrors of a destination cluster (KIP-1279).
#[derive(Debug, Parser)]
#[command(name = "ottla mirrors", after_help = EXAMPLES)]
pub struct MirrorsArgs {
    /// The destination cluster's brokers, tried in order until one connects.
    #[arg(
        long,
        required = true,
        value_name = "HOST:PORT[,HOST:PORT...]",
        value_delimiter = ',',
        value_parser = parse_server
    )]
    pub bootstrap_server: Vec<ServerAddress>,

    /// Admin client properties (security.protocol, client.id,
    /// request.timeout.ms, socket.connection.setup.timeout.ms).
    #[arg(long, value_name = "FILE")]
    pub command_config: Option<PathBuf>,

    /// Print one JSON document instead of tables.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub action: ActionFlags,

    /// The mirror; repeatable with --describe (none describes every mirror).
    #[arg(
        long,
        value_name = "NAME",
        value_parser = NonEmptyStringValueParser::new(),
        required_unless_present_any = ["list", "describe", "list_acls"],
        conflicts_with = "list"
    )]
    pub mirror: Vec<String>,

    /// The new mirror's configuration, as Java properties: the source's
    /// bootstrap.servers and security settings, topic and group filters...
    #[arg(long, value_name = "FILE", requires = "create_action")]
    pub mirror_config: Option<PathBuf>,

    /// With --create: check the mirror and its configuration, create nothing.
    #[arg(long, requires = "create_action")]
    pub validate_only: bool,

    /// The topics to add, remove, pause or resume; comma-separated and/or
    /// repeated.
    #[arg(
        long,
        value_name = "TOPIC[,TOPIC...]",
        value_delimiter = ',',
        value_parser = NonEmptyStringValueParser::new(),
        requires = "topic_action"
    )]
    pub topics: Vec<String>,

    /// With --add: mirror a stopped topic again even when the source cannot
    /// tell what it shares with this cluster (an Apache Kafka source),
    /// discarding what was written here since failover.
    #[arg(long, requires = "add_action")]
    pub discard_local_writes: bool,

    /// With --remove: print what failover would do to each partition (open
    /// transactions, records truncated, last mirrored epoch); change nothing.
    #[arg(long, requires = "remove_action")]
    pub dry_run: bool,

    /// With --add-acl / --remove-acl: whose ACL, e.g. User:alice.
    #[arg(long, value_name = "TYPE:NAME", requires = "acl_action")]
    pub principal: Option<String>,

    /// With --add-acl / --remove-acl: ALL, CREATE, DELETE, ALTER, DESCRIBE,
    /// ALTER_CONFIGS, DESCRIBE_CONFIGS; comma-separated and/or repeated.
    #[arg(
        long,
        value_name = "OPERATION[,OPERATION...]",
        value_delimiter = ',',
        value_parser = AclOperation::parse,
        requires = "acl_action"
    )]
    pub operation: Vec<AclOperation>,

    /// With --add-acl / --remove-acl: the client host (default: every host).
    #[arg(long, value_name = "HOST", requires = "acl_action")]
    pub host: Option<String>,

    /// With --add-acl / --remove-acl: a DENY ACL instead of ALLOW.
    #[arg(long, requires = "acl_action")]
    pub deny: bool,
}

/// The actions; exactly one is given. The one-member groups exist for
/// `requires`: a flag always has a value (false), a group only when given.
#[derive(Debug, Args)]
#[group(id = "action", required = true, multiple = false)]
pub struct ActionFlags {
    /// Create a mirror (needs --mirror and --mirror-config).
    #[arg(long, group = "create_action", requires = "mirror_config")]
    pub create: bool,
    /// Delete a mirror whose topics are all stopped.
    #[arg(long)]
    pub delete: bool,
    /// List the mirrors.
    #[arg(long)]
    pub list: bool,
    /// Describe mirrors down to their partitions.
    #[arg(long)]
    pub describe: bool,
    /// Start mirroring --topics (creating them on the destination).
    #[arg(long, groups = ["topic_action", "add_action"], requires = "topics")]
    pub add: bool,
    /// Stop mirroring --topics and make them writable (failover).
    #[arg(long, groups = ["topic_action", "remove_action"], requires = "topics")]
    pub remove: bool,
    /// Pause mirroring --topics.
    #[arg(long, group = "topic_action", requires = "topics")]
    pub pause: bool,
    /// Resume paused --topics.
    #[arg(long, group = "topic_action", requires = "topics")]
    pub resume: bool,
    /// Allow (with --deny: deny) --principal the --operation on the mirror
    /// (an ACL on Ottla's CLUSTER_MIRROR resource).
    #[arg(long, group = "acl_action", requires_all = ["principal", "operation"])]
    pub add_acl: bool,
    /// Remove the ACLs --add-acl with the same options adds.
    #[arg(long, group = "acl_action", requires_all = ["principal", "operation"])]
    pub remove_acl: bool,
    /// List the ACLs of --mirror, or of every mirror.
    #[arg(long)]
    pub list_acls: bool,
}

/// One `--bootstrap-server` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerAddress {
    /// A host name or IP address (IPv6 without its brackets).
    pub host: String,
    pub port: u16,
}

impl fmt::Display for ServerAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// `HOST:PORT`, with `[v6]:PORT` for IPv6 addresses.
fn parse_server(s: &str) -> Result<ServerAddress, String> {
    let s = s.trim();
    let (host, port) = s
        .rsplit_once(':')
        .ok_or_else(|| format!("'{s}' is not HOST:PORT"))?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty() {
        return Err(format!("'{s}' has no host"));
    }
    match port.parse::<u16>() {
        Ok(port) if port > 0 => Ok(ServerAddress {
            host: host.to_string(),
            port,
        }),
        _ => Err(format!("'{port}' in '{s}' is not a port number")),
    }
}

/// A checked command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub bootstrap_servers: Vec<ServerAddress>,
    pub command_config: Option<PathBuf>,
    pub json: bool,
    pub action: Action,
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Create {
        mirror: String,
        config_file: PathBuf,
        validate_only: bool,
    },
    Delete {
        mirror: String,
    },
    List,
    /// No names: every mirror.
    Describe {
        mirrors: Vec<String>,
    },
    Topics {
        op: TopicOp,
        mirror: String,
        topics: Vec<String>,
        /// With [`TopicOp::Add`]: `--discard-local-writes`.
        discard_local_writes: bool,
    },
    /// `--remove --dry-run`: what failover of `topics` would do.
    PlanFailover {
        mirror: String,
        topics: Vec<String>,
    },
    AddAcl(MirrorAcl),
    RemoveAcl(MirrorAcl),
    /// No mirror: every mirror's ACLs.
    ListAcls {
        mirror: Option<String>,
    },
}

/// The four topic-set operations, which share one request and response shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicOp {
    Add,
    Remove,
    Pause,
    Resume,
}

impl TopicOp {
    /// The word of the JSON `action` field.
    pub fn name(self) -> &'static str {
        match self {
            TopicOp::Add => "add",
            TopicOp::Remove => "remove",
            TopicOp::Pause => "pause",
            TopicOp::Resume => "resume",
        }
    }
}

impl Invocation {
    /// Parses and checks a command line (`args[0]` is the program name).
    pub fn try_parse_from<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        MirrorsArgs::try_parse_from(args)?.into_invocation()
    }
}

impl MirrorsArgs {
    /// The checks clap cannot express, then the typed action.
    pub fn into_invocation(self) -> Result<Invocation, clap::Error> {
        let MirrorsArgs {
            bootstrap_server,
            command_config,
            json,
            action: a,
            mut mirror,
            mirror_config,
            validate_only,
            topics,
            discard_local_writes,
            dry_run,
            principal,
            operation,
            host,
            deny,
        } = self;
        if !a.describe && mirror.len() > 1 {
            return Err(MirrorsArgs::command().error(
                ErrorKind::ArgumentConflict,
                "--mirror can be given more than once only with --describe",
            ));
        }
        // clap has checked that the actions below have exactly one mirror.
        let mut one_mirror = || mirror.pop().unwrap_or_default();
        let topic_op = [
            (a.add, TopicOp::Add),
            (a.remove, TopicOp::Remove),
            (a.pause, TopicOp::Pause),
            (a.resume, TopicOp::Resume),
        ]
        .into_iter()
        .find_map(|(given, op)| given.then_some(op));
        let action = if a.create {
            Action::Create {
                mirror: one_mirror(),
                config_file: mirror_config.unwrap_or_default(),
                validate_only,
            }
        } else if a.delete {
            Action::Delete {
                mirror: one_mirror(),
            }
        } else if a.list {
            Action::List
        } else if a.describe {
            Action::Describe { mirrors: mirror }
        } else if dry_run {
            Action::PlanFailover {
                mirror: one_mirror(),
                topics,
            }
        } else if let Some(op) = topic_op {
            Action::Topics {
                op,
                mirror: one_mirror(),
                topics,
                discard_local_writes,
            }
        } else if a.add_acl || a.remove_acl {
            let acl = MirrorAcl {
                mirror: one_mirror(),
                principal: principal.unwrap_or_default(),
                host: host.unwrap_or_else(|| "*".to_string()),
                operations: operation,
                deny,
            };
            if a.add_acl {
                Action::AddAcl(acl)
            } else {
                Action::RemoveAcl(acl)
            }
        } else if a.list_acls {
            Action::ListAcls {
                mirror: mirror.pop(),
            }
        } else {
            unreachable!("clap requires one action")
        };
        Ok(Invocation {
            bootstrap_servers: bootstrap_server,
            command_config,
            json,
            action,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &str) -> Result<Invocation, clap::Error> {
        Invocation::try_parse_from(
            ["ottla mirrors", "--bootstrap-server", "localhost:9092"]
                .into_iter()
                .chain(args.split_whitespace()),
        )
    }

    fn usage_error(args: &str) -> (ErrorKind, String) {
        let e = parse(args).expect_err(args);
        assert_eq!(e.exit_code(), 2, "{args}");
        (e.kind(), e.to_string())
    }

    #[test]
    fn create() {
        let inv =
            parse("--create --mirror m1 --mirror-config m1.properties --validate-only --json")
                .unwrap();
        assert_eq!(
            inv,
            Invocation {
                bootstrap_servers: vec![ServerAddress {
                    host: "localhost".into(),
                    port: 9092
                }],
                command_config: None,
                json: true,
                action: Action::Create {
                    mirror: "m1".into(),
                    config_file: "m1.properties".into(),
                    validate_only: true,
                },
            }
        );
    }

    #[test]
    fn delete_list_describe() {
        assert_eq!(
            parse("--delete --mirror m1").unwrap().action,
            Action::Delete {
                mirror: "m1".into()
            }
        );
        assert_eq!(parse("--list").unwrap().action, Action::List);
        assert_eq!(
            parse("--describe").unwrap().action,
            Action::Describe { mirrors: vec![] }
        );
        assert_eq!(
            parse("--describe --mirror a --mirror b").unwrap().action,
            Action::Describe {
                mirrors: vec!["a".into(), "b".into()]
            }
        );
    }

    #[test]
    fn acl_actions() {
        let acl = |operations: Vec<AclOperation>, deny, host: &str| MirrorAcl {
            mirror: "m".into(),
            principal: "User:ops".into(),
            host: host.into(),
            operations,
            deny,
        };
        assert_eq!(
            parse("--add-acl --mirror m --principal User:ops --operation alter,describe")
                .unwrap()
                .action,
            Action::AddAcl(acl(vec![AclOperation(7), AclOperation(8)], false, "*"))
        );
        assert_eq!(
            parse("--remove-acl --mirror m --principal User:ops --operation ALL --deny --host 10.0.0.1")
                .unwrap()
                .action,
            Action::RemoveAcl(acl(vec![AclOperation(2)], true, "10.0.0.1"))
        );
        assert_eq!(
            parse("--list-acls").unwrap().action,
            Action::ListAcls { mirror: None }
        );
        assert_eq!(
            parse("--list-acls --mirror m").unwrap().action,
            Action::ListAcls {
                mirror: Some("m".into())
            }
        );
        // What each action needs, and what belongs to ACL actions only.
        for bad in [
            "--add-acl --mirror m --operation ALTER",
            "--add-acl --mirror m --principal User:ops",
            "--add-acl --principal User:ops --operation ALTER",
            "--list --principal User:ops",
            "--add-acl --mirror m --principal User:ops --operation read",
        ] {
            usage_error(bad);
        }
    }

    #[test]
    fn topic_actions_accept_lists_and_repeats() {
        for (flag, op) in [
            ("--add", TopicOp::Add),
            ("--remove", TopicOp::Remove),
            ("--pause", TopicOp::Pause),
            ("--resume", TopicOp::Resume),
        ] {
            let inv = parse(&format!("{flag} --mirror m --topics a,b --topics c")).unwrap();
            assert_eq!(
                inv.action,
                Action::Topics {
                    op,
                    mirror: "m".into(),
                    topics: vec!["a".into(), "b".into(), "c".into()],
                    discard_local_writes: false,
                }
            );
        }
    }

    #[test]
    fn discard_local_writes_goes_with_add_only() {
        let inv = parse("--add --mirror m --topics t --discard-local-writes").unwrap();
        assert!(matches!(
            inv.action,
            Action::Topics {
                op: TopicOp::Add,
                discard_local_writes: true,
                ..
            }
        ));
        for other in ["--remove", "--pause", "--resume"] {
            let e = parse(&format!(
                "{other} --mirror m --topics t --discard-local-writes"
            ))
            .unwrap_err();
            assert!(e.to_string().contains("--add"), "{other}: {e}");
        }
    }

    #[test]
    fn dry_run_plans_a_removal_only() {
        let inv = parse("--remove --mirror m --topics a,b --dry-run").unwrap();
        assert_eq!(
            inv.action,
            Action::PlanFailover {
                mirror: "m".into(),
                topics: vec!["a".into(), "b".into()],
            }
        );
        for other in ["--add", "--pause", "--resume"] {
            let e = parse(&format!("{other} --mirror m --topics t --dry-run")).unwrap_err();
            assert!(e.to_string().contains("--remove"), "{other}: {e}");
        }
    }

    #[test]
    fn bootstrap_servers_and_command_config() {
        let inv = Invocation::try_parse_from([
            "ottla mirrors",
            "--bootstrap-server",
            "a:1,[::1]:2",
            "--bootstrap-server",
            "10.0.0.1:3",
            "--command-config",
            "admin.properties",
            "--list",
        ])
        .unwrap();
        let shown: Vec<String> = inv
            .bootstrap_servers
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(shown, ["a:1", "[::1]:2", "10.0.0.1:3"]);
        assert_eq!(inv.bootstrap_servers[1].host, "::1");
        assert_eq!(inv.command_config, Some(PathBuf::from("admin.properties")));
    }

    #[test]
    fn bad_bootstrap_servers_are_usage_errors() {
        for bad in ["localhost", ":9092", "host:0", "host:99999", "host:x", ""] {
            let e =
                Invocation::try_parse_from(["ottla mirrors", "--bootstrap-server", bad, "--list"])
                    .expect_err(bad);
            assert_eq!(e.kind(), ErrorKind::ValueValidation, "{bad}");
            assert_eq!(e.exit_code(), 2);
        }
        let e = Invocation::try_parse_from(["ottla mirrors", "--list"]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::MissingRequiredArgument);
        assert!(e.to_string().contains("--bootstrap-server"), "{e}");
    }

    #[test]
    fn exactly_one_action() {
        let (kind, _) = usage_error("--mirror m");
        assert_eq!(kind, ErrorKind::MissingRequiredArgument);
        let (kind, text) = usage_error("--list --describe");
        assert_eq!(kind, ErrorKind::ArgumentConflict);
        assert!(
            text.contains("--describe") && text.contains("--list"),
            "{text}"
        );
        let (kind, _) = usage_error("--add --remove --mirror m --topics t");
        assert_eq!(kind, ErrorKind::ArgumentConflict);
    }

    #[test]
    fn each_action_gets_what_it_needs() {
        let (kind, text) = usage_error("--create --mirror m");
        assert_eq!(kind, ErrorKind::MissingRequiredArgument);
        assert!(text.contains("--mirror-config"), "{text}");
        let (kind, text) = usage_error("--create --mirror-config f");
        assert_eq!(kind, ErrorKind::MissingRequiredArgument);
        assert!(text.contains("--mirror <NAME>"), "{text}");
        for action in ["--delete", "--add --topics t", "--pause --topics t"] {
            let (kind, _) = usage_error(action);
            assert_eq!(kind, ErrorKind::MissingRequiredArgument, "{action}");
        }
        for action in ["--add", "--remove", "--pause", "--resume"] {
            let (kind, text) = usage_error(&format!("{action} --mirror m"));
            assert_eq!(kind, ErrorKind::MissingRequiredArgument, "{action}");
            assert!(text.contains("--topics"), "{text}");
        }
    }

    #[test]
    fn options_belong_to_their_actions() {
        for args in [
            "--describe --topics t",
            "--delete --mirror m --topics t",
            "--create --mirror m --mirror-config f --topics t",
        ] {
            let (kind, text) = usage_error(args);
            assert_eq!(kind, ErrorKind::MissingRequiredArgument, "{args}");
            assert!(text.contains("--add"), "{args}: {text}");
        }
        for args in [
            "--delete --mirror m --mirror-config f",
            "--delete --mirror m --validate-only",
        ] {
            let (kind, text) = usage_error(args);
            assert_eq!(kind, ErrorKind::MissingRequiredArgument, "{args}");
            assert!(text.contains("--create"), "{args}: {text}");
        }
        let (kind, _) = usage_error("--list --mirror m");
        assert_eq!(kind, ErrorKind::ArgumentConflict);
    }

    #[test]
    fn one_mirror_except_describe() {
        let (kind, text) = usage_error("--delete --mirror a --mirror b");
        assert_eq!(kind, ErrorKind::ArgumentConflict);
        assert!(text.contains("only with --describe"), "{text}");
        assert!(text.contains("Usage: ottla mirrors"), "{text}");
    }

    #[test]
    fn empty_names_are_refused() {
        let e = Invocation::try_parse_from([
            "ottla mirrors",
            "--bootstrap-server",
            "h:1",
            "--add",
            "--mirror",
            "m",
            "--topics",
            "a,,b",
        ])
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidValue);
        let (kind, _) = usage_error("--delete --mirror=");
        assert_eq!(kind, ErrorKind::InvalidValue);
    }

    #[test]
    fn clap_definition_is_consistent() {
        MirrorsArgs::command().debug_assert();
    }
}
