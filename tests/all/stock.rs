//! Stock programs (plain std::net, wasi:sockets 0.2) under the policy: the
//! same grants, deny rules and bounds as moat:net guests, names judged as
//! written through moat's own name lookup.

use crate::support;
use crate::support::Names;

use std::sync::Arc;

use crate::support::{
    Finished, connections, echo_server, guests, port_is_free, watched_port, within,
};
use moat_host::net::{Limits, Resolver};
use moat_host::policy::Policy;
use moat_host::{Input, RunOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn options(policy: Policy, names: &Arc<Names>, args: &[&str]) -> RunOptions {
    RunOptions::new(policy)
        .arg("std-net")
        .args(args.iter().copied())
        .stdin(Input::Empty)
        .resolver(Arc::clone(names) as Arc<dyn Resolver>)
}

async fn run(policy: Policy, names: &Arc<Names>, args: &[&str]) -> Finished {
    support::start_with(guests::STD_NET, options(policy, names, args))
        .finish()
        .await
}

/// Where a denied run's stdout reports the denial.
enum Stdout<'a> {
    /// Somewhere in it.
    Contains(&'a str),
    /// At its start.
    StartsWith(&'a str),
    /// As the whole of it.
    Is(&'a str),
}

/// Asserts that `done` was denied: it exited 1, its stdout reports the
/// denial as `stdout` says, and its stderr contains `stderr` (moat's line
/// naming the denial). A failure shows the output it looked at.
#[track_caller]
fn assert_denied(done: &Finished, stdout: Stdout<'_>, stderr: &str) {
    assert_eq!(done.code(), 1, "{}", done.stdout);
    match stdout {
        Stdout::Contains(text) => assert!(done.stdout.contains(text), "{}", done.stdout),
        Stdout::StartsWith(text) => assert!(done.stdout.starts_with(text), "{}", done.stdout),
        Stdout::Is(text) => assert_eq!(done.stdout, text),
    }
    assert!(done.stderr.contains(stderr), "{}", done.stderr);
}

/// Sends `payload` to the echo server at `addr` while reading the echo,
/// half-closes, and returns everything that came back.
async fn echoed_by(addr: std::net::SocketAddr, payload: &[u8]) -> Vec<u8> {
    let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut rd, mut wr) = client.split();
    let write = async {
        wr.write_all(payload).await.unwrap();
        wr.shutdown().await.unwrap();
    };
    let mut echoed = Vec::new();
    let read = rd.read_to_end(&mut echoed);
    within("the echo", async { tokio::join!(write, read) })
        .await
        .1
        .unwrap();
    echoed
}

#[tokio::test]
async fn a_tcp_client_by_address_moves_exact_bytes_when_allowed_and_nothing_when_not() {
    let names = Names::new(&[]);
    let (port, served) = echo_server().await;
    let p = port.to_string();
    let message = "stock bytes \u{1F980} through the policy";
    let policy = Policy::new()
        .allow_connect(&format!("127.0.0.1:{port}"))
        .unwrap();
    let done = run(policy, &names, &["tcp-client", "127.0.0.1", &p, message]).await;
    assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
    assert!(
        done.stdout.contains(&format!("reply: {message}")),
        "{}",
        done.stdout
    );
    assert_eq!(
        within("echo server", served).await.unwrap(),
        message.as_bytes()
    );

    let (listener, port) = watched_port();
    let p = port.to_string();
    let done = run(Policy::new(), &names, &["tcp-client", "127.0.0.1", &p, "x"]).await;
    assert_denied(
        &done,
        Stdout::Contains("error: PermissionDenied"),
        &format!(
            "moat: std-net: connect to 127.0.0.1:{port} denied: needs --allow-net=127.0.0.1:{port}"
        ),
    );
    assert_eq!(connections(&listener), 0);
    assert!(names.asked().is_empty(), "an address needs no lookup");
}

#[tokio::test]
async fn a_name_granted_on_one_port_reaches_that_port_only() {
    let names = Names::new(&[("echo.test", "127.0.0.1")]);
    let (port, served) = echo_server().await;
    let (other, other_port) = watched_port();
    let policy = Policy::new()
        .allow_connect(&format!("echo.test:{port}"))
        .unwrap();

    let p = port.to_string();
    let done = run(
        policy.clone(),
        &names,
        &["tcp-client", "echo.test", &p, "by name"],
    )
    .await;
    assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
    assert!(done.stdout.contains("reply: by name"), "{}", done.stdout);
    assert_eq!(within("echo server", served).await.unwrap(), b"by name");
    assert_eq!(names.asked(), ["echo.test"]);

    // The same name, another port of the same address: denied.
    let o = other_port.to_string();
    let done = run(
        policy.clone(),
        &names,
        &["tcp-client", "echo.test", &o, "x"],
    )
    .await;
    assert_denied(
        &done,
        Stdout::Contains("error: PermissionDenied"),
        &format!(
            "connect to echo.test:{other_port} denied: needs --allow-net=echo.test:{other_port}"
        ),
    );
    // The granted port by address, with no lookup of the name in this run:
    // the address was never resolved from a granted name.
    let (listener, port) = watched_port();
    let policy = Policy::new()
        .allow_connect(&format!("echo.test:{port}"))
        .unwrap();
    let done = run(
        policy,
        &names,
        &["tcp-client", "127.0.0.1", &port.to_string(), "x"],
    )
    .await;
    assert_eq!(done.code(), 1, "{}", done.stdout);
    assert_eq!(connections(&listener), 0);
    assert_eq!(connections(&other), 0);
}

#[tokio::test]
async fn a_name_no_grant_names_is_refused_without_a_query() {
    let names = Names::new(&[("db.test", "127.0.0.1"), ("api.test", "127.0.0.1")]);
    let (listener, port) = watched_port();
    let policy = Policy::new().allow_connect("api.test:443").unwrap();
    let done = run(
        policy,
        &names,
        &["tcp-client", "db.test", &port.to_string(), "x"],
    )
    .await;
    assert_denied(
        &done,
        Stdout::StartsWith("error: PermissionDenied"),
        "moat: std-net: lookup of db.test denied: no --allow-net or --allow-listen entry names it",
    );
    assert!(names.asked().is_empty(), "asked {:?}", names.asked());
    assert_eq!(connections(&listener), 0);

    // An address another granted name resolved to stays denied on ports
    // that name's entries do not allow.
    let policy = Policy::new().allow_connect("api.test:443").unwrap();
    let done = run(
        policy,
        &names,
        &["tcp-client", "api.test", &port.to_string(), "x"],
    )
    .await;
    assert_eq!(done.code(), 1, "{}", done.stdout);
    assert_eq!(names.asked(), ["api.test"]);
    assert_eq!(connections(&listener), 0);
}

#[tokio::test]
async fn deny_rules_judge_the_addresses_a_granted_name_resolved_to() {
    let names = Names::new(&[("rebind.test", "127.0.0.1")]);
    let (listener, port) = watched_port();
    let policy = Policy::new()
        .allow_connect("rebind.test")
        .unwrap()
        .deny_connect("private")
        .unwrap();
    let done = run(
        policy,
        &names,
        &["tcp-client", "rebind.test", &port.to_string(), "x"],
    )
    .await;
    assert_eq!(done.code(), 1, "{}", done.stdout);
    assert!(
        done.stderr.contains(&format!(
            "connect to 127.0.0.1:{port} denied by --deny-net=private"
        )),
        "{}",
        done.stderr
    );
    assert_eq!(connections(&listener), 0);
}

#[tokio::test]
async fn ipv4_mapped_spellings_are_judged_as_their_ipv4_address() {
    let names = Names::new(&[]);
    let (listener, port) = watched_port();
    let p = port.to_string();
    // Every IPv6 address, which a mapped spelling of 127.0.0.1 is not.
    let policy = Policy::new().allow_connect("::/0").unwrap();
    let done = run(policy, &names, &["tcp-client", "::ffff:127.0.0.1", &p, "x"]).await;
    assert_eq!(done.code(), 1, "{}", done.stdout);
    assert_eq!(connections(&listener), 0);
}

#[tokio::test]
async fn a_tcp_server_listens_only_where_granted() {
    let names = Names::new(&[]);
    let port = support::free_port();
    let addr = format!("127.0.0.1:{port}");
    let policy = Policy::new().allow_listen(&addr).unwrap();
    let running = support::start_with(
        guests::STD_NET,
        options(policy, &names, &["tcp-server", &addr]),
    );
    let listening = running.listening_addr().await;
    let payload: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(echoed_by(listening, &payload).await, payload);
    let done = running.finish().await;
    assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);

    // No grant: no port is claimed.
    let port = support::free_port();
    let addr = format!("127.0.0.1:{port}");
    let done = run(Policy::new(), &names, &["tcp-server", &addr]).await;
    assert_denied(
        &done,
        Stdout::Contains("error: PermissionDenied"),
        &format!("listen on 127.0.0.1:{port} denied: needs --allow-listen=127.0.0.1:{port}"),
    );
    assert!(port_is_free(port));
}

#[tokio::test]
async fn an_accept_past_the_socket_cap_is_reset_and_the_server_keeps_its_place() {
    let names = Names::new(&[]);
    // The listener is the run's one socket: an accepted connection would
    // be a second.
    let limits = Limits {
        max_sockets: Some(1),
        ..Limits::default()
    };
    let running = support::start_with(
        guests::STD_NET,
        options(
            Policy::new().allow_listen("127.0.0.1").unwrap(),
            &names,
            &["tcp-server", "127.0.0.1:0"],
        )
        .limits(limits)
        .timeout(std::time::Duration::from_secs(3)),
    );
    let addr = running.listening_addr().await;
    // The reset may come before connect returns (it then fails) or after.
    if let Ok(mut client) = tokio::net::TcpStream::connect(addr).await {
        // Were it accepted, the echo would come back and end.
        let _ = client.write_all(b"echo me").await;
        let _ = client.shutdown().await;
        let mut got = Vec::new();
        let read = within("the reset", client.read_to_end(&mut got)).await;
        assert!(
            read.is_err() || got.is_empty(),
            "an accept past the cap got through: {got:?}"
        );
    }
    // The guest never saw the connection; the run ends at its timeout.
    let done = running.finish().await;
    assert!(
        matches!(done.exit, Err(moat_host::MoatError::TimeLimit(_))),
        "{:?}\n{}",
        done.exit,
        done.stdout
    );
    assert!(!done.stdout.contains("accepted"), "{}", done.stdout);
}

#[tokio::test]
async fn udp_clients_and_servers_move_exact_datagrams_where_granted() {
    let names = Names::new(&[("udp.test", "127.0.0.1")]);
    // Client: an ephemeral port needs no listen grant; the send needs the
    // connect grant, here by name.
    let peer = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let peer_port = peer.local_addr().unwrap().port();
    let echo = tokio::spawn(async move {
        let mut buf = [0u8; 2048];
        let (n, from) = peer.recv_from(&mut buf).await.unwrap();
        peer.send_to(&buf[..n], from).await.unwrap();
        buf[..n].to_vec()
    });
    let policy = Policy::new()
        .allow_connect(&format!("udp.test:{peer_port}"))
        .unwrap();
    let p = peer_port.to_string();
    let done = run(policy, &names, &["udp-client", "udp.test", &p, "datagram"]).await;
    assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
    assert!(
        done.stdout.contains("reply from 127.0.0.1"),
        "{}",
        done.stdout
    );
    assert!(done.stdout.ends_with(": datagram\n"), "{}", done.stdout);
    assert_eq!(within("udp peer", echo).await.unwrap(), b"datagram");

    // Denied send: nothing arrives.
    let peer = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let p = peer.local_addr().unwrap().port().to_string();
    let done = run(Policy::new(), &names, &["udp-client", "127.0.0.1", &p, "x"]).await;
    assert_denied(
        &done,
        Stdout::Contains("error: PermissionDenied"),
        "needs --allow-net=127.0.0.1:",
    );
    let mut buf = [0u8; 16];
    assert!(
        peer.try_recv_from(&mut buf).is_err(),
        "a denied datagram arrived"
    );

    // Server: granted, it echoes one datagram. Its reply is a send, which
    // needs the connect grant, as for moat:net guests.
    let port = support::free_udp_port();
    let addr = format!("127.0.0.1:{port}");
    let policy = Policy::new()
        .allow_listen(&addr)
        .unwrap()
        .allow_connect("127.0.0.1")
        .unwrap();
    let running = support::start_with(
        guests::STD_NET,
        options(policy, &names, &["udp-server", &addr]),
    );
    let listening = running.listening_addr().await;
    let client = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    client.send_to(b"ping", listening).await.unwrap();
    let mut buf = [0u8; 16];
    let (n, _) = within("udp echo", client.recv_from(&mut buf))
        .await
        .unwrap();
    assert_eq!(&buf[..n], b"ping");
    assert_eq!(running.finish().await.code(), 0);

    // Server without a grant: refused, the port stays free.
    let done = run(Policy::new(), &names, &["udp-server", &addr]).await;
    assert_eq!(done.code(), 1, "{}", done.stdout);
    assert!(
        std::net::UdpSocket::bind(&addr).is_ok(),
        "the port was claimed"
    );
}

#[tokio::test]
async fn stock_sockets_count_against_the_socket_cap_and_the_host_stays_up() {
    let names = Names::new(&[]);
    let limits = Limits {
        max_sockets: Some(8),
        ..Limits::default()
    };
    let policy = Policy::new();
    let before = support::open_sockets();
    let done = support::start_with(
        guests::STD_NET,
        options(policy.clone(), &names, &["udp-sockets", "100", "1"]).limits(limits.clone()),
    )
    .finish()
    .await;
    assert_eq!(done.code(), 1, "{}\n{}", done.stdout, done.stderr);
    assert!(
        done.stdout.contains("round 1: opened 8 sockets"),
        "{}",
        done.stdout
    );
    // new-socket-limit, which std reports as EMFILE.
    assert!(
        done.stdout.contains("error: TooManyOpenFiles"),
        "{}",
        done.stdout
    );
    support::eventually("the run's sockets are closed", || {
        support::open_sockets() <= before
    })
    .await;
    // A dropped socket gives its place back: three rounds of 8 fit in 8.
    let done = support::start_with(
        guests::STD_NET,
        options(policy, &names, &["udp-sockets", "8", "3"]).limits(limits),
    )
    .finish()
    .await;
    assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
    assert!(
        done.stdout.contains("round 3: opened 8 sockets"),
        "{}",
        done.stdout
    );
}

#[tokio::test]
async fn the_std_examples_serve_and_fetch_under_their_grants() {
    // std-echo: two clients, one after the other, exact bytes back.
    let names = Names::new(&[("web.test", "127.0.0.1")]);
    let running = support::start_with(
        guests::STD_ECHO,
        // As the demo grants it: any free port, judged as port 0.
        RunOptions::new(Policy::new().allow_listen("127.0.0.1:0").unwrap())
            .arg("std-echo")
            .args(["127.0.0.1:0", "2"])
            .stdin(Input::Empty),
    );
    let addr = running.listening_addr().await;
    for round in 0..2u8 {
        let sent = vec![round; 70_000];
        assert_eq!(echoed_by(addr, &sent).await, sent);
    }
    assert_eq!(running.finish().await.code(), 0);

    // std-fetch: by name, exactly the request a server expects.
    let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = server.local_addr().unwrap().port();
    let served = tokio::spawn(async move {
        let (mut stream, _) = server.accept().await.unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 1024];
        while !request.ends_with(b"\r\n\r\n") {
            let n = stream.read(&mut buf).await.unwrap();
            assert_ne!(n, 0, "request cut short");
            request.extend_from_slice(&buf[..n]);
        }
        stream
            .write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello")
            .await
            .unwrap();
        String::from_utf8(request).unwrap()
    });
    let target = format!("web.test:{port}");
    let done = support::start_with(
        guests::STD_FETCH,
        RunOptions::new(Policy::new().allow_connect(&target).unwrap())
            .arg("std-fetch")
            .args([target.as_str(), "/index.html"])
            .stdin(Input::Empty)
            .resolver(Arc::clone(&names) as Arc<dyn Resolver>),
    )
    .finish()
    .await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert_eq!(
        done.stdout,
        "HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello"
    );
    let request = within("server", served).await.unwrap();
    assert!(
        request.starts_with("GET /index.html HTTP/1.0\r\nHost: web.test\r\n"),
        "{request}"
    );
}

