//! One allowlist entry, `HOST[:PORT]`, and how it matches a guest's host.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use std::sync::Arc;

use ipnet::{IpNet, Ipv4Net};

use super::PolicyError;
use super::address::Judged;
use super::host::{Host, HostError};
use super::source::{Provenance, Source};

/// One allowlist entry: which hosts, and which ports on them.
///
/// | entry | hosts | ports |
/// |---|---|---|
/// | `example.com` | that name (any case, trailing dot or not) | any |
/// | `*.example.com:443` | names *under* example.com, not example.com itself | 443 |
/// | `127.0.0.1:8000-8100` | that address | 8000 to 8100 |
/// | `[::1]:80` | that IPv6 address | 80 |
/// | `10.0.0.0/8`, `[fd00::/8]:53` | IP literals inside the range | any, 53 |
/// | `*:443` | every host | 443 |
///
/// Names only ever match names and addresses only addresses: the guest's
/// host is judged as written, before any resolution.
///
/// An IPv6 address that carries an IPv4 address (NAT64, 6to4, Teredo, ...:
/// see [`super::address`]) is granted by an entry only if the entry allows
/// every IPv4 address it carries and each is one the form leads to (a
/// global address; under a local-use NAT64 prefix, a private one too), or
/// names the address itself exactly; a deny entry refuses it if it
/// matches the address or any IPv4 address it carries ([`Rule::denies`]).
///
/// Addresses and ranges have one canonical form, as [`Host`] does: an
/// IPv4-mapped IPv6 address is the IPv4 address it carries, and an IPv6
/// range inside `::ffff:0:0/96` is the IPv4 range it maps
/// (`::ffff:10.0.0.0/104` is `10.0.0.0/8`). So `::/0` is every IPv6
/// address and no IPv4 one, however the IPv4 address is spelled.
///
/// A rule remembers the entry as written and where ([`Provenance`]), so
/// that a decision can name it; two rules that allow the same hosts and
/// ports are equal wherever they were written.
#[derive(Debug, Clone)]
pub struct Rule {
    hosts: HostPattern,
    ports: PortRange,
    /// `None` for the ranges a deny word (`private`) stands for: the deny
    /// entry holds the word and its source.
    provenance: Option<Arc<Provenance>>,
}

impl PartialEq for Rule {
    fn eq(&self, other: &Rule) -> bool {
        self.hosts == other.hosts && self.ports == other.ports
    }
}

impl Eq for Rule {}

/// The host part of a [`Rule`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    /// `*`: every host.
    Any,
    /// One DNS name, normalised like [`Host::Name`].
    Name(String),
    /// `*.suffix`: every name that ends in `.suffix`.
    Subdomains(String),
    /// One address, canonical (IPv4-mapped IPv6 stored as IPv4).
    Ip(IpAddr),
    /// A CIDR range, canonical (see [`canonical_range`]).
    Range(IpNet),
}

/// An inclusive port range; `0-65535` when the entry names no port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PortRange {
    first: u16,
    last: u16,
}

impl PortRange {
    const ANY: PortRange = PortRange {
        first: 0,
        last: u16::MAX,
    };

    fn contains(self, port: u16) -> bool {
        (self.first..=self.last).contains(&port)
    }
}

impl Rule {
    /// Whether this entry, in a grant, allows `host`:`port`.
    pub fn matches(&self, host: &Host, port: u16) -> bool {
        self.grants(&Judged::new(host), port)
    }

    /// Whether this entry, in a deny list, refuses `host`:`port`: as
    /// [`matches`](Self::matches), and also an IPv6 address any IPv4
    /// address of which it matches.
    pub fn denies(&self, host: &Host, port: u16) -> bool {
        self.refuses(&Judged::new(host), port)
    }

    /// [`matches`](Self::matches), for a host already judged.
    pub(super) fn grants(&self, host: &Judged<'_>, port: u16) -> bool {
        self.ports.contains(port) && self.hosts.grants(host)
    }

    /// [`denies`](Self::denies), for a host already judged.
    pub(super) fn refuses(&self, host: &Judged<'_>, port: u16) -> bool {
        self.ports.contains(port) && self.hosts.denies(host)
    }

    /// Whether this entry names `host`:`port` as written, with no regard
    /// for the IPv4 addresses an IPv6 host carries.
    pub(super) fn matches_as_written(&self, host: &Host, port: u16) -> bool {
        self.ports.contains(port) && self.hosts.matches(host)
    }

