//! What a stock guest keeps after dropping the thing it came from.
//!
//! In wasi:sockets 0.3 a socket's `receive` and `send` streams and a
//! listener's stream of connections are resources of their own, each
//! holding the socket's descriptor: a guest can drop the socket and keep
//! them. Each keeps the socket's place in `--max-sockets` until it lets go
//! of the descriptor, so a guest that drops sockets and keeps their
//! streams meets the cap as one that keeps the sockets does; and a place
//! comes back once nothing holds it, connections queued or not. In
//! wasi:sockets 0.2 a name lookup's stream holds its answer: every stream
//! of one name holds the run's one copy.
//!
//! The tests take turns ([`TURN`]): each counts the process's sockets or
//! its memory, which another test's guest would muddy.

use crate::{in_turn, support};

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use crate::support::caps::MAX_ANSWER_ADDRESSES;
use crate::support::{Running, eventually, guests, open_sockets, rss, start_with, within};
use moat_host::net::{Answer, AnswerLookup, Limits, Lookup, Resolver};
use moat_host::policy::Policy;
use moat_host::{Input, RunOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Sockets the process may hold beyond what a test counts for the guest:
/// the test's end of the guest's line, and the guest runtime's own (its
/// signal driver dups one).
const MARGIN: usize = 8;

/// `args` for the sockets-p3 guest, under `policy` and a socket cap.
fn p3(policy: Policy, max_sockets: u32, args: &[&str]) -> RunOptions {
    RunOptions::new(policy)
        .arg("sockets-p3")
        .args(args.iter().copied())
        .stdin(Input::Empty)
        .limits(Limits {
            max_sockets: Some(max_sockets),
            ..Limits::default()
        })
}

/// A peer that never accepts: the kernel completes each handshake and
/// queues the connection, closed or not, until the listener goes (its
/// backlog, 1024, is past the 300 any run here makes; `bind`'s 128 is
/// not). The connections take no descriptor of this process, so
/// [`open_sockets`] counts the guest's alone.
fn silent_peer() -> (TcpListener, String) {
    let peer = tokio::net::TcpSocket::new_v4().unwrap();
    peer.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let peer = peer.listen(1024).unwrap();
    let port = peer.local_addr().unwrap().port().to_string();
    (peer, port)
}

/// The message a 0.3 create past a cap of `max` fails with (0.3 has no
/// new-socket-limit code).
fn cap_reached(max: u32) -> String {
    format!(
        "create failed: ErrorCode::Other(Some(\"limit reached: the run holds {max} sockets and listeners"
    )
}

/// Runs hold-streams with `which` stream (receive or send) under a cap of
/// 100: the guest keeps a line to the test, then connects, keeps the
/// stream and its future, drops the socket, until a create fails.
async fn streams_hold_their_places(which: &str) {
    const CAP: u32 = 100;
    let (_peer, peer_port) = silent_peer();
    let signal = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let signal_port = signal.local_addr().unwrap().port().to_string();
    support::guest(guests::SOCKETS_P3);
    let before = open_sockets();
    let tries = (3 * CAP).to_string();
    let running = start_with(
        guests::SOCKETS_P3,
        p3(
            Policy::new().allow_connect("127.0.0.1").unwrap(),
            CAP,
            &[
                "hold-streams",
                which,
                "127.0.0.1",
                &peer_port,
                &tries,
                &signal_port,
            ],
        ),
    );
    let (line, _) = within("the guest's line", signal.accept()).await.unwrap();
    let out = running.wait_for(&format!(" {which} streams")).await;
    let holding = open_sockets();
    drop(line);
    let done = running.finish().await;
    assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
    // The line is the cap's other place: the socket resources the guest
    // dropped gave none back while their streams held the descriptors.
    assert!(
        out.contains(&format!("held {} {which} streams", CAP - 1)),
        "{out}"
    );
    assert!(
        out.contains(&cap_reached(CAP)) && out.contains("--max-sockets"),
        "{out}"
    );
    assert!(
        holding <= before + CAP as usize + MARGIN,
        "{which}: the host held {} sockets for a run capped at {CAP}",
        holding - before
    );
    eventually(&format!("{which}: the run's sockets are closed"), || {
        open_sockets() <= before
    })
    .await;
}

#[test]
fn wasi_0_3_streams_keep_their_sockets_place_in_the_cap() {
    in_turn(async {
        streams_hold_their_places("receive").await;
        streams_hold_their_places("send").await;
    });
}

#[test]
fn places_held_by_dropped_streams_come_back() {
    in_turn(async {
        // Three rounds of the whole cap: each needs every place the round
        // before gave back when it dropped its sockets and then its streams.
        for which in ["receive", "send"] {
            let (_peer, peer_port) = silent_peer();
            let before = open_sockets();
            let done = start_with(
                guests::SOCKETS_P3,
                p3(
                    Policy::new().allow_connect("127.0.0.1").unwrap(),
                    100,
                    &["drop-streams", which, "127.0.0.1", &peer_port, "100", "3"],
                ),
            )
            .finish()
            .await;
            assert_eq!(done.code(), 0, "{which}: {}\n{}", done.stdout, done.stderr);
            assert!(
                done.stdout
                    .contains(&format!("round 3: held 100 {which} streams")),
                "{}",
                done.stdout
            );
            eprintln!("{which}: {}", done.stdout.lines().last().unwrap_or(""));
            eventually(&format!("{which}: the run's sockets are closed"), || {
                open_sockets() <= before
            })
            .await;
        }
    });
}

/// Sockets of this process in the LISTEN state.
fn listening_sockets() -> usize {
    let ours: HashSet<String> = std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.to_string_lossy();
            Some(
                target
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_owned(),
            )
        })
        .collect();
    ["/proc/self/net/tcp", "/proc/self/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|table| {
            table
                .lines()
                .skip(1)
                .filter_map(|line| {
                    // The fourth field is the state (0A: LISTEN), the
                    // tenth the socket's inode.
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    match (fields.get(3), fields.get(9)) {
                        (Some(&"0A"), Some(inode)) => Some(inode.to_string()),
                        _ => None,
                    }
                })
                .collect::<Vec<_>>()
        })
        .filter(|inode| ours.contains(inode))
        .count()
}

