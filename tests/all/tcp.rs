//! TCP through real guests: echo, half-close, reset, abandoned reads,
//! closing listeners, many connections at once.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use crate::support::{guests, start, start_with};
use moat_host::policy::Policy;
use moat_host::{Input, RunOptions};
use rand::{Rng, RngExt, SeedableRng};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn listen_policy() -> Policy {
    Policy::new().allow_listen("127.0.0.1").unwrap()
}

fn connect_policy(port: u16) -> Policy {
    Policy::new()
        .allow_connect(&format!("127.0.0.1:{port}"))
        .unwrap()
}

#[tokio::test]
async fn echo_server_returns_64_mib_written_in_random_sizes() {
    let server = start(guests::ECHO_SERVER, listen_policy(), &["127.0.0.1:0"]);
    let addr = server.listening_addr().await;
    let (mut from_server, mut to_server) = TcpStream::connect(addr).await.unwrap().into_split();

    const TOTAL: usize = 64 << 20;
    let seed = rand::rng().next_u64();
    let sending = tokio::spawn(async move {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut hash = Sha256::new();
        let mut chunk = vec![0u8; 256 << 10];
        let mut sent = 0;
        while sent < TOTAL {
            let n = rng.random_range(1..=chunk.len()).min(TOTAL - sent);
            rng.fill_bytes(&mut chunk[..n]);
            hash.update(&chunk[..n]);
            to_server.write_all(&chunk[..n]).await.unwrap();
            sent += n;
        }
        to_server.shutdown().await.unwrap();
        hash.finalize()
    });
    let mut hash = Sha256::new();
    let mut received = 0;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = from_server.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
        received += n;
    }
    assert_eq!(received, TOTAL, "seed {seed}");
    assert_eq!(hash.finalize(), sending.await.unwrap(), "seed {seed}");
}

#[tokio::test]
async fn echo_server_serves_200_connections_at_once() {
    const CLIENTS: usize = 200;
    let server = start(guests::ECHO_SERVER, listen_policy(), &["127.0.0.1:0"]);
    let addr = server.listening_addr().await;
    // Every client has its first echo back before any sends its second
    // half: the server holds all 200 open at the same time.
    let all_open = Arc::new(tokio::sync::Barrier::new(CLIENTS));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let all_open = Arc::clone(&all_open);
            tokio::spawn(async move {
                let first = format!("client {i} says hello;");
                let second = format!("client {i} says goodbye");
                let mut stream = TcpStream::connect(addr).await.unwrap();
                stream.write_all(first.as_bytes()).await.unwrap();
                let mut echoed = vec![0u8; first.len()];
                stream.read_exact(&mut echoed).await.unwrap();
                assert_eq!(echoed, first.as_bytes());
                all_open.wait().await;
                stream.write_all(second.as_bytes()).await.unwrap();
                stream.shutdown().await.unwrap();
                let mut rest = Vec::new();
                stream.read_to_end(&mut rest).await.unwrap();
                assert_eq!(rest, second.as_bytes());
            })
        })
        .collect();
    for client in clients {
        client.await.unwrap();
    }
}

#[tokio::test]
async fn guest_sees_the_peers_fin_and_can_still_write() {
    let peer = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = peer.local_addr().unwrap().port();
    let guest = start(
        guests::PROBE,
        connect_policy(port),
        &["half-close", "127.0.0.1", &port.to_string()],
    );
    let (mut conn, _) = peer.accept().await.unwrap();
    conn.write_all(b"hello, then FIN").await.unwrap();
    conn.shutdown().await.unwrap();
    let mut after = Vec::new();
    conn.read_to_end(&mut after).await.unwrap();
    assert_eq!(after, b"written after your FIN");
    let done = guest.finish().await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert!(
        done.stdout.contains("got: hello, then FIN"),
        "{}",
        done.stdout
    );
}

