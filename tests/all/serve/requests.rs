//! `moat serve`: Requests answered: bodies streamed and bounded, grants, handlers that fail, connections and their timeouts, stopping, and `--max-instances`.

use super::*;

#[tokio::test]
async fn serve_answers_curl_on_one_kept_alive_connection_and_echoes_10_mib_bodies() {
    if !have("curl") {
        return;
    }
    let server = Serve::start(guests::WSTD_SERVE, &[]).await;
    let out = within(
        "curl getting two URLs",
        Command::new("curl")
            .args(["-sS", "-v", "--http1.1"])
            .arg(server.url("/"))
            .arg(server.url("/headers"))
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let headers = stdout
        .strip_prefix(HELLO)
        .unwrap_or_else(|| panic!("GET / did not answer {HELLO:?}: {stdout:?}"));
    // wasi:http gives the handler no Host header (it is the authority).
    assert!(
        headers.starts_with("accept: */*\n") && headers.contains("\nuser-agent: curl/"),
        "GET /headers: {headers:?}"
    );
    assert!(
        stderr.contains("Re-using existing") || stderr.contains("Reusing existing"),
        "both requests should share one connection: {stderr}"
    );

    let seed = rand::rng().next_u64();
    let body = random_bytes(10 << 20, seed);
    for framing in [&[][..], &["-H", "Transfer-Encoding: chunked"][..]] {
        let (code, echoed) = curl_post(&server.url("/echo"), &body, framing).await;
        assert_eq!(code, "200", "{framing:?}, seed {seed}");
        assert_eq!(
            (echoed.len(), sha256(&echoed)),
            (body.len(), sha256(&body)),
            "{framing:?}: the echo differs from what was sent (seed {seed})"
        );
    }
}

#[tokio::test]
async fn serve_answers_413_at_once_to_a_declared_body_over_max_http_body_size() {
    let server = Serve::start(guests::WSTD_SERVE, &["--max-http-body-size=1MiB"]).await;
    let too_large = "request body larger than 1048576 bytes (the server's --max-http-body-size)\n";

    // The head alone: the answer must not wait for a body it will refuse.
    let head = format!(
        "POST /echo HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n\r\n",
        server.addr,
        (1 << 20) + 1
    );
    let refused = exchange(server.addr, head, Vec::new()).await;
    assert_eq!(
        (refused.status, refused.text().as_str()),
        (413, too_large),
        "{refused:?}"
    );

    // Exactly at the bound is fine.
    let body = random_bytes(1 << 20, 1);
    let echoed = post(server.addr, "/echo", body.clone()).await;
    assert_eq!(echoed.status, 200, "{echoed:?}");
    assert!(echoed.body == body, "{echoed:?}");

    // A new connection after the 413s is served.
    let echoed = post(server.addr, "/echo", b"still serving".to_vec()).await;
    assert_eq!(
        (echoed.status, echoed.text().as_str()),
        (200, "still serving"),
        "{echoed:?}"
    );
}

/// The same refusal from a server made with the embedding API names the
/// bound as the embedder's code writes it, not as a flag it does not have.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedded_servers_413_names_the_bound_as_its_code_writes_it() {
    use moat_host::limits::Limits;
    use moat_host::serve::ServeOptions;
    let limits = Limits {
        max_http_body_size: 1 << 20,
        ..Limits::default()
    };
    let run = moat_host::RunOptions::new(moat_host::policy::Policy::new())
        .arg("handler")
        .limits(limits);
    let guest = crate::support::guest(guests::WSTD_SERVE);
    let server = crate::support::moat()
        .bind_server(&guest, ServeOptions::new("127.0.0.1:0", run))
        .await
        .unwrap();
    let addr = server.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.serve(async move {
        let _ = stopped.await;
    }));
    let head = format!(
        "POST /echo HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\n\r\n",
        (1 << 20) + 1
    );
    let refused = exchange(addr, head, Vec::new()).await;
    assert_eq!(
        (refused.status, refused.text().as_str()),
        (
            413,
            "request body larger than 1048576 bytes (the server's Limits::max_http_body_size)\n"
        ),
        "{refused:?}"
    );
    let _ = stop.send(());
    serving.await.unwrap().unwrap();
}

