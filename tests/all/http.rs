//! wasi:http guests' outgoing requests under the policy: wstd and raw
//! wasi:http 0.2 clients, and a wasi:http 0.3 one, against HTTP servers
//! of the test's own (plain and TLS), with names answered by a resolver
//! the test controls.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::certs::Ca;
use crate::support::{Finished, Names, guests, start_with};
use moat_host::net::{Limits, Resolver, TlsTrust};
use moat_host::policy::Policy;
use moat_host::{Input, RunOptions};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

/// What an upstream does with each request.
#[derive(Clone)]
enum Reply {
    /// 200 with this body, keep-alive.
    Body(&'static str),
    /// 200 with the request's body.
    Echo,
    /// Never answers.
    Hold,
    /// A head that promises 10 bytes, 3 of them, then nothing.
    Stall,
    /// A head of about this many bytes.
    BigHead(usize),
    /// 302 to this location.
    Redirect(String),
    /// 200 with this body, then the connection closed without a word (as
    /// a server does whose idle timeout is shorter than the client's).
    ThenClose(&'static str),
}

/// An HTTP/1.1 server on 127.0.0.1 counting connections and requests.
struct Upstream {
    port: u16,
    connections: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Upstream {
    async fn start(reply: Reply) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (c, r) = (Arc::clone(&connections), Arc::clone(&requests));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                c.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(stream, reply.clone(), Arc::clone(&r)));
            }
        });
        Upstream {
            port,
            connections,
            requests,
        }
    }

    /// A TLS server for `name`, signed by `ca`; the SNI names it was sent
    /// go in `requests` as `sni NAME`.
    async fn start_tls(ca: &Ca, name: &str, reply: Reply) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let acceptor = ca.leaf(&[name]).acceptor(&["http/1.1"]);
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (c, r) = (Arc::clone(&connections), Arc::clone(&requests));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                c.fetch_add(1, Ordering::SeqCst);
                let (acceptor, r, reply) = (acceptor.clone(), Arc::clone(&r), reply.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let sni = tls.get_ref().1.server_name().unwrap_or("(none)").to_owned();
                    r.lock().unwrap().push(format!("sni {sni}"));
                    serve(tls, reply, r).await;
                });
            }
        });
        Upstream {
            port,
            connections,
            requests,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// Serves requests on one connection until the peer closes it.
async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    reply: Reply,
    requests: Arc<Mutex<Vec<String>>>,
) {
    let mut buf = Vec::new();
    loop {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 8192];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let mut lines = head.lines();
        let request_line = lines.next().unwrap_or_default().to_owned();
        let headers: HashMap<String, String> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        buf.drain(..head_end);
        let body = if let Some(len) = headers.get("content-length") {
            let len: usize = len.parse().unwrap();
            while buf.len() < len {
                let mut chunk = [0u8; 65536];
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            buf.drain(..len).collect::<Vec<u8>>()
        } else if headers
            .get("transfer-encoding")
            .is_some_and(|t| t.contains("chunked"))
        {
            match read_chunked(&mut stream, &mut buf).await {
                Some(body) => body,
                None => return,
            }
        } else {
            Vec::new()
        };
        requests.lock().unwrap().push(format!(
            "{request_line} host={}",
            headers.get("host").cloned().unwrap_or_default()
        ));
        let response: Vec<u8> = match &reply {
            Reply::Body(text) => ok(text.as_bytes()),
            Reply::Echo => ok(&body),
            Reply::Hold => {
                std::future::pending::<()>().await;
                return;
            }
            Reply::Stall => {
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc")
                    .await;
                std::future::pending::<()>().await;
                return;
            }
            Reply::BigHead(size) => {
                let mut r = b"HTTP/1.1 200 OK\r\n".to_vec();
                for i in 0..size / 10_000 {
                    r.extend_from_slice(format!("x-pad-{i}: {}\r\n", "p".repeat(9990)).as_bytes());
                }
                r.extend_from_slice(b"content-length: 2\r\n\r\nok");
                r
            }
            Reply::ThenClose(text) => {
                let _ = stream.write_all(&ok(text.as_bytes())).await;
                return;
            }
            Reply::Redirect(to) => {
                format!("HTTP/1.1 302 Found\r\nlocation: {to}\r\ncontent-length: 0\r\n\r\n")
                    .into_bytes()
            }
        };
        if stream.write_all(&response).await.is_err() {
            return;
        }
    }
}

fn ok(body: &[u8]) -> Vec<u8> {
    let mut r = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len()).into_bytes();
    r.extend_from_slice(body);
    r
}

async fn read_chunked<S: AsyncRead + Unpin>(stream: &mut S, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(i) = buf.windows(2).position(|w| w == b"\r\n") {
                break i;
            }
            let mut chunk = [0u8; 65536];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let size_text = String::from_utf8_lossy(&buf[..line_end]).into_owned();
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        buf.drain(..line_end + 2);
        while buf.len() < size + 2 {
            let mut chunk = [0u8; 65536];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        body.extend_from_slice(&buf[..size]);
        buf.drain(..size + 2);
        if size == 0 {
            return Some(body);
        }
    }
}

fn grant(entries: &str) -> Policy {
    Policy::new().allow_connect(entries).unwrap()
}

async fn run_with(guest: &str, options: RunOptions, args: &[&str]) -> Finished {
    start_with(
        guest,
        options
            .arg(guest)
            .args(args.iter().copied())
            .stdin(Input::Empty),
    )
    .finish()
    .await
}

async fn probe(policy: Policy, names: &Arc<Names>, args: &[&str]) -> Finished {
    let options = RunOptions::new(policy).resolver(Arc::clone(names) as Arc<dyn Resolver>);
    run_with(guests::HTTP_PROBE, options, args).await
}

