//! The host a guest names in `connect` or `listen`, judged as written.
//!
//! A guest's host string is either a DNS name or a canonical IP literal, and
//! nothing in between. The in-between forms are where allowlists get
//! sneaked past: `127.1`, `0x7f.0.0.1`, `2130706433` and `0177.0.0.1` are all
//! 127.0.0.1 to `inet_aton` (and so to `getaddrinfo`), yet none of them is the
//! text `127.0.0.1`. Treating them as names would let the resolver turn a
//! name the policy allowed into an address it did not. So such a host is
//! refused outright with [`HostError::AmbiguousNumeric`] rather than guessed
//! at, the same rule the WHATWG URL standard uses to decide that a host is
//! an IPv4 address ("ends in a number").

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

/// Longest DNS name, in characters, without the trailing dot (RFC 1035 §2.3.4).
const MAX_NAME_LEN: usize = 253;
/// Longest DNS label (RFC 1035 §2.3.4).
const MAX_LABEL_LEN: usize = 63;

/// A host as a guest wrote it, checked and normalised for comparison.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    /// A DNS name: lower case, without a trailing dot.
    Name(String),
    /// An IP literal, in its one canonical form: an IPv4-mapped IPv6
    /// address (`::ffff:a.b.c.d`) is the IPv4 address it carries, since that
    /// is where a connection to it goes. No two spellings of one
    /// destination are ever different `Host`s.
    Ip(IpAddr),
}

/// Why a guest's host string is not a host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// The string is empty.
    #[error("the host is empty")]
    Empty,
    /// The string looks numeric but is not a canonical IP literal.
    #[error(
        "`{0}` is not a canonical IP address (write IPv4 as four decimal octets, like 127.0.0.1)"
    )]
    AmbiguousNumeric(String),
    /// The string is neither an IP literal nor a valid DNS name.
    #[error("`{host}` is not a valid host name: {reason}")]
    InvalidName {
        /// The string as given.
        host: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl Host {
    /// Parses a host as a guest wrote it: an IP literal (IPv6 optionally in
    /// brackets) or a DNS name. Names compare case-insensitively and a
    /// trailing dot names the same host.
    ///
    /// # Errors
    /// [`HostError`] for an empty string, a numeric form that is not a
    /// canonical IP literal, or an invalid name.
    pub fn parse(text: &str) -> Result<Host, HostError> {
        if text.is_empty() {
            return Err(HostError::Empty);
        }
        if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            return inner
                .parse::<Ipv6Addr>()
                .map(|ip| Host::Ip(IpAddr::V6(ip).to_canonical()))
                .map_err(|_| HostError::InvalidName {
                    host: text.to_owned(),
                    reason: "brackets must hold an IPv6 address",
                });
        }
        if let Ok(ip) = text.parse::<IpAddr>() {
            return Ok(Host::Ip(ip.to_canonical()));
        }
        parse_name(text).map(Host::Name)
    }

    /// An address as a host: canonical, as [`Host::parse`] makes it.
    pub fn ip(ip: IpAddr) -> Host {
        Host::Ip(ip.to_canonical())
    }

    /// The address, for an IP literal.
    pub fn as_ip(&self) -> Option<IpAddr> {
        match self {
            Host::Ip(ip) => Some(*ip),
            Host::Name(_) => None,
        }
    }
}

impl fmt::Display for Host {
    /// Names as normalised; IPv6 in brackets so a `:PORT` can follow.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
        }
    }
}

/// Checks a DNS name and returns it lower-cased without its trailing dot.
fn parse_name(text: &str) -> Result<String, HostError> {
    let invalid = |reason| HostError::InvalidName {
        host: text.to_owned(),
        reason,
    };
    let name = text.strip_suffix('.').unwrap_or(text);
    if name.is_empty() {
        return Err(invalid("a name needs at least one label"));
    }
    if name.starts_with('.') {
        return Err(invalid("a name cannot start with '.'"));
    }
    if name.contains('%') && name.contains(':') {
        return Err(invalid(
            "an IPv6 zone (like %eth0) is not supported: give the address alone",
        ));
    }
    if name.contains(':') {
        return Err(invalid(
            "':' appears only in IPv6 addresses; a port is given separately",
        ));
    }
    if name.contains(char::is_whitespace) {
        return Err(invalid("a name cannot contain spaces"));
    }
    if !name.is_ascii() {
        return Err(invalid(
            "only ASCII names are accepted; write internationalised names in punycode (xn--...)",
        ));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(invalid("a name is at most 253 characters"));
    }
    let name = name.to_ascii_lowercase();
    for label in name.split('.') {
        if label.is_empty() {
            return Err(invalid("empty label (two dots in a row)"));
        }
        if label.len() > MAX_LABEL_LEN {
            return Err(invalid("a label is at most 63 characters"));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(invalid("a label cannot start or end with '-'"));
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(invalid("a label holds only letters, digits, '-' and '_'"));
        }
    }
    if name.split('.').next_back().is_some_and(is_numeric_label) {
        return Err(HostError::AmbiguousNumeric(text.to_owned()));
    }
    Ok(name)
}