/// A chunked body (no Content-Length to refuse at once) past the bound:
/// a handler that reads the body before answering gets a cut-off body, and
/// the client gets 413; a handler that has already answered (it streams,
/// as `/echo` does) cannot be given a 413 any more, and its response is
/// cut off instead: the client never gets a complete answer to a request
/// the server did not read whole.
#[tokio::test]
async fn serve_answers_413_to_a_chunked_body_over_max_http_body_size() {
    let too_large = "request body larger than 1048576 bytes (the server's --max-http-body-size)\n";
    let reader = Serve::start(guests::HTTP_HOSTILE, &["--max-http-body-size=1MiB"]).await;
    let refused = over_the_bound(reader.addr, "/consume").await;
    let refused = refused.expect("a whole answer from a handler that reads first");
    assert_eq!(
        (refused.status, refused.text().as_str()),
        (413, too_large),
        "{refused:?}"
    );
    let fits = exchange(
        reader.addr,
        format!(
            "POST /consume HTTP/1.1\r\nHost: {}\r\nTransfer-Encoding: chunked\r\n\r\n",
            reader.addr
        ),
        chunked(&random_bytes(1 << 20, 3), 64 * 1024),
    )
    .await;
    assert_eq!(
        (fits.status, fits.text().as_str()),
        (200, "read 1048576\n"),
        "exactly the bound is read whole: {fits:?}"
    );

    let streamer = Serve::start(guests::WSTD_SERVE, &["--max-http-body-size=1MiB"]).await;
    match over_the_bound(streamer.addr, "/echo").await {
        Err(_) => {}
        Ok(answer) => assert!(
            answer.status != 200 || answer.body.len() < 2 << 20,
            "a body past the bound was echoed whole: {answer:?}"
        ),
    }
    let echoed = post(streamer.addr, "/echo", b"still serving".to_vec()).await;
    assert_eq!(
        (echoed.status, echoed.text().as_str()),
        (200, "still serving"),
        "{echoed:?}"
    );
}

/// POSTs 2 MiB, chunked, to `path`, reading the answer while writing;
/// the answer, or how reading it failed.
async fn over_the_bound(addr: SocketAddr, path: &str) -> io::Result<Answer> {
    let head =
        format!("POST {path} HTTP/1.1\r\nHost: {addr}\r\nTransfer-Encoding: chunked\r\n\r\n");
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let (from, mut to) = stream.into_split();
    let body = chunked(&random_bytes(2 << 20, 2), 64 * 1024);
    // The server may stop reading (and close) once past the bound: a
    // failed write is fine, the answer is what counts.
    let writing = tokio::spawn(async move {
        let _ = to.write_all(&body).await;
        to
    });
    let mut from = BufReader::new(from);
    let answer = within(
        "an answer to a chunked body over the bound",
        read_answer(&mut from),
    )
    .await;
    drop(writing.await.unwrap());
    answer
}

