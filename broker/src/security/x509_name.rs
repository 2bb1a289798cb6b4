//! The subject of an X.509 certificate as Java's
//! `X500Principal.getName()` (RFC 2253) writes it, which is the name of
//! Kafka's default TLS principal (`User:CN=client,O=Example,C=US`).
//!
//! Only the few DER structures on the way to the subject are read, and
//! every length is checked, so a hostile certificate yields `None`.

/// The certificate's subject DN, or `None` if the DER is malformed.
pub fn subject_dn(cert_der: &[u8]) -> Option<String> {
    let (certificate, _) = Tlv::read(cert_der, SEQUENCE)?;
    let (tbs, _) = Tlv::read(certificate, SEQUENCE)?;
    let mut rest = tbs;
    // [0] EXPLICIT version is optional.
    if rest.first() == Some(&0xa0) {
        rest = Tlv::read(rest, 0xa0)?.1;
    }
    for tag in [INTEGER, SEQUENCE, SEQUENCE, SEQUENCE] {
        // serialNumber, signature, issuer, validity
        rest = Tlv::read(rest, tag)?.1;
    }
    let (subject, _) = Tlv::read(rest, SEQUENCE)?;
    format_name(subject)
}

const INTEGER: u8 = 0x02;
const OID: u8 = 0x06;
const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;

struct Tlv;

impl Tlv {
    /// Reads one element with tag `tag`: its contents and what follows.
    fn read(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
        let (found, contents, rest) = Self::any(input)?;
        (found == tag).then_some((contents, rest))
    }

    /// Reads one element: tag, contents, rest (short tags only, as X.509
    /// names use).
    fn any(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
        let (&tag, input) = input.split_first()?;
        let (&first, mut input) = input.split_first()?;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || input.len() < n {
                return None;
            }
            let len = input[..n]
                .iter()
                .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
            input = &input[n..];
            len
        };
        (input.len() >= len).then(|| (tag, &input[..len], &input[len..]))
    }
}

/// RDNs in reverse order, comma-separated; multi-valued RDNs joined by `+`.
fn format_name(mut rdns: &[u8]) -> Option<String> {
    let mut parts = Vec::new();
    while !rdns.is_empty() {
        let (mut set, rest) = Tlv::read(rdns, SET)?;
        rdns = rest;
        let mut attributes = Vec::new();
        while !set.is_empty() {
            let (attribute, rest) = Tlv::read(set, SEQUENCE)?;
            set = rest;
            attributes.push(format_attribute(attribute)?);
        }
        parts.push(attributes.join("+"));
    }
    parts.reverse();
    Some(parts.join(","))
}

fn format_attribute(attribute: &[u8]) -> Option<String> {
    let (oid, value) = Tlv::read(attribute, OID)?;
    let oid = dotted_oid(oid)?;
    let keyword = match oid.as_str() {
        "2.5.4.3" => Some("CN"),
        "2.5.4.6" => Some("C"),
        "2.5.4.7" => Some("L"),
        "2.5.4.8" => Some("ST"),
        "2.5.4.9" => Some("STREET"),
        "2.5.4.10" => Some("O"),
        "2.5.4.11" => Some("OU"),
        "0.9.2342.19200300.100.1.1" => Some("UID"),
        "0.9.2342.19200300.100.1.25" => Some("DC"),
        _ => None,
    };
    let (tag, contents, _) = Tlv::any(value)?;
    match (keyword, decode_string(tag, contents)) {
        (Some(keyword), Some(text)) => Some(format!("{keyword}={}", escape(&text))),
        // Java writes other attributes as OID=#<hex of the DER value>.
        _ => Some(format!("{oid}=#{}", hex(value))),
    }
}

fn dotted_oid(bytes: &[u8]) -> Option<String> {
    let mut arcs = Vec::new();
    let mut value: u64 = 0;
    for (i, b) in bytes.iter().enumerate() {
        value = value.checked_mul(128)? | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (value / 40).min(2);
                arcs.push(first);
                arcs.push(value - first * 40);
            } else {
                arcs.push(value);
            }
            value = 0;
        } else if i + 1 == bytes.len() {
            return None;
        }
    }
    (!arcs.is_empty()).then(|| {
        arcs.iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(".")
    })
}

fn decode_string(tag: u8, contents: &[u8]) -> Option<String> {
    match tag {
        // UTF8String, PrintableString, IA5String
        0x0c | 0x13 | 0x16 => String::from_utf8(contents.to_vec()).ok(),
        // TeletexString, read as Latin-1 as Java does
        0x14 => Some(contents.iter().map(|&b| char::from(b)).collect()),
        // BMPString
        0x1e => {
            let pairs = contents.chunks_exact(2);
            if !pairs.remainder().is_empty() {
                return None;
            }
            let units: Vec<u16> = pairs.map(|c| u16::from_be_bytes([c[0], c[1]])).collect();
            String::from_utf16(&units).ok()
        }
        _ => None,
    }
}

/// RFC 2253 escaping of an attribute value.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, KeyPair};

    fn cert_with(dn: &[(DnType, &str)]) -> Vec<u8> {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (ty, value) in dn {
            params.distinguished_name.push(ty.clone(), *value);
        }
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn subject_is_written_as_java_does() {
        let der = cert_with(&[
            (DnType::CountryName, "US"),
            (DnType::OrganizationName, "Acme, Inc"),
            (DnType::CommonName, "client-1"),
        ]);
        assert_eq!(subject_dn(&der).unwrap(), "CN=client-1,O=Acme\\, Inc,C=US");
    }

    #[test]
    fn unknown_attributes_are_hex() {
        let der = cert_with(&[(DnType::CustomDnType(vec![1, 2, 3, 4]), "x")]);
        // UTF8String "x": 0c 01 78
        assert_eq!(subject_dn(&der).unwrap(), "1.2.3.4=#0c0178");
    }

    #[test]
    fn malformed_der_is_none() {
        let der = cert_with(&[(DnType::CommonName, "c")]);
        for cut in 0..der.len() {
            assert_eq!(subject_dn(&der[..cut]), None);
        }
        assert_eq!(subject_dn(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
        assert_eq!(subject_dn(&[]), None);
    }
}
