//! Deny lists: entries that win over any grant, and the words `private` and
//! `metadata` for the address ranges a sandboxed client is most often turned
//! against.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;

use super::PolicyError;
use super::host::Host;
use super::rule::Rule;

/// The ranges `private` names: where "my network" and "this machine" live.
/// Loopback, RFC 1918, link-local, CGNAT (RFC 6598), "this network"
/// (0.0.0.0/8, which Linux routes to this machine), unique-local IPv6 and
/// the unspecified IPv6 address. The IPv4-mapped forms need no entries of
/// their own: hosts and ranges are canonical, so `::ffff:10.0.0.1` is
/// judged as `10.0.0.1`.
pub const PRIVATE_RANGES: &[&str] = &[
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "::/128",
    "::1/128",
    "fc00::/7",
    "fe80::/10",
];

/// The addresses `metadata` names: the cloud instance-metadata services
/// (AWS, GCP, Azure, OpenStack and others use 169.254.169.254; AWS's IPv6
/// endpoint is fd00:ec2::254), which hand out credentials to whatever can
/// reach them.
pub const METADATA_ADDRESSES: &[&str] = &["169.254.169.254/32", "fd00:ec2::254/128"];

/// One deny entry: a word or a [`Rule`], kept as written for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenyEntry {
    written: String,
    rules: Vec<Rule>,
}

impl DenyEntry {
    /// The entry as the user wrote it (`private`, `10.0.0.0/8:22`, ...).
    pub fn as_written(&self) -> &str {
        &self.written
    }

    /// Whether the entry matches `host`:`port` as written.
    pub fn matches(&self, host: &Host, port: u16) -> bool {
        self.rules.iter().any(|r| r.matches(host, port))
    }

    /// Whether the entry matches `host` on every port.
    pub fn matches_every_port(&self, host: &Host) -> bool {
        self.rules
            .iter()
            .any(|r| r.every_port() && r.matches_host(host))
    }

    /// Whether the entry matches an address a name resolved to. Entries
    /// that name hosts by name were judged on the name already.
    fn matches_address(&self, ip: IpAddr, port: u16) -> bool {
        let host = Host::ip(ip);
        self.rules
            .iter()
            .any(|r| !r.names_only() && r.matches(&host, port))
    }
}

impl FromStr for DenyEntry {
    type Err = PolicyError;

    /// `private`, `metadata`, or an entry as in allow lists ([`Rule`]).
    fn from_str(entry: &str) -> Result<DenyEntry, PolicyError> {
        let ranges = |list: &[&str]| -> Vec<Rule> {
            list.iter()
                .filter_map(|net| net.parse::<IpNet>().ok())
                .map(Rule::range)
                .collect()
        };
        let rules = match entry {
            "private" => ranges(PRIVATE_RANGES),
            "metadata" => ranges(METADATA_ADDRESSES),
            _ => vec![entry.parse()?],
        };
        Ok(DenyEntry {
            written: entry.to_owned(),
            rules,
        })
    }
}

impl fmt::Display for DenyEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.written)
    }
}

/// What one capability refuses, whatever its grant allows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DenyList(Vec<DenyEntry>);

impl DenyList {
    /// The first entry that matches `host`:`port` as written.
    pub fn matching(&self, host: &Host, port: u16) -> Option<&DenyEntry> {
        self.0.iter().find(|e| e.matches(host, port))
    }

    /// The first entry that matches an address a name resolved to.
    pub fn matching_address(&self, ip: IpAddr, port: u16) -> Option<&DenyEntry> {
        self.0.iter().find(|e| e.matches_address(ip, port))
    }

    /// Whether the list has no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The entries.
    pub fn entries(&self) -> &[DenyEntry] {
        &self.0
    }

    pub(super) fn extend(&mut self, other: DenyList) {
        self.0.extend(other.0);
    }
}

impl FromStr for DenyList {
    type Err = PolicyError;

    /// A comma-separated list of deny entries; an empty list is an error.
    fn from_str(list: &str) -> Result<DenyList, PolicyError> {
        super::entries(list, PolicyError::EmptyDenyList).map(DenyList)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denies(list: &str, host: &str, port: u16) -> bool {
        let list: DenyList = list.parse().unwrap();
        list.matching(&Host::parse(host).unwrap(), port).is_some()
    }

    #[test]
    fn private_covers_every_spelling_of_this_machine_and_the_local_network() {
        for host in [
            "127.0.0.1",
            "127.1.2.3",
            "::1",
            "::ffff:127.0.0.1",
            "0.0.0.0",
            "::",
            "::ffff:0.0.0.0",
            "10.1.2.3",
            "::ffff:10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.1.1",
            "100.64.0.1",
            "100.127.255.255",
            "fd12::1",
            "fc00::1",
            "fe80::1",
        ] {
            assert!(denies("private", host, 80), "private should deny {host}");
        }
        for host in [
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2001:db8::1",
            "::ffff:8.8.8.8",
            "example.com",
        ] {
            assert!(
                !denies("private", host, 80),
                "private should not deny {host}"
            );
        }
    }

    #[test]
    fn metadata_covers_both_endpoints_in_every_spelling() {
        for host in ["169.254.169.254", "::ffff:169.254.169.254", "fd00:ec2::254"] {
            assert!(denies("metadata", host, 80), "{host}");
        }
        assert!(!denies("metadata", "169.254.169.253", 80));
    }

    #[test]
    fn an_empty_deny_list_says_it_is_a_deny_list() {
        assert_eq!(" ".parse::<DenyList>(), Err(PolicyError::EmptyDenyList));
        let err = "private,,metadata".parse::<DenyList>().unwrap_err();
        assert!(err.to_string().starts_with("invalid entry ``"), "{err}");
    }

    #[test]
    fn entries_keep_their_ports_and_names() {
        assert!(denies("*:22", "example.com", 22));
        assert!(!denies("*:22", "example.com", 23));
        assert!(denies("internal.example", "INTERNAL.example.", 1));
        let list: DenyList = "internal.example,10.0.0.0/8:5432".parse().unwrap();
        // Names were judged as written; only address entries judge a
        // resolved address.
        assert!(
            list.matching_address("10.0.0.5".parse().unwrap(), 5432)
                .is_some()
        );
        assert!(
            list.matching_address("10.0.0.5".parse().unwrap(), 80)
                .is_none()
        );
        assert!(
            list.matching_address("::ffff:10.0.0.5".parse().unwrap(), 5432)
                .is_some()
        );
    }
}
