//! `moat serve`: HTTP/2: prior knowledge, multiplexed streams, their bounds.

use super::*;

/// An HTTP/2 connection to `addr` (prior knowledge, no TLS), driven on a
/// task of its own; requests are sent on clones of what this returns.
async fn h2_connect(
    addr: SocketAddr,
) -> hyper::client::conn::http2::SendRequest<http_body_util::Empty<bytes::Bytes>> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .expect("an HTTP/2 handshake with moat serve");
    tokio::spawn(conn);
    send
}

/// `GET path` on an HTTP/2 connection: the status and the whole body.
async fn h2_get(
    send: &mut hyper::client::conn::http2::SendRequest<http_body_util::Empty<bytes::Bytes>>,
    addr: SocketAddr,
    path: &str,
) -> hyper::Result<(u16, String)> {
    use http_body_util::BodyExt;
    let request = hyper::Request::get(format!("http://{addr}{path}"))
        .body(http_body_util::Empty::new())
        .unwrap();
    let response = send.send_request(request).await?;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// HTTP/2 with prior knowledge (curl, and a hyper client): answers, a
/// 10 MiB body echoed byte for byte, a 10 MB download whole, and 50
/// requests multiplexed on one connection, each in an instance of its
/// own. An HTTP/1.1 client on the same port is still served.
#[tokio::test]
async fn serve_speaks_http2_with_prior_knowledge_one_instance_per_stream() {
    if !have("curl") {
        return;
    }
    let server = Serve::start(guests::WSTD_SERVE, &[]).await;
    let out = within(
        "curl --http2-prior-knowledge",
        Command::new("curl")
            .args(["-sS", "--http2-prior-knowledge", "-w", "%{http_version}"])
            .arg(server.url("/"))
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{HELLO}2"));
    let seed = rand::rng().next_u64();
    let body = random_bytes(10 << 20, seed);
    let (code, echoed) = curl_post(&server.url("/echo"), &body, &["--http2-prior-knowledge"]).await;
    assert_eq!(code, "200", "seed {seed}");
    assert_eq!(
        (echoed.len(), sha256(&echoed)),
        (body.len(), sha256(&body)),
        "the HTTP/2 echo differs from what was sent (seed {seed})"
    );
    let plain = get(server.addr, "/").await;
    assert_eq!((plain.status, plain.text()), (200, HELLO.to_owned()));
    drop(server);

    let server = Serve::start(guests::HTTP_HOSTILE, &[]).await;
    let send = h2_connect(server.addr).await;
    let mut asked = Vec::new();
    for _ in 0..50 {
        let mut send = send.clone();
        let addr = server.addr;
        asked.push(tokio::spawn(async move {
            h2_get(&mut send, addr, "/count").await
        }));
    }
    for answer in asked {
        let answer = within("a multiplexed /count", answer).await.unwrap();
        assert_eq!(answer.unwrap(), (200, "1\n".to_owned()));
    }
    let mut send = send.clone();
    let (status, big) = within(
        "10 MB over HTTP/2",
        h2_get(&mut send, server.addr, "/big?bytes=10000000"),
    )
    .await
    .unwrap();
    let expected: Vec<u8> = (0..10_000_000u64).map(|i| b'a' + (i % 26) as u8).collect();
    assert_eq!(status, 200);
    assert!(
        big.as_bytes() == expected.as_slice(),
        "10 MB over HTTP/2: {} bytes, not the bytes sent",
        big.len()
    );
}

/// HTTPS: a client offering `h2` in ALPN gets HTTP/2, one offering only
/// HTTP/1.1 gets that; either way the handler sees an `https` URI (and a
/// plain-HTTP server's handler an `http` one).
#[tokio::test]
async fn serve_speaks_http2_over_tls_by_alpn_and_tells_the_handler_https() {
    if !have("curl") {
        return;
    }
    let (dir, cert, key) = tls_files("serve-h2");
    let server = Serve::start(guests::HTTP_HOSTILE, &[&cert, &key]).await;
    let url = format!("https://localhost:{}/uri", server.addr.port());
    for (version, expect) in [("--http2", "2"), ("--http1.1", "1.1")] {
        let out = within(
            "curl over TLS",
            Command::new("curl")
                .args(["-sS", version, "-w", "%{http_version}", "--cacert"])
                .arg(dir.join("ca.pem"))
                .arg(&url)
                .kill_on_drop(true)
                .output(),
        )
        .await
        .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{url}\n{expect}"),
            "curl {version}"
        );
    }
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
    let server = Serve::start(guests::HTTP_HOSTILE, &[]).await;
    let answer = get(server.addr, "/uri").await;
    assert_eq!(
        (answer.status, answer.text()),
        (200, format!("http://{}/uri\n", server.addr)),
        "{answer:?}"
    );
}

/// One HTTP/2 client cannot hold more requests than the server's bound
/// (`--max-http-connections`, requests at once): past it a stream gets a
/// 503 naming the flag, and once the held ones end the next is served.
#[tokio::test]
async fn serve_answers_503_to_http2_streams_past_the_bound_on_requests() {
    let server = Serve::start(guests::HTTP_HOSTILE, &["--max-http-connections=2"]).await;
    let mut send = h2_connect(server.addr).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let request = hyper::Request::get(format!("http://{}/slow", server.addr))
            .body(http_body_util::Empty::new())
            .unwrap();
        let response = within("a /slow head", send.send_request(request))
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        held.push(response);
    }
    let (status, text) = within("a third stream", h2_get(&mut send, server.addr, "/ok"))
        .await
        .unwrap();
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("--max-http-connections"), "{text:?}");
    drop(held);
    let mut again = None;
    for _ in 0..600 {
        let answer = h2_get(&mut send, server.addr, "/ok").await.unwrap();
        if answer.0 == 200 {
            again = Some(answer);
            break;
        }
        // The held streams' handlers end at their next tick (100 ms).
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(again, Some((200, "ok\n".to_owned())));
}

/// An HTTP/2 connection with no request for `--http-header-read-timeout`
/// is sent a GOAWAY and closed: it does not hold a connection slot.
#[tokio::test]
async fn serve_closes_an_idle_http2_connection() {
    let server = Serve::start(guests::HTTP_HOSTILE, &["--http-header-read-timeout=1s"]).await;
    let mut client = TcpStream::connect(server.addr).await.unwrap();
    // The preface and an empty SETTINGS frame, then nothing.
    client
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    let mut got = Vec::new();
    within(
        "moat serve closing an idle HTTP/2 connection",
        client.read_to_end(&mut got),
    )
    .await
    .unwrap();
    // Frames: a 9-byte header (length, type, flags, stream), then the
    // payload. Among the server's: its GOAWAY (type 7).
    let mut frames = Vec::new();
    let mut at = 0;
    while at + 9 <= got.len() {
        let len = u32::from_be_bytes([0, got[at], got[at + 1], got[at + 2]]) as usize;
        frames.push(got[at + 3]);
        at += 9 + len;
    }
    assert!(frames.contains(&7), "frame types {frames:?}");
}