#[test]
fn a_wasi_0_3_listeners_stream_keeps_its_place_in_the_cap() {
    const CAP: u32 = 50;
    in_turn(async {
        let signal = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let signal_port = signal.local_addr().unwrap().port().to_string();
        support::guest(guests::SOCKETS_P3);
        let sockets_before = open_sockets();
        let listening_before = listening_sockets();
        let tries = (3 * CAP).to_string();
        let running = start_with(
            guests::SOCKETS_P3,
            p3(
                Policy::new()
                    .allow_connect(&format!("127.0.0.1:{signal_port}"))
                    .unwrap()
                    .allow_listen("127.0.0.1")
                    .unwrap(),
                CAP,
                &["hold-listeners", &tries, &signal_port],
            ),
        );
        let (line, _) = within("the guest's line", signal.accept()).await.unwrap();
        let out = running.wait_for(" listeners").await;
        let sockets = open_sockets();
        let listening = listening_sockets();
        drop(line);
        let done = running.finish().await;
        assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
        // The line is the cap's other place.
        assert!(
            out.contains(&format!("held {} listeners", CAP - 1)),
            "{out}"
        );
        assert!(
            out.contains(&cap_reached(CAP)) && out.contains("--max-sockets"),
            "{out}"
        );
        assert_eq!(
            listening.saturating_sub(listening_before),
            CAP as usize - 1,
            "listening sockets while the guest held its streams"
        );
        assert!(
            sockets <= sockets_before + CAP as usize + MARGIN,
            "the host held {} sockets for a run capped at {CAP}",
            sockets - sockets_before
        );
        eventually("the run's listeners are closed", || {
            listening_sockets() <= listening_before && open_sockets() <= sockets_before
        })
        .await;
    });
}

/// A listener whose socket and stream the guest dropped closes and gives
/// its place back, though no connection arrives for it (wasmtime-wasi's
/// stream of connections ends only between two connections: the host
/// makes one). Each round needs the places of the round before.
#[test]
fn listeners_dropped_with_their_streams_give_their_places_back() {
    const CAP: u32 = 50;
    in_turn(async {
        support::guest(guests::SOCKETS_P3);
        let sockets_before = open_sockets();
        let listening_before = listening_sockets();
        // Three rounds of the whole cap, each needing every place the round
        // before gave back when it dropped its listeners and their streams.
        let cap = CAP.to_string();
        let done = start_with(
            guests::SOCKETS_P3,
            p3(
                Policy::new().allow_listen("127.0.0.1").unwrap(),
                CAP,
                &["drop-listeners", &cap, "3"],
            ),
        )
        .finish()
        .await;
        assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
        assert!(
            done.stdout
                .contains(&format!("round 3: held {CAP} listeners")),
            "{}",
            done.stdout
        );
        eventually("the run's listeners are closed", || {
            listening_sockets() <= listening_before && open_sockets() <= sockets_before
        })
        .await;
    });
}

