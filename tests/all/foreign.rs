//! Components no one here wrote the toolchain for, as a user gets them
//! from the package registries: Python from componentize-py (asyncio TCP,
//! WASI 0.3 sockets, a wasi:http client and a handler), JavaScript from
//! componentize-js (`fetch()`) and jco's QuickJS backend (`node:net`).
//! Each runs allowed and denied under `moat run` (the handler under
//! `moat serve`), bytes checked.
//!
//! `examples/foreign/build.sh` installs the pinned toolchains and builds the
//! components into the target directory once per test run (it rebuilds
//! only what changed); `moat compile` then compiles them into the tests'
//! cache, once, so that the tests below share the compiled code.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{self, cache_flag, connections, watched_port, within};

const MOAT: &str = env!("CARGO_BIN_EXE_moat");

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The directory of the built components, or `None` (skip) when this
/// machine lacks python3 with pip or node with npm, outside CI.
pub(crate) fn built() -> Option<&'static PathBuf> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let missing = [
                ("python3", &["-m", "pip", "--version"][..]),
                ("node", &["--version"][..]),
                ("npm", &["--version"][..]),
            ]
            .into_iter()
            .filter(|(program, args)| {
                !Command::new(program)
                    .args(*args)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            })
            .map(|(program, _)| program)
            .collect::<Vec<_>>();
            if support::skip_unless(
                "components from other toolchains",
                (!missing.is_empty()).then(|| format!("{} missing", missing.join(", "))),
            ) {
                return None;
            }
            let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("foreign");
            let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/foreign/build.sh");
            let built = Command::new("bash")
                .arg(script)
                .arg(&out)
                .output()
                .expect("bash runs");
            assert!(
                built.status.success(),
                "examples/foreign/build.sh failed:\n{}{}",
                text(&built.stdout),
                text(&built.stderr)
            );
            let components: Vec<PathBuf> = COMPONENTS.iter().map(|c| out.join(c)).collect();
            let compiled = Command::new(MOAT)
                .arg("compile")
                .arg(cache_flag())
                .args(&components)
                .output()
                .expect("moat runs");
            assert!(
                compiled.status.success(),
                "moat compile failed:\n{}{}",
                text(&compiled.stdout),
                text(&compiled.stderr)
            );
            eprint!("{}", text(&compiled.stdout));
            Some(out)
        })
        .as_ref()
}

const COMPONENTS: [&str; 7] = [
    "py-client.wasm",
    "py-p3.wasm",
    "py-handler.wasm",
    "py-isolation.wasm",
    "js-fetch.wasm",
    "js-net.wasm",
    "js-isolation.wasm",
];

/// `moat run --cache-dir=... FLAGS COMPONENT ARGS`.
fn moat_run(flags: &[&str], component: &str, args: &[&str]) -> Output {
    let dir = built().expect("built");
    Command::new(MOAT)
        .arg("run")
        .arg(cache_flag())
        .args(flags)
        .arg(dir.join(component))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("moat runs")
}

/// A peer on 127.0.0.1 that echoes one connection as it reads it (the
/// clients here read the echo before they close); its port, and what it
/// got.
async fn streaming_echo() -> (u16, tokio::task::JoinHandle<Vec<u8>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 16 * 1024];
        loop {
            let n = stream.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
            if stream.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        got
    });
    (port, served)
}

/// An HTTP/1.1 peer on 127.0.0.1 that answers one request with `body`;
/// its port, and the request's head.
fn http_peer(body: &'static str) -> (u16, std::thread::JoinHandle<String>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
            head.push(byte[0]);
        }
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(response.as_bytes());
        text(&head)
    });
    (port, served)
}

/// Asserts a denied run: exit 1, moat's line on stderr, the program's own
/// report of the denial on stdout.
#[track_caller]
fn assert_denied(out: &Output, moat_says: &str, program_says: &str) {
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stderr).contains(moat_says),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains(program_says),
        "{}",
        text(&out.stdout)
    );
}

