//! `moat serve` as a user runs it: a `moat serve` process per test, on a
//! port of its own, answering curl and raw HTTP/1.1 clients; its bounds
//! (body size, header time, connections, a handler's memory and time), its
//! grants for the handler's own requests, SIGTERM, and the setups it
//! refuses.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::{self, eventually, guests, have, within};
use rand::{Rng, SeedableRng};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};
use tokio::sync::watch;

const MOAT: &str = env!("CARGO_BIN_EXE_moat");

/// What `moat serve` prints once it listens, before the URL.
const SERVING: &str = "moat: serving http";

/// wstd-serve's answer to `GET /`.
const HELLO: &str = "hello from a wasi:http handler\n";

fn cache_flag() -> String {
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve-cache");
    format!("--cache-dir={}", cache.display())
}

/// What a child printed on stderr so far, and whether the pipe closed.
#[derive(Clone, Default)]
struct Seen {
    text: String,
    closed: bool,
}

/// Reads `pipe` to its end into `seen`, so that the child never blocks on
/// a full pipe, however long the test goes on after it stops looking.
fn drain(mut pipe: impl tokio::io::AsyncRead + Unpin + Send + 'static) -> watch::Receiver<Seen> {
    let (tx, rx) = watch::channel(Seen::default());
    tokio::spawn(async move {
        let mut buf = vec![0u8; 8192];
        loop {
            match pipe.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let more = String::from_utf8_lossy(&buf[..n]).into_owned();
                    tx.send_modify(|seen| seen.text.push_str(&more));
                }
            }
        }
        tx.send_modify(|seen| seen.closed = true);
    });
    rx
}

/// A `moat serve` process on a port of its own; killed when dropped, so a
/// failing test leaves no server behind.
struct Serve {
    child: Child,
    stderr: watch::Receiver<Seen>,
    addr: SocketAddr,
}

impl Serve {
    /// `moat serve --addr=127.0.0.1:0 FLAGS COMPONENT`, once it says where
    /// it listens.
    async fn start(component: &str, flags: &[&str]) -> Serve {
        Serve::start_logging(component, flags, None).await
    }

    /// As [`start`](Self::start), with `RUST_LOG` set to `log`.
    async fn start_logging(component: &str, flags: &[&str], log: Option<&str>) -> Serve {
        let mut command = Command::new(MOAT);
        match log {
            Some(filter) => command.env("RUST_LOG", filter),
            None => command.env_remove("RUST_LOG"),
        };
        let mut child = command
            .arg("serve")
            .arg(cache_flag())
            .arg("--addr=127.0.0.1:0")
            .args(flags)
            .arg(component)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("moat starts");
        let mut stderr = drain(child.stderr.take().unwrap());
        let seen = within(
            "moat serve saying where it serves",
            stderr.wait_for(|seen| {
                seen.closed
                    || seen
                        .text
                        .split_once(SERVING)
                        .is_some_and(|(_, rest)| rest.contains('\n'))
            }),
        )
        .await
        .expect("the stderr reader")
        .clone();
        let Some((_, rest)) = seen.text.split_once(SERVING) else {
            panic!("moat serve {flags:?} ended without serving:\n{}", seen.text);
        };
        let addr = rest
            .lines()
            .next()
            .map(|line| line.trim_start_matches("s://").trim_start_matches("://"))
            .and_then(|line| line.strip_suffix('/'))
            .and_then(|addr| addr.parse().ok())
            .unwrap_or_else(|| panic!("no address in {:?}", seen.text));
        Serve {
            child,
            stderr,
            addr,
        }
    }

    fn stderr(&self) -> String {
        self.stderr.borrow().text.clone()
    }

