//! What the integration tests share: one engine, guests running on threads
//! of their own (as separate processes would), and ways to observe them.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use moat_host::policy::Policy;
use moat_host::{
    CacheDir, Captured, Exit, Guest, Input, Moat, MoatConfig, MoatError, Output, RunOptions,
};

#[allow(unused_imports)]
pub use moat_guests as guests;

/// How long a test waits for a condition before giving up with what it saw.
/// Generous: this only bounds a hang; passing tests never wait this long.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// The engine all tests of one binary share, caching compiled code in the
/// target directory.
pub fn moat() -> &'static Moat {
    static MOAT: OnceLock<Moat> = OnceLock::new();
    MOAT.get_or_init(|| {
        let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("moat-cache");
        Moat::new(&MoatConfig {
            cache: CacheDir::At(cache),
            ..MoatConfig::default()
        })
        .expect("engine")
    })
}

/// A guest component, compiled once per test binary.
pub fn guest(path: &str) -> Guest {
    static LOADED: OnceLock<Mutex<HashMap<String, Guest>>> = OnceLock::new();
    let mut loaded = LOADED.get_or_init(Default::default).lock().unwrap();
    loaded
        .entry(path.to_owned())
        .or_insert_with(|| moat().load(path).expect("guest compiles"))
        .clone()
}

/// A guest running on its own thread and runtime.
pub struct Running {
    pub stdout: Captured,
    pub stderr: Captured,
    done: tokio::sync::oneshot::Receiver<Result<Exit, MoatError>>,
}

/// How a run ended, with what it printed.
pub struct Finished {
    pub exit: Result<Exit, MoatError>,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    /// The exit code, or a panic with the output if the guest did not exit.
    pub fn code(&self) -> i32 {
        match &self.exit {
            Ok(exit) => exit.code(),
            Err(e) => panic!(
                "guest did not exit: {e}\nstdout: {}\nstderr: {}",
                self.stdout, self.stderr
            ),
        }
    }
}

/// Starts `path` with `args` under `policy`; stdin is empty.
pub fn start(path: &str, policy: Policy, args: &[&str]) -> Running {
    start_with(
        path,
        RunOptions::new(policy)
            .arg(path)
            .args(args.iter().copied())
            .stdin(Input::Empty),
    )
}

/// Starts a guest with full options (stdout and stderr are captured),
/// its messages naming settings as `moat run`'s flags do and its denial
/// lines on its stderr, as `moat run` writes them.
pub fn start_with(path: &str, options: RunOptions) -> Running {
    start_as_given(
        path,
        options
            .spelled(moat_host::settings::Spelling::Flags)
            .notices_on_guest_stderr(),
    )
}

/// As [`start_with`], the options' spelling and notices as given.
pub fn start_as_given(path: &str, options: RunOptions) -> Running {
    let stdout = Captured::new();
    let stderr = Captured::new();
    let options = options
        .stdout(Output::Capture(stdout.clone()))
        .stderr(Output::Capture(stderr.clone()));
    let guest = guest(path);
    let (tx, done) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let ended = runtime.block_on(moat().run(&guest, options));
        // The runtime's own descriptors (its signal driver dups one) go
        // before the test hears the run ended: the tests count sockets.
        drop(runtime);
        let _ = tx.send(ended);
    });
    Running {
        stdout,
        stderr,
        done,
    }
}

/// Runs a guest to the end.
pub async fn run(path: &str, policy: Policy, args: &[&str]) -> Finished {
    start(path, policy, args).finish().await
}

impl Running {
    /// Waits until stdout holds `needle`, and returns stdout.
    pub async fn wait_for(&self, needle: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let out = String::from_utf8_lossy(&self.stdout.contents()).into_owned();
            if out.contains(needle) {
                return out;
            }
            assert!(
                Instant::now() < deadline,
                "no {needle:?} on stdout after {PATIENCE:?}\nstdout: {out}\nstderr: {}",
                String::from_utf8_lossy(&self.stderr.contents())
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Waits for `listening on ADDR` and returns ADDR.
    pub async fn listening_addr(&self) -> SocketAddr {
        let out = self.wait_for("listening on ").await;
        let line = out
            .lines()
            .find(|l| l.starts_with("listening on "))
            .unwrap();
        line["listening on ".len()..]
            .trim()
            .parse()
            .expect("an address")
    }

    /// Waits for the run to end.
    pub async fn finish(self) -> Finished {
        let exit = tokio::time::timeout(PATIENCE, self.done)
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "guest still running after {PATIENCE:?}\nstdout: {}\nstderr: {}",
                    String::from_utf8_lossy(&self.stdout.contents()),
                    String::from_utf8_lossy(&self.stderr.contents())
                )
            })
            .expect("runner thread");
        Finished {
            exit,
            stdout: String::from_utf8_lossy(&self.stdout.contents()).into_owned(),
            stderr: String::from_utf8_lossy(&self.stderr.contents()).into_owned(),
        }
    }
}

/// A port that was free a moment ago (bound, noted, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A UDP port on 127.0.0.1 that was free a moment ago (bound, noted,
/// released).
pub fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .expect("a free UDP port")
}