#[tokio::test]
async fn peer_sees_the_guests_fin_and_can_still_write() {
    let peer = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = peer.local_addr().unwrap().port();
    let guest = start(
        guests::PROBE,
        connect_policy(port),
        &["fin-first", "127.0.0.1", &port.to_string()],
    );
    let (mut conn, _) = peer.accept().await.unwrap();
    let mut first = Vec::new();
    conn.read_to_end(&mut first).await.unwrap();
    assert_eq!(first, b"guest is done sending");
    conn.write_all(b"peer still talking").await.unwrap();
    conn.shutdown().await.unwrap();
    let done = guest.finish().await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert!(
        done.stdout.contains("got: peer still talking"),
        "{}",
        done.stdout
    );
}

#[tokio::test]
async fn a_peer_reset_is_the_reset_error() {
    let peer = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = peer.local_addr().unwrap().port();
    let guest = start(
        guests::PROBE,
        connect_policy(port),
        &["reset", "127.0.0.1", &port.to_string()],
    );
    let (mut conn, _) = peer.accept().await.unwrap();
    // Reset only once the guest is connected (a reset during the handshake
    // is a failed connect, a different story).
    let mut ready = [0u8; 5];
    conn.read_exact(&mut ready).await.unwrap();
    socket2::SockRef::from(&conn)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(conn); // RST
    let done = guest.finish().await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert!(
        done.stdout.contains("read: connection reset"),
        "{}",
        done.stdout
    );
}

#[tokio::test]
async fn reads_abandoned_by_a_timeout_lose_no_bytes() {
    let peer = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = peer.local_addr().unwrap().port();
    let guest = start(
        guests::PROBE,
        connect_policy(port),
        &["abandon-reads", "127.0.0.1", &port.to_string()],
    );
    let (conn, _) = peer.accept().await.unwrap();
    let (mut from_guest, mut to_guest) = conn.into_split();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut sent = vec![0u8; 2 << 20];
    rng.fill_bytes(&mut sent);
    let sending = {
        let sent = sent.clone();
        tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(8);
            let mut at = 0;
            while at < sent.len() {
                let n = rng.random_range(1..=4096).min(sent.len() - at);
                to_guest.write_all(&sent[at..at + n]).await.unwrap();
                at += n;
                if rng.random_range(0..16) == 0 {
                    // A pause long enough for the guest's reads to time out.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            to_guest.shutdown().await.unwrap();
        })
    };
    let mut echoed = Vec::new();
    from_guest.read_to_end(&mut echoed).await.unwrap();
    sending.await.unwrap();
    let done = guest.finish().await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert!(
        echoed == sent,
        "echoed {} of {} bytes, or different ones",
        echoed.len(),
        sent.len()
    );
    let abandoned: u64 = done
        .stdout
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(abandoned > 0, "no read was abandoned: {}", done.stdout);
}

#[tokio::test]
async fn a_read_dropped_after_the_host_filled_it_loses_no_bytes() {
    const ROUNDS: u64 = 20;
    let peer = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = peer.local_addr().unwrap().port();
    let guest = start(
        guests::PROBE,
        connect_policy(port),
        &[
            "drop-filled-reads",
            "127.0.0.1",
            &port.to_string(),
            &ROUNDS.to_string(),
        ],
    );
    let (conn, _) = peer.accept().await.unwrap();
    let mut lines = tokio::io::BufReader::new(conn);
    for round in 0..ROUNDS {
        let mut line = String::new();
        support::within(
            &format!("round {round}"),
            tokio::io::AsyncBufReadExt::read_line(&mut lines, &mut line),
        )
        .await
        .unwrap();
        if line.is_empty() {
            break; // the guest gave up: its output says why
        }
        assert_eq!(line, format!("go {round}\n"));
        let message = format!("message {round} from the peer;");
        lines.get_mut().write_all(message.as_bytes()).await.unwrap();
    }
    let done = guest.finish().await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    for round in 0..ROUNDS {
        assert!(
            done.stdout.contains(&format!("round {round}: intact")),
            "{}",
            done.stdout
        );
    }
}

#[tokio::test]
async fn closing_a_listener_wakes_a_parked_accept_with_none() {
    let done = support::run(
        guests::PROBE,
        listen_policy(),
        &["accept-close", "127.0.0.1"],
    )
    .await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert!(
        done.stdout.contains("accept after close: none"),
        "{}",
        done.stdout
    );
    assert!(
        done.stdout.contains("local_addr after close: closed"),
        "{}",
        done.stdout
    );
}

