//! The steps before the network, as a specification: what is judged, in
//! what order, and what each refusal says.

use std::sync::Arc;
use std::time::Duration;

use http::Uri;

use super::*;
use crate::net::limits::Limits;
use crate::net::tasks::{PendingWrites, Tasks};
use crate::policy::Policy;

fn client(policy: Policy, limits: Limits) -> HttpClient {
    let run = Arc::new(Run::new(policy, limits, None));
    HttpClient::new(run, Arc::default(), Tasks::new(PendingWrites::new()))
}

fn granted(entries: &str) -> HttpClient {
    client(
        Policy::new().allow_connect(entries).unwrap(),
        Limits::default(),
    )
}

fn admit(client: &HttpClient, uri: &str) -> Result<Target, HttpError> {
    let uri: Uri = uri.parse().unwrap();
    client.admit(&uri).map(|(target, _permit)| target)
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
    let e = c.admit(&Uri::from_static("/relative")).err().unwrap();
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
        Policy::new().allow_connect("*").unwrap(),
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
    assert!(c.admit(&Uri::from_static("/relative")).is_err());
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
        Policy::new().allow_connect("*").unwrap(),
        Limits {
            max_http_requests: 2,
            ..Limits::default()
        },
    );
    let uri: Uri = "http://example.com/".parse().unwrap();
    let a = c.admit(&uri).unwrap();
    let _b = c.admit(&uri).unwrap();
    let refused = c.admit(&uri).err().unwrap();
    assert!(
        refused
            .to_string()
            .contains("raise it with --max-http-requests"),
        "{refused}"
    );
    drop(a);
    assert!(c.admit(&uri).is_ok());
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
