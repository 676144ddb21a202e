//! `moat serve`: Clients that go slow on purpose (bodies, responses, many streams): each address held to its share.

use super::*;

/// A connection to `addr` from `source` (127.0.0.2, say: any address of
/// 127/8 reaches the loopback, and the server sees it as another client).
async fn connect_from(source: &str, addr: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
    socket.connect(addr).await.expect("moat serve accepts")
}

/// `GET path` from `source`, on a connection of its own: the whole answer.
pub(super) async fn get_from(source: &str, addr: SocketAddr, path: &str) -> Answer {
    let stream = connect_from(source, addr).await;
    let (from, mut to) = stream.into_split();
    to.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let answer = within("an answer", read_answer(&mut BufReader::new(from)))
        .await
        .expect("a whole answer");
    drop(to);
    answer
}

/// Sixteen clients from one address that send a request head and the
/// first byte of its body, then nothing (the slow bodies), take
/// their address's share of the instances (four) and no more: a client
/// from another address is answered while they wait, and by then the
/// server has started handlers for four of them, not sixteen.
#[tokio::test]
async fn serve_gives_one_client_address_no_more_than_its_share_of_instances() {
    // The slow bodies hold their instances for the count: no minimum rate.
    let mut server = Serve::start_logging(
        guests::HTTP_HOSTILE,
        &["--timeout=60s", "--min-http-body-rate=none"],
        Some("moat::http=debug"),
    )
    .await;
    let addr = server.addr;
    let mut slow = Vec::new();
    for _ in 0..16 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(
                format!("POST /consume HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 1000\r\n\r\nx")
                    .as_bytes(),
            )
            .await
            .unwrap();
        slow.push(stream);
    }
    let started = |text: &str, peer: &str| {
        text.lines()
            .filter(|l| {
                l.contains("a handler instance taken") && l.contains(&format!("peer={peer}"))
            })
            .count()
    };
    within(
        "four handlers started",
        server
            .stderr
            .wait_for(|seen| seen.closed || started(&seen.text, "127.0.0.1") >= 4),
    )
    .await
    .unwrap();
    let answer = get_from("127.0.0.2", addr, "/ok").await;
    assert_eq!((answer.status, answer.text()), (200, "ok\n".to_owned()));
    // The log lines come through a pipe: once the other client's is in,
    // every line before it is too.
    let log = within(
        "the other client's handler in the log",
        server
            .stderr
            .wait_for(|seen| seen.closed || started(&seen.text, "127.0.0.2") == 1),
    )
    .await
    .unwrap()
    .text
    .clone();
    assert_eq!(started(&log, "127.0.0.1"), 4, "{log}");
    drop(slow);
}

/// A request past its address's share of instances waits for one of that
/// address's own, and gets a 429 naming --max-instances-per-client when
/// none frees within its --timeout, while another address is served at
/// once. A (share of one) holds its place until its time is up; of B and
/// C from the same address, sent next, the first to take the place then
/// holds it for a whole --timeout of its own (a handler's time starts
/// when it starts), so the other's time is up 1.5 s before, whichever
/// came first. The metrics count the 429 as `client-share`, once.
#[tokio::test]
async fn serve_answers_429_to_a_client_past_its_share_within_the_request_time() {
    let server = Serve::start(
        guests::HTTP_HOSTILE,
        &[
            "--max-instances=4",
            "--max-instances-per-client=1",
            "--timeout=2s",
            "--metrics=127.0.0.1:0",
        ],
    )
    .await;
    let addr = server.addr;
    let mut a = slow_and_ticking(addr).await;
    let (b, c) = (slow_answer(addr), slow_answer(addr));
    let other = get_from("127.0.0.2", addr, "/ok").await;
    assert_eq!((other.status, other.text()), (200, "ok\n".to_owned()));
    let mut rest = Vec::new();
    let _ = within("A's handler stopped at its time", a.read_to_end(&mut rest)).await;
    let mut answers = [
        within("B's answer", b).await.unwrap(),
        within("C's answer", c).await.unwrap(),
    ];
    answers.sort_by_key(|answer| !answer.starts_with("HTTP/1.1 429"));
    assert!(
        answers[0].starts_with("HTTP/1.1 429")
            && answers[0].contains("--max-instances-per-client")
            && answers[0].to_ascii_lowercase().contains("retry-after: 1"),
        "one of B and C should find its address's share taken all its time: {answers:?}"
    );
    assert!(
        answers[1].starts_with("HTTP/1.1 200") && answers[1].contains("tick"),
        "the other should be served once A's time was up: {answers:?}"
    );
    let counts = super::metrics::refused(&server, &["client-share", "instances-busy"]).await;
    assert!(
        counts.as_ref().is_none_or(|counts| *counts == [1.0, 0.0]),
        "{counts:?}"
    );
}

