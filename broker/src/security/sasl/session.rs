//! One connection's SASL state, as Kafka's SaslServerAuthenticator keeps
//! it: handshake (ApiVersions allowed), authenticate, authenticated; then
//! optional re-authentication (KIP-368) with the same mechanism and
//! principal, and expiry of sessions that are not re-authenticated in time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::scram::{ScramExchange, ScramStep};
use super::{plain, AuthError, Mechanism, SaslSettings};
use crate::security::KafkaPrincipal;
use ottla_protocol::own_api::Api;

/// What the connection does with a decoded request.
#[derive(Debug, PartialEq, Eq)]
pub enum Gate {
    /// Serve it as the given principal.
    Serve(Arc<KafkaPrincipal>),
    /// A SaslHandshake or SaslAuthenticate for this session to answer.
    Authenticate,
    /// Close the connection, logging the reason.
    Refuse(String),
}

/// A SASL response and, when the step failed, why (to log before closing).
#[derive(Debug)]
pub struct Step<R> {
    pub response: R,
    pub failure: Option<String>,
}

pub struct SaslSession {
    settings: Arc<SaslSettings>,
    state: State,
    /// The last successful authentication.
    session: Option<Session>,
}

struct Session {
    principal: Arc<KafkaPrincipal>,
    mechanism: Mechanism,
    expires_at: Option<Instant>,
}

enum State {
    Handshake,
    Authenticate {
        mechanism: Mechanism,
        exchange: Exchange,
        /// After a v0 SaslHandshake, tokens come as bare frames.
        raw: bool,
    },
    Authenticated,
}

enum Exchange {
    Plain,
    Scram(ScramExchange),
}

enum Outcome {
    Challenge(Vec<u8>),
    Complete {
        response: Vec<u8>,
        lifetime: Option<Duration>,
    },
}

impl SaslSession {
    pub fn new(settings: Arc<SaslSettings>) -> Self {
        Self {
            settings,
            state: State::Handshake,
            session: None,
        }
    }

    /// The frame cap while the client has never authenticated.
    pub fn max_frame_before_auth(&self) -> Option<usize> {
        self.session
            .is_none()
            .then_some(self.settings.max_receive_size)
    }

    /// The principal, once the latest exchange has completed.
    pub fn authenticated_as(&self) -> Option<&KafkaPrincipal> {
        match (&self.state, &self.session) {
            (State::Authenticated, Some(session)) => Some(&session.principal),
            _ => None,
        }
    }

    /// Whether the next frame is a bare SASL token (v0 handshake).
    pub fn expects_raw_token(&self) -> bool {
        matches!(self.state, State::Authenticate { raw: true, .. })
    }

    pub fn gate(&self, api: Api, now: Instant) -> Gate {
        match (&self.state, &self.session) {
            (State::Handshake, _) if api == Api::Kafka(ApiKey::ApiVersions) => {
                Gate::Serve(Arc::new(KafkaPrincipal::anonymous()))
            }
            (State::Handshake, _) | (State::Authenticated, _)
                if api == Api::Kafka(ApiKey::SaslHandshake) =>
            {
                Gate::Authenticate
            }
            (State::Authenticate { raw: false, .. }, _)
                if api == Api::Kafka(ApiKey::SaslAuthenticate) =>
            {
                Gate::Authenticate
            }
            (State::Authenticated, Some(session)) => match session.expires_at {
                Some(at) if now > at => Gate::Refuse(format!(
                    "the SASL session of {} expired {} ms ago without re-authentication \
                     (connections.max.reauth.ms)",
                    session.principal,
                    now.duration_since(at).as_millis()
                )),
                _ => Gate::Serve(session.principal.clone()),
            },
            _ => Gate::Refuse(format!(
                "unexpected {api:?} request during SASL authentication \
                 (is the client's security.protocol right?)"
            )),
        }
    }

