//! What the CLI prints for each answer: a view of the answer (the JSON
//! document with `--json`), rendered otherwise as aligned tables or result
//! lines built from the same view; error lines for stderr; and whether
//! anything failed (exit status 1).
//!
//! Unknown figures (-1 on the wire) are `-` in tables and `null` in JSON;
//! topic ids are in Kafka's base64 form.

use std::fmt;

use ottla_protocol::mirror::admin::{
    CreateMirrorResponse, DeleteMirrorResponse, DescribeMirrorsResponse, DescribedMirror,
    FailoverSummary, ListMirrorsResponse, ListedMirror,
};
use ottla_protocol::mirror::errors as mirror_errors;
use ottla_protocol::mirror::topics::MirrorTopicResult;
use ottla_protocol::names::{error_name, uuid_text};
use serde::Serialize;
use uuid::Uuid;

use super::acls::{AclRow, MirrorAcl};
use super::args::TopicOp;
use crate::state::MirrorPartitionState;

/// A broker's answer to one action, with what the answer needs to be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Created {
        mirror: String,
        validate_only: bool,
        response: CreateMirrorResponse,
    },
    Deleted {
        mirror: String,
        response: DeleteMirrorResponse,
    },
    Listed(ListMirrorsResponse),
    Described(DescribeMirrorsResponse),
    /// `--remove --dry-run`: what failover of `topics` would do.
    FailoverPlan {
        mirror: String,
        topics: Vec<String>,
        response: DescribeMirrorsResponse,
    },
    Topics {
        op: TopicOp,
        mirror: String,
        /// The topics asked for, to notice any the answer leaves out.
        requested: Vec<String>,
        result: TopicSetResult,
    },
    /// One outcome per operation of the ACL (None: added).
    AclAdded {
        acl: MirrorAcl,
        errors: Vec<Option<ErrorView>>,
    },
    AclRemoved {
        acl: MirrorAcl,
        removed: usize,
        errors: Vec<ErrorView>,
    },
    AclsListed {
        error: Option<ErrorView>,
        acls: Vec<AclRow>,
    },
}

/// The shape the four topic-set responses share.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicSetResult {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub topics: Vec<MirrorTopicResult>,
}

/// What to print.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rendered {
    pub stdout: String,
    /// Error lines, each ending in a newline.
    pub stderr: String,
    /// Some error was reported: exit with status 1.
    pub failed: bool,
}

impl Rendered {
    fn error(&mut self, line: fmt::Arguments<'_>) {
        self.stderr.push_str(&line.to_string());
        self.stderr.push('\n');
        self.failed = true;
    }
}

/// An error code with its name and message (the broker's if not empty, else
/// the mirror code's own text, else none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorView {
    pub code: i16,
    pub name: String,
    pub message: Option<String>,
}

impl ErrorView {
    /// None for code 0.
    pub fn of(code: i16, message: Option<&str>) -> Option<Self> {
        (code != 0).then(|| ErrorView {
            code,
            name: error_name(code),
            message: message
                .filter(|m| !m.is_empty())
                .map(str::to_string)
                .or_else(|| mirror_errors::by_code(code).map(|e| e.message.to_string())),
        })
    }
}

impl fmt::Display for ErrorView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.message {
            Some(message) => write!(f, "{}: {}", self.name, message),
            None => f.write_str(&self.name),
        }
    }
}

/// Prints `answer` as JSON or as text.
pub fn render(answer: &Answer, json: bool) -> Rendered {
    match answer {
        Answer::Created {
            mirror,
            validate_only,
            response,
        } => {
            let view = CreateView {
                mirror,
                validate_only: *validate_only,
                error: ErrorView::of(response.error_code, response.error_message.as_deref()),
            };
            let text = if *validate_only {
                format!(
                    "Mirror {mirror}: configuration is valid; nothing created (--validate-only)\n"
                )
            } else {
                format!("Created mirror {mirror}\n")
            };
            mirror_result(&view, mirror, &view.error, text, json)
        }
        Answer::Deleted { mirror, response } => {
            let view = DeleteView {
                mirror,
                error: ErrorView::of(response.error_code, response.error_message.as_deref()),
            };
            let text = format!("Deleted mirror {mirror}\n");
            mirror_result(&view, mirror, &view.error, text, json)
        }
        Answer::Listed(response) => render_list(response, json),
        Answer::Described(response) => render_describe(response, json),
        Answer::FailoverPlan {
            mirror,
            topics,
            response,
        } => render_failover_plan(mirror, topics, response, json),
        Answer::Topics {
            op,
            mirror,
            requested,
            result,
        } => render_topics(*op, mirror, requested, result, json),
        Answer::AclAdded { acl, errors } => render_acl_added(acl, errors, json),
        Answer::AclRemoved {
            acl,
            removed,
            errors,
        } => render_acl_removed(acl, *removed, errors, json),
        Answer::AclsListed { error, acls } => render_acls(error, acls, json),
    }
}

