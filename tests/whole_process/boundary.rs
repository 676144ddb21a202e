//! The boundary guest (tests/guests/boundary) fed random byte strings: each
//! a sequence of moat:net, wasi:sockets and wasi:http calls (connects,
//! listens, binds, sends, receives, TLS upgrades, options, drops,
//! cancelled futures, aborted tasks, fields filled, request bodies filled
//! and never sent, requests sent and responses left unread, exits and
//! traps midway) with hosts in every spelling. The grant is small:
//! connect to a sink, a blackhole and a UDP sink on 127.0.0.1, listen on
//! 127.0.0.1; the run's host memory is 4 MiB. After each sequence:
//! - the host did not panic (the run ended as a guest's run ends: an exit,
//!   a trap, or the run's time limit);
//! - the host's resident memory at its peak during the run grew by no
//!   more than the run's host memory, the guest's own memory and a fixed
//!   allowance, with an audit trail on (the memory oracle: a surface whose
//!   holdings are not paid from the budget shows here, a copy the trail
//!   keeps of what the guest chose included);
//! - nothing reached the canary (a TCP listener and a UDP socket no grant
//!   names);
//! - every byte the guest was told it sent to the sink arrived, in order,
//!   and nothing else did (every byte the sink got is the guest's pattern);
//!
//! and after all of them the process's descriptors are back to where they
//! were and its resident memory did not grow with the number of sequences.
//!
//! `MOAT_BOUNDARY_SEQUENCES` (default [`SEQUENCES`]) and
//! `MOAT_BOUNDARY_SEED` choose how many and which; a failure prints the
//! seed and the sequence's bytes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use moat_host::net::{Lookup, Resolver};
use moat_host::policy::Policy;
use moat_host::{MoatError, RunOptions};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

use crate::support::{self, eventually, guests, start_with};

/// Sequences per test run: enough that every operation meets every other
/// in many orders (each sequence is up to ~100 operations), few enough
/// for CI (about 40 ms each).
const SEQUENCES: usize = 250;

/// The default seed: CI runs the same sequences every time; set
/// `MOAT_BOUNDARY_SEED` to explore others.
const SEED: u64 = 27;

/// Bytes per sequence: about 100 operations with their arguments.
const SEQUENCE_BYTES: usize = 320;

/// A run's time limit: a sequence may block itself for good (a write to
/// its own connection that nothing reads); the limit ends it as it would
/// end any guest. Sequences take 10-80 ms; one ended by the limit is
/// checked as any other (what it reported sent before the end arrived).
const RUN_TIME_LIMIT: Duration = Duration::from_secs(1);

/// Descriptors the process may hold above its count before the
/// sequences: the runtime and the engine open none per run, so any
/// number here that grows with the sequences is a leak; a few are the
/// test's own (sink connections still closing).
const DESCRIPTOR_SLACK: usize = 8;

/// The run's host memory in these sequences: small, so that what a
/// sequence can make the host hold unpaid stands out.
const BUDGET: u64 = 4 << 20;

/// The guest's own linear memory in these sequences (its largest buffer is
/// a MiB).
const GUEST_MEMORY: u64 = 16 << 20;

/// What a run may grow the host by beyond [`BUDGET`] and [`GUEST_MEMORY`]
/// (the memory oracle): the instance's tables and stacks, the resource
/// table's slots, the sink's and the runtime's buffers for the run's
/// connections, the allocator's slack. Seed 27's 250 sequences peaked at
/// 2 to 12 MiB in all; on c7dcc2e's code, unsent bodies and filled fields
/// took single sequences past 100 MiB.
const ALLOWANCE: u64 = 16 << 20;

/// What the audit trail of a run may hold beyond [`ALLOWANCE`]: its queue
/// and the batch its writer is writing, each at most
/// `MAX_AUDIT_QUEUE_BYTES` (the counts of repeated
/// denials, cut records, are within the allowance for these sequences).
const TRAIL_ALLOWANCE: u64 = 2 * crate::support::caps::MAX_AUDIT_QUEUE_BYTES;

/// Resident memory the second half of the sequences may add over the
/// first half's: allocator caches and the compiled guest's pages settle in
/// the first half; growth in proportion to the sequences (a leak of a
/// socket's buffers, ~200 KiB each) would be far above this.
const RSS_GROWTH: u64 = 32 << 20;

/// The byte at `offset` of what a connection from `port` sends the sink
/// (as the guest computes it).
fn pattern(port: u16, offset: u64) -> u8 {
    (offset.wrapping_mul(0x9E37_79B1) >> 11) as u8 ^ (port as u8) ^ ((port >> 8) as u8)
}

