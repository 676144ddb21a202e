//! The policy's decision against a reference model written here from the
//! rules as the docs state them (`Rule`'s table, `super::address`'s
//! carried addresses), sharing no code with the policy: random grant and
//! deny lists, and a random host in one of its spellings, must get the
//! same answer from both.
//!
//! The model knows each host in its canonical form from the start (the
//! generator picks the host, then writes it one of several ways), so it
//! parses nothing: names compare as lower-case strings, addresses as
//! integers, ranges by masking.

use proptest::prelude::*;

use super::{Capability, Host, Policy};

/// A host as the model knows it.
#[derive(Debug, Clone, Copy)]
enum Canon {
    Name(&'static str),
    V4(u32),
    V6(u128),
}

/// The hosts the cases are drawn from: names under and beside a
/// wildcard's suffix, IPv4 addresses inside and outside the ranges below,
/// and IPv6 addresses of which several carry an IPv4 address (NAT64,
/// 6to4, IPv4-compatible, SIIT, Teredo).
const HOSTS: &[Canon] = &[
    Canon::Name("example.com"),
    Canon::Name("api.example.com"),
    Canon::Name("a.b.example.com"),
    Canon::Name("badexample.com"),
    Canon::Name("example.org"),
    Canon::V4(0x0a00_0001),                               // 10.0.0.1
    Canon::V4(0x0a00_0002),                               // 10.0.0.2
    Canon::V4(0x0a01_0203),                               // 10.1.2.3
    Canon::V4(0x7f00_0001),                               // 127.0.0.1
    Canon::V4(0xc0a8_0105),                               // 192.168.1.5
    Canon::V4(0x0808_0808),                               // 8.8.8.8
    Canon::V6(1),                                         // ::1
    Canon::V6(0x2001_0db8_0000_0000_0000_0000_0000_0001), // 2001:db8::1
    Canon::V6(0x2001_0db8_0000_0000_0000_0000_0000_0002), // 2001:db8::2
    Canon::V6(0xfd00_0000_0000_0000_0000_0000_0000_0005), // fd00::5
    Canon::V6(0x0064_ff9b_0000_0000_0000_0000_0a00_0001), // 64:ff9b::a00:1 (NAT64: 10.0.0.1)
    Canon::V6(0x0064_ff9b_0000_0000_0000_0000_0808_0808), // 64:ff9b::808:808 (8.8.8.8)
    Canon::V6(0x0064_ff9b_0000_0000_0000_0000_7f00_0001), // 64:ff9b::7f00:1 (127.0.0.1)
    Canon::V6(0x2002_0808_0808_0000_0000_0000_0000_0001), // 2002:808:808::1 (6to4: 8.8.8.8)
    Canon::V6(0x2002_0a00_0001_0000_0000_0000_0000_0001), // 2002:a00:1::1 (6to4: 10.0.0.1)
    Canon::V6(0x0000_0000_0000_0000_0000_0000_0a00_0002), // ::a00:2 (compatible: 10.0.0.2)
    Canon::V6(0x0000_0000_0000_0000_ffff_0000_0a00_0001), // ::ffff:0:a00:1 (SIIT: 10.0.0.1)
    // Teredo: server 8.8.8.8, client 10.0.0.2 (stored inverted).
    Canon::V6(0x2001_0000_0808_0808_0000_0000_f5ff_fffd),
];

/// What an entry's host part names, as the model knows it.
#[derive(Debug, Clone, Copy)]
enum Pattern {
    Any,
    Name(&'static str),
    Subdomains(&'static str),
    V4(u32),
    V6(u128),
    V4Net(u32, u8),
    V6Net(u128, u8),
}

const PATTERNS: &[Pattern] = &[
    Pattern::Any,
    Pattern::Name("example.com"),
    Pattern::Name("api.example.com"),
    Pattern::Subdomains("example.com"),
    Pattern::Subdomains("b.example.com"),
    Pattern::V4(0x0a00_0001),
    Pattern::V4(0x0808_0808),
    Pattern::V4(0x7f00_0001),
    Pattern::V6(0x2001_0db8_0000_0000_0000_0000_0000_0001),
    Pattern::V6(0x0064_ff9b_0000_0000_0000_0000_0a00_0001),
    Pattern::V4Net(0x0a00_0000, 8),
    Pattern::V4Net(0x0a00_0000, 24),
    Pattern::V4Net(0x7f00_0000, 8),
    Pattern::V4Net(0xc0a8_0000, 16),
    Pattern::V4Net(0, 0),
    Pattern::V6Net(0x2001_0db8 << 96, 32),
    Pattern::V6Net(0, 0),
    Pattern::V6Net(0xfd << 120, 8),
    Pattern::V6Net(0x0064_ff9b << 96, 96),
];

const PORTS: &[u16] = &[1, 22, 53, 80, 443, 8080, 65535];

fn v4_text(a: u32) -> String {
    std::net::Ipv4Addr::from(a).to_string()
}

fn v6_text(x: u128) -> String {
    std::net::Ipv6Addr::from(x).to_string()
}

/// `host` written the `way`-th of its ways.
fn spell(host: Canon, way: usize) -> String {
    match host {
        Canon::Name(name) => match way % 3 {
            0 => name.to_owned(),
            1 => name.to_uppercase(),
            _ => format!("{name}."),
        },
        Canon::V4(a) => match way % 4 {
            0 => v4_text(a),
            1 => format!("::ffff:{}", v4_text(a)),
            2 => format!("[::ffff:{}]", v4_text(a)),
            _ => format!("::ffff:{:x}:{:x}", a >> 16, a & 0xffff),
        },
        Canon::V6(x) => match way % 4 {
            0 => v6_text(x),
            1 => v6_text(x).to_uppercase(),
            2 => format!("[{}]", v6_text(x)),
            _ => (0..8)
                .map(|i| format!("{:04x}", (x >> (112 - 16 * i)) & 0xffff))
                .collect::<Vec<_>>()
                .join(":"),
        },
    }
}

/// An entry: its pattern, and its ports (`None`: every port).
#[derive(Debug, Clone, Copy)]
struct Entry {
    pattern: Pattern,
    ports: Option<(u16, u16)>,
    upper: bool,
}

impl Entry {
    fn text(&self) -> String {
        let case = |s: String| if self.upper { s.to_uppercase() } else { s };
        let (host, bracket) = match self.pattern {
            Pattern::Any => ("*".to_owned(), false),
            Pattern::Name(n) => (case(n.to_owned()), false),
            Pattern::Subdomains(s) => (case(format!("*.{s}")), false),
            Pattern::V4(a) => (v4_text(a), false),
            Pattern::V6(x) => (v6_text(x), true),
            Pattern::V4Net(a, len) => (format!("{}/{len}", v4_text(a)), false),
            Pattern::V6Net(x, len) => (format!("{}/{len}", v6_text(x)), true),
        };
        // IPv6 always in brackets: `64:ff9b::a00:1` alone is refused as
        // ambiguous (an address, or 64:ff9b::a00 with port 1).
        let host = if bracket { format!("[{host}]") } else { host };
        match self.ports {
            None => host,
            Some((first, last)) => {
                if first == last {
                    format!("{host}:{first}")
                } else {
                    format!("{host}:{first}-{last}")
                }
            }
        }
    }

    fn ports_allow(&self, port: u16) -> bool {
        self.ports
            .is_none_or(|(first, last)| first <= port && port <= last)
    }
}

/// The IPv4 addresses an IPv6 address carries, per `super::address`'s
/// table (the forms the hosts above use).
fn carried(x: u128) -> Vec<u32> {
    let group = |i: u32| ((x >> (112 - 16 * i)) & 0xffff) as u16;
    let last = (x & 0xffff_ffff) as u32;
    if x >> 32 == 0 {
        // IPv4-compatible, but :: and ::1.
        return if last > 1 { vec![last] } else { vec![] };
    }
    if x >> 64 == 0 && group(4) == 0xffff && group(5) == 0 {
        return vec![last]; // SIIT
    }
    if x >> 32 == 0x0064_ff9b_0000_0000_0000_0000 {
        return vec![last]; // NAT64, well-known prefix
    }
    if group(0) == 0x2002 {
        return vec![((x >> 80) & 0xffff_ffff) as u32]; // 6to4
    }
    if group(0) == 0x2001 && group(1) == 0 {
        return vec![((x >> 64) & 0xffff_ffff) as u32, !last]; // Teredo
    }
    vec![]
}

fn in_v4(a: u32, net: u32, len: u8) -> bool {
    len == 0 || (a ^ net) >> (32 - u32::from(len)) == 0
}

fn in_v6(x: u128, net: u128, len: u8) -> bool {
    len == 0 || (x ^ net) >> (128 - u32::from(len)) == 0
}

/// Whether an IPv4 address is global: outside the IPv4 ranges `private`
/// names (the cases use none of the local-use NAT64 forms, under which
/// private addresses count too).
fn global(a: u32) -> bool {
    const NOT_GLOBAL: [(u32, u8); 11] = [
        (0x0000_0000, 8),  // 0.0.0.0/8
        (0x0a00_0000, 8),  // 10.0.0.0/8
        (0x6440_0000, 10), // 100.64.0.0/10
        (0x7f00_0000, 8),  // 127.0.0.0/8
        (0xa9fe_0000, 16), // 169.254.0.0/16
        (0xac10_0000, 12), // 172.16.0.0/12
        (0xc000_0000, 24), // 192.0.0.0/24
        (0xc0a8_0000, 16), // 192.168.0.0/16
        (0xc612_0000, 15), // 198.18.0.0/15
        (0xe000_0000, 4),  // 224.0.0.0/4
        (0xf000_0000, 4),  // 240.0.0.0/4
    ];
    !NOT_GLOBAL.iter().any(|&(net, len)| in_v4(a, net, len))
}

/// Whether a grant's pattern allows `host`: names only names, addresses
/// only addresses; an IPv6 address that carries IPv4 ones only by itself,
/// by `*`, or when every carried address is global and allowed, never by
/// an IPv6 range.
fn grants(pattern: Pattern, host: Canon) -> bool {
    match (pattern, host) {
        (Pattern::Any, _) => true,
        (Pattern::Name(n), Canon::Name(h)) => n == h,
        (Pattern::Subdomains(s), Canon::Name(h)) => h.ends_with(&format!(".{s}")),
        (Pattern::V4(a), Canon::V4(h)) => a == h,
        (Pattern::V4Net(net, len), Canon::V4(h)) => in_v4(h, net, len),
        (Pattern::V6(x), Canon::V6(h)) => x == h,
        (Pattern::V6Net(net, len), Canon::V6(h)) => carried(h).is_empty() && in_v6(h, net, len),
        (Pattern::V4(a), Canon::V6(h)) => {
            let c = carried(h);
            !c.is_empty() && c.iter().all(|&v| global(v) && v == a)
        }
        (Pattern::V4Net(net, len), Canon::V6(h)) => {
            let c = carried(h);
            !c.is_empty() && c.iter().all(|&v| global(v) && in_v4(v, net, len))
        }
        _ => false,
    }
}

/// Whether a deny entry's pattern refuses `host`: as written, or any IPv4
/// address it carries.
fn denies(pattern: Pattern, host: Canon) -> bool {
    match (pattern, host) {
        (Pattern::Any, _) => true,
        (Pattern::Name(n), Canon::Name(h)) => n == h,
        (Pattern::Subdomains(s), Canon::Name(h)) => h.ends_with(&format!(".{s}")),
        (Pattern::V4(a), Canon::V4(h)) => a == h,
        (Pattern::V4Net(net, len), Canon::V4(h)) => in_v4(h, net, len),
        (Pattern::V6(x), Canon::V6(h)) => x == h,
        (Pattern::V6Net(net, len), Canon::V6(h)) => in_v6(h, net, len),
        (Pattern::V4(a), Canon::V6(h)) => carried(h).contains(&a),
        (Pattern::V4Net(net, len), Canon::V6(h)) => carried(h).iter().any(|&v| in_v4(v, net, len)),
        _ => false,
    }
}

fn model(grant: &[Entry], deny: &[Entry], host: Canon, port: u16) -> bool {
    grant
        .iter()
        .any(|e| e.ports_allow(port) && grants(e.pattern, host))
        && !deny
            .iter()
            .any(|e| e.ports_allow(port) && denies(e.pattern, host))
}

fn entry() -> impl Strategy<Value = Entry> {
    let ports = prop_oneof![
        Just(None),
        prop::sample::select(PORTS).prop_map(|p| Some((p, p))),
        (prop::sample::select(PORTS), prop::sample::select(PORTS))
            .prop_map(|(a, b)| Some((a.min(b), a.max(b)))),
    ];
    (prop::sample::select(PATTERNS), ports, any::<bool>()).prop_map(|(pattern, ports, upper)| {
        Entry {
            pattern,
            ports,
            upper,
        }
    })
}

fn list(entries: &[Entry]) -> String {
    entries
        .iter()
        .map(Entry::text)
        .collect::<Vec<_>>()
        .join(",")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn the_policy_decides_as_the_reference_model_does(
        grant in prop::collection::vec(entry(), 0..4),
        deny in prop::collection::vec(entry(), 0..3),
        host in prop::sample::select(HOSTS),
        way in 0usize..4,
        port in prop::sample::select(PORTS),
    ) {
        let mut policy = Policy::new();
        if !grant.is_empty() {
            policy = policy.allow_connect(&list(&grant)).expect("the grant parses");
        }
        if !deny.is_empty() {
            policy = policy.deny_connect(&list(&deny)).expect("the deny list parses");
        }
        let written = spell(host, way);
        let parsed = Host::parse(&written).expect("the host parses");
        let decided = policy.check(Capability::Connect, &parsed, port).is_ok();
        prop_assert_eq!(
            decided,
            model(&grant, &deny, host, port),
            "grant {:?}, deny {:?}, host {} port {}",
            list(&grant),
            list(&deny),
            written,
            port
        );
    }

    /// An entry that parses prints back to an entry that parses to the
    /// same rule.
    #[test]
    fn an_entry_prints_back_to_itself(entry in entry()) {
        let rule: super::Rule = entry.text().parse().expect("the entry parses");
        let again: super::Rule = rule.to_string().parse().expect("its printed form parses");
        prop_assert_eq!(rule, again);
    }
}
