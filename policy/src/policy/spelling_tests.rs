//! Property tests: every spelling of one address is judged alike, and no
//! input makes a parser panic.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::{Capability, DenyList, Grant, Host, Policy, Rule};

/// The ways a guest can write one IPv4 destination.
fn spellings(v4: Ipv4Addr) -> Vec<String> {
    let [a, b, c, d] = v4.octets();
    let mapped = v4.to_ipv6_mapped();
    let [.., g, h] = mapped.segments();
    vec![
        v4.to_string(),
        mapped.to_string(),
        format!("[{mapped}]"),
        format!("::FFFF:{a}.{b}.{c}.{d}"),
        format!("0:0:0:0:0:ffff:{a}.{b}.{c}.{d}"),
        format!("::ffff:{g:x}:{h:x}"),
        format!("[0000:0000:0000:0000:0000:FFFF:{g:X}:{h:X}]"),
    ]
}

/// Entries that an address may fall under, in both families' spellings.
fn entries(v4: Ipv4Addr, prefix: u8, port: u16) -> Vec<String> {
    let net = ipnet::Ipv4Net::new(v4, prefix).map(|n| n.trunc());
    let mut out = vec![
        format!("{v4}"),
        format!("{v4}:{port}"),
        format!("[{}]:{port}", v4.to_ipv6_mapped()),
        "::/0".into(),
        "::/1".into(),
        format!("[::/0]:{port}"),
        "0.0.0.0/0".into(),
    ];
    if let Ok(net) = net {
        out.push(net.to_string());
        out.push(format!(
            "::ffff:{}/{}",
            net.network(),
            u32::from(net.prefix_len()) + 96
        ));
        out.push(format!(
            "[::ffff:{}/{}]:{port}",
            net.network(),
            u32::from(net.prefix_len()) + 96
        ));
    }
    out
}

proptest! {
    #[test]
    fn every_spelling_of_an_ipv4_address_is_judged_alike(
        bits in any::<u32>(),
        entry_bits in any::<u32>(),
        prefix in 0u8..=32,
        port in 1u16..,
    ) {
        let v4 = Ipv4Addr::from(bits);
        let hosts: Vec<Host> = spellings(v4)
            .iter()
            .map(|s| Host::parse(s).unwrap_or_else(|e| panic!("{s}: {e}")))
            .collect();
        for host in &hosts {
            prop_assert_eq!(host, &Host::Ip(IpAddr::V4(v4)));
        }
        for base in [v4, Ipv4Addr::from(entry_bits)] {
            for entry in entries(base, prefix, port) {
                let rule: Rule = entry.parse().unwrap_or_else(|e| panic!("{entry}: {e}"));
                let verdicts: Vec<bool> = hosts.iter().map(|h| rule.matches(h, port)).collect();
                prop_assert!(
                    verdicts.iter().all(|&v| v == verdicts[0]),
                    "{} judged {:?} differently: {:?}", entry, spellings(v4), verdicts
                );
                let deny: DenyList = entry.parse().unwrap_or_else(|e| panic!("{entry}: {e}"));
                let policy = Policy::allow_all().with_denied(Capability::Connect, deny);
                let verdicts: Vec<bool> = hosts
                    .iter()
                    .map(|h| policy.check(Capability::Connect, h, port).is_ok())
                    .collect();
                prop_assert!(verdicts.iter().all(|&v| v == verdicts[0]));
                // The address a name resolved to is judged as the literal is.
                let resolved = policy
                    .check_resolved(
                        Capability::Connect,
                        &Host::Name("a.example".into()),
                        port,
                        IpAddr::V6(v4.to_ipv6_mapped()),
                    )
                    .is_ok();
                prop_assert_eq!(resolved, verdicts[0]);
            }
        }
    }

    #[test]
    fn every_spelling_of_an_ipv6_address_is_judged_alike(segments in any::<[u16; 8]>()) {
        let v6 = Ipv6Addr::from(segments);
        let full = segments.map(|s| format!("{s:x}")).join(":");
        let padded = segments.map(|s| format!("{s:04X}")).join(":");
        let spellings = [v6.to_string(), format!("[{v6}]"), full, format!("[{padded}]")];
        let want = Host::Ip(IpAddr::V6(v6).to_canonical());
        for s in &spellings {
            prop_assert_eq!(Host::parse(s).unwrap_or_else(|e| panic!("{s}: {e}")), want.clone());
        }
    }

    #[test]
    fn parsers_never_panic(text in "\\PC{0,40}") {
        let _ = Host::parse(&text);
        let _ = text.parse::<Rule>();
        let _ = text.parse::<Grant>();
        let _ = text.parse::<DenyList>();
    }

    #[test]
    fn parsers_never_panic_on_address_like_text(text in "[0-9a-fA-F:.\\[\\]/*,%+-]{0,48}") {
        if let Ok(rule) = text.parse::<Rule>() {
            // What parses prints as an entry that parses to the same rule.
            prop_assert_eq!(rule.to_string().parse::<Rule>().ok(), Some(rule));
        }
        let _ = Host::parse(&text);
    }
}
