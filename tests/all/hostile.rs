//! A hostile guest against the policy and the bounds: every spelling of an
//! address, DNS answers that point home, and each resource it could make
//! the host hold. Each test shows the refusal or the bound, and that the
//! host goes on running guests afterwards.

use crate::support;

use std::collections::HashMap;
use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::support::{connections, guests, port_is_free, run, start_with, watched_port};
use moat_host::net::{
    BindOptions, Limits, ListenOptions, Lookup, Net, NetConfig, NetError, PendingWrites, Resolver,
};
use moat_host::policy::Policy;
use moat_host::settings::{Setting, Spelling, Worded};
use moat_host::{MoatError, RunOptions};

/// Answers chosen names with chosen addresses, as an attacker's DNS
/// server would; anything else has no address.
struct Rebinding(HashMap<&'static str, Vec<IpAddr>>);

impl Resolver for Rebinding {
    fn lookup<'a>(&'a self, name: &'a str) -> Lookup<'a> {
        let answer = self.0.get(name).cloned().unwrap_or_default();
        Box::pin(async move { Ok(answer) })
    }
}

fn rebinding() -> Arc<Rebinding> {
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    Arc::new(Rebinding(HashMap::from([
        ("rebind.test", vec![ip("127.0.0.1")]),
        ("meta.test", vec![ip("169.254.169.254")]),
        ("mixed.test", vec![ip("169.254.169.254"), ip("127.0.0.1")]),
        ("zero.test", vec![ip("0.0.0.0")]),
    ])))
}

async fn run_with(policy: Policy, resolver: Arc<Rebinding>, args: &[&str]) -> support::Finished {
    let options = RunOptions::new(policy)
        .arg(guests::PROBE)
        .args(args.iter().copied())
        .resolver(resolver)
        .stdin(moat_host::Input::Empty);
    start_with(guests::PROBE, options).finish().await
}

#[tokio::test]
async fn an_ipv6_range_admits_no_ipv4_address_written_in_mapped_form() {
    let (listener, port) = watched_port();
    let p = port.to_string();
    // connect: ::/0 is every IPv6 address, and ::ffff:127.0.0.1 is IPv4.
    let v6_only = Policy::new().allow_connect("::/0").unwrap();
    let done = run(
        guests::PROBE,
        v6_only.clone(),
        &["connect", "::ffff:127.0.0.1", &p],
    )
    .await;
    assert_eq!(done.code(), 1);
    assert_eq!(
        done.stderr.trim(),
        format!("error: connect to 127.0.0.1:{port} denied: needs --allow-net=127.0.0.1:{port}")
    );
    // UDP send, the same way.
    let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    peer.set_nonblocking(true).unwrap();
    let peer_port = peer.local_addr().unwrap().port().to_string();
    let sender = v6_only.clone().allow_listen("127.0.0.1").unwrap();
    let done = run(
        guests::PROBE,
        sender,
        &["udp-send", "::ffff:127.0.0.1", &peer_port, "leak"],
    )
    .await;
    assert!(
        done.stderr.contains("denied: needs --allow-net=127.0.0.1:"),
        "{}",
        done.stderr
    );
    assert!(
        peer.recv_from(&mut [0u8; 16]).is_err(),
        "a datagram got out"
    );
    // listen: ::ffff:0.0.0.0 is 0.0.0.0, every IPv4 interface.
    let listen_port = support::free_port();
    let done = run(
        guests::PROBE,
        Policy::new().allow_listen("::/0").unwrap(),
        &["listen", "::ffff:0.0.0.0", &listen_port.to_string()],
    )
    .await;
    assert!(
        done.stderr
            .contains(&format!("listen on 0.0.0.0:{listen_port} denied")),
        "{}",
        done.stderr
    );
    assert!(port_is_free(listen_port));
    // The mapped form of an allowed IPv4 range is allowed, as the address.
    let mapped_range = Policy::new().allow_connect("::ffff:127.0.0.0/104").unwrap();
    let done = run(guests::PROBE, mapped_range, &["connect", "127.0.0.1", &p]).await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert_eq!(connections(&listener), 1);
}

#[tokio::test]
async fn a_listener_on_the_ipv6_any_address_takes_ipv4_only_if_granted() {
    let v6 = Net::new(Policy::new().allow_listen("::/0").unwrap());
    let listener = v6.listen("::", 0, &ListenOptions::default()).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    assert!(std::net::TcpStream::connect(("::1", port)).is_ok());
    // IPv6-only: the IPv4 side of the port is not this listener's.
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
    drop(listener);

    let both = Net::new(Policy::new().allow_listen("::/0,0.0.0.0").unwrap());
    let listener = both
        .listen("::", 0, &ListenOptions::default())
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
}

#[tokio::test]
async fn a_name_that_resolves_home_is_denied_by_private_and_metadata() {
    let (listener, port) = watched_port();
    let p = port.to_string();
    let names = "rebind.test,meta.test,mixed.test,zero.test";
    let open = Policy::new().allow_connect(names).unwrap();
    let fenced = open.clone().deny_connect("metadata,private").unwrap();

    let done = run_with(fenced.clone(), rebinding(), &["connect", "rebind.test", &p]).await;
    assert_eq!(done.code(), 1);
    assert_eq!(
        done.stderr.trim(),
        format!(
            "error: connect to rebind.test:{port} denied by --deny-net=private (it resolved to 127.0.0.1)"
        )
    );
    // Only the resolver was asked: the metadata address got no packet.
    let done = run_with(fenced.clone(), rebinding(), &["connect", "meta.test", "80"]).await;
    assert!(
        done.stderr
            .contains("denied by --deny-net=metadata (it resolved to 169.254.169.254)"),
        "{}",
        done.stderr
    );
    // UDP sends judge the answer the same way.
    let udp = fenced.clone().allow_listen("127.0.0.1").unwrap();
    let done = run_with(udp, rebinding(), &["udp-send", "rebind.test", &p, "x"]).await;
    assert!(
        done.stderr.contains("denied by --deny-net=private"),
        "{}",
        done.stderr
    );
    assert_eq!(connections(&listener), 0);

    // Without the deny entry the same name goes where it resolves.
    let done = run_with(open.clone(), rebinding(), &["connect", "rebind.test", &p]).await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    // A denied address is skipped, not fatal: the next one is used.
    let only_metadata = open.clone().deny_connect("metadata").unwrap();
    let done = run_with(only_metadata, rebinding(), &["connect", "mixed.test", &p]).await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert!(
        done.stdout.contains("connected to 127.0.0.1"),
        "{}",
        done.stdout
    );
    assert_eq!(connections(&listener), 2);
}

#[tokio::test]
async fn a_listen_grant_for_a_name_never_binds_every_interface_whatever_its_dns_says() {
    let port = support::free_port();
    let p = port.to_string();
    let granted = Policy::new()
        .allow_listen(&format!("zero.test:{port},rebind.test:{port}"))
        .unwrap();
    let done = run_with(granted.clone(), rebinding(), &["listen", "zero.test", &p]).await;
    assert_eq!(done.code(), 1, "{}", done.stdout);
    assert!(
        done.stderr
            .contains("zero.test resolved to 0.0.0.0, the unspecified address"),
        "{}",
        done.stderr
    );
    assert!(port_is_free(port), "port {port} was bound");
    // The same grant for a name that resolves to one interface binds it.
    let done = run_with(granted, rebinding(), &["listen", "rebind.test", &p]).await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert!(
        done.stdout
            .contains(&format!("listening on 127.0.0.1:{port}")),
        "{}",
        done.stdout
    );
}

#[tokio::test]
async fn the_unspecified_address_is_not_a_destination() {
    let (listener, port) = watched_port();
    let p = port.to_string();
    for host in ["0.0.0.0", "::", "::ffff:0.0.0.0"] {
        let done = run(guests::PROBE, Policy::allow_all(), &["connect", host, &p]).await;
        assert_eq!(done.code(), 1, "{host}");
        assert!(
            done.stderr
                .contains("is the unspecified address, not a destination"),
            "{host}: {}",
            done.stderr
        );
    }
    // Nor is it when a name resolves to it.
    let all = Policy::new().allow_connect("zero.test").unwrap();
    let done = run_with(all, rebinding(), &["connect", "zero.test", &p]).await;
    assert_eq!(
        done.stderr.trim(),
        "error: invalid argument: zero.test resolved to 0.0.0.0, the unspecified address, \
         which is not a destination"
    );
    assert_eq!(connections(&listener), 0);
    // And `private` denies listening everywhere with --deny-listen.
    let done = run(
        guests::PROBE,
        Policy::allow_all().deny_listen("private").unwrap(),
        &["listen", "0.0.0.0", "0"],
    )
    .await;
    assert!(
        done.stderr
            .contains("listen on 0.0.0.0:0 denied by --deny-listen=private"),
        "{}",
        done.stderr
    );
}

fn limited(policy: Policy, limits: Limits, args: &[&str]) -> support::Running {
    start_with(
        guests::HOSTILE,
        RunOptions::new(policy)
            .limits(limits)
            .arg(guests::HOSTILE)
            .args(args.iter().copied())
            .stdin(moat_host::Input::Empty),
    )
}

#[tokio::test]
async fn a_guest_holds_no_more_sockets_than_its_cap_and_the_host_goes_on() {
    let peer = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = peer.local_addr().unwrap().port().to_string();
    let policy = Policy::new().allow_connect("127.0.0.1").unwrap();
    let limits = Limits {
        max_sockets: Some(16),
        ..Limits::default()
    };
    let done = limited(
        policy.clone(),
        limits,
        &["hold-sockets", "127.0.0.1", &port, "100"],
    )
    .finish()
    .await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert!(
        done.stdout
            .contains("held 16; stopped by: limit reached: the run holds 16 sockets"),
        "{}",
        done.stdout
    );
    assert!(done.stdout.contains("--max-sockets"), "{}", done.stdout);
    // The next guest in the same host gets its own count.
    let done = run(guests::PROBE, policy, &["connect", "127.0.0.1", &port]).await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
}

/// A peer that accepts and never reads, with a small receive buffer so
/// that a few hundred KiB fill it.
fn never_reading_peer() -> std::net::TcpListener {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(16 * 1024).unwrap();
    socket
        .bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
        .unwrap();
    socket.listen(128).unwrap();
    socket.into()
}

#[tokio::test]
async fn sockets_closed_with_unsent_bytes_count_until_they_are_reset() {
    let peer = never_reading_peer();
    let port = peer.local_addr().unwrap().port().to_string();
    let policy = Policy::new().allow_connect("127.0.0.1").unwrap();
    // Lingering sockets hold their slots: the fifth connect is refused.
    let limits = Limits {
        max_sockets: Some(4),
        close_linger: Duration::from_secs(600),
        ..Limits::default()
    };
    let eight_mib = (8 << 20).to_string();
    let guest = limited(
        policy.clone(),
        limits,
        &["drop-unsent", "127.0.0.1", &port, "20", &eight_mib],
    );
    let out = guest.wait_for("dropped").await;
    assert!(
        out.contains("dropped 4; stopped by: limit reached"),
        "{out}"
    );
    // The run ends, and with it the linger: every cut stream is reset, so
    // the peer can tell it did not get everything.
    let done = guest.finish().await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    for _ in 0..4 {
        assert_reset(peer.accept().unwrap().0);
    }
}

/// Reads `conn` to its end, which must be a reset, not a FIN.
fn assert_reset(mut conn: std::net::TcpStream) {
    let mut sink = Vec::new();
    let ended = conn.read_to_end(&mut sink);
    assert_eq!(
        ended.map_err(|e| e.kind()),
        Err(std::io::ErrorKind::ConnectionReset),
        "after {} bytes the stream ended without a reset",
        sink.len()
    );
}

/// Client sockets of this host connected (or closing) towards `port`.
fn client_sockets_to(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter(|line| {
            line.split_whitespace()
                .nth(2)
                .and_then(|remote| remote.rsplit(':').next())
                == Some(&format!("{port:04X}"))
        })
        .count()
}

fn address_at_end(out: &str) -> SocketAddr {
    out.trim()
        .rsplit(' ')
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address at the end of {out}"))
}

#[tokio::test]
async fn a_close_linger_that_runs_out_resets_the_connection() {
    let peer = never_reading_peer();
    let peer_port = peer.local_addr().unwrap().port();
    let policy = Policy::new()
        .allow_connect("127.0.0.1")
        .unwrap()
        .allow_listen("127.0.0.1")
        .unwrap();
    let limits = Limits {
        close_linger: Duration::from_millis(200),
        ..Limits::default()
    };
    let eight_mib = (8 << 20).to_string();
    // The guest lives on after dropping the socket: only the close linger
    // can end its drain.
    let guest = limited(
        policy,
        limits,
        &[
            "drop-unsent",
            "127.0.0.1",
            &peer_port.to_string(),
            "1",
            &eight_mib,
            "hold",
        ],
    );
    let out = guest.wait_for("waiting on ").await;
    assert!(out.contains("dropped 1"), "{out}");
    // A reset closes the guest's side at once; a FIN would leave it
    // waiting for the peer to read (FIN_WAIT1) for minutes.
    support::eventually("the guest's side of the cut connection is gone", || {
        client_sockets_to(peer_port) == 0
    })
    .await;
    assert_reset(peer.accept().unwrap().0);
    std::net::TcpStream::connect(address_at_end(&out)).unwrap();
    assert_eq!(guest.finish().await.code(), 0);
}

#[tokio::test]
async fn memory_past_the_limit_stops_the_guest_and_the_next_one_runs() {
    let options = RunOptions::new(Policy::new())
        .max_memory(64 << 20)
        .arg(guests::HOSTILE)
        .args(["grow-memory", "1024"])
        .stdin(moat_host::Input::Empty);
    let done = start_with(guests::HOSTILE, options).finish().await;
    match &done.exit {
        Err(MoatError::MemoryLimit(reached)) => {
            assert_eq!(reached.limit, 64 << 20);
            assert!(reached.desired > 64 << 20);
        }
        other => panic!("expected the memory limit, got {other:?}\n{}", done.stdout),
    }
    assert!(done.stdout.contains("grew to 48 MiB"), "{}", done.stdout);
    assert!(!done.stdout.contains("no limit met"), "{}", done.stdout);
    // Without the limit the same guest gets what it asks for.
    let options = RunOptions::new(Policy::new())
        .arg(guests::HOSTILE)
        .args(["grow-memory", "128"])
        .stdin(moat_host::Input::Empty);
    let done = start_with(guests::HOSTILE, options).finish().await;
    assert_eq!(done.code(), 0, "{:?}", done.exit);
    assert!(done.stdout.contains("grew to 128 MiB: no limit met"));
}

/// Under the containerd shim, grants are spelled as the container's
/// variables: a bound reached names the variable that raises it, not a
/// flag of `moat run`'s the user never wrote. With flags, the flag; for
/// an embedder who asks for it, the option of the embedding API.
#[tokio::test]
async fn a_bound_reached_names_the_setting_as_the_user_wrote_it() {
    for (spelling, sockets, waiting, host_memory, memory, timeout) in [
        (
            Spelling::Flags,
            "--max-sockets",
            "--max-waiting-calls",
            "--max-host-memory",
            "--max-memory",
            "--timeout",
        ),
        (
            Spelling::Environment,
            "MOAT_MAX_SOCKETS",
            "MOAT_MAX_WAITING_CALLS",
            "MOAT_MAX_HOST_MEMORY",
            "MOAT_MAX_MEMORY",
            "MOAT_TIMEOUT",
        ),
        (
            Spelling::Embedding,
            "Limits::max_sockets",
            "Limits::max_waiting_calls",
            "Limits::max_host_memory",
            "RunOptions::max_memory",
            "RunOptions::timeout",
        ),
    ] {
        let policy = Policy::new()
            .allow_listen("127.0.0.1")
            .unwrap()
            .spelled(spelling);
        let config = NetConfig {
            limits: Limits {
                max_sockets: Some(1),
                max_waiting_calls: 1,
                max_host_memory: Some(1),
                ..Limits::default()
            },
            ..NetConfig::new(policy.clone())
        };
        let net = Net::build(config, PendingWrites::new());
        let raised = |err: NetError, setting: &str| match err {
            NetError::LimitReached(limit) => {
                assert!(
                    limit
                        .worded(spelling)
                        .to_string()
                        .ends_with(&format!("raise it with {setting}")),
                    "{spelling:?}: {limit}"
                );
                let named = limit.setting.map(|s| s.named(spelling));
                assert_eq!(named, Some(setting), "{spelling:?}: the typed setting");
            }
            other => panic!("{spelling:?}: expected limit-reached, got {other:?}"),
        };
        // The socket takes the run's one place: a listener has none.
        let socket = net
            .bind_udp("127.0.0.1", 0, &BindOptions::default())
            .await
            .unwrap();
        match net.listen("127.0.0.1", 0, &ListenOptions::default()).await {
            Ok(_) => panic!("{spelling:?}: a listener past the socket cap"),
            Err(err) => raised(err, sockets),
        }
        // One receive waits; a second waiting is past the cap.
        {
            let mut first = std::pin::pin!(socket.receive());
            assert!(
                futures::poll!(first.as_mut()).is_pending(),
                "{spelling:?}: no datagram yet"
            );
            raised(socket.receive().await.unwrap_err(), waiting);
        }
        // A datagram arrives: one byte of host memory pays for no buffer.
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sender
            .send_to(b"hello", socket.local_addr().unwrap())
            .unwrap();
        raised(socket.receive().await.unwrap_err(), host_memory);
        drop(socket);

        let done = support::start_as_given(
            guests::HOSTILE,
            RunOptions::new(policy.clone())
                .max_memory(32 << 20)
                .arg(guests::HOSTILE)
                .args(["grow-memory", "256"])
                .stdin(moat_host::Input::Empty),
        )
        .finish()
        .await;
        match &done.exit {
            Err(MoatError::MemoryLimit(reached)) => {
                assert!(
                    reached
                        .worded(spelling)
                        .to_string()
                        .ends_with(&format!("(raise it with {memory})")),
                    "{reached}"
                );
            }
            other => panic!("{spelling:?}: expected the memory limit, got {other:?}"),
        }
        let done = support::start_as_given(
            guests::HOSTILE,
            RunOptions::new(policy)
                .timeout(Duration::from_millis(300))
                .arg(guests::HOSTILE)
                .arg("wait-forever")
                .stdin(moat_host::Input::Empty),
        )
        .finish()
        .await;
        match &done.exit {
            Err(MoatError::TimeLimit(reached)) => {
                assert!(
                    reached
                        .worded(spelling)
                        .to_string()
                        .contains(&format!("({timeout})")),
                    "{reached}"
                );
            }
            other => panic!("{spelling:?}: expected the time limit, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_guest_past_its_time_is_stopped_computing_or_waiting() {
    for command in ["spin", "wait-forever"] {
        let options = RunOptions::new(Policy::new())
            .timeout(Duration::from_millis(300))
            .arg(guests::HOSTILE)
            .arg(command)
            .stdin(moat_host::Input::Empty);
        let done = start_with(guests::HOSTILE, options).finish().await;
        match &done.exit {
            Err(MoatError::TimeLimit(reached)) => {
                assert_eq!(reached.limit, Duration::from_millis(300), "{command}");
            }
            other => panic!("{command}: expected the time limit, got {other:?}"),
        }
        assert!(done.stdout.contains("ing"), "{command}: {}", done.stdout);
    }
}

/// Sockets of this host in SYN_SENT towards `port` (from /proc/net/tcp).
fn half_open_to(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.len() > 3
                && fields[3] == "02"
                && fields[2].rsplit(':').next() == Some(&format!("{port:04X}"))
        })
        .count()
}

/// A listener whose accept queue is full: a further connect waits for an
/// answer that never comes (its SYNs are dropped).
fn full_listener() -> (socket2::Socket, Vec<std::net::TcpStream>, u16) {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket
        .bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
        .unwrap();
    socket.listen(1).unwrap();
    let port = socket.local_addr().unwrap().as_socket().unwrap().port();
    // Backlog 1 holds two connections.
    let fillers = (0..2)
        .map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    (socket, fillers, port)
}

#[tokio::test]
async fn a_connect_given_up_leaves_no_half_open_socket() {
    let (_listener, _fillers, port) = full_listener();
    let p = port.to_string();
    let policy = Policy::new()
        .allow_connect("127.0.0.1")
        .unwrap()
        .allow_listen("127.0.0.1")
        .unwrap();
    // The guest's own timeout: the host ends the attempt and says so.
    let done = limited(
        policy.clone(),
        Limits::default(),
        &["connect-timeout", "127.0.0.1", &p, "300"],
    )
    .finish()
    .await;
    assert!(
        done.stdout.contains(&format!(
            "connect: connect to 127.0.0.1:{port} took longer than 300ms, the connect's own \
             timeout (its `timeout` option)"
        )),
        "{}",
        done.stdout
    );
    assert_eq!(half_open_to(port), 0);
    // The guest stops waiting (drops the call): same, while it lives on.
    let guest = limited(
        policy,
        Limits::default(),
        &["connect-abandon", "127.0.0.1", &p, "300"],
    );
    let out = guest.wait_for("waiting on ").await;
    assert!(out.contains("abandoned (timed out)"), "{out}");
    assert_eq!(
        half_open_to(port),
        0,
        "the abandoned connect is still trying"
    );
    std::net::TcpStream::connect(address_at_end(&out)).unwrap();
    guest.finish().await;
}

/// A resolver that never answers, counting the lookups still running.
#[derive(Default)]
struct Silent(Arc<AtomicUsize>);

struct Running(Arc<AtomicUsize>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Resolver for Silent {
    fn lookup<'a>(&'a self, _name: &'a str) -> Lookup<'a> {
        self.0.fetch_add(1, Ordering::SeqCst);
        let running = Running(Arc::clone(&self.0));
        Box::pin(async move {
            let _running = running;
            std::future::pending().await
        })
    }
}

/// A lookup past its time names the setting that bounds it as the run
/// writes it (it named `--lookup-timeout` under the shim too), and carries
/// it typed.
#[tokio::test]
async fn a_lookup_timeout_names_its_setting_as_the_user_wrote_it() {
    for spelling in [Spelling::Flags, Spelling::Environment, Spelling::Embedding] {
        let config = NetConfig {
            limits: Limits {
                lookup_timeout: Duration::from_millis(50),
                ..Limits::default()
            },
            resolver: Some(Arc::new(Silent::default())),
            ..NetConfig::new(Policy::allow_all().spelled(spelling))
        };
        let net = Net::build(config, PendingWrites::new());
        let options = moat_host::net::ConnectOptions::default();
        match net.connect("quiet.test", 80, &options).await {
            Err(NetError::TimedOut(timed_out)) => {
                let named = Setting::LookupTimeout.named(spelling);
                assert!(
                    timed_out
                        .worded(spelling)
                        .to_string()
                        .ends_with(&format!("({named})")),
                    "{spelling:?}: {timed_out}"
                );
                assert_eq!(
                    timed_out.setting,
                    Some(Setting::LookupTimeout),
                    "{spelling:?}"
                );
            }
            other => panic!("{spelling:?}: {:?}", other.err()),
        }
    }
}

#[tokio::test]
async fn lookups_are_bounded_in_number_and_time_and_end_with_their_caller() {
    let silent = Silent::default();
    let running = Arc::clone(&silent.0);
    let config = NetConfig {
        limits: Limits {
            max_lookups: 2,
            lookup_timeout: Duration::from_millis(200),
            ..Limits::default()
        },
        resolver: Some(Arc::new(silent)),
        ..NetConfig::new(Policy::allow_all().spelled(moat_host::settings::Spelling::Flags))
    };
    let net = Net::build(config, PendingWrites::new());
    let options = moat_host::net::ConnectOptions::default();
    // Five at once: two look up, three wait for a turn; all time out.
    let attempts = (0..5).map(|i| {
        let net = net.clone();
        let options = options.clone();
        async move { net.connect(&format!("n{i}.test"), 80, &options).await }
    });
    let results = futures::future::join_all(attempts).await;
    for (i, result) in results.into_iter().enumerate() {
        match result {
            Err(NetError::TimedOut(timed_out)) => {
                assert_eq!(
                    timed_out.worded(Spelling::Flags).to_string(),
                    format!(
                        "lookup of n{i}.test took longer than 200ms, the run's lookup timeout \
                         (--lookup-timeout)"
                    )
                );
                let setting = timed_out.setting;
                assert_eq!(setting, Some(Setting::LookupTimeout), "typed");
            }
            other => panic!("{:?}", other.err()),
        }
    }
    assert_eq!(
        running.load(Ordering::SeqCst),
        0,
        "a lookup outlived its call"
    );
    // A connect timeout ends a lookup too.
    let short = moat_host::net::ConnectOptions {
        timeout: Some(Duration::from_millis(50)),
        ..options
    };
    match net.connect("slow.test", 80, &short).await {
        Err(NetError::TimedOut(timed_out)) => {
            assert_eq!(
                timed_out.to_string(),
                "connect to slow.test:80 took longer than 50ms, the connect's own timeout \
                 (its `timeout` option)"
            );
            assert_eq!(
                timed_out.setting, None,
                "the guest's own timeout, no setting"
            );
        }
        other => panic!("{:?}", other.err()),
    }
    assert_eq!(running.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_listener_caps_its_connections_in_all_and_per_peer() {
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpStream;

    let net = Net::new(Policy::new().allow_listen("127.0.0.1").unwrap());
    let options = ListenOptions {
        max_connections_per_peer: Some(2),
        ..ListenOptions::default()
    };
    let listener = net.listen("127.0.0.1", 0, &options).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let queue = listener.queue();
    let mut kept = Vec::new();
    let mut clients = Vec::new();
    for _ in 0..2 {
        clients.push(TcpStream::connect(addr).await.unwrap());
        kept.push(support::within("an accept", queue.accept()).await.unwrap());
    }
    // A third from the same address is accepted and reset at once.
    let mut third = TcpStream::connect(addr).await.unwrap();
    let mut buf = [0u8; 1];
    assert_eq!(
        support::within("the reset", third.read(&mut buf))
            .await
            .map_err(|e| e.kind()),
        Err(std::io::ErrorKind::ConnectionReset)
    );
    // One closes: the peer has room again.
    kept.pop();
    let _fourth = TcpStream::connect(addr).await.unwrap();
    kept.push(
        support::within("an accept after room", queue.accept())
            .await
            .unwrap(),
    );
    assert_eq!(kept.len(), 2);

    // In all: a listener capped at one connection stops accepting until
    // that one closes.
    let options = ListenOptions {
        max_connections: Some(1),
        ..ListenOptions::default()
    };
    let listener = net.listen("127.0.0.1", 0, &options).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let queue = listener.queue();
    let _first = TcpStream::connect(addr).await.unwrap();
    let first = support::within("the first accept", queue.accept())
        .await
        .unwrap();
    let _second = TcpStream::connect(addr).await.unwrap();
    let waiting = tokio::spawn({
        let queue = queue.clone();
        async move { queue.accept().await.is_some() }
    });
    // Nothing can show "never" but a while: 300 ms is a hundred times what
    // an accept takes here, and a slow machine can only make this pass.
    let early = tokio::time::timeout(Duration::from_millis(300), async {
        while !waiting.is_finished() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(early.is_err(), "a second connection was accepted");
    drop(first);
    assert!(support::within("the second accept", waiting).await.unwrap());
}
