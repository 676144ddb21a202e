//! A run's figures (issue 58: per-pod figures for node agents), through
//! the embedding API as the shim uses it: every way a guest moves bytes
//! is counted once, in the right place, and its decisions beside them.
//! The shim's file and labels: tests/shim/shim_sandbox.rs and the CRI
//! test; the HTTP bodies: tests/all/http.rs.

use std::sync::Arc;

use crate::support::{self, Finished, echo_server, guests, within};
use moat_host::audit::{Decided, Operation};
use moat_host::figures::Figures;
use moat_host::net::{Direction, Opened, Transport};
use moat_host::policy::Policy;
use moat_host::{Input, RunOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Runs `guest` with `args` under `policy`, counting into fresh figures.
async fn counted(guest: &str, policy: Policy, args: &[&str]) -> (Finished, Arc<Figures>) {
    let figures = Figures::new(Vec::new());
    let options = RunOptions::new(policy)
        .arg(guest)
        .args(args.iter().copied())
        .stdin(Input::Empty)
        .figures(Arc::clone(&figures));
    let done = support::start_with(guest, options).finish().await;
    (done, figures)
}

/// A UDP peer on 127.0.0.1 that echoes one datagram.
async fn udp_echo() -> (u16, tokio::task::JoinHandle<Vec<u8>>) {
    let peer = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let port = peer.local_addr().unwrap().port();
    let echo = tokio::spawn(async move {
        let mut buf = [0u8; 2048];
        let (n, from) = peer.recv_from(&mut buf).await.unwrap();
        peer.send_to(&buf[..n], from).await.unwrap();
        buf[..n].to_vec()
    });
    (port, echo)
}

/// Asserts the TCP figures: bytes each way and connections each way.
#[track_caller]
fn assert_tcp(figures: &Figures, sent: u64, received: u64, connected: u64, accepted: u64) {
    let traffic = figures.traffic();
    assert_eq!(
        (
            traffic.bytes(Transport::Tcp, Direction::Sent),
            traffic.bytes(Transport::Tcp, Direction::Received),
            traffic.connections(Opened::Connected),
            traffic.connections(Opened::Accepted),
        ),
        (sent, received, connected, accepted),
        "tcp sent, received, connected, accepted"
    );
    for transport in [Transport::Udp, Transport::Http] {
        for direction in Direction::ALL {
            assert_eq!(traffic.bytes(transport, direction), 0, "{transport:?}");
        }
    }
}

/// Asserts the UDP figures: datagrams and bytes each way, and no TCP.
#[track_caller]
fn assert_udp(figures: &Figures, sent: (u64, u64), received: (u64, u64)) {
    let traffic = figures.traffic();
    assert_eq!(
        (
            (
                traffic.datagrams(Direction::Sent),
                traffic.bytes(Transport::Udp, Direction::Sent)
            ),
            (
                traffic.datagrams(Direction::Received),
                traffic.bytes(Transport::Udp, Direction::Received)
            ),
        ),
        (sent, received),
        "udp (datagrams, bytes) sent, received"
    );
    assert_eq!(traffic.bytes(Transport::Tcp, Direction::Sent), 0);
    assert_eq!(traffic.connections(Opened::Connected), 0);
}

#[tokio::test]
async fn a_moat_net_connection_counts_its_bytes_and_its_decision() {
    let (port, served) = echo_server().await;
    let policy = Policy::new()
        .allow_connect(&format!("127.0.0.1:{port}"))
        .unwrap();
    let p = port.to_string();
    let (done, figures) = counted(guests::PROBE, policy, &["fin-first", "127.0.0.1", &p]).await;
    assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
    let sent = b"guest is done sending";
    assert_eq!(within("the echo", served).await.unwrap(), sent);
    let n = sent.len() as u64;
    assert_tcp(&figures, n, n, 1, 0);
    let decisions = figures.decisions();
    assert_eq!(decisions.get(Operation::Connect, Decided::Allowed), 1);
    assert_eq!(decisions.get(Operation::Connect, Decided::Denied), 0);

    // Refused: a decision, no connection, no byte.
    let (done, figures) = counted(
        guests::PROBE,
        Policy::new(),
        &["fin-first", "127.0.0.1", &p],
    )
    .await;
    assert_ne!(done.code(), 0);
    assert_tcp(&figures, 0, 0, 0, 0);
    assert_eq!(
        figures.decisions().get(Operation::Connect, Decided::Denied),
        1
    );
}

#[tokio::test]
async fn a_moat_net_datagram_is_counted_each_way() {
    let (port, echo) = udp_echo().await;
    let policy = Policy::new()
        .allow_connect(&format!("127.0.0.1:{port}"))
        .unwrap()
        .allow_listen("127.0.0.1")
        .unwrap();
    let p = port.to_string();
    let (done, figures) = counted(
        guests::PROBE,
        policy,
        &["udp-ask", "127.0.0.1", "127.0.0.1", &p, "twelve bytes"],
    )
    .await;
    assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
    assert_eq!(within("the udp echo", echo).await.unwrap(), b"twelve bytes");
    assert_udp(&figures, (1, 12), (1, 12));
}

#[tokio::test]
async fn a_stock_connection_counts_its_bytes_through_wasi_sockets_0_2() {
    let (port, served) = echo_server().await;
    let policy = Policy::new()
        .allow_connect(&format!("127.0.0.1:{port}"))
        .unwrap();
    let p = port.to_string();
    let message = "stock bytes, counted";
    let (done, figures) = counted(
        guests::STD_NET,
        policy,
        &["tcp-client", "127.0.0.1", &p, message],
    )
    .await;
    assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
    assert_eq!(
        within("the echo", served).await.unwrap(),
        message.as_bytes()
    );
    let n = message.len() as u64;
    assert_tcp(&figures, n, n, 1, 0);
    assert_eq!(
        figures
            .decisions()
            .get(Operation::Connect, Decided::Allowed),
        1
    );
}

#[tokio::test]
async fn a_stock_server_counts_the_connection_it_accepted() {
    let policy = Policy::new().allow_listen("127.0.0.1").unwrap();
    let figures = Figures::new(Vec::new());
    let options = RunOptions::new(policy)
        .arg(guests::STD_NET)
        .args(["tcp-server", "127.0.0.1:0"])
        .stdin(Input::Empty)
        .figures(Arc::clone(&figures));
    let running = support::start_with(guests::STD_NET, options);
    let addr = running.listening_addr().await;
    let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
    let payload = vec![7u8; 100_000];
    client.write_all(&payload).await.unwrap();
    client.shutdown().await.unwrap();
    let mut echoed = Vec::new();
    within("the echo", client.read_to_end(&mut echoed))
        .await
        .unwrap();
    assert_eq!(echoed, payload);
    let done = running.finish().await;
    assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
    assert_tcp(&figures, 100_000, 100_000, 0, 1);
}

#[tokio::test]
async fn a_stock_datagram_is_counted_each_way_through_wasi_sockets_0_2() {
    let (port, echo) = udp_echo().await;
    let policy = Policy::new()
        .allow_connect(&format!("127.0.0.1:{port}"))
        .unwrap();
    let p = port.to_string();
    let (done, figures) = counted(
        guests::STD_NET,
        policy,
        &["udp-client", "127.0.0.1", &p, "a datagram"],
    )
    .await;
    assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
    assert_eq!(within("the udp echo", echo).await.unwrap(), b"a datagram");
    assert_udp(&figures, (1, 10), (1, 10));
}

#[tokio::test]
async fn a_wasi_0_3_connection_counts_its_bytes() {
    let (port, served) = echo_server().await;
    let policy = Policy::new()
        .allow_connect(&format!("127.0.0.1:{port}"))
        .unwrap();
    let p = port.to_string();
    let (done, figures) = counted(
        guests::SOCKETS_P3,
        policy,
        &["tcp-client", "127.0.0.1", &p, "p3 bytes"],
    )
    .await;
    assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
    assert_eq!(within("the echo", served).await.unwrap(), b"p3 bytes");
    assert_tcp(&figures, 8, 8, 1, 0);
}

#[tokio::test]
async fn a_wasi_0_3_datagram_is_counted_each_way() {
    let (port, echo) = udp_echo().await;
    let policy = Policy::new()
        .allow_connect(&format!("127.0.0.1:{port}"))
        .unwrap()
        .allow_listen("127.0.0.1")
        .unwrap();
    let p = port.to_string();
    let (done, figures) = counted(
        guests::SOCKETS_P3,
        policy,
        &["udp-client", "127.0.0.1", &p, "p3 datagram"],
    )
    .await;
    assert_eq!(done.code(), 0, "{}\n{}", done.stdout, done.stderr);
    assert_eq!(within("the udp echo", echo).await.unwrap(), b"p3 datagram");
    assert_udp(&figures, (1, 11), (1, 11));
}
