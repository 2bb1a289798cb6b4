//! SASL/PLAIN (RFC 4616) against the users of the listener's JAAS config,
//! with Kafka's PlainSaslServer messages.

use std::collections::BTreeMap;

use subtle::ConstantTimeEq;

use super::AuthError;

/// Checks one PLAIN message (`[authzid] NUL user NUL password`); returns
/// the user name.
pub fn authenticate(users: &BTreeMap<String, String>, message: &[u8]) -> Result<String, AuthError> {
    let text = std::str::from_utf8(message)
        .map_err(|_| AuthError::Hidden("SASL/PLAIN message is not UTF-8".into()))?;
    let tokens: Vec<&str> = text.split('\0').collect();
    let [authzid, user, password] = tokens[..] else {
        return Err(AuthError::Hidden(format!(
            "Invalid SASL/PLAIN response: expected 3 tokens, got {}",
            tokens.len()
        )));
    };
    if user.is_empty() {
        return Err(AuthError::Client(
            "Authentication failed: username not specified".into(),
        ));
    }
    if password.is_empty() {
        return Err(AuthError::Client(
            "Authentication failed: password not specified".into(),
        ));
    }
    if !authzid.is_empty() && authzid != user {
        return Err(AuthError::Client(
            "Authentication failed: Client requested an authorization id that is different from username".into(),
        ));
    }
    // Compare in constant time, and against a dummy for unknown users, so
    // timing tells nothing about passwords or which users exist.
    let expected = users.get(user);
    let matches = expected
        .map_or(b"" as &[u8], |p| p.as_bytes())
        .ct_eq(password.as_bytes());
    if expected.is_some() && bool::from(matches) {
        Ok(user.to_string())
    } else {
        Err(AuthError::Client(
            "Authentication failed: Invalid username or password".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users() -> BTreeMap<String, String> {
        [("alice".to_string(), "secret".to_string())].into()
    }

    #[test]
    fn plain_messages() {
        assert_eq!(authenticate(&users(), b"\0alice\0secret").unwrap(), "alice");
        assert_eq!(
            authenticate(&users(), b"alice\0alice\0secret").unwrap(),
            "alice"
        );
        let fail = |m: &[u8]| authenticate(&users(), m).unwrap_err();
        assert_eq!(
            fail(b"\0alice\0wrong"),
            AuthError::Client("Authentication failed: Invalid username or password".into())
        );
        assert!(matches!(fail(b"\0bob\0secret"), AuthError::Client(_)));
        assert!(matches!(fail(b"bob\0alice\0secret"), AuthError::Client(_)));
        assert!(matches!(fail(b"\0\0secret"), AuthError::Client(_)));
        assert!(matches!(fail(b"alice\0secret"), AuthError::Hidden(_)));
        assert!(matches!(fail(b"\xff\0a\0b"), AuthError::Hidden(_)));
    }
}