    /// Waits until stderr holds `needle`.
    async fn wait_for_stderr(&mut self, needle: &str) {
        let seen = within(
            &format!("{needle:?} on moat serve's stderr"),
            self.stderr
                .wait_for(|seen| seen.closed || seen.text.contains(needle)),
        )
        .await
        .expect("the stderr reader")
        .clone();
        if !seen.text.contains(needle) {
            let status = within("moat serve exiting", self.child.wait()).await;
            panic!(
                "moat serve ended ({status:?}) without printing {needle:?}:\n{}",
                seen.text
            );
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Waits for the process to exit.
    async fn exited(&mut self) -> ExitStatus {
        within("moat serve exiting", self.child.wait())
            .await
            .expect("moat serve's status")
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// `moat serve ARGS` that should not start serving: its exit status and
/// stderr.
async fn serve_refused(args: &[&str]) -> (Option<i32>, String) {
    let out = within(
        "moat serve giving up",
        Command::new(MOAT)
            .arg("serve")
            .arg(cache_flag())
            .args(args)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("moat runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// One HTTP/1.1 response as a client reads it.
struct Answer {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then_some(value.trim())
        })
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

impl std::fmt::Debug for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = &self.body[..self.body.len().min(300)];
        write!(
            f,
            "{}[{} body bytes] {:?}",
            self.head,
            self.body.len(),
            String::from_utf8_lossy(shown)
        )
    }
}

fn broken(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// A response head, up to and with its blank line.
async fn read_head(from: &mut (impl AsyncBufRead + Unpin)) -> io::Result<String> {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        if from.read_until(b'\n', &mut head).await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "the connection ended in the head: {:?}",
                    String::from_utf8_lossy(&head)
                ),
            ));
        }
    }
    String::from_utf8(head).map_err(|e| broken(format!("a head that is not UTF-8: {e}")))
}

/// One response: the head, then the body as the head frames it (chunked,
/// a Content-Length, or up to the end of the connection).
async fn read_answer(from: &mut (impl AsyncBufRead + Unpin)) -> io::Result<Answer> {
    let head = read_head(from).await?;
    read_body(from, head).await
}

/// The body that follows `head`, framed as `head` says.
async fn read_body(from: &mut (impl AsyncBufRead + Unpin), head: String) -> io::Result<Answer> {
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| broken(format!("no status in {head:?}")))?;
    let mut answer = Answer {
        status,
        head,
        body: Vec::new(),
    };
    let chunked = answer
        .header("transfer-encoding")
        .is_some_and(|te| te.eq_ignore_ascii_case("chunked"));
    let length = answer.header("content-length").map(str::to_owned);
    if chunked {
        loop {
            let mut line = String::new();
            from.read_line(&mut line).await?;
            let size = line.trim().split(';').next().unwrap_or_default();
            let size = usize::from_str_radix(size, 16)
                .map_err(|_| broken(format!("a chunk size of {line:?}")))?;
            if size == 0 {
                // The trailers, if any, and the blank line.
                loop {
                    let mut trailer = String::new();
                    if from.read_line(&mut trailer).await? == 0 || trailer == "\r\n" {
                        break;
                    }
                }
                break;
            }
            let at = answer.body.len();
            answer.body.resize(at + size, 0);
            from.read_exact(&mut answer.body[at..]).await?;
            let mut crlf = [0u8; 2];
            from.read_exact(&mut crlf).await?;
            if &crlf != b"\r\n" {
                return Err(broken(format!("a chunk ending in {crlf:?}")));
            }
        }
    } else if let Some(length) = length {
        let length: usize = length
            .parse()
            .map_err(|_| broken(format!("a Content-Length of {length:?}")))?;
        answer.body.resize(length, 0);
        from.read_exact(&mut answer.body).await?;
    } else {
        from.read_to_end(&mut answer.body).await?;
    }
    Ok(answer)
}

