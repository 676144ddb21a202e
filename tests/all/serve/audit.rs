//! `moat serve`: `moat serve --audit`: the trail of a server.

use super::*;

/// `moat serve --audit`: the operator's grant (`--addr`) is the trail's
/// `serve-bind`, with the address bound, and the trail is complete when
/// SIGTERM's stop ends the process.
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
}
