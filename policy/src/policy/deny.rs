//! Deny lists: entries that win over any grant, and the words `private` and
//! `metadata` for the address ranges a sandboxed client is most often turned
//! against.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::str::FromStr;
use std::sync::Arc;

use ipnet::IpNet;

use super::PolicyError;
use super::address::{Judged, carried_ipv4};
use super::host::Host;
use super::rule::Rule;
use super::source::{Provenance, Source};

/// The ranges `private` names: where "my network" and "this machine" live,
/// everything a packet can reach without crossing the internet.
///
/// - IPv4: "this network" (0.0.0.0/8, which Linux routes to this
///   machine), RFC 1918, CGNAT (100.64.0.0/10, RFC 6598), loopback,
///   link-local, the IETF protocol block (192.0.0.0/24: DS-Lite, NAT64
///   discovery), the benchmarking range (198.18.0.0/15, which local
///   "fake-IP" DNS proxies hand out), multicast (224.0.0.0/4: SSDP, mDNS)
///   and the reserved 240.0.0.0/4 with the limited broadcast
///   255.255.255.255.
/// - IPv6: unspecified and loopback, unique-local (fc00::/7), link-local
///   (fe80::/10), the deprecated site-local (fec0::/10) and multicast
///   (ff00::/8).
///
/// An IPv6 address that carries an IPv4 address (NAT64, 6to4, Teredo,
/// IPv4-compatible, SIIT: [`super::address`]) is denied when the IPv4
/// address it carries is; the IPv4-mapped form is the IPv4 address
/// itself ([`Host`] stores it so).
pub const PRIVATE_RANGES: &[&str] = &[
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "::/128",
    "::1/128",
    "fc00::/7",
    "fe80::/10",
    "fec0::/10",
    "ff00::/8",
];

/// The addresses `metadata` names: the cloud instance-metadata and
/// credential services, which hand out credentials to whatever can reach
/// them. 169.254.169.254 serves AWS, Google Cloud, Azure, Oracle Cloud,
/// OpenStack, DigitalOcean and others; the rest are listed with their
/// sources in docs/grants.md.
pub const METADATA_ADDRESSES: &[&str] = &[
    // AWS EC2 instance metadata (IPv4, and IPv6 on Nitro instances).
    "169.254.169.254/32",
    "fd00:ec2::254/128",
    // AWS ECS task metadata and task-role credentials.
    "169.254.170.2/32",
    // AWS EKS Pod Identity Agent.
    "169.254.170.23/32",
    "fd00:ec2::23/128",
    // Alibaba Cloud ECS metadata.
    "100.100.100.200/32",
    // Azure WireServer (VM agent, extensions' settings).
    "168.63.129.16/32",
    // Oracle Cloud at Customer (and Classic) instance metadata.
    "192.0.0.192/32",
];

/// One deny entry: a word or a [`Rule`], kept as written, with where it
/// was written, for messages and the audit trail. Two entries that deny
/// the same are equal wherever they were written.
#[derive(Debug, Clone)]
pub struct DenyEntry {
    written: String,
    rules: Vec<Rule>,
    source: Arc<Source>,
}

impl PartialEq for DenyEntry {
    fn eq(&self, other: &DenyEntry) -> bool {
        self.written == other.written && self.rules == other.rules
    }
}

impl Eq for DenyEntry {}

impl DenyEntry {
    /// The entry as the user wrote it (`private`, `10.0.0.0/8:22`, ...).
    pub fn as_written(&self) -> &str {
        &self.written
    }

    /// Where the entry was written.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// [`source`](Self::source), shared.
    pub(super) fn source_shared(&self) -> &Arc<Source> {
        &self.source
    }

    /// The entry as written and where.
    pub fn provenance(&self) -> Provenance {
        Provenance {
            entry: self.written.clone(),
            source: Source::clone(&self.source),
        }
    }

    /// Whether the entry matches `host`:`port` as written, or an IPv4
    /// address the host carries ([`Rule::denies`]).
    pub fn matches(&self, host: &Host, port: u16) -> bool {
        self.refuses(&Judged::new(host), port)
    }

    fn refuses(&self, host: &Judged<'_>, port: u16) -> bool {
        self.rules.iter().any(|r| r.refuses(host, port))
    }