fn limits(f: impl FnOnce(&mut Limits)) -> Limits {
    let mut limits = Limits::default();
    f(&mut limits);
    limits
}

#[tokio::test]
async fn a_wstd_client_fetches_by_name_and_keeps_one_connection_alive() {
    let up = Upstream::start(Reply::Body("hello over wasi:http\n")).await;
    let names = Names::new(&[("api.test", "127.0.0.1")]);
    let options = RunOptions::new(grant(&format!("api.test:{}", up.port)))
        .resolver(Arc::clone(&names) as Arc<dyn Resolver>);
    let url = format!("http://api.test:{}/v1", up.port);
    let done = run_with(guests::WSTD_FETCH, options, &["--repeat", "5", &url]).await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert_eq!(done.stdout, "hello over wasi:http\n");
    assert!(done.stderr.contains("fetched 5"), "{}", done.stderr);
    assert_eq!(
        up.connections(),
        1,
        "five requests, one kept-alive connection"
    );
    let requests = up.requests();
    assert_eq!(requests.len(), 5);
    assert_eq!(
        requests[0],
        format!("GET /v1 HTTP/1.1 host=api.test:{}", up.port),
        "the request line carries the path, the Host header the authority as written"
    );
    assert_eq!(names.asked(), ["api.test"], "the name is looked up once");
}

#[tokio::test]
async fn an_ungranted_authority_is_refused_before_any_lookup_or_connection() {
    let up = Upstream::start(Reply::Body("no")).await;
    let names = Names::new(&[("api.test", "127.0.0.1")]);
    let url = format!("http://api.test:{}/", up.port);
    let done = probe(grant("other.test:80"), &names, &["fetch", &url]).await;
    assert_eq!(done.code(), 1);
    assert_eq!(done.stdout, "error: ErrorCode::HttpRequestDenied\n");
    assert!(
        done.stderr.contains(&format!(
            "HTTP request: connect to api.test:{} denied: needs --allow-net=api.test:{}",
            up.port, up.port
        )),
        "{}",
        done.stderr
    );
    assert!(names.asked().is_empty(), "no lookup: {:?}", names.asked());
    assert_eq!(up.connections(), 0);
}

#[tokio::test]
async fn a_name_that_resolves_into_a_denied_range_is_refused_before_connecting() {
    let up = Upstream::start(Reply::Body("no")).await;
    let names = Names::new(&[("rebind.test", "127.0.0.1")]);
    let policy = grant("rebind.test").deny_connect("private").unwrap();
    let url = format!("http://rebind.test:{}/", up.port);
    let done = probe(policy, &names, &["fetch", &url]).await;
    assert_eq!(done.stdout, "error: ErrorCode::DestinationIpProhibited\n");
    assert!(
        done.stderr
            .contains("denied by --deny-net=private (it resolved to 127.0.0.1)"),
        "{}",
        done.stderr
    );
    assert_eq!(names.asked(), ["rebind.test"]);
    assert_eq!(up.connections(), 0);
}

#[tokio::test]
async fn a_request_that_names_no_host_is_denied_and_says_so() {
    let names = Names::new(&[]);
    for mode in ["no-authority", "empty-authority"] {
        let done = probe(Policy::new().allow_connect("*").unwrap(), &names, &[mode]).await;
        if done.stdout.contains("refused by set-authority") {
            // wasi:http refused the empty authority itself.
            continue;
        }
        assert_eq!(
            done.stdout, "error: ErrorCode::HttpRequestDenied\n",
            "{mode}"
        );
        assert!(
            done.stderr.contains("it names no host")
                && done.stderr.contains("never the Host header"),
            "{mode}: {}",
            done.stderr
        );
    }
}

#[tokio::test]
async fn the_host_header_is_not_what_is_judged() {
    let up = Upstream::start(Reply::Body("no")).await;
    let names = Names::new(&[]);
    let done = probe(
        grant("granted.test"),
        &names,
        &["host-header", &up.url("/"), "granted.test"],
    )
    .await;
    assert!(
        done.stdout
            .ends_with("error: ErrorCode::HttpRequestDenied\n"),
        "{}",
        done.stdout
    );
    assert_eq!(up.connections(), 0);
}

#[tokio::test]
async fn authorities_are_judged_as_written_in_every_spelling() {
    let up = Upstream::start(Reply::Body("reached\n")).await;
    let names = Names::new(&[]);
    let port = up.port;
    // A spelling moat does not take for an address is refused, not
    // guessed at.
    let done = probe(
        Policy::new().allow_connect("*").unwrap(),
        &names,
        &["authority", &format!("127.1:{port}")],
    )
    .await;
    assert_eq!(done.stdout, "error: ErrorCode::HttpRequestUriInvalid\n");
    assert!(done.stderr.contains("127.1"), "{}", done.stderr);
    // An IPv4-mapped IPv6 literal is its IPv4 address, for grants and deny
    // lists alike.
    let mapped = format!("[::ffff:127.0.0.1]:{port}");
    let done = probe(grant("127.0.0.1"), &names, &["authority", &mapped]).await;
    assert_eq!(done.stdout, "status: 200\nreached\n", "{}", done.stderr);
    let denied = Policy::new()
        .allow_connect("*")
        .unwrap()
        .deny_connect("private")
        .unwrap();
    let done = probe(denied, &names, &["authority", &mapped]).await;
    assert_eq!(done.stdout, "error: ErrorCode::HttpRequestDenied\n");
    assert!(
        done.stderr.contains("--deny-net=private"),
        "{}",
        done.stderr
    );
    assert_eq!(up.connections(), 1);
}

