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
    let pid = server.child.id().expect("moat serve is running");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .expect("SIGTERM sent");
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
