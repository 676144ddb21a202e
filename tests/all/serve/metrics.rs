//! `moat serve --metrics`: scraped as Prometheus scrapes it, and read by
//! the Python `prometheus_client` parsers (the Prometheus text format and
//! OpenMetrics), while curl and raw clients use the server.

use std::collections::BTreeMap;

use super::*;

/// Scrapes `url` asking for `accept` and parses the answer with
/// prometheus_client's parser for that format: each sample as
/// `name{label="value",...}` (labels sorted) and its value.
const SCRAPE: &str = r#"
import json, sys, urllib.request
url, openmetrics = sys.argv[1], sys.argv[2] == "openmetrics"
request = urllib.request.Request(url)
if openmetrics:
    request.add_header("Accept", "application/openmetrics-text; version=1.0.0")
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
else:
    from prometheus_client.parser import text_string_to_metric_families
with urllib.request.urlopen(request) as response:
    content_type = response.headers["Content-Type"]
    text = response.read().decode()
samples = {}
for family in text_string_to_metric_families(text):
    for sample in family.samples:
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
        samples[f"{sample.name}{{{labels}}}"] = sample.value
print(json.dumps({"content_type": content_type, "samples": samples}))
"#;

/// One scrape as a parser read it.
pub(super) struct Scrape {
    content_type: String,
    samples: BTreeMap<String, f64>,
}

impl Scrape {
    /// The value of `sample` (`name{labels}`), 0 if absent.
    pub(super) fn get(&self, sample: &str) -> f64 {
        self.samples.get(sample).copied().unwrap_or(0.0)
    }

    /// The samples whose name is `name`.
    pub(super) fn named(&self, name: &str) -> Vec<(&String, f64)> {
        self.samples
            .iter()
            .filter(|(key, _)| key.split('{').next() == Some(name))
            .map(|(key, value)| (key, *value))
            .collect()
    }
}