/// `moat run FLAGS COMPONENT ARGS...`, off the test's runtime.
async fn run_blocking(flags: Vec<String>, component: &'static str, args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        moat_run(&flags, component, &args)
    })
    .await
    .unwrap()
}

/// A TCP client (`COMPONENT [LEAD] HOST PORT MESSAGE`) run with `flags`
/// and a grant for its echo peer: `message` goes there and comes back
/// whole. Then with `flags` alone: denied with moat's line and the
/// program's own report `program_says`, and its peer reached by nothing.
async fn echo_allowed_and_denied(
    component: &'static str,
    lead: &[&str],
    flags: &[&str],
    message: &str,
    program_says: &str,
) {
    let name = component.trim_end_matches(".wasm");
    let argv = |port: u16, message: &str| {
        lead.iter()
            .map(|a| a.to_string())
            .chain(["127.0.0.1".into(), port.to_string(), message.into()])
            .collect::<Vec<String>>()
    };
    let flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
    let (port, served) = streaming_echo().await;
    let mut granted = flags.clone();
    granted.push(format!("--allow-net=127.0.0.1:{port}"));
    let out = run_blocking(granted, component, argv(port, message)).await;
    assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), format!("got: {message}\n"), "{name}");
    assert_eq!(
        within("the echo", served).await.unwrap(),
        message.as_bytes()
    );
    assert!(
        !text(&out.stderr).contains("denied"),
        "{}",
        text(&out.stderr)
    );

    let (listener, port) = watched_port();
    let out = run_blocking(flags, component, argv(port, "x")).await;
    assert_denied(
        &out,
        &format!(
            "moat: {name}: connect to 127.0.0.1:{port} denied: needs --allow-net=127.0.0.1:{port}"
        ),
        &program_says.replace("{port}", &port.to_string()),
    );
    assert_eq!(connections(&listener), 0, "{name}");
}

#[tokio::test]
async fn a_python_asyncio_client_needs_only_its_listen_grant_and_the_one_it_really_uses() {
    if built().is_none() {
        return;
    }
    echo_allowed_and_denied(
        "py-client.wasm",
        &["tcp"],
        &["--allow-listen=127.0.0.1:0"],
        "asyncio bytes \u{1F40D} through moat",
        "error: PermissionError",
    )
    .await;
    // Without the listen grant asyncio cannot make its self-pipe: the
    // message names the grant it needs, not the port it would get.
    let out = run_blocking(
        Vec::new(),
        "py-client.wasm",
        vec!["tcp".into(), "127.0.0.1".into(), "9".into(), "x".into()],
    )
    .await;
    assert_denied(
        &out,
        "moat: py-client: listen on 127.0.0.1:0 denied: needs --allow-listen=127.0.0.1:0",
        "error: PermissionError",
    );
}

#[tokio::test]
async fn a_python_wasi_0_3_client_moves_its_bytes_when_allowed_and_none_when_not() {
    if built().is_none() {
        return;
    }
    echo_allowed_and_denied(
        "py-p3.wasm",
        &["tcp"],
        &[],
        "p3 bytes",
        "error: ErrorCode_AccessDenied",
    )
    .await;
}

#[tokio::test]
async fn a_javascript_node_net_client_sees_a_denial_as_eacces() {
    if built().is_none() {
        return;
    }
    echo_allowed_and_denied(
        "js-net.wasm",
        &[],
        &[],
        "node:net bytes",
        "error: EACCES connect EACCES 127.0.0.1:{port}",
    )
    .await;
}

