//! `moat serve` at SIGHUP: the component loaded again from its file and
//! put in the handler's place while the server goes on serving.

use std::path::Path;

use sha2::Digest;

use super::*;

/// Sends SIGHUP, as `systemctl reload` does.
fn hangup(server: &Serve) {
    let pid = server.child.id().expect("moat serve is running");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).unwrap(),
        rustix::process::Signal::HUP,
    )
    .expect("SIGHUP sent");
}

/// Puts `from`'s bytes at `to` in one step (written beside it, renamed
/// over it), as a deployment replaces a file.
fn replace(from: &str, to: &Path) {
    let next = to.with_extension("next");
    std::fs::copy(from, &next).unwrap();
    std::fs::rename(&next, to).unwrap();
}

/// Whether `text` holds `count` lines with `needle`, the last one whole.
fn lines_with(text: &str, needle: &str, count: usize) -> bool {
    text.match_indices(needle)
        .nth(count - 1)
        .is_some_and(|(at, _)| text[at..].contains('\n'))
}

/// Waits until stderr holds `count` whole lines with `needle`.
async fn wait_for_count(server: &mut Serve, needle: &str, count: usize) -> String {
    let seen = within(
        &format!("{needle:?} {count} times on moat serve's stderr"),
        server
            .stderr
            .wait_for(|seen| seen.closed || lines_with(&seen.text, needle, count)),
    )
    .await
    .expect("the stderr reader")
    .text
    .clone();
    assert!(lines_with(&seen, needle, count), "{seen}");
    seen
}

/// A fresh directory `name` under the tests' temporary directory, and in
/// it `handler.wasm`, a copy of http-hostile: the file a reload replaces.
fn handler_copy(name: &str) -> (PathBuf, PathBuf) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let component = dir.join("handler.wasm");
    std::fs::copy(guests::HTTP_HOSTILE, &component).unwrap();
    (dir, component)
}

