//! The servers, each a process of its own: native tokio, moat running a
//! guest, and a std::net guest on wasmtime-wasi's own sockets; with
//! `--baseline`, also moat and wasmtime-wasi from another build of this
//! repository (the A/B of a change).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::measure;

/// Which server.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// The same logic written with tokio, no wasm: the limit.
    Native,
    /// `moat run` with a moat-sdk guest.
    Moat,
    /// `moat run` of the baseline build, with the baseline's guests.
    MoatBaseline,
    /// A std::net guest on wasmtime-wasi's p2 sockets, the way wasmtime's
    /// CLI runs it: what users would pick instead.
    WasmtimeWasi,
    /// The same, served by the baseline build's harness (its wasmtime-wasi).
    WasmtimeWasiBaseline,
    /// `moat run` with the same std::net guest: wasi:sockets under moat's
    /// policy, beside wasmtime-wasi's own (the rows it can run).
    MoatStd,
    /// The same, with the baseline build's `moat` and guest.
    MoatStdBaseline,
    /// `moat run` with `examples/hyper-serve` (hyper 1 on moat-sdk), beside
    /// `Moat` running `examples/http-server` (HTTP written by hand).
    MoatHyper,
    /// `Moat` with the audit trail on (`--audit=FILE`): what recording
    /// every decision costs.
    MoatAudited,
    /// `Moat` with a secret bound to another host (`--secret`), which no
    /// request carries: what scanning every request and response for its
    /// placeholder and value costs.
    MoatSecret,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Native => "native",
            Kind::Moat => "moat",
            Kind::MoatBaseline => "moat (baseline)",
            Kind::WasmtimeWasi => "wasmtime-wasi",
            Kind::WasmtimeWasiBaseline => "wasmtime-wasi (baseline)",
            Kind::MoatStd => "moat, std::net guest",
            Kind::MoatStdBaseline => "moat, std::net guest (baseline)",
            Kind::MoatHyper => "moat, hyper-serve",
            Kind::MoatAudited => "moat --audit",
            Kind::MoatSecret => "moat --secret",
        }
    }

    /// The kind as a file name (and as in the JSON).
    pub fn slug(self) -> &'static str {
        match self {
            Kind::Native => "native",
            Kind::Moat => "moat",
            Kind::MoatBaseline => "moat-baseline",
            Kind::WasmtimeWasi => "wasmtime-wasi",
            Kind::WasmtimeWasiBaseline => "wasmtime-wasi-baseline",
            Kind::MoatStd => "moat-std",
            Kind::MoatStdBaseline => "moat-std-baseline",
            Kind::MoatHyper => "moat-hyper",
            Kind::MoatAudited => "moat-audit",
            Kind::MoatSecret => "moat-secret",
        }
    }

    /// Whether the server is `moat run` with a moat-sdk guest.
    pub fn is_moat(self) -> bool {
        matches!(self, Kind::Moat | Kind::MoatBaseline)
    }
}

/// The guests the servers run.
#[derive(Debug, Clone, Copy)]
pub enum Guest {
    EchoServer,
    UdpEcho,
    BenchServer,
    BenchStd,
    Hello,
    HttpServer,
    HyperServe,
    WstdServe,
    WstdFetch,
}

impl Guest {
    fn package(self) -> &'static str {
        match self {
            Guest::EchoServer => "echo-server",
            Guest::UdpEcho => "udp-echo",
            Guest::BenchServer => "bench-server",
            Guest::BenchStd => "bench-std",
            Guest::Hello => "hello",
            Guest::HttpServer => "http-server",
            Guest::HyperServe => "hyper-serve",
            Guest::WstdServe => "wstd-serve",
            Guest::WstdFetch => "wstd-fetch",
        }
    }

    /// This build's component.
    fn current(self) -> &'static str {
        match self {
            Guest::EchoServer => moat_guests::ECHO_SERVER,
            Guest::UdpEcho => moat_guests::UDP_ECHO,
            Guest::BenchServer => moat_guests::BENCH_SERVER,
            Guest::BenchStd => moat_guests::BENCH_STD,
            Guest::Hello => moat_guests::HELLO,
            Guest::HttpServer => moat_guests::HTTP_SERVER,
            Guest::HyperServe => moat_guests::HYPER_SERVE,
            Guest::WstdServe => moat_guests::WSTD_SERVE,
            Guest::WstdFetch => moat_guests::WSTD_FETCH,
        }
    }
}