/// The Host header (HTTP/1.1) and `:authority` (HTTP/2) a server reads are
/// the host and port judged, never the guest's other text: an authority
/// with user information (`evil.example@127.0.0.1`, which a front proxy
/// may read as the host `evil.example`) is refused before anything is
/// sent, and recorded as written.
#[tokio::test]
async fn the_host_a_server_reads_is_the_one_judged_and_user_information_is_refused() {
    let up = Upstream::start(Reply::Body("reached\n")).await;
    let names = Names::new(&[]);
    let port = up.port;
    let done = probe(
        grant(&format!("127.0.0.1:{port}")),
        &names,
        &["authority", &format!("127.0.0.1:{port}")],
    )
    .await;
    assert_eq!(done.stdout, "status: 200\nreached\n", "{}", done.stderr);
    assert_eq!(
        up.requests(),
        [format!("GET / HTTP/1.1 host=127.0.0.1:{port}")]
    );
    for userinfo in [
        format!("evil.example@127.0.0.1:{port}"),
        format!("u:p@127.0.0.1:{port}"),
        format!("@127.0.0.1:{port}"),
    ] {
        let done = probe(
            grant(&format!("127.0.0.1:{port}")),
            &names,
            &["authority", &userinfo],
        )
        .await;
        assert_eq!(
            done.stdout, "error: ErrorCode::HttpRequestUriInvalid\n",
            "{userinfo}: {}",
            done.stderr
        );
        assert!(done.stderr.contains("user information"), "{}", done.stderr);
    }
    assert_eq!(up.connections(), 1, "nothing more was sent");

    // Round four's finding 8: spellings of the same host and port reach
    // the server as that host and port, not as written.
    let local = Names::new(&[("localhost", "127.0.0.1")]);
    let both = || {
        Policy::new()
            .allow_connect(&format!("127.0.0.1:{port},localhost:{port}"))
            .unwrap()
    };
    for (written, sent) in [
        (format!("127.0.0.1:+{port}"), format!("127.0.0.1:{port}")),
        (format!("127.0.0.1:0{port}"), format!("127.0.0.1:{port}")),
        (format!("LOCALHOST.:{port}"), format!("localhost:{port}")),
    ] {
        let done = probe(both(), &local, &["authority", &written]).await;
        assert_eq!(
            done.stdout, "status: 200\nreached\n",
            "{written}: {}",
            done.stderr
        );
        assert_eq!(
            up.requests().last().cloned(),
            Some(format!("GET / HTTP/1.1 host={sent}")),
            "{written}"
        );
    }

    // Over HTTP/2: the `:authority` is the host and port judged (in lower
    // case); with user information, refused.
    let ca = Ca::new("moat authority CA");
    let (h2_port, _, requests) = h2_upstream(&ca).await;
    let names = Names::new(&[("h2.test", "127.0.0.1")]);
    let trust = TlsTrust::webpki().with_pem(ca.pem().as_bytes()).unwrap();
    let options = || {
        RunOptions::new(grant("h2.test"))
            .resolver(Arc::clone(&names) as Arc<dyn Resolver>)
            .tls_trust(trust.clone())
    };
    let done = run_with(
        guests::HTTP_PROBE,
        options(),
        &["authority", &format!("h2.test:{h2_port}"), "https"],
    )
    .await;
    assert_eq!(done.stdout, "status: 200\nover h2\n", "{}", done.stderr);
    let done = run_with(
        guests::HTTP_PROBE,
        options(),
        &[
            "authority",
            &format!("evil.example@h2.test:{h2_port}"),
            "https",
        ],
    )
    .await;
    assert_eq!(done.stdout, "error: ErrorCode::HttpRequestUriInvalid\n");
    assert_eq!(
        requests.lock().unwrap().clone(),
        [format!("HTTP/2.0 h2.test:{h2_port} /")]
    );
}

#[tokio::test]
async fn a_refused_request_body_is_read_so_the_guest_sees_the_refusal() {
    let names = Names::new(&[]);
    let done = probe(
        grant("127.0.0.1:1"),
        &names,
        &["post", "http://127.0.0.1:2/upload", "1000000"],
    )
    .await;
    assert_eq!(
        done.stdout, "sent 1000000\nerror: ErrorCode::HttpRequestDenied\n",
        "{}",
        done.stderr
    );
}

/// Issue 58: the run's figures count the bodies, once, as HTTP (not as
/// the TCP its client's connection carried), and the connection.
#[tokio::test]
async fn the_runs_figures_count_the_bodies_each_way_and_the_connection() {
    use moat_host::figures::Figures;
    use moat_host::net::{Direction, Opened, Transport};
    let up = Upstream::start(Reply::Echo).await;
    let names = Names::new(&[]);
    let figures = Figures::new(Vec::new());
    let options = RunOptions::new(grant(&format!("127.0.0.1:{}", up.port)))
        .resolver(Arc::clone(&names) as Arc<dyn Resolver>)
        .figures(Arc::clone(&figures));
    let done = run_with(
        guests::HTTP_PROBE,
        options,
        &["post", &up.url("/echo"), "300000"],
    )
    .await;
    assert_eq!(
        done.stdout, "sent 300000\nstatus: 200\nreceived 300000\n",
        "{}",
        done.stderr
    );
    let traffic = figures.traffic();
    assert_eq!(traffic.bytes(Transport::Http, Direction::Sent), 300_000);
    assert_eq!(traffic.bytes(Transport::Http, Direction::Received), 300_000);
    assert_eq!(traffic.bytes(Transport::Tcp, Direction::Sent), 0);
    assert_eq!(traffic.bytes(Transport::Tcp, Direction::Received), 0);
    assert_eq!(traffic.connections(Opened::Connected), 1);
    assert_eq!(
        figures.decisions().get(
            moat_host::audit::Operation::HttpRequest,
            moat_host::audit::Decided::Allowed
        ),
        1
    );
}