/// SIGHUP with a new handler in the file: a request in flight (its body
/// half sent) finishes on the handler it started on; requests after the
/// reload get the new one, on the same server and port. A file that is
/// not a component, and a 0.3 service the server's engine cannot run,
/// are refused with why, and the handler it had goes on serving.
#[tokio::test]
async fn serve_reloads_its_component_at_sighup_and_keeps_the_old_one_on_failure() {
    let (dir, component) = handler_copy("serve-reload");
    // The request in flight holds its body back across the reload: no
    // minimum rate.
    let mut server = Serve::start_logging(
        component.to_str().unwrap(),
        &["--timeout=60s", "--min-http-body-rate=none"],
        Some("moat::http=debug"),
    )
    .await;
    let addr = server.addr;
    assert_eq!(get(addr, "/ok").await.text(), "ok\n");
    assert_eq!(get(addr, "/").await.status, 404, "http-hostile has no /");

    // A request in flight: its head and one byte of its body.
    let slow = TcpStream::connect(addr).await.unwrap();
    let (from, mut to) = slow.into_split();
    to.write_all(
        format!("POST /consume HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 1000\r\n\r\nx")
            .as_bytes(),
    )
    .await
    .unwrap();
    wait_for_count(&mut server, "a handler instance taken", 3).await;

    replace(guests::WSTD_SERVE, &component);
    hangup(&server);
    wait_for_count(&mut server, "moat: reloaded", 1).await;
    assert_eq!(get(addr, "/").await.text(), HELLO, "the new handler");

    to.write_all(&[b'y'; 999]).await.unwrap();
    let answer = within(
        "the request in flight answered",
        read_answer(&mut BufReader::new(from)),
    )
    .await
    .expect("an answer");
    assert_eq!(
        (answer.status, answer.text()),
        (200, "read 1000\n".to_owned()),
        "the old handler finished the request it had started"
    );

    std::fs::write(&component, b"not a component").unwrap();
    hangup(&server);
    let log = wait_for_count(&mut server, "moat: reload failed", 1).await;
    assert!(
        log.contains(r#"is not WebAssembly: it starts with "not a component" (text)"#),
        "{log}"
    );
    assert_eq!(
        get(addr, "/").await.text(),
        HELLO,
        "still the handler it had"
    );

    replace(guests::HTTP_SERVICE_P3, &component);
    hangup(&server);
    let log = wait_for_count(&mut server, "moat: reload failed", 2).await;
    assert!(
        log.contains("cannot replace the handler being served: it needs"),
        "{log}"
    );
    assert_eq!(
        get(addr, "/").await.text(),
        HELLO,
        "still the handler it had"
    );

    server.terminate();
    assert_eq!(server.exited().await.code(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--watch`: a new version put in place (renamed over the old, as a
/// deployment does) is loaded without a signal, and requests after it get
/// it; a file that is not a component put there next is refused and the
/// handler it had goes on.
#[tokio::test]
async fn serve_watch_loads_the_component_again_when_its_file_changes() {
    let (dir, component) = handler_copy("serve-watch");
    let mut server = Serve::start(component.to_str().unwrap(), &["--watch"]).await;
    let addr = server.addr;
    assert_eq!(get(addr, "/").await.status, 404, "http-hostile has no /");

    replace(guests::WSTD_SERVE, &component);
    let log = wait_for_count(&mut server, "moat: reloaded", 1).await;
    assert!(log.contains("handler.wasm changed: loading"), "{log}");
    assert_eq!(get(addr, "/").await.text(), HELLO, "the new handler");

    // Gone: said once, and the handler it had goes on; back, loaded.
    std::fs::remove_file(&component).unwrap();
    wait_for_count(&mut server, "handler.wasm is gone: still serving", 1).await;
    assert_eq!(get(addr, "/").await.text(), HELLO, "gone, still served");
    replace(guests::HTTP_HOSTILE, &component);
    let log = wait_for_count(&mut server, "moat: reloaded", 2).await;
    assert_eq!(log.matches("is gone").count(), 1, "said once: {log}");
    assert_eq!(get(addr, "/").await.status, 404, "back: http-hostile again");

    let garbage = dir.join("garbage");
    std::fs::write(&garbage, b"not a component").unwrap();
    std::fs::rename(&garbage, &component).unwrap();
    wait_for_count(&mut server, "moat: reload failed", 1).await;
    assert_eq!(get(addr, "/").await.status, 404, "still the handler it had");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 57: a reload loads (here compiles, with no cache) on a thread of
/// its own: a request on a new connection made while it runs is answered
/// at once, by the old handler; SIGHUPs that come meanwhile are merged
/// into one more reload after it, and stderr says so; the metrics count
/// each reload by result and name the handler served. Before, the compile
/// ran on the task that accepts connections: a new connection waited for
/// it (10.2 s for a 12 s compile) and got the new handler.
#[tokio::test]
async fn serve_answers_new_connections_while_a_reload_compiles() {
    let (dir, component) = handler_copy("serve-reload-busy");
    let mut server = Serve::start_cached(
        component.to_str().unwrap(),
        &["--metrics=127.0.0.1:0"],
        "--no-cache",
    )
    .await;
    let addr = server.addr;
    assert_eq!(get(addr, "/").await.status, 404, "http-hostile has no /");

    replace(guests::WSTD_SERVE, &component);
    hangup(&server);
    wait_for_count(&mut server, "again (the old handler serves meanwhile)", 1).await;
    // The compile takes half a second or more here; a request takes
    // milliseconds.
    let during = get(addr, "/").await;
    assert_eq!(
        during.status,
        404,
        "a new connection during the compile is answered by the old handler: {}",
        server.stderr()
    );
    hangup(&server);
    hangup(&server);
    let log = wait_for_count(&mut server, "moat: reloaded", 2).await;
    assert!(
        log.contains("SIGHUP: a reload is under way; one more follows it"),
        "{log}"
    );
    assert_eq!(get(addr, "/").await.text(), HELLO, "the new handler");

    std::fs::write(&component, b"\0asm garbage").unwrap();
    hangup(&server);
    wait_for_count(&mut server, "moat: reload failed", 1).await;
    if let Some(scraped) = super::metrics::scrape_if_able(&server).await {
        assert_eq!(scraped.get(r#"moat_reloads_total{result="ok"}"#), 2.0);
        assert_eq!(scraped.get(r#"moat_reloads_total{result="failed"}"#), 1.0);
        let digest = sha2::Sha256::digest(std::fs::read(guests::WSTD_SERVE).unwrap());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            scraped.get(&format!(
                r#"moat_handler_info{{file="handler.wasm",sha256="{hex}"}}"#
            )),
            1.0,
            "the handler served names the one that loaded last: {:?}",
            scraped.named("moat_handler_info")
        );
    }
    let stderr = server.stderr();
    assert_eq!(
        stderr.matches("moat: reloaded").count(),
        2,
        "the SIGHUPs during the first compile made one more reload, not two: {stderr}"
    );
    server.terminate();
    assert_eq!(server.exited().await.code(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Finding 7: SIGHUP with the component's path turned into a link to
/// `/dev/zero`, then into a sparse 3 GiB file, loads neither (before, the
/// server grew to 3.1 and 2.2 GB reading them) and the handler it had
/// goes on; a component in a directory the handler may write is refused at
/// start (it could replace itself for the next reload).
#[tokio::test]
async fn serve_reloads_only_a_regular_file_within_bounds() {
    let (dir, component) = handler_copy("serve-reload-file");
    let mut server = Serve::start(component.to_str().unwrap(), &[]).await;
    let addr = server.addr;
    assert_eq!(get(addr, "/ok").await.text(), "ok\n");

    let link = dir.join("link");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    std::fs::rename(&link, &component).unwrap();
    hangup(&server);
    let log = wait_for_count(&mut server, "moat: reload failed", 1).await;
    assert!(log.contains("symbolic link"), "{log}");

    let sparse = dir.join("sparse");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(3 << 30)
        .unwrap();
    std::fs::rename(&sparse, &component).unwrap();
    hangup(&server);
    let log = wait_for_count(&mut server, "moat: reload failed", 2).await;
    assert!(log.contains("3221225472 bytes, more than"), "{log}");
    assert_eq!(get(addr, "/ok").await.text(), "ok\n", "the handler it had");
    let pid = server.child.id().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let peak_kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    assert!(
        peak_kib < 1 << 20,
        "the server's peak RSS reached {peak_kib} KiB reading what is no component"
    );
    server.terminate();
    assert_eq!(server.exited().await.code(), Some(0));

    std::fs::copy(guests::HTTP_HOSTILE, &component).unwrap();
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_moat"))
        .args([
            "serve",
            &crate::support::cache_flag(),
            "--addr=127.0.0.1:0",
            &format!("--dir={}::/www:rw", dir.display()),
            component.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(err.contains("contains the component"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Round four's finding 7: a reload is on the trail, with the digest of
/// the bytes compiled; the records after it name the new handler (before,
/// the trail went on naming the first). A reload that fails is on it too
/// (before issue 57, only on stderr).
#[tokio::test]
async fn serve_records_each_reload_with_the_new_digest() {
    let (dir, component) = handler_copy("serve-reload-record");
    let trail = dir.join("audit.jsonl");
    let mut server = Serve::start(
        component.to_str().unwrap(),
        &[&format!("--audit={}", trail.display())],
    )
    .await;
    let before = sha256(&std::fs::read(&component).unwrap());
    replace(guests::WSTD_SERVE, &component);
    let after = sha256(&std::fs::read(&component).unwrap());
    assert_ne!(before, after);
    hangup(&server);
    wait_for_count(&mut server, "moat: reloaded", 1).await;
    assert_eq!(get(server.addr, "/").await.text(), HELLO);
    // Issue 57: a failed reload is on the trail too, naming the file and
    // why, under the handler still served.
    std::fs::write(&component, b"not a component").unwrap();
    hangup(&server);
    wait_for_count(&mut server, "moat: reload failed", 1).await;
    server.terminate();
    assert_eq!(server.exited().await.code(), Some(0));
    // Each checked against the schema.
    let records = crate::audit::records(&trail);
    let failed = records
        .iter()
        .find(|r| r["kind"] == "reload-failed")
        .unwrap_or_else(|| panic!("no reload-failed record: {records:?}"));
    assert_eq!(failed["file"], "handler.wasm", "{failed}");
    assert_eq!(
        failed["guest"]["sha256"],
        after.as_str(),
        "still served: {failed}"
    );
    assert!(
        failed["error"]
            .as_str()
            .is_some_and(|e| e.contains("is not WebAssembly: it starts with")),
        "{failed}"
    );
    let reload = records
        .iter()
        .find(|r| r["kind"] == "reload")
        .unwrap_or_else(|| panic!("no reload record: {records:?}"));
    assert_eq!(reload["guest"]["sha256"], after.as_str(), "{reload}");
    assert_eq!(reload["previous"]["sha256"], before.as_str(), "{reload}");
    assert_eq!(reload["guest"]["file"], "handler.wasm", "{reload}");
    let first = &records[0];
    assert_eq!(first["guest"]["sha256"], before.as_str(), "{first}");
    let _ = std::fs::remove_dir_all(&dir);
}