#[tokio::test]
async fn socket_options_and_addresses() {
    let peer = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = peer.local_addr().unwrap().port();
    let guest = start(
        guests::PROBE,
        connect_policy(port),
        &["options", "127.0.0.1", &port.to_string()],
    );
    let (conn, _) = peer.accept().await.unwrap();
    let done = guest.finish().await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    let local = conn.peer_addr().unwrap();
    assert!(
        done.stdout
            .contains(&format!("local {local} peer 127.0.0.1:{port}")),
        "{}",
        done.stdout
    );
    assert!(
        done.stdout.contains("zero keepalive: Err(InvalidArgument("),
        "{}",
        done.stdout
    );
}

#[tokio::test]
async fn ncat_relays_stdin_to_the_peer_and_the_peer_to_stdout() {
    let peer = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = peer.local_addr().unwrap().port();
    let input = b"line one\nline two\n".repeat(1000);
    let options = RunOptions::new(connect_policy(port))
        .args(["ncat", "127.0.0.1", &port.to_string()])
        .stdin(Input::Bytes(input.clone()));
    let ncat = start_with(guests::NCAT, options);
    let (mut conn, _) = peer.accept().await.unwrap();
    let mut got = Vec::new();
    conn.read_to_end(&mut got).await.unwrap(); // ncat half-closed at stdin's end
    assert!(got == input);
    conn.write_all(b"reply after your FIN\n").await.unwrap();
    conn.shutdown().await.unwrap();
    let done = ncat.finish().await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert_eq!(done.stdout, "reply after your FIN\n");
}

#[tokio::test]
async fn ncat_listens_for_one_connection() {
    let options = RunOptions::new(listen_policy())
        .args(["ncat", "-l", "127.0.0.1", "0"])
        .stdin(Input::Bytes(b"from ncat\n".to_vec()));
    let ncat = start_with(guests::NCAT, options);
    // ncat prints its address on stderr.
    let addr = {
        let deadline = std::time::Instant::now() + support::PATIENCE;
        loop {
            let err = String::from_utf8_lossy(&ncat.stderr.contents()).into_owned();
            if let Some(line) = err.lines().find(|l| l.starts_with("ncat: listening on ")) {
                break line["ncat: listening on ".len()..]
                    .parse::<std::net::SocketAddr>()
                    .unwrap();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "ncat never listened: {err}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(b"to ncat\n").await.unwrap();
    conn.shutdown().await.unwrap();
    let mut got = Vec::new();
    conn.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"from ncat\n");
    let done = ncat.finish().await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert_eq!(done.stdout, "to ncat\n");
}

#[tokio::test]
async fn errors_name_the_address_they_are_about() {
    let port = support::free_port();
    let refused = support::run(
        guests::PROBE,
        connect_policy(port),
        &["connect", "127.0.0.1", &port.to_string()],
    )
    .await;
    assert_eq!(refused.code(), 1);
    assert!(
        refused.stderr.contains(&format!(
            "error: connect to 127.0.0.1:{port}: connection refused"
        )),
        "{}",
        refused.stderr
    );

    let (_held, port) = support::watched_port();
    let in_use = support::run(
        guests::PROBE,
        listen_policy(),
        &["listen", "127.0.0.1", &port.to_string()],
    )
    .await;
    assert_eq!(in_use.code(), 1);
    assert!(
        in_use.stderr.contains(&format!(
            "error: listen on 127.0.0.1:{port}: address in use"
        )),
        "{}",
        in_use.stderr
    );

    // A HOST:PORT string that is not one is refused before any call.
    let bad = support::run(guests::HYPER_SERVE, listen_policy(), &["127.0.0.1"]).await;
    assert_eq!(bad.code(), 1);
    assert!(
        bad.stderr.contains("\"127.0.0.1\" is not HOST:PORT"),
        "{}",
        bad.stderr
    );
}