#[tokio::test]
async fn bodies_stream_both_ways_byte_for_byte() {
    let up = Upstream::start(Reply::Echo).await;
    let names = Names::new(&[]);
    let policy = grant(&format!("127.0.0.1:{}", up.port));
    let done = probe(
        policy.clone(),
        &names,
        &["post", &up.url("/echo"), "5000000"],
    )
    .await;
    assert_eq!(
        done.stdout, "sent 5000000\nstatus: 200\nreceived 5000000\n",
        "{}",
        done.stderr
    );
    // wstd's client, with the body from stdin, checked byte for byte.
    let body: Vec<u8> = (0..3_000_000u32)
        .map(|i| b' ' + (i * 7 % 95) as u8)
        .collect();
    let options = RunOptions::new(policy).stdin(Input::Bytes(body.clone()));
    let done = start_with(
        guests::WSTD_FETCH,
        options.arg(guests::WSTD_FETCH).args([
            "--method",
            "POST",
            "--data-stdin",
            &up.url("/echo"),
        ]),
    )
    .finish()
    .await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert!(
        done.stdout.as_bytes() == body,
        "{} bytes back",
        done.stdout.len()
    );
}

#[tokio::test]
async fn requests_in_flight_are_bounded_and_the_refusal_names_the_setting() {
    let up = Upstream::start(Reply::Hold).await;
    let names = Names::new(&[]);
    let options = RunOptions::new(grant(&format!("127.0.0.1:{}", up.port)))
        .resolver(Arc::clone(&names) as Arc<dyn Resolver>)
        .limits(limits(|l| {
            l.max_http_requests = 4;
            l.http_first_byte_timeout = Duration::from_millis(500);
        }));
    let done = run_with(guests::HTTP_PROBE, options, &["flood", "10", &up.url("/")]).await;
    assert_eq!(
        done.stdout,
        "ok 0\nerr ErrorCode::ConnectionLimitReached x6\nerr ErrorCode::HttpResponseTimeout x4\n",
        "{}",
        done.stderr
    );
    assert!(
        done.stderr
            .contains("4 HTTP requests in flight already; raise it with --max-http-requests"),
        "{}",
        done.stderr
    );
}

#[tokio::test]
async fn outgoing_connections_count_against_max_sockets() {
    let up = Upstream::start(Reply::Hold).await;
    let names = Names::new(&[]);
    let options = RunOptions::new(grant(&format!("127.0.0.1:{}", up.port)))
        .resolver(Arc::clone(&names) as Arc<dyn Resolver>)
        .limits(limits(|l| {
            l.max_sockets = Some(2);
            l.http_first_byte_timeout = Duration::from_millis(500);
        }));
    let done = run_with(guests::HTTP_PROBE, options, &["flood", "5", &up.url("/")]).await;
    assert_eq!(
        done.stdout,
        "ok 0\nerr ErrorCode::ConnectionLimitReached x3\nerr ErrorCode::HttpResponseTimeout x2\n",
        "{}",
        done.stderr
    );
    assert!(done.stderr.contains("--max-sockets"), "{}", done.stderr);
    assert_eq!(up.connections(), 2);
}

/// The run's caps bound every wait; a guest may ask for less, and gets it,
/// but never more. (Without the cap, the first run here would wait an
/// hour; without the guest's own bound, the second would.)
#[tokio::test]
async fn a_guest_may_ask_for_less_time_never_more() {
    let up = Upstream::start(Reply::Hold).await;
    let names = Names::new(&[]);
    let policy = grant(&format!("127.0.0.1:{}", up.port));
    let capped = RunOptions::new(policy.clone()).limits(limits(|l| {
        l.http_first_byte_timeout = Duration::from_millis(300);
    }));
    let url = up.url("/");
    let done = run_with(
        guests::HTTP_PROBE,
        capped,
        &["timeouts", &url, "-", "3600000", "-"],
    )
    .await;
    assert_eq!(
        done.stdout, "error: ErrorCode::HttpResponseTimeout\n",
        "{}",
        done.stderr
    );
    let generous = RunOptions::new(policy.clone()).limits(limits(|l| {
        l.http_first_byte_timeout = Duration::from_secs(3600);
    }));
    let done = run_with(
        guests::HTTP_PROBE,
        generous,
        &["timeouts", &url, "-", "300", "-"],
    )
    .await;
    assert_eq!(
        done.stdout, "error: ErrorCode::HttpResponseTimeout\n",
        "{}",
        done.stderr
    );

    // Between bytes: the head and three bytes come, then nothing.
    let stall = Upstream::start(Reply::Stall).await;
    let capped = RunOptions::new(grant(&format!("127.0.0.1:{}", stall.port))).limits(limits(|l| {
        l.http_between_bytes_timeout = Duration::from_millis(300);
    }));
    let done = run_with(
        guests::HTTP_PROBE,
        capped,
        &["timeouts", &stall.url("/"), "-", "-", "3600000"],
    )
    .await;
    // wasmtime-wasi-http gives a body stream's error as text only (its
    // `http-error-code` finds no code in it).
    assert!(
        done.stdout.starts_with("status: 200\n")
            && done.stdout.contains("body error")
            && done.stdout.contains("connection read timeout"),
        "{}",
        done.stdout
    );
    drop(names);
}