/// A request body that pauses longer than --http-request-body-timeout
/// while its handler waits for it ends the request with 408 (the handler
/// is stopped and its instance given back), and the next request is
/// served by that instance. The metrics count it as `body-timeout`.
#[tokio::test]
async fn serve_answers_408_to_a_request_body_that_pauses_past_its_bound() {
    let server = Serve::start(
        guests::HTTP_HOSTILE,
        &[
            "--max-instances=1",
            "--http-request-body-timeout=1s",
            "--timeout=120s",
            "--metrics=127.0.0.1:0",
        ],
    )
    .await;
    let stream = TcpStream::connect(server.addr).await.unwrap();
    let (from, mut to) = stream.into_split();
    to.write_all(
        format!(
            "POST /consume HTTP/1.1\r\nHost: {}\r\nContent-Length: 10\r\n\r\nabc",
            server.addr
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let answer = within("the 408", read_answer(&mut BufReader::new(from)))
        .await
        .expect("a whole answer");
    assert_eq!(answer.status, 408, "{answer:?}");
    assert!(
        answer.text().contains("--http-request-body-timeout"),
        "{answer:?}"
    );
    drop(to);
    let next = get(server.addr, "/ok").await;
    assert_eq!((next.status, next.text()), (200, "ok\n".to_owned()));
    let counts = super::metrics::refused(&server, &["body-timeout"]).await;
    assert!(
        counts.as_ref().is_none_or(|counts| *counts == [1.0]),
        "{counts:?}"
    );
}

/// A client that asks for a large response and does not read it is cut
/// off once the piece the server holds for it has waited
/// --http-response-send-timeout, and its handler's instance (the only
/// one) serves the next client, long before the request's own time.
#[tokio::test]
async fn serve_cuts_off_a_response_its_client_does_not_read() {
    let server = Serve::start(
        guests::HTTP_HOSTILE,
        &[
            "--max-instances=1",
            "--http-response-send-timeout=1s",
            "--timeout=120s",
        ],
    )
    .await;
    let mut stuck = TcpStream::connect(server.addr).await.unwrap();
    stuck
        .write_all(b"GET /big?bytes=268435456 HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    // The response has begun (the handler holds the only instance); from
    // here on it is never read: the kernel's buffers fill, then the
    // server's.
    let mut first = [0u8; 12];
    within(
        "the head of the large response",
        stuck.read_exact(&mut first),
    )
    .await
    .unwrap();
    assert_eq!(&first, b"HTTP/1.1 200");
    let next = get_from("127.0.0.2", server.addr, "/ok").await;
    assert_eq!((next.status, next.text()), (200, "ok\n".to_owned()));
    // The stuck connection was closed: reading it to its end ends.
    let mut all = Vec::new();
    let _ = within("the stuck connection's end", stuck.read_to_end(&mut all)).await;
    assert!(all.len() < 268_435_456, "the whole body was sent");
}

/// One HTTP/2 connection with 100 POST streams whose bodies never come
/// holds its address's share of instances and no more: a client from
/// another address is answered while they wait.
#[tokio::test]
async fn serve_gives_one_http2_connection_of_100_stalled_streams_no_more_than_its_share() {
    use http_body_util::StreamBody;
    let server = Serve::start(guests::HTTP_HOSTILE, &["--timeout=120s"]).await;
    let stream = TcpStream::connect(server.addr).await.unwrap();
    type Stalled = StreamBody<
        futures::stream::Pending<
            Result<hyper::body::Frame<bytes::Bytes>, std::convert::Infallible>,
        >,
    >;
    let (mut send, conn) = hyper::client::conn::http2::handshake::<_, _, Stalled>(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .expect("an HTTP/2 handshake with moat serve");
    tokio::spawn(conn);
    let mut held = Vec::new();
    for _ in 0..100 {
        let request = hyper::Request::post(format!("http://{}/consume", server.addr))
            .body(StreamBody::new(futures::stream::pending()))
            .unwrap();
        held.push(send.send_request(request));
    }
    let mut held = futures::future::join_all(held);
    // Polled once, so that every stream is opened.
    let _ = tokio::time::timeout(std::time::Duration::from_millis(200), &mut held).await;
    let answer = get_from("127.0.0.2", server.addr, "/ok").await;
    assert_eq!((answer.status, answer.text()), (200, "ok\n".to_owned()));
}

/// Under RUST_BACKTRACE=1 (common in Rust users' shells), a stream error a
/// handler reads (a bad chunk size in a request body) carries the error
/// and its causes, never the host's stack: what the handler passes on to
/// the client names no host internals.
#[tokio::test]
async fn serve_hands_a_handler_no_host_backtrace_whatever_rust_backtrace_says() {
    let mut command = Command::new(MOAT);
    command
        .env("RUST_BACKTRACE", "1")
        .env("RUST_LIB_BACKTRACE", "1");
    let mut child = command
        .arg("serve")
        .arg(cache_flag())
        .arg("--addr=127.0.0.1:0")
        .arg(guests::HTTP_HOSTILE)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = drain(child.stderr.take().unwrap());
    // The whole line: the address follows "http://" in a later write.
    let seen = within(
        "moat serve serving",
        stderr.wait_for(|seen| {
            seen.closed
                || seen
                    .text
                    .split_once(SERVING)
                    .is_some_and(|(_, rest)| rest.contains('\n'))
        }),
    )
    .await
    .unwrap()
    .text
    .clone();
    let addr: SocketAddr = seen
        .split_once(SERVING)
        .and_then(|(_, rest)| rest.lines().next())
        .map(|l| l.trim_start_matches("://").trim_end_matches('/'))
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("{seen}"));
    let answer = exchange(
        addr,
        format!(
            "POST /consume HTTP/1.1\r\nHost: {addr}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        ),
        b"zz\r\nabc\r\n".to_vec(),
    )
    .await;
    assert_eq!(answer.status, 500, "{answer:?}");
    let text = answer.text();
    assert!(
        !text.contains("backtrace") && !text.contains("moat_host") && !text.contains(".rs:"),
        "host internals reached the client: {text}"
    );
    assert!(text.len() < 1024, "{} bytes: {text}", text.len());
}

/// `GET /ok` from another address (127.0.0.2), answered 200 within 2 s: the
/// bar round four's review set for every reproduction of one client
/// starving the server.
async fn another_client_is_served_at_once(addr: SocketAddr) {
    let answer = tokio::time::timeout(
        std::time::Duration::from_secs(2),
        get_from("127.0.0.2", addr, "/ok"),
    )
    .await
    .expect("another client answered within 2 s");
    assert_eq!((answer.status, answer.text()), (200, "ok\n".to_owned()));
}

/// Raises this process's descriptor limit to its hard limit, for tests
/// that hold a thousand connections.
fn more_descriptors() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    limit.current = limit.maximum;
    let _ = setrlimit(Resource::Nofile, limit);
}

/// Round four's finding 5: one address that opens 1,030 HTTP/1.1
/// connections and sends nothing holds its share of the server's
/// connections (256 by default) and no more: the rest are closed as they
/// come, and a client from another address is answered at once (before,
/// the first 1,024 took every place until their head's time ran out).
#[tokio::test]
async fn serve_keeps_one_address_of_a_thousand_idle_connections_to_its_share() {
    more_descriptors();
    let server = Serve::start(guests::HTTP_HOSTILE, &["--http-header-read-timeout=60s"]).await;
    let mut idle = Vec::new();
    for _ in 0..1030 {
        idle.push(TcpStream::connect(server.addr).await.unwrap());
    }
    another_client_is_served_at_once(server.addr).await;
    // Those past the share were closed: reading one ends at once.
    let mut closed = 0;
    for stream in &mut idle[256..] {
        let mut byte = [0u8; 1];
        if let Ok(Ok(0) | Err(_)) = tokio::time::timeout(
            std::time::Duration::from_millis(100),
            stream.read(&mut byte),
        )
        .await
        {
            closed += 1;
        }
    }
    assert!(
        closed >= 1030 - 256 - 16,
        "{closed} of the 774 past the share closed"
    );
    drop(idle);
}

/// Round four's finding 5: one address with 11 HTTP/2 connections of 100
/// POST streams whose bodies never come holds its share of instances,
/// --max-waiting-per-client waiting, and none of the server's places past
/// those: its other
/// streams are refused at once with 429, and a client from another
/// address is answered at once (before, the 1,100 streams waited their
/// --timeout, each holding one of the server's 1,024 places, and every
/// other client got 503).
#[tokio::test]
async fn serve_gives_eleven_http2_connections_of_stalled_streams_none_of_the_servers_places() {
    use http_body_util::StreamBody;
    type Stalled = StreamBody<
        futures::stream::Pending<
            Result<hyper::body::Frame<bytes::Bytes>, std::convert::Infallible>,
        >,
    >;
    more_descriptors();
    let server = Serve::start(guests::HTTP_HOSTILE, &["--timeout=120s"]).await;
    let mut held = Vec::new();
    for _ in 0..11 {
        let stream = TcpStream::connect(server.addr).await.unwrap();
        let (mut send, conn) = hyper::client::conn::http2::handshake::<_, _, Stalled>(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(stream),
        )
        .await
        .expect("an HTTP/2 handshake with moat serve");
        tokio::spawn(conn);
        for _ in 0..100 {
            let request = hyper::Request::post(format!("http://{}/consume", server.addr))
                .body(StreamBody::new(futures::stream::pending()))
                .unwrap();
            held.push(tokio::spawn(send.send_request(request)));
        }
    }
    // Most are answered at once: 429, the address's share and its queue
    // taken.
    let mut refused = 0;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    for stream in &mut held {
        // One deadline for all: those that wait for the share are not
        // answered before it, and the refused ones are by then.
        if let Ok(Ok(Ok(response))) = tokio::time::timeout_at(deadline, stream).await
            && response.status() == 429
        {
            refused += 1;
        }
    }
    // 1,100 less the share (4) and those waiting for it (128).
    assert!(refused >= 960, "{refused} of 1,100 streams refused at once");
    another_client_is_served_at_once(server.addr).await;
    for stream in held {
        stream.abort();
    }
}

/// Round four's finding 5, the trickle: four addresses, each with eight
/// requests whose bodies bring a byte every 2 s (never a pause long enough
/// for --http-request-body-timeout), held all 16 instances for as long as
/// they liked. A body must come at --min-http-body-rate (1 KiB a second
/// after its first second) while its handler waits: each is cut off after
/// about a second, and a client from another address is answered within
/// 2 s, again and again, while they go on.
#[tokio::test]
async fn serve_gives_trickling_bodies_from_four_addresses_no_instance_for_long() {
    let mut server = Serve::start_logging(
        guests::HTTP_HOSTILE,
        &["--timeout=120s"],
        Some("moat::http=debug"),
    )
    .await;
    let addr = server.addr;
    let mut trickles = Vec::new();
    for source in ["127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"] {
        for _ in 0..8 {
            let mut stream = connect_from(source, addr).await;
            trickles.push(tokio::spawn(async move {
                let head = format!(
                    "POST /consume HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 100000\r\n\r\nx"
                );
                if stream.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                loop {
                    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                    if stream.write_all(b"y").await.is_err() {
                        return;
                    }
                }
            }));
        }
    }
    let taken = |text: &str| text.matches("a handler instance taken").count();
    within(
        "the trickling requests hold all 16 instances",
        server
            .stderr
            .wait_for(|seen| seen.closed || taken(&seen.text) >= 16),
    )
    .await
    .unwrap();
    for _ in 0..3 {
        another_client_is_served_at_once(addr).await;
    }
    for trickle in trickles {
        trickle.abort();
    }
}