    /// Whether the entry matches `host` on every port.
    pub fn matches_every_port(&self, host: &Host) -> bool {
        self.rules
            .iter()
            .any(|r| r.every_port() && r.matches_host(host))
    }

    /// Whether the entry matches an address a name resolved to. Entries
    /// that name hosts by name were judged on the name already.
    fn matches_address(&self, address: &Judged<'_>, port: u16) -> bool {
        self.rules
            .iter()
            .any(|r| !r.names_only() && r.refuses(address, port))
    }

    /// The IPv4 address carried by `host` that the entry matched, when it
    /// did not match `host` itself: for the denial's message.
    pub(super) fn carried_match(&self, host: &Host, port: u16) -> Option<Ipv4Addr> {
        let Host::Ip(IpAddr::V6(v6)) = host else {
            return None;
        };
        if self.rules.iter().any(|r| r.matches_as_written(host, port)) {
            return None;
        }
        carried_ipv4(*v6).find(|v4| {
            let carried = Host::Ip((*v4).into());
            self.rules
                .iter()
                .any(|r| r.matches_as_written(&carried, port))
        })
    }

    /// Whether the entry names `name` (by name, not by `*`) on some port:
    /// the addresses `name` resolved to are then the entry's to judge for
    /// as long as the run remembers them.
    pub fn names(&self, name: &Host) -> bool {
        self.rules
            .iter()
            .any(|r| r.names_only() && r.matches_host(name))
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
            _ => {
                if let Some(keyword) = misspelt_keyword(entry) {
                    return Err(PolicyError::MisspeltKeyword {
                        entry: entry.to_owned(),
                        keyword,
                    });
                }
                vec![entry.parse()?]
            }
        };
        Ok(DenyEntry {
            written: entry.to_owned(),
            rules,
            source: Arc::new(Source::Embedding),
        })
    }
}

/// The keyword `entry` reads as, misspelt: a single label (no dot, port,
/// range or wildcard) within two edits of `private` or `metadata`, in any
/// case. A deny entry a typo turned into a host name would deny nothing
/// the operator meant it to.
fn misspelt_keyword(entry: &str) -> Option<&'static str> {
    let single_label = entry.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if !single_label {
        return None;
    }
    let lower = entry.to_ascii_lowercase();
    ["private", "metadata"]
        .into_iter()
        .find(|keyword| edits(&lower, keyword) <= 2)
}

/// The Levenshtein distance between `a` and `b` (ASCII; the entries it is
/// asked of are a label's characters).
fn edits(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

impl fmt::Display for DenyEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.written)
    }
}

/// What one capability refuses, whatever its grant allows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DenyList {
    entries: Vec<DenyEntry>,
    /// Whether some entry names hosts by name: asked on every address
    /// used, so kept rather than worked out.
    names: bool,
}

impl DenyList {
    /// The first entry that matches `host`:`port` as written.
    pub fn matching(&self, host: &Host, port: u16) -> Option<&DenyEntry> {
        self.matching_judged(&Judged::new(host), port)
    }

    /// [`matching`](Self::matching), for a host already judged.
    pub(super) fn matching_judged(&self, host: &Judged<'_>, port: u16) -> Option<&DenyEntry> {
        self.entries.iter().find(|e| e.refuses(host, port))
    }

    /// The first entry that matches an address a name resolved to.
    pub fn matching_address(&self, ip: IpAddr, port: u16) -> Option<&DenyEntry> {
        let host = Host::ip(ip);
        let address = Judged::new(&host);
        self.entries
            .iter()
            .find(|e| e.matches_address(&address, port))
    }

    /// Whether some entry names hosts by name (not only by address or
    /// `*`).
    #[inline]
    pub fn has_names(&self) -> bool {
        self.names
    }

    /// Whether the list has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries.
    pub fn entries(&self) -> &[DenyEntry] {
        &self.entries
    }

    /// This list as written at `source`.
    pub fn sourced(mut self, source: &Source) -> DenyList {
        let source = Arc::new(source.clone());
        for entry in &mut self.entries {
            entry.source = Arc::clone(&source);
        }
        self
    }

    pub(super) fn extend(&mut self, other: DenyList) {
        self.names |= other.names;
        self.entries.extend(other.entries);
    }
}

impl FromStr for DenyList {
    type Err = PolicyError;