#[tokio::test]
async fn a_response_head_past_the_bound_is_refused() {
    let up = Upstream::start(Reply::BigHead(100_000)).await;
    let names = Names::new(&[]);
    let policy = grant(&format!("127.0.0.1:{}", up.port));
    let done = probe(policy.clone(), &names, &["headers", &up.url("/")]).await;
    assert!(
        done.stdout
            .starts_with("error: ErrorCode::HttpResponseHeaderSectionSize"),
        "{}",
        done.stdout
    );
    let roomy = RunOptions::new(policy).limits(limits(|l| l.max_http_header_size = 256 << 10));
    let done = run_with(guests::HTTP_PROBE, roomy, &["headers", &up.url("/")]).await;
    assert!(done.stdout.starts_with("status: 200\n"), "{}", done.stdout);
}

#[tokio::test]
async fn a_redirect_is_the_guests_next_request_and_is_judged_again() {
    let target = Upstream::start(Reply::Body("arrived\n")).await;
    let hop = Upstream::start(Reply::Redirect(target.url("/there"))).await;
    let only_hop = RunOptions::new(grant(&format!("127.0.0.1:{}", hop.port)));
    let done = run_with(
        guests::WSTD_FETCH,
        only_hop,
        &["--follow", &hop.url("/here")],
    )
    .await;
    assert_ne!(done.code(), 0);
    assert!(
        done.stderr
            .contains(&format!("redirect: {}", target.url("/there")))
            && done
                .stderr
                .contains(&format!("needs --allow-net=127.0.0.1:{}", target.port)),
        "{}",
        done.stderr
    );
    assert_eq!(target.connections(), 0);
    let both = RunOptions::new(grant(&format!(
        "127.0.0.1:{},127.0.0.1:{}",
        hop.port, target.port
    )));
    let done = run_with(
        guests::WSTD_FETCH,
        both.clone(),
        &["--follow", &hop.url("/here")],
    )
    .await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert_eq!(done.stdout, "arrived\n");
    // With one socket: the hop's kept-alive connection, idle, gives way to
    // the target's.
    let one_socket = both.limits(limits(|l| l.max_sockets = Some(1)));
    let done = run_with(
        guests::WSTD_FETCH,
        one_socket,
        &["--follow", &hop.url("/here")],
    )
    .await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert_eq!(done.stdout, "arrived\n");
}

#[tokio::test]
async fn a_connection_is_paid_from_the_runs_host_memory() {
    let up = Upstream::start(Reply::Body("no")).await;
    let options = RunOptions::new(grant(&format!("127.0.0.1:{}", up.port)))
        .limits(limits(|l| l.max_host_memory = Some(100 << 10)));
    let done = run_with(guests::HTTP_PROBE, options, &["fetch", &up.url("/")]).await;
    assert_eq!(done.stdout, "error: ErrorCode::ConnectionLimitReached\n");
    assert!(
        done.stderr.contains("an HTTP connection needs")
            && done.stderr.contains("--max-host-memory"),
        "{}",
        done.stderr
    );
    assert_eq!(up.connections(), 0);
}

#[tokio::test]
async fn https_is_verified_against_the_host_as_written_with_the_runs_roots() {
    let ca = Ca::new("moat http test CA");
    let up = Upstream::start_tls(&ca, "secure.test", Reply::Body("over tls\n")).await;
    let names = Names::new(&[("secure.test", "127.0.0.1"), ("other.test", "127.0.0.1")]);
    let policy = grant("secure.test,other.test");
    let url = format!("https://secure.test:{}/", up.port);
    let trusted = TlsTrust::webpki().with_pem(ca.pem().as_bytes()).unwrap();
    let options = RunOptions::new(policy.clone())
        .resolver(Arc::clone(&names) as Arc<dyn Resolver>)
        .tls_trust(trusted.clone());
    let done = run_with(guests::HTTP_PROBE, options, &["sequential", "3", &url]).await;
    assert_eq!(done.stdout, "ok 3\n", "{}", done.stderr);
    assert_eq!(up.connections(), 1, "one TLS connection, kept alive");
    assert!(
        up.requests().contains(&"sni secure.test".to_owned()),
        "{:?}",
        up.requests()
    );
    // Without the CA: the certificate is not trusted.
    let untrusted =
        RunOptions::new(policy.clone()).resolver(Arc::clone(&names) as Arc<dyn Resolver>);
    let done = run_with(guests::HTTP_PROBE, untrusted, &["fetch", &url]).await;
    assert_eq!(done.stdout, "error: ErrorCode::TlsCertificateError\n");
    // Another name for the same address: the certificate does not name it.
    let options = RunOptions::new(policy)
        .resolver(Arc::clone(&names) as Arc<dyn Resolver>)
        .tls_trust(trusted);
    let other = format!("https://other.test:{}/", up.port);
    let done = run_with(guests::HTTP_PROBE, options, &["fetch", &other]).await;
    assert_eq!(done.stdout, "error: ErrorCode::TlsCertificateError\n");
}

#[tokio::test]
async fn a_wasi_http_0_3_client_is_under_the_same_grants() {
    let up = Upstream::start(Reply::Echo).await;
    let granted = RunOptions::new(grant(&format!("127.0.0.1:{}", up.port)));
    let done = run_with(
        guests::HTTP_P3,
        granted.clone(),
        &["post", &up.url("/"), "300000"],
    )
    .await;
    assert_eq!(
        done.stdout, "sent 300000\nstatus: 200\nreceived 300000\n",
        "{}",
        done.stderr
    );
    let refused = RunOptions::new(grant("127.0.0.1:1"));
    let done = run_with(guests::HTTP_P3, refused, &["fetch", &up.url("/")]).await;
    assert_eq!(done.stdout, "error: ErrorCode::HttpRequestDenied\n");
    assert!(
        done.stderr
            .contains(&format!("needs --allow-net=127.0.0.1:{}", up.port)),
        "{}",
        done.stderr
    );
    assert_eq!(up.connections(), 1);
}