/// True for a label `inet_aton` would read as a number: decimal, octal
/// (decimal digits with a leading 0) or hexadecimal with a `0x` prefix.
fn is_numeric_label(label: &str) -> bool {
    let label = label.to_ascii_lowercase();
    if let Some(hex) = label.strip_prefix("0x") {
        return hex.bytes().all(|b| b.is_ascii_hexdigit());
    }
    label.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Host {
        Host::Name(s.to_owned())
    }

    #[test]
    fn names_are_lowercased_and_lose_the_trailing_dot() {
        assert_eq!(Host::parse("Example.COM.").unwrap(), name("example.com"));
        assert_eq!(Host::parse("localhost").unwrap(), name("localhost"));
        assert_eq!(
            Host::parse("_srv.a-b.example").unwrap(),
            name("_srv.a-b.example")
        );
    }

    #[test]
    fn ip_literals_parse_with_or_without_brackets() {
        assert_eq!(
            Host::parse("127.0.0.1").unwrap(),
            Host::Ip("127.0.0.1".parse().unwrap())
        );
        assert_eq!(Host::parse("::1").unwrap(), Host::parse("[::1]").unwrap());
        assert!(Host::parse("[127.0.0.1]").is_err());
    }

    #[test]
    fn numeric_forms_that_are_not_canonical_are_refused() {
        for spoof in [
            "127.1",
            "0x7f.0.0.1",
            "0x7F000001",
            "2130706433",
            "0177.0.0.1",
            "127.000.000.001",
            "1.2.3.4.5",
            "example.0x10",
        ] {
            assert!(
                matches!(Host::parse(spoof), Err(HostError::AmbiguousNumeric(_))),
                "{spoof} should be refused as ambiguous"
            );
        }
    }

    #[test]
    fn names_that_only_contain_digits_elsewhere_are_fine() {
        assert_eq!(Host::parse("1.example.com").unwrap(), name("1.example.com"));
        assert_eq!(Host::parse("0x.example").unwrap(), name("0x.example"));
    }

    #[test]
    fn malformed_names_are_refused() {
        for bad in [
            "",
            ".",
            "a..b",
            "-a.com",
            "a-.com",
            "a b",
            "fe80::1%eth0",
            "bücher.de",
            "a:80",
        ] {
            assert!(Host::parse(bad).is_err(), "{bad:?} should be refused");
        }
        let long_label = format!("{}.com", "a".repeat(64));
        assert!(Host::parse(&long_label).is_err());
    }

    #[test]
    fn mapped_ipv6_is_the_ipv4_it_carries() {
        let v4 = Host::parse("127.0.0.1").unwrap();
        for mapped in [
            "::ffff:127.0.0.1",
            "[::ffff:127.0.0.1]",
            "::FFFF:7f00:1",
            "0:0:0:0:0:ffff:127.0.0.1",
        ] {
            assert_eq!(Host::parse(mapped).unwrap(), v4, "{mapped}");
        }
        assert_eq!(v4.to_string(), "127.0.0.1");
        // The deprecated IPv4-compatible form is a different (IPv6) address.
        assert_ne!(Host::parse("::127.0.0.1").unwrap(), v4);
    }

    #[test]
    fn messages_say_what_is_wrong() {
        let reason = |s: &str| Host::parse(s).unwrap_err().to_string();
        assert!(reason(".example.com").contains("cannot start with '.'"));
        assert!(reason("a..b").contains("two dots in a row"));
        assert!(reason("a b.example").contains("spaces"));
        assert!(reason("fe80::1%eth0").contains("zone"));
        assert!(reason("a.example:80").contains("port"));
    }

    #[test]
    fn display_brackets_ipv6() {
        assert_eq!(Host::parse("::1").unwrap().to_string(), "[::1]");
        assert_eq!(Host::parse("LocalHost.").unwrap().to_string(), "localhost");
    }
}
