//! The TLS core (moat_host::net) against tokio-rustls peers, no wasm.

use crate::support;

use std::future::poll_fn;
use std::task::Poll;
use std::time::Duration;

use crate::support::certs::{Ca, Leaf};
use moat_host::net::{
    ConnectOptions, ListenOptions, Net, NetConfig, NetError, PendingWrites, Reader, TcpConn,
    TlsClientOptions, TlsServerOptions, TlsTrust, Writer,
};
use moat_host::policy::Policy;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn net() -> Net {
    Net::new(Policy::allow_all())
}

/// A network that grants everything, as `config` says otherwise.
fn net_with(config: impl FnOnce(&mut NetConfig)) -> Net {
    let mut all = NetConfig::new(Policy::allow_all());
    config(&mut all);
    Net::build(all, PendingWrites::new())
}

async fn read(reader: &mut Reader, buf: &mut [u8]) -> Result<usize, NetError> {
    poll_fn(|cx| reader.poll_read(cx, buf)).await
}

async fn write_all(writer: &mut Writer, mut data: &[u8]) -> Result<(), NetError> {
    while !data.is_empty() {
        let n = poll_fn(|cx| writer.poll_write(cx, data)).await?;
        data = &data[n..];
    }
    Ok(())
}

async fn read_to_end(conn: &TcpConn) -> Result<Vec<u8>, NetError> {
    let (mut reader, _) = conn.reader()?;
    let mut all = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match read(&mut reader, &mut buf).await? {
            0 => return Ok(all),
            n => all.extend_from_slice(&buf[..n]),
        }
    }
}

/// A tokio-rustls server on 127.0.0.1 that echoes one connection.
async fn echo_server(
    leaf: &Leaf,
    alpn: &[&str],
) -> (u16, tokio::task::JoinHandle<Option<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let acceptor = leaf.acceptor(alpn);
    let task = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.ok()?;
        let mut tls = acceptor.accept(tcp).await.ok()?;
        let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match tls.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => tls.write_all(&buf[..n]).await.ok()?,
            }
        }
        tls.shutdown().await.ok()?;
        alpn
    });
    (port, task)
}

fn trusting(ca: &Ca) -> TlsClientOptions {
    TlsClientOptions {
        extra_roots_pem: Some(ca.pem().into_bytes()),
        ..TlsClientOptions::default()
    }
}

#[tokio::test]
async fn bytes_through_tls_both_ways_with_alpn() {
    let ca = Ca::new("moat test CA");
    let (port, server) = echo_server(&ca.leaf(&["localhost"]), &["h2", "http/1.1"]).await;
    let options = TlsClientOptions {
        alpn: vec![b"http/1.1".to_vec()],
        ..trusting(&ca)
    };
    let conn = net()
        .connect_tls("localhost", port, &ConnectOptions::default(), &options)
        .await
        .unwrap();
    assert!(conn.is_tls());
    assert_eq!(conn.alpn_protocol().as_deref(), Some(&b"http/1.1"[..]));
    let data: Vec<u8> = (0..4 << 20).map(|i| (i % 253) as u8).collect();
    let (mut writer, sent) = conn.writer().unwrap();
    let reading = {
        let (mut reader, _) = conn.reader().unwrap();
        tokio::spawn(async move {
            let mut all = Vec::new();
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match read(&mut reader, &mut buf).await.unwrap() {
                    0 => return all,
                    n => all.extend_from_slice(&buf[..n]),
                }
            }
        })
    };
    write_all(&mut writer, &data).await.unwrap();
    drop(writer); // close_notify, then FIN
    assert_eq!(sent.await, Ok(()));
    assert!(reading.await.unwrap() == data);
    assert_eq!(server.await.unwrap(), Some(b"http/1.1".to_vec()));
}

