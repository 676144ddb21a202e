//! Seed 003's lesson: bytes a guest wrote are on the wire while it computes,
//! not after. The guest writes, then computes for 500 ms without awaiting,
//! then connects to a second port to say it is done; the peer records which
//! came first: all the bytes, or the end of the computation.

mod support;

use moat_host::policy::Policy;
use support::{guests, start, within};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

#[derive(Debug, PartialEq, Eq)]
enum Event {
    AllBytesArrived,
    ComputationEnded,
}

async fn bytes_arrive_before_the_computation_ends(bytes: usize) {
    let data = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let done = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let data_port = data.local_addr().unwrap().port().to_string();
    let done_port = done.local_addr().unwrap().port().to_string();
    let guest = start(
        guests::PROBE,
        Policy::new().allow_connect("127.0.0.1").unwrap(),
        // The guest's socket gets a 64 KiB send buffer: the write cannot go
        // out in one piece.
        &[
            "busy",
            "127.0.0.1",
            &data_port,
            &done_port,
            &bytes.to_string(),
            "500",
        ],
    );
    let (events, mut order) = mpsc::unbounded_channel();

    let (mut conn, _) = within("guest connects", data.accept()).await.unwrap();
    let reading = {
        let events = events.clone();
        tokio::spawn(async move {
            let mut got = vec![0u8; bytes];
            conn.read_exact(&mut got).await.unwrap();
            events.send(Event::AllBytesArrived).unwrap();
            let intact = got.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8);
            assert!(intact, "the bytes differ from what the guest wrote");
        })
    };
    let signalled = tokio::spawn(async move {
        done.accept().await.unwrap();
        events.send(Event::ComputationEnded).unwrap();
    });

    let first = within("first event", order.recv()).await.unwrap();
    let second = within("second event", order.recv()).await.unwrap();
    assert_eq!(
        (first, second),
        (Event::AllBytesArrived, Event::ComputationEnded),
        "the bytes waited for the computation"
    );
    reading.await.unwrap();
    signalled.await.unwrap();
    let done = guest.finish().await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
}

#[tokio::test]
async fn eight_mib_written_before_computing_arrive_while_the_guest_computes() {
    bytes_arrive_before_the_computation_ends(8 << 20).await;
}

#[tokio::test]
async fn a_small_reply_written_before_computing_is_on_the_wire_at_once() {
    bytes_arrive_before_the_computation_ends(16).await;
}