async fn run_p3(options: RunOptions) -> Finished {
    support::start_with(guests::SOCKETS_P3, options)
        .finish()
        .await
}

fn options_p3(policy: Policy, names: &Arc<Names>, args: &[&str]) -> RunOptions {
    RunOptions::new(policy)
        .arg("sockets-p3")
        .args(args.iter().copied())
        .stdin(Input::Empty)
        .resolver(Arc::clone(names) as Arc<dyn Resolver>)
}

#[tokio::test]
async fn a_wasi_0_3_program_looks_names_up_and_connects_under_the_same_rules() {
    let names = Names::new(&[("echo.test", "127.0.0.1")]);
    assert!(support::guest(guests::SOCKETS_P3).has_async_run());
    // A refused name: access-denied, no query.
    let done = run_p3(options_p3(Policy::new(), &names, &["lookup", "echo.test"])).await;
    assert_denied(
        &done,
        Stdout::Is("error: ErrorCode::AccessDenied\n"),
        "moat: sockets-p3: lookup of echo.test denied",
    );
    assert!(names.asked().is_empty());

    // Granted on one port: exact bytes there, denied on another.
    let (port, served) = echo_server().await;
    let (other, other_port) = watched_port();
    let policy = Policy::new()
        .allow_connect(&format!("echo.test:{port}"))
        .unwrap();
    let p = port.to_string();
    let done = run_p3(options_p3(
        policy.clone(),
        &names,
        &["tcp-client", "echo.test", &p, "async bytes"],
    ))
    .await;
    assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
    assert!(
        done.stdout.contains("reply: async bytes"),
        "{}",
        done.stdout
    );
    assert_eq!(within("echo server", served).await.unwrap(), b"async bytes");
    let o = other_port.to_string();
    let done = run_p3(options_p3(
        policy,
        &names,
        &["tcp-client", "echo.test", &o, "x"],
    ))
    .await;
    assert_eq!(done.code(), 1, "{}", done.stdout);
    assert_eq!(done.stdout, "error: ErrorCode::AccessDenied\n");
    assert_eq!(connections(&other), 0);
}