/// Every request gets an instance of its own: what a handler keeps in its
/// memory is gone by the next request, on the same connection or another;
/// and each request is one line of the `moat::http` debug log.
#[tokio::test]
async fn serve_gives_every_request_a_fresh_instance() {
    let mut server =
        Serve::start_logging(guests::HTTP_HOSTILE, &[], Some("moat::http=debug")).await;
    for _ in 0..3 {
        let answer = get(server.addr, "/count").await;
        assert_eq!(
            (answer.status, answer.text().as_str()),
            (200, "1\n"),
            "{answer:?}"
        );
    }
    // Two requests on one kept-alive connection.
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream
        .write_all(b"GET /count HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut from = BufReader::new(stream);
    let first = within("the first answer", read_answer(&mut from))
        .await
        .unwrap();
    from.get_mut()
        .write_all(b"GET /count HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let second = within("the second answer", read_answer(&mut from))
        .await
        .unwrap();
    assert_eq!(
        (first.text(), second.text()),
        ("1\n".to_owned(), "1\n".to_owned())
    );
    server
        .wait_for_stderr("DEBUG moat::http: request method=GET path=/count status=200")
        .await;
}

/// A request head past `--max-http-header-size`: 431, and the connection
/// is closed.
#[tokio::test]
async fn serve_refuses_a_request_head_past_its_bound() {
    let server = Serve::start(guests::HTTP_HOSTILE, &["--max-http-header-size=16KiB"]).await;
    let mut head = b"GET /ok HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..4 {
        head.extend_from_slice(format!("x-pad-{i}: {}\r\n", "p".repeat(8000)).as_bytes());
    }
    head.extend_from_slice(b"\r\n");
    let answer = exchange(server.addr, String::from_utf8(head).unwrap(), Vec::new()).await;
    assert_eq!(answer.status, 431, "{answer:?}");
    let fits = get(server.addr, "/ok").await;
    assert_eq!((fits.status, fits.text().as_str()), (200, "ok\n"));
}

#[tokio::test]
async fn serve_lets_the_handler_fetch_only_what_allow_net_grants() {
    const UPSTREAM: &str = "the upstream's own body\n";
    let (up, accepted) = upstream(UPSTREAM).await;
    let fetch = format!("/fetch?url=http%3A%2F%2F127.0.0.1%3A{up}%2Fsome%2Fpath");

    let granted = Serve::start(
        guests::WSTD_SERVE,
        &[&format!("--allow-net=127.0.0.1:{up}")],
    )
    .await;
    let fetched = get(granted.addr, &fetch).await;
    assert_eq!(
        (fetched.status, fetched.text().as_str()),
        (200, UPSTREAM),
        "{fetched:?}"
    );
    assert_eq!(fetched.header("content-type"), Some("text/plain"));
    assert_eq!(accepted.load(Ordering::SeqCst), 1);

    let other = support::free_port();
    let mut denied = Serve::start(
        guests::WSTD_SERVE,
        &[&format!("--allow-net=127.0.0.1:{other}")],
    )
    .await;
    let refused = get(denied.addr, &fetch).await;
    assert_eq!(
        (refused.status, refused.text().as_str()),
        (502, "ErrorCode::HttpRequestDenied\n"),
        "{refused:?}"
    );
    denied
        .wait_for_stderr(&format!(
            "moat: wstd-serve: HTTP request: connect to 127.0.0.1:{up} denied: \
             needs --allow-net=127.0.0.1:{up}\n"
        ))
        .await;

    // One more fetch through the granted server: the upstream accepts in
    // order, so had the denied request connected, this would be its third.
    let fetched = get(granted.addr, &fetch).await;
    assert_eq!(
        (fetched.status, fetched.text().as_str()),
        (200, UPSTREAM),
        "{fetched:?}"
    );
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        2,
        "the denied request reached the upstream"
    );
}

/// A 500's body must say what happened without the host's internals.
fn assert_no_internals(answer: &Answer) {
    let text = answer.text();
    for leak in ["wasmtime", ".rs:", "backtrace", "asked for a trap"] {
        assert!(!text.contains(leak), "the client saw {leak:?}: {answer:?}");
    }
}

#[tokio::test]
async fn serve_answers_500_to_a_handler_that_traps_spins_or_grows_and_goes_on() {
    let mut server = Serve::start(
        guests::HTTP_HOSTILE,
        &["--timeout=2s", "--max-memory=64MiB"],
    )
    .await;
    let ok = |answer: Answer, after: &str| {
        assert_eq!(
            (answer.status, answer.text().as_str()),
            (200, "ok\n"),
            "GET /ok after {after}: {answer:?}"
        );
    };

    // The client gets the request's id and nothing else of the failure;
    // the operator's stderr gets one line naming the id, the request and
    // what happened (issue 57: before, the client got the bound it hit
    // and the operator nothing at the default level).
    let trapped = get(server.addr, "/trap").await;
    let id = trapped.failed_request();
    assert_no_internals(&trapped);
    server
        .wait_for_stderr(&format!(
            "moat: request {id} (GET /trap from 127.0.0.1) failed: the handler trapped: "
        ))
        .await;
    ok(get(server.addr, "/ok").await, "/trap");

    let spun = get(server.addr, "/spin?a=secret").await;
    let id = spun.failed_request();
    assert_no_internals(&spun);
    server
        .wait_for_stderr(&format!(
            "moat: request {id} (GET /spin from 127.0.0.1) failed: the handler was stopped: \
             the guest ran past its time limit of 2s (--timeout)\n"
        ))
        .await;
    ok(get(server.addr, "/ok").await, "/spin");

    let grown = get(server.addr, "/grow").await;
    let id = grown.failed_request();
    assert_no_internals(&grown);
    server
        .wait_for_stderr(&format!(
            "moat: request {id} (GET /grow from 127.0.0.1) failed: the handler was stopped: "
        ))
        .await;
    let stderr = server.stderr();
    let line = stderr.lines().find(|l| l.contains(&id)).unwrap_or_default();
    assert!(
        line.contains("memory limit") && line.contains("--max-memory"),
        "{line}"
    );
    assert!(!stderr.contains("secret"), "no query on the line: {stderr}");
    ok(get(server.addr, "/ok").await, "/grow");

    // Nor does the terminal get a backtrace: the guest's own panic
    // message is the guest's output, moat adds none of its internals.
    server.wait_for_stderr("asked for a trap").await;
    let stderr = server.stderr();
    assert!(
        !stderr.contains("wasm backtrace") && !stderr.contains("wasmtime"),
        "{stderr}"
    );
}