    pub fn handshake(
        &mut self,
        version: i16,
        request: &SaslHandshakeRequest,
    ) -> Step<SaslHandshakeResponse> {
        let enabled = self
            .settings
            .mechanisms
            .iter()
            .map(|m| StrBytes::from_static_str(m.name()))
            .collect();
        let response = SaslHandshakeResponse::default().with_mechanisms(enabled);
        let asked = request.mechanism.as_str();
        let mechanism = Mechanism::parse(asked).filter(|m| self.settings.mechanisms.contains(m));
        let failure = match (mechanism, &self.session) {
            (None, _) => Some(format!("the client asked for SASL mechanism '{asked}', which is not in sasl.enabled.mechanisms")),
            (Some(m), Some(s)) if m != s.mechanism => Some(format!(
                "SASL mechanism '{asked}' requested by client is not supported for re-authentication of mechanism '{}'",
                s.mechanism.name()
            )),
            (Some(mechanism), _) => {
                let exchange = match mechanism {
                    Mechanism::Plain => Exchange::Plain,
                    Mechanism::Scram(m) => Exchange::Scram(ScramExchange::new(m)),
                };
                self.state = State::Authenticate {
                    mechanism,
                    exchange,
                    raw: version == 0,
                };
                None
            }
        };
        let code = if failure.is_some() {
            ResponseError::UnsupportedSaslMechanism.code()
        } else {
            0
        };
        Step {
            response: response.with_error_code(code),
            failure,
        }
    }

    pub fn authenticate(
        &mut self,
        version: i16,
        request: &SaslAuthenticateRequest,
        now: Instant,
    ) -> Step<SaslAuthenticateResponse> {
        match self.step(&request.auth_bytes, now) {
            Ok(Outcome::Challenge(bytes)) => Step {
                response: SaslAuthenticateResponse::default().with_auth_bytes(bytes.into()),
                failure: None,
            },
            Ok(Outcome::Complete { response, lifetime }) => {
                let mut out = SaslAuthenticateResponse::default().with_auth_bytes(response.into());
                // Only v1+ clients learn the lifetime (and can re-authenticate);
                // older ones are disconnected when it ends.
                if version >= 1 {
                    out.session_lifetime_ms = lifetime.map_or(0, |l| l.as_millis() as i64);
                }
                Step {
                    response: out,
                    failure: None,
                }
            }
            Err((message, reason)) => Step {
                response: SaslAuthenticateResponse::default()
                    .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                    .with_error_message(Some(StrBytes::from_string(message))),
                failure: Some(reason),
            },
        }
    }

    /// A bare token after a v0 handshake: the bare answer, or why to close.
    pub fn raw_token(&mut self, token: &[u8], now: Instant) -> Result<Bytes, String> {
        match self.step(token, now) {
            Ok(Outcome::Challenge(bytes))
            | Ok(Outcome::Complete {
                response: bytes, ..
            }) => Ok(bytes.into()),
            Err((_, reason)) => Err(reason),
        }
    }

    /// Feeds one token to the exchange; on failure, the client's message
    /// and the reason to log.
    fn step(&mut self, token: &[u8], now: Instant) -> Result<Outcome, (String, String)> {
        let State::Authenticate {
            mechanism,
            exchange,
            ..
        } = &mut self.state
        else {
            return Err((
                "SaslAuthenticate before SaslHandshake".into(),
                "SASL token without a handshake".into(),
            ));
        };
        let mechanism = *mechanism;
        let credentials = self.settings.credentials.clone();
        let result = match exchange {
            Exchange::Plain => plain::authenticate(&self.settings.plain_users, token)
                .map(|user| (user, Vec::new())),
            Exchange::Scram(scram) => {
                match scram.step(token, &|user, m| credentials.credential(user, m)) {
                    Ok(ScramStep::Challenge(bytes)) => return Ok(Outcome::Challenge(bytes)),
                    Ok(ScramStep::Complete { user, response }) => Ok((user, response)),
                    Err(e) => Err(e),
                }
            }
        };
        let reauth = self.session.is_some();
        let (user, response) = result.map_err(|e| self.failed(mechanism, reauth, e))?;
        let principal = Arc::new(KafkaPrincipal::user(user));
        if let Some(previous) = self.session.as_ref().map(|s| s.principal.clone()) {
            if previous != principal {
                let message = format!(
                    "Cannot change principals during re-authentication from {}.{}: {}.{}",
                    previous.principal_type,
                    previous.name,
                    principal.principal_type,
                    principal.name
                );
                return Err(self.failed(mechanism, reauth, AuthError::Client(message)));
            }
        }
        let lifetime = self.settings.session_lifetime();
        self.session = Some(Session {
            principal,
            mechanism,
            expires_at: lifetime.map(|l| now + l),
        });
        self.state = State::Authenticated;
        Ok(Outcome::Complete { response, lifetime })
    }

