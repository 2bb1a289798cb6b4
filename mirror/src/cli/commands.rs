//! Runs one action: reads its files, connects, sends its request and
//! returns the broker's [`Answer`].

use ottla_protocol::mirror::admin::{
    CreateMirrorRequest, DeleteMirrorRequest, DescribeMirrorsRequest, ListMirrorsRequest,
};
use ottla_protocol::mirror::topics::{
    AddTopicsToMirrorRequest, MirrorTopic, PauseMirrorTopicsRequest, RemoveTopicsFromMirrorRequest,
    ResumeMirrorTopicsRequest,
};
use thiserror::Error;

use kafka_protocol::messages::ApiKey;

use super::acls::{describe_request, rows};
use super::args::{Action, Invocation, TopicOp};
use super::connection::{Connection, ConnectionError};
use super::output::{Answer, ErrorView, TopicSetResult};
use super::settings::{self, SettingsError};

#[derive(Debug, Error)]
pub enum CommandError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error(transparent)]
    Connection(#[from] ConnectionError),
}

/// Sends the four topic-set requests, which share one shape
/// (`$request` is the request built from it).
macro_rules! send_topic_set {
    ($connection:expr, $request:ident, $mirror:expr, $topics:expr) => {
        send_topic_set!($connection, $request, $mirror, $topics, |r| r)
    };
    ($connection:expr, $request:ident, $mirror:expr, $topics:expr, $finish:expr) => {{
        #[allow(clippy::redundant_closure_call)]
        let request = ($finish)($request {
            mirror_name: $mirror.clone(),
            topics: $topics,
            ..Default::default()
        });
        let response = $connection.send(&request).await?;
        TopicSetResult {
            error_code: response.error_code,
            error_message: response.error_message,
            topics: response.topics,
        }
    }};
}

/// Runs `invocation`; `warn` receives the warnings (unused settings).
pub async fn execute(
    invocation: &Invocation,
    mut warn: impl FnMut(String),
) -> Result<Answer, CommandError> {
    let (client, unused) = settings::client_settings(invocation.command_config.as_deref())?;
    for key in unused {
        warn(format!(
            "Warning: --command-config key {key} is not used by ottla mirrors"
        ));
    }
    // Read the mirror's config before connecting: a bad file fails fast.
    let mirror_configs = match &invocation.action {
        Action::Create { config_file, .. } => settings::mirror_configs(config_file)?,
        _ => Vec::new(),
    };
    let mut connection = Connection::open(&invocation.bootstrap_servers, &client).await?;
    Ok(match &invocation.action {
        Action::Create {
            mirror,
            validate_only,
            ..
        } => Answer::Created {
            mirror: mirror.clone(),
            validate_only: *validate_only,
            response: connection
                .send(&CreateMirrorRequest {
                    mirror_name: mirror.clone(),
                    configs: mirror_configs,
                    validate_only: *validate_only,
                    ..Default::default()
                })
                .await?,
        },
        Action::Delete { mirror } => Answer::Deleted {
            mirror: mirror.clone(),
            response: connection
                .send(&DeleteMirrorRequest {
                    mirror_name: mirror.clone(),
                    ..Default::default()
                })
                .await?,
        },
        Action::List => Answer::Listed(connection.send(&ListMirrorsRequest::default()).await?),
        Action::Describe { mirrors } => Answer::Described(
            connection
                .send(&DescribeMirrorsRequest {
                    mirror_names: (!mirrors.is_empty()).then(|| mirrors.clone()),
                    ..Default::default()
                })
                .await?,
        ),
        Action::PlanFailover { mirror, topics } => Answer::FailoverPlan {
            mirror: mirror.clone(),
            topics: topics.clone(),
            response: connection
                .send(
                    &DescribeMirrorsRequest {
                        mirror_names: Some(vec![mirror.clone()]),
                        ..Default::default()
                    }
                    .with_failover_plan(true),
                )
                .await?,
        },
        Action::AddAcl(acl) => {
            let response = connection
                .send_kafka(ApiKey::CreateAcls, 3, &acl.create_request())
                .await?;
            Answer::AclAdded {
                acl: acl.clone(),
                errors: response
                    .results
                    .iter()
                    .map(|r| ErrorView::of(r.error_code, r.error_message.as_deref()))
                    .collect(),
            }
        }
        Action::RemoveAcl(acl) => {
            let response = connection
                .send_kafka(ApiKey::DeleteAcls, 3, &acl.delete_request())
                .await?;
            Answer::AclRemoved {
                acl: acl.clone(),
                removed: response
                    .filter_results
                    .iter()
                    .map(|r| r.matching_acls.len())
                    .sum(),
                errors: response
                    .filter_results
                    .iter()
                    .filter_map(|r| ErrorView::of(r.error_code, r.error_message.as_deref()))
                    .collect(),
            }
        }
        Action::ListAcls { mirror } => {
            let response = connection
                .send_kafka(
                    ApiKey::DescribeAcls,
                    3,
                    &describe_request(mirror.as_deref()),
                )
                .await?;
            Answer::AclsListed {
                error: ErrorView::of(response.error_code, response.error_message.as_deref()),
                acls: rows(&response),
            }
        }
        Action::Topics {
            op,
            mirror,
            topics,
            discard_local_writes,
        } => {
            let names: Vec<MirrorTopic> = topics
                .iter()
                .map(|name| MirrorTopic {
                    name: name.clone(),
                    ..Default::default()
                })
                .collect();
            let result = match op {
                TopicOp::Add => {
                    send_topic_set!(
                        connection,
                        AddTopicsToMirrorRequest,
                        mirror,
                        names,
                        |r: AddTopicsToMirrorRequest| r
                            .with_discard_local_writes(*discard_local_writes)
                    )
                }
                TopicOp::Remove => {
                    send_topic_set!(connection, RemoveTopicsFromMirrorRequest, mirror, names)
                }
                TopicOp::Pause => {
                    send_topic_set!(connection, PauseMirrorTopicsRequest, mirror, names)
                }
                TopicOp::Resume => {
                    send_topic_set!(connection, ResumeMirrorTopicsRequest, mirror, names)
                }
            };
            Answer::Topics {
                op: *op,
                mirror: mirror.clone(),
                requested: topics.clone(),
                result,
            }
        }
    })
}

#[cfg(test)]
mod tests;
