//! `moat serve --observe`: a handler's requests that no grant allows go
//! through, each recorded as would-deny and counted as
//! `outcome="would_deny"`; the draft of the trail grants them.

use super::{Serve, exchange};
use crate::secrets::Recorder;
use crate::support::guests;

const MOAT: &str = env!("CARGO_BIN_EXE_moat");

fn forward(to: &str) -> String {
    format!("GET / HTTP/1.1\r\nHost: x\r\nx-forward-to: {to}\r\nConnection: close\r\n\r\n")
}

#[tokio::test]
async fn serve_observes_then_serves_under_the_draft() {
    let up = Recorder::plain().await;
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("observe-serve");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let observed = dir.join("observed.jsonl");
    let audit = format!("--audit={}", observed.display());
    let mut server = Serve::start(
        guests::HTTP_MIDDLEWARE_P3,
        &["--observe", &audit, "--metrics=127.0.0.1:0"],
    )
    .await;
    let to = format!("http://localhost:{}/v1", up.port);
    let answer = exchange(server.addr, forward(&to), Vec::new()).await;
    assert_eq!(answer.status, 200, "{answer:?}\n{}", server.stderr());
    assert!(
        server.stderr().contains("moat: OBSERVE MODE"),
        "{}",
        server.stderr()
    );
    if let Some(n) = super::metrics::decisions(&server, "http-request", "would_deny").await {
        assert_eq!(n, 1.0);
    }
    server.terminate();
    assert_eq!(server.exited().await.code(), Some(0));
    let trail = std::fs::read_to_string(&observed).unwrap();
    assert!(trail.contains(r#""decision":"would-deny""#), "{trail}");
    let out = std::process::Command::new(MOAT)
        .args(["grants", "suggest"])
        .arg(&observed)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let flags: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("--"))
        .map(|l| l.split("  #").next().unwrap_or(l).trim())
        .collect();
    assert_eq!(
        flags,
        [format!("--allow-net=localhost:{}", up.port)],
        "{stdout}"
    );
    let granted = dir.join("granted.jsonl");
    let audit = format!("--audit={}", granted.display());
    let mut args = flags.clone();
    args.push(&audit);
    let mut server = Serve::start(guests::HTTP_MIDDLEWARE_P3, &args).await;
    let answer = exchange(server.addr, forward(&to), Vec::new()).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    server.terminate();
    assert_eq!(server.exited().await.code(), Some(0));
    let trail = std::fs::read_to_string(&granted).unwrap();
    assert!(!trail.contains(r#""decision":"denied""#), "{trail}");
    assert!(!trail.contains("would-deny"), "{trail}");
    assert_eq!(up.received().len(), 2);
}