/// A server that closes a kept-alive connection whenever it likes: the
/// next request goes on a new connection (a request already sent is never
/// sent again), and the guest sees no error.
#[tokio::test]
async fn a_kept_alive_connection_the_server_closed_is_replaced() {
    let up = Upstream::start(Reply::ThenClose("fresh\n")).await;
    let names = Names::new(&[]);
    let done = probe(
        grant(&format!("127.0.0.1:{}", up.port)),
        &names,
        &["sequential", "5", &up.url("/")],
    )
    .await;
    assert_eq!(done.stdout, "ok 5\n", "{}", done.stderr);
    assert_eq!(up.connections(), 5);
    assert_eq!(up.requests().len(), 5, "each request sent once");
}

/// Python's own `http.server` as the upstream (a peer this repository did
/// not write): a file fetched by name, byte for byte.
#[tokio::test]
async fn a_file_from_pythons_http_server_arrives_byte_for_byte() {
    if !crate::support::have("python3") {
        return;
    }
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("http-python-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let content: Vec<u8> = (0..1_500_000u32)
        .map(|i| b' ' + (i * 13 % 95) as u8)
        .collect();
    std::fs::write(dir.join("data.txt"), &content).unwrap();
    let port = crate::support::free_port();
    let mut server = tokio::process::Command::new("python3")
        .args([
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "-d",
        ])
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("python3 runs");
    crate::support::eventually("python's server listening", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    })
    .await;
    let names = Names::new(&[("files.test", "127.0.0.1")]);
    let options = RunOptions::new(grant(&format!("files.test:{port}")))
        .resolver(Arc::clone(&names) as Arc<dyn Resolver>);
    let url = format!("http://files.test:{port}/data.txt");
    let done = run_with(guests::WSTD_FETCH, options, &[&url]).await;
    assert_eq!(done.code(), 0, "{}", done.stderr);
    assert!(
        done.stdout.as_bytes() == content,
        "{} bytes of {}",
        done.stdout.len(),
        content.len()
    );
    let _ = server.kill().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An HTTPS server that offers HTTP/2 over ALPN: the guest's requests go
/// over HTTP/2 (the authority as a pseudo-header, no Host header), and a
/// connection is kept for the next request.
#[tokio::test]
async fn an_https_upstream_that_offers_http2_is_spoken_to_over_http2() {
    let ca = Ca::new("moat h2 test CA");
    let (port, connections, requests) = h2_upstream(&ca).await;
    let names = Names::new(&[("h2.test", "127.0.0.1")]);
    let trust = TlsTrust::webpki().with_pem(ca.pem().as_bytes()).unwrap();
    let options = || {
        RunOptions::new(grant("h2.test"))
            .resolver(Arc::clone(&names) as Arc<dyn Resolver>)
            .tls_trust(trust.clone())
    };
    let url = format!("https://h2.test:{port}/multi");
    let opened = || connections.load(Ordering::SeqCst);
    let done = run_with(guests::HTTP_PROBE, options(), &["fetch", &url]).await;
    assert_eq!(done.stdout, "status: 200\nover h2\n", "{}", done.stderr);
    // Four requests one after another: one connection.
    let before = opened();
    let done = run_with(guests::HTTP_PROBE, options(), &["sequential", "4", &url]).await;
    assert_eq!(done.stdout, "ok 4\n", "{}", done.stderr);
    assert_eq!(opened() - before, 1);
    // Six at once from a cold start: each may open its own (no
    // connection is known to speak HTTP/2 yet), all over HTTP/2.
    let before = opened();
    let done = run_with(guests::HTTP_PROBE, options(), &["flood", "6", &url]).await;
    assert_eq!(done.stdout, "ok 6\n", "{}", done.stderr);
    assert!((1..=6).contains(&(opened() - before)));
    let seen = requests.lock().unwrap().clone();
    assert_eq!(seen.len(), 11);
    assert!(
        seen.iter()
            .all(|r| r == &format!("HTTP/2.0 h2.test:{port} /multi")),
        "{seen:?}"
    );
}

type Seen = Arc<Mutex<Vec<String>>>;

/// An HTTPS server for `h2.test` that speaks HTTP/2 only (ALPN `h2`),
/// answering `over h2`; its port, its connection count and what each
/// request was (`HTTP/2.0 AUTHORITY PATH`).
async fn h2_upstream(ca: &Ca) -> (u16, Arc<AtomicUsize>, Seen) {
    h2_upstream_for(ca, &["h2.test"]).await
}

/// As [`h2_upstream`], its certificate naming each of `names`.
async fn h2_upstream_for(ca: &Ca, names: &[&str]) -> (u16, Arc<AtomicUsize>, Seen) {
    use http_body_util::Full;
    use hyper::server::conn::http2;
    use hyper_util::rt::{TokioExecutor, TokioIo};

    let acceptor = ca.leaf(names).acceptor(&["h2"]);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let connections = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let (c, r) = (Arc::clone(&connections), Arc::clone(&requests));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
            let (acceptor, r) = (acceptor.clone(), Arc::clone(&r));
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |req: hyper::Request<_>| {
                    let r = Arc::clone(&r);
                    async move {
                        r.lock().unwrap().push(format!(
                            "{:?} {} {}",
                            req.version(),
                            req.uri()
                                .authority()
                                .map(|a| a.to_string())
                                .unwrap_or_default(),
                            req.uri().path()
                        ));
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                            bytes::Bytes::from_static(b"over h2\n"),
                        )))
                    }
                });
                let _ = http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (port, connections, requests)
}

