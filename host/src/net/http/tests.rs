//! The steps before the network, as a specification: what is judged, in
//! what order, and what each refusal says.

use moat_policy::setting::Spelling;
use std::sync::Arc;
use std::time::Duration;

use http::Uri;

use super::*;
use crate::net::limits::Limits;
use crate::net::tasks::{PendingWrites, Tasks};
use moat_policy::policy::Policy;

/// A request head for `uri`, as `send` gives `admit`.
fn head(uri: &Uri) -> http::request::Parts {
    let mut parts = http::Request::new(()).into_parts().0;
    parts.uri = uri.clone();
    parts
}

fn client(policy: Policy, limits: Limits) -> HttpClient {
    let run = Arc::new(Run::new(policy, limits, None));
    HttpClient::new(run, Arc::default(), Tasks::new(PendingWrites::new()))
}

fn granted(entries: &str) -> HttpClient {
    client(
        Policy::new()
            .spelled(Spelling::Flags)
            .allow_connect(entries)
            .unwrap(),
        Limits::default(),
    )
}

/// The audit trail's tie to a request (these runs keep no trail).
fn link() -> HttpLink {
    let (parts, ()) = Request::new(()).into_parts();
    HttpLink {
        request: Arc::new(exchange::request_of(&parts, 1)),
        connection: None,
    }
}

fn admit(client: &HttpClient, uri: &str) -> Result<Target, HttpError> {
    let uri: Uri = uri.parse().unwrap();
    client
        .admit(&mut head(&uri), Some(&link()))
        .map(|(target, _permit)| target)
}

#[test]
fn the_port_is_the_uris_or_the_schemes() {
    let c = granted("example.com:80,example.com:443,example.com:8443");
    assert_eq!(admit(&c, "http://example.com/").unwrap().port, 80);
    assert_eq!(admit(&c, "https://example.com/").unwrap().port, 443);
    let t = admit(&c, "https://example.com:8443/x").unwrap();
    assert_eq!((t.port, t.https), (8443, true));
    assert!(matches!(
        admit(&c, "http://example.com:8080/"),
        Err(HttpError::Denied(_))
    ));
}

#[test]
fn the_authority_is_judged_as_written() {
    let c = granted("127.0.0.1:80,[::1]:80");
    // IPv6 literals keep their brackets in the URI, not in the host.
    assert!(admit(&c, "http://[::1]/").is_ok());
    // The IPv4 address an IPv6 form carries is that address.
    assert!(admit(&c, "http://[::ffff:127.0.0.1]/").is_ok());
    // Spellings that are not canonical are refused, not guessed at.
    for odd in ["http://127.1/", "http://0x7f.0.0.1/", "http://2130706433/"] {
        match admit(&c, odd) {
            Err(HttpError::BadAuthority { authority, .. }) => {
                assert!(odd.contains(&authority), "{odd}: {authority}");
            }
            other => panic!("{odd}: {:?}", other.map(|t| t.host)),
        }
    }
    // User information would reach the server in the Host header, naming
    // a host nobody judged: refused, whatever it says.
    for userinfo in [
        "http://evil.example@127.0.0.1/",
        "http://u:p@127.0.0.1/",
        "http://@127.0.0.1/",
    ] {
        match admit(&c, userinfo) {
            Err(HttpError::BadAuthority { reason, .. }) => {
                assert!(reason.contains("user information"), "{userinfo}: {reason}");
            }
            other => panic!("{userinfo}: {:?}", other.map(|t| t.host)),
        }
    }
    // A name is never its address.
    assert!(matches!(
        admit(&c, "http://localhost/"),
        Err(HttpError::Denied(_))
    ));
}

#[test]
fn a_request_without_a_host_or_with_another_scheme_is_refused() {
    let c = granted("*");
    let e = c
        .admit(&mut head(&Uri::from_static("/relative")), Some(&link()))
        .err()
        .unwrap();
    assert!(matches!(e, HttpError::NoAuthority("no")), "{e}");
    assert!(e.to_string().contains("never the Host header"));
    assert!(matches!(
        admit(&c, "ftp://example.com/"),
        Err(HttpError::Scheme(s)) if s == "ftp"
    ));
    assert!(matches!(
        admit(&c, "http://example.com:0/"),
        Err(HttpError::BadAuthority { .. })
    ));
}