/// What the sink got on one connection.
#[derive(Debug, Clone)]
struct Received {
    port: u16,
    /// From the test's marker connection (127.0.0.2), not the guest.
    marker: bool,
    bytes: u64,
    /// The first offset that was not the pattern, if any.
    wrong_at: Option<u64>,
}

#[derive(Default)]
struct Sink {
    received: Mutex<Vec<Received>>,
    open: AtomicUsize,
}

/// Accepts and reads every connection to the end, checking each byte
/// against the pattern of its peer's port.
async fn sink() -> (u16, Arc<Sink>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let sink = Arc::new(Sink::default());
    let state = Arc::clone(&sink);
    tokio::spawn(async move {
        while let Ok((mut stream, peer)) = listener.accept().await {
            state.open.fetch_add(1, Ordering::SeqCst);
            let state = Arc::clone(&state);
            tokio::spawn(async move {
                let port = peer.port();
                let mut offset = 0u64;
                let mut wrong_at = None;
                let mut buf = vec![0u8; 64 << 10];
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    for &b in &buf[..n] {
                        if wrong_at.is_none() && b != pattern(port, offset) {
                            wrong_at = Some(offset);
                        }
                        offset += 1;
                    }
                }
                state.received.lock().unwrap().push(Received {
                    port,
                    marker: peer.ip() == std::net::Ipv4Addr::new(127, 0, 0, 2),
                    bytes: offset,
                    wrong_at,
                });
                state.open.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    (port, sink)
}

/// Accepts and reads everything, keeping nothing.
async fn blackhole() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 << 10];
                while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
            });
        }
    });
    port
}

/// A resolver with no answers: the grant names no name, so none should
/// be asked; if one is, it fails at once rather than asking the system.
struct NoAnswers;

impl Resolver for NoAnswers {
    fn lookup<'a>(&'a self, _name: &'a str) -> Lookup<'a> {
        Box::pin(async { Ok(Vec::new()) })
    }
}

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// The guest's last `sent PORT TOTAL` for each port.
fn sent(stdout: &str) -> HashMap<u16, u64> {
    let mut sent = HashMap::new();
    for line in stdout.lines() {
        let mut words = line.split(' ');
        if let (Some("sent"), Some(port), Some(total)) = (words.next(), words.next(), words.next())
        {
            sent.insert(port.parse().unwrap(), total.parse().unwrap());
        }
    }
    sent
}

