//! The IPv4 addresses an IPv6 address carries, and why the policy judges
//! such an address by them.
//!
//! Several IPv6 forms are an IPv4 address in other clothes. A packet to
//! `64:ff9b::a00:5` reaches 10.0.0.5 through any NAT64 gateway on the path
//! (IPv6-only clouds run one), `2002:a00:5::1` is the 6to4 site behind
//! 10.0.0.5, and a DNS64 resolver answers with such addresses for names
//! that have only IPv4 ones. A deny entry for `10.0.0.0/8` that let these
//! through would not deny 10.0.0.5. So:
//!
//! - a **deny entry** matches such an address if it matches the address as
//!   written *or any* IPv4 address it carries;
//! - a **grant** matches it only if it matches *every* IPv4 address it
//!   carries and the form leads to each of them (`Judged::leads_to`), or
//!   names the address itself exactly (an IPv6 range alone never grants
//!   it).
//!
//! A form leads to the IPv4 address it carries only through a translator
//! or relay somewhere on the IPv6 path, never on this machine: the kernel
//! routes `64:ff9b::7f00:1` out of the default IPv6 route, not to
//! 127.0.0.1 (only the IPv4-mapped form is the IPv4 address to the
//! kernel). And translators and relays lead only to global addresses (RFC
//! 6052 forbids the well-known NAT64 prefix for non-global ones; 6to4 and
//! Teredo are built on global ones), except a local-use NAT64 prefix (RFC
//! 8215), whose operator's translator may reach private addresses of its
//! own network, though never loopback, "this network", link-local,
//! multicast or reserved ones. So a grant of 127.0.0.1 or 10.0.0.5 does
//! not admit `64:ff9b::7f00:1` or `2002:a00:5::1`: packets to those leave
//! the machine for somewhere the grant does not name. A grant of 8.8.8.8
//! admits `64:ff9b::808:808`, the way to 8.8.8.8 on an IPv6-only network.
//!
//! | form | prefix | carries |
//! |---|---|---|
//! | IPv4-mapped | `::ffff:0:0/96` | the last 32 bits (already the IPv4 address itself: [`super::Host`] stores it as IPv4) |
//! | IPv4-compatible (deprecated, RFC 4291) | `::/96`, except `::` and `::1` | the last 32 bits |
//! | IPv4-translated (SIIT, RFC 2765) | `::ffff:0:0:0/96` | the last 32 bits |
//! | NAT64 well-known prefix (RFC 6052) | `64:ff9b::/96` | the last 32 bits |
//! | NAT64 local-use prefix (RFC 8215) | `64:ff9b:1::/48` | the IPv4 address under each RFC 6052 prefix length the operator may use (48, 56, 64, 96) |
//! | 6to4 (RFC 3056) | `2002::/16` | bits 16 to 47 |
//! | Teredo (RFC 4380) | `2001::/32` | the server (bits 32 to 63) and the client (the last 32 bits, inverted) |
//!
//! A local-use NAT64 address is ambiguous: only the operator knows which
//! prefix length its translator uses, so every reading counts. Readings
//! that fall in 0.0.0.0/8 are left out there: a translator never sends to
//! "this network", and a /96-style address read as /48 always gives one.
//! Network-specific NAT64 prefixes other than these two are the
//! operator's own and cannot be recognised.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::LazyLock;

use ipnet::Ipv4Net;

use super::host::Host;

/// The IPv4 addresses that are not global: the IPv4 half of what the deny
/// word `private` names (`super::deny::PRIVATE_RANGES`; a test keeps the
/// two equal). No carried form under a global translator or relay leads
/// to one of them.
const NOT_GLOBAL: &[&str] = &[
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
];

/// The IPv4 addresses no carried form leads to, whatever translator the
/// operator runs: this machine ("this network", loopback), the link
/// (link-local), groups (multicast) and the reserved block with the
/// broadcast address.
const NEVER_TRANSLATED: &[&str] = &[
    "0.0.0.0/8",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "224.0.0.0/4",
    "240.0.0.0/4",
];

static NOT_GLOBAL_NETS: LazyLock<Vec<Ipv4Net>> = LazyLock::new(|| nets(NOT_GLOBAL));
static NEVER_TRANSLATED_NETS: LazyLock<Vec<Ipv4Net>> = LazyLock::new(|| nets(NEVER_TRANSLATED));

