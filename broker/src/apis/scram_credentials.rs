//! DescribeUserScramCredentials and AlterUserScramCredentials (v0,
//! KIP-554), as `kafka-configs.sh --entity-type users` uses them. The admin
//! client sends a salted password; only the derived StoredKey and ServerKey
//! reach the metadata log.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_request::AlterUserScramCredentialsRequest;
use kafka_protocol::messages::alter_user_scram_credentials_response::{
    AlterUserScramCredentialsResponse, AlterUserScramCredentialsResult,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::DescribeUserScramCredentialsRequest;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResponse, DescribeUserScramCredentialsResult,
};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::scram::{
    ScramCredential, ScramCredentials, ScramDeletion, ScramMechanism, ScramUpsertion,
};

use crate::broker::Broker;
use crate::security::sasl::scram::derive_keys;

pub fn describe(
    broker: &Broker,
    _version: i16,
    req: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let image = broker.controller.image();
    let results = describe_in(
        &image.scram_credentials,
        req.users
            .map(|users| users.into_iter().map(|u| u.name.to_string()).collect()),
    );
    DescribeUserScramCredentialsResponse::default().with_results(results)
}

/// Kafka's ScramImage.describe: every user with credentials when none are
/// named; else one result per distinct name, duplicates and unknown users
/// failing.
fn describe_in(
    credentials: &ScramCredentials,
    users: Option<Vec<String>>,
) -> Vec<DescribeUserScramCredentialsResult> {
    let mut by_user: BTreeMap<&str, Vec<CredentialInfo>> = BTreeMap::new();
    for ((user, mechanism), credential) in credentials {
        by_user.entry(user).or_default().push(
            CredentialInfo::default()
                .with_mechanism(mechanism.type_id())
                .with_iterations(credential.iterations),
        );
    }
    let requested = users.unwrap_or_default();
    if requested.is_empty() {
        return by_user
            .into_iter()
            .map(|(user, infos)| result(user).with_credential_infos(infos))
            .collect();
    }
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for user in &requested {
        *counts.entry(user).or_default() += 1;
    }
    counts
        .into_iter()
        .map(|(user, count)| {
            let fail = |error: ResponseError, message: String| {
                result(user)
                    .with_error_code(error.code())
                    .with_error_message(Some(StrBytes::from_string(message)))
            };
            match by_user.remove(user) {
                _ if count > 1 => fail(
                    ResponseError::DuplicateResource,
                    format!("Cannot describe SCRAM credentials for the same user twice in a single request: {user}"),
                ),
                Some(infos) => result(user).with_credential_infos(infos),
                None => fail(
                    ResponseError::ResourceNotFound,
                    format!("Attempt to describe a user credential that does not exist: {user}"),
                ),
            }
        })
        .collect()
}

fn result(user: &str) -> DescribeUserScramCredentialsResult {
    DescribeUserScramCredentialsResult::default().with_user(StrBytes::from_string(user.to_string()))
}

pub fn alter(
    broker: &Broker,
    _version: i16,
    req: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let deletions: Vec<ScramDeletion> = req
        .deletions
        .into_iter()
        .map(|d| ScramDeletion {
            user: d.name.to_string(),
            mechanism: d.mechanism,
        })
        .collect();
    let upsertions: Vec<ScramUpsertion> = req
        .upsertions
        .into_iter()
        .map(|u| {
            // An unknown mechanism derives nothing; the controller refuses it.
            let (stored_key, server_key) = ScramMechanism::from_type(u.mechanism)
                .map(|m| derive_keys(m, &u.salted_password))
                .unwrap_or_default();
            ScramUpsertion {
                user: u.name.to_string(),
                mechanism: u.mechanism,
                credential: ScramCredential {
                    salt: u.salt.to_vec(),
                    stored_key,
                    server_key,
                    iterations: u.iterations,
                },
            }
        })
        .collect();
    let results = broker
        .controller
        .block_on(
            broker
                .controller
                .alter_scram_credentials(&deletions, &upsertions),
        )
        .into_iter()
        .map(|(user, outcome)| {
            let result =
                AlterUserScramCredentialsResult::default().with_user(StrBytes::from_string(user));
            match outcome {
                Ok(()) => result,
                Err(e) => result
                    .with_error_code(e.code)
                    .with_error_message(Some(StrBytes::from_string(e.message))),
            }
        })
        .collect();
    AlterUserScramCredentialsResponse::default().with_results(results)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use kafka_protocol::messages::alter_user_scram_credentials_request::{
        ScramCredentialDeletion, ScramCredentialUpsertion,
    };
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;

    use super::*;
    use crate::apis::test_support::test_broker;

    fn name(s: &'static str) -> StrBytes {
        StrBytes::from_static_str(s)
    }

    #[test]
    fn alter_then_describe() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        let upsert = |user, mechanism| {
            ScramCredentialUpsertion::default()
                .with_name(name(user))
                .with_mechanism(mechanism)
                .with_iterations(8192)
                .with_salt(Bytes::from_static(b"salt"))
                .with_salted_password(Bytes::from(vec![7u8; 32]))
        };
        let req = AlterUserScramCredentialsRequest::default()
            .with_upsertions(vec![upsert("alice", 1), upsert("bob", 2)]);
        let resp = alter(&broker, 0, req);
        assert!(resp.results.iter().all(|r| r.error_code == 0), "{resp:?}");
        let stored = &broker.controller.image().scram_credentials
            [&("alice".to_string(), ScramMechanism::Sha256)];
        // Only derived keys are stored, never the salted password.
        assert_eq!(stored.stored_key.len(), 32);
        assert_ne!(stored.server_key, vec![7u8; 32]);

        let all = describe(&broker, 0, DescribeUserScramCredentialsRequest::default());
        let users: Vec<_> = all.results.iter().map(|r| r.user.to_string()).collect();
        assert_eq!(users, ["alice", "bob"]);
        assert_eq!(all.results[1].credential_infos[0].mechanism, 2);
        assert_eq!(all.results[1].credential_infos[0].iterations, 8192);

        let some = describe(
            &broker,
            0,
            DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
                UserName::default().with_name(name("alice")),
                UserName::default().with_name(name("ghost")),
                UserName::default().with_name(name("bob")),
                UserName::default().with_name(name("bob")),
            ])),
        );
        let codes: Vec<_> = some
            .results
            .iter()
            .map(|r| (r.user.to_string(), r.error_code))
            .collect();
        assert_eq!(
            codes,
            [
                ("alice".to_string(), 0),
                ("bob".to_string(), ResponseError::DuplicateResource.code()),
                ("ghost".to_string(), ResponseError::ResourceNotFound.code()),
            ]
        );

        let req = AlterUserScramCredentialsRequest::default().with_deletions(vec![
            ScramCredentialDeletion::default()
                .with_name(name("alice"))
                .with_mechanism(1),
        ]);
        assert_eq!(alter(&broker, 0, req).results[0].error_code, 0);
        assert!(!broker
            .controller
            .image()
            .scram_credentials
            .contains_key(&("alice".to_string(), ScramMechanism::Sha256)));
    }
}