#[tokio::test]
async fn serve_cuts_off_the_upload_of_a_handler_that_trapped_mid_way() {
    // The handler's instance is dropped with its upstream POST unfinished;
    // wasmtime-wasi-http alone would end the chunked body there, and the
    // upstream would take 300,000 bytes for the whole upload.
    let (port, seen) = crate::http::upload_sink().await;
    let server = Serve::start(
        guests::HTTP_HOSTILE,
        &[&format!("--allow-net=127.0.0.1:{port}")],
    )
    .await;
    let answer = get(
        server.addr,
        &format!("/upload-then-trap?port={port}&bytes=300000"),
    )
    .await;
    answer.failed_request();
    let upload = within("the upstream's connection closing", seen)
        .await
        .expect("the upstream saw the request");
    assert!(
        !upload.ended,
        "the cut-off upload was ended as if whole, after {} bytes",
        upload.bytes.len()
    );
    // What arrived is the handler's bytes, in order (hyper drops what it
    // still had queued when it cuts the connection, so not always all).
    let expected: Vec<u8> = (0..300_000u64).map(|i| b'a' + (i % 26) as u8).collect();
    assert!(
        expected.starts_with(&upload.bytes),
        "{} bytes arrived, not a prefix of the handler's",
        upload.bytes.len()
    );
    assert_eq!(get(server.addr, "/ok").await.status, 200);
}

#[tokio::test]
async fn serve_cuts_off_a_client_whose_header_never_ends_and_serves_the_next() {
    let server = Serve::start(
        guests::WSTD_SERVE,
        &["--max-http-connections=1", "--http-header-read-timeout=1s"],
    )
    .await;
    let mut slow = TcpStream::connect(server.addr).await.unwrap();
    // No blank line: the head never ends.
    slow.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();

    // The one connection moat takes at a time is the slow one: this one
    // waits to be accepted until the slow one is cut off.
    let mut next = TcpStream::connect(server.addr).await.unwrap();
    let request = format!(
        "GET / HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        server.addr
    );
    next.write_all(request.as_bytes()).await.unwrap();

    // A FIN (Ok) and a reset (Err) are both the server closing.
    let mut got = Vec::new();
    let ended = within(
        "moat serve closing a connection whose head never ends",
        slow.read_to_end(&mut got),
    )
    .await;
    assert!(
        got.is_empty() || got.starts_with(b"HTTP/1.1 408"),
        "the server answered a request it never had: {ended:?} {:?}",
        String::from_utf8_lossy(&got)
    );

    let answer = within(
        "an answer once the slow client is cut off",
        read_answer(&mut BufReader::new(next)),
    )
    .await
    .expect("a whole answer");
    assert_eq!(
        (answer.status, answer.text().as_str()),
        (200, HELLO),
        "{answer:?}"
    );
}