#[tokio::test]
async fn wasi_0_3_sockets_count_against_the_socket_cap() {
    let names = Names::new(&[]);
    let limits = Limits {
        max_sockets: Some(8),
        ..Limits::default()
    };
    let done = run_p3(
        options_p3(Policy::new(), &names, &["tcp-sockets", "100", "1"]).limits(limits.clone()),
    )
    .await;
    assert_eq!(done.code(), 1, "{}", done.stdout);
    assert!(
        done.stdout.contains("round 1: created 8 sockets"),
        "{}",
        done.stdout
    );
    assert!(
        done.stdout.contains("the run holds 8 sockets") && done.stdout.contains("--max-sockets"),
        "{}",
        done.stdout
    );
    let done =
        run_p3(options_p3(Policy::new(), &names, &["tcp-sockets", "8", "3"]).limits(limits)).await;
    assert_eq!(done.code(), 0, "{}", done.stdout);
    assert!(
        done.stdout.contains("round 3: created 8 sockets"),
        "{}",
        done.stdout
    );
}

#[tokio::test]
async fn accepted_connections_give_their_socket_places_back() {
    // The listener and one connection at a time fit in 2; twelve clients
    // in turn each need the place the one before gave back.
    let running = support::start_with(
        guests::STD_ECHO,
        RunOptions::new(Policy::new().allow_listen("127.0.0.1:0").unwrap())
            .arg("std-echo")
            .args(["127.0.0.1:0", "12"])
            .stdin(Input::Empty)
            .limits(Limits {
                max_sockets: Some(2),
                ..Limits::default()
            }),
    );
    let addr = running.listening_addr().await;
    for client in 0..12u8 {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(&[client; 100]).await.unwrap();
        stream.shutdown().await.unwrap();
        let mut back = Vec::new();
        within("echo", stream.read_to_end(&mut back))
            .await
            .unwrap_or_else(|e| panic!("client {client}: {e}"));
        assert_eq!(back, [client; 100], "client {client}");
    }
    let done = running.finish().await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
}