    fn failed(&mut self, mechanism: Mechanism, reauth: bool, error: AuthError) -> (String, String) {
        self.state = State::Handshake;
        let what = if reauth {
            "re-authentication"
        } else {
            "authentication"
        };
        match error {
            AuthError::Client(message) => (message.clone(), format!("{} {what} failed: {message}", mechanism.name())),
            AuthError::Hidden(reason) => (
                format!(
                    "Authentication failed during {what} due to invalid credentials with SASL mechanism {}",
                    mechanism.name()
                ),
                format!("{} {what} failed: {reason}", mechanism.name()),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use ottla_controller::scram::{ScramCredential, ScramMechanism};

    use super::*;
    use crate::security::sasl::ScramCredentialStore;

    struct NoScram;

    impl ScramCredentialStore for NoScram {
        fn credential(&self, _: &str, _: ScramMechanism) -> Option<ScramCredential> {
            None
        }
    }

    /// User "a" has a SCRAM credential.
    struct OneScramUser;

    impl ScramCredentialStore for OneScramUser {
        fn credential(&self, user: &str, _: ScramMechanism) -> Option<ScramCredential> {
            (user == "a").then(|| ScramCredential {
                salt: vec![1; 16],
                stored_key: vec![2; 32],
                server_key: vec![3; 32],
                iterations: 4096,
            })
        }
    }

    fn session(reauth_ms: i64) -> SaslSession {
        SaslSession::new(Arc::new(SaslSettings {
            mechanisms: vec![Mechanism::Plain],
            plain_users: BTreeMap::from([
                ("alice".to_string(), "a-pw".to_string()),
                ("bob".to_string(), "b-pw".to_string()),
            ]),
            reauth_ms,
            max_receive_size: 1024,
            credentials: Arc::new(NoScram),
        }))
    }

    fn handshake(s: &mut SaslSession, mechanism: &'static str) -> Step<SaslHandshakeResponse> {
        let request =
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism));
        s.handshake(1, &request)
    }

    fn login(
        s: &mut SaslSession,
        token: &'static [u8],
        now: Instant,
    ) -> Step<SaslAuthenticateResponse> {
        let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(token));
        s.authenticate(1, &request, now)
    }

    #[test]
    fn only_handshake_requests_before_authentication() {
        let now = Instant::now();
        let mut s = session(0);
        assert!(matches!(
            s.gate(Api::Kafka(ApiKey::ApiVersions), now),
            Gate::Serve(_)
        ));
        assert!(matches!(
            s.gate(Api::Kafka(ApiKey::Metadata), now),
            Gate::Refuse(_)
        ));
        assert_eq!(
            s.gate(Api::Kafka(ApiKey::SaslHandshake), now),
            Gate::Authenticate
        );
        assert_eq!(s.max_frame_before_auth(), Some(1024));
        let step = handshake(&mut s, "SCRAM-SHA-256");
        assert_eq!(
            step.response.error_code,
            ResponseError::UnsupportedSaslMechanism.code()
        );
        assert!(step.failure.is_some());
        assert!(handshake(&mut s, "PLAIN").failure.is_none());
        assert!(matches!(
            s.gate(Api::Kafka(ApiKey::Produce), now),
            Gate::Refuse(_)
        ));
        let step = login(&mut s, b"\0alice\0a-pw", now);
        assert_eq!(step.response.error_code, 0);
        assert_eq!(step.response.session_lifetime_ms, 0);
        assert_eq!(
            s.gate(Api::Kafka(ApiKey::Produce), now),
            Gate::Serve(Arc::new(KafkaPrincipal::user("alice")))
        );
        assert_eq!(s.max_frame_before_auth(), None);
    }

