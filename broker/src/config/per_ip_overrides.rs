//! `max.connections.per.ip.overrides`: `ip:count` pairs, IP addresses only.

use std::collections::HashMap;
use std::net::IpAddr;

/// Parses `max.connections.per.ip.overrides`: `ip:count` pairs separated
/// by commas.
pub fn parse_per_ip_overrides(value: &str) -> Result<HashMap<IpAddr, usize>, String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            let (host, count) = entry
                .rsplit_once(':')
                .ok_or_else(|| format!("'{entry}' is not of the form ip:count"))?;
            let ip = host
                .trim_matches(|c| c == '[' || c == ']')
                .parse::<IpAddr>()
                .map_err(|_| {
                    format!("'{host}' is not an IP address (Ottla takes no host names here)")
                })?;
            let count = count
                .parse::<usize>()
                .map_err(|_| format!("'{count}' for {host} is not a non-negative count"))?;
            Ok((ip, count))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_ip_overrides_are_parsed_and_checked() {
        let parsed = parse_per_ip_overrides("127.0.0.1:10, [::1]:0,").unwrap();
        assert_eq!(parsed[&"127.0.0.1".parse::<IpAddr>().unwrap()], 10);
        assert_eq!(parsed[&"::1".parse::<IpAddr>().unwrap()], 0);
        assert!(parse_per_ip_overrides("").unwrap().is_empty());
        assert!(parse_per_ip_overrides("localhost:3")
            .unwrap_err()
            .contains("not an IP address"));
        assert!(parse_per_ip_overrides("10.0.0.1:-1")
            .unwrap_err()
            .contains("non-negative"));
        assert!(parse_per_ip_overrides("10.0.0.1")
            .unwrap_err()
            .contains("ip:count"));
    }
}