/// `ALLOW User:alice from * to ALTER`.
fn acl_text(acl: &MirrorAcl, operation: &str) -> String {
    let permission = if acl.deny { "DENY" } else { "ALLOW" };
    format!(
        "{permission} {} from {} to {operation} mirror {}",
        acl.principal, acl.host, acl.mirror
    )
}

#[derive(Serialize)]
struct AclChangeView<'a> {
    mirror: &'a str,
    principal: &'a str,
    host: &'a str,
    permission: &'static str,
    operations: Vec<AclOperationView>,
    removed: Option<usize>,
}

#[derive(Serialize)]
struct AclOperationView {
    operation: String,
    error: Option<ErrorView>,
}

fn acl_change_view<'a>(
    acl: &'a MirrorAcl,
    errors: impl Iterator<Item = Option<ErrorView>>,
    removed: Option<usize>,
) -> AclChangeView<'a> {
    AclChangeView {
        mirror: &acl.mirror,
        principal: &acl.principal,
        host: &acl.host,
        permission: if acl.deny { "DENY" } else { "ALLOW" },
        operations: acl
            .operations
            .iter()
            .zip(errors.chain(std::iter::repeat(None)))
            .map(|(op, error)| AclOperationView {
                operation: op.name(),
                error,
            })
            .collect(),
        removed,
    }
}

fn render_acl_added(acl: &MirrorAcl, errors: &[Option<ErrorView>], json: bool) -> Rendered {
    let view = acl_change_view(acl, errors.iter().cloned(), None);
    let mut out = Rendered::default();
    for op in &view.operations {
        match &op.error {
            Some(e) => out.error(format_args!(
                "Cannot add ACL {}: {e}",
                acl_text(acl, &op.operation)
            )),
            None if !json => out
                .stdout
                .push_str(&format!("Added ACL {}\n", acl_text(acl, &op.operation))),
            None => {}
        }
    }
    if json {
        out.stdout = to_json(&view);
    }
    out
}

fn render_acl_removed(
    acl: &MirrorAcl,
    removed: usize,
    errors: &[ErrorView],
    json: bool,
) -> Rendered {
    let view = acl_change_view(acl, std::iter::empty(), Some(removed));
    let mut out = Rendered::default();
    for e in errors {
        out.error(format_args!(
            "Cannot remove ACLs of mirror {}: {e}",
            acl.mirror
        ));
    }
    out.stdout = if json {
        to_json(&view)
    } else {
        format!(
            "Removed {removed} ACL(s) for {} on mirror {}\n",
            acl.principal, acl.mirror
        )
    };
    out
}

#[derive(Serialize)]
struct AclListView<'a> {
    error: &'a Option<ErrorView>,
    acls: &'a [AclRow],
}

const ACL_HEADERS: [&str; 5] = ["MIRROR", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"];

fn render_acls(error: &Option<ErrorView>, acls: &[AclRow], json: bool) -> Rendered {
    let mut out = Rendered::default();
    if let Some(e) = error {
        out.error(format_args!("Error: {e}"));
    }
    out.stdout = if json {
        to_json(&AclListView { error, acls })
    } else if error.is_some() {
        String::new()
    } else {
        let rows: Vec<Vec<String>> = acls
            .iter()
            .map(|a| {
                vec![
                    a.mirror.clone(),
                    a.principal.clone(),
                    a.host.clone(),
                    a.operation.clone(),
                    a.permission.clone(),
                ]
            })
            .collect();
        table(&ACL_HEADERS, &rows)
    };
    out
}

#[derive(Serialize)]
struct CreateView<'a> {
    mirror: &'a str,
    validate_only: bool,
    error: Option<ErrorView>,
}

#[derive(Serialize)]
struct DeleteView<'a> {
    mirror: &'a str,
    error: Option<ErrorView>,
}

/// Create and delete: one line, or the mirror's error.
fn mirror_result(
    view: &impl Serialize,
    mirror: &str,
    error: &Option<ErrorView>,
    success: String,
    json: bool,
) -> Rendered {
    let mut out = Rendered::default();
    match error {
        Some(e) => out.error(format_args!("Mirror {mirror}: {e}")),
        None if !json => out.stdout = success,
        None => {}
    }
    if json {
        out.stdout = to_json(view);
    }
    out
}