#[test]
fn random_call_sequences_leave_the_host_up_the_canary_untouched_and_every_sent_byte_delivered() {
    crate::in_turn(async {
        let sequences = std::env::var("MOAT_BOUNDARY_SEQUENCES")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(SEQUENCES);
        let seed = std::env::var("MOAT_BOUNDARY_SEED")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(SEED);
        let mut rng = StdRng::seed_from_u64(seed);
        let started = std::time::Instant::now();

        let (sink_port, sink) = sink().await;
        let sink_addr = std::net::SocketAddr::from(([127, 0, 0, 1], sink_port));
        let blackhole_port = blackhole().await;
        let canary = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        canary.set_nonblocking(true).unwrap();
        let canary_port = canary.local_addr().unwrap().port();
        let canary_udp = std::net::UdpSocket::bind(("127.0.0.1", canary_port)).unwrap();
        canary_udp.set_nonblocking(true).unwrap();
        let udp_sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let udp_sink_port = udp_sink.local_addr().unwrap().port();

        let policy = Policy::new()
            .allow_connect(&format!(
                "127.0.0.1:{sink_port},127.0.0.1:{blackhole_port},127.0.0.1:{udp_sink_port}"
            ))
            .unwrap()
            .allow_listen("127.0.0.1")
            .unwrap();
        let ports = [sink_port, blackhole_port, canary_port, udp_sink_port].map(|p| p.to_string());
        support::guest(guests::BOUNDARY);

        let mut endings: HashMap<&'static str, usize> = HashMap::new();
        let mut delivered_checks = 0usize;
        let mut peak_growth = 0u64;
        let mut descriptors_before = 0;
        let mut rss_half = 0;
        for n in 0..sequences {
            if n == sequences / 2 {
                descriptors_before = open_descriptors();
                rss_half = support::rss();
            }
            let bytes: Vec<u8> = (0..SEQUENCE_BYTES).map(|_| rng.random()).collect();
            let context = format!("seed {seed}, sequence {n}: {bytes:?}");
            let received_before = sink.received.lock().unwrap().len();

            let options = RunOptions::new(policy.clone())
                .arg(guests::BOUNDARY)
                .args(ports.iter().cloned())
                .resolver(Arc::new(NoAnswers))
                .timeout(RUN_TIME_LIMIT)
                .max_memory(GUEST_MEMORY)
                .limits(moat_host::net::Limits {
                    max_host_memory: Some(BUDGET as usize),
                    ..moat_host::net::Limits::default()
                })
                .stdin(moat_host::Input::Bytes(bytes.clone()))
                .audit(
                    moat_host::audit::Audit::start(
                        Box::new(moat_host::audit::JsonLines::new(std::io::sink())),
                        moat_host::audit::Context::new(None),
                        Vec::new(),
                    )
                    .expect("a trail"),
                );
            let run_started = std::time::Instant::now();
            let rss_before = support::rss();
            support::reset_peak_rss();
            let done = start_with(guests::BOUNDARY, options).finish().await;
            let grown = support::peak_rss().saturating_sub(rss_before);
            peak_growth = peak_growth.max(grown);
            assert!(
                grown <= BUDGET + GUEST_MEMORY + ALLOWANCE + TRAIL_ALLOWANCE,
                "{context}\nthe host grew by {} KiB at its peak (budget {} KiB, guest {} KiB, \
                 allowance {} KiB, the trail's {} KiB); the guest's last steps: {:?}",
                grown >> 10,
                BUDGET >> 10,
                GUEST_MEMORY >> 10,
                ALLOWANCE >> 10,
                TRAIL_ALLOWANCE >> 10,
                done.stderr.lines().rev().take(8).collect::<Vec<_>>()
            );
            if std::env::var_os("MOAT_BOUNDARY_VERBOSE").is_some() {
                let last: Vec<&str> = done.stderr.lines().rev().take(4).collect();
                eprintln!(
                    "sequence {n}: {:?} in {:?}; last: {last:?}",
                    done.exit.as_ref().map(|e| e.code()).ok(),
                    run_started.elapsed()
                );
            }
            let ending = match &done.exit {
                Ok(exit) if exit.code() == 0 => "finished",
                Ok(_) => "exited midway",
                Err(MoatError::Trap(_)) => "trapped",
                Err(MoatError::TimeLimit(_)) => "time limit",
                Err(other) => panic!("{context}\nthe host failed: {other}\n{}", done.stderr),
            };
            *endings.entry(ending).or_default() += 1;

            // Every connection to the sink that was made is accepted and
            // read to its end: a marker connection queued behind them is
            // accepted last. It comes from 127.0.0.2, which no guest
            // connection does (its port may be one a guest connection had).
            let marker = tokio::net::TcpSocket::new_v4().unwrap();
            marker.bind("127.0.0.2:0".parse().unwrap()).unwrap();
            drop(marker.connect(sink_addr).await.unwrap());
            eventually("the sink read every connection", || {
                sink.open.load(Ordering::SeqCst) == 0
                    && sink.received.lock().unwrap()[received_before..]
                        .iter()
                        .any(|r| r.marker)
            })
            .await;

            let received: Vec<Received> = sink.received.lock().unwrap()[received_before..]
                .iter()
                .filter(|r| !r.marker)
                .cloned()
                .collect();
            for r in &received {
                assert_eq!(r.wrong_at, None, "{context}\nnot the guest's bytes: {r:?}");
            }
            for (port, total) in sent(&done.stdout) {
                let got: Vec<&Received> = received.iter().filter(|r| r.port == port).collect();
                assert!(
                    got.iter().any(|r| r.bytes >= total),
                    "{context}\nthe guest sent {total} bytes from port {port}; the sink got {got:?}"
                );
                delivered_checks += 1;
            }

            assert!(
                canary.accept().is_err(),
                "{context}\na connection reached the canary"
            );
            assert!(
                canary_udp.recv_from(&mut [0u8; 16]).is_err(),
                "{context}\na datagram reached the canary"
            );
        }

        // Descriptors back to where they were halfway; memory that does not
        // grow with the sequences.
        eventually("the descriptors of finished runs are closed", || {
            open_descriptors() <= descriptors_before + DESCRIPTOR_SLACK
        })
        .await;
        let rss_end = support::rss();
        assert!(
            rss_end <= rss_half + RSS_GROWTH,
            "resident memory grew from {} KiB to {} KiB over {} sequences",
            rss_half >> 10,
            rss_end >> 10,
            sequences - sequences / 2
        );
        eprintln!(
            "boundary: {sequences} sequences (seed {seed}): {endings:?}; \
             {delivered_checks} sink connections checked byte for byte; \
             the largest growth of a run {} KiB; \
             RSS {} -> {} KiB; descriptors {descriptors_before} -> {}; {:.1} s",
            peak_growth >> 10,
            rss_half >> 10,
            rss_end >> 10,
            open_descriptors(),
            started.elapsed().as_secs_f64()
        );
        // Every way a run can end was met.
        for ending in ["finished", "exited midway", "trapped"] {
            assert!(
                endings.contains_key(ending),
                "no sequence {ending}: {endings:?}"
            );
        }
        assert!(delivered_checks > 0, "no byte was sent to the sink");
    });
}
