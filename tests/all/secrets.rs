//! Secrets bound to destinations (`--secret`), through the real `moat`:
//! an HTTPS upstream of the test's own (its own CA, `--ca-file`) records
//! every request it receives and echoes the `Authorization` header back
//! in a header and in its body. The guests are the raw wasi:http 0.2
//! client (http-probe) and the 0.3 one (http-p3); `moat serve` is in
//! `serve/secrets.rs`.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use tokio::net::TcpListener;

use crate::support::certs::Ca;
use crate::support::{self, guests};

const MOAT: &str = env!("CARGO_BIN_EXE_moat");

/// The secret's value: what no guest, record, log line or error may
/// hold.
pub(crate) const VALUE: &str = "sk-live-7Hq2mZ9xR4tW8vB1nK6p";

/// One request as the upstream received it.
#[derive(Clone, Debug)]
pub(crate) struct Received {
    pub(crate) path: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
    /// Whether its body came whole (not cut off).
    pub(crate) complete: bool,
}

impl Received {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Everything it carried, as text.
    fn text(&self) -> String {
        format!(
            "{} {:?} {}",
            self.path,
            self.headers,
            String::from_utf8_lossy(&self.body)
        )
    }
}

/// An HTTPS (or plain) server on 127.0.0.1 that records what it receives
/// and answers 200 with `x-echo: <authorization>` and body `got
/// <authorization>`; a request whose query is `to=URL`, 302 to URL.
pub(crate) struct Recorder {
    pub(crate) port: u16,
    received: Arc<Mutex<Vec<Received>>>,
    /// Connections accepted (a refused request opens none).
    connections: Arc<Mutex<usize>>,
}

impl Recorder {
    /// An HTTPS recorder for `localhost` under `ca`.
    pub(crate) async fn https(ca: &Ca) -> Recorder {
        Recorder::start(Some(ca.leaf(&["localhost"]).acceptor(&["http/1.1"]))).await
    }

    /// A plain HTTP recorder.
    pub(crate) async fn plain() -> Recorder {
        Recorder::start(None).await
    }

    async fn start(tls: Option<tokio_rustls::TlsAcceptor>) -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(Mutex::new(0));
        let (seen, count) = (Arc::clone(&received), Arc::clone(&connections));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                *count.lock().unwrap() += 1;
                let (seen, tls) = (Arc::clone(&seen), tls.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        record(request, Arc::clone(&seen))
                    });
                    let http = hyper::server::conn::http1::Builder::new();
                    match tls {
                        Some(tls) => {
                            if let Ok(stream) = tls.accept(stream).await {
                                let io = hyper_util::rt::TokioIo::new(stream);
                                let _ = http.serve_connection(io, service).await;
                            }
                        }
                        None => {
                            let io = hyper_util::rt::TokioIo::new(stream);
                            let _ = http.serve_connection(io, service).await;
                        }
                    }
                });
            }
        });
        Recorder {
            port,
            received,
            connections,
        }
    }

    pub(crate) fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    pub(crate) fn connections(&self) -> usize {
        *self.connections.lock().unwrap()
    }
}