    /// Whether this entry, in a grant, allows `host` on some port.
    pub fn matches_host(&self, host: &Host) -> bool {
        self.hosts.grants(&Judged::new(host))
    }

    /// Whether this entry names every port (it names none).
    pub fn every_port(&self) -> bool {
        self.ports == PortRange::ANY
    }

    /// An entry for every address in `net` (made canonical), any port.
    pub(super) fn range(net: IpNet) -> Rule {
        Rule {
            hosts: HostPattern::Range(canonical_range(net)),
            ports: PortRange::ANY,
            provenance: None,
        }
    }

    /// `*`: every host, every port, written at `source`.
    pub fn everything(source: Source) -> Rule {
        Rule {
            hosts: HostPattern::Any,
            ports: PortRange::ANY,
            provenance: Some(Arc::new(Provenance {
                entry: "*".to_owned(),
                source,
            })),
        }
    }

    /// This rule as written at `source`.
    pub fn sourced(mut self, source: &Source) -> Rule {
        let entry = match self.provenance.take() {
            Some(p) => Arc::unwrap_or_clone(p).entry,
            None => self.to_string(),
        };
        self.provenance = Some(Arc::new(Provenance {
            entry,
            source: source.clone(),
        }));
        self
    }

    /// [`provenance`](Self::provenance), shared.
    pub(super) fn provenance_shared(&self) -> Arc<Provenance> {
        match &self.provenance {
            Some(p) => Arc::clone(p),
            None => Arc::new(self.provenance()),
        }
    }

    /// The entry as written and where; an entry parsed without a source
    /// is the embedding API's.
    pub fn provenance(&self) -> Provenance {
        match &self.provenance {
            Some(p) => Provenance::clone(p),
            None => Provenance {
                entry: self.to_string(),
                source: Source::Embedding,
            },
        }
    }

    /// Whether this entry names hosts by name (it can only match a name
    /// as written, never an address a name resolved to).
    pub(super) fn names_only(&self) -> bool {
        matches!(
            self.hosts,
            HostPattern::Name(_) | HostPattern::Subdomains(_)
        )
    }
}

/// `net` in its one form: a range inside `::ffff:0:0/96` is the IPv4 range
/// it maps, since canonical hosts never hold a mapped address.
fn canonical_range(net: IpNet) -> IpNet {
    match net {
        IpNet::V6(v6) if v6.prefix_len() >= 96 => match v6.network().to_ipv4_mapped() {
            Some(v4) => Ipv4Net::new(v4, v6.prefix_len() - 96)
                .map(IpNet::V4)
                .unwrap_or(net),
            None => net,
        },
        _ => net,
    }
}

impl HostPattern {
    /// Whether a grant entry of this pattern allows `host`: an address
    /// that carries IPv4 addresses only if every one of them is allowed
    /// and one its form leads to, or it is the entry's own address (or
    /// the entry is `*`).
    fn grants(&self, judged: &Judged<'_>) -> bool {
        if !judged.carries() {
            return self.matches(judged.host);
        }
        match (self, judged.host) {
            (HostPattern::Any, _) => true,
            (HostPattern::Ip(want), Host::Ip(ip)) if want == ip => true,
            _ => judged
                .carried()
                .all(|v4| judged.leads_to(v4) && self.matches(&Host::Ip(v4.into()))),
        }
    }

    /// Whether a deny entry of this pattern refuses `host`: the host
    /// itself, or any IPv4 address it carries.
    fn denies(&self, judged: &Judged<'_>) -> bool {
        self.matches(judged.host)
            || (judged.carries()
                && judged
                    .carried()
                    .any(|v4| self.matches(&Host::Ip(v4.into()))))
    }

    /// Whether the pattern names `host` as written.
    fn matches(&self, host: &Host) -> bool {
        match (self, host) {
            (HostPattern::Any, _) => true,
            (HostPattern::Name(want), Host::Name(name)) => want == name,
            (HostPattern::Subdomains(suffix), Host::Name(name)) => name
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (HostPattern::Ip(want), Host::Ip(ip)) => want == ip,
            (HostPattern::Range(net), Host::Ip(ip)) => net.contains(ip),
            _ => false,
        }
    }
}

impl FromStr for Rule {
    type Err = PolicyError;

