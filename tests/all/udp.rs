//! UDP through real guests against tokio peers on loopback.

use crate::support;

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use crate::support::{guests, start, start_with, within};
use moat_host::policy::Policy;
use moat_host::{Input, RunOptions};
use tokio::net::{TcpStream, UdpSocket};

fn grants(listen: &str, connect: &str) -> Policy {
    Policy::new()
        .allow_listen(listen)
        .unwrap()
        .allow_connect(connect)
        .unwrap()
}

async fn recv(peer: &UdpSocket) -> (Vec<u8>, SocketAddr) {
    let mut buf = vec![0u8; 70_000];
    let (n, from) = within("a datagram", peer.recv_from(&mut buf))
        .await
        .unwrap();
    buf.truncate(n);
    (buf, from)
}

#[tokio::test]
async fn udp_echo_returns_datagrams_zero_length_included_on_ipv4_and_ipv6() {
    for (host, listen) in [("127.0.0.1", "127.0.0.1:0"), ("::1", "[::1]:0")] {
        let echo = start(
            guests::UDP_ECHO,
            grants(listen, if host == "::1" { "::1" } else { "127.0.0.1" }),
            &[listen],
        );
        let addr = echo.listening_addr().await;
        let peer = UdpSocket::bind(listen).await.unwrap();
        for payload in [&b""[..], b"one", &[0xab; 1400]] {
            peer.send_to(payload, addr).await.unwrap();
            let (got, from) = recv(&peer).await;
            assert_eq!((got.as_slice(), from), (payload, addr), "{host}");
        }
    }
}

#[tokio::test]
async fn the_largest_datagram_fits_and_a_longer_one_is_marked_truncated() {
    // IPv4 carries at most 65,507 bytes; IPv6 up to 65,527: more than fits.
    for (host, peer_addr, sizes) in [
        ("127.0.0.1", "127.0.0.1:0", vec![0usize, 65_507]),
        ("::1", "[::1]:0", vec![65_507, 65_527]),
    ] {
        let guest = start(guests::PROBE, grants(host, host), &["udp-recv", host]);
        let addr = guest.listening_addr().await;
        let peer = UdpSocket::bind(peer_addr).await.unwrap();
        for size in &sizes {
            peer.send_to(&vec![1u8; *size], addr).await.unwrap();
        }
        peer.send_to(b"stop", addr).await.unwrap();
        let done = guest.finish().await;
        assert_eq!(done.code(), 0, "{}", done.stderr);
        let from = peer.local_addr().unwrap();
        let expected: Vec<String> = sizes
            .iter()
            .map(|&n| match n {
                65_527 => format!("len 65508 truncated true from {from}"),
                n => format!("len {n} truncated false from {from}"),
            })
            .collect();
        assert_eq!(done.stdout.lines().skip(1).collect::<Vec<_>>(), expected);
    }
}

#[tokio::test]
async fn receive_many_takes_what_is_queued_and_send_many_answers_in_one_batch() {
    let guest = start(
        guests::PROBE,
        grants("127.0.0.1", "127.0.0.1"),
        &["udp-many", "127.0.0.1"],
    );
    let out = guest.wait_for("listening on").await;
    let tcp: SocketAddr = out
        .lines()
        .find_map(|l| l.strip_prefix("tcp on "))
        .unwrap()
        .parse()
        .unwrap();
    let addr = guest.listening_addr().await;
    let peer = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    for i in 0..10u8 {
        peer.send_to(&[i; 10], addr).await.unwrap();
    }
    // Loopback has queued all ten; now tell the guest to take them.
    let _go = TcpStream::connect(tcp).await.unwrap();
    for i in 0..10u8 {
        assert_eq!(recv(&peer).await.0, [i; 10]);
    }
    let done = guest.finish().await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert!(done.stdout.contains("batch 10"), "{}", done.stdout);
    assert!(
        done.stdout.contains("sent 10 failed None"),
        "{}",
        done.stdout
    );
}

#[tokio::test]
async fn closing_a_socket_wakes_a_parked_receive() {
    let done = support::run(
        guests::PROBE,
        grants("127.0.0.1", "127.0.0.1"),
        &["udp-close", "127.0.0.1"],
    )
    .await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert!(
        done.stdout
            .contains("receive after close: Err(Closed(\"the socket is closed\"))"),
        "{}",
        done.stdout
    );
}

