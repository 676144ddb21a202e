//! `moat run --prompt`, driven through a real pseudo-terminal (python3's
//! `pty`): a destination allowed always is asked about once, one denied
//! stays denied, `--prompt-save` writes the answers as a policy file that
//! a later run is granted by; never without a terminal, never in `moat
//! serve`.

use std::path::PathBuf;

use crate::secrets::Recorder;
use crate::support::{self, guests};

const MOAT: &str = env!("CARGO_BIN_EXE_moat");

/// Runs argv on a pseudo-terminal, writing the next of the answers (one a
/// line) each time moat asks; prints what the terminal showed, then
/// "exit N".
const ON_A_TERMINAL: &str = r#"
import os, pty, select, sys
answers = sys.argv[1].split(",")
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
seen = b""
asked = 0
while True:
    ready, _, _ = select.select([fd], [], [], 60)
    if not ready:
        break
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk:
        break
    seen += chunk
    while seen.count(b"[d]eny?") > asked:
        os.write(fd, (answers[asked] if asked < len(answers) else "d").encode() + b"\n")
        asked += 1
_, status = os.waitpid(pid, 0)
sys.stdout.write(seen.decode(errors="replace"))
print("exit", os.waitstatus_to_exitcode(status))
"#;

fn dir(test: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("prompt-{test}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test]
async fn the_person_at_the_terminal_answers_once_per_destination() {
    let (a, b) = (Recorder::plain().await, Recorder::plain().await);
    let dir = dir("answers");
    let saved = dir.join("answers.toml");
    let url_a = format!("http://127.0.0.1:{}/", a.port);
    let url_b = format!("http://127.0.0.1:{}/", b.port);
    let shown = tokio::task::spawn_blocking({
        let (saved, url_a, url_b) = (saved.clone(), url_a.clone(), url_b.clone());
        move || {
            std::process::Command::new("python3")
                .args(["-c", ON_A_TERMINAL, "a,d", MOAT, "run"])
                .arg(support::cache_flag())
                .arg("--prompt")
                .arg(format!("--prompt-save={}", saved.display()))
                .args([guests::HTTP_PROBE, "fetch-all", &url_a, &url_a, &url_b])
                .output()
                .expect("python3 runs")
        }
    })
    .await
    .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert!(shown.contains("exit 0"), "{shown}");
    assert_eq!(
        shown.matches("[d]eny?").count(),
        2,
        "asked about each destination once:\n{shown}"
    );
    assert_eq!(
        shown.matches(&format!("{url_a}: status: 200")).count(),
        2,
        "{shown}"
    );
    assert!(
        shown.contains(&format!("{url_b}: error: ErrorCode::HttpRequestDenied")),
        "{shown}"
    );
    assert_eq!((a.received().len(), b.received().len()), (2, 0));
    let file = std::fs::read_to_string(&saved).unwrap();
    assert!(
        file.contains(&format!("\"127.0.0.1:{}\"", a.port)) && !file.contains(&b.port.to_string()),
        "{file}"
    );
    // The saved answers are a policy file a later run is granted by.
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(MOAT)
            .args(["run", &support::cache_flag()])
            .arg(format!("--policy={}", saved.display()))
            .args([guests::HTTP_PROBE, "fetch", &url_a])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("status: 200"),
        "{out:?}"
    );
}

#[test]
fn never_without_a_terminal_nor_in_serve() {
    let out = std::process::Command::new(MOAT)
        .args(["run", &support::cache_flag(), "--prompt"])
        .args([guests::HTTP_PROBE, "fetch", "http://127.0.0.1:9/"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--prompt: stdin is not a terminal"),
        "{out:?}"
    );
    let out = std::process::Command::new(MOAT)
        .args([
            "serve",
            &support::cache_flag(),
            "--prompt",
            guests::WSTD_SERVE,
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("moat serve never asks"),
        "{out:?}"
    );
}

/// Runs `moat run --prompt` with `args` on a pseudo-terminal that answers
/// `answers` in turn; what the terminal showed, and "exit N".
async fn on_a_terminal(answers: &str, args: Vec<String>) -> String {
    let answers = answers.to_owned();
    let shown = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .args(["-c", ON_A_TERMINAL, &answers, MOAT, "run"])
            .arg(support::cache_flag())
            .arg("--prompt")
            .args(args)
            .output()
            .expect("python3 runs")
    })
    .await
    .unwrap();
    String::from_utf8_lossy(&shown.stdout).into_owned()
}

/// A stock program (std::net over wasi:sockets) is asked about on its way
/// to a name no grant names: the lookup first (no DNS query is made
/// unasked), then the connect to the name and port; the answer for the
/// connect is saved as a grant for the name. A connect refused at the
/// prompt reaches nothing.
#[tokio::test]
async fn a_stock_programs_lookup_and_connect_are_asked_about() {
    let (port, echoed) = support::echo_server().await;
    let dir = dir("stock");
    let saved = dir.join("answers.toml");
    let shown = on_a_terminal(
        "a,a",
        vec![
            format!("--prompt-save={}", saved.display()),
            guests::STD_NET.to_owned(),
            "tcp-client".to_owned(),
            "localhost".to_owned(),
            port.to_string(),
            "hello".to_owned(),
        ],
    )
    .await;
    assert!(shown.contains("exit 0"), "{shown}");
    assert_eq!(shown.matches("[d]eny?").count(), 2, "{shown}");
    assert!(
        shown.contains("wants to look up localhost (no grant allows it: --allow-net=localhost)"),
        "{shown}"
    );
    assert!(
        shown.contains(&format!(
            "wants to connect to localhost:{port} (no grant allows it: --allow-net=localhost:{port})"
        )),
        "{shown}"
    );
    assert!(shown.contains("reply: hello"), "{shown}");
    assert_eq!(echoed.await.unwrap(), b"hello");
    let file = std::fs::read_to_string(&saved).unwrap();
    assert!(file.contains(&format!("\"localhost:{port}\"")), "{file}");

    // Denied at the prompt: the peer is never connected to.
    let refused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    refused.set_nonblocking(true).unwrap();
    let refused_port = refused.local_addr().unwrap().port().to_string();
    let shown = on_a_terminal(
        "d",
        vec![
            guests::STD_NET.to_owned(),
            "tcp-client".to_owned(),
            "127.0.0.1".to_owned(),
            refused_port.clone(),
            "x".to_owned(),
        ],
    )
    .await;
    assert!(shown.contains("exit 1"), "{shown}");
    assert!(
        shown.contains(&format!("wants to connect to 127.0.0.1:{refused_port}")),
        "{shown}"
    );
    assert_eq!(shown.matches("[d]eny?").count(), 1, "{shown}");
    assert_eq!(
        refused.accept().map(|_| ()).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock,
        "the refused connect reached the peer"
    );

    // The saved grant names the name: a later run may look it up unasked.
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(MOAT)
            .args(["run", &support::cache_flag()])
            .arg(format!("--policy={}", saved.display()))
            .args([guests::STD_NET, "lookup", "localhost"])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

/// A stock program's listen on a fixed port is asked about once, at its
/// bind: the listen that follows is the same socket's.
#[tokio::test]
async fn a_stock_programs_listen_is_asked_about_once() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let serving = tokio::spawn(on_a_terminal(
        "o",
        vec![
            guests::STD_NET.to_owned(),
            "tcp-server".to_owned(),
            format!("127.0.0.1:{port}"),
        ],
    ));
    // The server echoes one client, then exits.
    let mut client = loop {
        match tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            Ok(client) => break client,
            Err(_) if !serving.is_finished() => {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await
            }
            Err(e) => panic!("{e}: {}", serving.await.unwrap()),
        }
    };
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    client.write_all(b"ping").await.unwrap();
    client.shutdown().await.unwrap();
    let mut echoed = Vec::new();
    client.read_to_end(&mut echoed).await.unwrap();
    assert_eq!(echoed, b"ping");
    let shown = serving.await.unwrap();
    assert!(shown.contains("exit 0"), "{shown}");
    assert_eq!(shown.matches("[d]eny?").count(), 1, "{shown}");
    assert!(
        shown.contains(&format!("wants to listen on 127.0.0.1:{port}")),
        "{shown}"
    );
}
