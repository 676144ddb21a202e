//! hyper 1 on moat: `examples/hyper-serve` against curl and a tokio
//! client (and a slow one, for hyper's header-read timeout on moat's
//! timer), `examples/hyper-fetch` against a tokio server.

use crate::support::{eventually, guests, have, run, start, within};
use moat_host::policy::Policy;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn listen_policy() -> Policy {
    Policy::new().allow_listen("127.0.0.1").unwrap()
}

/// Printable bytes that are not all the same, so a reordering or a gap
/// shows (printable: the runs' captured stdout is text).
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| b' ' + (i * 7 % 95) as u8).collect()
}

#[tokio::test]
async fn hyper_serve_answers_curl_with_keep_alive_and_echoes_a_large_body() {
    if !have("curl") {
        return;
    }
    let server = start(guests::HYPER_SERVE, listen_policy(), &["127.0.0.1:0"]);
    let base = format!("http://{}", server.listening_addr().await);
    let out = tokio::process::Command::new("curl")
        .args(["-sS", "-v", "--http1.1"])
        .arg(format!("{base}/"))
        .arg(format!("{base}/health"))
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "hello from a moat guest, on hyper\nok\n"
    );
    assert!(
        stderr.contains("Re-using existing") || stderr.contains("Reusing existing"),
        "both requests should share one connection: {stderr}"
    );

    let body = pattern(700 * 1024);
    let (code, echoed) = curl_post(&format!("{base}/echo"), &body).await;
    assert_eq!(code, "200");
    assert!(
        echoed == body,
        "echoed {} bytes of {}",
        echoed.len(),
        body.len()
    );

    // Over the bound: 413, and the server stays up.
    let (code, _) = curl_post(&format!("{base}/echo"), &pattern((1 << 20) + 1)).await;
    assert_eq!(code, "413");
    let (code, echoed) = curl_post(&format!("{base}/echo"), b"still here").await;
    assert_eq!(
        (code.as_str(), echoed.as_slice()),
        ("200", &b"still here"[..])
    );
}

#[tokio::test]
async fn hyper_serve_answers_pipelined_requests_from_a_tokio_client_in_order() {
    let server = start(guests::HYPER_SERVE, listen_policy(), &["127.0.0.1:0"]);
    let addr = server.listening_addr().await;
    let mut client = TcpStream::connect(addr).await.unwrap();
    let me = client.local_addr().unwrap();
    // Three requests in one write: hyper must answer them one by one.
    client
        .write_all(
            b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n\
              POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello\
              GET /whoami HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await
        .unwrap();
    let mut all = String::new();
    client.read_to_string(&mut all).await.unwrap();
    let bodies: Vec<&str> = all
        .split("HTTP/1.1 200 OK\r\n")
        .skip(1)
        .map(|response| response.split_once("\r\n\r\n").unwrap().1)
        .collect();
    assert_eq!(bodies, ["ok\n", "hello", &format!("{me}\n")], "{all}");
}

/// hyper's header-read timeout works on moat (hyper-serve gives hyper
/// `moat_sdk::hyper::Timer`): a client that sends half a request header
/// and then nothing has its connection closed, and the server goes on
/// answering others.
#[tokio::test]
async fn hyper_serve_closes_a_connection_whose_request_header_never_ends() {
    let server = start(guests::HYPER_SERVE, listen_policy(), &["127.0.0.1:0"]);
    let addr = server.listening_addr().await;
    let mut slow = TcpStream::connect(addr).await.unwrap();
    // No blank line: the header never ends.
    slow.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    // The server's HEADER_READ_TIMEOUT (10 s) should end this; `within`'s
    // bound (60 s) only stops a server that never closes from hanging the
    // test. A FIN (Ok) and a reset (Err) are both the server closing.
    let mut got = Vec::new();
    let ended = within(
        "the server closing a connection whose header never ends",
        slow.read_to_end(&mut got),
    )
    .await;
    // hyper 1.12 just closes; a 408 first would be fine too.
    assert!(
        got.is_empty() || got.starts_with(b"HTTP/1.1 408"),
        "the server answered a request it never had: {ended:?} {:?}",
        String::from_utf8_lossy(&got)
    );
    // It was hyper's timeout that closed it.
    eventually("hyper-serve reporting the header-read timeout", || {
        String::from_utf8_lossy(&server.stderr.contents())
            .contains("read header from client timeout")
    })
    .await;

    let mut client = TcpStream::connect(addr).await.unwrap();
    client
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    within(
        "an answer after the timeout",
        client.read_to_string(&mut answer),
    )
    .await
    .unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200 OK\r\n") && answer.ends_with("\r\n\r\nok\n"),
        "{answer}"
    );
}