#[tokio::test]
async fn serve_closes_a_kept_alive_connection_left_idle() {
    let server = Serve::start(guests::HTTP_HOSTILE, &["--http-header-read-timeout=1s"]).await;
    let mut client = BufReader::new(TcpStream::connect(server.addr).await.unwrap());
    client
        .get_mut()
        .write_all(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let answer = within("the answer to GET /ok", read_answer(&mut client))
        .await
        .expect("a whole answer");
    assert_eq!(
        (answer.status, answer.text().as_str()),
        (200, "ok\n"),
        "{answer:?}"
    );
    assert!(
        !answer
            .header("connection")
            .is_some_and(|c| c.eq_ignore_ascii_case("close")),
        "the connection should be kept alive: {answer:?}"
    );

    // Nothing more is sent: the server must close the connection itself.
    let mut rest = Vec::new();
    let ended = within(
        "moat serve closing an idle kept-alive connection",
        client.read_to_end(&mut rest),
    )
    .await;
    assert!(
        rest.is_empty() || rest.starts_with(b"HTTP/1.1 408"),
        "the server sent more on an idle connection: {ended:?} {:?}",
        String::from_utf8_lossy(&rest)
    );
}

#[tokio::test]
async fn serve_echoes_64_clients_at_once_each_its_own_body() {
    const CLIENTS: u64 = 64;
    let server = Serve::start(guests::WSTD_SERVE, &[]).await;
    let addr = server.addr;
    let seed = rand::rng().next_u64();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            tokio::spawn(async move {
                let body = random_bytes(64 * 1024, seed.wrapping_add(i));
                let echoed = post(addr, "/echo", body.clone()).await;
                assert_eq!(echoed.status, 200, "client {i}: {echoed:?}");
                assert!(
                    echoed.body == body,
                    "client {i} got another body back ({} bytes), seed {seed}",
                    echoed.body.len()
                );
            })
        })
        .collect();
    for client in clients {
        within("the 64 clients", client)
            .await
            .expect("a client's task");
    }
}

/// A client of http-hostile's `/slow` (a tick every 100 ms, without end),
/// once the response's head has come.
pub(super) async fn slow_stream(addr: SocketAddr) -> BufReader<TcpStream> {
    let mut client = BufReader::new(TcpStream::connect(addr).await.unwrap());
    client
        .get_mut()
        .write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let head = within("the head of /slow", read_head(&mut client))
        .await
        .unwrap();
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    client
}

#[tokio::test]
async fn serve_on_sigterm_finishes_the_request_in_flight_and_exits_0() {
    let mut server = Serve::start(guests::HTTP_HOSTILE, &["--timeout=3s"]).await;
    let port = server.addr.port();
    let mut client = slow_stream(server.addr).await;

    // The raw body, as it comes, until the connection ends.
    let (received, receiving) = watch::channel((Vec::new(), false));
    tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        loop {
            match client.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.send_modify(|(body, _)| body.extend_from_slice(&buf[..n])),
            }
        }
        received.send_modify(|(_, ended)| *ended = true);
    });
    let ticks = |body: &[u8]| body.windows(5).filter(|w| w == b"tick\n").count();
    let mut watching = receiving.clone();
    within(
        "the first tick of /slow",
        watching.wait_for(|(body, ended)| *ended || ticks(body) > 0),
    )
    .await
    .unwrap();
    assert!(
        ticks(&receiving.borrow().0) > 0,
        "/slow ended before its first tick"
    );

    server.terminate();
    server
        .wait_for_stderr("moat: stopping: finishing the requests in flight\n")
        .await;

    // The request in flight goes on after the stop (until its 3 s).
    let at_stop = ticks(&receiving.borrow().0);
    within(
        "a tick after the stop",
        watching.wait_for(|(body, ended)| *ended || ticks(body) > at_stop),
    )
    .await
    .unwrap();
    assert!(
        ticks(&receiving.borrow().0) > at_stop,
        "/slow was cut off at the stop instead of finishing"
    );

    let status = server.exited().await;
    assert_eq!(status.code(), Some(0), "{}", server.stderr());
    within(
        "the slow client's connection ending",
        watching.wait_for(|(_, ended)| *ended),
    )
    .await
    .unwrap();
    eventually("the port being free after moat serve exits", || {
        support::port_is_free(port)
    })
    .await;
}

/// Issue 57: a request still running when `--shutdown-timeout` passes is
/// cut off, and stderr says how many were (before: a fixed 10 s, the
/// client's empty reply the only sign).
#[tokio::test]
async fn serve_at_its_shutdown_timeout_cuts_off_what_still_runs_and_says_so() {
    let mut server = Serve::start(
        guests::HTTP_HOSTILE,
        &["--timeout=60s", "--shutdown-timeout=1s"],
    )
    .await;
    let mut client = slow_stream(server.addr).await;
    server.terminate();
    let status = server.exited().await;
    assert_eq!(status.code(), Some(0), "{}", server.stderr());
    assert!(
        server
            .stderr()
            .contains("moat: --shutdown-timeout (1s) passed with 1 request still running: cut off"),
        "{}",
        server.stderr()
    );
    // The client's connection ends with the process.
    let mut rest = Vec::new();
    let _ = within("the cut connection's end", client.read_to_end(&mut rest)).await;
    assert!(
        !rest.ends_with(b"0\r\n\r\n"),
        "cut off, not ended as if whole"
    );
}