    /// Parses `HOST[:PORT]`; see [`Rule`] for the forms.
    fn from_str(entry: &str) -> Result<Rule, PolicyError> {
        let invalid = |reason: String| PolicyError::InvalidEntry {
            entry: entry.to_owned(),
            reason,
        };
        if entry.is_empty() {
            return Err(invalid("empty entry".into()));
        }
        if let Some(host_port) = written_in_url(entry) {
            return Err(invalid(format!(
                "a URL is not an entry: write the host and port alone, `{host_port}`"
            )));
        }
        let (host, port) = split_host_port(entry).map_err(invalid)?;
        let ports = match port {
            None => PortRange::ANY,
            Some(port) => parse_ports(port).map_err(invalid)?,
        };
        let hosts = parse_host_pattern(host).map_err(invalid)?;
        Ok(Rule {
            hosts,
            ports,
            provenance: Some(Arc::new(Provenance {
                entry: entry.to_owned(),
                source: Source::Embedding,
            })),
        })
    }
}

/// The `HOST[:PORT]` a URL (`SCHEME://[USER@]HOST[:PORT][/PATH]`) names,
/// if `entry` is one: its port, or the scheme's for `http` (80) and
/// `https` (443), or none for another scheme without one.
fn written_in_url(entry: &str) -> Option<String> {
    let (scheme, rest) = entry.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    if authority.is_empty() {
        return None;
    }
    let has_port = match authority.rsplit_once(']') {
        Some((_, after)) => after.starts_with(':'),
        None => authority.contains(':'),
    };
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    };
    Some(match default_port {
        Some(port) if !has_port => format!("{authority}:{port}"),
        _ => authority.to_owned(),
    })
}

/// Splits `HOST[:PORT]`, where an IPv6 host with a port is in brackets.
fn split_host_port(entry: &str) -> Result<(&str, Option<&str>), String> {
    if let Some(rest) = entry.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or("a '[' needs its closing ']'")?;
        if !host.contains(':') {
            return Err(format!(
                "brackets hold an IPv6 address or range only; write `{host}` without them"
            ));
        }
        return match after {
            "" => Ok((host, None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((host, Some(port))),
                None => Err("only ':PORT' may follow ']'".into()),
            },
        };
    }
    if entry.contains(']') {
        return Err("a ']' without its opening '['".into());
    }
    match entry.matches(':').count() {
        0 => Ok((entry, None)),
        1 => Ok(entry
            .split_once(':')
            .map_or((entry, None), |(h, p)| (h, Some(p)))),
        // A bare IPv6 address or range: no port (use brackets for one).
        // One whose last group could be a port is refused as ambiguous:
        // `::1:80` is an address, but rarely what was meant.
        _ => match entry.rsplit_once(':') {
            Some((head, tail)) if ambiguous(entry) => Err(format!(
                "ambiguous: for {head} with port {tail} write `[{head}]:{tail}`; for the address {entry} write `[{entry}]`"
            )),
            _ => Ok((entry, None)),
        },
    }
}

fn parse_ports(text: &str) -> Result<PortRange, String> {
    // Digits only: `u16::from_str` would also take `+80`.
    let number = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| s.parse::<u16>().ok())
            .flatten()
            .ok_or_else(|| format!("`{s}` is not a port (0 to 65535)"))
    };
    let (first, last) = match text.split_once('-') {
        Some((a, b)) => (number(a)?, number(b)?),
        None => {
            let p = number(text)?;
            (p, p)
        }
    };
    if first > last {
        return Err(format!("port range {first}-{last} is empty"));
    }
    Ok(PortRange { first, last })
}

