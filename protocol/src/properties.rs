//! `java.util.Properties` text format, as Kafka reads `server.properties`
//! and its tools' config files (here: the broker's config file, and `ottla
//! mirrors`' `--command-config` and `--mirror-config`): `#`/`!` comments,
//! `key=value`, `key: value` or `key value`, backslash line continuations,
//! and the escapes `\t \n \r \f \uXXXX` (any other escaped character
//! stands for itself). A later duplicate key wins, as in Java.

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
#[error("line {line}: {message}")]
pub struct SyntaxError {
    pub line: usize,
    pub message: String,
}

/// One `key=value` entry and the (first) line it started on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    pub key: String,
    pub value: String,
    pub line: usize,
}

/// Parses the whole text, in file order.
pub fn parse(text: &str) -> Result<Vec<Property>, SyntaxError> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    while let Some((line_no, first)) = lines.next() {
        let first = first.trim_start_matches(is_blank);
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        // Join continuation lines: an odd number of trailing backslashes
        // escapes the line break; the next line's leading blanks are dropped.
        let mut logical = String::from(first);
        while ends_with_odd_backslashes(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start_matches(is_blank)),
                None => break,
            }
        }
        let (key, value) = split_key_value(&logical);
        out.push(Property {
            key: unescape(key).map_err(|message| SyntaxError {
                line: line_no,
                message,
            })?,
            value: unescape(value).map_err(|message| SyntaxError {
                line: line_no,
                message,
            })?,
            line: line_no,
        });
    }
    Ok(out)
}

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\x0c')
}

fn ends_with_odd_backslashes(s: &str) -> bool {
    s.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// The key ends at the first unescaped `=`, `:` or blank; one `=`/`:` (with
/// blanks around it) separates it from the value.
fn split_key_value(line: &str) -> (&str, &str) {
    let mut escaped = false;
    let mut key_end = line.len();
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '=' || c == ':' || is_blank(c) {
            key_end = i;
            break;
        }
    }
    let key = &line[..key_end];
    let mut rest = line[key_end..].trim_start_matches(is_blank);
    if let Some(r) = rest.strip_prefix(['=', ':']) {
        rest = r.trim_start_matches(is_blank);
    }
    (key, rest)
}

fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = u32::from_str_radix(&hex, 16)
                    .ok()
                    .filter(|_| hex.len() == 4)
                    .ok_or_else(|| format!("malformed \\uXXXX escape '\\u{hex}'"))?;
                // Java strings are UTF-16; a lone surrogate has no Rust equivalent.
                out.push(
                    char::from_u32(code)
                        .ok_or_else(|| format!("\\u{hex} is not a valid character"))?,
                );
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse(text)
            .unwrap()
            .into_iter()
            .map(|p| (p.key, p.value))
            .collect()
    }

    fn p(k: &str, v: &str) -> (String, String) {
        (k.to_owned(), v.to_owned())
    }

    #[test]
    fn separators_comments_and_blanks() {
        let text = "# comment\n! also comment\n\n  a=1\nb : 2\nc 3\nd\ne=\n f = x = y \n";
        assert_eq!(
            pairs(text),
            vec![
                p("a", "1"),
                p("b", "2"),
                p("c", "3"),
                p("d", ""),
                p("e", ""),
                p("f", "x = y "),
            ]
        );
    }

    #[test]
    fn continuations_join_lines() {
        let text = "listeners=PLAINTEXT://a:1,\\\n    CONTROLLER://b:2\nx=y\\\\\nz=w";
        assert_eq!(
            pairs(text),
            vec![
                p("listeners", "PLAINTEXT://a:1,CONTROLLER://b:2"),
                p("x", "y\\"),
                p("z", "w"),
            ]
        );
    }

    #[test]
    fn escapes() {
        let text = "a\\=b=c\\:d\nkey\\ with\\ spaces=\\t\\u0041\\q\r\nwin=dows\r\n";
        assert_eq!(
            pairs(text),
            vec![
                p("a=b", "c:d"),
                p("key with spaces", "\tAq"),
                p("win", "dows"),
            ]
        );
    }

    #[test]
    fn bad_unicode_escape_names_the_line() {
        assert_eq!(
            parse("ok=1\nbad=\\u12g4\n").unwrap_err(),
            SyntaxError {
                line: 2,
                message: "malformed \\uXXXX escape '\\u12g4'".into()
            }
        );
    }

    #[test]
    fn lines_are_reported() {
        let props = parse("\n# c\na=1\\\n 2\nb=3").unwrap();
        assert_eq!((props[0].line, props[1].line), (3, 5));
    }
}