/// Sends `head` and `body` on a new connection (the writing beside the
/// reading, as a client streaming a body does) and reads one answer.
async fn exchange(addr: SocketAddr, head: String, body: Vec<u8>) -> Answer {
    let stream = TcpStream::connect(addr).await.expect("moat serve accepts");
    let (from, mut to) = stream.into_split();
    let writing = tokio::spawn(async move {
        to.write_all(head.as_bytes()).await?;
        to.write_all(&body).await?;
        // Kept open: some servers take a half-close for a client gone.
        Ok::<_, io::Error>(to)
    });
    let answer = within(
        "an answer from moat serve",
        read_answer(&mut BufReader::new(from)),
    )
    .await
    .expect("a whole answer");
    writing.await.unwrap().expect("the request is sent");
    answer
}

async fn get(addr: SocketAddr, path: &str) -> Answer {
    let head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    exchange(addr, head, Vec::new()).await
}

async fn post(addr: SocketAddr, path: &str, body: Vec<u8>) -> Answer {
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    exchange(addr, head, body).await
}

/// `body` in chunked framing, `chunk` bytes a chunk, with the last chunk.
fn chunked(body: &[u8], chunk: usize) -> Vec<u8> {
    let mut framed = Vec::with_capacity(body.len() + body.len() / chunk * 10 + 5);
    for piece in body.chunks(chunk) {
        framed.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        framed.extend_from_slice(piece);
        framed.extend_from_slice(b"\r\n");
    }
    framed.extend_from_slice(b"0\r\n\r\n");
    framed
}

fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    rand::rngs::StdRng::seed_from_u64(seed).fill_bytes(&mut bytes);
    bytes
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// POSTs `body` to `url` with curl (from its stdin, with `extra` flags);
/// the status code and the response body.
async fn curl_post(url: &str, body: &[u8], extra: &[&str]) -> (String, Vec<u8>) {
    let mut curl = Command::new("curl")
        .args(["-sS", "--http1.1", "--data-binary", "@-"])
        .args(extra)
        .args(["--write-out", "\n%{http_code}", url])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("curl runs");
    let mut stdin = curl.stdin.take().unwrap();
    let body = body.to_vec();
    let writing = tokio::spawn(async move { stdin.write_all(&body).await });
    let out = within("curl posting", curl.wait_with_output())
        .await
        .unwrap();
    writing.await.unwrap().expect("curl reads the body");
    assert!(
        out.status.success(),
        "curl {extra:?} {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let split = out
        .stdout
        .iter()
        .rposition(|&b| b == b'\n')
        .expect("curl's status line");
    (
        String::from_utf8_lossy(&out.stdout[split + 1..]).into_owned(),
        out.stdout[..split].to_vec(),
    )
}

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

/// An HTTP server on 127.0.0.1 that answers every request with 200 and
/// `body`, one request a connection; its port, and how many connections
/// it accepted.
async fn upstream(body: &'static str) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&accepted);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut stream = BufReader::new(stream);
                if read_head(&mut stream).await.is_err() {
                    return;
                }
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.get_mut().write_all(answer.as_bytes()).await;
                let _ = stream.get_mut().shutdown().await;
            });
        }
    });
    (port, accepted)
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

    let trapped = get(server.addr, "/trap").await;
    assert_eq!(
        (trapped.status, trapped.text().as_str()),
        (500, "the handler trapped\n"),
        "{trapped:?}"
    );
    assert_no_internals(&trapped);
    ok(get(server.addr, "/ok").await, "/trap");

    let spun = get(server.addr, "/spin").await;
    let text = spun.text();
    assert_eq!(spun.status, 500, "{spun:?}");
    assert!(
        text.starts_with("the handler was stopped: ")
            && text.contains("time limit")
            && text.contains("--timeout"),
        "{spun:?}"
    );
    assert_no_internals(&spun);
    ok(get(server.addr, "/ok").await, "/spin");

    let grown = get(server.addr, "/grow").await;
    let text = grown.text();
    assert_eq!(grown.status, 500, "{grown:?}");
    assert!(
        text.starts_with("the handler was stopped: ")
            && text.contains("memory limit")
            && text.contains("--max-memory"),
        "{grown:?}"
    );
    assert_no_internals(&grown);
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
    assert_eq!(
        (answer.status, answer.text().as_str()),
        (500, "the handler trapped\n"),
        "{answer:?}"
    );
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