async fn record(
    request: hyper::Request<hyper::body::Incoming>,
    seen: Arc<Mutex<Vec<Received>>>,
) -> Result<hyper::Response<Full<Bytes>>, std::convert::Infallible> {
    let (head, body) = request.into_parts();
    let headers: Vec<(String, String)> = head
        .headers
        .iter()
        .map(|(n, v)| {
            (
                n.to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let (body, complete) = match body.collect().await {
        Ok(all) => (all.to_bytes().to_vec(), true),
        Err(_) => (Vec::new(), false),
    };
    let auth = headers
        .iter()
        .find(|(n, _)| n == "authorization")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    seen.lock().unwrap().push(Received {
        path: head
            .uri
            .path_and_query()
            .map(ToString::to_string)
            .unwrap_or_default(),
        headers,
        body,
        complete,
    });
    // `?to=URL` on a path: a redirect there, as an API may answer.
    if let Some(to) = head.uri.query().and_then(|q| q.strip_prefix("to=")) {
        let mut response = hyper::Response::new(Full::new(Bytes::new()));
        *response.status_mut() = hyper::StatusCode::FOUND;
        if let Ok(location) = hyper::header::HeaderValue::from_str(to) {
            response.headers_mut().insert("location", location);
        }
        return Ok(response);
    }
    let mut response = hyper::Response::new(Full::new(Bytes::from(format!("got {auth}"))));
    if let Ok(value) = hyper::header::HeaderValue::from_str(&auth) {
        response.headers_mut().insert("x-echo", value);
    }
    Ok(response)
}

/// A directory of the test's own, with the CA's certificate in it.
pub(crate) fn dir_with_ca(test: &str, ca: &Ca) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("secrets-{test}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    dir
}

/// `--secret` binding API_KEY to `https://localhost:PORT/v1/` in
/// `Authorization: Bearer {}`, its value from `from`.
pub(crate) fn binding(port: u16, from: &str) -> String {
    format!(
        "--secret=API_KEY;from={from};to=https://localhost:{port}/v1/;header=authorization;\
         form=Bearer {{}}"
    )
}

/// The value's bytes XORed with 0x55, in hex: what a guest scans its
/// memory for without holding the value.
pub(crate) fn value_xored() -> String {
    VALUE.bytes().map(|b| format!("{:02x}", b ^ 0x55)).collect()
}

/// `moat run` of `guest` with `flags` and `args`, the value in the
/// environment as `MOAT_TEST_SECRET`, logging everything (`RUST_LOG=trace`:
/// no log line may hold the value either).
fn run(dir: &Path, guest: &str, flags: &[String], args: &[&str]) -> Output {
    std::process::Command::new(MOAT)
        .arg("run")
        .arg(support::cache_flag())
        .arg(format!("--ca-file={}", dir.join("ca.pem").display()))
        .arg(format!("--audit={}", dir.join("trail.jsonl").display()))
        .args(flags)
        .arg(guest)
        .args(args)
        .env("MOAT_TEST_SECRET", VALUE)
        .env("RUST_LOG", "trace")
        .output()
        .expect("moat runs")
}

/// Neither the guest's output, moat's log, nor the trail holds the value.
fn nowhere_but_upstream(dir: &Path, out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stdout.contains(VALUE),
        "the guest saw the value:\n{stdout}"
    );
    assert!(
        !stderr.contains(VALUE),
        "a log line holds the value:\n{stderr}"
    );
    let trail = std::fs::read_to_string(dir.join("trail.jsonl")).unwrap_or_default();
    assert!(
        !trail.contains(VALUE),
        "the trail holds the value:\n{trail}"
    );
}

/// The placeholder the guest was given: what the upstream echoed back,
/// as the guest saw it.
fn placeholder_seen(stdout: &str) -> &str {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("header: x-echo: Bearer "))
        .unwrap_or_else(|| panic!("no echo in:\n{stdout}"))
}

async fn the_value_arrives_where_bound(guest: &str, test: &str) {
    let ca = Ca::new("moat secrets CA");
    let dir = dir_with_ca(test, &ca);
    let api = Recorder::https(&ca).await;
    let flags = [
        format!("--allow-net=localhost:{}", api.port),
        binding(api.port, "env:MOAT_TEST_SECRET"),
    ];
    let url = format!("https://localhost:{}/v1/chat", api.port);
    let scan = format!("scan:{}", value_xored());
    let out = tokio::task::spawn_blocking({
        let dir = dir.clone();
        let guest = guest.to_owned();
        move || {
            run(
                &dir,
                &guest,
                &flags,
                &[
                    "send",
                    "GET",
                    &url,
                    "h:authorization=Bearer ${API_KEY}",
                    &scan,
                ],
            )
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        stdout.contains("status: 200"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let received = api.received();
    assert_eq!(received.len(), 1, "{received:?}");
    assert_eq!(received[0].path, "/v1/chat");
    assert_eq!(
        received[0].header("authorization"),
        Some(format!("Bearer {VALUE}").as_str()),
        "the value arrived in the bound header"
    );
    // The server echoed the value back; the guest got its placeholder,
    // in the header and in the body, and holds the value nowhere in its
    // memory.
    assert!(stdout.contains("in memory: no"), "{stdout}");
    let placeholder = placeholder_seen(&stdout);
    assert_eq!(placeholder.len(), VALUE.len());
    assert!(placeholder.starts_with("moat"), "{placeholder}");
    assert!(
        stdout.contains(&format!("body: got Bearer {placeholder}")),
        "{stdout}"
    );
    nowhere_but_upstream(&dir, &out);
}

#[tokio::test]
async fn the_value_arrives_where_bound_and_the_p2_guest_sees_its_placeholder() {
    the_value_arrives_where_bound(guests::HTTP_PROBE, "bound-p2").await;
}

#[tokio::test]
async fn the_value_arrives_where_bound_and_the_p3_guest_sees_its_placeholder() {
    the_value_arrives_where_bound(guests::HTTP_P3, "bound-p3").await;
}

/// Each place the placeholder may not go: the request is refused before
/// anything is sent (for the body: before the bytes that hold it), the
/// trail names the secret and the place, and the value is nowhere.
async fn a_placeholder_elsewhere_is_refused(guest: &str, test: &str) {
    let ca = Ca::new("moat secrets CA");
    let dir = dir_with_ca(test, &ca);
    let api = Recorder::https(&ca).await;
    // A second granted host: the OpenShell 2353 case (provider A's key
    // sent to provider B); a redirect's next hop is such a request too,
    // since wasi:http follows none.
    let other = Recorder::https(&ca).await;
    let plain = Recorder::plain().await;
    let flags = [
        format!(
            "--allow-net=localhost:{},localhost:{},localhost:{}",
            api.port, other.port, plain.port
        ),
        binding(api.port, "env:MOAT_TEST_SECRET"),
    ];
    let bearer = "h:authorization=Bearer ${API_KEY}";
    let a = |path: &str| format!("https://localhost:{}{path}", api.port);
    let cases: Vec<(&str, Vec<String>, &Recorder, &str)> = vec![
        (
            "another host",
            vec![
                "GET".into(),
                format!("https://localhost:{}/v1/", other.port),
                bearer.into(),
            ],
            &other,
            "a request to another destination",
        ),
        (
            "plain http",
            vec![
                "GET".into(),
                format!("http://localhost:{}/v1/", plain.port),
                bearer.into(),
            ],
            &plain,
            "a request to another destination",
        ),
        (
            "a path outside the prefix",
            vec!["GET".into(), a("/v2/"), bearer.into()],
            &api,
            "a request to another destination",
        ),
        (
            "a dot segment out of the prefix",
            vec!["GET".into(), a("/v1/%2e%2e/admin"), bearer.into()],
            &api,
            "a request to another destination",
        ),
        (
            "another header",
            vec!["GET".into(), a("/v1/"), "h:x-api-key=${API_KEY}".into()],
            &api,
            "the header x-api-key",
        ),
        (
            "another form",
            vec![
                "GET".into(),
                a("/v1/"),
                "h:authorization=Basic ${API_KEY}".into(),
            ],
            &api,
            "the bound header, not in the bound form",
        ),
        (
            "a redirect's next hop",
            vec![
                "GET".into(),
                a(&format!(
                    "/v1/moved?to=https://localhost:{}/v1/",
                    other.port
                )),
                bearer.into(),
                "follow".into(),
            ],
            &other,
            "a request to another destination",
        ),
        (
            "the path",
            vec!["GET".into(), a("/v1/${API_KEY}")],
            &api,
            "the path or query",
        ),
        (
            "the query",
            vec!["GET".into(), a("/v1/?key=${API_KEY}")],
            &api,
            "the path or query",
        ),
    ];
    for (case, args, target, place) in cases {
        let before = target.received().len();
        let mut argv: Vec<String> = vec!["send".into()];
        argv.extend(args);
        let out = tokio::task::spawn_blocking({
            let (dir, guest, flags) = (dir.clone(), guest.to_owned(), flags.clone());
            move || {
                let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
                run(&dir, &guest, &flags, &argv)
            }
        })
        .await
        .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stdout.contains("error: ErrorCode::HttpRequestDenied"),
            "{case}: {stdout}{stderr}"
        );
        assert!(
            stderr.contains(&format!("secret API_KEY may not go in {place}")),
            "{case}: the notice names the secret and the place:\n{stderr}"
        );
        assert_eq!(
            target.received().len(),
            before,
            "{case}: the host received a request"
        );
        nowhere_but_upstream(&dir, &out);
    }
    assert_eq!(
        (other.connections(), plain.connections()),
        (0, 0),
        "no connection was even opened to the hosts the secret may not go to"
    );
    // The body: the head went (it was clean), the bytes holding the
    // placeholder never did, and the request was cut off.
    let out = tokio::task::spawn_blocking({
        let (dir, guest, flags) = (dir.clone(), guest.to_owned(), flags.clone());
        let url = a("/v1/upload");
        move || {
            run(
                &dir,
                &guest,
                &flags,
                &["send", "POST", &url, "body:key is ${API_KEY} here"],
            )
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !stdout.contains("status: 200"),
        "the body's request did not complete:\n{stdout}"
    );
    let uploads: Vec<_> = api
        .received()
        .into_iter()
        .filter(|r| r.path == "/v1/upload")
        .collect();
    assert!(
        uploads.iter().all(|r| !r.complete),
        "no whole request with the placeholder arrived: {uploads:?}"
    );
    let placeholder_bytes = api.received().iter().any(|r| r.text().contains("moat"));
    assert!(!placeholder_bytes, "{:?}", api.received());
    nowhere_but_upstream(&dir, &out);
    // Every refusal is on the trail, naming the secret, never its value.
    let trail = std::fs::read_to_string(dir.join("trail.jsonl")).unwrap();
    let refusals = trail
        .lines()
        .filter(|l| l.contains(r#""kind":"secret""#) && l.contains(r#""secret":"API_KEY""#))
        .count();
    // Nine heads and the body, one run each.
    let secret_lines: Vec<&str> = trail
        .lines()
        .filter(|l| l.contains(r#""kind":"secret""#))
        .collect();
    assert_eq!(
        refusals,
        10,
        "secret refusals on the trail:\n{}",
        secret_lines.join("\n")
    );
    assert!(
        trail.contains(r#""place":"the body""#),
        "the body's refusal is recorded too:\n{trail}"
    );
}

#[tokio::test]
async fn a_placeholder_anywhere_else_is_refused_for_a_p2_guest() {
    a_placeholder_elsewhere_is_refused(guests::HTTP_PROBE, "elsewhere-p2").await;
}

#[tokio::test]
async fn a_placeholder_anywhere_else_is_refused_for_a_p3_guest() {
    a_placeholder_elsewhere_is_refused(guests::HTTP_P3, "elsewhere-p3").await;
}

/// Bad bindings and values fail the run before the guest starts, naming
/// the flag; the value itself is never printed.
#[test]
fn a_bad_binding_or_value_stops_the_run_with_its_reason() {
    let ca = Ca::new("moat secrets CA");
    let dir = dir_with_ca("bad", &ca);
    for (flag, env, expected) in [
        (
            "--secret=API_KEY;from=env:MOAT_TEST_SECRET;to=http://localhost/;header=authorization",
            VALUE,
            "to= must be an https:// URL",
        ),
        (
            "--secret=API_KEY;from=env:MOAT_TEST_UNSET;to=https://localhost/;header=authorization",
            VALUE,
            "the variable MOAT_TEST_UNSET is not set",
        ),
        (
            "--secret=API_KEY;from=env:MOAT_TEST_SECRET;to=https://localhost/;header=authorization",
            "short",
            "5 bytes long; a secret takes at least 16",
        ),
        (
            "--secret=API_KEY;from=env:MOAT_TEST_SECRET;to=https://localhost/;header=host",
            VALUE,
            "header= must be a header's name other than host",
        ),
    ] {
        let out = std::process::Command::new(MOAT)
            .args([
                "run",
                &support::cache_flag(),
                flag,
                guests::HTTP_PROBE,
                "fetch",
                "https://localhost/",
            ])
            .env("MOAT_TEST_SECRET", env)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {stderr}");
        assert!(stderr.contains(expected), "{flag}: {stderr}");
        assert!(!stderr.contains(VALUE), "{flag}: {stderr}");
    }
    // A secret's file is kept from every directory the guest gets, as a
    // TLS key is: read-only or not.
    let file = dir.join("key");
    std::fs::write(&file, VALUE).unwrap();
    let flag = format!(
        "--secret=API_KEY;from=file:{};to=https://localhost/;header=authorization",
        file.display()
    );
    let out = std::process::Command::new(MOAT)
        .args(["run", &support::cache_flag(), &flag])
        .arg(format!("--dir={}::/data:ro", dir.display()))
        .args([guests::HTTP_PROBE, "fetch", "https://localhost/"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("a secret's file"), "{stderr}");
}
