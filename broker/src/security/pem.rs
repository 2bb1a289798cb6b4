//! PEM blocks as Kafka accepts them: files with line breaks, or the same
//! text on one line (the inline `ssl.keystore.key` style), so whitespace
//! inside the base64 body is ignored.

use base64::Engine;

/// One `-----BEGIN <label>-----` block, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PemBlock {
    pub label: String,
    pub der: Vec<u8>,
}

/// Every block in `text`, in order; text between blocks is ignored.
pub fn parse(text: &str) -> Result<Vec<PemBlock>, String> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("-----BEGIN ") {
        let after = &rest[start + "-----BEGIN ".len()..];
        let label_end = after
            .find("-----")
            .ok_or("a PEM BEGIN line is not terminated by -----")?;
        let label = &after[..label_end];
        let body = &after[label_end + 5..];
        let end_marker = format!("-----END {label}-----");
        let body_end = body
            .find(&end_marker)
            .ok_or_else(|| format!("the PEM block {label} has no {end_marker} line"))?;
        let base64: String = body[..body_end]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(base64)
            .map_err(|e| format!("the PEM block {label} is not valid base64: {e}"))?;
        blocks.push(PemBlock {
            label: label.to_string(),
            der,
        });
        rest = &body[body_end + end_marker.len()..];
    }
    Ok(blocks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_line_and_inline_blocks() {
        let text = "junk\n-----BEGIN CERTIFICATE-----\nAQID\nBA==\n-----END CERTIFICATE-----\n\
                    -----BEGIN PRIVATE KEY----- BQY= -----END PRIVATE KEY-----";
        let blocks = parse(text).unwrap();
        assert_eq!(blocks[0].label, "CERTIFICATE");
        assert_eq!(blocks[0].der, vec![1, 2, 3, 4]);
        assert_eq!(blocks[1].label, "PRIVATE KEY");
        assert_eq!(blocks[1].der, vec![5, 6]);
    }

    #[test]
    fn broken_blocks_are_errors() {
        assert!(parse("-----BEGIN CERTIFICATE-----\nAQID\n").is_err());
        assert!(parse("-----BEGIN CERTIFICATE-----\n!!\n-----END CERTIFICATE-----").is_err());
        assert!(parse("no pem here").unwrap().is_empty());
    }
}
