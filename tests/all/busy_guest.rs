//! Seed 003's lesson: bytes a guest wrote are on the wire while it computes,
//! not after. The guest writes, then computes for 500 ms without awaiting,
//! then connects to a second port to say it is done; the peer records which
//! came first: all the bytes, or the end of the computation. The same
//! holds over TLS, where the bytes pass through rustls's buffers first.

use crate::support::certs::Ca;
use crate::support::{guests, start_with, within};
use moat_host::net::TlsTrust;
use moat_host::policy::Policy;
use moat_host::{Input, RunOptions};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;

#[derive(Debug, PartialEq, Eq)]
enum Event {
    AllBytesArrived,
    ComputationEnded,
}

/// Plain TCP, or TLS with a certificate from a private CA the guest's
/// host trusts.
#[derive(Clone, Copy)]
enum Wire {
    Plain,
    Tls,
}

/// A TLS server for 127.0.0.1, and the trust a guest needs to reach it.
fn tls_server() -> (TlsAcceptor, TlsTrust) {
    let ca = Ca::new("moat busy-guest CA");
    let trust = TlsTrust::from_store(rustls::RootCertStore::empty())
        .with_pem(ca.pem().as_bytes())
        .unwrap();
    (ca.leaf(&["127.0.0.1"]).acceptor(&[]), trust)
}

async fn bytes_arrive_before_the_computation_ends(bytes: usize, wire: Wire) {
    let data = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let done = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let data_port = data.local_addr().unwrap().port().to_string();
    let done_port = done.local_addr().unwrap().port().to_string();
    // The guest's socket gets a 64 KiB send buffer: the write cannot go
    // out in one piece.
    let mut args = vec![
        "busy".to_owned(),
        "127.0.0.1".to_owned(),
        data_port,
        done_port,
        bytes.to_string(),
        "500".to_owned(),
    ];
    let mut options = RunOptions::new(Policy::new().allow_connect("127.0.0.1").unwrap());
    let acceptor = match wire {
        Wire::Plain => None,
        Wire::Tls => {
            let (acceptor, trust) = tls_server();
            args.push("tls".to_owned());
            options = options.tls_trust(trust);
            Some(acceptor)
        }
    };
    let guest = start_with(
        guests::PROBE,
        options.arg(guests::PROBE).args(args).stdin(Input::Empty),
    );
    let (events, mut order) = mpsc::unbounded_channel();

    let (tcp, _) = within("guest connects", data.accept()).await.unwrap();
    let mut conn: Box<dyn AsyncRead + Unpin + Send> = match acceptor {
        None => Box::new(tcp),
        Some(acceptor) => Box::new(within("TLS handshake", acceptor.accept(tcp)).await.unwrap()),
    };
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
    bytes_arrive_before_the_computation_ends(8 << 20, Wire::Plain).await;
}

#[tokio::test]
async fn a_small_reply_written_before_computing_is_on_the_wire_at_once() {
    bytes_arrive_before_the_computation_ends(16, Wire::Plain).await;
}

#[tokio::test]
async fn eight_mib_written_over_tls_before_computing_arrive_while_the_guest_computes() {
    bytes_arrive_before_the_computation_ends(8 << 20, Wire::Tls).await;
}

#[tokio::test]
async fn a_small_tls_reply_written_before_computing_is_on_the_wire_at_once() {
    bytes_arrive_before_the_computation_ends(16, Wire::Tls).await;
}
