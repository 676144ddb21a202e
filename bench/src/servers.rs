//! The three servers, each a process of its own: native tokio, moat running
//! a guest, and a std::net guest on wasmtime-wasi's own sockets.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::measure;

/// Which server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// The same logic written with tokio, no wasm: the limit.
    Native,
    /// `moat run` with a moat-sdk guest.
    Moat,
    /// A std::net guest on wasmtime-wasi's p2 sockets, the way wasmtime's
    /// CLI runs it: what users would pick instead.
    WasmtimeWasi,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Native, Kind::Moat, Kind::WasmtimeWasi];

    pub fn label(self) -> &'static str {
        match self {
            Kind::Native => "native",
            Kind::Moat => "moat",
            Kind::WasmtimeWasi => "wasmtime-wasi",
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
    /// On a "go" datagram, send `count` datagrams of `size` bytes back,
    /// then "done".
    UdpSend { count: usize, size: usize },
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
            Mode::TlsEcho => vec!["tls-echo".into()],
            Mode::UdpSend { count, size } => {
                vec!["udp-send".into(), count.to_string(), size.to_string()]
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
}

/// A running server process; killed when dropped.
pub struct Server {
    child: Child,
    pub addr: SocketAddr,
}

impl Server {
    /// Starts `kind` serving `mode` on 127.0.0.1 (a free port), pinned to
    /// CPU 0 if `pinned`; returns once it listens.
    pub fn start(setup: &Setup, kind: Kind, mode: Mode, pinned: bool) -> anyhow::Result<Server> {
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
            Kind::Moat => {
                command
                    .arg(&setup.moat)
                    .arg("run")
                    .arg(format!("--cache-dir={}", setup.cache.display()))
                    .arg("--allow-listen=127.0.0.1:0")
                    .arg("--allow-net=127.0.0.1");
                match mode {
                    Mode::Echo => {
                        command.arg(moat_guests::ECHO_SERVER).arg(&listen);
                    }
                    Mode::UdpEcho => {
                        command.arg(moat_guests::UDP_ECHO).arg(&listen);
                    }
                    Mode::TlsEcho => {
                        command
                            .arg(format!("--dir={}::/certs", setup.certs.display()))
                            .arg(moat_guests::BENCH_SERVER)
                            .args(["tls-echo", &listen, "/certs/cert.pem", "/certs/key.pem"]);
                    }
                    _ => {
                        // bench-server takes MODE ADDR ARGS...
                        let rest = mode_args.split_off(1);
                        command
                            .arg(moat_guests::BENCH_SERVER)
                            .arg(&mode_args[0])
                            .arg(&listen)
                            .args(rest);
                    }
                }
            }
            Kind::WasmtimeWasi => {
                let rest = mode_args.split_off(1);
                command
                    .arg(&setup.exe)
                    .arg("serve-wasi")
                    .arg(moat_guests::BENCH_STD)
                    .arg(&mode_args[0])
                    .arg(&listen)
                    .args(rest);
            }
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("cannot start the {} server", kind.label()))?;
        let stdout = child.stdout.take().context("server stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(addr) = line.strip_prefix("listening on ") {
                    let _ = tx.send(addr.trim().to_owned());
                }
            }
        });
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