#[tokio::test]
async fn a_denied_destination_gets_nothing() {
    let peer = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let port = peer.local_addr().unwrap().port().to_string();
    // Listening is granted, sending there is not.
    let policy = Policy::new().allow_listen("127.0.0.1").unwrap();
    let done = support::run(
        guests::PROBE,
        policy,
        &["udp-send", "127.0.0.1", &port, "leak"],
    )
    .await;
    assert_eq!(done.code(), 1);
    assert_eq!(
        done.stderr.trim(),
        format!("error: connect to 127.0.0.1:{port} denied: needs --allow-net=127.0.0.1:{port}")
    );
    let mut buf = [0u8; 16];
    assert!(peer.try_recv_from(&mut buf).is_err(), "a datagram got out");

    // And the bind itself needs the listen grant, ephemeral port included.
    let policy = Policy::new().allow_connect("127.0.0.1").unwrap();
    let done = support::run(
        guests::PROBE,
        policy,
        &["udp-send", "127.0.0.1", &port, "x"],
    )
    .await;
    assert_eq!(
        done.stderr.trim(),
        "error: listen on 127.0.0.1:0 denied: needs --allow-listen=127.0.0.1:0"
    );
}

#[tokio::test]
async fn broadcast_is_an_error_on_ipv6_and_fine_on_ipv4() {
    let policy = Policy::new().allow_listen("*").unwrap();
    let done = support::run(guests::PROBE, policy.clone(), &["udp-broadcast", "::1"]).await;
    assert!(
        done.stdout
            .contains("bind with broadcast: InvalidArgument(\"IPv6 has no broadcast"),
        "{}",
        done.stdout
    );
    let done = support::run(guests::PROBE, policy, &["udp-broadcast", "127.0.0.1"]).await;
    assert!(done.stdout.contains("with broadcast"), "{}", done.stdout);
    assert!(!done.stdout.contains("InvalidArgument"), "{}", done.stdout);
}

/// Turns on multicast on `lo` and routes a test group there; false (and a
/// message) when that needs privileges this run does not have.
fn multicast_on_loopback(group: &str) -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0"));
    let ip_available = Command::new("ip").arg("-V").output().is_ok();
    if !(root && ip_available) {
        eprintln!("skipping: enabling multicast on lo needs root and iproute2");
        return false;
    }
    let run = |args: &[&str]| {
        Command::new("ip")
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    run(&["link", "set", "lo", "multicast", "on"]);
    // "File exists" on a second run is fine; the check below is what counts.
    run(&["route", "add", &format!("{group}/32"), "dev", "lo"]);
    let routed = Command::new("ip")
        .args(["route", "get", group])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("dev lo"));
    if !routed {
        eprintln!("skipping: could not route {group} through lo");
    }
    routed
}

#[tokio::test]
async fn multicast_join_send_and_receive_on_loopback() {
    const GROUP: &str = "239.255.77.1";
    // Joining makes the socket reachable by whoever sends to the group: it
    // needs the listen grant for the group, which the bind's does not give.
    let denied = support::run(
        guests::PROBE,
        grants("0.0.0.0", GROUP),
        &["udp-multicast", GROUP, "127.0.0.1"],
    )
    .await;
    assert_eq!(denied.code(), 1, "{}", denied.stdout);
    assert!(
        denied.stderr.contains(&format!("listen on {GROUP}:")),
        "{}",
        denied.stderr
    );
    assert!(
        denied.stderr.contains("--allow-listen="),
        "{}",
        denied.stderr
    );
    if !multicast_on_loopback(GROUP) {
        return;
    }
    let policy = grants(&format!("0.0.0.0,{GROUP}"), GROUP);
    let done = support::run(
        guests::PROBE,
        policy,
        &["udp-multicast", GROUP, "127.0.0.1"],
    )
    .await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert!(
        done.stdout.contains("got \"to the group\" from the group"),
        "{}",
        done.stdout
    );
}