/// Each request over HTTP/2 pays its stream's send buffer from the run's
/// host memory: with room for the connection and not for a stream, the
/// request is refused and says which bound to raise.
#[tokio::test]
async fn an_http2_request_pays_its_stream_from_the_runs_host_memory() {
    let ca = Ca::new("moat h2 memory CA");
    let (port, _, requests) = h2_upstream(&ca).await;
    let names = Names::new(&[("h2.test", "127.0.0.1")]);
    let trust = TlsTrust::webpki().with_pem(ca.pem().as_bytes()).unwrap();
    let run = |budget: usize| {
        RunOptions::new(grant("h2.test"))
            .resolver(Arc::clone(&names) as Arc<dyn Resolver>)
            .tls_trust(trust.clone())
            .limits(limits(|l| l.max_host_memory = Some(budget)))
    };
    let url = format!("https://h2.test:{port}/");
    // The connection (128 KiB, and 512 KiB for its window) and the TLS
    // configuration fit; a 64 KiB stream does not.
    let done = run_with(guests::HTTP_PROBE, run(690 << 10), &["fetch", &url]).await;
    assert_eq!(
        done.stdout, "error: ErrorCode::ConnectionLimitReached\n",
        "{}",
        done.stderr
    );
    assert!(
        done.stderr.contains("an HTTP/2 request needs 65536 bytes")
            && done.stderr.contains("--max-host-memory"),
        "{}",
        done.stderr
    );
    assert!(requests.lock().unwrap().is_empty());
    let done = run_with(guests::HTTP_PROBE, run(900 << 10), &["fetch", &url]).await;
    assert_eq!(done.stdout, "status: 200\nover h2\n", "{}", done.stderr);
}

/// An upstream whose accept queue is full, so the kernel drops the SYN
/// and the TCP handshake never completes: the request fails with
/// `connection-timeout` at `--http-connect-timeout`, not after the
/// kernel's own minutes of retries.
#[tokio::test]
async fn a_connect_that_never_completes_fails_at_the_connect_timeout() {
    use socket2::{Domain, Socket, Type};
    let listener = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    listener.bind(&any.into()).unwrap();
    listener.listen(0).unwrap();
    let addr = listener.local_addr().unwrap().as_socket().unwrap();
    // Connections nobody accepts, until the queue takes no more: the
    // next connect's SYN goes unanswered.
    let mut queued = Vec::new();
    let full = tokio::task::spawn_blocking(move || {
        for _ in 0..16 {
            match std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                Ok(stream) => queued.push(stream),
                Err(_) => return Some(queued),
            }
        }
        None
    })
    .await
    .unwrap();
    let Some(_queued) = full else {
        panic!("16 connections to a listener with backlog 0 all completed");
    };
    let names = Names::new(&[]);
    let options = RunOptions::new(grant(&addr.to_string()))
        .resolver(Arc::clone(&names) as Arc<dyn Resolver>)
        .limits(limits(|l| l.http_connect_timeout = Duration::from_secs(1)));
    let done = run_with(
        guests::HTTP_PROBE,
        options,
        &["fetch", &format!("http://{addr}/")],
    )
    .await;
    assert_eq!(
        done.stdout, "error: ErrorCode::ConnectionTimeout\n",
        "{}",
        done.stderr
    );
    drop(listener);
}

/// What an upstream saw of a chunked upload.
#[derive(Debug, PartialEq)]
pub(crate) struct Upload {
    pub(crate) bytes: Vec<u8>,
    /// Whether the last chunk (`0\r\n\r\n`) came: the body said it was whole.
    pub(crate) ended: bool,
}

/// An upstream that answers a request's head at once (a streaming
/// response it never finishes) and then reads its chunked body until the
/// last chunk or the connection's end.
pub(crate) async fn upload_sink() -> (u16, tokio::sync::oneshot::Receiver<Upload>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut buf = Vec::new();
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 8192];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => panic!("the request's head never came"),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        assert!(head.contains("transfer-encoding: chunked"), "{head}");
        buf.drain(..head_end);
        stream
            .write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
            .await
            .unwrap();
        // Chunk by chunk; a short read at the end is the connection closing.
        let mut bytes = Vec::new();
        let mut ended = false;
        loop {
            let line = loop {
                if let Some(i) = buf.windows(2).position(|w| w == b"\r\n") {
                    break Some(i);
                }
                let mut chunk = [0u8; 65536];
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => break None,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            };
            let Some(line) = line else { break };
            let size = usize::from_str_radix(std::str::from_utf8(&buf[..line]).unwrap().trim(), 16)
                .unwrap();
            buf.drain(..line + 2);
            let mut closed = false;
            while buf.len() < size + 2 {
                let mut chunk = [0u8; 65536];
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => {
                        closed = true;
                        break;
                    }
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            if closed {
                bytes.extend_from_slice(&buf[..size.min(buf.len())]);
                break;
            }
            bytes.extend_from_slice(&buf[..size]);
            buf.drain(..size + 2);
            if size == 0 {
                ended = true;
                break;
            }
        }
        let _ = tx.send(Upload { bytes, ended });
    });
    (port, rx)
}

