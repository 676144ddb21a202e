//! The `moat` command as a user runs it: flags, exit codes, messages, and
//! (under strace) what a denied call does not do.

use crate::support;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::guests;

const MOAT: &str = env!("CARGO_BIN_EXE_moat");

fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-cache")
}

/// `moat run --cache-dir=... ARGS`.
fn moat_run(args: &[&str]) -> Output {
    let cache = format!("--cache-dir={}", cache_dir().display());
    Command::new(MOAT)
        .arg("run")
        .arg(cache)
        .args(args)
        .output()
        .expect("moat runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn peer() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    (listener, port)
}

#[test]
fn help_documents_every_flag_with_an_example() {
    let top = Command::new(MOAT).arg("--help").output().unwrap();
    assert!(top.status.success());
    assert!(text(&top.stdout).contains("run"), "{}", text(&top.stdout));
    let run = Command::new(MOAT).args(["run", "--help"]).output().unwrap();
    let help = text(&run.stdout);
    for flag in [
        "--allow-net",
        "--allow-listen",
        "--env",
        "--dir",
        "--cache-dir",
        "--no-cache",
        "--deny-net",
        "--deny-listen",
        "--policy",
        "--max-sockets",
        "--max-waiting-calls",
        "--max-memory",
        "--timeout",
        "--max-lookups",
        "--lookup-timeout",
        "--tls-handshake-timeout",
        "--max-connections",
        "--max-connections-per-peer",
        "--audit",
    ] {
        let line = help.lines().find(|l| l.trim_start().starts_with(flag));
        assert!(line.is_some(), "{flag} is not documented:\n{help}");
    }
    assert!(help.contains("Example: --allow-net="), "{help}");
    assert!(help.contains("Examples:"), "{help}");
    assert!(
        help.contains("--allow-net --deny-net=private,metadata"),
        "{help}"
    );
}

#[test]
fn a_denied_call_prints_its_message_with_the_flag_to_use_and_exits_1() {
    let (_peer, port) = peer();
    let out = moat_run(&[guests::PROBE, "connect", "127.0.0.1", &port]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!("error: connect to 127.0.0.1:{port} denied: needs --allow-net=127.0.0.1:{port}\n")
    );
}

#[test]
fn the_flag_the_hint_names_allows_the_call() {
    let (_peer, port) = peer();
    let flag = format!("--allow-net=127.0.0.1:{port}");
    let out = moat_run(&[&flag, guests::PROBE, "connect", "127.0.0.1", &port]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("connected to 127.0.0.1:"));
}

#[test]
fn a_bare_flag_allows_everything_and_does_not_swallow_the_component() {
    let (_peer, port) = peer();
    let out = moat_run(&["--allow-net", guests::PROBE, "connect", "127.0.0.1", &port]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn the_exit_code_is_the_guests() {
    let (_peer, port) = peer();
    let out = moat_run(&[
        "--allow-net=127.0.0.1",
        "--allow-listen=127.0.0.1",
        guests::PROBE,
        "exit",
        "127.0.0.1",
        &port,
        "0",
        "42",
    ]);
    assert_eq!(out.status.code(), Some(42), "{}", text(&out.stderr));
    let out = moat_run(&[guests::PROBE, "no-such-command"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "error: invalid argument: probe: unknown command no-such-command\n"
    );
}

/// With RUST_BACKTRACE=1, as in many Rust users' shells: the guest's wasm
/// backtrace and the trap, never the host's own stack after them.
#[test]
fn a_trap_exits_134_with_the_reason_and_the_guests_backtrace_alone() {
    let (_peer, port) = peer();
    let cache = format!("--cache-dir={}", cache_dir().display());
    let out = Command::new(MOAT)
        .env("RUST_BACKTRACE", "1")
        .args([
            "run",
            &cache,
            "--allow-net=127.0.0.1",
            "--allow-listen=127.0.0.1",
            guests::PROBE,
            "trap",
            "127.0.0.1",
            &port,
            "0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(134));
    let err = text(&out.stderr);
    assert!(err.contains("probe: trapping with sockets open"), "{err}");
    assert!(err.contains("moat: error: the guest trapped"), "{err}");
    assert!(err.contains("wasm backtrace:"), "{err}");
    assert!(err.contains("__moat_main"), "the guest's own frames: {err}");
    assert!(
        err.contains("Caused by:\n    wasm trap: wasm `unreachable` instruction executed"),
        "{err}"
    );
    assert!(
        !err.contains("Stack backtrace:") && !err.contains("wasmtime::runtime"),
        "the host's frames after a guest's trap: {err}"
    );
}

#[test]
fn a_guest_whose_tasks_only_wait_on_each_other_stops_instead_of_hanging() {
    // Nothing on the host (no socket, timer or stdin) can wake such a
    // guest: its runtime panics, and `moat run` ends as for any trap.
    let mut child = Command::new(MOAT)
        .arg("run")
        .arg(format!("--cache-dir={}", cache_dir().display()))
        .args([guests::PROBE, "deadlock"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("moat runs");
    let deadline = Instant::now() + support::PATIENCE;
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "the deadlocked guest still runs after {:?}",
                support::PATIENCE
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().expect("output");
    assert_eq!(out.status.code(), Some(134), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("waiting on a task that never ends"),
        "{}",
        text(&out.stdout)
    );
    let err = text(&out.stderr);
    assert!(
        err.contains("cannot sleep waiting only on Rust-originating events"),
        "{err}"
    );
    assert!(err.contains("moat: error: the guest trapped"), "{err}");
}

#[test]
fn env_and_args_reach_the_guest() {
    let out = Command::new(MOAT)
        .env("MOAT_FROM_HOST", "passed on")
        .args(["run", "--env=MOAT_TEST=hello", "--env", "MOAT_FROM_HOST"])
        .arg(support::cache_flag())
        .args([guests::PROBE, "env", "a", "-b", "--c=d"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains(r#"args: ["a", "-b", "--c=d"]"#), "{stdout}");
    assert!(stdout.contains("MOAT_TEST=hello"), "{stdout}");
}

#[test]
fn bad_command_lines_exit_2_and_say_why() {
    let out = moat_run(&["--allow-net=127.1", guests::PROBE, "env"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("--allow-net=127.1") && err.contains("not a canonical IP address"),
        "{err}"
    );

    assert_eq!(
        err.matches("not a canonical IP address").count(),
        1,
        "the policy parser's reason once, not again as its source: {err}"
    );

    // A bound is read one way from every source, and named as written.
    for (flag, says) in [
        (
            "--max-sockets=0",
            "--max-sockets=0: must be at least 1, found 0",
        ),
        (
            "--max-lookups=ten",
            "--max-lookups=ten: expected a whole number such as 64",
        ),
        ("--max-memory=", "--max-memory=: needs a value"),
        (
            "--timeout=5 parsecs",
            "--timeout=5 parsecs: \"5 parsecs\": unknown unit",
        ),
        // A number alone: a unit is what the flag needs (a policy file's
        // quotes are no part of it).
        (
            "--max-host-memory=64",
            "--max-host-memory=64: \"64\" has no unit: add one of B, KiB, MiB or GiB\n",
        ),
        (
            "--timeout=30",
            "--timeout=30: \"30\" has no unit: add one of ms, s, m or h\n",
        ),
    ] {
        let out = moat_run(&[flag, guests::PROBE, "env"]);
        assert_eq!(out.status.code(), Some(2), "{flag}");
        let err = text(&out.stderr);
        assert!(
            err.starts_with(&format!("moat: error: {says}")),
            "{flag}: {err}"
        );
        assert!(!err.contains("quotes"), "{flag}: {err}");
    }

    let out = moat_run(&["--dir=/no/such/dir", guests::PROBE, "env"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("/no/such/dir is not a directory"));
}

#[test]
fn a_missing_component_gets_a_hint() {
    let out = moat_run(&["no-such-guest.wasm"]);
    assert_eq!(out.status.code(), Some(126));
    let err = text(&out.stderr);
    assert!(
        err.starts_with("moat: error: cannot read the component no-such-guest.wasm"),
        "{err}"
    );
    assert!(err.contains("moat: hint: build guests with"), "{err}");
}

/// Issue 57: a file that is not WebAssembly at all is named as such, in
/// one line that says what it starts with (before: wasmtime's expected
/// and actual magic bytes, two byte arrays over 12 lines).
#[test]
fn a_file_that_is_not_webassembly_says_what_it_starts_with() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("not-wasm");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, bytes, said) in [
        (
            "page.wasm",
            &b"<!DOCTYPE html>\n<html>Not Found</html>\n"[..],
            r#"page.wasm is not WebAssembly: it starts with "<!DOCTYPE html>\n<html>No" (an HTML page: a download that saved an error page?)"#,
        ),
        (
            "empty.wasm",
            b"",
            "empty.wasm is not WebAssembly: it starts with nothing: the file is empty",
        ),
        (
            "random.wasm",
            b"\xb7\xf1\x42\xb1\xdf\x6b\x0a\x64\x99",
            "random.wasm is not WebAssembly: it starts with the bytes b7 f1 42 b1 df 6b 0a 64 (WebAssembly starts with 00 61 73 6d)",
        ),
    ] {
        let file = dir.join(name);
        std::fs::write(&file, bytes).unwrap();
        let out = moat_run(&[file.to_str().unwrap()]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(126), "{err}");
        assert!(err.contains(said), "{err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
    }
}

/// An empty value sets nothing, from every source: an empty grant
/// grants nothing, and the call it would have allowed is denied, with the
/// hint.
#[test]
fn an_empty_grant_grants_nothing() {
    let out = moat_run(&["--allow-listen=", guests::PROBE, "listen", "127.0.0.1", "0"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("listen on 127.0.0.1:0 denied: needs --allow-listen=127.0.0.1:0"),
        "{err}"
    );
}

#[test]
fn a_url_given_as_a_grant_or_deny_entry_gets_the_entry_to_write() {
    for (flag, url, entry) in [
        ("--allow-net", "http://127.0.0.1:8765", "127.0.0.1:8765"),
        (
            "--allow-net",
            "https://api.example.com/v1/",
            "api.example.com:443",
        ),
        ("--deny-net", "https://example.com/x", "example.com:443"),
    ] {
        let out = moat_run(&[&format!("{flag}={url}"), guests::PROBE, "env"]);
        assert_eq!(out.status.code(), Some(2), "{flag}={url}");
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!("write the host and port alone, `{entry}`")),
            "{err}"
        );
    }
}

#[test]
fn a_grant_after_a_space_gets_a_hint_about_the_equals_sign() {
    for (flag, list) in [
        ("--allow-net", "localhost:18000"),
        ("--allow-listen", "127.0.0.1:8000,[::1]:8000"),
    ] {
        let out = moat_run(&[flag, list, guests::PROBE, "env"]);
        assert_eq!(out.status.code(), Some(126));
        let err = text(&out.stderr);
        assert!(
            err.starts_with(&format!("moat: error: cannot read the component {list}")),
            "{err}"
        );
        assert!(
            err.contains(&format!("a list follows an `=`: {flag}={list}")),
            "{err}"
        );
        assert!(!err.contains("build guests with"), "{err}");
    }
}

#[test]
fn a_directory_is_visible_under_its_guest_path() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-dir");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("greeting.txt"), "hello from the host").unwrap();
    let flag = format!("--dir={}::/data", dir.display());
    let out = moat_run(&[&flag, guests::PROBE, "cat", "/data/greeting.txt"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "hello from the host");
}

#[test]
fn rust_log_shows_socket_events() {
    let (_peer, port) = peer();
    let cache = format!("--cache-dir={}", cache_dir().display());
    let out = Command::new(MOAT)
        .env("RUST_LOG", "moat::net=debug")
        .args([
            "run",
            &cache,
            "--allow-net=127.0.0.1",
            guests::PROBE,
            "connect",
            "127.0.0.1",
            &port,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let err = text(&out.stderr);
    assert!(
        err.contains("moat::net") && err.contains("connected"),
        "{err}"
    );
    // A stock program's allowed calls too, with the grant that allowed them.
    let (listener, port) = peer();
    let reader = std::thread::spawn(move || {
        use std::io::Read;
        let (mut conn, _) = listener.accept().unwrap();
        conn.read_to_end(&mut Vec::new()).unwrap();
    });
    let out = Command::new(MOAT)
        .env("RUST_LOG", "moat::net=debug")
        .args([
            "run",
            &cache,
            "--allow-net=127.0.0.1",
            guests::STD_NET,
            "tcp-client",
            "127.0.0.1",
            &port,
            "x",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    reader.join().unwrap();
    let err = text(&out.stderr);
    let allowed = err
        .lines()
        .find(|l| l.contains("moat::net") && l.contains("allowed"))
        .unwrap_or_else(|| panic!("no allowed connect logged: {err}"));
    assert!(
        allowed.contains(&format!("addr=127.0.0.1:{port}"))
            && allowed.contains("operation=\"connect\"")
            && allowed.contains("127.0.0.1 (--allow-net)"),
        "{allowed}"
    );
}

#[test]
fn compiled_code_is_cached_on_disk() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fresh-cache");
    let _ = std::fs::remove_dir_all(&dir);
    let flag = format!("--cache-dir={}", dir.display());
    let files = |dir: &PathBuf| walk(dir).len();
    let out = Command::new(MOAT)
        .args(["run", "--no-cache", guests::PROBE, "env"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!dir.exists());
    let out = Command::new(MOAT)
        .args(["run", &flag, guests::PROBE, "env"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(files(&dir) > 0, "nothing cached in {}", dir.display());
}

#[test]
fn moat_compile_fills_the_cache_that_moat_run_then_reads() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("compile-cache");
    let _ = std::fs::remove_dir_all(&dir);
    let flag = format!("--cache-dir={}", dir.display());
    let compile = |component: &str| {
        Command::new(MOAT)
            .args(["compile", &flag, component])
            .output()
            .unwrap()
    };
    let out = compile(guests::HELLO);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.starts_with(&format!("{}: compiled in ", guests::HELLO)),
        "{said}"
    );
    assert!(
        said.contains(&format!("cache: {} (", dir.display())) && said.ends_with(" MB)\n"),
        "{said}"
    );
    // The compiled code, without the usage statistics wasmtime's cache
    // writes beside it in the background.
    let code = |dir: &PathBuf| {
        let mut files: Vec<PathBuf> = walk(dir)
            .into_iter()
            .filter(|f| f.extension().is_none_or(|e| e != "stats"))
            .collect();
        files.sort();
        files
    };
    let cached = code(&dir);
    assert!(!cached.is_empty(), "nothing cached in {}", dir.display());
    // Stderr is not a terminal here, and the compile took less than the
    // 5 s after which a log is told: no progress line.
    assert_eq!(text(&out.stderr), "");

    let again = compile(guests::HELLO);
    assert!(
        text(&again.stdout).starts_with(&format!("{}: already cached in ", guests::HELLO)),
        "{}",
        text(&again.stdout)
    );
    // A run finds it there: it compiles nothing and adds nothing.
    let out = Command::new(MOAT)
        .args(["run", &flag, guests::HELLO])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "", "a cached run says nothing");
    assert_eq!(code(&dir), cached);

    let missing = compile("no-such-guest.wasm");
    assert_eq!(missing.status.code(), Some(126));
    assert!(
        text(&missing.stderr)
            .starts_with("moat: error: cannot read the component no-such-guest.wasm"),
        "{}",
        text(&missing.stderr)
    );
}

#[test]
fn a_component_that_imports_what_moat_does_not_serve_gets_every_import_named() {
    let out = moat_run(&[guests::UNSERVED]);
    assert_eq!(out.status.code(), Some(126), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    let expected = format!(
        "moat: error: cannot start {}: it imports what moat does not serve:\n\
         \x20 example:host@1.0.0: log, config (moat does not serve example:host: the \
         component was built for another host; moat serves WASI 0.2 and 0.3.0 and moat:net)\n\
         \x20 wasi:keyvalue@0.2.0-draft: store (moat does not serve wasi:keyvalue; it serves \
         wasi:cli, wasi:clocks, wasi:filesystem, wasi:io, wasi:random, wasi:sockets, wasi:http \
         (0.2) and wasi:cli, wasi:clocks, wasi:filesystem, wasi:random, wasi:sockets, \
         wasi:http (0.3.0))\n\
         \x20 wasi:random@0.3.0-rc-2025-09-16: random (a WASI 0.3 release candidate; moat \
         serves wasi:random 0.3.0 and 0.2: build the component with a toolchain for WASI \
         0.3.0 or 0.2)\n",
        guests::UNSERVED
    );
    assert_eq!(err, expected);
}

#[test]
fn an_http_handler_given_to_moat_run_is_sent_to_moat_serve() {
    let out = moat_run(&[guests::WSTD_SERVE]);
    assert_eq!(out.status.code(), Some(126), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        format!(
            "moat: error: cannot run {}: it is an HTTP handler (it exports \
             wasi:http/incoming-handler@0.2.12), which `moat run` does not call: serve it \
             with `moat serve`\n",
            guests::WSTD_SERVE
        )
    );
}

/// A cache that cannot be made, or that is full: the guest runs all the
/// same, and stderr says why its code was not kept.
#[test]
fn a_cache_that_cannot_be_written_costs_the_cache_not_the_run() {
    let scratch = crate::files::Scratch::new("cache-faults");
    // Under a regular file: no directory can be made there, root or not.
    let file = scratch.join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    // The guest runs, its output whole; what stderr said.
    let hello = |cache: String| {
        let out = Command::new(MOAT)
            .args(["run", &format!("--cache-dir={cache}"), guests::HELLO])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "hello from a moat guest\n");
        text(&out.stderr)
    };
    let err = hello(format!("{}/cache", file.display()));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("compiled-code cache")
            && err.contains("is not used")
            && err.contains("a-file/cache"),
        "{err}"
    );

    // Full: a 64 KiB filesystem, which the compiled code does not fit.
    const TEST: &str = "a_cache_that_cannot_be_written_costs_the_cache_not_the_run";
    if crate::files::skip_without_mount(TEST, None) {
        return;
    }
    let full = scratch.join("full");
    let _mounted =
        match crate::files::mount(&["-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs"], &full) {
            Ok(mounted) => mounted,
            Err(why) => {
                crate::files::skip_without_mount(TEST, Some(why));
                return;
            }
        };
    let err = hello(full.display().to_string());
    assert!(
        !err.is_empty() && err.lines().all(|l| l.contains("No space left on device")),
        "{err}"
    );
}

/// The compiled code of `component` in the cache at `dir`: compiled
/// there by `moat compile` (the one file that appears).
fn cache_entry(dir: &std::path::Path, component: &str) -> PathBuf {
    let before: Vec<PathBuf> = walk(&dir.join("code"));
    let out = Command::new(MOAT)
        .arg("compile")
        .arg(format!("--cache-dir={}", dir.display()))
        .arg(component)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let made: Vec<PathBuf> = walk(&dir.join("code"))
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect();
    assert_eq!(made.len(), 1, "{made:?}");
    made.into_iter().next().unwrap()
}

/// A compiled-code entry is native code the next run executes. One
/// prepared elsewhere (another user's moat, another cache, another key)
/// and put in place of the entry of the component about to run is never
/// executed: it fails its authentication, the component is compiled
/// afresh, and one warning says so.
#[test]
fn a_planted_cache_entry_is_never_run() {
    let scratch = crate::files::Scratch::new("planted-entry");
    let theirs = scratch.join("theirs");
    let mine = scratch.join("mine");
    // The planted code: a whole, valid entry, for the guest that says
    // hello, from a cache of its own.
    let planted = cache_entry(&theirs, guests::HELLO);
    let target = cache_entry(&mine, guests::PROBE);
    std::fs::copy(&planted, &target).unwrap();
    let out = Command::new(MOAT)
        .args([
            "run",
            &format!("--cache-dir={}", mine.display()),
            guests::PROBE,
            "env",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with(
            "args: []
"
        ),
        "the planted code ran: {}",
        text(&out.stdout)
    );
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("was not written by this user's moat") && err.contains("compiling afresh"),
        "{err}"
    );
    // Replaced by its own code: the next run says nothing.
    let out = Command::new(MOAT)
        .args([
            "run",
            &format!("--cache-dir={}", mine.display()),
            guests::PROBE,
            "env",
        ])
        .output()
        .unwrap();
    assert_eq!(text(&out.stderr), "");
}

/// A cache directory that other users may write (a shared one, mode 0777
/// or 1777) is not used at all, whatever it holds: the run compiles, says
/// why once, and neither reads nor writes there; `moat compile` refuses
/// it.
#[test]
fn a_cache_directory_others_may_write_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = crate::files::Scratch::new("shared-cache");
    let shared = scratch.join("shared");
    // A whole, valid entry for PROBE's name, planted there by another
    // user (uid 65534) in a directory anyone may write.
    let planted = cache_entry(&shared, guests::HELLO);
    let target = cache_entry(&scratch.join("probe-name"), guests::PROBE);
    let name = target.file_name().unwrap();
    std::fs::copy(&planted, shared.join("code").join(name)).unwrap();
    for dir in [shared.clone(), shared.join("code")] {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    }
    let _ = std::os::unix::fs::chown(shared.join("code").join(name), Some(65534), Some(65534));
    let before = walk(&shared);
    let out = Command::new(MOAT)
        .args([
            "run",
            &format!("--cache-dir={}", shared.display()),
            guests::PROBE,
            "env",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with(
            "args: []
"
        ),
        "{}",
        text(&out.stdout)
    );
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "the compiled-code cache {} is not used",
            shared.display()
        )) && err.contains("may be written by other users (mode 1777)"),
        "{err}"
    );
    assert_eq!(walk(&shared), before, "nothing written there");
    let compile = Command::new(MOAT)
        .arg("compile")
        .arg(format!("--cache-dir={}", shared.display()))
        .arg(guests::HELLO)
        .output()
        .unwrap();
    assert_eq!(compile.status.code(), Some(2));
    assert!(
        text(&compile.stderr).contains("the cache directory is not used"),
        "{}",
        text(&compile.stderr)
    );
}

/// A guest given a directory that holds the compiled-code cache (the
/// default one under $HOME, or the run's own) could plant native code
/// there for a later run: the run is refused before the guest starts, and
/// the error names the cache.
#[test]
fn a_directory_that_holds_the_cache_is_not_given_to_a_guest() {
    let scratch = crate::files::Scratch::new("cache-preopen");
    let home = scratch.join("home");
    std::fs::create_dir_all(home.join("work")).unwrap();
    // The default cache, $HOME/.cache/moat, whether or not it exists yet.
    let out = Command::new(MOAT)
        .env("HOME", &home)
        .env_remove("XDG_CACHE_HOME")
        .args([
            "run",
            &format!("--dir={}::/home:rw", home.display()),
            guests::FS_PROBE,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(&format!(
            "it contains moat's compiled-code cache {}/.cache/moat",
            home.display()
        )),
        "{}",
        text(&out.stderr)
    );
    // The run's own cache, given read-only, and a directory inside it.
    let cache = scratch.join("cache");
    for dir in [cache.clone(), cache.join("code")] {
        std::fs::create_dir_all(&dir).unwrap();
        let out = Command::new(MOAT)
            .env("HOME", &home)
            .args([
                "run",
                &format!("--cache-dir={}", cache.display()),
                &format!("--dir={}::/c", dir.display()),
                guests::FS_PROBE,
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("moat's compiled-code cache"),
            "{}",
            text(&out.stderr)
        );
    }
    // A directory beside it is fine.
    let out = Command::new(MOAT)
        .env("HOME", &home)
        .args([
            "run",
            &format!("--dir={}::/w", home.join("work").display()),
            guests::HELLO,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
}

fn walk(dir: &PathBuf) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .flat_map(|e| {
            let path = e.path();
            if path.is_dir() {
                walk(&path)
            } else {
                vec![path]
            }
        })
        .collect()
}

/// strace, or `None` (skip) when it is missing outside CI.
fn strace() -> Option<&'static str> {
    let found = Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return Some("strace");
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "strace is missing in CI (.ci/run installs it)"
    );
    eprintln!("skipping: strace is not installed (apt-get install strace)");
    None
}

/// The network syscalls and name-service file opens of `moat run ARGS`.
fn traced(strace: &str, args: &[&str]) -> (Output, String) {
    let trace = tempfile_path("trace");
    let cache = format!("--cache-dir={}", cache_dir().display());
    let out = Command::new(strace)
        .args([
            "-f",
            "-qq",
            "-e",
            "trace=socket,connect,bind,sendto,sendmsg,openat",
            "-o",
        ])
        .arg(&trace)
        .args([MOAT, "run", &cache])
        .args(args)
        .output()
        .unwrap();
    let log = std::fs::read_to_string(&trace).unwrap_or_default();
    let _ = std::fs::remove_file(&trace);
    (out, log)
}

fn tempfile_path(what: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{what}-{}-{n}", std::process::id()))
}

fn inet_sockets(log: &str) -> usize {
    log.lines()
        .filter(|l| l.contains("socket(AF_INET") || l.contains("socket(AF_INET6"))
        .count()
}

fn name_lookups(log: &str) -> usize {
    log.lines()
        .filter(|l| {
            ["/etc/hosts", "/etc/resolv.conf", "/etc/nsswitch.conf"]
                .iter()
                .any(|f| l.contains(f))
        })
        .count()
}

#[test]
fn a_denied_call_makes_no_socket_and_no_dns_query() {
    let Some(strace) = strace() else { return };
    // Denied by name: no lookup, no socket.
    let (out, log) = traced(strace, &[guests::PROBE, "connect", "localhost", "9"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("denied"));
    assert_eq!(inet_sockets(&log), 0, "{log}");
    assert_eq!(name_lookups(&log), 0, "{log}");
    // Denied listen: no socket, no bind.
    let (out, log) = traced(strace, &[guests::PROBE, "listen", "127.0.0.1", "0"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(inet_sockets(&log), 0, "{log}");
    assert!(!log.contains("bind("), "{log}");

    // The same calls allowed do show up in the trace: it would have seen them.
    let (_peer, port) = peer();
    let (out, log) = traced(
        strace,
        &[
            "--allow-net=localhost",
            guests::PROBE,
            "connect",
            "localhost",
            &port,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(inet_sockets(&log) > 0, "{log}");
    assert!(name_lookups(&log) > 0, "{log}");
}

/// Whether the trace shows a `syscall` to or on port `port`.
fn touched_port(log: &str, syscall: &str, port: &str) -> bool {
    let port = format!("htons({port})");
    log.lines()
        .any(|l| l.contains(&format!("{syscall}(")) && l.contains(&port))
}

#[test]
fn a_stock_program_denied_makes_no_dns_query_and_no_connect_bind_or_send() {
    let Some(strace) = strace() else { return };
    // A name no grant names: refused before any lookup, and nothing after.
    let (out, log) = traced(
        strace,
        &[guests::STD_NET, "tcp-client", "localhost", "9", "x"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("moat: std-net: lookup of localhost denied"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(name_lookups(&log), 0, "{log}");
    assert_eq!(inet_sockets(&log), 0, "{log}");
    // An address: wasi:sockets makes the socket when the program asks for
    // one, before any address is known; the denied connect never happens.
    let (_peer, port) = peer();
    let (out, log) = traced(
        strace,
        &[guests::STD_NET, "tcp-client", "127.0.0.1", &port, "x"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert_eq!(
        text(&out.stderr),
        format!(
            "moat: std-net: connect to 127.0.0.1:{port} denied: needs --allow-net=127.0.0.1:{port}\n"
        )
    );
    assert!(!touched_port(&log, "connect", &port), "{log}");
    // A denied listen binds nothing; a denied send sends nothing.
    let (out, log) = traced(
        strace,
        &[guests::STD_NET, "tcp-server", &format!("127.0.0.1:{port}")],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(!touched_port(&log, "bind", &port), "{log}");
    let (out, log) = traced(
        strace,
        &[guests::STD_NET, "udp-client", "127.0.0.1", &port, "x"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(!touched_port(&log, "sendto", &port), "{log}");
    assert!(!touched_port(&log, "sendmsg", &port), "{log}");

    // Allowed, the same calls show up in the trace: it would have seen them.
    let (listener, port) = peer();
    // Reads what the guest sends, then closes: a clean end, no reset.
    let closer = std::thread::spawn(move || {
        use std::io::Read;
        let (mut conn, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        conn.read_to_end(&mut got).unwrap();
        got
    });
    let flag = format!("--allow-net=localhost:{port}");
    let (out, log) = traced(
        strace,
        &[
            &flag,
            guests::STD_NET,
            "tcp-client",
            "localhost",
            &port,
            "x",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(name_lookups(&log) > 0, "{log}");
    assert!(touched_port(&log, "connect", &port), "{log}");
    assert_eq!(closer.join().unwrap(), b"x");
}

#[test]
fn deny_flags_win_over_grants_and_name_the_entry() {
    let (peer, port) = peer();
    peer.set_nonblocking(true).unwrap();
    let out = moat_run(&[
        "--allow-net",
        "--deny-net=metadata,private",
        guests::PROBE,
        "connect",
        "::ffff:127.0.0.1",
        &port,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!("error: connect to 127.0.0.1:{port} denied by --deny-net=private\n")
    );
    assert!(peer.accept().is_err(), "a denied connect got through");
    // Unknown words and bad entries are refused before anything runs.
    let out = moat_run(&["--deny-net=privat:x", guests::PROBE, "env"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--deny-net=privat:x"),
        "{}",
        text(&out.stderr)
    );
}

/// Writes `text` to a policy file of its own and returns its path.
fn policy_file(name: &str, text: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_policy_file_holds_grants_denies_and_bounds_and_flags_add_to_it() {
    let (_peer, port) = peer();
    let file = policy_file(
        "policy-ok",
        &format!(
            "# the probe may reach one port, and hold few sockets\n\
             allow-net = [\"127.0.0.1:{port}\"]\n\
             deny-net = [\"metadata\"]\n\
             max-sockets = 2\n"
        ),
    );
    let policy = format!("--policy={}", file.display());
    let out = moat_run(&[&policy, guests::PROBE, "connect", "127.0.0.1", &port]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // The file's bound holds...
    let out = moat_run(&[
        &policy,
        guests::HOSTILE,
        "hold-sockets",
        "127.0.0.1",
        &port,
        "5",
    ]);
    assert!(
        text(&out.stdout).contains("held 2; stopped by: limit reached"),
        "{}",
        text(&out.stdout)
    );
    // ...unless a flag says otherwise; flags add to its grants.
    let out = moat_run(&[
        &policy,
        "--max-sockets=3",
        guests::HOSTILE,
        "hold-sockets",
        "127.0.0.1",
        &port,
        "5",
    ]);
    assert!(
        text(&out.stdout).contains("held 3;"),
        "{}",
        text(&out.stdout)
    );
    let out = moat_run(&[
        &policy,
        "--deny-net=127.0.0.1",
        guests::PROBE,
        "connect",
        "127.0.0.1",
        &port,
    ]);
    assert!(
        text(&out.stderr).contains("denied by --deny-net=127.0.0.1"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_bad_policy_file_names_the_file_the_line_and_the_key() {
    let cases = [
        (
            "policy-typo",
            "max-sockets = 4\nalow-net = true\n",
            ":2: alow-net: ",
        ),
        (
            "policy-entry",
            "allow-net = [\n  \"example.com\",\n  \"[example.com]:80\",\n]\n",
            ":3: allow-net: ",
        ),
        ("policy-deny", "deny-net = [\"::1:80\"]\n", ":1: deny-net: "),
        (
            "policy-size",
            "\n\nmax-memory = \"10 MB\"\n",
            ":3: max-memory: ",
        ),
    ];
    for (name, body, located) in cases {
        let file = policy_file(name, body);
        let out = moat_run(&[
            &format!("--policy={}", file.display()),
            guests::PROBE,
            "env",
        ]);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", text(&out.stderr));
        let stderr = text(&out.stderr);
        assert!(
            stderr.starts_with("moat: error: ")
                && stderr.contains(&format!("{}{located}", file.display())),
            "{name}: {stderr}"
        );
    }
    let out = moat_run(&["--policy=/nonexistent/moat.toml", guests::PROBE, "env"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("cannot read the policy file /nonexistent/moat.toml"));
}

#[test]
fn memory_and_time_limits_stop_the_guest_with_their_own_status() {
    let out = moat_run(&["--max-memory=32MiB", guests::HOSTILE, "grow-memory", "256"]);
    assert_eq!(out.status.code(), Some(134), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("the guest reached its memory limit")
            && text(&out.stderr).contains("--max-memory"),
        "{}",
        text(&out.stderr)
    );
    let out = moat_run(&["--timeout=300ms", guests::HOSTILE, "spin"]);
    assert_eq!(out.status.code(), Some(124), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("ran past its time limit of 300ms (--timeout)"),
        "{}",
        text(&out.stderr)
    );
    let out = moat_run(&["--timeout=5 parsecs", guests::HOSTILE, "spin"]);
    assert_eq!(out.status.code(), Some(2));
}

/// The soft "Max open files" of process `pid`, from /proc.
fn open_files_limit(pid: u32) -> Option<u64> {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

#[test]
fn the_descriptor_limit_follows_the_socket_cap() {
    // moat sets the process's soft limit to what its bounds need: twice
    // the socket cap, plus the base and the lookups in flight.
    let expected = moat_host::descriptors::needed(&moat_host::net::Limits {
        max_sockets: Some(10),
        ..moat_host::net::Limits::default()
    })
    .unwrap();
    let own = open_files_limit(std::process::id()).unwrap();
    assert_ne!(own, expected, "the test could not tell");
    let mut child = Command::new(MOAT)
        .arg("run")
        .arg(format!("--cache-dir={}", cache_dir().display()))
        .args(["--max-sockets=10", guests::HOSTILE, "wait-forever"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("moat runs");
    // The guest prints once it runs, after the limit is set.
    let mut line = String::new();
    let stdout = child.stdout.take().unwrap();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).unwrap();
    assert_eq!(line.trim(), "waiting");
    let limit = open_files_limit(child.id());
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(limit, Some(expected));
}

#[test]
fn a_refused_http_request_makes_no_dns_query_and_no_connect() {
    let Some(strace) = strace() else { return };
    let (peer, port) = peer();
    // Refused as written: no lookup, no socket at all.
    let url = format!("http://localhost:{port}/");
    let (out, log) = traced(strace, &[guests::HTTP_PROBE, "fetch", &url]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "error: ErrorCode::HttpRequestDenied\n");
    assert!(
        text(&out.stderr).contains(&format!("needs --allow-net=localhost:{port}")),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(name_lookups(&log), 0, "{log}");
    assert_eq!(inet_sockets(&log), 0, "{log}");
    // Granted, but the name resolves into a denied range: looked up once,
    // never connected to.
    let granted = format!("--allow-net=localhost:{port}");
    let (out, log) = traced(
        strace,
        &[
            &granted,
            "--deny-net=private",
            guests::HTTP_PROBE,
            "fetch",
            &url,
        ],
    );
    assert_eq!(
        text(&out.stdout),
        "error: ErrorCode::DestinationIpProhibited\n",
        "{}",
        text(&out.stderr)
    );
    assert!(name_lookups(&log) > 0, "{log}");
    assert!(!touched_port(&log, "connect", &port), "{log}");
    // Allowed, the connect shows up in the trace: it would have seen it.
    peer.set_nonblocking(false).unwrap();
    let server = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut conn, _) = peer.accept().unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).unwrap() == 1 {
            head.push(byte[0]);
        }
        conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\nconnection: close\r\n\r\nyes")
            .unwrap();
    });
    let (out, log) = traced(strace, &[&granted, guests::HTTP_PROBE, "fetch", &url]);
    assert_eq!(
        text(&out.stdout),
        "status: 200\nyes\n",
        "{}",
        text(&out.stderr)
    );
    assert!(touched_port(&log, "connect", &port), "{log}");
    server.join().unwrap();
}
