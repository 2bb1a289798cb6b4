//! SCRAM credentials in the metadata: what a record stores (salt, stored
//! key, server key, iterations; never a password), how the image keeps them,
//! and the validation of AlterUserScramCredentials changes (Kafka's
//! ScramControlManager rules and messages).

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::error::ResponseError;

use crate::image::MetadataImage;
use crate::records::MetadataRecord;
use crate::{Controller, ControllerError};

/// Kafka's bounds on SCRAM iterations (both mechanisms share them).
pub const MIN_ITERATIONS: i32 = 4096;
pub const MAX_ITERATIONS: i32 = 16384;

pub use crate::records::scram::*;

/// A requested new credential, already derived from the salted password
/// the client sent (the controller never sees the salted password itself).
#[derive(Debug, Clone)]
pub struct ScramUpsertion {
    pub user: String,
    pub mechanism: i8,
    pub credential: ScramCredential,
}

/// A requested removal.
#[derive(Debug, Clone)]
pub struct ScramDeletion {
    pub user: String,
    pub mechanism: i8,
}

/// Per-user outcome of an alteration.
pub type ScramAlterResults = Vec<(String, Result<(), ControllerError>)>;

/// Validates an AlterUserScramCredentials request against `image`: the
/// records to commit and each user's result. A user named twice (in either
/// list) fails with DUPLICATE_RESOURCE; users that fail change nothing.
pub fn alter_records(
    image: &MetadataImage,
    deletions: &[ScramDeletion],
    upsertions: &[ScramUpsertion],
) -> (Vec<MetadataRecord>, ScramAlterResults) {
    let mut errors: HashMap<&str, ControllerError> = HashMap::new();
    let mut planned: BTreeMap<&str, MetadataRecord> = BTreeMap::new();
    let changes = deletions
        .iter()
        .map(|d| (d.user.as_str(), d.mechanism, None))
        .chain(
            upsertions
                .iter()
                .map(|u| (u.user.as_str(), u.mechanism, Some(&u.credential))),
        );
    for (user, mechanism, credential) in changes {
        if errors.contains_key(user) {
            continue;
        }
        if planned.remove(user).is_some() {
            errors.insert(
                user,
                ControllerError::new(
                    ResponseError::DuplicateResource,
                    "A user credential cannot be altered twice in the same request",
                ),
            );
            continue;
        }
        match check_change(image, user, mechanism, credential) {
            Ok(mechanism) => {
                planned.insert(
                    user,
                    MetadataRecord::ScramCredential {
                        user: user.to_string(),
                        mechanism,
                        credential: credential.cloned(),
                    },
                );
            }
            Err(e) => {
                errors.insert(user, e);
            }
        }
    }
    let mut results: ScramAlterResults = planned.keys().map(|u| (u.to_string(), Ok(()))).collect();
    results.extend(errors.into_iter().map(|(u, e)| (u.to_string(), Err(e))));
    (planned.into_values().collect(), results)
}

impl Controller {
    /// Validates and commits an AlterUserScramCredentials request; a failed
    /// commit fails every user that had passed validation.
    pub async fn alter_scram_credentials(
        &self,
        deletions: &[ScramDeletion],
        upsertions: &[ScramUpsertion],
    ) -> ScramAlterResults {
        let (results, error) = self
            .run(|image| alter_records(image, deletions, upsertions))
            .await;
        match error {
            None => results,
            Some(e) => results
                .into_iter()
                .map(|(user, r)| (user, r.and(Err(e.clone()))))
                .collect(),
        }
    }
}

fn check_change(
    image: &MetadataImage,
    user: &str,
    mechanism: i8,
    credential: Option<&ScramCredential>,
) -> Result<ScramMechanism, ControllerError> {
    let unacceptable = |m: &str| ControllerError::new(ResponseError::UnacceptableCredential, m);
    if user.is_empty() {
        return Err(unacceptable("Username must not be empty"));
    }
    let mechanism = ScramMechanism::from_type(mechanism).ok_or_else(|| {
        ControllerError::new(
            ResponseError::UnsupportedSaslMechanism,
            "Unknown SCRAM mechanism",
        )
    })?;
    match credential {
        None if !image
            .scram_credentials
            .contains_key(&(user.to_string(), mechanism)) =>
        {
            Err(ControllerError::new(
                ResponseError::ResourceNotFound,
                "Attempt to delete a user credential that does not exist",
            ))
        }
        Some(c) if c.iterations < MIN_ITERATIONS => Err(unacceptable("Too few iterations")),
        Some(c) if c.iterations > MAX_ITERATIONS => Err(unacceptable("Too many iterations")),
        Some(c) if c.salt.is_empty() => Err(unacceptable("Salt must not be empty")),
        _ => Ok(mechanism),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credential(iterations: i32) -> ScramCredential {
        ScramCredential {
            salt: vec![1; 16],
            stored_key: vec![2; 32],
            server_key: vec![3; 32],
            iterations,
        }
    }

    fn upsert(user: &str, mechanism: i8, iterations: i32) -> ScramUpsertion {
        ScramUpsertion {
            user: user.into(),
            mechanism,
            credential: credential(iterations),
        }
    }

    fn codes(results: &ScramAlterResults) -> BTreeMap<String, i16> {
        results
            .iter()
            .map(|(u, r)| (u.clone(), r.as_ref().map_or_else(|e| e.code, |_| 0)))
            .collect()
    }

    #[test]
    fn alterations_follow_kafkas_rules() {
        let mut image = MetadataImage::empty();
        let (records, results) = alter_records(
            &image,
            &[ScramDeletion {
                user: "ghost".into(),
                mechanism: 1,
            }],
            &[
                upsert("alice", 2, 4096),
                upsert("bob", 1, 100),
                upsert("carol", 1, 20000),
                upsert("dave", 3, 4096),
                upsert("", 1, 4096),
                upsert("erin", 1, 4096),
                upsert("erin", 2, 4096),
            ],
        );
        let codes = codes(&results);
        assert_eq!(codes["alice"], 0);
        assert_eq!(codes["bob"], ResponseError::UnacceptableCredential.code());
        assert_eq!(codes["carol"], ResponseError::UnacceptableCredential.code());
        assert_eq!(
            codes["dave"],
            ResponseError::UnsupportedSaslMechanism.code()
        );
        assert_eq!(codes[""], ResponseError::UnacceptableCredential.code());
        assert_eq!(codes["erin"], ResponseError::DuplicateResource.code());
        assert_eq!(codes["ghost"], ResponseError::ResourceNotFound.code());
        assert_eq!(records.len(), 1);
        for (i, r) in records.iter().enumerate() {
            image.apply(i as i64, r);
        }
        let key = ("alice".to_string(), ScramMechanism::Sha512);
        assert_eq!(image.scram_credentials[&key].iterations, 4096);

        let (records, results) = alter_records(
            &image,
            &[ScramDeletion {
                user: "alice".into(),
                mechanism: 2,
            }],
            &[],
        );
        assert!(results[0].1.is_ok());
        image.apply(9, &records[0]);
        assert!(image.scram_credentials.is_empty());
    }
}