/// What the server does with each connection.
#[derive(Debug, Clone, Copy)]
pub enum Mode {
    /// Echo until the client half-closes, then half-close.
    Echo,
    /// Accept and hold, never read.
    Hold,
    /// Write this many bytes in one buffer, then close.
    WriteOnce(usize),
    /// Write this many bytes in 64 KiB chunks, then close.
    Stream(usize),
    /// Echo over TLS (with the certificate in `Setup::certs`).
    TlsEcho,
    /// Echo datagrams to their senders.
    UdpEcho,
    /// HTTP/1.1 with keep-alive: `GET /` answers a short greeting.
    Http,
    /// wasi:http: `moat serve` (moat kinds) and wasmtime-wasi-http's
    /// `ProxyHandler` (`serve-wasi-http`, the wasmtime-wasi kind) serving
    /// the wstd-serve component; native hyper answers `GET /` with the
    /// same body and content type.
    WasiHttp,
    /// On a "go" datagram, send `count` datagrams of `size` bytes, then
    /// "done": back to the go datagram's sender, or with `to_name` set, to
    /// `localhost:PORT` written as a name (the harness's own port).
    UdpSend {
        count: usize,
        size: usize,
        to_name: Option<u16>,
    },
    /// Write `bytes` (with SO_SNDBUF `sndbuf` if non-zero), compute `ms`
    /// without yielding, then close.
    Busy {
        bytes: usize,
        ms: u64,
        sndbuf: usize,
    },
}

impl Mode {
    fn args(self) -> Vec<String> {
        match self {
            Mode::Echo => vec!["echo".into()],
            Mode::Hold => vec!["hold".into()],
            Mode::WriteOnce(bytes) => vec!["write-once".into(), bytes.to_string()],
            Mode::Stream(bytes) => vec!["stream".into(), bytes.to_string()],
            Mode::UdpEcho => vec!["udp-echo".into()],
            Mode::Http => vec!["http".into()],
            Mode::WasiHttp => vec!["http".into(), "wasi-http".into()],
            Mode::TlsEcho => vec!["tls-echo".into()],
            Mode::UdpSend {
                count,
                size,
                to_name,
            } => {
                let mut args = vec!["udp-send".into(), count.to_string(), size.to_string()];
                if let Some(port) = to_name {
                    args.push(format!("localhost:{port}"));
                }
                args
            }
            Mode::Busy { bytes, ms, sndbuf } => vec![
                "busy".into(),
                bytes.to_string(),
                ms.to_string(),
                sndbuf.to_string(),
            ],
        }
    }
}

/// Paths the harness needs.
pub struct Setup {
    /// This binary (it serves the native and wasmtime-wasi servers).
    pub exe: PathBuf,
    /// target/release/moat.
    pub moat: PathBuf,
    /// Compiled-code cache for moat runs.
    pub cache: PathBuf,
    /// cert.pem and key.pem (for localhost) for the TLS servers.
    pub certs: PathBuf,
    /// Another build to measure beside this one, if any.
    pub baseline: Option<Baseline>,
}

/// Another build of this repository, measured in the same run: its `moat`,
/// its harness (for its wasmtime-wasi) and its guests, all from the target
/// directory of that checkout after `cargo build --release -p moat-host
/// -p moat-bench -p moat-guests`.
pub struct Baseline {
    /// `DIR/release/moat`.
    pub moat: PathBuf,
    /// `DIR/release/moat-bench`.
    pub bench: PathBuf,
    /// `DIR/guests/wasm32-wasip2/release`.
    pub guests: PathBuf,
}