/// Issue 57: bad input gets a message that says what was meant, before
/// anything is listened on or compiled. A misspelt deny keyword was taken
/// as a host name (protecting nothing); `localhost:8099`, `:8099` and port
/// 99999 got the bare "expected an IP address and port"; `--metrics` on
/// an `--addr`'s port got "Address already in use" naming neither flag.
#[tokio::test]
async fn serve_says_what_a_bad_flag_was_likely_meant_as() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["--deny-net=privat"],
            "deny entry `privat` is not a keyword: did you mean `private`?",
        ),
        (
            &["--addr=localhost:8099"],
            "cannot listen on localhost:8099: expected an IP address and port (127.0.0.1:8080, \
             [::1]:8080), unix:PATH, or systemd; `localhost` is a name, and moat listens on \
             addresses: 127.0.0.1:8099 for this machine only, 0.0.0.0:8099 for every interface",
        ),
        (
            &["--addr=:8099"],
            "no host was given: 127.0.0.1:8099 for this machine only",
        ),
        (&["--addr=127.0.0.1:99999"], "port 99999 is past 65535"),
        (
            &["--addr=127.0.0.1:8099", "--metrics=0.0.0.0:8099"],
            "cannot listen on 0.0.0.0:8099: --metrics is the same address as \
             --addr=127.0.0.1:8099: give the metrics an address of their own",
        ),
        (
            &["--addr=127.0.0.1:8099", "--addr=127.0.0.1:8099"],
            "cannot listen on 127.0.0.1:8099: the same address as --addr=127.0.0.1:8099",
        ),
    ];
    for (flags, said) in cases {
        let mut args = flags.to_vec();
        args.push(guests::WSTD_SERVE);
        let (code, stderr) = serve_refused(&args).await;
        assert_eq!(code, Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(said), "{flags:?}: {stderr}");
        assert!(!stderr.contains(SERVING), "{flags:?}: {stderr}");
    }
}

/// Issue 57: a `--max-memory` below what the component starts with is
/// refused before compiling, naming the flag (before: a 26 s compile of a
/// large component, then "module memory does not fit in pooling allocator
/// requirements", which blamed the component). The cache the run was
/// given holds nothing afterwards: no compile ran.
#[tokio::test]
async fn serve_refuses_a_max_memory_below_the_components_start_before_compiling() {
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve-memory-below-start");
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::create_dir_all(&cache).unwrap();
    let out = within(
        "moat serve giving up",
        Command::new(MOAT)
            .arg("serve")
            .arg(format!("--cache-dir={}", cache.display()))
            .args([
                "--addr=127.0.0.1:0",
                "--max-memory=64KiB",
                guests::WSTD_SERVE,
            ])
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(126), "{stderr}");
    assert!(
        stderr.contains("bytes of memory at its start, more than each instance may have (65536 bytes, --max-memory): raise --max-memory"),
        "{stderr}"
    );
    // The cache's own key is made when it is opened; compiled code would
    // be beside it.
    let kept: Vec<_> = walk_files(&cache)
        .into_iter()
        .filter(|f| f.file_name().is_none_or(|name| name != "key"))
        .collect();
    assert!(kept.is_empty(), "nothing compiled into the cache: {kept:?}");
}