#[derive(Debug, Serialize, PartialEq, Eq)]
struct ListView {
    error: Option<ErrorView>,
    mirrors: Vec<ListedView>,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
struct ListedView {
    mirror: String,
    source_bootstrap: String,
    source_cluster_id: Option<String>,
    topics: Vec<String>,
}

impl From<&ListedMirror> for ListedView {
    fn from(m: &ListedMirror) -> Self {
        ListedView {
            mirror: m.mirror_name.clone(),
            source_bootstrap: m.source_bootstrap_servers.clone(),
            source_cluster_id: m.source_cluster_id.clone(),
            topics: m.topic_names.clone(),
        }
    }
}

const LIST_HEADERS: [&str; 4] = ["MIRROR", "SOURCE-BOOTSTRAP", "SOURCE-CLUSTER-ID", "TOPICS"];

impl ListedView {
    fn cells(&self) -> Vec<String> {
        vec![
            self.mirror.clone(),
            self.source_bootstrap.clone(),
            or_dash(self.source_cluster_id.as_deref()),
            if self.topics.is_empty() {
                "-".to_string()
            } else {
                self.topics.join(",")
            },
        ]
    }
}

fn render_list(response: &ListMirrorsResponse, json: bool) -> Rendered {
    let view = ListView {
        error: ErrorView::of(response.error_code, None),
        mirrors: response.mirrors.iter().map(ListedView::from).collect(),
    };
    let mut out = Rendered::default();
    if let Some(e) = &view.error {
        out.error(format_args!("Error: {e}"));
    }
    out.stdout = if json {
        to_json(&view)
    } else if view.error.is_some() {
        String::new()
    } else {
        let rows: Vec<_> = view.mirrors.iter().map(ListedView::cells).collect();
        table(&LIST_HEADERS, &rows)
    };
    out
}

#[derive(Debug, Serialize, PartialEq, Eq)]
struct DescribeView {
    mirrors: Vec<DescribedView>,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
struct DescribedView {
    mirror: String,
    error: Option<ErrorView>,
    /// By topic name, then partition.
    partitions: Vec<PartitionView>,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
struct PartitionView {
    topic: String,
    topic_id: String,
    partition: i32,
    state: String,
    source_offset: Option<i64>,
    /// How old `source_offset` is.
    source_offset_age_ms: Option<i64>,
    destination_offset: Option<i64>,
    lag: Option<i64>,
    lag_ms: Option<i64>,
    bytes_per_second: Option<i64>,
    fetch_errors: Option<i64>,
    last_mirrored_epoch: Option<i32>,
    last_error: Option<String>,
    /// What failover did (STOPPED) or would do (`--remove --dry-run`).
    failover: Option<FailoverView>,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
struct FailoverView {
    open_transactions_policy: String,
    open_transactions: Vec<OpenTransactionView>,
    truncated_records: i64,
    last_mirrored_epoch: Option<i32>,
    /// None in a plan.
    writable_at_ms: Option<i64>,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
struct OpenTransactionView {
    producer_id: i64,
    first_offset: i64,
    idle_ms: i64,
}

impl From<FailoverSummary> for FailoverView {
    fn from(f: FailoverSummary) -> Self {
        FailoverView {
            open_transactions_policy: f.open_transactions_policy,
            open_transactions: f
                .open_transactions
                .iter()
                .map(|t| OpenTransactionView {
                    producer_id: t.producer_id,
                    first_offset: t.first_offset,
                    idle_ms: t.idle_ms,
                })
                .collect(),
            truncated_records: f.truncated_records,
            last_mirrored_epoch: known(f.last_mirrored_epoch),
            writable_at_ms: known(f.writable_at_ms),
        }
    }
}

/// The failover table: what failover did to STOPPED partitions (after
/// `--describe`'s table), or would do (`--remove --dry-run`).
const FAILOVER_HEADERS: [&str; 9] = [
    "MIRROR",
    "TOPIC",
    "PARTITION",
    "STATE",
    "WRITABLE-AT-MS",
    "POLICY",
    "OPEN-TRANSACTIONS",
    "TRUNCATED",
    "LME",
];

const DESCRIBE_HEADERS: [&str; 13] = [
    "MIRROR",
    "TOPIC",
    "PARTITION",
    "STATE",
    "SOURCE-OFFSET",
    "SOURCE-AGE-MS",
    "DEST-OFFSET",
    "LAG",
    "LAG-MS",
    "BYTES/S",
    "FETCH-ERRORS",
    "LME",
    "LAST-ERROR",
];

impl From<&DescribedMirror> for DescribedView {
    fn from(m: &DescribedMirror) -> Self {
        let mut partitions: Vec<PartitionView> = m
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| PartitionView {
                    topic: t.name.clone(),
                    topic_id: uuid_text(&t.topic_id),
                    partition: p.partition_index,
                    state: state_name(p.state),
                    source_offset: known(p.source_offset),
                    source_offset_age_ms: known(p.source_offset_age_ms()),
                    destination_offset: known(p.destination_offset),
                    lag: known(p.lag_records),
                    lag_ms: known(p.lag_ms),
                    bytes_per_second: known(p.bytes_per_second),
                    fetch_errors: known(p.fetch_errors),
                    last_mirrored_epoch: known(p.last_mirrored_epoch),
                    last_error: p.last_error.clone(),
                    failover: p.failover().map(FailoverView::from),
                })
            })
            .collect();
        partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        DescribedView {
            mirror: m.mirror_name.clone(),
            error: ErrorView::of(m.error_code, m.error_message.as_deref()),
            partitions,
        }
    }
}

impl PartitionView {
    fn cells(&self, mirror: &str) -> Vec<String> {
        let figure = |v: Option<i64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
        vec![
            mirror.to_string(),
            self.topic.clone(),
            self.partition.to_string(),
            self.state.clone(),
            figure(self.source_offset),
            figure(self.source_offset_age_ms),
            figure(self.destination_offset),
            figure(self.lag),
            figure(self.lag_ms),
            figure(self.bytes_per_second),
            figure(self.fetch_errors),
            figure(self.last_mirrored_epoch.map(i64::from)),
            or_dash(self.last_error.as_deref()),
        ]
    }
}

impl PartitionView {
    /// The failover table's row, if there is anything to show.
    fn failover_cells(&self, mirror: &str) -> Option<Vec<String>> {
        let f = self.failover.as_ref()?;
        let figure = |v: Option<i64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
        let open: Vec<String> = f
            .open_transactions
            .iter()
            .map(|t| {
                format!(
                    "producer {} from offset {} (idle {} ms)",
                    t.producer_id, t.first_offset, t.idle_ms
                )
            })
            .collect();
        Some(vec![
            mirror.to_string(),
            self.topic.clone(),
            self.partition.to_string(),
            self.state.clone(),
            figure(f.writable_at_ms),
            f.open_transactions_policy.clone(),
            if open.is_empty() {
                "-".to_string()
            } else {
                open.join("; ")
            },
            f.truncated_records.to_string(),
            figure(f.last_mirrored_epoch.map(i64::from)),
        ])
    }
}

fn state_name(wire: i8) -> String {
    match MirrorPartitionState::from_wire_value(wire) {
        Ok(state) => state.name().to_string(),
        Err(_) => format!("UNRECOGNIZED({wire})"),
    }
}

fn render_describe(response: &DescribeMirrorsResponse, json: bool) -> Rendered {
    let view = DescribeView {
        mirrors: response.mirrors.iter().map(DescribedView::from).collect(),
    };
    let mut out = Rendered::default();
    for m in &view.mirrors {
        if let Some(e) = &m.error {
            out.error(format_args!("Mirror {}: {e}", m.mirror));
        }
    }
    out.stdout = if json {
        to_json(&view)
    } else {
        let rows: Vec<_> = view
            .mirrors
            .iter()
            .flat_map(|m| m.partitions.iter().map(|p| p.cells(&m.mirror)))
            .collect();
        let mut text = table(&DESCRIBE_HEADERS, &rows);
        let failovers = failover_rows(&view);
        if !failovers.is_empty() {
            text.push_str("\nFailover of the STOPPED partitions:\n");
            text.push_str(&table(&FAILOVER_HEADERS, &failovers));
        }
        text
    };
    out
}

fn failover_rows(view: &DescribeView) -> Vec<Vec<String>> {
    view.mirrors
        .iter()
        .flat_map(|m| {
            m.partitions
                .iter()
                .filter_map(|p| p.failover_cells(&m.mirror))
        })
        .collect()
}

/// `--remove --dry-run`: what failover of `topics` would do now, from the
/// leaders' answer to a DescribeMirrors with FailoverPlan.
fn render_failover_plan(
    mirror: &str,
    topics: &[String],
    response: &DescribeMirrorsResponse,
    json: bool,
) -> Rendered {
    let mut view = DescribeView {
        mirrors: response.mirrors.iter().map(DescribedView::from).collect(),
    };
    let mut out = Rendered::default();
    for m in &mut view.mirrors {
        if let Some(e) = &m.error {
            out.error(format_args!("Mirror {}: {e}", m.mirror));
        }
        m.partitions.retain(|p| topics.contains(&p.topic));
    }
    for topic in topics {
        let found = view
            .mirrors
            .iter()
            .any(|m| m.partitions.iter().any(|p| p.topic == *topic));
        if !found {
            out.error(format_args!(
                "Topic {topic}: not a topic of mirror {mirror}"
            ));
        }
    }
    out.stdout = if json {
        to_json(&view)
    } else {
        let mut text = table(&FAILOVER_HEADERS, &failover_rows(&view));
        text.push_str("Dry run: nothing was changed.\n");
        text
    };
    out
}

#[derive(Debug, Serialize, PartialEq, Eq)]
struct TopicsView<'a> {
    mirror: &'a str,
    action: &'static str,
    error: Option<ErrorView>,
    topics: Vec<TopicResultView>,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
struct TopicResultView {
    topic: String,
    /// None when the broker did not know it (nil UUID).
    topic_id: Option<String>,
    error: Option<ErrorView>,
}

fn render_topics(
    op: TopicOp,
    mirror: &str,
    requested: &[String],
    result: &TopicSetResult,
    json: bool,
) -> Rendered {
    let mut topics: Vec<TopicResultView> = result
        .topics
        .iter()
        .map(|t| TopicResultView {
            topic: t.name.clone(),
            topic_id: (t.topic_id != Uuid::nil()).then(|| uuid_text(&t.topic_id)),
            error: ErrorView::of(t.error_code, t.error_message.as_deref()),
        })
        .collect();
    let error = ErrorView::of(result.error_code, result.error_message.as_deref());
    if error.is_none() {
        // A topic the broker left out of its answer did not succeed.
        for name in requested {
            if !topics.iter().any(|t| t.topic == *name) {
                topics.push(TopicResultView {
                    topic: name.clone(),
                    topic_id: None,
                    error: ErrorView::of(
                        -1,
                        Some("the broker's answer has no result for this topic"),
                    ),
                });
            }
        }
    }
    let view = TopicsView {
        mirror,
        action: op.name(),
        error,
        topics,
    };
    let mut out = Rendered::default();
    if let Some(e) = &view.error {
        out.error(format_args!("Mirror {mirror}: {e}"));
    }
    let done = match op {
        TopicOp::Add => "added to mirror",
        TopicOp::Remove => "removed from mirror",
        TopicOp::Pause => "paused in mirror",
        TopicOp::Resume => "resumed in mirror",
    };
    for t in &view.topics {
        match &t.error {
            Some(e) => out.error(format_args!("Topic {}: {e}", t.topic)),
            None if !json => {
                let id = t
                    .topic_id
                    .as_ref()
                    .map(|id| format!(" (topic id {id})"))
                    .unwrap_or_default();
                out.stdout
                    .push_str(&format!("Topic {} {done} {mirror}{id}\n", t.topic));
            }
            None => {}
        }
    }
    if json {
        out.stdout = to_json(&view);
    }
    out
}

/// -1 (or any negative figure) is "not known".
fn known<T: Into<i64> + Copy>(v: T) -> Option<T> {
    (v.into() >= 0).then_some(v)
}

fn or_dash(v: Option<&str>) -> String {
    v.map_or_else(|| "-".to_string(), str::to_string)
}

fn to_json(view: &impl Serialize) -> String {
    let mut text = serde_json::to_string_pretty(view).expect("views serialize");
    text.push('\n');
    text
}

/// Left-aligned columns two spaces apart, no trailing blanks; control
/// characters in cells (a multi-line error) become spaces.
fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect()
    };
    let lines: Vec<Vec<String>> = std::iter::once(headers.iter().map(|h| h.to_string()).collect())
        .chain(rows.iter().map(|r| r.iter().map(|c| clean(c)).collect()))
        .collect();
    let mut widths = vec![0; headers.len()];
    for line in &lines {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for line in &lines {
        let mut text = String::new();
        for (i, (cell, w)) in line.iter().zip(&widths).enumerate() {
            if i > 0 {
                text.push_str("  ");
            }
            text.push_str(cell);
            text.extend(std::iter::repeat_n(' ', w - cell.chars().count()));
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;