#[tokio::test]
async fn serve_on_sigterm_finishes_the_request_in_flight_and_exits_0() {
    let mut server = Serve::start(guests::HTTP_HOSTILE, &["--timeout=3s"]).await;
    let port = server.addr.port();
    let mut client = BufReader::new(TcpStream::connect(server.addr).await.unwrap());
    client
        .get_mut()
        .write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let head = within("the head of /slow", read_head(&mut client))
        .await
        .unwrap();
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");

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

    let pid = server.child.id().expect("moat serve is running");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .expect("SIGTERM sent");
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
/// is still waiting when its time is up, whichever came first.
#[tokio::test]
async fn serve_answers_503_when_no_instance_frees_within_the_request_time() {
    let server = Serve::start(guests::HTTP_HOSTILE, &["--max-instances=1", "--timeout=2s"]).await;
    let addr = server.addr;
    let mut a = TcpStream::connect(addr).await.unwrap();
    a.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut a = BufReader::new(a);
    // B and C start after A's fifth tick (the handler ticks every 100 ms):
    // A's time is then up at least 400 ms before theirs, which leaves its
    // instance that long to be given back to one of them.
    let mut line = String::new();
    let mut ticks = 0;
    while ticks < 5 {
        line.clear();
        within("A's ticks", a.read_line(&mut line)).await.unwrap();
        ticks += usize::from(line.contains("tick"));
    }
    let slow = || {
        tokio::spawn(async move {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            stream
                .write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .await
                .unwrap();
            let mut all = Vec::new();
            let _ = stream.read_to_end(&mut all).await;
            String::from_utf8_lossy(&all).into_owned()
        })
    };
    let (b, c) = (slow(), slow());
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
}

/// A test CA and a leaf for `localhost`, written to a directory of their
/// own (`ca.pem`, `cert.pem`, `key.pem`): the directory and moat serve's
/// `--tls-cert=` and `--tls-key=` flags for them.
fn tls_files(name: &str) -> (PathBuf, String, String) {
    let ca = crate::support::certs::Ca::new("moat serve test CA");
    let leaf = ca.leaf(&["localhost"]);
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.join("cert.pem"), &leaf.cert_pem).unwrap();
    std::fs::write(dir.join("key.pem"), &leaf.key_pem).unwrap();
    let cert = format!("--tls-cert={}", dir.join("cert.pem").display());
    let key = format!("--tls-key={}", dir.join("key.pem").display());
    (dir, cert, key)
}