#[tokio::test]
async fn untrusted_wrong_name_and_expired_certificates_are_told_apart() {
    let ca = Ca::new("moat test CA");
    type Case = (Leaf, &'static str, fn(&NetError) -> bool, bool);
    let cases: [Case; 4] = [
        (
            ca.leaf(&["localhost"]),
            "localhost",
            |e| matches!(e, NetError::CertificateUntrusted(_)),
            false,
        ),
        (
            ca.leaf(&["other.example"]),
            "localhost",
            |e| matches!(e, NetError::CertificateNameMismatch(_)),
            true,
        ),
        (
            ca.expired_leaf(&["localhost"]),
            "localhost",
            |e| matches!(e, NetError::CertificateExpired(_)),
            true,
        ),
        // An IP literal is checked against the certificate's IP addresses.
        (
            ca.leaf(&["localhost"]),
            "127.0.0.1",
            |e| matches!(e, NetError::CertificateNameMismatch(_)),
            true,
        ),
    ];
    for (leaf, host, expected, trusted) in cases {
        let (port, _server) = echo_server(&leaf, &[]).await;
        let options = if trusted {
            trusting(&ca)
        } else {
            TlsClientOptions::default()
        };
        let err = net()
            .connect_tls(host, port, &ConnectOptions::default(), &options)
            .await
            .err()
            .unwrap();
        assert!(expected(&err), "{host}: {err:?}");
    }
    // And an IP SAN is accepted for an IP literal.
    let (port, _server) = echo_server(&ca.leaf(&["127.0.0.1"]), &[]).await;
    net()
        .connect_tls(
            "127.0.0.1",
            port,
            &ConnectOptions::default(),
            &trusting(&ca),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn run_wide_trust_makes_a_private_root_trusted() {
    let ca = Ca::new("moat test CA");
    let (port, _server) = echo_server(&ca.leaf(&["localhost"]), &[]).await;
    let trust = TlsTrust::webpki().with_pem(ca.pem().as_bytes()).unwrap();
    let net = net_with(|c| c.tls_trust = Some(trust));
    net.connect_tls(
        "localhost",
        port,
        &ConnectOptions::default(),
        &TlsClientOptions::default(),
    )
    .await
    .unwrap();
}

fn server_options(leaf: &Leaf, alpn: &[&str]) -> TlsServerOptions {
    TlsServerOptions {
        identity: leaf.identity(),
        alpn: alpn.iter().map(|p| p.as_bytes().to_vec()).collect(),
        client_roots_pem: None,
        handshake_timeout: None,
    }
}

#[tokio::test]
async fn a_tls_listener_hands_out_sockets_after_their_handshake() {
    let ca = Ca::new("moat test CA");
    let listener = net()
        .listen_tls(
            "127.0.0.1",
            0,
            &ListenOptions::default(),
            &server_options(&ca.leaf(&["localhost"]), &["http/1.1"]),
        )
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let client = tokio::spawn(async move {
        let tcp = TcpStream::connect(addr).await.unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let mut tls = ca
            .connector(&["http/1.1"])
            .connect(name, tcp)
            .await
            .unwrap();
        tls.write_all(b"hello over tls").await.unwrap();
        tls.shutdown().await.unwrap();
        let mut back = Vec::new();
        tls.read_to_end(&mut back).await.unwrap();
        back
    });
    let conn = listener.queue().accept().await.unwrap();
    assert_eq!(conn.alpn_protocol().as_deref(), Some(&b"http/1.1"[..]));
    assert_eq!(read_to_end(&conn).await.unwrap(), b"hello over tls");
    let (mut writer, _) = conn.writer().unwrap();
    write_all(&mut writer, b"and back").await.unwrap();
    drop(writer);
    assert_eq!(client.await.unwrap(), b"and back");
}

#[tokio::test]
async fn a_stalled_handshake_does_not_delay_the_next_client() {
    let ca = Ca::new("moat test CA");
    let listener = net()
        .listen_tls(
            "127.0.0.1",
            0,
            &ListenOptions::default(),
            &server_options(&ca.leaf(&["localhost"]), &[]),
        )
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    // Connects and never says a word.
    let _stalled = TcpStream::connect(addr).await.unwrap();
    let prompt = tokio::spawn(async move {
        let tcp = TcpStream::connect(addr).await.unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let mut tls = ca.connector(&[]).connect(name, tcp).await.unwrap();
        tls.write_all(b"second").await.unwrap();
        tls.shutdown().await.unwrap();
        tls
    });
    let conn = support::within("the second client", listener.queue().accept())
        .await
        .unwrap();
    assert_eq!(read_to_end(&conn).await.unwrap(), b"second");
    drop(prompt.await.unwrap());
}

#[tokio::test]
async fn an_unusable_certificate_fails_listen_and_claims_no_port() {
    let ca = Ca::new("moat test CA");
    let good = ca.leaf(&["localhost"]);
    let other = ca.leaf(&["localhost"]);
    let port = support::free_port();
    for (what, identity) in [
        (
            "garbage certificate",
            moat_host::net::TlsIdentity {
                certificate_chain_pem: b"not pem".to_vec(),
                private_key_pem: good.key_pem.clone().into_bytes(),
            },
        ),
        (
            "garbage key",
            moat_host::net::TlsIdentity {
                certificate_chain_pem: good.cert_pem.clone().into_bytes(),
                private_key_pem: b"nope".to_vec(),
            },
        ),
        (
            "key of another certificate",
            moat_host::net::TlsIdentity {
                certificate_chain_pem: good.cert_pem.clone().into_bytes(),
                private_key_pem: other.key_pem.clone().into_bytes(),
            },
        ),
    ] {
        let options = TlsServerOptions {
            identity,
            ..server_options(&good, &[])
        };
        let err = net()
            .listen_tls("127.0.0.1", port, &ListenOptions::default(), &options)
            .await
            .err()
            .unwrap();
        assert!(
            matches!(err, NetError::InvalidArgument(_)),
            "{what}: {err:?}"
        );
        assert!(support::port_is_free(port), "{what}: the port was claimed");
    }
}

#[tokio::test]
async fn mutual_tls_accepts_the_right_client_certificate_and_refuses_none() {
    let server_ca = Ca::new("server CA");
    let client_ca = Ca::new("client CA");
    let options = TlsServerOptions {
        client_roots_pem: Some(client_ca.pem().into_bytes()),
        ..server_options(&server_ca.leaf(&["localhost"]), &[])
    };
    let listener = net()
        .listen_tls("127.0.0.1", 0, &ListenOptions::default(), &options)
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepting = tokio::spawn(async move {
        let conn = listener.queue().accept().await.unwrap();
        read_to_end(&conn).await.unwrap()
    });
    // Without a client certificate: refused.
    let refused = net()
        .connect_tls(
            "localhost",
            port,
            &ConnectOptions::default(),
            &trusting(&server_ca),
        )
        .await;
    if let Ok(conn) = refused {
        // TLS 1.3 reports the refusal on the first read.
        assert!(read_to_end(&conn).await.is_err());
    }
    // With one signed by the client CA: accepted.
    let with_cert = TlsClientOptions {
        identity: Some(client_ca.leaf(&["client.example"]).identity()),
        ..trusting(&server_ca)
    };
    let conn = net()
        .connect_tls("localhost", port, &ConnectOptions::default(), &with_cert)
        .await
        .unwrap();
    let (mut writer, _) = conn.writer().unwrap();
    write_all(&mut writer, b"client authenticated")
        .await
        .unwrap();
    drop(writer);
    assert_eq!(accepting.await.unwrap(), b"client authenticated");
}

#[tokio::test]
async fn starttls_client_side_keeps_order_and_replays_what_was_read() {
    let ca = Ca::new("moat test CA");
    let leaf = ca.leaf(&["localhost"]);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let acceptor = leaf.acceptor(&[]);
    let server = tokio::spawn(async move {
        let (mut tcp, _) = listener.accept().await.unwrap();
        let mut line = [0u8; 10];
        tcp.read_exact(&mut line).await.unwrap(); // the plaintext, before TLS
        assert_eq!(&line, b"STARTTLS\r\n");
        tcp.write_all(b"220 go ahead\r\n").await.unwrap();
        let mut tls = acceptor.accept(tcp).await.unwrap();
        let mut got = Vec::new();
        tls.read_to_end(&mut got).await.unwrap();
        got
    });
    let net = net();
    let mut conn = net
        .connect("localhost", port, &ConnectOptions::default())
        .await
        .unwrap();
    let (mut writer, _) = conn.writer().unwrap();
    write_all(&mut writer, b"STARTTLS\r\n").await.unwrap();
    let (mut reader, _) = conn.reader().unwrap();
    let mut reply = [0u8; 14];
    let mut got = 0;
    while got < reply.len() {
        got += read(&mut reader, &mut reply[got..]).await.unwrap();
    }
    assert_eq!(&reply, b"220 go ahead\r\n");
    // The writer is still open: the upgrade ends it without a FIN (dropping
    // it first would half-close the connection).
    let upgrade = net
        .upgrade_client(&mut conn, "localhost", Vec::new(), &trusting(&ca))
        .unwrap();
    assert_eq!(write_all(&mut writer, b"x").await, Err(NetError::Closed));
    drop((writer, reader));
    conn.upgraded(upgrade.run().await).unwrap();
    assert!(conn.is_tls());
    let (mut writer, _) = conn.writer().unwrap();
    write_all(&mut writer, b"secret after the upgrade")
        .await
        .unwrap();
    drop(writer);
    assert_eq!(server.await.unwrap(), b"secret after the upgrade");
}

#[tokio::test]
async fn starttls_server_side_replays_a_client_hello_sent_with_the_go_ahead() {
    let ca = Ca::new("moat test CA");
    let leaf = ca.leaf(&["localhost"]);
    let net = net();
    let listener = net
        .listen("127.0.0.1", 0, &ListenOptions::default())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let client = tokio::spawn(async move {
        let tcp = TcpStream::connect(addr).await.unwrap();
        // The first write carries "STARTTLS\r\n" and the ClientHello together.
        let tcp = FirstWritePrefixed {
            stream: tcp,
            prefix: Some(b"STARTTLS\r\n".to_vec()),
        };
        let name = ServerName::try_from("localhost").unwrap();
        let mut tls = ca.connector(&[]).connect(name, tcp).await.unwrap();
        tls.write_all(b"over tls").await.unwrap();
        tls.shutdown().await.unwrap();
        let mut back = Vec::new();
        tls.read_to_end(&mut back).await.unwrap();
        back
    });
    let mut conn = listener.queue().accept().await.unwrap();
    // The guest reads its line, and with it the start of the ClientHello.
    let (mut reader, _) = conn.reader().unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let mut have = Vec::new();
    while !have.windows(2).any(|w| w == b"\r\n") {
        let n = read(&mut reader, &mut buf).await.unwrap();
        have.extend_from_slice(&buf[..n]);
    }
    drop(reader);
    let end = have.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
    assert_eq!(&have[..end], b"STARTTLS\r\n");
    let already_read = have[end..].to_vec();
    let upgrade = net
        .upgrade_server(&mut conn, already_read, &server_options(&leaf, &[]))
        .unwrap();
    conn.upgraded(upgrade.run().await).unwrap();
    assert_eq!(read_to_end(&conn).await.unwrap(), b"over tls");
    let (mut writer, _) = conn.writer().unwrap();
    write_all(&mut writer, b"server says hi").await.unwrap();
    drop(writer);
    assert_eq!(client.await.unwrap(), b"server says hi");
}

#[tokio::test]
async fn upgrading_twice_or_after_shutdown_is_an_error() {
    let ca = Ca::new("moat test CA");
    let (port, _server) = echo_server(&ca.leaf(&["localhost"]), &[]).await;
    let net = net();
    let mut conn = net
        .connect_tls(
            "localhost",
            port,
            &ConnectOptions::default(),
            &trusting(&ca),
        )
        .await
        .unwrap();
    let err = net
        .upgrade_client(&mut conn, "localhost", Vec::new(), &trusting(&ca))
        .err()
        .unwrap();
    assert_eq!(
        err,
        NetError::InvalidState("the socket is already TLS".into())
    );
    assert!(conn.is_tls(), "the socket was left as it was");

    let plain_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = plain_listener.local_addr().unwrap().port();
    let mut conn = net
        .connect("127.0.0.1", port, &ConnectOptions::default())
        .await
        .unwrap();
    conn.shutdown().await.unwrap();
    assert!(matches!(
        net.upgrade_client(&mut conn, "localhost", Vec::new(), &trusting(&ca)),
        Err(NetError::InvalidState(_))
    ));
    // Unusable options leave the socket untouched.
    let mut conn = net
        .connect("127.0.0.1", port, &ConnectOptions::default())
        .await
        .unwrap();
    let bad = TlsClientOptions {
        extra_roots_pem: Some(b"junk".to_vec()),
        ..Default::default()
    };
    assert!(matches!(
        net.upgrade_client(&mut conn, "localhost", Vec::new(), &bad),
        Err(NetError::InvalidArgument(_))
    ));
    assert!(conn.writer().is_ok());
    let _ = Duration::ZERO;
}

/// Prepends bytes to the first write: "STARTTLS\r\n" and the ClientHello
/// leave in one segment.
struct FirstWritePrefixed {
    stream: TcpStream,
    prefix: Option<Vec<u8>>,
}

impl tokio::io::AsyncRead for FirstWritePrefixed {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for FirstWritePrefixed {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        if let Some(prefix) = this.prefix.take() {
            let mut both = prefix.clone();
            both.extend_from_slice(buf);
            // A loopback socket takes a ClientHello at once; keep the test honest if not.
            return match std::pin::Pin::new(&mut this.stream).poll_write(cx, &both) {
                Poll::Ready(Ok(n)) if n == both.len() => Poll::Ready(Ok(buf.len())),
                Poll::Ready(Ok(n)) => panic!("only {n} of {} bytes went out at once", both.len()),
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                Poll::Pending => {
                    this.prefix = Some(prefix);
                    Poll::Pending
                }
            };
        }
        std::pin::Pin::new(&mut this.stream).poll_write(cx, buf)
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

#[tokio::test]
async fn a_guest_cannot_give_its_handshakes_longer_than_the_run_allows() {
    let ca = Ca::new("moat test CA");
    let net = net_with(|c| c.limits.tls_handshake_timeout = Duration::from_millis(200));
    let options = TlsServerOptions {
        // What a hostile guest asks for: an hour per handshake.
        handshake_timeout: Some(Duration::from_secs(3600)),
        ..server_options(&ca.leaf(&["localhost"]), &[])
    };
    let listener = net
        .listen_tls("127.0.0.1", 0, &ListenOptions::default(), &options)
        .await
        .unwrap();
    let mut stalled = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    // Says nothing; the host drops it at the run's cap, not the guest's hour.
    let mut buf = [0u8; 1];
    let ended = support::within("the stalled handshake's end", stalled.read(&mut buf)).await;
    assert!(matches!(ended, Ok(0) | Err(_)), "{ended:?}");
}