impl Baseline {
    /// The baseline in the target directory `dir`; fails unless every file
    /// it needs is there.
    pub fn in_target_dir(dir: &Path) -> anyhow::Result<Baseline> {
        let baseline = Baseline {
            moat: dir.join("release/moat"),
            bench: dir.join("release/moat-bench"),
            guests: dir.join("guests/wasm32-wasip2/release"),
        };
        let mut needed = vec![baseline.moat.clone(), baseline.bench.clone()];
        for guest in [
            Guest::EchoServer,
            Guest::UdpEcho,
            Guest::BenchServer,
            Guest::BenchStd,
            Guest::Hello,
        ] {
            needed.push(baseline.guests.join(format!("{}.wasm", guest.package())));
        }
        if let Some(missing) = needed.iter().find(|p| !p.exists()) {
            bail!(
                "--baseline {}: {} is missing (build that checkout with `cargo build --release -p moat -p moat-bench -p moat-guests`)",
                dir.display(),
                missing.display()
            );
        }
        Ok(baseline)
    }
}

impl Setup {
    /// Every server kind of this run, in the order each round visits them.
    pub fn kinds(&self) -> Vec<Kind> {
        let mut kinds = vec![Kind::Native, Kind::Moat];
        if self.baseline.is_some() {
            kinds.push(Kind::MoatBaseline);
        }
        kinds.push(Kind::WasmtimeWasi);
        if self.baseline.is_some() {
            kinds.push(Kind::WasmtimeWasiBaseline);
        }
        kinds
    }

    /// [`kinds`](Self::kinds) and moat running the std::net guest, for the
    /// workloads that guest serves.
    pub fn kinds_with_std(&self) -> Vec<Kind> {
        let mut kinds = self.kinds();
        kinds.push(Kind::MoatStd);
        if self.baseline.is_some() {
            kinds.push(Kind::MoatStdBaseline);
        }
        kinds
    }

    fn baseline(&self) -> &Baseline {
        self.baseline
            .as_ref()
            .expect("baseline kinds run only with --baseline")
    }

    /// The `moat` binary of a moat kind.
    pub fn moat_binary(&self, kind: Kind) -> &Path {
        match kind {
            Kind::MoatBaseline | Kind::MoatStdBaseline => &self.baseline().moat,
            _ => &self.moat,
        }
    }

    /// The harness that serves a wasmtime-wasi kind.
    pub fn wasi_binary(&self, kind: Kind) -> &Path {
        match kind {
            Kind::WasmtimeWasiBaseline => &self.baseline().bench,
            _ => &self.exe,
        }
    }

    /// Where `kind`'s copy of `guest` is.
    pub fn guest(&self, kind: Kind, guest: Guest) -> PathBuf {
        match kind {
            Kind::MoatBaseline | Kind::WasmtimeWasiBaseline | Kind::MoatStdBaseline => self
                .baseline()
                .guests
                .join(format!("{}.wasm", guest.package())),
            _ => PathBuf::from(guest.current()),
        }
    }

    /// The flags that lift a moat kind's socket cap, for the workloads that
    /// hold thousands of connections (idle_sockets): a server under such
    /// load is what `--max-sockets` exists to raise. Builds from before the
    /// cap have no such flag and need none.
    pub fn uncapped(&self, kind: Kind) -> Vec<&'static str> {
        let help = Command::new(self.moat_binary(kind))
            .args(["run", "--help"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        if help.contains("--max-sockets") {
            vec!["--max-sockets=1000000"]
        } else {
            Vec::new()
        }
    }

    /// The compiled-code cache of the wasmtime-wasi-http commands
    /// (`serve-wasi-http`, `run-wasi-http`): the harness's, never
    /// `~/.cache/wasmtime`.
    pub fn wasmtime_cache(&self) -> PathBuf {
        self.cache.join("wasmtime-wasi-http")
    }

    /// The compiled-code cache of a moat kind (each build its own).
    /// `--audit=FILE` for the audited kind (a file of the bench's own,
    /// appended to by every run), nothing for the others.
    pub fn audit_flag(&self, kind: Kind) -> Vec<String> {
        match kind {
            Kind::MoatAudited => vec![format!(
                "--audit={}",
                self.cache.with_file_name("audit.jsonl").display()
            )],
            _ => Vec::new(),
        }
    }

    /// `--secret=...` for the kind with a secret (its value in
    /// [`SECRET_VAR`] of the command's environment), nothing for the
    /// others: a key for an API elsewhere, in `Authorization`.
    pub fn secret_flag(&self, kind: Kind) -> Vec<String> {
        match kind {
            Kind::MoatSecret => vec![format!(
                "--secret=API_KEY;from=env:{SECRET_VAR};to=https://api.example.com/v1/;\
                 header=authorization;form=Bearer {{}}"
            )],
            _ => Vec::new(),
        }
    }

    pub fn cache_for(&self, kind: Kind) -> PathBuf {
        match kind {
            Kind::MoatBaseline | Kind::MoatStdBaseline => self.cache.join("baseline"),
            _ => self.cache.clone(),
        }
    }
}

/// The variable of the `moat --secret` command's environment that holds
/// the secret's value ([`Setup::secret_flag`]).
pub const SECRET_VAR: &str = "MOAT_BENCH_SECRET";

/// The secret's value: 32 characters, as an API key is.
pub const SECRET_VALUE: &str = "sk-bench-7Hq2mZ9xR4tW8vB1nK6pQ3";

/// A running server process; killed when dropped.
pub struct Server {
    child: Child,
    pub addr: SocketAddr,
}

impl Server {
    /// Starts `kind` serving `mode` on 127.0.0.1 (a free port), pinned to
    /// CPU 0 if `pinned`; returns once it listens.
    pub fn start(setup: &Setup, kind: Kind, mode: Mode, pinned: bool) -> anyhow::Result<Server> {
        Server::start_with(setup, kind, mode, pinned, &[])
    }

