//! `moat serve`: wasi:http 0.3 components served: a `service`, and a middleware.

use super::*;

/// A wasi:http 0.3 `service` component is served as a 0.2 proxy is: a
/// fresh instance per request, bodies streamed both ways, a trap answered
/// 500 and the next request served.
#[tokio::test]
async fn serve_runs_a_wasi_http_0_3_service() {
    let server = Serve::start(guests::HTTP_SERVICE_P3, &["--timeout=10s"]).await;
    let hello = get(server.addr, "/").await;
    assert_eq!(
        (hello.status, hello.text().as_str()),
        (200, "hello from a wasi:http 0.3 service\n"),
        "{hello:?}"
    );
    let body = random_bytes(3 << 20, 7);
    let echoed = post(server.addr, "/echo", body.clone()).await;
    assert_eq!(echoed.status, 200, "{echoed:?}");
    assert!(
        echoed.body == body,
        "{} bytes back of {}",
        echoed.body.len(),
        body.len()
    );
    for _ in 0..2 {
        let count = get(server.addr, "/count").await;
        assert_eq!((count.status, count.text().as_str()), (200, "1\n"));
    }
    let trapped = get(server.addr, "/trap").await;
    trapped.failed_request();
    let again = get(server.addr, "/").await;
    assert_eq!(again.status, 200);
}

/// wasmtime's GHSA-xrvr-8678-5wp8, under `moat serve`: a 0.3 handler asks
/// the canonical ABI to cancel a read on a stream's writable end while a
/// write is pending there. The instance traps (500) and the server goes on
/// serving; wasmtime 50.0.1 (moat before round four) let the call through
/// and answered 200, the stream's state cancelled from the wrong side.
#[tokio::test]
async fn serve_traps_a_p3_cancel_on_the_wrong_end_and_goes_on() {
    let mut server = Serve::start(guests::HTTP_SERVICE_P3, &["--timeout=10s"]).await;
    let wrong = get(server.addr, "/cancel-wrong-end").await;
    wrong.failed_request();
    let again = get(server.addr, "/").await;
    assert_eq!(again.status, 200, "{again:?}");
    server.terminate();
    assert_eq!(
        server.exited().await.code(),
        Some(0),
        "no panic: a clean stop"
    );
}

/// A wasi:http 0.3 middleware (it imports `handler` as its next hop, no
/// `client`): the request it forwards leaves through moat's client, under
/// the same grants as any outgoing request.
#[tokio::test]
async fn serve_runs_a_middleware_whose_next_hop_is_under_the_grants() {
    let (up, accepted) = upstream("from the next hop\n").await;
    let grant = format!("--allow-net=127.0.0.1:{up}");
    let mut server = Serve::start(guests::HTTP_MIDDLEWARE_P3, &[&grant]).await;
    let forward = |to: String| {
        format!("GET / HTTP/1.1\r\nHost: x\r\nx-forward-to: {to}\r\nConnection: close\r\n\r\n")
    };
    let answer = exchange(
        server.addr,
        forward(format!("http://127.0.0.1:{up}/there")),
        Vec::new(),
    )
    .await;
    assert_eq!(
        (answer.status, answer.text().as_str()),
        (200, "from the next hop\n"),
        "{answer:?}"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
    let other = crate::support::free_port();
    let refused = exchange(
        server.addr,
        forward(format!("http://127.0.0.1:{other}/")),
        Vec::new(),
    )
    .await;
    assert_eq!(
        (refused.status, refused.text().as_str()),
        (502, "ErrorCode::HttpRequestDenied\n"),
        "{refused:?}"
    );
    server
        .wait_for_stderr(&format!(
            "moat: http-middleware-p3: HTTP request: connect to 127.0.0.1:{other} denied: needs --allow-net=127.0.0.1:{other}"
        ))
        .await;
    // The next hop's authority with user information: refused before
    // anything is sent, as for any outgoing request.
    let refused = exchange(
        server.addr,
        forward(format!("http://evil.example@127.0.0.1:{up}/")),
        Vec::new(),
    )
    .await;
    assert_eq!(
        (refused.status, refused.text().as_str()),
        (502, "ErrorCode::HttpRequestUriInvalid\n"),
        "{refused:?}"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}
