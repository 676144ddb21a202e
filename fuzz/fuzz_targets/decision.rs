//! The policy's decision on random grants, deny lists and hosts, by
//! properties that hold whatever is written:
//! - a host prints back to itself;
//! - the entry a refusal says would allow the call does allow it (or a
//!   deny entry refuses it, never "not granted" again);
//! - a deny entry wins over any grant: what `*` with the same deny list
//!   refuses, every grant refuses;
//! - an IP literal allowed as written is allowed at its own address (the
//!   check of resolved addresses agrees with the check of the host);
//! - every spelling of one IPv4 address (dotted, IPv4-mapped, bracketed,
//!   mapped in hex) gets the same decision.
//!
//! The reference model of `policy/src/policy/differential_tests.rs`
//! checks the decisions themselves, on hosts drawn from a table.
#![no_main]

use std::net::{IpAddr, Ipv4Addr};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use moat_policy::policy::{Capability, DenyReason, Host, Policy, PolicyError};
use moat_policy::setting::Spelling;

#[derive(Debug, Arbitrary)]
struct Case<'a> {
    listen: bool,
    grant: &'a str,
    deny: &'a str,
    host: &'a str,
    port: u16,
    v4: u32,
}

fn granted(policy: Policy, capability: Capability, list: &str) -> Result<Policy, PolicyError> {
    match capability {
        Capability::Connect => policy.allow_connect(list),
        Capability::Listen => policy.allow_listen(list),
    }
}

fn denied(policy: Policy, capability: Capability, list: &str) -> Result<Policy, PolicyError> {
    match capability {
        Capability::Connect => policy.deny_connect(list),
        Capability::Listen => policy.deny_listen(list),
    }
}

/// The policy `grant` and `deny` write, where both parse (an empty list is
/// none).
fn written(capability: Capability, grant: &str, deny: &str) -> Option<Policy> {
    let mut policy = Policy::new();
    if !grant.is_empty() {
        policy = granted(policy, capability, grant).ok()?;
    }
    if !deny.is_empty() {
        policy = denied(policy, capability, deny).ok()?;
    }
    Some(policy)
}

fuzz_target!(|case: Case<'_>| {
    let capability = if case.listen {
        Capability::Listen
    } else {
        Capability::Connect
    };
    let port = case.port;

    // Every spelling of one IPv4 address gets one decision.
    let v4 = Ipv4Addr::from(case.v4);
    let [a, b, c, d] = v4.octets();
    let spellings = [
        v4.to_string(),
        format!("::ffff:{v4}"),
        format!("[::ffff:{v4}]"),
        format!(
            "::ffff:{:x}:{:x}",
            u16::from_be_bytes([a, b]),
            u16::from_be_bytes([c, d])
        ),
    ];

    let Some(policy) = written(capability, case.grant, case.deny) else {
        return;
    };
    let decisions: Vec<bool> = spellings
        .iter()
        .map(|s| {
            let host = Host::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
            assert_eq!(host, Host::ip(IpAddr::V4(v4)), "{s:?}");
            policy.check(capability, &host, port).is_ok()
        })
        .collect();
    assert!(
        decisions.iter().all(|&d| d == decisions[0]),
        "{spellings:?} decided {decisions:?} under {case:?}"
    );

    let Ok(host) = Host::parse(case.host) else {
        return;
    };
    let printed = host.to_string();
    assert_eq!(
        Host::parse(&printed).as_ref(),
        Ok(&host),
        "{:?} printed as {printed:?}",
        case.host
    );

    let decided = policy.check(capability, &host, port);
    match &decided {
        Ok(()) => {
            if let Host::Ip(ip) = &host {
                assert!(
                    policy.check_resolved(capability, &host, port, *ip).is_ok(),
                    "{case:?}: allowed as written, refused at its own address"
                );
            }
        }
        Err(refused) => {
            assert!(!refused.to_string().is_empty());
            // In the command line's words a hint is `--allow-net=ENTRY`,
            // whose entry the target reads back and grants.
            if let Some(needs) = refused.needs(Spelling::Flags) {
                assert_eq!(refused.reason, DenyReason::NotGranted);
                let (_, entry) = needs.split_once('=').expect("a hint is SETTING=ENTRY");
                let widened = granted(policy.clone(), capability, entry)
                    .unwrap_or_else(|e| panic!("{case:?}: the hint {needs:?} does not parse: {e}"));
                if let Err(again) = widened.check(capability, &host, port) {
                    assert!(
                        matches!(again.reason, DenyReason::DeniedBy { .. }),
                        "{case:?}: following the hint {needs:?} still refuses: {again}"
                    );
                }
            }
        }
    }

    // A deny entry wins over any grant.
    if let Some(everything) = written(capability, "*", case.deny)
        && everything.check(capability, &host, port).is_err()
    {
        assert!(decided.is_err(), "{case:?}: a deny entry lost to a grant");
    }
});