    /// As [`start`](Self::start), with `moat_flags` added to the command
    /// line of a moat kind (bounds a workload needs raised).
    pub fn start_with(
        setup: &Setup,
        kind: Kind,
        mode: Mode,
        pinned: bool,
        moat_flags: &[&str],
    ) -> anyhow::Result<Server> {
        let listen = "127.0.0.1:0".to_owned();
        let mut mode_args = mode.args();
        let mut command = if pinned {
            let mut c = Command::new("taskset");
            c.args(["-c", "0"]);
            c
        } else {
            // `env` as a neutral launcher, so both branches build the same way.
            Command::new("env")
        };
        crate::measure::without_backtraces(&mut command);
        match kind {
            Kind::Native => {
                command
                    .arg(&setup.exe)
                    .arg("serve-native")
                    .arg(&mode_args[0])
                    .arg(&listen);
                command.args(&mode_args[1..]);
                if let Mode::TlsEcho = mode {
                    command
                        .arg(setup.certs.join("cert.pem"))
                        .arg(setup.certs.join("key.pem"));
                }
            }
            Kind::Moat | Kind::MoatBaseline if matches!(mode, Mode::WasiHttp) => {
                command
                    .arg(setup.moat_binary(kind))
                    .arg("serve")
                    .arg(format!("--cache-dir={}", setup.cache_for(kind).display()))
                    .arg(format!("--addr={listen}"))
                    .args(moat_flags)
                    .arg(setup.guest(kind, Guest::WstdServe));
            }
            Kind::Moat | Kind::MoatBaseline | Kind::MoatAudited | Kind::MoatSecret => {
                command
                    .arg(setup.moat_binary(kind))
                    .arg("run")
                    .arg(format!("--cache-dir={}", setup.cache_for(kind).display()))
                    .arg("--allow-listen=127.0.0.1:0")
                    .arg("--allow-net=127.0.0.1")
                    .args(setup.uncapped(kind))
                    .args(setup.audit_flag(kind))
                    .args(setup.secret_flag(kind))
                    .env(SECRET_VAR, SECRET_VALUE)
                    .args(moat_flags);
                if let Mode::UdpSend {
                    to_name: Some(_), ..
                } = mode
                {
                    // A name never matches an IP literal: sending to
                    // localhost needs a grant of its own.
                    command.arg("--allow-net=localhost");
                }
                match mode {
                    Mode::Echo => {
                        command
                            .arg(setup.guest(kind, Guest::EchoServer))
                            .arg(&listen);
                    }
                    Mode::UdpEcho => {
                        command.arg(setup.guest(kind, Guest::UdpEcho)).arg(&listen);
                    }
                    Mode::Http => {
                        command
                            .arg(setup.guest(kind, Guest::HttpServer))
                            .arg(&listen);
                    }
                    Mode::TlsEcho => {
                        command
                            .arg(format!("--dir={}::/certs", setup.certs.display()))
                            .arg(setup.guest(kind, Guest::BenchServer))
                            .args(["tls-echo", &listen, "/certs/cert.pem", "/certs/key.pem"]);
                    }
                    _ => {
                        // bench-server takes MODE ADDR ARGS...
                        let rest = mode_args.split_off(1);
                        command
                            .arg(setup.guest(kind, Guest::BenchServer))
                            .arg(&mode_args[0])
                            .arg(&listen)
                            .args(rest);
                    }
                }
            }
            Kind::MoatHyper | Kind::MoatStd | Kind::MoatStdBaseline
                if matches!(mode, Mode::WasiHttp) =>
            {
                bail!("the {} server has no wasi:http mode", kind.label());
            }
            Kind::MoatHyper => {
                command
                    .arg(&setup.moat)
                    .arg("run")
                    .arg(format!("--cache-dir={}", setup.cache.display()))
                    .arg("--allow-listen=127.0.0.1:0")
                    .arg(setup.guest(kind, Guest::HyperServe))
                    .arg(&listen);
            }
            Kind::MoatStd | Kind::MoatStdBaseline => {
                let rest = mode_args.split_off(1);
                command
                    .arg(setup.moat_binary(kind))
                    .arg("run")
                    .arg(format!("--cache-dir={}", setup.cache_for(kind).display()))
                    .arg("--allow-listen=127.0.0.1:0")
                    .arg("--allow-net=127.0.0.1")
                    .args(setup.uncapped(kind))
                    .arg(setup.guest(kind, Guest::BenchStd))
                    .arg(&mode_args[0])
                    .arg(&listen)
                    .args(rest);
            }
            Kind::WasmtimeWasi | Kind::WasmtimeWasiBaseline if matches!(mode, Mode::WasiHttp) => {
                command
                    .arg(setup.wasi_binary(kind))
                    .arg("serve-wasi-http")
                    .arg("--cache-dir")
                    .arg(setup.wasmtime_cache())
                    .arg(&listen)
                    .arg(setup.guest(kind, Guest::WstdServe));
            }
            Kind::WasmtimeWasi | Kind::WasmtimeWasiBaseline => {
                let rest = mode_args.split_off(1);
                command
                    .arg(setup.wasi_binary(kind))
                    .arg("serve-wasi")
                    .arg(setup.guest(kind, Guest::BenchStd))
                    .arg(&mode_args[0])
                    .arg(&listen)
                    .args(rest);
            }
        }
        // `moat serve` says where it listens on stderr, the others on stdout.
        let on_stderr = kind.is_moat() && matches!(mode, Mode::WasiHttp);
        let (stdout, stderr) = if on_stderr {
            (Stdio::null(), Stdio::piped())
        } else {
            (Stdio::piped(), Stdio::inherit())
        };
        let mut child = command
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("cannot start the {} server", kind.label()))?;
        let (tx, rx) = mpsc::channel();
        if on_stderr {
            let stderr = child.stderr.take().context("server stderr")?;
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    match line.strip_prefix("moat: serving http://") {
                        Some(addr) => {
                            let _ = tx.send(addr.trim().trim_end_matches('/').to_owned());
                        }
                        // Passed on, as an inherited stderr would show it.
                        None => eprintln!("{line}"),
                    }
                }
            });
        } else {
            let stdout = child.stdout.take().context("server stdout")?;
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if let Some(addr) = line.strip_prefix("listening on ") {
                        let _ = tx.send(addr.trim().to_owned());
                    }
                }
            });
        }
        let addr = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(addr) => addr.parse().context("server address")?,
            Err(_) => {
                let _ = child.kill();
                bail!("the {} server did not start listening", kind.label());
            }
        };
        Ok(Server { child, addr })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// CPU time used so far, in ns. With `taskset`, the child is taskset
    /// itself exec'd into the server: same pid.
    pub fn cpu_ns(&self) -> u64 {
        measure::cpu_ns(self.pid())
    }

    /// Resident memory now and at its peak, KiB.
    pub fn rss_kib(&self) -> (u64, u64) {
        measure::rss_kib(self.pid())
    }

    pub fn fd_count(&self) -> usize {
        measure::fd_count(self.pid())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