fn nets(ranges: &[&str]) -> Vec<Ipv4Net> {
    // The ranges are constants of this file, checked by a test.
    ranges.iter().filter_map(|r| r.parse().ok()).collect()
}

/// The most IPv4 addresses one IPv6 address can carry (a local-use NAT64
/// address read under each of its four prefix lengths).
const MAX_CARRIED: usize = 4;

/// A host and the IPv4 addresses it carries, worked out once for all the
/// entries of a grant or deny list that judge it.
pub(super) struct Judged<'a> {
    /// The host as written.
    pub(super) host: &'a Host,
    carried: [Option<Ipv4Addr>; MAX_CARRIED],
    /// Under the local-use NAT64 prefix (`64:ff9b:1::/48`).
    local_use: bool,
}

impl<'a> Judged<'a> {
    pub(super) fn new(host: &'a Host) -> Judged<'a> {
        let (carried, local_use) = match host {
            Host::Ip(IpAddr::V6(v6)) => (carried_array(*v6), is_local_use_nat64(*v6)),
            _ => ([None; MAX_CARRIED], false),
        };
        Judged {
            host,
            carried,
            local_use,
        }
    }

    /// Whether the host's form leads to `v4`, an address it carries: a
    /// global address through any form; under the local-use NAT64 prefix,
    /// any address but those no translator reaches (see the module's
    /// documentation).
    pub(super) fn leads_to(&self, v4: Ipv4Addr) -> bool {
        let excluded = if self.local_use {
            &*NEVER_TRANSLATED_NETS
        } else {
            &*NOT_GLOBAL_NETS
        };
        !excluded.iter().any(|net| net.contains(&v4))
    }

    /// The IPv4 addresses the host carries.
    pub(super) fn carried(&self) -> impl Iterator<Item = Ipv4Addr> + '_ {
        self.carried.iter().flatten().copied()
    }

    /// Whether it carries any (the carried addresses fill the first
    /// slots).
    pub(super) fn carries(&self) -> bool {
        self.carried[0].is_some()
    }
}

/// The IPv4 addresses `ip` carries, if it is one of the forms in the
/// module doc (none for any other IPv6 address).
pub fn carried_ipv4(ip: Ipv6Addr) -> impl Iterator<Item = Ipv4Addr> {
    carried_array(ip).into_iter().flatten()
}

fn is_local_use_nat64(ip: Ipv6Addr) -> bool {
    matches!(ip.segments(), [0x64, 0xff9b, 1, ..])
}

fn carried_array(ip: Ipv6Addr) -> [Option<Ipv4Addr>; MAX_CARRIED] {
    let o = ip.octets();
    let s = ip.segments();
    let v4 = |a: usize, b: usize, c: usize, d: usize| Ipv4Addr::new(o[a], o[b], o[c], o[d]);
    let last = v4(12, 13, 14, 15);
    let mut carried: [Option<Ipv4Addr>; MAX_CARRIED] = [None; MAX_CARRIED];
    match s {
        // IPv4-mapped (normally already IPv4) and IPv4-translated.
        [0, 0, 0, 0, 0, 0xffff, _, _] | [0, 0, 0, 0, 0xffff, 0, _, _] => carried[0] = Some(last),
        // IPv4-compatible; `::` and `::1` are addresses of their own.
        [0, 0, 0, 0, 0, 0, _, _] if u32::from(last) > 1 => carried[0] = Some(last),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => carried[0] = Some(last),
        [0x64, 0xff9b, 1, ..] => {
            let readings = [v4(6, 7, 9, 10), v4(7, 9, 10, 11), v4(9, 10, 11, 12), last];
            let counted = readings.into_iter().filter(|r| r.octets()[0] != 0);
            for (slot, reading) in carried.iter_mut().zip(counted) {
                *slot = Some(reading);
            }
        }
        [0x2002, ..] => carried[0] = Some(v4(2, 3, 4, 5)),
        [0x2001, 0, ..] => {
            carried[0] = Some(v4(4, 5, 6, 7));
            carried[1] = Some(Ipv4Addr::from(!u32::from(last)));
        }
        _ => {}
    }
    carried
}