/// `--tls-cert`/`--tls-key`: HTTPS, verified by curl against the test's
/// CA for the name in the certificate; a plain-HTTP client gets nothing
/// served, and a client that stalls its handshake is let go.
#[tokio::test]
async fn serve_speaks_https_with_the_certificate_given() {
    if !have("curl") {
        return;
    }
    let (dir, cert, key) = tls_files("serve-tls");
    let server = Serve::start(
        guests::WSTD_SERVE,
        &[&cert, &key, "--tls-handshake-timeout=1s"],
    )
    .await;
    let url = format!("https://localhost:{}/", server.addr.port());
    let out = within(
        "curl over TLS",
        Command::new("curl")
            .args(["-sS", "--http1.1", "--cacert"])
            .arg(dir.join("ca.pem"))
            .args([&url, &url, "-v"])
            .output(),
    )
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{HELLO}{HELLO}")
    );
    assert!(
        stderr.contains("Re-using existing") || stderr.contains("Reusing existing"),
        "one TLS connection for both: {stderr}"
    );
    // Plain HTTP to the TLS port: no answer, the connection is closed.
    let mut plain = TcpStream::connect(server.addr).await.unwrap();
    plain
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let _ = within("the plain client cut off", plain.read_to_end(&mut got)).await;
    assert!(!String::from_utf8_lossy(&got).contains(HELLO));
    // A client that connects and never sends its ClientHello is let go.
    let mut silent = TcpStream::connect(server.addr).await.unwrap();
    let mut nothing = Vec::new();
    let _ = within("the silent client let go", silent.read_to_end(&mut nothing)).await;
    assert!(nothing.is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

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
    assert_eq!(
        (trapped.status, trapped.text().as_str()),
        (500, "the handler trapped\n")
    );
    let again = get(server.addr, "/").await;
    assert_eq!(again.status, 200);
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

/// A wasi:http 0.2 proxy that imports only WASI 0.2 is compiled for the
/// engine without the component model's concurrency support; every other
/// component for the engine with it, including one that looks like such
/// a proxy from its outermost imports and exports but uses the concurrency
/// features inside, or imports what the plain engine does not link. (The
/// serve tests above then serve wstd-serve and http-hostile, traps, spins,
/// memory growth and cut-off uploads included, on the plain engine.)
#[test]
fn wasi_0_2_proxies_of_wasi_0_2_imports_alone_get_the_engine_without_concurrency() {
    for (name, path, concurrent) in [
        ("wstd-serve", guests::WSTD_SERVE, false),
        ("http-hostile", guests::HTTP_HOSTILE, false),
        ("http-service-p3 (0.3)", guests::HTTP_SERVICE_P3, true),
        ("http-middleware-p3 (0.3)", guests::HTTP_MIDDLEWARE_P3, true),
        ("std-echo (a 0.2 command)", guests::STD_ECHO, true),
        ("echo-server (moat:net)", guests::ECHO_SERVER, true),
    ] {
        assert_eq!(
            support::guest(path).uses_concurrency(),
            concurrent,
            "{name}"
        );
    }

    const HANDLER: &str =
        r#"(instance $h) (export "wasi:http/incoming-handler@0.2.6" (instance $h))"#;
    let cases = [
        (
            "a proxy of WASI 0.2 imports",
            r#"(import "wasi:io/streams@0.2.6" (instance))"#,
            false,
        ),
        (
            "a proxy with a nested component of its own imports",
            r#"(import "wasi:io/streams@0.2.6" (instance))
               (component (import "moat:net/tcp@0.1.0" (instance)))"#,
            false,
        ),
        (
            "a proxy importing moat:net",
            r#"(import "moat:net/tcp@0.1.0" (instance))"#,
            true,
        ),
        (
            "a proxy importing a WASI 0.3 interface",
            r#"(import "wasi:clocks/monotonic-clock@0.3.0" (instance))"#,
            true,
        ),
        (
            "a proxy exporting a WASI 0.3 interface too",
            r#"(import "wasi:io/streams@0.2.6" (instance))
               (instance $s) (export "wasi:http/handler@0.3.0" (instance $s))"#,
            true,
        ),
        (
            "a proxy with an async function type inside",
            r#"(import "wasi:io/streams@0.2.6" (instance)) (type (func async))"#,
            true,
        ),
        (
            "a proxy importing a WASI 0.2 function that does not exist",
            r#"(import "wasi:io/streams@0.2.6" (instance (export "no-such-function" (func))))"#,
            true,
        ),
    ];
    for (what, imports, concurrent) in cases {
        let bytes = wat::parse_str(format!("(component {imports} {HANDLER})"))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let guest = support::moat()
            .load_bytes(&bytes, what)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(guest.uses_concurrency(), concurrent, "{what}");
        assert!(guest.is_http_handler(), "{what}");
    }
}

/// A hostile proxy of WASI 0.2 imports that also exports, under the names
/// of WASI 0.3's asynchronous entry points, functions that are not
/// asynchronous (their types pass wasmtime's checks of those exports): it
/// gets the engine with concurrency support, since moat drives such an
/// export concurrently whatever its type says, and runs there. On the
/// other engine, `moat run` failed with wasmtime's own "cannot use
/// `run_concurrent`".
#[tokio::test]
async fn a_proxy_exporting_sync_0_3_entry_points_gets_the_engine_that_can_drive_them() {
    let wat = r#"(component
        (import "wasi:io/streams@0.2.6" (instance))
        (core module $m (func (export "run") (result i32) i32.const 0))
        (core instance $i (instantiate $m))
        (func $run (result (result)) (canon lift (core func $i "run")))
        (instance $cli (export "run" (func $run)))
        (export "wasi:cli/run@0.3.0" (instance $cli))
        (instance $h)
        (export "wasi:http/incoming-handler@0.2.6" (instance $h)))"#;
    let bytes = wat::parse_str(wat).expect("the component parses");
    let moat = support::moat();
    let guest = moat.load_bytes(&bytes, "sync-0.3").expect("it compiles");
    assert!(guest.uses_concurrency());
    assert!(guest.has_async_run());
    let options = moat_host::RunOptions::new(moat_host::policy::Policy::new());
    let exit = moat.run(&guest, options).await.expect("it runs");
    assert_eq!(exit.code(), 0);
}

