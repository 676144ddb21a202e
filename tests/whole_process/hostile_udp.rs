//! A guest parks 40,000 UDP receives on one socket: the host holds no
//! buffer for a receive that waits and refuses waiting calls past
//! `--max-waiting-calls`, so its memory stays within [`PARKED_RSS_BOUND`] of
//! what it was, and the run ends cleanly.
//!
//! One test in this binary, so no other test's memory muddies the count.

use crate::support;

use std::net::SocketAddr;

use crate::support::{guests, open_sockets, rss, within};
use moat_host::policy::Policy;

/// Receives the guest parks: where an unbounded host held 1.74 GB.
const PARKED: u32 = 40_000;

/// What the host may grow by while they wait: the documented bound.
const PARKED_RSS_BOUND: u64 = 64 << 20;

fn address_after(out: &str, word: &str) -> SocketAddr {
    out.split_whitespace()
        .skip_while(|w| *w != word)
        .nth(1)
        .map(|a| a.trim_end_matches(';'))
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address after {word:?} in {out}"))
}

#[test]
fn forty_thousand_parked_udp_receives_hold_no_buffers() {
    crate::in_turn(async {
        let policy = Policy::new().allow_listen("127.0.0.1").unwrap();
        // A first run warms the engine, the compiled guest and the allocator.
        let warm = support::start(guests::HOSTILE, policy.clone(), &["park-udp", "100"]);
        let out = warm.wait_for("control ").await;
        let peer = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        peer.send_to(b"stop", address_after(&out, "control"))
            .await
            .unwrap();
        let done = warm.finish().await;
        assert_eq!(done.code(), 0, "{}", done.stderr);
        let sockets_before = open_sockets();
        let before = rss();

        let guest = support::start(
            guests::HOSTILE,
            policy.clone(),
            &["park-udp", &PARKED.to_string()],
        );
        let out = guest.wait_for("control ").await;
        let parked_rss = rss();
        // Three datagrams reach three of the parked receives.
        let parked_on = address_after(&out, "on");
        for _ in 0..3 {
            peer.send_to(b"datagram", parked_on).await.unwrap();
        }
        within(
            "the stop datagram",
            peer.send_to(b"stop", address_after(&out, "control")),
        )
        .await
        .unwrap();
        let done = guest.finish().await;
        assert_eq!(done.code(), 0, "{}", done.stderr);
        // The stop receive waits too: 4095 receives parked, the rest refused
        // with the limit's error.
        let most = moat_host::limits::Limits::default().max_waiting_calls;
        let waiting = most - 1;
        assert!(
            done.stdout.contains(&format!(
                "received 3, refused {} (limit reached: the run has {most} receives",
                PARKED - waiting
            )),
            "{}",
            done.stdout
        );
        assert!(
            done.stdout.contains("--max-waiting-calls"),
            "{}",
            done.stdout
        );
        let grown = parked_rss.saturating_sub(before);
        eprintln!(
            "{PARKED} parked receives: host grew by {} KiB ({} bytes each)",
            grown / 1024,
            grown / u64::from(PARKED)
        );
        assert!(
            grown < PARKED_RSS_BOUND,
            "{PARKED} parked receives grew the host by {} MiB",
            grown >> 20
        );
        assert_eq!(open_sockets(), sockets_before, "sockets left open");
    });
}
