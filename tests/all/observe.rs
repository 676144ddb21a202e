//! Observe mode (`--observe`) and grants drafted from its trail (`moat
//! grants suggest`), through the real `moat`: a run with no grants lets
//! everything through and records each would-deny; the draft of its
//! trail grants exactly that; a run under the draft has no denial.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::secrets::Recorder;
use crate::support::{self, guests};

const MOAT: &str = env!("CARGO_BIN_EXE_moat");

fn dir_of(test: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("observe-{test}"))
}

fn dir(test: &str) -> PathBuf {
    let dir = dir_of(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn moat(args: &[String]) -> Output {
    std::process::Command::new(MOAT)
        .args(args)
        .output()
        .expect("moat runs")
}

fn run(trail: &Path, flags: &[String], guest: &str, args: &[String]) -> Output {
    let mut all = vec![
        "run".to_owned(),
        support::cache_flag(),
        format!("--audit={}", trail.display()),
    ];
    all.extend(flags.iter().cloned());
    all.push(guest.to_owned());
    all.extend(args.iter().cloned());
    moat(&all)
}

fn lines_with(trail: &Path, needle: &str) -> usize {
    std::fs::read_to_string(trail)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(needle))
        .count()
}

/// The flags of a `moat grants suggest` draft.
fn suggested(trail: &Path) -> Vec<String> {
    let out = moat(&[
        "grants".into(),
        "suggest".into(),
        trail.display().to_string(),
    ]);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("--"))
        .map(|l| l.split("  #").next().unwrap_or(l).trim().to_owned())
        .collect()
}

/// Observe, draft, run under the draft: `guest args` reaches what it
/// needs in both runs, and only the first records would-denies.
async fn observe_then_grant(guest: &str, test: &str, args: impl Fn() -> Vec<String>) {
    let dir = dir(test);
    let observed = dir.join("observed.jsonl");
    let out = tokio::task::spawn_blocking({
        let (observed, guest, args) = (observed.clone(), guest.to_owned(), args());
        move || run(&observed, &["--observe".into()], &guest, &args)
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains("moat: OBSERVE MODE"),
        "said at start:\n{stderr}"
    );
    assert!(!stdout.contains("error"), "nothing refused:\n{stdout}");
    let would = lines_with(&observed, r#""decision":"would-deny""#);
    assert!(
        would >= 1,
        "{}",
        std::fs::read_to_string(&observed).unwrap()
    );
    assert_eq!(lines_with(&observed, r#""decision":"denied""#), 0);
    let records = lines_with(&observed, r#""run":"#);
    assert_eq!(
        lines_with(&observed, r#""observe":true"#),
        records,
        "every record says the run observed"
    );
    let flags = suggested(&observed);
    assert!(!flags.is_empty());
    assert!(
        flags
            .iter()
            .all(|f| f.starts_with("--allow-net=") && !f.contains('*')),
        "narrow grants only: {flags:?}"
    );
    let granted = dir.join("granted.jsonl");
    let out = tokio::task::spawn_blocking({
        let (granted, guest, args, flags) =
            (granted.clone(), guest.to_owned(), args(), flags.clone());
        move || run(&granted, &flags, &guest, &args)
    })
    .await
    .unwrap();
    let again = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{flags:?}: {again}");
    assert_eq!(stdout, again, "the same program, the same output");
    assert_eq!(
        lines_with(&granted, r#""decision":"denied""#)
            + lines_with(&granted, r#""decision":"would-deny""#),
        0,
        "under {flags:?}: {}",
        std::fs::read_to_string(&granted).unwrap()
    );
}

#[tokio::test]
async fn an_observed_p2_guest_drafts_the_grants_it_needs() {
    let (a, b) = (Recorder::plain().await, Recorder::plain().await);
    let urls = move || {
        vec![
            "fetch-all".to_owned(),
            format!("http://127.0.0.1:{}/one", a.port),
            format!("http://localhost:{}/two", b.port),
        ]
    };
    observe_then_grant(guests::HTTP_PROBE, "p2", urls).await;
}

#[tokio::test]
async fn an_observed_p3_guest_drafts_the_grants_it_needs() {
    let a = Recorder::plain().await;
    let url = move || vec!["fetch".to_owned(), format!("http://localhost:{}/", a.port)];
    observe_then_grant(guests::HTTP_P3, "p3", url).await;
}

/// A peer on 127.0.0.1 that echoes every connection to its end.
async fn echo_peer() -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut got = Vec::new();
                if stream.read_to_end(&mut got).await.is_ok() {
                    let _ = stream.write_all(&got).await;
                }
            });
        }
    });
    port
}

/// A stock std::net program: its lookup and its connect by address are
/// let through and recorded, and the draft covers both.
#[tokio::test]
async fn an_observed_stock_program_drafts_its_lookup_and_connect() {
    let port = echo_peer().await;
    let args = move || {
        vec![
            "tcp-client".to_owned(),
            "localhost".to_owned(),
            port.to_string(),
            "hi".to_owned(),
        ]
    };
    observe_then_grant(guests::STD_NET, "stock", args).await;
    let observed = dir_of("stock").join("observed.jsonl");
    assert!(lines_with(&observed, r#""operation":"lookup""#) >= 1);
    assert!(lines_with(&observed, r#""decision":"would-deny""#) >= 2);
}

/// Deny entries hold in observe mode, and observe mode needs a trail.
#[tokio::test]
async fn observe_mode_keeps_deny_entries_and_needs_a_trail() {
    let (a, b) = (Recorder::plain().await, Recorder::plain().await);
    let dir = dir("deny");
    let trail = dir.join("trail.jsonl");
    let args = vec![
        "fetch-all".to_owned(),
        format!("http://127.0.0.1:{}/", a.port),
        format!("http://127.0.0.1:{}/", b.port),
    ];
    let flags = vec![
        "--observe".to_owned(),
        format!("--deny-net=127.0.0.1:{}", b.port),
    ];
    let out = tokio::task::spawn_blocking({
        let trail = trail.clone();
        move || run(&trail, &flags, guests::HTTP_PROBE, &args)
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("http://127.0.0.1:{}/: status: 200", a.port)),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "http://127.0.0.1:{}/: error: ErrorCode::HttpRequestDenied",
            b.port
        )),
        "{stdout}"
    );
    assert_eq!(b.received().len(), 0, "the denied host received nothing");
    assert_eq!(lines_with(&trail, r#""kind":"deny-entry""#), 1);
    // Without --audit, observe mode would let through what nobody sees.
    let out = moat(&[
        "run".into(),
        "--observe".into(),
        guests::HTTP_PROBE.into(),
        "fetch".into(),
        "http://127.0.0.1:9/".into(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--observe: observe mode's record"),
        "{out:?}"
    );
}