/// Every file under `dir`.
fn walk_files(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk_files(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[tokio::test]
async fn serve_refuses_an_addr_that_is_not_an_ip_address_and_port() {
    let (code, stderr) = serve_refused(&["--addr=localhost:80", guests::WSTD_SERVE]).await;
    assert_eq!(code, Some(2), "a bad command line: {stderr}");
    assert!(
        stderr.contains("cannot listen on localhost:80: expected an IP address and port"),
        "{stderr}"
    );
}

#[tokio::test]
async fn serve_refuses_a_component_that_is_not_an_http_handler() {
    let (code, stderr) = serve_refused(&["--addr=127.0.0.1:0", guests::HELLO]).await;
    assert_eq!(code, Some(126), "it cannot start: {stderr}");
    assert!(
        stderr.contains(&format!(
            "{} is not an HTTP handler moat serve can run",
            guests::HELLO
        )),
        "{stderr}"
    );
    assert!(!stderr.contains(SERVING), "{stderr}");
}

#[tokio::test]
async fn serve_refuses_zero_max_http_connections_as_a_bad_command_line() {
    let (code, stderr) = serve_refused(&[
        "--addr=127.0.0.1:0",
        "--max-http-connections=0",
        guests::WSTD_SERVE,
    ])
    .await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--max-http-connections=0"), "{stderr}");
    assert!(!stderr.contains(SERVING), "{stderr}");
}

/// `--max-instances` bounds the handlers running at once: a request that
/// finds none free waits (within its time) and is answered once one is.
#[tokio::test]
async fn serve_runs_at_most_max_instances_handlers_and_the_rest_wait() {
    let server = Serve::start(guests::HTTP_HOSTILE, &["--max-instances=1"]).await;
    // A holds the only instance: /slow ticks until its client goes away.
    let mut a = TcpStream::connect(server.addr).await.unwrap();
    a.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut a = BufReader::new(a);
    let mut ticks = 0;
    let mut line = String::new();
    let mut b = None;
    while ticks < 4 {
        line.clear();
        within("a tick", a.read_line(&mut line)).await.unwrap();
        if line.contains("tick") {
            ticks += 1;
            if ticks == 1 {
                b = Some(tokio::spawn(get(server.addr, "/count")));
            }
        }
    }
    let b = b.expect("B was sent");
    // Three ticks later (300 ms of A's handler running), B is still
    // waiting for the instance.
    assert!(
        !b.is_finished(),
        "B was answered while A held the only instance"
    );
    drop(a);
    let answer = within("B's answer once A is gone", b).await.unwrap();
    assert_eq!(
        (answer.status, answer.text().as_str()),
        (200, "1\n"),
        "{answer:?}"
    );
}

/// A request that finds no handler instance free within its `--timeout`
/// gets a 503 naming `--max-instances`, and the server goes on. A holds
/// the only instance until its time is up; of B and C, sent next, one
/// takes the instance then and holds it for its own time, so the other
/// is still waiting when its time is up, whichever came first. The
/// metrics count the 503 as `instances-busy`, once.
#[tokio::test]
async fn serve_answers_503_when_no_instance_frees_within_the_request_time() {
    let server = Serve::start(
        guests::HTTP_HOSTILE,
        &["--max-instances=1", "--timeout=2s", "--metrics=127.0.0.1:0"],
    )
    .await;
    let addr = server.addr;
    // B and C start after A's fifth tick: A's time is then up at least
    // 400 ms before theirs, which leaves its instance that long to be
    // given back to one of them.
    let mut a = slow_and_ticking(addr).await;
    let (b, c) = (slow_answer(addr), slow_answer(addr));
    // A's body is cut off when its time is up: the connection closes
    // without the last chunk, so the client knows it is not whole.
    let mut rest = Vec::new();
    let _ = within("A's handler stopped at its time", a.read_to_end(&mut rest)).await;
    assert!(
        !rest.ends_with(b"0\r\n\r\n"),
        "A's cut-off body ended as if whole: {:?}",
        String::from_utf8_lossy(&rest)
    );
    let mut answers = [
        within("B's answer", b).await.unwrap(),
        within("C's answer", c).await.unwrap(),
    ];
    answers.sort_by_key(|answer| !answer.starts_with("HTTP/1.1 503"));
    assert!(
        answers[0].starts_with("HTTP/1.1 503") && answers[0].contains("--max-instances"),
        "one of B and C should find no instance in time: {answers:?}"
    );
    assert!(
        answers[1].starts_with("HTTP/1.1 200")
            && answers[1].contains("tick")
            && !answers[1].ends_with("0\r\n\r\n"),
        "the other should be served once A's time was up, and cut off at its own: {answers:?}"
    );
    let after = get(addr, "/ok").await;
    assert_eq!((after.status, after.text()), (200, "ok\n".to_owned()));
    let counts = super::metrics::refused(&server, &["instances-busy", "client-share"]).await;
    assert!(
        counts.as_ref().is_none_or(|counts| *counts == [1.0, 0.0]),
        "{counts:?}"
    );
}