fn parse_host_pattern(text: &str) -> Result<HostPattern, String> {
    if text == "*" {
        return Ok(HostPattern::Any);
    }
    if let Some(suffix) = text.strip_prefix("*.") {
        return match Host::parse(suffix) {
            Ok(Host::Name(name)) => Ok(HostPattern::Subdomains(name)),
            Ok(Host::Ip(_)) => Err("a wildcard applies to names, not addresses".into()),
            Err(e) => Err(e.to_string()),
        };
    }
    if text.contains('*') {
        return Err("'*' is only allowed alone or as a leading '*.'".into());
    }
    if text.contains('/') {
        let net: IpNet = text
            .parse()
            .map_err(|_| format!("`{text}` is not a CIDR range like 10.0.0.0/8"))?;
        if net.trunc() != net {
            return Err(format!(
                "`{text}` has bits set past its prefix; did you mean {}?",
                net.trunc()
            ));
        }
        return Ok(HostPattern::Range(canonical_range(net)));
    }
    match Host::parse(text) {
        Ok(Host::Name(name)) => Ok(HostPattern::Name(name)),
        Ok(Host::Ip(ip)) => Ok(HostPattern::Ip(ip)),
        Err(HostError::Empty) => Err("the host is empty".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Whether a bare IPv6 address reads as another address and a port too
/// (`64:ff9b::a00:1`: 64:ff9b::a00 with port 1): refused as written, so
/// printed in brackets.
fn ambiguous(bare: &str) -> bool {
    bare.rsplit_once(':').is_some_and(|(head, tail)| {
        !tail.is_empty()
            && tail.bytes().all(|b| b.is_ascii_digit())
            && head.parse::<std::net::Ipv6Addr>().is_ok()
    })
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bracket = matches!(self.ports, p if p != PortRange::ANY);
        match &self.hosts {
            HostPattern::Any => f.write_str("*")?,
            HostPattern::Name(n) => f.write_str(n)?,
            HostPattern::Subdomains(s) => write!(f, "*.{s}")?,
            HostPattern::Ip(IpAddr::V6(ip)) if bracket || ambiguous(&ip.to_string()) => {
                write!(f, "[{ip}]")?;
            }
            HostPattern::Ip(ip) => write!(f, "{ip}")?,
            HostPattern::Range(net @ IpNet::V6(_)) if bracket => write!(f, "[{net}]")?,
            HostPattern::Range(net) => write!(f, "{net}")?,
        }
        match self.ports {
            PortRange::ANY => Ok(()),
            PortRange { first, last } if first == last => write!(f, ":{first}"),
            PortRange { first, last } => write!(f, ":{first}-{last}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(s: &str) -> Rule {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn allows(entry: &str, host: &str, port: u16) -> bool {
        rule(entry).matches(&Host::parse(host).unwrap(), port)
    }

    #[test]
    fn a_url_is_refused_with_the_entry_it_names() {
        for (url, written) in [
            ("http://127.0.0.1:8765", "127.0.0.1:8765"),
            ("https://example.com/path?q=1", "example.com:443"),
            ("HTTP://Example.com", "Example.com:80"),
            ("http://user@[::1]:8080/", "[::1]:8080"),
            ("https://[::1]/", "[::1]:443"),
            ("redis://cache.internal", "cache.internal"),
        ] {
            let Err(PolicyError::InvalidEntry { entry, reason }) = url.parse::<Rule>() else {
                panic!("{url} was taken as an entry");
            };
            assert_eq!(entry, url);
            assert!(reason.ends_with(&format!("`{written}`")), "{url}: {reason}");
            assert!(written.parse::<Rule>().is_ok(), "{written}");
        }
        // Not a URL: the reason is the entry's own.
        let Err(PolicyError::InvalidEntry { reason, .. }) = "http://".parse::<Rule>() else {
            panic!("http:// was taken as an entry");
        };
        assert!(!reason.contains("URL"), "{reason}");
    }

    #[test]
    fn names_match_names_only_and_ignore_case_and_trailing_dot() {
        assert!(allows("example.com", "EXAMPLE.com.", 443));
        assert!(allows("Example.COM.", "example.com", 1));
        assert!(!allows("example.com", "www.example.com", 443));
        assert!(!allows("localhost", "127.0.0.1", 80));
        assert!(!allows("127.0.0.1", "localhost", 80));
    }

    #[test]
    fn wildcards_match_subdomains_but_not_the_domain_itself() {
        assert!(allows("*.example.com", "a.example.com", 1));
        assert!(allows("*.example.com", "a.b.example.com", 1));
        assert!(!allows("*.example.com", "example.com", 1));
        assert!(!allows("*.example.com", "badexample.com", 1));
        assert!(!allows("*.example.com", "a.example.com.evil.net", 1));
    }

    #[test]
    fn ports_and_ranges() {
        assert!(allows("127.0.0.1:8000-8100", "127.0.0.1", 8000));
        assert!(allows("127.0.0.1:8000-8100", "127.0.0.1", 8100));
        assert!(!allows("127.0.0.1:8000-8100", "127.0.0.1", 8101));
        assert!(!allows("127.0.0.1:80", "127.0.0.1", 0));
        assert!(allows("127.0.0.1", "127.0.0.1", 0));
        assert!(allows("127.0.0.1:0", "127.0.0.1", 0));
        assert!(allows("*:443", "anything.example", 443));
        assert!(!allows("*:443", "anything.example", 80));
    }

    #[test]
    fn addresses_compare_as_addresses() {
        assert!(allows("127.0.0.1", "::ffff:127.0.0.1", 1));
        assert!(allows("127.0.0.1", "[::ffff:7f00:1]", 1));
        assert!(allows("::ffff:127.0.0.1", "127.0.0.1", 1));
        assert!(!allows("127.0.0.1", "::1", 1));
        assert!(allows("[::1]:80", "0:0:0:0:0:0:0:1", 80));
        assert!(allows("::1", "[::1]", 80));
        assert!(!allows("127.0.0.1", "0.0.0.0", 1));
    }

    #[test]
    fn an_ipv6_range_never_admits_an_ipv4_address_in_mapped_form() {
        for range in ["::/0", "::/1", "::/80", "::fffe:0:0/95"] {
            for v4 in ["::ffff:127.0.0.1", "::ffff:169.254.169.254", "127.0.0.1"] {
                assert!(!allows(range, v4, 80), "{range} admitted {v4}");
            }
        }
        assert!(allows("::/0", "::1", 80));
        assert!(!allows("[::/0]:80", "::ffff:0.0.0.0", 80));
    }

    #[test]
    fn a_mapped_range_is_the_ipv4_range_it_maps() {
        assert_eq!(rule("::ffff:10.0.0.0/104"), rule("10.0.0.0/8"));
        assert_eq!(rule("[::ffff:0:0/96]:53"), rule("0.0.0.0/0:53"));
        for spelling in ["10.0.0.1", "::ffff:10.0.0.1", "::ffff:a00:1"] {
            assert!(allows("::ffff:10.0.0.0/104", spelling, 1), "{spelling}");
            assert!(allows("10.0.0.0/8", spelling, 1), "{spelling}");
        }
        assert!(!allows("::ffff:10.0.0.0/104", "11.0.0.1", 1));
    }

    #[test]
    fn an_ipv6_form_that_carries_an_ipv4_address_is_granted_by_that_address_only() {
        // 192.0.2.0/24 is documentation space: global, as far as the
        // policy knows (it is not in `private`).
        for carrier in [
            "64:ff9b::c000:205",
            "64:ff9b:1::c000:205",
            "2002:c000:205::1",
            "::c000:205",
            "::ffff:0:c000:205",
        ] {
            assert!(allows("192.0.2.5", carrier, 80), "{carrier}");
            assert!(allows("192.0.2.0/24", carrier, 80), "{carrier}");
            assert!(allows(&format!("[{carrier}]:80"), carrier, 80), "{carrier}");
            assert!(allows("*:80", carrier, 80), "{carrier}");
            for v6_range in ["::/0", "2000::/3", "64:ff9b::/96", "2002::/16"] {
                assert!(
                    !allows(v6_range, carrier, 80),
                    "{v6_range} granted {carrier}"
                );
            }
            assert!(!allows("192.0.2.6", carrier, 80), "{carrier}");
        }
        // Teredo carries two: both must be granted.
        let teredo = "2001:0:c000:205::3fff:fdfa";
        assert!(allows("192.0.2.5", teredo, 1));
        assert!(!allows("192.0.2.5", "2001:0:c000:205::1", 1));
        // An exact entry for the IPv6 form does not grant the IPv4 address.
        assert!(!allows("[64:ff9b::c000:205]", "192.0.2.5", 80));
    }

    #[test]
    fn a_grant_of_a_loopback_or_private_address_does_not_admit_forms_that_leave_the_machine() {
        // Each of these is routed out of the machine by the IPv6 route;
        // none leads to the loopback or LAN address the grant names.
        for (grant, carrier) in [
            ("127.0.0.1", "64:ff9b::7f00:1"),
            ("127.0.0.1", "2002:7f00:1::1"),
            ("127.0.0.1", "::7f00:1"),
            ("127.0.0.1", "::ffff:0:7f00:1"),
            ("127.0.0.0/8", "64:ff9b::7f00:1"),
            ("10.0.0.5", "64:ff9b::a00:5"),
            ("10.0.0.5", "2002:a00:5::1"),
            ("10.0.0.0/8", "::a00:5"),
            ("127.0.0.1", "64:ff9b:1::7f00:1"),
            ("169.254.169.254", "64:ff9b:1::a9fe:a9fe"),
        ] {
            assert!(!allows(grant, carrier, 80), "{grant} granted {carrier}");
            // Written exactly, the user says they mean it.
            assert!(allows(&format!("[{carrier}]"), carrier, 80), "{carrier}");
        }
        // The operator's own translator (local-use prefix) may reach its
        // network's private addresses.
        assert!(allows("10.0.0.5", "64:ff9b:1::a00:5", 80));
        // The IPv4-mapped form is the address itself, to the kernel too.
        assert!(allows("127.0.0.1", "::ffff:127.0.0.1", 80));
    }

    #[test]
    fn a_deny_entry_refuses_an_address_as_written_or_any_ipv4_address_it_carries() {
        let denies = |entry: &str, host: &str| rule(entry).denies(&Host::parse(host).unwrap(), 80);
        assert!(denies("10.0.0.0/8", "64:ff9b::a00:5"));
        assert!(denies("10.0.0.0/8", "2001:0:a00:5::1"), "Teredo's server");
        assert!(
            denies("10.0.0.0/8", "2001:0:808:808::f5ff:fffa"),
            "Teredo's client"
        );
        assert!(denies("64:ff9b::/96", "64:ff9b::808:808"));
        assert!(
            !denies("64:ff9b::/96", "8.8.8.8"),
            "a NAT64 prefix is not IPv4"
        );
        assert!(denies("2000::/3", "2002:808:808::1"), "as written");
        assert!(!denies("10.0.0.0/8", "2002:808:808::1"));
        assert!(!denies("10.0.0.0/8", "2001:db8::a00:5"));
    }

    #[test]
    fn cidr_ranges_match_ip_literals_only() {
        assert!(allows("10.0.0.0/8", "10.1.2.3", 1));
        assert!(allows("10.0.0.0/8", "::ffff:10.1.2.3", 1));
        assert!(!allows("10.0.0.0/8", "11.0.0.1", 1));
        assert!(!allows("10.0.0.0/8", "ten.example", 1));
        assert!(allows("[fd00::/8]:53", "fd12::1", 53));
        assert!(!allows("[fd00::/8]:53", "fd12::1", 54));
        assert!(allows("fd00::/8", "fd12::1", 54));
    }

    #[test]
    fn bad_entries_are_refused_with_a_reason() {
        for bad in [
            "",
            ":80",
            "a:b",
            "a:70000",
            "a:90-80",
            "[::1",
            "[::1]80",
            "*.*.com",
            "ex*ample.com",
            "10.1.2.3/8",
            "10.0.0.0/33",
            "127.1",
            "*.127.0.0.1",
            "a.example:+80",
            "a.example:8 0",
            "a.example:-80",
            "[example.com]:80",
            "[10.0.0.0/8]",
            "[*.example.com]:443",
            "[127.0.0.1]:80",
            "example.com]:80",
            "::1:80",
            "fe80::1:443",
            ".example.com",
            "a b.example",
        ] {
            assert!(bad.parse::<Rule>().is_err(), "{bad:?} should be refused");
        }
        let err = |s: &str| s.parse::<Rule>().unwrap_err().to_string();
        assert!(err("10.1.2.3/8").contains("10.0.0.0/8"));
        assert!(err("::1:80").contains("[::1]:80"), "{}", err("::1:80"));
        assert!(err("[example.com]:80").contains("brackets hold an IPv6"));
        assert!(err("a.example:+80").contains("not a port"));
        // Still fine: IPv6 forms whose last group cannot be a port.
        for good in [
            "::1",
            "2001:db8::1",
            "::ffff:10.0.0.1",
            "fd00::/8",
            "[::1:80]",
        ] {
            assert!(good.parse::<Rule>().is_ok(), "{good}");
        }
    }

    #[test]
    fn display_round_trips() {
        for entry in [
            "example.com",
            "*.example.com:443",
            "127.0.0.1:8000-8100",
            "[::1]:80",
            "::1",
            "10.0.0.0/8",
            "[fd00::/8]:53",
            "*:443",
            // Bare, it would read as 64:ff9b::a00 with port 1.
            "[64:ff9b::a00:1]",
        ] {
            assert_eq!(rule(entry).to_string(), entry);
            assert_eq!(rule(&rule(entry).to_string()), rule(entry));
        }
    }
}
