//! `moat serve`: `moat serve --audit`: the trail of a server.

use super::*;

/// `moat serve --audit`: the operator's grant (`--addr`) is the trail's
/// `serve-bind`, with the address bound, the settings record gives the
/// per-request timeout that applies (1m, not `moat run`'s none), and the
/// trail is complete when SIGTERM's stop ends the process.
#[tokio::test]
async fn serve_records_its_own_address_on_the_audit_trail() {
    let trail = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("audit-serve.jsonl");
    let _ = std::fs::remove_file(&trail);
    let audit = format!("--audit={}", trail.display());
    let mut server = Serve::start(guests::WSTD_SERVE, &[&audit]).await;
    server.terminate();
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
    let settings: serde_json::Value = text
        .lines()
        .find(|l| l.contains(r#""kind":"settings""#))
        .and_then(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| panic!("no settings record on the trail:\n{text}"));
    let timeout = settings["settings"]
        .as_array()
        .and_then(|all| all.iter().find(|s| s["setting"] == "timeout"))
        .unwrap_or_else(|| panic!("no timeout among {settings}"));
    assert_eq!(timeout["value"], "1m", "{settings}");
}

/// `moat serve --help` gives one default for `--timeout`, the one that
/// applies to each request.
#[test]
fn serve_help_gives_the_timeout_that_applies() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_moat"))
        .args(["serve", "--help"])
        .output()
        .expect("moat serve --help runs");
    let help = String::from_utf8_lossy(&out.stdout);
    let flag = help
        .split("--timeout <DURATION>")
        .nth(1)
        .and_then(|after| after.lines().nth(1))
        .unwrap_or_else(|| panic!("no --timeout in:\n{help}"));
    assert!(
        flag.contains("request") && flag.ends_with("[default: 1m]"),
        "{flag}"
    );
}

/// `--addr` given twice: both addresses answer, each is on the trail as
/// its own `serve-bind`, and stderr says where it serves, a line each.
#[tokio::test]
async fn serve_listens_on_every_addr_given_and_records_each() {
    let trail = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("audit-serve-two.jsonl");
    let _ = std::fs::remove_file(&trail);
    let audit = format!("--audit={}", trail.display());
    let mut server = Serve::start(guests::WSTD_SERVE, &["--addr=[::1]:0", &audit]).await;
    server.wait_for_stderr("moat: serving http://[::1]:").await;
    // The line may still be on its way: its end is "/" and a newline.
    let second = |text: &str| -> Option<SocketAddr> {
        text.split_once("moat: serving http://[")
            .and_then(|(_, rest)| rest.split_once("/\n"))
            .and_then(|(addr, _)| format!("[{addr}").parse().ok())
    };
    support::eventually("the second address's whole line", || {
        second(&server.stderr()).is_some()
    })
    .await;
    let second = second(&server.stderr()).expect("the second address");
    for addr in [server.addr, second] {
        let answer = get(addr, "/").await;
        assert_eq!(
            (answer.status, answer.text().as_str()),
            (200, "hello from a wasi:http handler\n"),
            "{addr}"
        );
    }
    server.terminate();
    assert_eq!(server.exited().await.code(), Some(0));
    let text = std::fs::read_to_string(&trail).expect("the trail");
    let binds: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| l.contains(r#""operation":"serve-bind""#))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seen: Vec<(String, String)> = binds
        .iter()
        .map(|b| {
            (
                b["rule"]["entry"].as_str().unwrap().to_owned(),
                b["address"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("127.0.0.1:0".to_owned(), server.addr.to_string()),
            ("[::1]:0".to_owned(), second.to_string()),
        ]
    );
}

/// A second `--addr` that cannot be listened on stops the start before
/// anything is served, naming it.
#[tokio::test]
async fn serve_refuses_a_second_addr_it_cannot_listen_on() {
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = holder.local_addr().unwrap();
    let (code, stderr) = serve_refused(&[
        "--addr=127.0.0.1:0",
        &format!("--addr={taken}"),
        guests::WSTD_SERVE,
    ])
    .await;
    assert_eq!(code, Some(126), "it cannot start: {stderr}");
    assert!(
        stderr.contains(&format!("cannot listen on {taken}")),
        "{stderr}"
    );
    assert!(!stderr.contains(SERVING), "{stderr}");
}

/// Round four's finding 4: one request no longer decides for the whole
/// server. A handler request that makes 2,000 refused requests, each a
/// first of its kind with a record of its own, takes its share of the
/// trail (--max-audit-per-request) and no more: one `request-share-full`
/// record says so, and the next request's records are all there (before,
/// the first request filled the whole trail, and every later operation of
/// the server was refused).
#[tokio::test]
async fn one_request_takes_its_share_of_the_trail_and_the_server_goes_on() {
    let trail = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("audit-serve-share.jsonl");
    let _ = std::fs::remove_file(&trail);
    let audit = format!("--audit={}", trail.display());
    let mut server = Serve::start(
        guests::HTTP_HOSTILE,
        &[
            &audit,
            "--max-audit-size=1MiB",
            "--max-audit-per-request=64KiB",
            // The request's own share is the subject: not its client's.
            "--max-audit-rate-per-client=none",
        ],
    )
    .await;
    let flood = get(server.addr, "/deny-flood?n=2000&len=200").await;
    assert_eq!(flood.text(), "denied 2000\n", "refused all the same");
    let next = get(server.addr, "/deny-flood?n=5&len=10&from=5000").await;
    assert_eq!(next.text(), "denied 5\n");
    server.terminate();
    assert_eq!(server.exited().await.code(), Some(0));
    // Each checked against the schema.
    let records = crate::audit::records(&trail);
    let kind = |kind: &str| records.iter().filter(|r| r["kind"] == kind).count();
    assert_eq!(kind("trail-full"), 0, "the server's trail never filled");
    assert_eq!(kind("request-share-full"), 1);
    let short_paths = records
        .iter()
        .filter(|r| {
            r["kind"] == "decision" && r["request"]["path"].as_str().is_some_and(|p| p.len() == 10)
        })
        .count();
    assert_eq!(
        short_paths, 5,
        "the next request's five denials are recorded"
    );
    let long = records
        .iter()
        .filter(|r| {
            r["request"]["path"]
                .as_str()
                .is_some_and(|p| p.len() == 200)
        })
        .count();
    assert!(
        (10..2000).contains(&long),
        "{long} of the first request's denials recorded, within its share"
    );
}

/// A request's share is paid in the bytes its records' lines take. A
/// handler that fetches 400 allowed URLs with 200-byte paths, reading each
/// body to its end: a decision and an exchange record each. Before, the
/// share was charged each record's estimate (551 bytes for a 742-byte
/// line: the run, the guest's digest and the keys were not counted), and
/// the request's records took 86 KB of a 64 KiB share; now the request is
/// stopped at its share, told so, and the next request fetches as before.
/// (The records its outgoing requests make on tasks of their own are paid
/// from the same share: the exchange's, the lookups', the socket hook's.)
#[tokio::test]
async fn a_requests_share_is_paid_in_the_bytes_its_records_take() {
    let trail = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("audit-serve-share-tasks.jsonl");
    let _ = std::fs::remove_file(&trail);
    let port = crate::audit::keep_alive_server();
    let mut server = Serve::start(
        guests::HTTP_HOSTILE,
        &[
            &format!("--audit={}", trail.display()),
            &format!("--allow-net=127.0.0.1:{port}"),
            "--max-audit-size=4MiB",
            "--max-audit-per-request=64KiB",
            "--max-audit-rate-per-client=none",
        ],
    )
    .await;
    let flood = get(
        server.addr,
        &format!("/fetch-flood?port={port}&n=400&len=200"),
    )
    .await;
    let text = flood.text();
    assert!(
        text.starts_with("fetched ") && text.contains("audit trail"),
        "stopped at its share: {text}"
    );
    let next = get(server.addr, &format!("/fetch-flood?port={port}&n=3&len=10")).await;
    assert_eq!(next.text(), "fetched 3\n");
    server.terminate();
    assert_eq!(server.exited().await.code(), Some(0));
    let records = crate::audit::records(&trail);
    let long = |r: &&serde_json::Value| {
        r["request"]["path"]
            .as_str()
            .is_some_and(|p| p.len() == 200)
    };
    let count = |kind: &str| {
        records
            .iter()
            .filter(long)
            .filter(|r| r["kind"] == kind)
            .count()
    };
    let (decisions, exchanges) = (count("decision"), count("http-exchange"));
    let bytes: usize = std::fs::read_to_string(&trail)
        .unwrap()
        .lines()
        .filter(|line| line.contains(&"b".repeat(199)))
        .map(str::len)
        .sum();
    assert!(exchanges > 10, "{exchanges} exchanges recorded");
    assert!(
        bytes <= 64 * 1024,
        "the request's {decisions} decisions and {exchanges} exchanges took {bytes} bytes of \
         the trail, past its 64 KiB share"
    );
    assert_eq!(
        records
            .iter()
            .filter(|r| r["kind"] == "request-share-full")
            .count(),
        1
    );
}

/// Issue 57: one id from the client to the upstream. A request whose
/// handler makes a refused outgoing request and then traps: its client's
/// 500 names an id, the operator's stderr line names the same, and so does
/// the trail's record of the refused request, with the client's address,
/// method and path (its query left out). Before, the trail had the
/// outgoing request's number within the run, and nothing tied it to the
/// client's request.
#[tokio::test]
async fn a_client_requests_id_is_on_its_500_its_failure_line_and_its_handlers_records() {
    let trail = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("audit-serve-incoming.jsonl");
    let _ = std::fs::remove_file(&trail);
    let mut server = Serve::start(
        guests::HTTP_HOSTILE,
        &[&format!("--audit={}", trail.display())],
    )
    .await;
    let failed = get(server.addr, "/upload-then-trap?port=9&bytes=1").await;
    let id = failed.failed_request();
    server
        .wait_for_stderr(&format!(
            "moat: request {id} (GET /upload-then-trap from 127.0.0.1) failed: the handler trapped"
        ))
        .await;
    let fine = get(server.addr, "/deny-flood?n=1&len=10&from=7").await;
    assert_eq!(fine.text(), "denied 1\n");
    server.terminate();
    assert_eq!(server.exited().await.code(), Some(0));
    let records = crate::audit::records(&trail);
    let denied: Vec<_> = records
        .iter()
        .filter(|r| r["kind"] == "decision" && r["decision"] == "denied")
        .collect();
    assert_eq!(denied.len(), 2, "{denied:#?}");
    assert_eq!(
        denied[0]["incoming"],
        serde_json::json!({
            "id": id,
            "peer": "127.0.0.1",
            "method": "GET",
            "path": "/upload-then-trap",
        }),
        "{:#}",
        denied[0]
    );
    assert_eq!(denied[0]["port"], 9);
    let other = denied[1]["incoming"]["id"].as_str().unwrap_or_default();
    assert!(
        !other.is_empty() && other != id && other.split('-').next() == id.split('-').next(),
        "the next request has its own id of the same server: {other} after {id}"
    );
    assert!(
        records
            .iter()
            .filter(|r| r["kind"] == "settings" || r["operation"] == "serve-bind")
            .all(|r| r.get("incoming").is_none()),
        "the server's own records belong to no request"
    );
}

/// Issue 57: `--trust-request-id` takes the id a proxy put in
/// `x-request-id` (or a `traceparent`'s trace id) for the 500, the failure
/// line and the records; without it the same header is ignored and the
/// server makes the id (a client must not choose what the operator's
/// lines say).
#[tokio::test]
async fn a_request_id_from_the_proxy_is_taken_only_when_trusted() {
    let trail = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("audit-serve-given-id.jsonl");
    let _ = std::fs::remove_file(&trail);
    let trap = |addr: SocketAddr, header: &str| {
        exchange(
            addr,
            format!(
                "GET /upload-then-trap?port=9&bytes=1 HTTP/1.1\r\nHost: x\r\n{header}\r\n\
                 Connection: close\r\n\r\n"
            ),
            Vec::new(),
        )
    };
    let mut trusting = Serve::start(
        guests::HTTP_HOSTILE,
        &[
            "--trust-request-id",
            &format!("--audit={}", trail.display()),
        ],
    )
    .await;
    let given = trap(trusting.addr, "X-Request-Id: edge-7f3a:42").await;
    assert_eq!(given.failed_request(), "edge-7f3a:42");
    trusting
        .wait_for_stderr("moat: request edge-7f3a:42 (GET /upload-then-trap from 127.0.0.1) failed")
        .await;
    let traced = trap(
        trusting.addr,
        "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    )
    .await;
    assert_eq!(traced.failed_request(), "4bf92f3577b34da6a3ce929d0e0e4736");
    let odd = trap(trusting.addr, "X-Request-Id: two words").await;
    assert_ne!(odd.failed_request(), "two", "a malformed id is not taken");
    trusting.terminate();
    assert_eq!(trusting.exited().await.code(), Some(0));
    let records = crate::audit::records(&trail);
    assert!(
        records
            .iter()
            .any(|r| r["decision"] == "denied" && r["incoming"]["id"] == "edge-7f3a:42"),
        "{records:#?}"
    );

    let doubting = Serve::start(guests::HTTP_HOSTILE, &[]).await;
    let ignored = trap(doubting.addr, "X-Request-Id: edge-7f3a:42").await;
    assert_ne!(
        ignored.failed_request(),
        "edge-7f3a:42",
        "not trusted by default"
    );
}

/// One client address's requests, however many, fill the trail no faster
/// than its rate (--max-audit-rate-per-client) once they took a first
/// request's share: a `client-rate-full` record says so (once per run of
/// refusals, however slow the machine), and another
/// address's records are all there. Before, each request had its own
/// share and nothing more: a client alone filled the trail one request at
/// a time (~5,900 requests in the review's run).
#[tokio::test]
async fn one_clients_requests_fill_the_trail_no_faster_than_its_rate() {
    let trail = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("audit-serve-client-rate.jsonl");
    let _ = std::fs::remove_file(&trail);
    let mut server = Serve::start(
        guests::HTTP_HOSTILE,
        &[
            &format!("--audit={}", trail.display()),
            "--max-audit-size=4MiB",
            "--max-audit-per-request=64KiB",
            "--max-audit-rate-per-client=1KiB",
        ],
    )
    .await;
    let started = std::time::Instant::now();
    // Ten requests, each of 50 first-of-a-kind denials with 200-byte
    // paths: about 35 KB of records each, within a request's share.
    for round in 0..10 {
        let flood = super::slow_clients::get_from(
            "127.0.0.1",
            server.addr,
            &format!("/deny-flood?n=50&len=200&from={}", 1 + round * 50),
        )
        .await;
        assert_eq!(flood.text(), "denied 50\n", "refused all the same");
    }
    let elapsed = started.elapsed().as_secs() + 1;
    let other =
        super::slow_clients::get_from("127.0.0.2", server.addr, "/deny-flood?n=5&len=10&from=5000")
            .await;
    assert_eq!(other.text(), "denied 5\n");
    server.terminate();
    assert_eq!(server.exited().await.code(), Some(0));
    let bytes: u64 = std::fs::read_to_string(&trail)
        .unwrap()
        .lines()
        .filter(|line| line.contains(&"a".repeat(199)))
        .map(|line| line.len() as u64 + 1)
        .sum();
    let allowed = (64 << 10) + 1024 * elapsed;
    assert!(
        bytes <= allowed,
        "the client's records took {bytes} bytes in {elapsed} s, past its 64 KiB and 1 KiB a second"
    );
    assert!(
        bytes > 32 << 10,
        "its first request's records are there: {bytes}"
    );
    let records = crate::audit::records(&trail);
    let kind = |kind: &str| records.iter().filter(|r| r["kind"] == kind).count();
    assert_eq!(kind("trail-full"), 0);
    assert_eq!(
        kind("request-share-full"),
        0,
        "no request passed its own share"
    );
    // Told once, then again only after one of its records passed: the
    // bucket refills while the requests run, so a slow machine lets a few
    // more records through, each followed by at most one more telling.
    let mut told = 0;
    let mut passed_since = true;
    for record in &records {
        if record["kind"] == "client-rate-full" {
            assert!(
                passed_since,
                "told twice with no record of the client passing between: {record}"
            );
            told += 1;
            passed_since = false;
        } else if record.to_string().contains(&"a".repeat(199)) {
            passed_since = true;
        }
    }
    assert!(told >= 1, "the client's rate was never told of");
    let short = records
        .iter()
        .filter(|r| r["request"]["path"].as_str().is_some_and(|p| p.len() == 10))
        .count();
    assert_eq!(short, 5, "the other address's denials are recorded");
}