#[tokio::test]
async fn ncat_udp_sends_lines_as_datagrams_and_prints_the_replies() {
    let peer = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let port = peer.local_addr().unwrap().port();
    let options = RunOptions::new(grants("0.0.0.0:0", &format!("127.0.0.1:{port}")))
        .args(["ncat", "-u", "127.0.0.1", &port.to_string()])
        .stdin(Input::Bytes(b"first line\nsecond line\n".to_vec()));
    let ncat = start_with(guests::NCAT, options);
    for expected in [&b"first line"[..], b"second line"] {
        let (got, from) = recv(&peer).await;
        assert_eq!(got, expected);
        let mut reply = b"re: ".to_vec();
        reply.extend_from_slice(&got);
        peer.send_to(&reply, from).await.unwrap();
    }
    let done = ncat.finish().await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert_eq!(done.stdout, "re: first line\nre: second line\n");
}

#[tokio::test]
async fn ncat_udp_listen_prints_and_echoes() {
    let options = RunOptions::new(grants("127.0.0.1", "127.0.0.1"))
        .args(["ncat", "-u", "-l", "127.0.0.1", "0"])
        .stdin(Input::Empty);
    let ncat = start_with(guests::NCAT, options);
    let addr = {
        let deadline = std::time::Instant::now() + support::PATIENCE;
        loop {
            let err = String::from_utf8_lossy(&ncat.stderr.contents()).into_owned();
            if let Some(line) = err
                .lines()
                .find_map(|l| l.strip_prefix("ncat: listening on "))
            {
                break line
                    .trim_end_matches(" (udp)")
                    .parse::<SocketAddr>()
                    .unwrap();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "ncat never listened: {err}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    let peer = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    peer.send_to(b"ping", addr).await.unwrap();
    assert_eq!(recv(&peer).await.0, b"ping");
    ncat.wait_for("ping\n").await;
}

/// A resolver that counts its lookups and answers `127.0.0.1` with the
/// given lifetime (`None`: the resolver does not say).
struct Counted {
    asked: std::sync::atomic::AtomicUsize,
    lifetime: Option<Duration>,
}

impl moat_host::net::Resolver for Counted {
    fn lookup<'a>(&'a self, _name: &'a str) -> moat_host::net::Lookup<'a> {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async { Ok(vec![std::net::Ipv4Addr::LOCALHOST.into()]) })
    }

    fn lookup_answer<'a>(&'a self, name: &'a str) -> moat_host::net::AnswerLookup<'a> {
        let lifetime = self.lifetime;
        Box::pin(async move {
            Ok(moat_host::net::Answer {
                addresses: self.lookup(name).await?,
                lifetime,
            })
        })
    }
}

#[tokio::test]
async fn a_name_sent_to_again_and_again_is_looked_up_once_per_answer_lifetime() {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    const SENDS: usize = 200;
    for (lifetime, lookups) in [(Some(Duration::from_secs(300)), 1), (None, SENDS)] {
        let resolver = Arc::new(Counted {
            asked: Default::default(),
            lifetime,
        });
        let config = moat_host::net::NetConfig {
            resolver: Some(resolver.clone()),
            ..moat_host::net::NetConfig::new(grants("127.0.0.1:0", "counted.test"))
        };
        let net = moat_host::net::Net::build(config, moat_host::net::PendingWrites::new());
        let socket = net
            .bind_udp("127.0.0.1", 0, &Default::default())
            .await
            .unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let port = peer.local_addr().unwrap().port();
        for i in 0..SENDS {
            let data = (i as u32).to_be_bytes();
            socket.send(&data, "counted.test", port).await.unwrap();
            // Every datagram arrives, each to the name's address.
            let (got, _) = recv(&peer).await;
            assert_eq!(got, data);
        }
        assert_eq!(
            resolver.asked.load(Ordering::SeqCst),
            lookups,
            "lookups for {SENDS} sends with an answer lifetime of {lifetime:?}"
        );
        // The kept answer is still judged: a name the policy does not grant
        // is refused whatever is kept.
        assert!(matches!(
            socket.send(b"x", "other.test", port).await,
            Err(moat_host::net::NetError::Denied(_))
        ));
    }
}

/// Sets a socket option on a socket of the test's.
type SetFlag = fn(&socket2::Socket) -> std::io::Result<()>;

/// The reuse flags a guest may ask for, and how the test sets each on a
/// socket of its own.
const REUSE_FLAGS: [(&str, SetFlag); 2] = [
    ("reuse-port", |s| s.set_reuse_port(true)),
    ("reuse-address", |s| s.set_reuse_address(true)),
];

/// A nonblocking UDP socket on 127.0.0.1:`port` with `flag` set.
fn shared_udp(port: u16, flag: SetFlag) -> std::io::Result<std::net::UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    flag(&socket)?;
    socket.set_nonblocking(true)?;
    socket.bind(&SocketAddr::from(([127, 0, 0, 1], port)).into())?;
    Ok(socket.into())
}

/// The address on `bind: ok on ADDR` in `out`.
fn bound_addr(out: &str) -> Option<SocketAddr> {
    out.lines()
        .find_map(|l| l.strip_prefix("bind: ok on "))
        .map(|a| a.trim().parse().expect("an address"))
}

/// Lets the udp-bind-reuse guest end.
async fn signal(out: &str) {
    let addr: SocketAddr = out
        .lines()
        .find_map(|l| l.strip_prefix("signal on "))
        .expect("a signal address")
        .parse()
        .unwrap();
    drop(TcpStream::connect(addr).await.unwrap());
}

#[tokio::test]
async fn a_reuse_flag_does_not_let_a_guest_take_a_port_another_socket_holds() {
    const DATAGRAMS: usize = 40;
    for (flag, set) in REUSE_FLAGS {
        // The test's socket holds the port with the same flag set: Linux
        // would let another socket with it bind there too, and give that
        // one the datagrams.
        let holder = shared_udp(0, set).unwrap();
        let port = holder.local_addr().unwrap().port();
        let guest = start(
            guests::PROBE,
            grants("127.0.0.1", "127.0.0.1"),
            &["udp-bind-reuse", "127.0.0.1", &port.to_string(), flag],
        );
        let out = guest.wait_for("bind: ").await;
        assert!(
            out.contains(&format!(
                "bind: AddressInUse(\"bind to 127.0.0.1:{port}: address in use\")"
            )),
            "{flag}: {out}"
        );
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for i in 0..DATAGRAMS {
            sender.send_to(&[i as u8], ("127.0.0.1", port)).unwrap();
        }
        let mut got = Vec::new();
        let mut buf = [0u8; 16];
        support::eventually(
            &format!("{flag}: {DATAGRAMS} datagrams at the holder"),
            || {
                while let Ok(n) = holder.recv(&mut buf) {
                    got.extend_from_slice(&buf[..n]);
                }
                got.len() >= DATAGRAMS
            },
        )
        .await;
        assert_eq!(got, (0..DATAGRAMS as u8).collect::<Vec<_>>(), "{flag}");
        if bound_addr(&out).is_some() {
            signal(&out).await;
        }
        let done = guest.finish().await;
        assert_eq!(done.code(), 0, "{flag}: {}", done.stderr);
    }
}

#[tokio::test]
async fn a_reuse_flag_still_binds_a_port_nothing_holds_and_lets_others_share_it() {
    const DATAGRAMS: usize = 5;
    let free = support::free_udp_port();
    let cases = [
        (REUSE_FLAGS[0], 0),
        (REUSE_FLAGS[0], free),
        (REUSE_FLAGS[1], free),
    ];
    for ((flag, set), port) in cases {
        let guest = start(
            guests::PROBE,
            grants("127.0.0.1", "127.0.0.1"),
            &["udp-bind-reuse", "127.0.0.1", &port.to_string(), flag],
        );
        let out = guest.wait_for("bind: ").await;
        let addr = bound_addr(&out).unwrap_or_else(|| panic!("{flag} on {port}: {out}"));
        if port != 0 {
            assert_eq!(addr.port(), port, "{flag}");
        }
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for i in 0..DATAGRAMS {
            sender.send_to(&[i as u8], addr).unwrap();
        }
        guest.wait_for(&format!("received {DATAGRAMS}")).await;
        // The flag is set on the guest's socket: a socket of the test's,
        // with the same flag, may join the port (the owner chose to share).
        let joined = shared_udp(addr.port(), set);
        assert!(joined.is_ok(), "{flag} on {port}: {joined:?}");
        drop(joined);
        signal(&out).await;
        let done = guest.finish().await;
        assert_eq!(done.code(), 0, "{flag} on {port}: {}", done.stderr);
    }
}
