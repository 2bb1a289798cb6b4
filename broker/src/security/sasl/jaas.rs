//! `sasl.jaas.config` values, in the JAAS syntax Kafka reads:
//! `<LoginModule class> <flag> key="value" key2=value2;`. The broker uses
//! the options (PLAIN users are `user_<name>="<password>"`).

use std::collections::BTreeMap;

/// One login module entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JaasEntry {
    pub login_module: String,
    pub options: BTreeMap<String, String>,
}

const FLAGS: &[&str] = &["required", "requisite", "sufficient", "optional"];

/// Parses exactly one entry, as Kafka requires of `sasl.jaas.config`.
pub fn parse(text: &str) -> Result<JaasEntry, String> {
    let mut tokens = Tokens {
        chars: text.trim().chars().collect(),
        at: 0,
    };
    let login_module = tokens.word().ok_or("expected a login module class name")?;
    let flag = tokens
        .word()
        .ok_or("expected a control flag after the login module")?;
    if !FLAGS.contains(&flag.to_ascii_lowercase().as_str()) {
        return Err(format!(
            "'{flag}' is not a JAAS control flag ({})",
            FLAGS.join(", ")
        ));
    }
    let mut options = BTreeMap::new();
    loop {
        tokens.skip_blanks();
        if tokens.eat(';') {
            break;
        }
        let key = tokens
            .word()
            .ok_or("expected key=value or ';' at the end of the entry")?;
        tokens.skip_blanks();
        if !tokens.eat('=') {
            return Err(format!("option '{key}' has no '=value'"));
        }
        tokens.skip_blanks();
        let value = tokens
            .value()
            .ok_or_else(|| format!("option '{key}' has no value"))??;
        options.insert(key, value);
    }
    tokens.skip_blanks();
    if tokens.at != tokens.chars.len() {
        return Err("sasl.jaas.config must hold exactly one login module entry".into());
    }
    Ok(JaasEntry {
        login_module,
        options,
    })
}

struct Tokens {
    chars: Vec<char>,
    at: usize,
}

impl Tokens {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        let hit = self.peek() == Some(c);
        self.at += usize::from(hit);
        hit
    }

    fn skip_blanks(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.at += 1;
        }
    }

    /// A bare word: letters, digits and `._-$`.
    fn word(&mut self) -> Option<String> {
        self.skip_blanks();
        let start = self.at;
        while self
            .peek()
            .is_some_and(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '$'))
        {
            self.at += 1;
        }
        (self.at > start).then(|| self.chars[start..self.at].iter().collect())
    }

    /// A double-quoted string (backslash escapes the next character) or a
    /// bare word.
    fn value(&mut self) -> Option<Result<String, String>> {
        if !self.eat('"') {
            return self.word().map(Ok);
        }
        let mut out = String::new();
        loop {
            match self.peek() {
                None => return Some(Err("unterminated quoted value".into())),
                Some('"') => {
                    self.at += 1;
                    return Some(Ok(out));
                }
                Some('\\') => {
                    self.at += 1;
                    match self.peek() {
                        Some(c) => out.push(c),
                        None => return Some(Err("unterminated quoted value".into())),
                    }
                }
                Some(c) => out.push(c),
            }
            self.at += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_plain_example() {
        let e = parse(
            "org.apache.kafka.common.security.plain.PlainLoginModule required \
             username=\"admin\" password=\"admin-secret\" user_admin=\"admin-secret\" \
             user_alice=\"a \\\"quoted\\\" secret\";",
        )
        .unwrap();
        assert_eq!(
            e.login_module,
            "org.apache.kafka.common.security.plain.PlainLoginModule"
        );
        assert_eq!(e.options["user_alice"], "a \"quoted\" secret");
        assert_eq!(e.options["username"], "admin");
    }

    #[test]
    fn malformed_entries_are_explained() {
        assert!(parse("Module required user_a=\"x\"").is_err(), "no ';'");
        assert!(parse("Module sometimes;")
            .unwrap_err()
            .contains("control flag"));
        assert!(parse("Module required a=\"x;").is_err());
        assert!(parse("Module required a;").is_err());
        assert!(parse("A required; B required;").is_err());
        assert!(parse("").is_err());
    }
}