#[tokio::test]
async fn an_upload_whose_guest_trapped_is_cut_off_never_ended_as_whole() {
    // wasmtime-wasi-http ends a guest's request body cleanly when the
    // guest's store goes away without finishing it (0.2: `finish` never
    // called; 0.3: the trailers never written); the server would take the
    // first 300,000 bytes for the whole upload.
    for guest in [guests::HTTP_PROBE, guests::HTTP_P3] {
        let (port, seen) = upload_sink().await;
        let url = format!("http://127.0.0.1:{port}/upload");
        let done = run_with(
            guest,
            RunOptions::new(grant(&format!("127.0.0.1:{port}"))),
            &["post-then-trap", &url, "300000"],
        )
        .await;
        assert!(
            matches!(done.exit, Err(moat_host::MoatError::Trap(_))),
            "{guest}: the guest should trap: {:?}\n{}",
            done.exit,
            done.stderr
        );
        assert_eq!(
            done.stdout, "sent 300000\nstatus: 200\n",
            "{guest}: {}",
            done.stderr
        );
        let upload = tokio::time::timeout(Duration::from_secs(60), seen)
            .await
            .expect("the upstream's connection was never closed")
            .unwrap();
        let expected: Vec<u8> = (0..300_000u64).map(|i| b'a' + (i % 26) as u8).collect();
        assert!(
            !upload.ended,
            "{guest}: the cut-off upload was ended as if whole, after {} bytes",
            upload.bytes.len()
        );
        // The run's connections close when it ends, so the server may get
        // less than the guest handed over: but only the guest's bytes, in
        // order.
        assert!(
            expected.starts_with(&upload.bytes),
            "{guest}: {} bytes arrived, not a prefix of the guest's",
            upload.bytes.len()
        );
    }
}

/// A resolver whose answers alternate: the first lookup of a name gets
/// `first`, the next `second`, and so on (a DNS server rebinding the name
/// between two lookups).
struct Rebinding {
    answers: [std::net::IpAddr; 2],
    asked: AtomicUsize,
}

impl Resolver for Rebinding {
    fn lookup<'a>(&'a self, _name: &'a str) -> moat_host::net::Lookup<'a> {
        let turn = self.asked.fetch_add(1, Ordering::SeqCst);
        let answer = self.answers[turn % 2];
        Box::pin(async move { Ok(vec![answer]) })
    }
}

/// A name that resolves to an allowed address for one lookup and to a
/// denied one for the next (DNS rebinding): each connection is judged on
/// the addresses of the one lookup it is made from, so the second
/// connection is refused, and no connection ever reaches the denied
/// address; nothing is looked up twice between a check and a connect.
#[tokio::test]
async fn a_name_rebound_between_requests_never_reaches_a_denied_address() {
    let up = Upstream::start(Reply::ThenClose("first\n")).await;
    let port = up.port;
    // The denied address, on the same port: it must see no connection.
    let denied = TcpListener::bind(("127.0.0.2", port)).await.unwrap();
    let reached = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&reached);
    tokio::spawn(async move {
        while denied.accept().await.is_ok() {
            counted.fetch_add(1, Ordering::SeqCst);
        }
    });
    let resolver = Arc::new(Rebinding {
        answers: ["127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap()],
        asked: AtomicUsize::new(0),
    });
    let policy = grant(&format!("rebind.test:{port}"))
        .deny_connect("127.0.0.2")
        .unwrap();
    let url = format!("http://rebind.test:{port}/");
    let done = run_with(
        guests::HTTP_PROBE,
        RunOptions::new(policy).resolver(Arc::clone(&resolver) as Arc<dyn Resolver>),
        &["fetch-all", &url, &url],
    )
    .await;
    assert_eq!(
        done.stdout,
        format!("{url}: status: 200\n{url}: error: ErrorCode::DestinationIpProhibited\n"),
        "{}",
        done.stderr
    );
    assert_eq!(up.connections(), 1);
    assert_eq!(
        reached.load(Ordering::SeqCst),
        0,
        "a connection reached the denied address"
    );
    assert_eq!(
        resolver.asked.load(Ordering::SeqCst),
        2,
        "one lookup per connection"
    );
}

/// HTTP/2 connections are not shared across hosts (no coalescing): two
/// names of one server, with one certificate for both and one address,
/// are two destinations, each judged and each with a connection of its
/// own; a request to the one not granted is refused even while a
/// connection to the granted one is open.
#[tokio::test]
async fn an_http2_connection_is_not_shared_with_another_host_of_the_same_server() {
    let ca = Ca::new("moat coalescing CA");
    let (port, connections, requests) = h2_upstream_for(&ca, &["a.test", "b.test"]).await;
    let names = Names::new(&[("a.test", "127.0.0.1"), ("b.test", "127.0.0.1")]);
    let trust = TlsTrust::webpki().with_pem(ca.pem().as_bytes()).unwrap();
    let run = |grants: &str| {
        RunOptions::new(grant(grants))
            .resolver(Arc::clone(&names) as Arc<dyn Resolver>)
            .tls_trust(trust.clone())
    };
    let (a, b) = (
        format!("https://a.test:{port}/"),
        format!("https://b.test:{port}/"),
    );
    let done = run_with(
        guests::HTTP_PROBE,
        run("a.test"),
        &["fetch-all", &a, &b, &a],
    )
    .await;
    assert_eq!(
        done.stdout,
        format!("{a}: status: 200\n{b}: error: ErrorCode::HttpRequestDenied\n{a}: status: 200\n"),
        "{}",
        done.stderr
    );
    assert_eq!(connections.load(Ordering::SeqCst), 1);
    let done = run_with(
        guests::HTTP_PROBE,
        run("a.test,b.test"),
        &["fetch-all", &a, &b],
    )
    .await;
    assert_eq!(
        done.stdout,
        format!("{a}: status: 200\n{b}: status: 200\n"),
        "{}",
        done.stderr
    );
    assert_eq!(connections.load(Ordering::SeqCst), 3, "a connection each");
    let seen = requests.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            format!("HTTP/2.0 a.test:{port} /"),
            format!("HTTP/2.0 a.test:{port} /"),
            format!("HTTP/2.0 a.test:{port} /"),
            format!("HTTP/2.0 b.test:{port} /"),
        ]
    );
}