/// `moat serve --audit`: the operator's grant (`--addr`) is the trail's
/// `serve-bind`, with the address bound, and the trail is complete when
/// SIGTERM's stop ends the process.
#[tokio::test]
async fn serve_records_its_own_address_on_the_audit_trail() {
    let trail = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("audit-serve.jsonl");
    let _ = std::fs::remove_file(&trail);
    let audit = format!("--audit={}", trail.display());
    let mut server = Serve::start(guests::WSTD_SERVE, &[&audit]).await;
    let pid = server.child.id().expect("moat serve is running");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .expect("SIGTERM sent");
    assert_eq!(server.exited().await.code(), Some(0));
    let text = std::fs::read_to_string(&trail).expect("the trail");
    let bind = text
        .lines()
        .find(|l| l.contains(r#""operation":"serve-bind""#))
        .unwrap_or_else(|| panic!("no serve-bind on the trail:\n{text}"));
    for part in [
        format!(r#""address":"{}""#, server.addr),
        r#""decision":"allowed""#.to_owned(),
        r#""entry":"127.0.0.1:0""#.to_owned(),
        r#""flag":"--addr""#.to_owned(),
    ] {
        assert!(bind.contains(&part), "{part} in {bind}");
    }
}

/// A connection to `addr` from `source` (127.0.0.2, say: any address of
/// 127/8 reaches the loopback, and the server sees it as another client).
async fn connect_from(source: &str, addr: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
    socket.connect(addr).await.expect("moat serve accepts")
}

/// `GET path` from `source`, on a connection of its own: the whole answer.
async fn get_from(source: &str, addr: SocketAddr, path: &str) -> Answer {
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
/// first byte of its body, then nothing (the issue's slow bodies), take
/// their address's share of the instances (four) and no more: a client
/// from another address is answered while they wait, and by then the
/// server has started handlers for four of them, not sixteen.
#[tokio::test]
async fn serve_gives_one_client_address_no_more_than_its_share_of_instances() {
    let mut server = Serve::start_logging(
        guests::HTTP_HOSTILE,
        &["--timeout=60s"],
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

/// A request body that pauses longer than --http-request-body-timeout
/// while its handler waits for it ends the request with 408 (the handler
/// is stopped and its instance given back), and the next request is
/// served by that instance.
#[tokio::test]
async fn serve_answers_408_to_a_request_body_that_pauses_past_its_bound() {
    let server = Serve::start(
        guests::HTTP_HOSTILE,
        &[
            "--max-instances=1",
            "--http-request-body-timeout=1s",
            "--timeout=120s",
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