#[tokio::test]
async fn python_and_javascript_http_clients_are_held_to_the_grants() {
    if built().is_none() {
        return;
    }
    for (component, args) in [
        ("py-client.wasm", &["http"][..]),
        ("js-fetch.wasm", &[][..]),
    ] {
        let (port, served) = http_peer("hello from the peer");
        let argv = |url: String| {
            args.iter()
                .map(|a| a.to_string())
                .chain([url])
                .collect::<Vec<String>>()
        };
        let out = run_blocking(
            vec![format!("--allow-net=127.0.0.1:{port}")],
            component,
            argv(format!("http://127.0.0.1:{port}/path?q=1")),
        )
        .await;
        assert_eq!(
            out.status.code(),
            Some(0),
            "{component}: {}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        assert_eq!(
            text(&out.stdout),
            "status: 200\nhello from the peer\n",
            "{component}"
        );
        let head = served.join().unwrap();
        assert!(
            head.starts_with("GET /path?q=1 HTTP/1.1\r\n"),
            "{component}: {head}"
        );

        let (listener, port) = watched_port();
        let out = run_blocking(
            Vec::new(),
            component,
            argv(format!("http://127.0.0.1:{port}/")),
        )
        .await;
        let name = component.trim_end_matches(".wasm");
        assert_denied(
            &out,
            &format!(
                "moat: {name}: HTTP request: connect to 127.0.0.1:{port} denied: \
                 needs --allow-net=127.0.0.1:{port}"
            ),
            "error: ",
        );
        assert_eq!(connections(&listener), 0, "{component}");
    }
}

#[test]
fn a_python_http_handler_is_served_and_refused_by_moat_run() {
    let Some(dir) = built() else { return };
    let handler = dir.join("py-handler.wasm");
    // `moat run` sends it to `moat serve`.
    let out = moat_run(&[], "py-handler.wasm", &[]);
    assert_eq!(out.status.code(), Some(126), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("which `moat run` does not call: serve it with `moat serve`"),
        "{}",
        text(&out.stderr)
    );

    let response = served_once(
        &handler,
        b"GET /echo/this?x=1 HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n",
    );
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
    assert!(
        response.ends_with("\r\n\r\nhello from python\nGET /echo/this?x=1\n"),
        "{response}"
    );
}

/// Issue 57: `build.sh OUT --handler mine.js` builds an author's own
/// JavaScript handler with the pinned toolchain and WIT (before, the
/// command and the WIT it needs were only to be read out of build.sh),
/// and `moat serve` answers with it.
#[test]
fn your_own_javascript_handler_is_built_by_one_command_and_served() {
    let Some(dir) = built() else { return };
    let source = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("own-handler");
    std::fs::create_dir_all(&source).unwrap();
    let mine = source.join("mine.js");
    std::fs::write(
        &mine,
        "addEventListener('fetch', (event) => {\n  \
         event.respondWith(new Response('my own handler\\n'));\n});\n",
    )
    .unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/foreign/build.sh");
    let built = Command::new("bash")
        .arg(script)
        .arg(dir)
        .arg("--handler")
        .arg(&mine)
        .output()
        .expect("bash runs");
    assert!(
        built.status.success(),
        "{}{}",
        text(&built.stdout),
        text(&built.stderr)
    );
    assert!(
        text(&built.stdout).contains("mine.wasm: built"),
        "{}",
        text(&built.stdout)
    );
    let response = served_once(
        &dir.join("mine.wasm"),
        b"GET / HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n",
    );
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
    assert!(response.ends_with("\r\n\r\nmy own handler\n"), "{response}");
}

/// `moat serve HANDLER`, one request `head` on a connection of its own;
/// the whole response.
fn served_once(handler: &std::path::Path, head: &[u8]) -> String {
    let mut server = Command::new(MOAT)
        .args(["serve", &cache_flag(), "--addr=127.0.0.1:0"])
        .arg(handler)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("moat serve starts");
    let mut stderr = server.stderr.take().unwrap();
    let mut said = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    let addr = loop {
        let mut byte = [0u8; 1];
        assert!(
            Instant::now() < deadline && stderr.read(&mut byte).unwrap_or(0) == 1,
            "no serving line: {}",
            text(&said)
        );
        said.push(byte[0]);
        let line = text(&said);
        if let Some(rest) = line.strip_prefix("moat: serving http://")
            && let Some(addr) = rest.strip_suffix("/\n")
        {
            break addr.to_owned();
        }
        if said.ends_with(b"\n") && !line.starts_with("moat: serving") {
            said.clear();
        }
    };
    let mut stream = std::net::TcpStream::connect(&addr).unwrap();
    stream.write_all(head).unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let _ = server.kill();
    let _ = server.wait();
    text(&response)
}