    #[test]
    fn wrong_password_fails_with_kafkas_error() {
        let mut s = session(0);
        handshake(&mut s, "PLAIN");
        let step = login(&mut s, b"\0alice\0nope", Instant::now());
        assert_eq!(
            step.response.error_code,
            ResponseError::SaslAuthenticationFailed.code()
        );
        assert_eq!(
            step.response.error_message.unwrap().as_str(),
            "Authentication failed: Invalid username or password"
        );
        assert!(step
            .failure
            .unwrap()
            .contains("PLAIN authentication failed"));
    }

    #[test]
    fn sessions_expire_and_reauthenticate_as_the_same_principal() {
        let now = Instant::now();
        let mut s = session(1000);
        handshake(&mut s, "PLAIN");
        let step = login(&mut s, b"\0alice\0a-pw", now);
        assert_eq!(step.response.session_lifetime_ms, 1000);
        let later = now + Duration::from_millis(1500);
        assert!(matches!(
            s.gate(Api::Kafka(ApiKey::Fetch), later),
            Gate::Refuse(_)
        ));
        // Re-authentication renews the session.
        assert_eq!(
            s.gate(Api::Kafka(ApiKey::SaslHandshake), later),
            Gate::Authenticate
        );
        assert!(handshake(&mut s, "PLAIN").failure.is_none());
        assert_eq!(
            login(&mut s, b"\0alice\0a-pw", later).response.error_code,
            0
        );
        assert!(matches!(
            s.gate(Api::Kafka(ApiKey::Fetch), later),
            Gate::Serve(_)
        ));
        // Another principal may not take over the connection.
        handshake(&mut s, "PLAIN");
        let step = login(&mut s, b"\0bob\0b-pw", later);
        assert_eq!(
            step.response.error_code,
            ResponseError::SaslAuthenticationFailed.code()
        );
        assert!(step
            .response
            .error_message
            .unwrap()
            .starts_with("Cannot change principals during re-authentication"));
    }

    /// Hostile tokens at every step fail the exchange; none panics.
    #[test]
    fn random_tokens_never_authenticate() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(368);
        for mechanism in ["PLAIN", "SCRAM-SHA-256"] {
            for _ in 0..2000 {
                let mut s = SaslSession::new(Arc::new(SaslSettings {
                    mechanisms: vec![Mechanism::Plain, Mechanism::Scram(ScramMechanism::Sha256)],
                    plain_users: BTreeMap::from([("a".to_string(), "b".to_string())]),
                    reauth_ms: 0,
                    max_receive_size: 1024,
                    credentials: Arc::new(OneScramUser),
                }));
                handshake(&mut s, mechanism);
                let len = rng.random_range(0..64);
                let token: Vec<u8> = if rng.random_bool(0.5) {
                    (0..len).map(|_| rng.random()).collect()
                } else {
                    // Well-formed up to a random nonce and tail.
                    const ALPHABET: &[u8] = b"ab,=\0xyz019";
                    let tail: String = (0..len)
                        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
                        .collect();
                    format!("n,,n=a,r={tail}").into_bytes()
                };
                let request = SaslAuthenticateRequest::default().with_auth_bytes(token.into());
                let step = s.authenticate(2, &request, Instant::now());
                assert!(s.authenticated_as().is_none());
                if step.failure.is_none() {
                    // Only a SCRAM challenge may go on; the next token fails.
                    let step = s.authenticate(2, &request, Instant::now());
                    assert!(step.failure.is_some());
                }
            }
        }
    }

    #[test]
    fn v0_handshake_exchanges_bare_tokens() {
        let mut s = session(0);
        let request =
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
        assert!(s.handshake(0, &request).failure.is_none());
        assert!(s.expects_raw_token());
        assert_eq!(
            s.raw_token(b"\0bob\0b-pw", Instant::now()).unwrap(),
            Bytes::new()
        );
        assert!(!s.expects_raw_token());
        assert!(matches!(
            s.gate(Api::Kafka(ApiKey::Metadata), Instant::now()),
            Gate::Serve(_)
        ));
    }
}
