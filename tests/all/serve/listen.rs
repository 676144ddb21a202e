//! Where `moat serve` listens besides an IP address and port: a Unix
//! socket (`--addr=unix:PATH`), reached with `curl --unix-socket`, and the
//! sockets systemd hands over (`--addr=systemd`), started by
//! systemd-socket-activate as a socket unit would start it.

use std::path::Path;

use super::*;

/// A directory of the test's own for socket files (a socket path must be
/// short: 108 bytes).
fn socket_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("moat-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `command` (a `moat serve`, or a launcher of one), once its stderr holds
/// `needle`.
async fn serving(mut command: Command, needle: &str) -> Serve {
    let mut child = command
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("moat starts");
    let stderr = drain(child.stderr.take().unwrap());
    let mut server = Serve {
        child,
        stderr,
        addr: "0.0.0.0:0".parse().unwrap(),
    };
    server.wait_for_stderr(needle).await;
    server
}

/// `curl --unix-socket SOCKET http://localhost/PATH`: the body.
async fn curl_unix(socket: &Path, path: &str) -> String {
    let out = within(
        "curl over a Unix socket",
        Command::new("curl")
            .args(["-sS", "--fail", "--unix-socket"])
            .arg(socket)
            .arg(format!("http://localhost{path}"))
            .output(),
    )
    .await
    .expect("curl runs");
    assert!(
        out.status.success(),
        "curl --unix-socket {}: {}",
        socket.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `--addr=unix:PATH`: curl is answered over the socket; a socket file an
/// earlier server left (nothing listening) is replaced; the trail's
/// serve-bind names the path; SIGTERM ends the server and removes the
/// file it made.
#[tokio::test]
async fn serve_listens_on_a_unix_socket_and_removes_it_at_the_end() {
    let dir = socket_dir("unix");
    let socket = dir.join("http.sock");
    // A server that is gone left its socket file.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    let trail = dir.join("audit.jsonl");
    let scrapes = dir.join("metrics.sock");
    // Under umask 0 the socket is made 0660 all the same (round four's
    // finding 8: it followed the umask).
    let mut command = Command::new("sh");
    command
        .args(["-c", "umask 000 && exec \"$0\" \"$@\"", MOAT])
        .arg("serve")
        .arg(cache_flag())
        .arg(format!("--addr=unix:{}", socket.display()))
        .arg(format!("--metrics=unix:{}", scrapes.display()))
        .arg(format!("--audit={}", trail.display()))
        .arg(guests::HTTP_HOSTILE);
    // The whole line: stderr comes through a pipe in pieces.
    let mut server = serving(
        command,
        &format!("moat: serving http on unix:{}\n", socket.display()),
    )
    .await;
    use std::os::unix::fs::PermissionsExt;
    for made in [&socket, &scrapes] {
        let mode = std::fs::metadata(made).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o660, "{}: {mode:o}", made.display());
    }
    assert_eq!(curl_unix(&socket, "/ok").await, "ok\n");
    assert_eq!(curl_unix(&socket, "/count").await, "1\n");
    let metrics = curl_unix(&scrapes, "/metrics").await;
    assert!(
        metrics.contains(r#"moat_http_requests_total{method="GET",status="2xx"} 2"#),
        "{metrics}"
    );
    server.terminate();
    assert_eq!(server.exited().await.code(), Some(0));
    assert!(
        !socket.exists() && !scrapes.exists(),
        "the socket files are removed at the end"
    );
    let text = std::fs::read_to_string(&trail).expect("the trail");
    let bind: serde_json::Value = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|r| r["operation"] == "serve-bind" && r["rule"]["source"]["flag"] == "--addr")
        .unwrap_or_else(|| panic!("no serve-bind on the trail:\n{text}"));
    let written = format!("unix:{}", socket.display());
    assert_eq!(bind["written"], written.as_str(), "{bind}");
    assert_eq!(bind["rule"]["entry"], written.as_str(), "{bind}");
    assert!(bind["host"].is_null() && bind["port"].is_null(), "{bind}");
    crate::audit::validate(&trail);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Unix socket a server still listens on, and a path that is not a
/// socket, are not taken over: the start stops naming the address, and
/// the live server keeps its socket.
#[tokio::test]
async fn serve_refuses_a_unix_socket_in_use_or_a_file_that_is_not_one() {
    let dir = socket_dir("unix-taken");
    let socket = dir.join("taken.sock");
    let live = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let flag = format!("--addr=unix:{}", socket.display());
    let (code, stderr) = serve_refused(&[&flag, guests::HTTP_HOSTILE]).await;
    assert_ne!(code, Some(0));
    assert!(
        stderr.contains(&socket.display().to_string())
            && stderr.contains("a server is listening on this socket already"),
        "{stderr}"
    );
    let _client = std::os::unix::net::UnixStream::connect(&socket).expect("the live socket");
    assert!(live.accept().is_ok());

    let file = dir.join("file");
    std::fs::write(&file, "data").unwrap();
    let flag = format!("--addr=unix:{}", file.display());
    let (code, stderr) = serve_refused(&[&flag, guests::HTTP_HOSTILE]).await;
    assert_ne!(code, Some(0));
    assert!(stderr.contains("is not a socket"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "data");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--addr=systemd` under systemd-socket-activate (what a socket unit
/// does): both sockets it hands over, a TCP one and a Unix one, are
/// served, each announced and recorded; the connection that started the
/// server is answered.
#[tokio::test]
async fn serve_takes_the_sockets_systemd_hands_over() {
    if support::skip_unless(
        "socket activation",
        (!have_program("systemd-socket-activate"))
            .then(|| "no systemd-socket-activate (Debian's systemd package)".to_owned()),
    ) {
        return;
    }
    let dir = socket_dir("systemd");
    let socket = dir.join("activated.sock");
    let trail = dir.join("audit.jsonl");
    // A port nobody holds: taken from the system and given back.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut command = Command::new("systemd-socket-activate");
    command
        .arg(format!("--listen=127.0.0.1:{port}"))
        .arg(format!("--listen={}", socket.display()))
        .arg("--")
        .arg(MOAT)
        .arg("serve")
        .arg(cache_flag())
        .arg("--addr=systemd")
        .arg(format!("--audit={}", trail.display()))
        .arg(guests::HTTP_HOSTILE);
    let mut server = serving(command, &format!("Listening on {}", socket.display())).await;
    // The first connection starts moat; it waits in the socket's backlog
    // and is answered once moat serves.
    assert_eq!(curl_unix(&socket, "/ok").await, "ok\n");
    server
        .wait_for_stderr(&format!("moat: serving http://127.0.0.1:{port}/"))
        .await;
    server
        .wait_for_stderr(&format!("moat: serving http on unix:{}", socket.display()))
        .await;
    let answer = get(format!("127.0.0.1:{port}").parse().unwrap(), "/ok").await;
    assert_eq!((answer.status, answer.text()), (200, "ok\n".to_owned()));
    server.terminate();
    assert_eq!(server.exited().await.code(), Some(0));
    let text = std::fs::read_to_string(&trail).expect("the trail");
    let binds: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["operation"] == "serve-bind")
        .collect();
    assert_eq!(binds.len(), 2, "{text}");
    assert!(
        binds.iter().all(|b| b["rule"]["entry"] == "systemd"),
        "{text}"
    );
    assert_eq!(binds[0]["port"], port, "{text}");
    crate::audit::validate(&trail);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The value of `key=` in a unit file's text (its first).
fn unit_value<'u>(unit: &'u str, key: &str) -> &'u str {
    unit.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {key}= in:\n{unit}"))
        .trim()
}

/// Issue 57: deploy/moat.socket and deploy/moat.service as systemd would
/// run them. `systemd-analyze verify` takes both; the service's
/// ExecStart, word for word (moat's path, the directories systemd would
/// make and a free port put in), run under systemd-socket-activate on the
/// socket's ListenStream, serves the connection that started it, reloads
/// at ExecReload's SIGHUP, and stops at SIGTERM with exit 0 within the
/// unit's TimeoutStopSec (which is past its --shutdown-timeout).
#[tokio::test]
async fn the_sample_units_serve_reload_and_stop_as_systemd_runs_them() {
    if support::skip_unless(
        "the sample systemd units",
        (!have_program("systemd-socket-activate") || !have_program("systemd-analyze")).then(|| {
            "no systemd-socket-activate or systemd-analyze (Debian's systemd package)".to_owned()
        }),
    ) {
        return;
    }
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let socket_unit = std::fs::read_to_string(deploy.join("moat.socket")).unwrap();
    let service_unit = std::fs::read_to_string(deploy.join("moat.service")).unwrap();
    let dir = socket_dir("units");
    let (logs, cache) = (dir.join("logs"), dir.join("cache"));
    std::fs::create_dir_all(&logs).unwrap();
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::set_permissions(&cache, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let component = dir.join("handler.wasm");
    std::fs::copy(guests::HTTP_HOSTILE, &component).unwrap();

    // The units as a machine with moat installed has them.
    let installed = service_unit.replace("/usr/local/bin/moat", MOAT);
    std::fs::write(dir.join("moat.service"), &installed).unwrap();
    std::fs::write(dir.join("moat.socket"), &socket_unit).unwrap();
    let verified = within(
        "systemd-analyze verify",
        Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(dir.join("moat.service"))
            .arg(dir.join("moat.socket"))
            .output(),
    )
    .await
    .unwrap();
    assert!(
        verified.status.success() && verified.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&verified.stderr)
    );

    let listen = unit_value(&socket_unit, "ListenStream");
    assert_eq!(listen, "127.0.0.1:8080");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let exec = unit_value(&service_unit, "ExecStart")
        .replace("/usr/local/bin/moat", MOAT)
        .replace("${LOGS_DIRECTORY}", logs.to_str().unwrap())
        .replace("${CACHE_DIRECTORY}", cache.to_str().unwrap())
        .replace("/srv/moat/handler.wasm", component.to_str().unwrap())
        .replace("127.0.0.1:9464", "127.0.0.1:0");
    assert_eq!(
        unit_value(&service_unit, "ExecReload"),
        "/bin/kill -HUP $MAINPID"
    );
    let stop_within: u64 = unit_value(&service_unit, "TimeoutStopSec")
        .trim_end_matches('s')
        .parse()
        .unwrap();
    let shutdown: u64 = exec
        .split_whitespace()
        .find_map(|a| a.strip_prefix("--shutdown-timeout="))
        .and_then(|t| t.trim_end_matches('s').parse().ok())
        .expect("the service sets --shutdown-timeout");
    assert!(
        stop_within > shutdown,
        "TimeoutStopSec {stop_within} s, --shutdown-timeout {shutdown} s"
    );

    let mut command = Command::new("systemd-socket-activate");
    command
        .arg(format!("--listen=127.0.0.1:{port}"))
        .arg("--")
        .args(exec.split_whitespace());
    let mut server = serving(command, &format!("Listening on 127.0.0.1:{port}")).await;
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // The first connection starts moat, which execs in
    // systemd-socket-activate's place: $MAINPID is the child's.
    assert_eq!(get(addr, "/ok").await.text(), "ok\n");
    server
        .wait_for_stderr(&format!("moat: serving http://127.0.0.1:{port}/"))
        .await;
    std::fs::copy(guests::WSTD_SERVE, dir.join("next.wasm")).unwrap();
    std::fs::rename(dir.join("next.wasm"), &component).unwrap();
    let pid = server.child.id().expect("running");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).unwrap(),
        rustix::process::Signal::HUP,
    )
    .unwrap();
    server.wait_for_stderr("moat: reloaded").await;
    assert_eq!(get(addr, "/").await.text(), HELLO, "the new handler");
    server.terminate();
    assert_eq!(server.exited().await.code(), Some(0), "{}", server.stderr());
    crate::audit::validate(&logs.join("audit.jsonl"));
    assert!(
        std::fs::read_dir(&cache).unwrap().count() > 1,
        "compiled code cached beside its key"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--addr=systemd` with no sockets handed over says so and how to hand
/// them over, and starts nothing.
#[tokio::test]
async fn serve_refuses_systemd_when_nothing_was_handed_over() {
    let out = within(
        "moat serve giving up",
        Command::new(MOAT)
            .args(["serve", "--addr=systemd", guests::HTTP_HOSTILE])
            .arg(cache_flag())
            .env_remove("LISTEN_PID")
            .env_remove("LISTEN_FDS")
            .output(),
    )
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr.contains("systemd") && stderr.contains("LISTEN_FDS are not set"),
        "{stderr}"
    );
}

/// `--addr=systemd` where the launcher's word cannot be taken: a count
/// of descriptors that are not open, and a descriptor that is a file, not
/// a listening socket. Each is refused by name, and the host does not
/// abort on a descriptor it never had.
#[tokio::test]
async fn serve_refuses_what_a_launcher_hands_over_that_is_not_a_listening_socket() {
    for (redirect, count, says) in [
        ("", "3", "descriptor 3 is not open"),
        (
            "3</dev/null",
            "1",
            "descriptor 3 handed over is not a socket",
        ),
    ] {
        // The shell's own pid is the one moat gets by exec.
        let script = format!(
            "LISTEN_PID=$$ LISTEN_FDS={count} exec {redirect} \"$0\" serve --addr=systemd \"$2\" \"$1\""
        );
        let out = within(
            "moat serve giving up",
            Command::new("sh")
                .args(["-c", &script, MOAT, guests::HTTP_HOSTILE])
                .arg(cache_flag())
                .output(),
        )
        .await
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
}

fn have_program(program: &str) -> bool {
    std::process::Command::new(program)
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}
