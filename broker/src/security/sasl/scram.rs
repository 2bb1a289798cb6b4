//! SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) on the server
//! side, with the message syntax Kafka's ScramSaslServer accepts, and the
//! key derivation AlterUserScramCredentials needs.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, Mac};
use ottla_controller::scram::{ScramCredential, ScramMechanism, MIN_ITERATIONS};
use rand::distr::{Alphanumeric, SampleString};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

use super::AuthError;

fn hmac(mechanism: ScramMechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
    fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
        let mut mac = <M as hmac::digest::KeyInit>::new_from_slice(key)
            .expect("HMAC accepts keys of any length");
        mac.update(data);
        mac.finalize().into_bytes().to_vec()
    }
    match mechanism {
        ScramMechanism::Sha256 => run::<Hmac<Sha256>>(key, data),
        ScramMechanism::Sha512 => run::<Hmac<Sha512>>(key, data),
    }
}

fn hash(mechanism: ScramMechanism, data: &[u8]) -> Vec<u8> {
    match mechanism {
        ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
        ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
    }
}

/// StoredKey and ServerKey from a salted password (what the admin client
/// sends in AlterUserScramCredentials), so only these are stored.
pub fn derive_keys(mechanism: ScramMechanism, salted_password: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let client_key = hmac(mechanism, salted_password, b"Client Key");
    let stored_key = hash(mechanism, &client_key);
    let server_key = hmac(mechanism, salted_password, b"Server Key");
    (stored_key, server_key)
}

/// Looks up a user's stored credential.
pub type CredentialLookup<'a> = &'a dyn Fn(&str, ScramMechanism) -> Option<ScramCredential>;

/// The server side of one SCRAM exchange.
pub struct ScramExchange {
    mechanism: ScramMechanism,
    state: State,
}

enum State {
    ClientFirst,
    ClientFinal {
        user: String,
        credential: ScramCredential,
        /// base64 of the gs2 header, which `c=` must repeat.
        channel_binding: String,
        nonce: String,
        /// client-first-bare "," server-first
        auth_prefix: String,
    },
    Done,
}

/// What a step produced: a challenge to send, or success with the final
/// server message and the authenticated user.
#[derive(Debug, PartialEq, Eq)]
pub enum ScramStep {
    Challenge(Vec<u8>),
    Complete { user: String, response: Vec<u8> },
}

impl ScramExchange {
    pub fn new(mechanism: ScramMechanism) -> Self {
        Self {
            mechanism,
            state: State::ClientFirst,
        }
    }

    /// Evaluates the client's next message.
    pub fn step(
        &mut self,
        message: &[u8],
        lookup: CredentialLookup<'_>,
    ) -> Result<ScramStep, AuthError> {
        let text = std::str::from_utf8(message)
            .map_err(|_| AuthError::Hidden("SCRAM message is not UTF-8".into()))?;
        match std::mem::replace(&mut self.state, State::Done) {
            State::ClientFirst => {
                let server_nonce = Alphanumeric.sample_string(&mut rand::rng(), 32);
                self.client_first(text, &server_nonce, lookup)
            }
            State::ClientFinal {
                user,
                credential,
                channel_binding,
                nonce,
                auth_prefix,
            } => {
                let check = FinalCheck {
                    credential: &credential,
                    channel_binding: &channel_binding,
                    nonce: &nonce,
                    auth_prefix: &auth_prefix,
                };
                let response = check.verify(self.mechanism, text)?;
                Ok(ScramStep::Complete { user, response })
            }
            State::Done => Err(AuthError::Hidden(
                "SCRAM message after the exchange ended".into(),
            )),
        }
    }