/// The address on stdout's line that starts with `prefix`, once there.
async fn address_after(running: &Running, prefix: &str) -> SocketAddr {
    let out = running.wait_for(prefix).await;
    let line = out.lines().find(|l| l.starts_with(prefix)).unwrap();
    line[prefix.len()..].trim().parse().expect("an address")
}

/// Reads `client` to its end (within [`support::PATIENCE`]): whether the
/// peer closed or reset it.
async fn closed_by_peer(client: &mut TcpStream) -> bool {
    let mut got = Vec::new();
    match tokio::time::timeout(support::PATIENCE, client.read_to_end(&mut got)).await {
        Ok(Ok(_)) => got.is_empty(),
        Ok(Err(_)) => true,
        Err(_) => false,
    }
}

/// A listener dropped with a connection waiting for the guest closes both
/// and gives both places back. The host before kept the place it had taken
/// for the connection at the accept's check: one place lost per round.
#[test]
fn a_listener_dropped_with_a_connection_queued_gives_its_places_back() {
    const CAP: u32 = 8;
    const ROUNDS: u32 = 20;
    in_turn(async {
        // Each round a connection is accepted by the host, judged and waiting
        // for the guest, which drops the listener and its stream instead of
        // reading it. A place kept for either would leave none within CAP
        // rounds.
        let rounds = ROUNDS.to_string();
        let cap = CAP.to_string();
        let running = start_with(
            guests::SOCKETS_P3,
            p3(
                Policy::new().allow_listen("127.0.0.1").unwrap(),
                CAP,
                &["drop-queued-listeners", &rounds, &cap],
            ),
        );
        for round in 1..=ROUNDS {
            let addr = address_after(&running, &format!("round {round} listening on ")).await;
            let mut client = TcpStream::connect(addr).await.unwrap();
            running.wait_for(&format!("round {round} dropped")).await;
            assert!(
                closed_by_peer(&mut client).await,
                "round {round}: the connection queued for the dropped listener stayed open"
            );
        }
        let done = running.finish().await;
        assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
        assert!(
            done.stdout.contains(&format!("created {CAP} sockets")),
            "{}",
            done.stdout
        );
    });
}

#[test]
fn connections_handed_to_the_guest_hold_places_and_past_the_cap_are_closed() {
    in_turn(async {
        // The listener and three connections fill a cap of 4: the next ones
        // are closed, and the guest never sees a fourth.
        let running = start_with(
            guests::SOCKETS_P3,
            p3(
                Policy::new().allow_listen("127.0.0.1").unwrap(),
                4,
                &["accept-all"],
            ),
        );
        let addr = address_after(&running, "listening on ").await;
        let mut line = TcpStream::connect(addr).await.unwrap();
        running.wait_for("accepted 1").await;
        let mut held = Vec::new();
        for n in 2..=3 {
            held.push(TcpStream::connect(addr).await.unwrap());
            running.wait_for(&format!("accepted {n}")).await;
        }
        for extra in 1..=3 {
            // A connection refused at the cap is reset, which may come before
            // connect returns (it then fails) or after.
            if let Ok(mut client) = TcpStream::connect(addr).await {
                assert!(
                    closed_by_peer(&mut client).await,
                    "connection {extra} past the cap stayed open"
                );
            }
        }
        line.write_all(b"q").await.unwrap();
        let done = running.finish().await;
        assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
        assert!(
            done.stdout.contains("held 3 connections") && !done.stdout.contains("accepted 4"),
            "{}",
            done.stdout
        );
        drop(held);
    });
}

/// Addresses in the answer of [`MANY`].
const ADDRESSES: u16 = 4000;

/// The name whose answer has [`ADDRESSES`] addresses.
const MANY: &str = "many.test";

/// Answers [`MANY`] with [`ADDRESSES`] private addresses (never
/// connected to), for five minutes, so the run keeps the answer.
struct Many;