async fn scrape(url: &str, openmetrics: bool) -> Scrape {
    let out = within(
        "python3 scraping the metrics",
        Command::new("python3")
            .args(["-c", SCRAPE, url])
            .arg(if openmetrics { "openmetrics" } else { "text" })
            .output(),
    )
    .await
    .expect("python3 runs");
    assert!(
        out.status.success(),
        "the scrape did not parse:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the script's JSON");
    Scrape {
        content_type: parsed["content_type"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        samples: parsed["samples"]
            .as_object()
            .expect("samples")
            .iter()
            .map(|(k, v)| (k.clone(), v.as_f64().expect("a number")))
            .collect(),
    }
}

fn have_parser() -> bool {
    let have = std::process::Command::new("python3")
        .args(["-c", "import prometheus_client"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    !support::skip_unless(
        "the metrics test",
        (!have).then(|| "python3 has no prometheus_client (pip install prometheus_client)".into()),
    )
}

/// How many requests `server` (run with `--metrics`) answered itself for
/// each of `reasons`, as prometheus_client's OpenMetrics parser reads
/// them; `None` when python3 has no prometheus_client outside CI (the
/// caller leaves its metrics checks out; the skip is printed).
pub(super) async fn refused(server: &Serve, reasons: &[&str]) -> Option<Vec<f64>> {
    if !have_parser() {
        return None;
    }
    let scraped = scrape(&metrics_url(server), true).await;
    Some(
        reasons
            .iter()
            .map(|reason| scraped.get(&format!(r#"moat_http_refused_total{{reason="{reason}"}}"#)))
            .collect(),
    )
}

/// `moat_decisions_total` of `operation` and `outcome` on `server` (run
/// with `--metrics`); `None` without prometheus_client outside CI.
pub(super) async fn decisions(server: &Serve, operation: &str, outcome: &str) -> Option<f64> {
    if !have_parser() {
        return None;
    }
    let scraped = scrape(&metrics_url(server), true).await;
    Some(scraped.get(&format!(
        r#"moat_decisions_total{{operation="{operation}",outcome="{outcome}"}}"#
    )))
}

/// One scrape of `server` (run with `--metrics`), as prometheus_client's
/// OpenMetrics parser reads it; `None` without it outside CI.
pub(super) async fn scrape_if_able(server: &Serve) -> Option<Scrape> {
    if !have_parser() {
        return None;
    }
    Some(scrape(&metrics_url(server), true).await)
}

/// The metrics address from the server's stderr.
pub(super) fn metrics_url(server: &Serve) -> String {
    let stderr = server.stderr();
    let addr = stderr
        .lines()
        .find_map(|l| l.strip_prefix("moat: metrics at "))
        .unwrap_or_else(|| panic!("no metrics line in:\n{stderr}"));
    addr.trim().to_owned()
}

/// Requests answered by the handler and by moat itself are counted by
/// method and status class, their latency observed, a body past its
/// bound counted as a refusal, the handler's denied request and the
/// server's two listening addresses counted as decisions; methods a
/// client makes up share one label, and both formats parse.
#[tokio::test]
async fn serve_metrics_count_what_clients_and_the_handler_did() {
    if !have_parser() {
        return;
    }
    let server = Serve::start(
        guests::HTTP_HOSTILE,
        &[
            "--metrics=127.0.0.1:0",
            "--max-http-body-size=100B",
            "--max-host-memory=64MiB",
            "--max-instances=3",
        ],
    )
    .await;
    let url = metrics_url(&server);
    for _ in 0..3 {
        let out = within(
            "curl",
            Command::new("curl")
                .args(["-sS", "--fail", &server.url("/ok")])
                .output(),
        )
        .await
        .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n");
    }
    let (status, _) = curl_post(&server.url("/consume"), &[b'x'; 1000], &[]).await;
    assert_eq!(status, "413");
    // The handler's own request to a port nobody granted: refused, and
    // the handler traps on the refusal.
    assert_eq!(
        get(server.addr, "/upload-then-trap?port=9&bytes=1")
            .await
            .status,
        500
    );
    for method in ["FOO", "BAR", "BAZ"] {
        let head = format!(
            "{method} /ok HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            server.addr
        );
        assert_eq!(exchange(server.addr, head, Vec::new()).await.status, 404);
    }

    let scraped = scrape(&url, true).await;
    assert!(
        scraped
            .content_type
            .starts_with("application/openmetrics-text"),
        "{}",
        scraped.content_type
    );
    let requests = |labels: &str| scraped.get(&format!("moat_http_requests_total{{{labels}}}"));
    assert_eq!(requests(r#"method="GET",status="2xx""#), 3.0);
    assert_eq!(requests(r#"method="POST",status="4xx""#), 1.0);
    assert_eq!(requests(r#"method="GET",status="5xx""#), 1.0);
    assert_eq!(requests(r#"method="other",status="4xx""#), 3.0);
    assert_eq!(
        scraped
            .named("moat_http_requests_total")
            .iter()
            .filter(|(_, n)| *n > 0.0)
            .count(),
        4,
        "counted for each (method, status class) seen: {:?}",
        scraped.named("moat_http_requests_total")
    );
    assert_eq!(
        scraped.get("moat_http_request_duration_seconds_count{}"),
        8.0
    );
    assert_eq!(
        scraped.get(r#"moat_http_request_duration_seconds_bucket{le="+Inf"}"#),
        8.0
    );
    // What each handler call cost: the three /ok, the three made-up
    // methods' 404s and the trap (the 413 never reached the handler).
    assert_eq!(scraped.get("moat_http_request_cpu_seconds_count{}"), 7.0);
    assert!(scraped.get("moat_http_request_cpu_seconds_sum{}") > 0.0);
    assert_eq!(
        scraped.get("moat_http_request_memory_peak_bytes_count{}"),
        7.0
    );
    assert!(
        scraped.get("moat_http_request_memory_peak_bytes_sum{}") >= 7.0 * 65536.0,
        "every instance had at least a page: {:?}",
        scraped.named("moat_http_request_memory_peak_bytes_bucket")
    );
    assert_eq!(
        scraped.get(r#"moat_http_refused_total{reason="body-too-large"}"#),
        1.0
    );
    assert_eq!(
        scraped.get(r#"moat_http_refused_total{reason="handler-failed"}"#),
        1.0
    );
    assert_eq!(
        scraped.get(r#"moat_decisions_total{operation="serve-bind",outcome="allowed"}"#),
        2.0,
        "--addr and --metrics"
    );
    assert!(
        scraped.get(r#"moat_decisions_total{operation="http-request",outcome="denied"}"#) >= 1.0
    );
    assert_eq!(scraped.get("moat_instances_max{}"), 3.0);
    assert_eq!(scraped.get("moat_instances_busy{}"), 0.0);
    assert_eq!(
        scraped.get("moat_host_memory_budget_bytes{}"),
        (64u64 << 20) as f64
    );
    // Ten operations, three outcomes (allowed, denied, would_deny).
    assert_eq!(scraped.named("moat_decisions_total").len(), 30);
    // How ended instances are reset: one mode, the one the start-up line
    // names, and the bytes it restored (every handler call wrote some).
    let mode = scraped.named("moat_instance_memory_reset_mode");
    let expected = if server.stderr().contains("only written pages are restored") {
        "written-pages"
    } else {
        "lowest-bytes"
    };
    assert_eq!(
        mode,
        [(
            &format!("moat_instance_memory_reset_mode{{mode=\"{expected}\"}}"),
            1.0
        )],
        "{}",
        server.stderr()
    );
    assert!(scraped.get("moat_instance_memory_reset_bytes_total{}") >= 4096.0);

    // The same figures in the Prometheus text format.
    let text = scrape(&url, false).await;
    assert!(
        text.content_type.starts_with("text/plain; version=0.0.4"),
        "{}",
        text.content_type
    );
    assert_eq!(
        text.named("moat_http_requests_total"),
        scraped.named("moat_http_requests_total")
    );
    let other = within(
        "curl",
        Command::new("curl")
            .args(["-sS", "--write-out", "%{http_code}", "-o", "/dev/null"])
            .arg(url.replace("/metrics", "/other"))
            .output(),
    )
    .await
    .unwrap();
    assert_eq!(String::from_utf8_lossy(&other.stdout), "404");
}

/// Issue 57: before the first request, every series a dashboard or an
/// alert uses is there at 0 (before, `moat_http_refused_total` had none
/// until the first refusal: no `rate()`, no alert), with the build's
/// version and the handler's digest; `/healthz` and `/readyz` answer 200
/// on the same address.
#[tokio::test]
async fn serve_metrics_are_all_there_at_zero_before_the_first_request() {
    if !have_parser() {
        return;
    }
    let server = Serve::start(guests::HTTP_HOSTILE, &["--metrics=127.0.0.1:0"]).await;
    let url = metrics_url(&server);
    for openmetrics in [true, false] {
        let scraped = scrape(&url, openmetrics).await;
        let requests = scraped.named("moat_http_requests_total");
        assert_eq!(requests.len(), 50, "10 methods, 5 classes: {requests:?}");
        assert!(requests.iter().all(|(_, n)| *n == 0.0), "{requests:?}");
        let refused = scraped.named("moat_http_refused_total");
        assert_eq!(
            refused.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            [
                r#"moat_http_refused_total{reason="body-timeout"}"#,
                r#"moat_http_refused_total{reason="body-too-large"}"#,
                r#"moat_http_refused_total{reason="client-share"}"#,
                r#"moat_http_refused_total{reason="handler-failed"}"#,
                r#"moat_http_refused_total{reason="instances-busy"}"#,
            ]
        );
        assert!(refused.iter().all(|(_, n)| *n == 0.0), "{refused:?}");
        assert_eq!(scraped.get(r#"moat_reloads_total{result="ok"}"#), 0.0);
        assert_eq!(scraped.named("moat_reloads_total").len(), 2);
        assert_eq!(
            scraped.get(&format!(
                r#"moat_build_info{{version="{}"}}"#,
                env!("CARGO_PKG_VERSION")
            )),
            1.0,
            "{:?}",
            scraped.named("moat_build_info")
        );
        assert_eq!(scraped.get("moat_http_request_cpu_seconds_count{}"), 0.0);
        assert_eq!(
            scraped.get("moat_http_request_memory_peak_bytes_count{}"),
            0.0
        );
        for family in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_virtual_memory_bytes",
            "process_start_time_seconds",
            "process_open_fds",
            "process_max_fds",
        ] {
            assert!(
                scraped.get(&format!("{family}{{}}")) > 0.0,
                "{family}: {:?}",
                scraped.named(family)
            );
        }
        // CPU time is read to the nanosecond: clock ticks (10 ms) read 0
        // for a server started from the compile cache, and every figure
        // they give is a whole number of hundredths.
        let cpu = scraped.get("process_cpu_seconds_total{}");
        assert!(
            ((cpu * 100.0) - (cpu * 100.0).round()).abs() > 1e-9,
            "process_cpu_seconds_total {cpu} is whole clock ticks"
        );
        let handler = scraped.named("moat_handler_info");
        assert_eq!(handler.len(), 1, "{handler:?}");
        assert!(
            handler[0].0.contains(r#"file="http-hostile.wasm""#),
            "{handler:?}"
        );
    }
    for (path, code, body) in [
        ("/healthz", "200", "ok\n"),
        ("/readyz", "200", "ready\n"),
        (
            "/other",
            "404",
            "moat answers /metrics, /healthz and /readyz here\n",
        ),
    ] {
        let out = within(
            "curl",
            Command::new("curl")
                .args(["-sS", "--write-out", "%{http_code}"])
                .arg(url.replace("/metrics", path))
                .output(),
        )
        .await
        .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{body}{code}"),
            "{path}"
        );
    }
}

/// Issue 57: `/readyz` says ready while the server serves and stops
/// answering once it is stopping (the metrics address closes with the
/// stop, while a request in flight finishes): a load balancer sends no
/// new request to a server that is going.
#[tokio::test]
async fn serve_readyz_stops_answering_once_the_server_is_stopping() {
    let mut server = Serve::start(
        guests::HTTP_HOSTILE,
        &[
            "--metrics=127.0.0.1:0",
            "--timeout=60s",
            "--shutdown-timeout=30s",
        ],
    )
    .await;
    let readyz = metrics_url(&server).replace("/metrics", "/readyz");
    let ask = |url: String| async move {
        let out = within(
            "curl /readyz",
            Command::new("curl")
                .args(["-sS", "--max-time", "5", "--write-out", "%{http_code}"])
                .arg(url)
                .output(),
        )
        .await
        .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    assert_eq!(
        ask(readyz.clone()).await,
        (Some(0), "ready\n200".to_owned())
    );
    // A request in flight keeps the process up after the stop.
    let _slow = super::requests::slow_stream(server.addr).await;
    server.terminate();
    server
        .wait_for_stderr("moat: stopping: finishing the requests in flight")
        .await;
    let mut refused = None;
    for _ in 0..100 {
        let (code, _) = ask(readyz.clone()).await;
        // curl's 7: could not connect.
        if code == Some(7) {
            refused = code;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(refused, Some(7), "/readyz still answered while stopping");
}

/// A request body the client holds back keeps the only instance busy, and
/// the next request waits for it: the scrape shows one busy and one
/// waiting, then neither once the first client goes away and the second
/// is answered.
#[tokio::test]
async fn serve_metrics_show_instances_busy_and_waiting_as_they_are() {
    if !have_parser() {
        return;
    }
    let server = Serve::start(
        guests::HTTP_HOSTILE,
        &[
            "--metrics=127.0.0.1:0",
            "--max-instances=1",
            "--timeout=60s",
            // The held-back body holds its instance: no minimum rate.
            "--min-http-body-rate=none",
        ],
    )
    .await;
    let url = metrics_url(&server);
    let addr = server.addr;
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(
        format!("POST /consume HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 1000\r\n\r\nx")
            .as_bytes(),
    )
    .await
    .unwrap();
    let mut seen = scrape(&url, true).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while seen.get("moat_instances_busy{}") != 1.0 {
        assert!(std::time::Instant::now() < deadline, "never busy");
        seen = scrape(&url, true).await;
    }
    let waiting = tokio::spawn(async move { get(addr, "/ok").await });
    while seen.get("moat_instances_waiting{}") != 1.0 {
        assert!(std::time::Instant::now() < deadline, "never waiting");
        seen = scrape(&url, true).await;
    }
    assert_eq!(seen.get("moat_http_connections{}"), 2.0);
    drop(slow);
    let answer = within("the waiting request", waiting).await.unwrap();
    assert_eq!((answer.status, answer.text()), (200, "ok\n".to_owned()));
    let after = scrape(&url, true).await;
    assert_eq!(after.get("moat_instances_waiting{}"), 0.0);
    assert_eq!(
        after.get(r#"moat_http_requests_total{method="GET",status="2xx"}"#),
        1.0
    );
}

/// Round four's finding 8: sixteen clients that connect to the scrape
/// address and send nothing do not blind it: a scrape is answered within
/// 3 s (before, four places were held 10 s each), and each idle
/// connection is closed once its head's time (1 s) is up.
#[tokio::test]
async fn serve_metrics_idle_clients_hold_the_scrape_address_for_a_bounded_time() {
    if !have_parser() {
        return;
    }
    let server = Serve::start(guests::HTTP_HOSTILE, &["--metrics=127.0.0.1:0"]).await;
    let url = metrics_url(&server);
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .to_owned();
    let mut idle = Vec::new();
    for _ in 0..16 {
        idle.push(TcpStream::connect(&addr).await.unwrap());
    }
    let scraped = tokio::time::timeout(std::time::Duration::from_secs(3), scrape(&url, false))
        .await
        .expect("a scrape answered within 3 s");
    assert_eq!(scraped.get("moat_instances_busy{}"), 0.0);
    for mut stream in idle {
        let mut rest = Vec::new();
        let read = within("the idle connection closed", stream.read_to_end(&mut rest)).await;
        assert!(
            read.is_ok_and(|n| n == 0) || !rest.starts_with(b"HTTP/1.1 200"),
            "an idle scrape connection got {rest:?}"
        );
    }
}

/// A --metrics address that cannot be listened on stops the start and
/// says which.
#[tokio::test]
async fn serve_refuses_a_metrics_addr_it_cannot_listen_on() {
    let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let flag = format!("--metrics={}", taken.local_addr().unwrap());
    let (code, stderr) = serve_refused(&["--addr=127.0.0.1:0", &flag, guests::HTTP_HOSTILE]).await;
    assert_ne!(code, Some(0));
    assert!(
        stderr.contains(&taken.local_addr().unwrap().to_string()),
        "{stderr}"
    );
}
