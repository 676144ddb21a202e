//! TLS peers that misbehave on purpose, against the TLS core: garbage or
//! a truncated record instead of a handshake, on the client side and the
//! server side, and a garbage record after a good handshake. Each gets a
//! typed error; none panics, none hands the garbage on as data, and a
//! listener goes on serving the next client.

use std::future::poll_fn;

use crate::support::certs::Ca;
use crate::support::within;
use moat_host::net::{ListenOptions, Net, NetError, TlsClientOptions, TlsServerOptions};
use moat_host::policy::Policy;
use moat_host::settings::Worded as _;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn net() -> Net {
    Net::new(Policy::allow_all())
}

fn trusting(ca: &Ca) -> TlsClientOptions {
    TlsClientOptions {
        extra_roots_pem: Some(ca.pem().into_bytes()),
        ..TlsClientOptions::default()
    }
}

/// A peer on 127.0.0.1 that reads what the client sends first, answers
/// `answer` and closes.
async fn answering(answer: &'static [u8]) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (mut tcp, _) = listener.accept().await.unwrap();
        let mut hello = [0u8; 512];
        let _ = tcp.read(&mut hello).await;
        let _ = tcp.write_all(answer).await;
        let _ = tcp.shutdown().await;
    });
    port
}

#[tokio::test]
async fn a_server_that_answers_a_client_hello_with_garbage_or_half_a_record_is_a_handshake_error() {
    let ca = Ca::new("moat test CA");
    for (what, answer) in [
        ("plain text", &b"HTTP/1.1 400 Bad Request\r\n\r\n"[..]),
        // A handshake record's header, its length, and then nothing.
        ("half a record", &[0x16, 0x03, 0x03, 0x40, 0x00, 0x02][..]),
        ("an alert", &[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28][..]),
    ] {
        let port = answering(answer).await;
        let failed = within(
            what,
            net().connect_tls("127.0.0.1", port, &Default::default(), &trusting(&ca)),
        )
        .await;
        match failed {
            Err(NetError::TlsHandshake(why)) => assert!(!why.is_empty(), "{what}"),
            Err(other) => panic!("{what}: {other:?}"),
            Ok(_) => panic!("{what}: a TLS connection over garbage"),
        }
    }
}

#[tokio::test]
async fn a_garbage_record_after_the_handshake_is_an_error_not_data() {
    let ca = Ca::new("moat test CA");
    let leaf = ca.leaf(&["localhost"]);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let acceptor = leaf.acceptor(&[]);
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut tls = acceptor.accept(tcp).await.unwrap();
        tls.write_all(b"good bytes").await.unwrap();
        tls.flush().await.unwrap();
        // An application-data record of garbage, under the TLS layer.
        let (tcp, _) = tls.get_mut();
        tcp.write_all(&[0x17, 0x03, 0x03, 0x00, 0x08, 1, 2, 3, 4, 5, 6, 7, 8])
            .await
            .unwrap();
        tcp.shutdown().await.unwrap();
    });
    let conn = net()
        .connect_tls("localhost", port, &Default::default(), &trusting(&ca))
        .await
        .unwrap();
    let (mut reader, _) = conn.reader().unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    let end = loop {
        match poll_fn(|cx| reader.poll_read(cx, &mut buf)).await {
            Ok(0) => break Ok(()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => break Err(e),
        }
    };
    assert_eq!(got, b"good bytes", "only what the TLS layer vouched for");
    assert!(end.is_err(), "the garbage record ended the read cleanly");
}

#[tokio::test]
async fn a_listener_drops_a_client_that_sends_garbage_or_half_a_hello_and_serves_the_next() {
    let ca = Ca::new("moat test CA");
    let listener = net()
        .listen_tls(
            "127.0.0.1",
            0,
            &ListenOptions::default(),
            &TlsServerOptions {
                identity: ca.leaf(&["localhost"]).identity(),
                alpn: Vec::new(),
                client_roots_pem: None,
                handshake_timeout: None,
            },
        )
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    for (what, sent) in [
        ("plain text", &b"GET / HTTP/1.1\r\nhost: x\r\n\r\n"[..]),
        // A ClientHello record's header and the first bytes of its body.
        (
            "half a hello",
            &[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01][..],
        ),
    ] {
        let mut bad = TcpStream::connect(addr).await.unwrap();
        bad.write_all(sent).await.unwrap();
        bad.shutdown().await.unwrap();
        // The listener ends that connection: the client reads to its end
        // (an alert, or nothing) and sees it closed.
        let mut rest = Vec::new();
        within(what, bad.read_to_end(&mut rest)).await.ok();
    }
    let good = tokio::spawn(async move {
        let tcp = TcpStream::connect(addr).await.unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let mut tls = ca.connector(&[]).connect(name, tcp).await.unwrap();
        tls.write_all(b"after the garbage").await.unwrap();
        tls.shutdown().await.unwrap();
        tls
    });
    let conn = within("the good client", listener.queue().accept())
        .await
        .unwrap();
    let (mut reader, _) = conn.reader().unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match poll_fn(|cx| reader.poll_read(cx, &mut buf)).await.unwrap() {
            0 => break,
            n => got.extend_from_slice(&buf[..n]),
        }
    }
    assert_eq!(got, b"after the garbage");
    drop(good.await.unwrap());
}

#[tokio::test]
async fn a_server_that_accepts_and_never_answers_is_a_timeout_and_the_connection_is_closed() {
    let ca = Ca::new("moat test CA");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut config = moat_host::net::NetConfig::new(
        Policy::allow_all().spelled(moat_host::settings::Spelling::Flags),
    );
    config.limits.tls_handshake_timeout = std::time::Duration::from_millis(300);
    let net = Net::build(config, moat_host::net::PendingWrites::new());
    let (options, client) = (Default::default(), trusting(&ca));
    let connecting = net.connect_tls("127.0.0.1", port, &options, &client);
    let server = async {
        let (mut tcp, _) = listener.accept().await.unwrap();
        // Reads the ClientHello and everything after it, answering nothing,
        // until the client gives up and closes.
        let mut received = Vec::new();
        // Ends at the client's close, cleanly or by a reset.
        let _ = tcp.read_to_end(&mut received).await;
        received
    };
    let (failed, received) = within("a handshake nobody answers", async {
        tokio::join!(connecting, server)
    })
    .await;
    match failed {
        Err(NetError::TimedOut(timed_out)) => assert_eq!(
            timed_out
                .worded(moat_host::settings::Spelling::Flags)
                .to_string(),
            "TLS handshake took longer than 300ms, the handshake timeout, which the run caps \
             (--tls-handshake-timeout)"
        ),
        Err(other) => panic!("a handshake nobody answers: {other:?}"),
        Ok(_) => panic!("a handshake nobody answers succeeded"),
    }
    // A ClientHello came; then the client closed its end (a read that
    // ends, at EOF or a reset: a socket left open would keep the server
    // reading until `within` gives up).
    assert_eq!(received.first(), Some(&0x16), "{received:?}");
}