fn many() -> Vec<IpAddr> {
    (0..ADDRESSES)
        .map(|i| IpAddr::V4(Ipv4Addr::new(10, 77, (i >> 8) as u8, i as u8)))
        .collect()
}

impl Resolver for Many {
    fn lookup<'a>(&'a self, name: &'a str) -> Lookup<'a> {
        let answer = if name == MANY { many() } else { Vec::new() };
        Box::pin(async move { Ok(answer) })
    }

    fn lookup_answer<'a>(&'a self, name: &'a str) -> AnswerLookup<'a> {
        Box::pin(async move {
            Ok(Answer {
                addresses: self.lookup(name).await?,
                lifetime: Some(Duration::from_secs(300)),
            })
        })
    }
}

/// Runs hold-lookups with `streams` lookups of [`MANY`]; returns the
/// host's growth while the guest holds them, and the guest's output.
async fn hold_lookups(streams: u32) -> (u64, String) {
    let (signal, options) = hold_lookups_options(streams).await;
    let before = rss();
    let running = start_with(guests::STD_NET, options);
    // The guest connects once every stream has its answer.
    let (line, _) = within("the guest's line", signal.accept()).await.unwrap();
    let grown = rss().saturating_sub(before);
    drop(line);
    let done = running.finish().await;
    assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
    (grown, done.stdout)
}

/// The guest's signal listener and the run's options for hold-lookups.
async fn hold_lookups_options(streams: u32) -> (TcpListener, RunOptions) {
    let signal = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = signal.local_addr().unwrap().port().to_string();
    let policy = Policy::new()
        .allow_connect(&format!("{MANY}:80"))
        .unwrap()
        .allow_connect(&format!("127.0.0.1:{port}"))
        .unwrap();
    let options = RunOptions::new(policy)
        .arg("std-net")
        .args(["hold-lookups", MANY, &streams.to_string(), &port])
        .stdin(Input::Empty)
        .resolver(Arc::new(Many));
    (signal, options)
}

/// Lookup streams the guest holds at once. The old host copied the whole
/// answer into each (68 KB apiece: 20,000 streams took it to 1.3 GB);
/// 20,000 of them would be 1.3 GB again, eighty times
/// [`LOOKUPS_RSS_BOUND`].
const STREAMS: u32 = 20_000;

/// What [`STREAMS`] lookup streams may grow the host by: the answer is
/// 4 KiB once (cut to [`MAX_ANSWER_ADDRESSES`]); each stream is a table
/// entry and a finished task's remains, about 0.9 KiB (18 MiB for these),
/// paid from the run's host memory.
const LOOKUPS_RSS_BOUND: u64 = 40 << 20;

#[test]
fn wasi_0_2_lookup_streams_of_one_name_share_one_answer() {
    in_turn(async {
        // A first run warms the engine, the compiled guest and the allocator.
        hold_lookups(100).await;
        let (grown, out) = hold_lookups(STREAMS).await;
        eprintln!(
            "{STREAMS} lookup streams of {ADDRESSES} addresses: host grew by {} KiB",
            grown / 1024
        );
        // The answer is cut to the addresses a run keeps of one name.
        assert!(
            out.contains(&format!("one stream: {MAX_ANSWER_ADDRESSES} addresses")),
            "{out}"
        );
        assert!(out.contains(&format!("holding {STREAMS} lookups")), "{out}");
        assert!(
            grown < LOOKUPS_RSS_BOUND,
            "{STREAMS} lookup streams grew the host by {} MiB",
            grown >> 20
        );
    });
}

#[test]
fn lookup_streams_past_the_host_memory_budget_are_refused() {
    in_turn(async {
        // 4 MiB holds about 4,000 streams at 1 KiB each: the rest of the
        // guest's 20,000 lookups are refused, and the run ends cleanly.
        let (_signal, options) = hold_lookups_options(STREAMS).await;
        let options = options.limits(Limits {
            max_host_memory: Some(4 << 20),
            ..Limits::default()
        });
        let done = start_with(guests::STD_NET, options).finish().await;
        assert_ne!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
        let said = format!("{}{}", done.stdout, done.stderr);
        assert!(said.contains("temporary-resolver-failure"), "{said}");
        assert!(!said.contains("holding"), "{said}");
    });
}
