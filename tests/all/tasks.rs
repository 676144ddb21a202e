//! The SDK's tasks: taking turns, aborting.

use crate::support::{guests, start};
use moat_host::policy::Policy;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The SDK's `task::BUDGET`: ready operations a task does before yielding.
const BUDGET: u64 = 128;

fn connect_policy(ports: &[u16]) -> Policy {
    ports.iter().fold(Policy::new(), |policy, port| {
        policy.allow_connect(&format!("127.0.0.1:{port}")).unwrap()
    })
}

/// The chat server's failure, reduced: a task whose socket always has data
/// must not keep a task writing to another socket from running.
#[tokio::test]
async fn a_task_reading_a_flood_lets_a_writing_task_run() {
    const FLOOD: usize = 32 * 1024;
    const READ: usize = 64; // 512 reads, every one of them ready
    let flood_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let other_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (flood_port, other_port) = (
        flood_listener.local_addr().unwrap().port(),
        other_listener.local_addr().unwrap().port(),
    );
    let guest = start(
        guests::PROBE,
        connect_policy(&[flood_port, other_port]),
        &[
            "fairness",
            "127.0.0.1",
            &flood_port.to_string(),
            &other_port.to_string(),
            &READ.to_string(),
        ],
    );
    let (mut flood, _) = flood_listener.accept().await.unwrap();
    let (mut other, _) = other_listener.accept().await.unwrap();
    flood.write_all(&vec![b'x'; FLOOD]).await.unwrap();
    flood.shutdown().await.unwrap();
    // On loopback the flood is in the guest's receive queue once written.
    other.write_all(b"g").await.unwrap();
    let mut line = String::new();
    other.read_to_string(&mut line).await.unwrap();

    let run = guest.finish().await;
    assert_eq!(run.code(), 0, "{}", run.stderr);
    let reads = (FLOOD / READ) as u64;
    let summary = format!("flood of {FLOOD} bytes in {reads} reads; the writer ran after ");
    let seen: u64 = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix(&summary))
        .unwrap_or_else(|| panic!("no summary in {:?}", run.stdout))
        .parse()
        .unwrap();
    assert_eq!(line, format!("writer ran after {seen} reads\n"));
    assert!(
        seen <= BUDGET,
        "the writer waited for {seen} of {reads} ready reads (budget {BUDGET})"
    );
}

#[tokio::test]
async fn an_aborted_task_is_dropped_and_its_connection_closed() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let guest = start(
        guests::PROBE,
        connect_policy(&[port]),
        &["abort", "127.0.0.1", &port.to_string()],
    );
    let (mut peer, _) = listener.accept().await.unwrap();
    // The task was reading when it was aborted: its stream is dropped, and
    // the peer sees the connection end.
    let mut buf = [0u8; 16];
    assert_eq!(peer.read(&mut buf).await.unwrap(), 0);
    let run = guest.finish().await;
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("finished before abort: false; aborted: true"),
        "{}",
        run.stdout
    );
}

/// futures-io's and tokio's traits on a TcpStream, mixed with the SDK's own
/// methods on one connection: every byte arrives, in order, once.
#[tokio::test]
async fn the_io_traits_and_the_sdk_methods_share_one_stream() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let guest = start(
        guests::PROBE,
        connect_policy(&[port]),
        &["io-traits", "127.0.0.1", &port.to_string()],
    );
    let (mut peer, _) = listener.accept().await.unwrap();
    let tail: String = (0..100_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    peer.write_all(b"first line\nsecond line\n").await.unwrap();
    peer.write_all(tail.as_bytes()).await.unwrap();
    peer.shutdown().await.unwrap();
    // Nothing is read until the guest has a write still with the host.
    let said = guest.wait_for("still with the host").await;
    let sent: usize = said
        .lines()
        .find_map(|l| l.strip_prefix("io-traits: "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {said:?}"));
    let mut back = String::new();
    peer.read_to_string(&mut back).await.unwrap();
    let upper = tail.to_uppercase();
    let written: String = upper.chars().cycle().take(sent).collect();
    let want = format!("FIRST LINE\nSECOND LINE\n{written}END\n");
    assert!(
        back == want,
        "got {} bytes back of {}; they differ from byte {:?}",
        back.len(),
        want.len(),
        back.bytes().zip(want.bytes()).position(|(a, b)| a != b)
    );
    let run = guest.finish().await;
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("100000 bytes after the lines"),
        "{}",
        run.stdout
    );
}