/// POSTs `body` with curl (from its stdin); the status code and the
/// response body.
async fn curl_post(url: &str, body: &[u8]) -> (String, Vec<u8>) {
    let mut curl = tokio::process::Command::new("curl")
        .args(["-sS", "--data-binary", "@-", "-w", "\n%{http_code}", url])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = curl.stdin.take().unwrap();
    let body = body.to_vec();
    let writing = tokio::spawn(async move {
        // curl may stop reading after a 413: a broken pipe is fine.
        let _ = stdin.write_all(&body).await;
    });
    let out = curl.wait_with_output().await.unwrap();
    writing.await.unwrap();
    let split = out.stdout.iter().rposition(|&b| b == b'\n').unwrap();
    (
        String::from_utf8_lossy(&out.stdout[split + 1..]).into_owned(),
        out.stdout[..split].to_vec(),
    )
}

/// A tokio HTTP server that answers one request with `status` and `body`,
/// and gives back the request head it read.
async fn one_response(
    status: &'static str,
    body: Vec<u8>,
) -> (u16, tokio::task::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let serving = tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            conn.read_exact(&mut byte).await.unwrap();
            head.push(byte[0]);
        }
        let answer = format!(
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        conn.write_all(answer.as_bytes()).await.unwrap();
        conn.write_all(&body).await.unwrap();
        String::from_utf8(head).unwrap()
    });
    (port, serving)
}

#[tokio::test]
async fn hyper_fetch_writes_a_body_from_a_tokio_server_to_stdout() {
    let body = pattern(300 * 1024);
    let (port, serving) = one_response("200 OK", body.clone()).await;
    let policy = Policy::new()
        .allow_connect(&format!("localhost:{port}"))
        .unwrap();
    let url = format!("http://localhost:{port}/some/path?q=1");
    let run = run(guests::HYPER_FETCH, policy, &[&url]).await;
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert!(
        run.stdout.as_bytes() == body,
        "got {} bytes",
        run.stdout.len()
    );
    assert!(run.stderr.contains("HTTP/1.1 200 OK"), "{}", run.stderr);
    let head = serving.await.unwrap();
    assert!(
        head.starts_with("GET /some/path?q=1 HTTP/1.1\r\n"),
        "{head}"
    );
    assert!(
        head.contains(&format!("host: localhost:{port}\r\n")),
        "{head}"
    );
}

#[tokio::test]
async fn hyper_fetch_exits_22_on_an_error_status_and_is_denied_without_a_grant() {
    let (port, _serving) = one_response("404 Not Found", b"nothing here\n".to_vec()).await;
    let policy = Policy::new()
        .allow_connect(&format!("127.0.0.1:{port}"))
        .unwrap();
    let run_404 = run(
        guests::HYPER_FETCH,
        policy,
        &[&format!("http://127.0.0.1:{port}/")],
    )
    .await;
    assert_eq!(run_404.code(), 22, "{}", run_404.stderr);
    assert!(
        run_404.stderr.contains("404 Not Found"),
        "{}",
        run_404.stderr
    );

    let denied = run(
        guests::HYPER_FETCH,
        Policy::new(),
        &[&format!("http://127.0.0.1:{port}/")],
    )
    .await;
    assert_eq!(denied.code(), 1);
    assert!(
        denied.stderr.contains(&format!(
            "connect to 127.0.0.1:{port} denied: needs --allow-net=127.0.0.1:{port}"
        )),
        "{}",
        denied.stderr
    );
}