    /// A comma-separated list of deny entries; an empty list is an error.
    fn from_str(list: &str) -> Result<DenyList, PolicyError> {
        let entries: Vec<DenyEntry> = super::grant::entries(list, PolicyError::EmptyDenyList)?;
        let names = entries.iter().any(|e| e.rules.iter().any(Rule::names_only));
        Ok(DenyList { entries, names })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denies(list: &str, host: &str, port: u16) -> bool {
        let list: DenyList = list.parse().unwrap();
        list.matching(&Host::parse(host).unwrap(), port).is_some()
    }

    /// Issue 57: `--deny-net=privat` was taken as a host name and
    /// protected nothing.
    #[test]
    fn a_keyword_misspelt_is_refused_with_the_keyword_it_is_near() {
        for (written, keyword) in [
            ("privat", "private"),
            ("privte", "private"),
            ("Private", "private"),
            ("PRIVATE", "private"),
            ("pirvate", "private"),
            ("metdata", "metadata"),
            ("metadta", "metadata"),
            ("meta-data", "metadata"),
        ] {
            match written.parse::<DenyEntry>() {
                Err(PolicyError::MisspeltKeyword {
                    entry,
                    keyword: near,
                }) => {
                    assert_eq!((entry.as_str(), near), (written, keyword));
                }
                other => panic!("{written}: {other:?}"),
            }
        }
        let message = "privat".parse::<DenyEntry>().unwrap_err().to_string();
        assert!(message.contains("did you mean `private`?"), "{message}");
        // Host names that are not near a keyword, and near ones that are
        // plainly names (a dot, a port), are entries as before.
        for written in [
            "printer",
            "localhost",
            "metabase",
            "private.example",
            "privat:80",
        ] {
            assert!(written.parse::<DenyEntry>().is_ok(), "{written}");
        }
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
            "192.0.0.170",
            "198.18.0.1",
            "fd12::1",
            "fc00::1",
            "fe80::1",
            "fec0::5",
        ] {
            assert!(denies("private", host, 80), "private should deny {host}");
        }
        for host in [
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "198.20.0.1",
            "2001:db8::1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "example.com",
        ] {
            assert!(
                !denies("private", host, 80),
                "private should not deny {host}"
            );
        }
    }

    #[test]
    fn private_covers_multicast_and_broadcast_of_both_families() {
        for host in [
            "239.255.255.250",
            "224.0.0.1",
            "224.0.0.251",
            "255.255.255.255",
            "240.0.0.1",
            "ff02::1",
            "ff02::c",
            "ff05::c",
            "ff0e::1",
        ] {
            assert!(denies("private", host, 1900), "private should deny {host}");
        }
    }

    #[test]
    fn private_judges_every_ipv6_form_by_the_ipv4_address_it_carries() {
        for host in [
            "64:ff9b::a00:5",
            "64:ff9b::10.0.0.5",
            "64:ff9b:1::a00:5",
            "2002:a00:5::1",
            "2001:0:a00:5::1",
            "::a00:5",
            "::ffff:0:a00:5",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::efff:fffa",
            "2002:7f00:1::1",
        ] {
            assert!(denies("private", host, 80), "private should deny {host}");
        }
        let list: DenyList = "private".parse().unwrap();
        let entry = list.matching(&Host::parse("64:ff9b::a00:5").unwrap(), 80);
        assert_eq!(
            entry.and_then(|e| e.carried_match(&Host::parse("64:ff9b::a00:5").unwrap(), 80)),
            Some("10.0.0.5".parse().unwrap())
        );
        // Resolved addresses are judged the same way (a DNS64 answer).
        assert!(
            list.matching_address("64:ff9b::a00:5".parse().unwrap(), 80)
                .is_some()
        );
    }

    #[test]
    fn metadata_covers_the_credential_endpoints_of_the_major_clouds() {
        for host in [
            "169.254.169.254",
            "::ffff:169.254.169.254",
            "fd00:ec2::254",
            "169.254.170.2",
            "169.254.170.23",
            "fd00:ec2::23",
            "100.100.100.200",
            "168.63.129.16",
            "192.0.0.192",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::a83f:8110",
        ] {
            assert!(denies("metadata", host, 80), "{host}");
        }
        for host in ["169.254.169.253", "168.63.129.17", "fd00:ec2::255"] {
            assert!(!denies("metadata", host, 80), "{host}");
        }
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