#[tokio::test]
async fn a_tokio_program_gets_the_same_grants() {
    let names = Names::new(&[]);
    let (port, served) = echo_server().await;
    let target = format!("127.0.0.1:{port}");
    let done = support::start_with(
        guests::TOKIO_NET,
        RunOptions::new(Policy::new().allow_connect(&target).unwrap())
            .arg("tokio-net")
            .args(["tcp-client", target.as_str(), "tokio bytes"])
            .stdin(Input::Empty)
            .resolver(Arc::clone(&names) as Arc<dyn Resolver>),
    )
    .finish()
    .await;
    assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
    assert_eq!(done.stdout, "reply: tokio bytes\n");
    assert_eq!(within("echo server", served).await.unwrap(), b"tokio bytes");

    let (listener, port) = watched_port();
    let target = format!("127.0.0.1:{port}");
    let done = support::start_with(
        guests::TOKIO_NET,
        RunOptions::new(Policy::new())
            .arg("tokio-net")
            .args(["tcp-client", target.as_str(), "x"])
            .stdin(Input::Empty),
    )
    .finish()
    .await;
    assert_denied(
        &done,
        Stdout::StartsWith("error: PermissionDenied"),
        &format!("moat: tokio-net: connect to {target} denied"),
    );
    assert_eq!(connections(&listener), 0);

    // A tokio server on a granted port echoes a tokio client's bytes.
    let running = support::start_with(
        guests::TOKIO_NET,
        RunOptions::new(Policy::new().allow_listen("127.0.0.1:0").unwrap())
            .arg("tokio-net")
            .args(["tcp-server", "127.0.0.1:0"])
            .stdin(Input::Empty),
    );
    let addr = running.listening_addr().await;
    let payload: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    assert_eq!(echoed_by(addr, &payload).await, payload);
    assert_eq!(running.finish().await.code(), 0);
}