#[test]
fn a_request_refused_before_its_host_is_judged_is_on_the_trail_as_written() {
    use crate::audit::{Audit, AuditRecord, AuditSink, Body, Context};
    use std::sync::Mutex;
    #[derive(Clone, Default)]
    struct Kept(Arc<Mutex<Vec<AuditRecord>>>);
    impl AuditSink for Kept {
        fn write(&mut self, record: &AuditRecord) -> std::io::Result<()> {
            self.0.lock().unwrap().push(record.clone());
            Ok(())
        }
    }
    let kept = Kept::default();
    let audit = Audit::start(Box::new(kept.clone()), Context::new(None), Vec::new()).unwrap();
    let mut run = Run::new(
        Policy::new()
            .spelled(Spelling::Flags)
            .allow_connect("*")
            .unwrap(),
        Limits::default(),
        None,
    );
    run.audit = audit.clone();
    let c = HttpClient::new(
        Arc::new(run),
        Arc::default(),
        Tasks::new(PendingWrites::new()),
    );
    let refused = [
        "http://127.1/",
        "http://2130706433/",
        "http://example.com:0/",
        "ftp://example.com/",
        "http://u@example.com/",
    ];
    for uri in refused {
        assert!(admit(&c, uri).is_err(), "{uri}");
    }
    assert!(
        c.admit(&mut head(&Uri::from_static("/relative")), Some(&link()))
            .is_err()
    );
    assert!(c.check_authority(Some("")).is_err());
    audit.finish();
    let written: Vec<String> = kept
        .0
        .lock()
        .unwrap()
        .iter()
        .filter_map(|record| match &record.body {
            Body::Decision(event) if !event.allowed() => event.written.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(
        written,
        [
            "127.1",
            "2130706433",
            "example.com:0",
            "example.com",
            "u@example.com",
            "",
            ""
        ]
    );
}

#[test]
fn requests_in_flight_are_counted_until_their_permit_is_dropped() {
    let c = client(
        Policy::new()
            .spelled(Spelling::Flags)
            .allow_connect("*")
            .unwrap(),
        Limits {
            max_http_requests: 2,
            ..Limits::default()
        },
    );
    let uri: Uri = "http://example.com/".parse().unwrap();
    let a = c.admit(&mut head(&uri), Some(&link())).unwrap();
    let _b = c.admit(&mut head(&uri), Some(&link())).unwrap();
    let refused = c.admit(&mut head(&uri), Some(&link())).err().unwrap();
    assert!(
        refused
            .worded(Spelling::Flags)
            .to_string()
            .contains("raise it with --max-http-requests"),
        "{refused}"
    );
    assert!(
        matches!(&refused, HttpError::LimitReached(limit)
            if limit.setting == Some(Setting::MaxHttpRequests)),
        "the refusal carries its setting, typed: {refused:?}"
    );
    drop(a);
    assert!(c.admit(&mut head(&uri), Some(&link())).is_ok());
}

#[test]
fn a_guest_gets_the_shorter_of_its_time_and_the_runs() {
    let cap = Duration::from_secs(30);
    assert_eq!(capped(None, cap), cap);
    assert_eq!(
        capped(Some(Duration::from_secs(1)), cap),
        Duration::from_secs(1)
    );
    assert_eq!(capped(Some(Duration::from_secs(3600)), cap), cap);
}

#[test]
fn the_request_line_carries_the_path_only() {
    let origin = |u: &str| origin_form(&u.parse().unwrap()).to_string();
    assert_eq!(origin("http://example.com/a/b?c=d"), "/a/b?c=d");
    assert_eq!(origin("http://example.com"), "/");
}

/// An HTTP/1.1 server on loopback that answers every request `ok` on a
/// kept-alive connection, and counts the connections it accepted.
async fn counting_server() -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    head.extend_from_slice(&buf[..n]);
                    while let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                        head.drain(..end + 4);
                        let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                        if stream.write_all(reply).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (port, accepted)
}

/// One GET of `uri`, its body read to the end (so that its connection
/// goes back to the pool).
async fn get(client: &HttpClient, uri: &str) -> Result<(), HttpError> {
    let body = http_body_util::Empty::<Bytes>::new()
        .map_err(|never| match never {})
        .boxed_unsync();
    let request = Request::get(uri).body(body).unwrap();
    let response = client.send(request, HttpRequestOptions::default()).await?;
    response.into_body().collect().await.map(|_| ())
}

/// A new connection that the run's host memory refuses does not close a
/// kept-alive one: only a refusal at the socket cap gives way to idle
/// connections. (Any limit did before: a host-memory refusal cost the pool
/// its idle connections, and the next request a new connection.)
#[tokio::test]
async fn only_the_socket_cap_closes_idle_connections_for_a_new_one() {
    use std::sync::atomic::Ordering;
    let (port, accepted) = counting_server().await;
    let policy = || {
        Policy::new()
            .spelled(Spelling::Flags)
            .allow_connect("*")
            .unwrap()
    };
    let local = format!("http://127.0.0.1:{port}/");
    // What one idle kept-alive connection holds, measured unbounded.
    let probe = client(policy(), Limits::default());
    get(&probe, &local).await.unwrap();
    let idle = probe.inner.run.budget.used();
    assert!(idle > 0, "a kept-alive connection is paid for");
    // Room for a second connection, not for its name's lookup answer.
    let header = Limits::default().max_http_header_size;
    let c = client(
        policy(),
        Limits {
            max_host_memory: Some(idle + CONNECTION_BYTES + header + 64),
            ..Limits::default()
        },
    );
    get(&c, &local).await.unwrap();
    assert_eq!(accepted.load(Ordering::SeqCst), 2, "one connection each");
    let refused = get(&c, &format!("http://localhost:{port}/"))
        .await
        .expect_err("the lookup's answer is past the budget");
    assert!(
        matches!(&refused, HttpError::LimitReached(limit)
            if limit.setting == Some(Setting::MaxHostMemory)),
        "{refused}"
    );
    // The kept-alive connection is still there for the next request.
    get(&c, &local).await.unwrap();
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        2,
        "the idle connection was kept"
    );
}