/// A listener on 127.0.0.1 that nothing should connect to, non-blocking so
/// a test can ask whether a connection arrived without waiting.
pub fn watched_port() -> (std::net::TcpListener, u16) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

/// How many connections arrived at a [`watched_port`] listener since the
/// last call (accepting them).
pub fn connections(listener: &std::net::TcpListener) -> usize {
    std::iter::from_fn(|| listener.accept().ok()).count()
}

/// Whether `port` on 127.0.0.1 can be bound right now.
pub fn port_is_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// This process's resident memory, in bytes.
pub fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .expect("VmRSS")
}

/// This process's peak resident memory since [`reset_peak_rss`] (or its
/// start), in bytes.
pub fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .expect("VmHWM")
}

/// Starts this process's peak resident memory over from what it holds
/// now (Linux's `clear_refs`, value 5).
pub fn reset_peak_rss() {
    std::fs::write("/proc/self/clear_refs", "5").expect("/proc/self/clear_refs");
}

/// The number of sockets this process has open.
pub fn open_sockets() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy().starts_with("socket:"))
        .count()
}

/// Waits until `condition` holds (checked every 5 ms, up to [`PATIENCE`]).
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !condition() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Runs a peer's side of a test, bounded by [`PATIENCE`]: a guest that
/// stops talking fails the test instead of hanging it.
pub async fn within<F: std::future::Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: nothing happened for {PATIENCE:?}"))
}

pub mod caps;
pub mod certs;
pub mod netns;

/// `--cache-dir=DIR` for the `moat` commands the tests run: the one cache
/// of compiled code they share, in the target directory. Every test names
/// it (or a cache of its own): a test that took the default would fill the
/// user's own `~/.cache/moat`, and find there what earlier runs left.
pub fn cache_flag() -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-cache");
    format!("--cache-dir={}", dir.display())
}

/// Skips `test` (returns true) when `why_not` says this machine cannot run
/// it, saying why; with `CI` set, fails instead (CI must run every test).
pub fn skip_unless(test: &str, why_not: Option<String>) -> bool {
    match why_not {
        None => false,
        Some(why) if std::env::var_os("CI").is_some() => {
            panic!("{test}: CI must run this test, but {why}")
        }
        Some(why) => {
            eprintln!("skipping {test}: {why}");
            true
        }
    }
}

/// `program` is on PATH, or the test is skipped (never in CI).
pub fn have(program: &str) -> bool {
    let found = std::process::Command::new(program)
        .arg("version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok();
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "{program} is missing in CI (.ci/run installs it)"
        );
        eprintln!("skipping: {program} is not installed");
    }
    found
}

/// Runs `test` on a current-thread runtime of its own, once it holds
/// `turn`, for the tests of a binary that measure the whole process (its
/// sockets, descriptors or memory) and so must not run beside each other.
/// The runtime is made after the turn is taken: its own descriptors (the
/// signal driver's socket) would otherwise muddy another test's count.
pub fn in_turn(turn: &Mutex<()>, test: impl std::future::Future<Output = ()>) {
    let _turn = turn
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(test);
}

/// A peer on 127.0.0.1 that reads one connection to its end and echoes
/// it back; its port, and what it got.
pub async fn echo_server() -> (u16, tokio::task::JoinHandle<Vec<u8>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut got = Vec::new();
        stream.read_to_end(&mut got).await.unwrap();
        stream.write_all(&got).await.unwrap();
        got
    });
    (port, served)
}

/// Names of a test's own, and every name it was asked.
#[derive(Default)]
pub struct Names {
    answers: HashMap<&'static str, Vec<std::net::IpAddr>>,
    asked: Mutex<Vec<String>>,
}

impl Names {
    pub fn new(answers: &[(&'static str, &str)]) -> std::sync::Arc<Names> {
        std::sync::Arc::new(Names {
            answers: answers
                .iter()
                .map(|(name, ip)| (*name, vec![ip.parse().unwrap()]))
                .collect(),
            asked: Mutex::default(),
        })
    }

    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

impl moat_host::net::Resolver for Names {
    fn lookup<'a>(&'a self, name: &'a str) -> moat_host::net::Lookup<'a> {
        self.asked.lock().unwrap().push(name.to_owned());
        let answer = self.answers.get(name).cloned();
        Box::pin(async move { answer.ok_or_else(|| std::io::ErrorKind::NotFound.into()) })
    }
}

/// An HTTPS server for `h2.test` (its certificate from `ca`) that speaks
/// HTTP/2 only and answers every request with `bytes` bytes; its port.
pub async fn h2_server(ca: &certs::Ca, bytes: usize) -> u16 {
    use http_body_util::Full;
    use hyper::server::conn::http2;
    use hyper_util::rt::{TokioExecutor, TokioIo};

    let acceptor = ca.leaf(&["h2.test"]).acceptor(&["h2"]);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let body = bytes::Bytes::from(vec![b'x'; bytes]);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (acceptor, body) = (acceptor.clone(), body.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |_: hyper::Request<_>| {
                    let body = body.clone();
                    async move {
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(body)))
                    }
                });
                let _ = http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    port
}