    fn client_first(
        &mut self,
        text: &str,
        server_nonce: &str,
        lookup: CredentialLookup<'_>,
    ) -> Result<ScramStep, AuthError> {
        let first = ClientFirst::parse(text)?;
        if first
            .extensions
            .iter()
            .any(|(k, v)| k == "tokenauth" && v == "true")
        {
            return Err(AuthError::Hidden(
                "delegation token authentication is not supported".into(),
            ));
        }
        let credential = lookup(&first.user, self.mechanism).ok_or_else(|| {
            AuthError::Hidden(format!("no {} credential for user", self.mechanism.name()))
        })?;
        if !first.authzid.is_empty() && first.authzid != first.user {
            return Err(AuthError::Client(
                "Authentication failed: Client requested an authorization id that is different from username".into(),
            ));
        }
        if credential.iterations < MIN_ITERATIONS {
            return Err(AuthError::Hidden(format!(
                "stored credential has {} iterations, fewer than {MIN_ITERATIONS}",
                credential.iterations
            )));
        }
        let nonce = format!("{}{server_nonce}", first.nonce);
        let server_first = format!(
            "r={nonce},s={},i={}",
            BASE64.encode(&credential.salt),
            credential.iterations
        );
        let auth_prefix = format!("{},{server_first}", first.bare);
        self.state = State::ClientFinal {
            user: first.user,
            credential,
            channel_binding: BASE64.encode(first.gs2_header),
            nonce,
            auth_prefix,
        };
        Ok(ScramStep::Challenge(server_first.into_bytes()))
    }
}

/// `n,[a=authzid],n=user,r=nonce[,ext=value...]`
struct ClientFirst<'a> {
    gs2_header: &'a str,
    authzid: String,
    user: String,
    nonce: String,
    extensions: Vec<(String, String)>,
    bare: &'a str,
}

