//! Capabilities, end to end: what a denied guest sees, and that nothing of
//! a denied call reaches the network.

use crate::support;

use crate::support::{guests, port_is_free, run, watched_port};
use moat_host::policy::Policy;

fn nobody_connected(listener: &std::net::TcpListener) -> bool {
    matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

async fn connect(policy: Policy, host: &str, port: u16) -> support::Finished {
    run(guests::PROBE, policy, &["connect", host, &port.to_string()]).await
}

#[tokio::test]
async fn a_denied_connect_says_which_flag_would_allow_it_and_reaches_nobody() {
    let (listener, port) = watched_port();
    let done = connect(Policy::new(), "127.0.0.1", port).await;
    assert_eq!(done.code(), 1);
    assert_eq!(
        done.stderr.trim(),
        format!("error: connect to 127.0.0.1:{port} denied: needs --allow-net=127.0.0.1:{port}")
    );
    assert!(nobody_connected(&listener));
}

#[tokio::test]
async fn a_denied_listen_claims_no_port() {
    let port = support::free_port();
    // Connecting anywhere is granted; listening is not.
    let done = run(
        guests::PROBE,
        Policy::new().allow_connect("*").unwrap(),
        &["listen", "127.0.0.1", &port.to_string()],
    )
    .await;
    assert_eq!(done.code(), 1);
    assert_eq!(
        done.stderr.trim(),
        format!("error: listen on 127.0.0.1:{port} denied: needs --allow-listen=127.0.0.1:{port}")
    );
    assert!(port_is_free(port));
}

#[tokio::test]
async fn an_allowed_listen_does_claim_the_port() {
    // The counterpart of the test above, so that one can fail.
    let port = support::free_port();
    let guest = support::start(
        guests::PROBE,
        Policy::new().allow_listen("127.0.0.1").unwrap(),
        &["listen", "127.0.0.1", &port.to_string()],
    );
    guest.wait_for("listening on").await;
    let done = guest.finish().await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
}

#[tokio::test]
async fn names_and_addresses_are_judged_as_written() {
    let (listener, port) = watched_port();
    let by_name = Policy::new().allow_connect("localhost").unwrap();
    let by_ip = Policy::new().allow_connect("127.0.0.1").unwrap();

    let done = connect(by_name.clone(), "127.0.0.1", port).await;
    assert!(
        done.stderr.contains("denied: needs --allow-net=127.0.0.1:"),
        "{}",
        done.stderr
    );
    let done = connect(by_ip.clone(), "localhost", port).await;
    assert!(
        done.stderr.contains("denied: needs --allow-net=localhost:"),
        "{}",
        done.stderr
    );
    assert!(nobody_connected(&listener));

    let done = connect(by_ip, "127.0.0.1", port).await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    let done = connect(by_name.clone(), "localhost", port).await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    // A name compares case-insensitively, with or without its trailing dot.
    let done = connect(by_name, "LocalHost.", port).await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
}

#[tokio::test]
async fn numeric_spoofs_of_an_allowed_address_do_not_get_through() {
    let (listener, port) = watched_port();
    let policy = Policy::new().allow_connect("localhost").unwrap();
    for spoof in [
        "127.1",
        "0x7f.0.0.1",
        "2130706433",
        "0177.0.0.1",
        "127.000.000.001",
    ] {
        let done = connect(policy.clone(), spoof, port).await;
        assert_eq!(done.code(), 1);
        assert!(
            done.stderr.contains("is not a canonical IP address"),
            "{spoof}: {}",
            done.stderr
        );
    }
    // The IPv4-mapped IPv6 form is the same address, and judged as such.
    let only_v6 = Policy::new().allow_connect("::1").unwrap();
    let done = connect(only_v6, "::ffff:127.0.0.1", port).await;
    assert!(done.stderr.contains("denied"), "{}", done.stderr);
    assert!(nobody_connected(&listener));
    let v4 = Policy::new().allow_connect("127.0.0.1").unwrap();
    let done = connect(v4, "::ffff:127.0.0.1", port).await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
}

#[tokio::test]
async fn wildcards_cidr_ranges_and_port_ranges() {
    let (listener, port) = watched_port();

    // A wildcard covers subdomains, not the domain itself. The allowed name
    // gets as far as resolving (which fails offline): policy said yes.
    let wildcard = Policy::new().allow_connect("*.example.com:443").unwrap();
    let done = connect(wildcard.clone(), "example.com", 443).await;
    assert!(
        done.stderr
            .contains("denied: needs --allow-net=example.com:443"),
        "{}",
        done.stderr
    );
    let done = connect(wildcard.clone(), "api.example.com", 443).await;
    assert!(!done.stderr.contains("denied"), "{}", done.stderr);
    let done = connect(wildcard, "api.example.com", 80).await;
    assert!(done.stderr.contains("denied"), "{}", done.stderr);

    // CIDR ranges match IP literals.
    let range = Policy::new().allow_connect("127.0.0.0/8").unwrap();
    let done = connect(range.clone(), "127.0.0.1", port).await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    let done = connect(range, "localhost", port).await;
    assert!(done.stderr.contains("denied"), "{}", done.stderr);

    // Port ranges are inclusive.
    let ports = Policy::new()
        .allow_connect(&format!("127.0.0.1:{}-{}", port - 1, port))
        .unwrap();
    let done = connect(ports.clone(), "127.0.0.1", port).await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    let done = connect(ports, "127.0.0.1", port + 1).await;
    assert!(done.stderr.contains("denied"), "{}", done.stderr);

    // The two allowed connects reached the listener, no denied one did.
    let accepted = support::connections(&listener);
    assert_eq!(accepted, 2);
}

/// The IPv6 forms that carry 127.0.0.1 (NAT64, 6to4, IPv4-compatible,
/// SIIT): the kernel routes each out of the machine by the IPv6 route, so
/// a grant of 127.0.0.1 must not admit them.
const LOOPBACK_CARRIERS: &[&str] = &[
    "64:ff9b::7f00:1",
    "2002:7f00:1::1",
    "::7f00:1",
    "::ffff:0:7f00:1",
];

#[tokio::test]
async fn a_loopback_grant_does_not_admit_the_ipv6_forms_that_carry_it_off_the_machine() {
    let (listener, port) = watched_port();
    let granted = Policy::new()
        .allow_connect(&format!("127.0.0.1:{port}"))
        .unwrap();
    for carrier in LOOPBACK_CARRIERS {
        // moat:net
        let done = connect(granted.clone(), carrier, port).await;
        assert_eq!(done.code(), 1, "{carrier}: {}", done.stdout);
        assert_eq!(
            done.stderr.trim(),
            format!(
                "error: connect to [{carrier}]:{port} denied: needs \
                 --allow-net=[{carrier}]:{port}"
            )
        );
        // wasi:sockets, from a stock program.
        let options = moat_host::RunOptions::new(granted.clone())
            .arg("std-net")
            .args(["tcp-client", carrier, &port.to_string(), "x"])
            .stdin(moat_host::Input::Empty);
        let done = support::start_with(guests::STD_NET, options).finish().await;
        if *carrier == "::7f00:1" {
            // wasi:sockets refuses the deprecated IPv4-compatible form
            // itself, before the policy is asked.
            assert!(
                done.stdout.contains("error: InvalidInput"),
                "{carrier}: {}",
                done.stdout
            );
            continue;
        }
        assert!(
            done.stdout.contains("error: PermissionDenied"),
            "{carrier}: {}",
            done.stdout
        );
        assert!(
            done.stderr.contains(&format!(
                "connect to [{carrier}]:{port} denied: needs --allow-net=[{carrier}]:{port}"
            )),
            "{carrier}: {}",
            done.stderr
        );
    }
    assert!(nobody_connected(&listener));
    // The address itself still connects.
    let done = connect(granted, "127.0.0.1", port).await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
}
