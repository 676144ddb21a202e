//! `moat serve` with a secret (`--secret`, its value from a file): a
//! handler's outgoing request carries the value only to the bound
//! destination, and what the upstream echoes back reaches the client (the
//! handler's response) as the placeholder.

use super::{Serve, exchange};
use crate::secrets::{Recorder, VALUE, binding, dir_with_ca};
use crate::support::certs::Ca;
use crate::support::{eventually, guests};

#[tokio::test]
async fn a_handler_sends_the_value_only_where_bound() {
    let ca = Ca::new("moat secrets CA");
    let dir = dir_with_ca("serve", &ca);
    let api = Recorder::https(&ca).await;
    let other = Recorder::https(&ca).await;
    let key = dir.join("api-key");
    // A file of the operator's, with the line break an editor leaves.
    std::fs::write(&key, format!("{VALUE}\n")).unwrap();
    let flags = [
        format!(
            "--allow-net=localhost:{},localhost:{}",
            api.port, other.port
        ),
        format!("--ca-file={}", dir.join("ca.pem").display()),
        format!("--audit={}", dir.join("trail.jsonl").display()),
        binding(api.port, &format!("file:{}", key.display())),
        "--metrics=127.0.0.1:0".to_owned(),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut server = Serve::start_logging(guests::HTTP_MIDDLEWARE_P3, &flags, Some("trace")).await;
    let forward = |to: String| {
        format!(
            "GET / HTTP/1.1\r\nHost: x\r\nx-forward-to: {to}\r\n\
             x-forward-header: authorization=Bearer ${{API_KEY}}\r\nConnection: close\r\n\r\n"
        )
    };
    let answer = exchange(
        server.addr,
        forward(format!("https://localhost:{}/v1/models", api.port)),
        Vec::new(),
    )
    .await;
    assert_eq!(answer.status, 200, "{answer:?}\n{}", server.stderr());
    let received = api.received();
    assert_eq!(received.len(), 1, "{received:?}");
    assert_eq!(
        received[0].header("authorization"),
        Some(format!("Bearer {VALUE}").as_str())
    );
    // The upstream echoed the value in its body: the handler relayed the
    // placeholder, as long as the value.
    let text = answer.text();
    let placeholder = text
        .strip_prefix("got Bearer ")
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(placeholder.len(), VALUE.len(), "{text}");
    assert!(placeholder.starts_with("moat"), "{text}");

    // To another granted host: refused, nothing sent there.
    let refused = exchange(
        server.addr,
        forward(format!("https://localhost:{}/v1/models", other.port)),
        Vec::new(),
    )
    .await;
    assert_eq!(
        (refused.status, refused.text().as_str()),
        (502, "ErrorCode::HttpRequestDenied\n"),
        "{refused:?}"
    );
    server
        .wait_for_stderr("secret API_KEY may not go in a request to another destination")
        .await;
    assert_eq!(other.connections(), 0);
    assert!(
        !server.stderr().contains(VALUE),
        "a log line holds the value"
    );
    let trail_file = dir.join("trail.jsonl");
    let read = || std::fs::read_to_string(&trail_file).unwrap_or_default();
    // The trail's writer takes the record after the notice is printed.
    eventually("the refusal's record", || {
        read().contains(r#""kind":"secret""#)
    })
    .await;
    assert!(!read().contains(VALUE), "the trail holds the value");
    // Nor do the metrics.
    let url = super::metrics::metrics_url(&server);
    let metrics_addr = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("{url}"));
    let scraped = exchange(
        metrics_addr,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_owned(),
        Vec::new(),
    )
    .await;
    assert_eq!(scraped.status, 200, "{scraped:?}");
    assert!(
        scraped.text().contains("moat_decisions_total"),
        "{}",
        scraped.text()
    );
    assert!(
        !scraped.text().contains(VALUE),
        "the metrics hold the value"
    );
}