impl<'a> ClientFirst<'a> {
    fn parse(text: &'a str) -> Result<Self, AuthError> {
        let bad = || AuthError::Hidden("invalid SCRAM client-first message".into());
        // Channel binding is not offered, so only "n" is valid (as Kafka).
        let rest = text.strip_prefix("n,").ok_or_else(bad)?;
        let (authzid, bare) = rest.split_once(',').ok_or_else(bad)?;
        let authzid = match authzid {
            "" => String::new(),
            a => sasl_name(a.strip_prefix("a=").ok_or_else(bad)?).ok_or_else(bad)?,
        };
        let gs2_header = &text[..text.len() - bare.len()];
        let mut fields = bare.split(',');
        let user = fields
            .next()
            .and_then(|f| f.strip_prefix("n="))
            .and_then(sasl_name)
            .ok_or_else(bad)?;
        let nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .filter(|n| !n.is_empty())
            .ok_or_else(bad)?
            .to_string();
        let extensions = fields
            .map(|f| {
                f.split_once('=')
                    .map(|(k, v)| (k.to_string(), v.to_string()))
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(bad)?;
        Ok(Self {
            gs2_header,
            authzid,
            user,
            nonce,
            extensions,
            bare,
        })
    }
}

/// RFC 5802 saslname: `=2C` is ',' and `=3D` is '='; other '=' are invalid.
fn sasl_name(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        let code = rest.get(i + 1..i + 3)?;
        out.push(match code {
            "2C" => ',',
            "3D" => '=',
            _ => return None,
        });
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

struct FinalCheck<'a> {
    credential: &'a ScramCredential,
    channel_binding: &'a str,
    nonce: &'a str,
    auth_prefix: &'a str,
}

impl FinalCheck<'_> {
    /// Checks `c=...,r=...[,ext],p=proof`; returns the server-final message.
    fn verify(&self, mechanism: ScramMechanism, text: &str) -> Result<Vec<u8>, AuthError> {
        let bad = |what: &str| AuthError::Hidden(format!("SCRAM client-final message: {what}"));
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or_else(|| bad("no proof"))?;
        let mut fields = without_proof.split(',');
        if fields.next().and_then(|f| f.strip_prefix("c=")) != Some(self.channel_binding) {
            return Err(bad("channel binding does not match the gs2 header"));
        }
        if fields.next().and_then(|f| f.strip_prefix("r=")) != Some(self.nonce) {
            return Err(bad("invalid nonce"));
        }
        let proof = BASE64
            .decode(proof)
            .map_err(|_| bad("proof is not base64"))?;
        let auth_message = format!("{},{without_proof}", self.auth_prefix);
        let signature = hmac(
            mechanism,
            &self.credential.stored_key,
            auth_message.as_bytes(),
        );
        if proof.len() != signature.len() {
            return Err(bad("proof has the wrong length"));
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        let computed = hash(mechanism, &client_key);
        if !bool::from(computed.ct_eq(&self.credential.stored_key)) {
            return Err(AuthError::Hidden("invalid client proof".into()));
        }
        let server_signature = hmac(
            mechanism,
            &self.credential.server_key,
            auth_message.as_bytes(),
        );
        Ok(format!("v={}", BASE64.encode(server_signature)).into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn salted(mechanism: ScramMechanism, password: &str, salt: &[u8], i: u32) -> Vec<u8> {
        match mechanism {
            ScramMechanism::Sha256 => {
                pbkdf2::pbkdf2_hmac_array::<Sha256, 32>(password.as_bytes(), salt, i).to_vec()
            }
            ScramMechanism::Sha512 => {
                pbkdf2::pbkdf2_hmac_array::<Sha512, 64>(password.as_bytes(), salt, i).to_vec()
            }
        }
    }

    fn credential(
        mechanism: ScramMechanism,
        password: &str,
        salt: &[u8],
        i: i32,
    ) -> ScramCredential {
        let (stored_key, server_key) =
            derive_keys(mechanism, &salted(mechanism, password, salt, i as u32));
        ScramCredential {
            salt: salt.to_vec(),
            stored_key,
            server_key,
            iterations: i,
        }
    }

    /// The exchange of RFC 7677 section 3 (user "user", password "pencil").
    #[test]
    fn rfc7677_example() {
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let cred = credential(ScramMechanism::Sha256, "pencil", &salt, 4096);
        let lookup = |user: &str, _| (user == "user").then(|| cred.clone());
        let mut exchange = ScramExchange::new(ScramMechanism::Sha256);
        let first = exchange
            .client_first(
                "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
                "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
                &lookup,
            )
            .unwrap();
        assert_eq!(
            first,
            ScramStep::Challenge(
                b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
                    .to_vec()
            )
        );
        let last = exchange
            .step(
                b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                &lookup,
            )
            .unwrap();
        assert_eq!(
            last,
            ScramStep::Complete {
                user: "user".into(),
                response: b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=".to_vec()
            }
        );
    }

    #[test]
    fn wrong_proof_and_unknown_user_fail() {
        let cred = credential(ScramMechanism::Sha512, "right", b"salt", 4096);
        let lookup = |user: &str, _| (user == "alice").then(|| cred.clone());
        let mut exchange = ScramExchange::new(ScramMechanism::Sha512);
        let ScramStep::Challenge(server_first) =
            exchange.step(b"n,,n=alice,r=abc", &lookup).unwrap()
        else {
            panic!("expected a challenge");
        };
        let server_first = String::from_utf8(server_first).unwrap();
        let nonce = server_first.split(',').next().unwrap();
        let proof = BASE64.encode([0u8; 64]);
        let err = exchange
            .step(format!("c=biws,{nonce},p={proof}").as_bytes(), &lookup)
            .unwrap_err();
        assert_eq!(err, AuthError::Hidden("invalid client proof".into()));

        let mut exchange = ScramExchange::new(ScramMechanism::Sha512);
        assert!(exchange.step(b"n,,n=bob,r=abc", &lookup).is_err());
        for bad in [
            &b"y,,n=alice,r=x"[..],
            b"n,,n=alice",
            b"n,,r=x",
            b"n,,n=a=zz,r=x",
            b"",
        ] {
            let mut exchange = ScramExchange::new(ScramMechanism::Sha512);
            assert!(exchange.step(bad, &lookup).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sasl_names_unescape() {
        assert_eq!(sasl_name("a=2Cb=3Dc").unwrap(), "a,b=c");
        assert_eq!(sasl_name("a=4"), None);
    }
}
