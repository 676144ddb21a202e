//! The audit trail as its readers meet it: `moat run --audit=FILE` (or a
//! policy file's `audit`), one JSON line per decision, every line valid
//! under docs/audit.schema.json, read back with jq; and a hostile guest
//! that floods it while the host's memory stays put.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::support::{self, cache_flag, guests};

const MOAT: &str = env!("CARGO_BIN_EXE_moat");
const SCHEMA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/audit.schema.json");

/// A fresh trail file for test `name`.
fn trail(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("audit-{name}.jsonl"));
    let _ = std::fs::remove_file(&path);
    path
}

/// `moat run --audit=TRAIL ARGS`.
fn moat_run(trail: &Path, args: &[&str]) -> Output {
    Command::new(MOAT)
        .args([
            "run",
            &cache_flag(),
            &format!("--audit={}", trail.display()),
        ])
        .args(args)
        .output()
        .expect("moat runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The trail's records, each checked against the schema.
pub(crate) fn records(trail: &Path) -> Vec<Value> {
    validate(trail);
    std::fs::read_to_string(trail)
        .expect("the trail was written")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// Checks every line of `trail` against docs/audit.schema.json with
/// Python's jsonschema (a validator no one here wrote).
pub(crate) fn validate(trail: &Path) {
    const CHECK: &str = r#"
import json, sys, jsonschema
validator = jsonschema.Draft202012Validator(json.load(open(sys.argv[1])))
bad = 0
for number, line in enumerate(open(sys.argv[2]), 1):
    for error in validator.iter_errors(json.loads(line)):
        print(f"line {number}: {error.message} at {list(error.absolute_path)}")
        bad += 1
sys.exit(1 if bad else 0)
"#;
    let have = Command::new("python3")
        .args(["-c", "import jsonschema"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if support::skip_unless(
        "schema validation",
        (!have).then(|| "python3 has no jsonschema (pip install jsonschema)".to_owned()),
    ) {
        return;
    }
    let out = Command::new("python3")
        .args(["-c", CHECK, SCHEMA])
        .arg(trail)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "records that break the schema:\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

fn decisions<'a>(records: &'a [Value], operation: &str) -> Vec<&'a Value> {
    records
        .iter()
        .filter(|r| r["kind"] == "decision" && r["operation"] == operation)
        .collect()
}

fn sha256_of(path: &str) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    text(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn an_sdk_guests_connects_are_recorded_with_the_rule_the_source_and_the_address() {
    let peer = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = peer.local_addr().unwrap().port().to_string();
    let path = trail("sdk");
    let grant = format!("--allow-net=127.0.0.1:{port}");
    let out = moat_run(
        &path,
        &[&grant, guests::PROBE, "connect", "127.0.0.1", &port],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = moat_run(&path, &[guests::PROBE, "connect", "127.0.0.1", &port]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let records = records(&path);

    // Two runs, each opened by its settings, each with its own id.
    let settings: Vec<_> = records.iter().filter(|r| r["kind"] == "settings").collect();
    assert_eq!(settings.len(), 2);
    assert_ne!(settings[0]["run"], settings[1]["run"]);
    let granted = settings[0]["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["setting"] == "allow-net")
        .expect("the grant is among the settings");
    assert_eq!(granted["value"], format!("127.0.0.1:{port}"));
    assert_eq!(granted["source"]["flag"], "--allow-net");
    assert_eq!(records[0]["guest"]["file"], "probe.wasm");
    assert_eq!(records[0]["guest"]["sha256"], sha256_of(guests::PROBE));

    let connects = decisions(&records, "connect");
    assert_eq!(connects.len(), 2, "{connects:#?}");
    let allowed = connects[0];
    assert_eq!(allowed["decision"], "allowed");
    assert_eq!(allowed["host"], "127.0.0.1");
    assert_eq!(allowed["port"], port.parse::<u16>().unwrap());
    assert_eq!(allowed["address"], format!("127.0.0.1:{port}"));
    assert_eq!(allowed["rule"]["entry"], format!("127.0.0.1:{port}"));
    assert_eq!(allowed["rule"]["source"]["kind"], "flag");
    let denied = connects[1];
    assert_eq!(denied["decision"], "denied");
    assert_eq!(denied["reason"]["kind"], "no-grant");
    assert_eq!(denied["reason"]["needs"], grant);
    assert_eq!(denied["address"], Value::Null);
    assert_eq!(
        denied["message"],
        format!("connect to 127.0.0.1:{port} denied: needs {grant}")
    );
}

#[test]
fn a_policy_files_audit_key_and_lines_name_where_each_rule_was_written() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = trail("policy-file");
    let policy = dir.join("audit-policy.toml");
    std::fs::write(
        &policy,
        format!(
            "# the trail goes where the policy says\naudit = \"{}\"\nallow-listen = [\n  \"127.0.0.1:0\",\n]\ndeny-listen = [\"0.0.0.0\"]\n",
            path.display()
        ),
    )
    .unwrap();
    let out = Command::new(MOAT)
        .args([
            "run",
            &cache_flag(),
            &format!("--policy={}", policy.display()),
        ])
        .args([guests::PROBE, "listen", "127.0.0.1", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = Command::new(MOAT)
        .args([
            "run",
            &cache_flag(),
            &format!("--policy={}", policy.display()),
        ])
        .args([guests::PROBE, "listen", "0.0.0.0", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let records = records(&path);
    let listens = decisions(&records, "listen");
    assert_eq!(listens.len(), 2, "{listens:#?}");
    let allowed = listens[0];
    assert_eq!(allowed["rule"]["entry"], "127.0.0.1:0");
    let source = &allowed["rule"]["source"];
    assert_eq!(source["kind"], "policy-file");
    assert_eq!(source["line"], 4);
    assert_eq!(source["path"], policy.display().to_string());
    let bound: std::net::SocketAddr = allowed["address"].as_str().unwrap().parse().unwrap();
    assert_ne!(bound.port(), 0, "the address is the one bound");
    let denied = listens[1];
    assert_eq!(denied["reason"]["kind"], "deny-entry");
    assert_eq!(denied["rule"]["entry"], "0.0.0.0");
    assert_eq!(denied["rule"]["source"]["line"], 6);
}

#[test]
fn a_stock_guests_lookup_connect_and_send_are_recorded() {
    let peer = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = peer.local_addr().unwrap().port().to_string();
    let reader = std::thread::spawn(move || {
        let (mut conn, _) = peer.accept().unwrap();
        let mut got = Vec::new();
        conn.read_to_end(&mut got).unwrap();
        got
    });
    let path = trail("stock");
    let grant = format!("--allow-net=localhost:{port}");
    let out = moat_run(
        &path,
        &[
            &grant,
            guests::STD_NET,
            "tcp-client",
            "localhost",
            &port,
            "x",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert_eq!(reader.join().unwrap(), b"x");
    let out = moat_run(
        &path,
        &[guests::STD_NET, "udp-client", "127.0.0.1", &port, "x"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let out = moat_run(&path, &[guests::STD_NET, "lookup", "db.example"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let records = records(&path);

    let lookups = decisions(&records, "lookup");
    assert_eq!(lookups.len(), 2, "{lookups:#?}");
    assert_eq!(lookups[0]["host"], "localhost");
    assert_eq!(lookups[0]["decision"], "allowed");
    assert_eq!(lookups[1]["host"], "db.example");
    assert_eq!(lookups[1]["decision"], "denied");
    assert_eq!(lookups[1]["reason"]["needs"], "--allow-net=db.example");
    assert!(
        lookups[0]["resolved"]
            .as_array()
            .unwrap()
            .contains(&Value::from("127.0.0.1")),
        "{}",
        lookups[0]
    );
    // The program tries each address it got ([::1] first, where nothing
    // listens, then 127.0.0.1): each connect is judged and recorded, each
    // allowed by the grant for the name it was resolved from.
    let connects = decisions(&records, "connect");
    assert!(!connects.is_empty());
    for connect in &connects {
        assert_eq!(connect["decision"], "allowed", "{connect}");
        assert_eq!(connect["rule"]["entry"], format!("localhost:{port}"));
    }
    let last = connects.last().unwrap();
    assert_eq!(last["address"], format!("127.0.0.1:{port}"));
    assert_eq!(last["host"], "127.0.0.1");
    let sends = decisions(&records, "udp-send");
    assert_eq!(sends.len(), 1, "{sends:#?}");
    assert_eq!(sends[0]["decision"], "denied");
    assert_eq!(sends[0]["reason"]["kind"], "no-grant");
}

#[test]
fn jq_selects_a_runs_denials_and_what_a_denied_name_resolved_to() {
    if !support::have("jq") {
        return;
    }
    let path = trail("jq");
    let out = moat_run(
        &path,
        &[
            "--allow-net=localhost:9",
            "--deny-net=private",
            guests::PROBE,
            "connect",
            "localhost",
            "9",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    // moat's resolver answers localhost with both loopback addresses;
    // the denial names each.
    let said = text(&out.stderr);
    assert!(
        said.contains("[::1]") && said.contains("127.0.0.1"),
        "{said}"
    );
    records(&path);
    let jq = |filter: &str| {
        let out = Command::new("jq")
            .args(["-r", filter])
            .arg(&path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    assert_eq!(
        jq(r#"select(.decision == "denied") | "\(.operation) \(.host):\(.port) \(.rule.entry)""#),
        "connect localhost:9 private\n"
    );
    let mut refused: Vec<String> = jq(
        r#"select(.decision == "denied") | .refused[] | "\(.address) by \(.rule.entry) (\(.rule.source.flag))""#,
    )
    .lines()
    .map(str::to_owned)
    .collect();
    refused.sort();
    assert_eq!(
        refused,
        [
            "127.0.0.1 by private (--deny-net)",
            "::1 by private (--deny-net)"
        ]
    );
    assert_eq!(
        jq(r#"select(.decision == "denied") | .resolved | length"#),
        "2\n"
    );
}

#[test]
fn an_http_request_is_recorded_and_its_new_connection_too_and_an_unjudged_one_as_written() {
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port().to_string();
    let answer = std::thread::spawn(move || {
        let (mut conn, _) = server.accept().unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).unwrap() == 1 {
            head.push(byte[0]);
        }
        conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
            .unwrap();
    });
    let path = trail("http");
    let url = format!("http://127.0.0.1:{port}/");
    let grant = format!("--allow-net=127.0.0.1:{port}");
    let out = moat_run(&path, &[&grant, guests::HTTP_PROBE, "fetch", &url]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    answer.join().unwrap();
    let out = moat_run(
        &path,
        &[guests::HTTP_PROBE, "fetch", "http://example.invalid/"],
    );
    assert_ne!(out.status.code(), Some(0));
    // Authorities that name no host moat judges: recorded as written.
    for written in ["127.1", "u@127.0.0.1"] {
        let out = moat_run(&path, &[guests::HTTP_PROBE, "authority", written]);
        assert_eq!(
            text(&out.stdout),
            "error: ErrorCode::HttpRequestUriInvalid\n",
            "{}",
            text(&out.stderr)
        );
    }
    let records = records(&path);
    let requests = decisions(&records, "http-request");
    assert_eq!(requests.len(), 4, "{requests:#?}");
    for (request, written) in requests[2..].iter().zip(["127.1", "u@127.0.0.1"]) {
        assert_eq!(request["decision"], "denied");
        assert_eq!(request["host"], Value::Null);
        assert_eq!(request["port"], Value::Null);
        assert_eq!(request["written"], written);
        assert_eq!(request["reason"]["kind"], "invalid");
    }
    assert_eq!(requests[0]["decision"], "allowed");
    assert_eq!(requests[0]["rule"]["entry"], format!("127.0.0.1:{port}"));
    assert_eq!(requests[1]["decision"], "denied");
    assert_eq!(requests[1]["host"], "example.invalid");
    assert_eq!(requests[1]["port"], 80);
    let connects = decisions(&records, "connect");
    assert_eq!(connects.len(), 1, "{connects:#?}");
    assert_eq!(connects[0]["address"], format!("127.0.0.1:{port}"));
}

/// An HTTP/1.1 server on 127.0.0.1 that keeps connections alive and
/// answers every request, whatever its body (by length or chunked), with
/// `hello`. Its port.
pub(crate) fn keep_alive_server() -> u16 {
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in server.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut conn = conn;
                loop {
                    let mut length = 0usize;
                    let mut chunked = false;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(n) = lower.strip_prefix("content-length:") {
                            length = n.trim().parse().unwrap();
                        }
                        chunked |=
                            lower.starts_with("transfer-encoding:") && lower.contains("chunked");
                        if line == "\r\n" {
                            break;
                        }
                    }
                    if chunked {
                        loop {
                            let mut size = String::new();
                            reader.read_line(&mut size).unwrap();
                            let size = usize::from_str_radix(size.trim(), 16).unwrap();
                            let mut chunk = vec![0u8; size + 2];
                            reader.read_exact(&mut chunk).unwrap();
                            if size == 0 {
                                break;
                            }
                        }
                    } else {
                        let mut body = vec![0u8; length];
                        reader.read_exact(&mut body).unwrap();
                    }
                    if conn
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello")
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    port
}

#[test]
fn an_http_request_is_named_on_each_of_its_records_and_its_end_ties_it_to_its_connection() {
    let port = keep_alive_server();
    let path = trail("http-exchange");
    let grant = format!("--allow-net=localhost:{port}");
    let items = format!("http://localhost:{port}/items?token=hunter2");
    let out = moat_run(
        &path,
        &[&grant, guests::HTTP_PROBE, "sequential", "2", &items],
    );
    assert_eq!(text(&out.stdout), "ok 2\n", "{}", text(&out.stderr));
    let upload = format!("http://localhost:{port}/upload");
    let out = moat_run(
        &path,
        &[&grant, guests::HTTP_PROBE, "post", &upload, "100000"],
    );
    assert!(
        text(&out.stdout).contains("received 5"),
        "{}",
        text(&out.stderr)
    );
    let out = moat_run(
        &path,
        &[guests::HTTP_PROBE, "fetch", "http://example.invalid/x?y=1"],
    );
    assert_ne!(out.status.code(), Some(0));
    // Allowed, and nothing listens there: it ends failed, on no connection.
    let closed = support::free_port();
    let out = moat_run(
        &path,
        &[
            &format!("--allow-net=127.0.0.1:{closed}"),
            guests::HTTP_PROBE,
            "fetch",
            &format!("http://127.0.0.1:{closed}/"),
        ],
    );
    assert_ne!(out.status.code(), Some(0));
    let trail_text = std::fs::read_to_string(&path).unwrap();
    assert!(
        !trail_text.contains("hunter2"),
        "a query's token is not kept"
    );
    let records = records(&path);

    // Each request's decision names it as written.
    let requests = decisions(&records, "http-request");
    assert_eq!(requests.len(), 5, "{requests:#?}");
    let named: Vec<_> = requests
        .iter()
        .map(|r| {
            let q = &r["request"];
            format!(
                "{} {} {} {}://{}{} {}",
                r["decision"].as_str().unwrap(),
                q["id"],
                q["method"].as_str().unwrap(),
                q["scheme"].as_str().unwrap(),
                q["authority"].as_str().unwrap(),
                q["path"].as_str().unwrap(),
                q["query"]
            )
        })
        .collect();
    assert_eq!(
        named,
        [
            format!("allowed 1 GET http://localhost:{port}/items true"),
            format!("allowed 2 GET http://localhost:{port}/items true"),
            format!("allowed 1 POST http://localhost:{port}/upload false"),
            "denied 1 GET http://example.invalid/x true".to_owned(),
            format!("allowed 1 GET http://127.0.0.1:{closed}/ false"),
        ]
    );
    // One connection for the first run's two requests: its connect
    // names the request it was made for, and its number.
    let connects = decisions(&records, "connect");
    assert_eq!(connects.len(), 3, "{connects:#?}");
    assert_eq!(connects[0]["request"]["id"], 1);
    assert_eq!(connects[0]["connection"], 1);
    assert_eq!(connects[0]["address"], format!("127.0.0.1:{port}"));

    // Each allowed request's end: the connection, what the name
    // resolved to, the address used, the status and the bytes.
    let exchanges: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "http-exchange")
        .collect();
    assert_eq!(exchanges.len(), 4, "{exchanges:#?}");
    let failed = exchanges[3];
    assert_eq!(failed["end"], "failed", "{failed:#}");
    assert_eq!(failed["connection"], Value::Null);
    assert_eq!(failed["status"], Value::Null);
    assert!(
        failed["error"].as_str().unwrap().contains("refused"),
        "{failed:#}"
    );
    assert_eq!(
        connects[2]["error"], "connection refused",
        "its connect says so too"
    );
    assert_eq!(
        connects[2]["request"], failed["request"],
        "{:#}",
        connects[2]
    );
    for (exchange, (id, reused, sent)) in
        exchanges[..3]
            .iter()
            .zip([(1, false, 0), (2, true, 0), (1, false, 100_000)])
    {
        assert_eq!(exchange["request"]["id"], id, "{exchange:#}");
        assert_eq!(exchange["connection"], 1, "{exchange:#}");
        assert_eq!(exchange["reused"], reused, "{exchange:#}");
        assert_eq!(exchange["protocol"], "HTTP/1.1");
        assert_eq!(exchange["address"], format!("127.0.0.1:{port}"));
        assert!(
            exchange["resolved"]
                .as_array()
                .unwrap()
                .contains(&Value::from("127.0.0.1")),
            "{exchange:#}"
        );
        assert_eq!(exchange["status"], 200);
        assert_eq!(exchange["end"], "complete", "{exchange:#}");
        assert_eq!(exchange["error"], Value::Null);
        assert_eq!(exchange["sent"], sent, "{exchange:#}");
        assert_eq!(exchange["received"], 5);
    }
    assert_eq!(exchanges[2]["request"]["method"], "POST");

    // docs/audit.md's jq line, as written there.
    if support::have("jq") {
        let out = Command::new("jq")
            .args([
                "-c",
                r#"select(.kind == "http-exchange") | {id: .request.id, method: .request.method, url: (.request.scheme + "://" + .request.authority + .request.path), address, status, "end": .end, sent, received}"#,
            ])
            .arg(&path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        let first = format!(
            r#"{{"id":1,"method":"GET","url":"http://localhost:{port}/items","address":"127.0.0.1:{port}","status":200,"end":"complete","sent":0,"received":5}}"#
        );
        assert_eq!(text(&out.stdout).lines().next(), Some(first.as_str()));
    }
}

/// Runs the hostile guest with `args` under `flags` until it prints its
/// last line, and returns that line and the host's peak resident memory
/// then, in bytes.
fn hostile_peak(trail: &Path, flags: &[&str], args: &[&str]) -> (String, u64) {
    guest_peak(guests::HOSTILE, trail, flags, args)
}

/// As [`hostile_peak`], for `guest` (one that waits for stdin's end after
/// its line).
fn guest_peak(guest: &str, trail: &Path, flags: &[&str], args: &[&str]) -> (String, u64) {
    let mut child = Command::new(MOAT)
        .args([
            "run",
            &cache_flag(),
            &format!("--audit={}", trail.display()),
        ])
        .args(flags)
        .arg(guest)
        .args(args)
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let peak = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM")
        * 1024;
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    (line.trim().to_owned(), peak)
}

/// How much more memory the trail may make the host hold for 100,000
/// records than for 100: its queue holds 1024 records at most.
const FLOOD_MEMORY: u64 = 16 << 20;

#[test]
fn a_hostile_guests_flood_is_all_on_the_trail_and_the_host_stays_small() {
    const CONNECTS: u64 = 100_000;
    let path = trail("flood-connects");
    let (said, few) = hostile_peak(&path, &[], &["denied-connects", "100", "10.9.9.9", "9"]);
    assert_eq!(said, "refused 100");
    let path = trail("flood-connects-many");
    let (said, many) = hostile_peak(
        &path,
        &[],
        &["denied-connects", &CONNECTS.to_string(), "10.9.9.9", "9"],
    );
    assert_eq!(said, format!("refused {CONNECTS}"));
    assert!(
        many < few + FLOOD_MEMORY,
        "the host's peak went from {few} to {many} bytes"
    );
    // The same denial again and again: its first record, then counts per
    // second, which add up to every one of them.
    let connects = records(&path);
    assert_eq!(decisions(&connects, "connect").len(), 1);
    assert_eq!(
        denied_after_the_first(&connects, "connect"),
        CONNECTS - 1,
        "every denial is on the trail"
    );
    assert!(connects.len() < 1000, "{} records", connects.len());

    // A UDP flood to one granted place: its first send, then counts.
    let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = peer.local_addr().unwrap().port().to_string();
    let path = trail("flood-udp");
    let (said, _) = hostile_peak(
        &path,
        &[
            "--allow-listen=127.0.0.1:0",
            &format!("--allow-net=127.0.0.1:{port}"),
        ],
        &["udp-flood", &CONNECTS.to_string(), "127.0.0.1", &port],
    );
    assert_eq!(said, format!("sent {CONNECTS}"));
    let records = records(&path);
    assert_eq!(decisions(&records, "udp-send").len(), 1);
    let counted: u64 = records
        .iter()
        .filter(|r| r["kind"] == "udp-send-counts")
        .map(|r| r["count"].as_u64().unwrap())
        .sum();
    assert_eq!(
        counted,
        CONNECTS - 1,
        "every send after the first is counted"
    );
    assert!(records.len() < 1000, "{} records", records.len());
}

/// The denials a trail counts after each one's first record, for
/// `operation`.
fn denied_after_the_first(records: &[Value], operation: &str) -> u64 {
    records
        .iter()
        .filter(|r| r["kind"] == "denial-counts" && r["operation"] == operation)
        .map(|r| {
            assert_eq!(r["decision"], "denied", "{r}");
            r["count"].as_u64().unwrap()
        })
        .sum()
}

/// 50,000 denied HTTP requests (no grant at all): the trail holds their
/// first record and counts that add up to the rest, in kilobytes, not the
/// 24 MB a record each took.
#[test]
fn a_flood_of_denied_requests_is_counted_in_kilobytes() {
    const REQUESTS: u64 = 50_000;
    let path = trail("flood-http");
    let out = moat_run(
        &path,
        &[
            guests::HTTP_PROBE,
            "flood",
            &REQUESTS.to_string(),
            "http://10.9.9.9:9/",
        ],
    );
    assert_eq!(
        text(&out.stdout),
        format!("ok 0\nerr ErrorCode::HttpRequestDenied x{REQUESTS}\n"),
        "{}",
        text(&out.stderr)
    );
    let size = std::fs::metadata(&path).unwrap().len();
    let records = records(&path);
    assert_eq!(decisions(&records, "http-request").len(), 1);
    assert_eq!(
        denied_after_the_first(&records, "http-request"),
        REQUESTS - 1
    );
    assert!(size < 64 << 10, "the trail took {size} bytes");
}

/// A trail that reaches --max-audit-size refuses the run's network from
/// then on, as a trail that cannot be written does: its last records say
/// so, and nothing past them is recorded or allowed.
#[test]
fn a_trail_at_its_size_cap_refuses_the_runs_network() {
    let path = trail("full");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    // Distinct denials (each port its own), each a whole record of a few
    // hundred bytes: 64 KiB is full after a few hundred; then a granted
    // connect finds the trail full.
    let out = moat_run(
        &path,
        &[
            "--max-audit-size=64KiB",
            &format!("--allow-net=127.0.0.1:{port}"),
            guests::HOSTILE,
            "fill-trail",
            "2000",
            "10.9.9.9",
            "127.0.0.1",
            &port,
        ],
    );
    let said = text(&out.stdout);
    assert!(
        said.starts_with("refused 2000\ntrail refused: ") && said.contains("--max-audit-size"),
        "{said}{}",
        text(&out.stderr)
    );
    let records = records(&path);
    let last = records.last().unwrap();
    assert_eq!(last["kind"], "trail-full", "{last}");
    assert!(
        last["message"]
            .as_str()
            .unwrap()
            .contains("--max-audit-size"),
        "{last}"
    );
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size < (64 << 10) + (8 << 10), "the trail took {size} bytes");
}

/// An embedder's `Limits::max_audit_size` caps the trail it gives the run,
/// as `--max-audit-size` does, and the refusal names it as the embedder's
/// code writes it (the guest's error and the trail's last record alike).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedders_max_audit_size_caps_the_trail_and_is_named_as_its_code_writes_it() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let written = Written::default();
    let audit = moat_host::audit::Audit::start(
        Box::new(moat_host::audit::JsonLines::new(written.clone())),
        moat_host::audit::Context::new(None),
        Vec::new(),
    )
    .unwrap();
    let policy = moat_host::policy::Policy::new()
        .allow_connect(&format!("127.0.0.1:{port}"))
        .unwrap();
    let limits = moat_host::limits::Limits {
        max_audit_size: 64 << 10,
        ..moat_host::limits::Limits::default()
    };
    let options = moat_host::RunOptions::new(policy)
        .limits(limits)
        .audit(audit.clone())
        .args([
            guests::HOSTILE,
            "fill-trail",
            "2000",
            "10.9.9.9",
            "127.0.0.1",
            &port,
        ])
        .stdin(moat_host::Input::Empty);
    let done = support::start_as_given(guests::HOSTILE, options)
        .finish()
        .await;
    audit.finish();
    assert!(
        done.stdout.starts_with("refused 2000\ntrail refused: ")
            && done.stdout.contains("Limits::max_audit_size")
            && !done.stdout.contains("--max-audit-size"),
        "{}{}",
        done.stdout,
        done.stderr
    );
    let text = String::from_utf8(written.0.lock().unwrap().clone()).unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["kind"], "trail-full", "{last}");
    assert!(
        last["message"]
            .as_str()
            .unwrap()
            .contains("Limits::max_audit_size"),
        "{last}"
    );
    assert!(
        text.len() < (64 << 10) + (8 << 10),
        "the trail took {} bytes",
        text.len()
    );
}

/// What a JSON Lines sink wrote.
#[derive(Clone, Default)]
struct Written(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Write for Written {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn the_documented_sample_records_are_valid() {
    let samples = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/audit-samples.jsonl");
    validate(Path::new(samples));
}

#[test]
fn binds_and_sends_from_both_kinds_of_guest_are_recorded() {
    let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let udp_port = peer.local_addr().unwrap().port().to_string();
    let free = support::free_port().to_string();
    let path = trail("binds");
    // A stock program's fixed-port binds, refused: TCP and UDP.
    let at = format!("127.0.0.1:{free}");
    let out = moat_run(&path, &[guests::STD_NET, "tcp-server", &at]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let out = moat_run(&path, &[guests::STD_NET, "udp-server", &at]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    // An SDK guest's UDP socket, bound and sending, allowed.
    let to = format!("--allow-net=127.0.0.1:{udp_port}");
    let out = moat_run(
        &path,
        &[
            "--allow-listen=127.0.0.1:0",
            &to,
            guests::PROBE,
            "udp-send",
            "127.0.0.1",
            &udp_port,
            "x",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut got = [0u8; 8];
    assert_eq!(peer.recv(&mut got).unwrap(), 1);
    let records = records(&path);
    let needs = format!("--allow-listen={at}");
    let tcp_bind = decisions(&records, "tcp-bind");
    assert_eq!(tcp_bind.len(), 1, "{tcp_bind:#?}");
    assert_eq!(tcp_bind[0]["decision"], "denied");
    assert_eq!(tcp_bind[0]["reason"]["needs"], needs);
    let udp_binds = decisions(&records, "udp-bind");
    assert_eq!(udp_binds.len(), 2, "{udp_binds:#?}");
    assert_eq!(udp_binds[0]["decision"], "denied");
    assert_eq!(udp_binds[0]["reason"]["needs"], needs);
    assert_eq!(udp_binds[1]["decision"], "allowed");
    assert_eq!(udp_binds[1]["rule"]["entry"], "127.0.0.1:0");
    let sends = decisions(&records, "udp-send");
    assert_eq!(sends.len(), 1, "{sends:#?}");
    assert_eq!(sends[0]["decision"], "allowed");
    assert_eq!(sends[0]["rule"]["entry"], format!("127.0.0.1:{udp_port}"));
    assert_eq!(sends[0]["address"], format!("127.0.0.1:{udp_port}"));
}

#[test]
fn a_connect_to_the_programs_own_listener_is_recorded_as_such_with_its_listen_grant() {
    let path = trail("own-listener");
    let out = moat_run(
        &path,
        &[
            "--allow-listen=127.0.0.1:0",
            guests::STD_NET,
            "self-connect",
            "127.0.0.1:0",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stdout));
    let records = records(&path);
    let listen = decisions(&records, "listen");
    assert_eq!(listen.len(), 1, "{listen:?}");
    let listener = listen[0]["address"].as_str().unwrap();
    let connects = decisions(&records, "connect");
    assert_eq!(connects.len(), 1, "{connects:?}");
    let connect = connects[0];
    assert_eq!(connect["decision"], "allowed");
    assert_eq!(connect["own_listener"], true);
    assert_eq!(connect["address"], listener);
    assert_eq!(connect["rule"]["entry"], "127.0.0.1:0");
    assert_eq!(connect["rule"]["source"]["flag"], "--allow-listen");
    // Any other decision carries no such mark.
    let marked = records
        .iter()
        .filter(|r| r.get("own_listener").is_some())
        .count();
    assert_eq!(marked, 1);
}

/// Round four's finding 3: 4,096 first-of-a-kind denials, each of a request
/// with a 60 KB path, under `--max-host-memory=16MiB`. Each denial's count
/// keeps a digest and its first record cut to a few hundred bytes a text;
/// before, each kept its whole request and the host grew by 1.5 GiB.
#[test]
fn first_of_a_kind_denials_keep_no_guest_chosen_path_whole() {
    // Near the longest path a request takes (the head's 64 KiB bound).
    const LONG: u64 = 60_000;
    let flags = ["--max-host-memory=16MiB"];
    let path = trail("denied-paths-few");
    let (said, few) = guest_peak(
        guests::HTTP_PROBE,
        &path,
        &flags,
        &["denied-paths", "16", &LONG.to_string()],
    );
    assert_eq!(said, "denied 16");
    let path = trail("denied-paths-many");
    let (said, many) = guest_peak(
        guests::HTTP_PROBE,
        &path,
        &flags,
        &["denied-paths", "4096", &LONG.to_string()],
    );
    assert_eq!(said, "denied 4096");
    assert!(
        many < few + (48 << 20),
        "the host's peak went from {few} to {many} bytes for 4,080 more denials"
    );
    let records = records(&path);
    let denials = decisions(&records, "http-request");
    assert_eq!(denials.len(), 4096, "each first of its kind, whole");
    let written = denials[0]["request"]["path"].as_str().unwrap();
    assert!(
        written.starts_with("/aaaa")
            && written.contains(&format!("...[cut: {LONG} bytes, sha256 "))
            && written.len() < 320,
        "{written}"
    );
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(
        size < 4096 * 4096,
        "{size} bytes of trail for 4,096 denials: a path is kept cut"
    );
}

/// Round four's findings 4 and 8: an allowed request with a 60 KB path
/// leaves records of a few KiB (before, about 181 KB: the path whole in the
/// decision, the connect and the exchange), and a text a guest chose with a
/// right-to-left override lands on the trail as an ASCII escape, the same
/// text once read as JSON.
#[test]
fn a_record_keeps_a_long_path_cut_and_every_text_in_ascii() {
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in server.incoming().flatten() {
            let mut stream = stream;
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
        }
    });
    let long = format!("/{}", "b".repeat(60_000));
    let path = trail("long-path");
    let grant = format!("--allow-net=127.0.0.1:{port}");
    let out = moat_run(
        &path,
        &[
            &grant,
            guests::HTTP_PROBE,
            "fetch",
            &format!("http://127.0.0.1:{port}{long}"),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size < 16 * 1024, "{size} bytes of trail for one request");
    let written = records(&path);
    let exchange = written
        .iter()
        .find(|r| r["kind"] == "http-exchange")
        .expect("the exchange's record");
    assert!(
        exchange["request"]["path"]
            .as_str()
            .unwrap()
            .contains("...[cut: 60001 bytes, sha256 "),
        "{exchange}"
    );

    let path = trail("non-ascii");
    let reversed = "/\u{202e}txt.exe";
    let out = moat_run(
        &path,
        &[
            guests::HTTP_PROBE,
            "fetch",
            &format!("http://192.0.2.1:80{reversed}"),
        ],
    );
    assert!(!out.status.success());
    let bytes = std::fs::read(&path).unwrap();
    assert!(bytes.is_ascii(), "the trail holds a byte past ASCII");
    assert!(text(&bytes).contains("\\u202e"), "{}", text(&bytes));
    let written = records(&path);
    let denial = decisions(&written, "http-request")[0];
    assert_eq!(denial["request"]["path"], reversed, "{denial}");
}

/// Round four's finding 8: a request of another scheme (`ftp`) is refused
/// by moat, not by wasmtime-wasi-http before it, and so leaves its record:
/// denied, with the authority as written.
#[test]
fn a_request_of_another_scheme_is_refused_on_the_trail() {
    let path = trail("scheme");
    let out = moat_run(
        &path,
        &[guests::HTTP_PROBE, "authority", "127.0.0.1:21", "ftp"],
    );
    assert_eq!(
        text(&out.stdout),
        "error: ErrorCode::HttpRequestDenied\n",
        "{}",
        text(&out.stderr)
    );
    let written = records(&path);
    let denials = decisions(&written, "http-request");
    assert_eq!(denials.len(), 1, "{written:?}");
    assert_eq!(denials[0]["decision"], "denied", "{}", denials[0]);
    assert!(
        denials[0].to_string().contains("ftp"),
        "the record says why: {}",
        denials[0]
    );
}