#[cfg(test)]
mod tests {
    use super::*;

    fn carried(text: &str) -> Vec<Ipv4Addr> {
        carried_ipv4(text.parse().expect("an IPv6 address")).collect()
    }

    fn v4(text: &str) -> Ipv4Addr {
        text.parse().expect("an IPv4 address")
    }

    #[test]
    fn each_form_gives_the_ipv4_address_it_carries() {
        let lan = vec![v4("10.0.0.5")];
        for form in [
            "64:ff9b::a00:5",
            "64:ff9b::10.0.0.5",
            "64:ff9b:1::a00:5",
            "2002:a00:5::1",
            "2002:a00:5:ffff::",
            "::a00:5",
            "::10.0.0.5",
            "::ffff:0:a00:5",
            "::ffff:a00:5",
        ] {
            assert_eq!(carried(form), lan, "{form}");
        }
        // Teredo: the server, then the client (stored inverted).
        assert_eq!(
            carried("2001:0:a00:5::f5ff:fffa"),
            vec![v4("10.0.0.5"), v4("10.0.0.5")]
        );
        assert_eq!(
            carried("2001:0:a00:5::1"),
            vec![v4("10.0.0.5"), v4("255.255.255.254")]
        );
        assert_eq!(carried("64:ff9b::a9fe:a9fe"), vec![v4("169.254.169.254")]);
    }

    #[test]
    fn a_local_use_nat64_address_counts_under_every_prefix_length() {
        // RFC 6052's example, 192.0.2.33, under a /48 local-use prefix.
        assert!(carried("64:ff9b:1:c000:2:2100::").contains(&v4("192.0.2.33")));
        // The same address under /96 reads as nothing else worth counting.
        assert_eq!(carried("64:ff9b:1::c000:221"), vec![v4("192.0.2.33")]);
        // Under /56 and /64.
        assert!(carried("64:ff9b:1:00c0:0:221::").contains(&v4("192.0.2.33")));
        assert!(carried("64:ff9b:1:0:c0:2:2100:0").contains(&v4("192.0.2.33")));
    }

    #[test]
    fn a_form_leads_to_global_addresses_and_local_use_nat64_to_private_ones_too() {
        let leads = |form: &str, to: &str| {
            let host = Host::parse(form).expect("an IPv6 address");
            Judged::new(&host).leads_to(v4(to))
        };
        for form in ["64:ff9b::1", "2002:a00:5::1", "::a00:5", "::ffff:0:a00:5"] {
            assert!(leads(form, "8.8.8.8"), "{form}");
            for not_global in ["10.0.0.5", "127.0.0.1", "192.168.1.1", "100.64.0.1"] {
                assert!(!leads(form, not_global), "{form} {not_global}");
            }
        }
        let local_use = "64:ff9b:1::a00:5";
        assert!(leads(local_use, "8.8.8.8"));
        assert!(leads(local_use, "10.0.0.5"));
        assert!(leads(local_use, "192.168.1.1"));
        for never in [
            "127.0.0.1",
            "0.0.0.1",
            "169.254.169.254",
            "224.0.0.251",
            "255.255.255.255",
        ] {
            assert!(!leads(local_use, never), "{never}");
        }
    }

    #[test]
    fn not_global_is_the_ipv4_half_of_private_and_every_range_parses() {
        let private_v4: Vec<&str> = super::super::deny::PRIVATE_RANGES
            .iter()
            .copied()
            .filter(|r| !r.contains(':'))
            .collect();
        assert_eq!(NOT_GLOBAL, private_v4.as_slice());
        assert_eq!(NOT_GLOBAL_NETS.len(), NOT_GLOBAL.len());
        assert_eq!(NEVER_TRANSLATED_NETS.len(), NEVER_TRANSLATED.len());
        assert!(NEVER_TRANSLATED.iter().all(|r| NOT_GLOBAL.contains(r)));
    }

    #[test]
    fn other_ipv6_addresses_carry_nothing() {
        for other in [
            "::",
            "::1",
            "2001:db8::1",
            "2606:4700::1111",
            "fe80::1",
            "fd00:ec2::254",
            "64:ff9b:2::a00:5",
        ] {
            assert_eq!(carried(other), Vec::<Ipv4Addr>::new(), "{other}");
        }
    }
}
