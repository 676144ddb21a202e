//! A stock wasi:sockets 0.3 guest parks 40,000 UDP receives on one socket.
//! wasmtime-wasi holds a 64 KiB buffer for each 0.3 receive while it
//! waits (2.6 GB for these); moat lets at most
//! [`MAX_WASI_UDP_RECEIVES`] wait and fails the rest at once, so the host
//! grows by less than [`PARKED_RSS_BOUND`] and the run ends cleanly.
//!
//! One test in this binary, so no other test's memory muddies the count.

use crate::support;

use crate::support::caps::MAX_WASI_UDP_RECEIVES;
use crate::support::{guests, open_sockets, rss, within};
use moat_host::policy::Policy;

/// Receives the guest parks.
const PARKED: u32 = 40_000;

/// What the host may grow by while they wait: 256 buffers of 64 KiB are
/// 16 MiB; the rest is wasmtime's and the allocator's slack.
const PARKED_RSS_BOUND: u64 = 64 << 20;

/// Runs the guest parking `parked` receives; returns the host's growth
/// while they wait, and the guest's output.
async fn park(parked: u32) -> (u64, String) {
    let signal = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = signal.local_addr().unwrap().port();
    let policy = Policy::new()
        .allow_connect(&format!("127.0.0.1:{port}"))
        .unwrap();
    let failures = parked.saturating_sub(MAX_WASI_UDP_RECEIVES);
    let before = rss();
    let guest = support::start(
        guests::SOCKETS_P3,
        policy,
        &[
            "udp-park",
            &parked.to_string(),
            &failures.to_string(),
            &port.to_string(),
        ],
    );
    // The guest connects once `failures` receives failed and the rest wait.
    let (connection, _) = within("the guest's signal", signal.accept()).await.unwrap();
    let grown = rss().saturating_sub(before);
    drop(connection);
    let done = guest.finish().await;
    assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
    (grown, done.stdout)
}

#[test]
fn forty_thousand_parked_wasi_udp_receives_hold_at_most_256_buffers() {
    crate::in_turn(async {
        // A first run warms the engine, the compiled guest and the allocator.
        park(300).await;
        let sockets_before = open_sockets();
        let (grown, out) = park(PARKED).await;
        assert!(
            out.contains(&format!("failures: {}", PARKED - MAX_WASI_UDP_RECEIVES)),
            "{out}"
        );
        assert!(
            out.contains(
                "receive failed: ErrorCode::Other(Some(\"limit reached: the run has 256 UDP receives waiting"
            ),
            "{out}"
        );
        assert!(
            out.contains(&format!("parked {MAX_WASI_UDP_RECEIVES} receives")),
            "{out}"
        );
        eprintln!(
            "{PARKED} parked wasi 0.3 receives: host grew by {} KiB",
            grown / 1024
        );
        assert!(
            grown < PARKED_RSS_BOUND,
            "{PARKED} parked receives grew the host by {} MiB",
            grown >> 20
        );
        support::eventually("the run's sockets are closed", || {
            open_sockets() <= sockets_before
        })
        .await;
    });
}
