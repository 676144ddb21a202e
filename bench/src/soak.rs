//! `moat-bench soak`: the moat server under long, checked load, its memory
//! and descriptors watched throughout.
//!
//! ```text
//! cargo run --release -p moat-bench -- soak [--quick] [PART...]
//! ```
//!
//! Parts (all by default, in this order):
//! - `bytes`: 1 GiB (`--quick`: 64 MiB) of a pseudo-random stream through
//!   the TCP echo, then through the TLS echo; the SHA-256 and the count of
//!   the bytes sent and of those echoed must match ([`bytes`]).
//! - `sequential`: 100,000 connections (5,000) one after another, each
//!   echoing 16 bytes, checked ([`conns`]).
//! - `concurrent`: 10,000 connections (1,000) open at once, each echoing
//!   16 bytes, then all closed; three rounds ([`conns`]).
//! - `udp`: 512-byte datagrams at 5,000/s for 60 s (10 s) through the UDP
//!   echo: sent, received, lost, duplicated, out of order ([`udp`]).
//! - `serve`: 300,000 (20,000) keep-alive `GET /` through `moat serve`, 8
//!   clients at once, 100 requests to a connection; each response must be
//!   the component's greeting ([`serve`]).
//!
//! The servers are the `moat` kind of the benchmark ([`Server`], `moat
//! run` with this build's guests): examples/echo-server for TCP,
//! bench-server's `tls-echo` for TLS, examples/udp-echo for UDP; and
//! `moat serve` with the wasi:http component wstd-serve. Each is
//! started once, when a part first needs it, and serves every later part
//! that uses it: `bytes`, `sequential` and `concurrent` all go through the
//! same TCP echo process, so what one leaves behind the next starts with.
//!
//! Each part runs as one or more phases (one per server it uses: `bytes`
//! has `bytes/tcp` and `bytes/tls`). A [`sampler`] thread reads the
//! phase's server (VmRSS, open descriptors) every second, and once as the
//! phase begins and once as it ends. A phase ends only after waiting (up
//! to [`FD_SETTLE`]) for the server's descriptors to come back to within
//! [`FD_SLACK`] of where they began.
//!
//! Writes `target/bench/soak.json` (every reading and every figure),
//! `target/bench/soak.md` (the tables) and `target/bench/soak.svg` (RSS
//! and descriptors over time). Exits non-zero, after writing them, if an
//! echo differed, a connection failed, a UDP echo came back changed, a
//! request was not answered with the greeting, a server exited, or a
//! server kept more than [`FD_SLACK`] descriptors or
//! [`HOST_MEMORY_SLACK_KIB`] of the host's own memory (VmRSS without the
//! guest's linear memory) past a phase.

mod bytes;
mod conns;
mod output;
mod plot;
mod sampler;
mod serve;
mod stream;
mod udp;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;

use crate::servers::{Kind, Mode, Server, Setup};
use sampler::{Resources, Sample, Sampler, alive, settle_fds};

/// Every part, in the order they run.
pub const PARTS: &[&str] = &["bytes", "sequential", "concurrent", "udp", "serve"];

/// Descriptors a server may hold past a phase beyond those it held as the
/// phase began. The runtime and wasmtime open a few lazily the first time
/// some path is taken (a timer, a worker thread's, a compile-cache file),
/// which is not a leak; a leak per connection would be thousands over
/// these parts, far past 16.
pub const FD_SLACK: usize = 16;

/// How much more of its own memory (VmRSS without the guest's linear
/// memory, which a wasm memory never gives back) the host may hold at a
/// phase's end than at its start. A part may fairly leave what its peak
/// grew: the allocator's arenas and tables sized for the most sockets at
/// once, measured 27.5 MiB after `concurrent`'s 10,000 and under 1 MiB
/// after the other parts. A leak of a KiB per connection would be 100 MiB
/// over `sequential`; `concurrent` also judges each round against the
/// first ([`conns::ROUND_HOST_MEMORY_SLACK_KIB`]), which such a leak fails
/// by far.
pub const HOST_MEMORY_SLACK_KIB: u64 = 40 << 10;

/// How long a phase waits, polling, for the server's descriptors to come
/// back down before judging them. A socket the guest closed is gone within
/// milliseconds once its last bytes are out (none are queued here: every
/// echo was read back); 10,000 of them on a loaded two-core machine take
/// well under a second. Five seconds leaves room without hiding a leak.
pub const FD_SETTLE: Duration = Duration::from_secs(5);

/// What the TCP echo (every TCP part shares it) needs raised for the
/// `concurrent` part, on top of the socket cap the benchmark already lifts
/// (`--max-sockets`, [`Setup::uncapped`]). examples/echo-server reserves a
/// 64 KiB read buffer per connection in linear memory: 625 MiB for 10,000,
/// past the default `--max-memory` of 512 MiB. Every client is 127.0.0.1,
/// one peer: the per-listener caps are set above the 10,000 connections
/// (they are unset by default; set here so that a default later would not
/// quietly cap this run).
const TCP_ECHO_FLAGS: &[&str] = &[
    "--max-memory=1GiB",
    "--max-connections=20000",
    "--max-connections-per-peer=20000",
];

/// The soak's servers: three echoes, and a wasi:http component under
/// `moat serve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    Tcp,
    Tls,
    Udp,
    Http,
}

impl Target {
    fn mode(self) -> Mode {
        match self {
            Target::Tcp => Mode::Echo,
            Target::Tls => Mode::TlsEcho,
            Target::Udp => Mode::UdpEcho,
            Target::Http => Mode::WasiHttp,
        }
    }

    fn flags(self) -> &'static [&'static str] {
        match self {
            Target::Tcp => TCP_ECHO_FLAGS,
            Target::Tls | Target::Udp | Target::Http => &[],
        }
    }

    fn label(self) -> &'static str {
        match self {
            Target::Tcp => "moat run echo-server (TCP echo)",
            Target::Tls => "moat run bench-server tls-echo (TLS echo)",
            Target::Udp => "moat run udp-echo (UDP echo)",
            Target::Http => "moat serve wstd-serve (wasi:http)",
        }
    }
}

/// The servers started so far, each kept for the parts after.
struct Servers<'a> {
    setup: &'a Setup,
    running: BTreeMap<Target, Server>,
}

impl Servers<'_> {
    fn get(&mut self, target: Target) -> anyhow::Result<&Server> {
        // A server that died in an earlier part (a failure already
        // recorded there) is replaced, so the later parts still run.
        if self.running.get(&target).is_some_and(|s| !alive(s.pid())) {
            eprintln!("   {} had exited: starting another", target.label());
            self.running.remove(&target);
        }
        if !self.running.contains_key(&target) {
            let server =
                Server::start_with(self.setup, Kind::Moat, target.mode(), false, target.flags())
                    .with_context(|| format!("cannot start {}", target.label()))?;
            eprintln!(
                "   started {} (pid {}) on {}",
                target.label(),
                server.pid(),
                server.addr
            );
            self.running.insert(target, server);
        }
        self.running
            .get(&target)
            .context("the server just started is missing")
    }
}

/// What a phase measured.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Figures {
    Bytes(bytes::ByteStream),
    Sequential(conns::Sequential),
    Concurrent(conns::Concurrent),
    Udp(udp::Udp),
    Serve(serve::Serve),
}

impl Figures {
    fn failures(&self) -> Vec<String> {
        match self {
            Figures::Bytes(f) => f.failures(),
            Figures::Sequential(f) => f.failures(),
            Figures::Concurrent(f) => f.failures(),
            Figures::Udp(f) => f.failures(),
            Figures::Serve(f) => f.failures(),
        }
    }

    /// (label, value) rows of the table.
    pub fn rows(&self) -> Vec<(String, String)> {
        match self {
            Figures::Bytes(f) => f.rows(),
            Figures::Sequential(f) => f.rows(),
            Figures::Concurrent(f) => f.rows(),
            Figures::Udp(f) => f.rows(),
            Figures::Serve(f) => f.rows(),
        }
    }
}

/// One phase: a part's run against one server.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    /// `bytes/tcp`, `sequential`, ...
    pub name: String,
    pub part: String,
    /// Which server (its command).
    pub server: String,
    pub figures: Option<Figures>,
    /// Why the phase has no figures.
    pub error: Option<String>,
    pub resources: Option<Resources>,
    /// Every check it failed; empty if it passed.
    pub failures: Vec<String>,
}

/// Everything a soak run wrote.
#[derive(Debug, Clone, Serialize)]
pub struct SoakReport {
    pub command: String,
    pub machine: String,
    pub quick: bool,
    pub fd_slack: usize,
    pub fd_settle_seconds: f64,
    pub sample_every_seconds: f64,
    pub wall_seconds: f64,
    pub passed: bool,
    pub failures: Vec<String>,
    pub phases: Vec<Phase>,
    pub samples: Vec<Sample>,
}

/// `moat-bench soak [--quick] [PART...]`.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let mut quick = false;
    let mut chosen = Vec::new();
    for arg in args {
        match arg.as_str() {
            "--quick" => quick = true,
            "-h" | "--help" => {
                println!("{}", usage());
                return Ok(());
            }
            part if PARTS.contains(&part) => chosen.push(part.to_owned()),
            other => bail!("unknown argument {other}\n{}", usage()),
        }
    }
    if chosen.is_empty() {
        chosen = PARTS.iter().map(|s| s.to_string()).collect();
    }
    // In the order of PARTS, whatever the order given.
    chosen.sort_by_key(|p| PARTS.iter().position(|q| *q == p.as_str()));
    chosen.dedup();

    let (setup, out) = crate::set_up(None)?;
    let machine = crate::machine();
    eprintln!("{machine}");

    let started = Instant::now();
    let sampler = Sampler::start(started);
    let mut servers = Servers {
        setup: &setup,
        running: BTreeMap::new(),
    };
    let mut phases = Vec::new();
    for part in &chosen {
        eprintln!("== soak {part}");
        let part_start = Instant::now();
        for (name, target) in phases_of(part) {
            let phase = run_phase(&mut servers, &sampler, &setup, part, name, target, quick);
            for failure in &phase.failures {
                eprintln!("   FAILED {failure}");
            }
            phases.push(phase);
        }
        eprintln!("   ({:.0} s)", part_start.elapsed().as_secs_f64());
    }
    drop(servers);
    let samples = sampler.finish();
    let failures: Vec<String> = phases.iter().flat_map(|p| p.failures.clone()).collect();
    let report = SoakReport {
        command: format!(
            "cargo run --release -p moat-bench -- soak{}",
            args.iter().map(|a| format!(" {a}")).collect::<String>()
        ),
        machine,
        quick,
        fd_slack: FD_SLACK,
        fd_settle_seconds: FD_SETTLE.as_secs_f64(),
        sample_every_seconds: sampler::SAMPLE_EVERY.as_secs_f64(),
        wall_seconds: started.elapsed().as_secs_f64(),
        passed: failures.is_empty(),
        failures,
        phases,
        samples,
    };
    std::fs::write(
        out.join("soak.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    let table = output::markdown(&report);
    println!("{table}");
    std::fs::write(out.join("soak.md"), &table)?;
    plot::chart(&report, &out.join("soak.svg"))?;
    eprintln!(
        "wrote {0}/soak.json, {0}/soak.md, {0}/soak.svg ({1:.0} s)",
        out.display(),
        report.wall_seconds
    );
    if !report.passed {
        bail!("the soak failed:\n  {}", report.failures.join("\n  "));
    }
    Ok(())
}

fn usage() -> String {
    format!(
        "usage: moat-bench soak [--quick] [PART...]\n\
         the moat server (`moat run` with the benchmark's echo guests, `moat serve` with\n\
         its wasi:http component) under long, checked load, its RSS and descriptors read\n\
         every second; writes target/bench/soak.json, soak.md and soak.svg; exits non-zero\n\
         if an echo or a response differs, a connection fails or a server keeps more than\n\
         {FD_SLACK} descriptors or {} MiB of the host's own memory past a part\n\
         parts (default: all): {}",
        HOST_MEMORY_SLACK_KIB >> 10,
        PARTS.join(" ")
    )
}

/// A part's phases: (phase name, server).
fn phases_of(part: &str) -> Vec<(&'static str, Target)> {
    match part {
        "bytes" => vec![("bytes/tcp", Target::Tcp), ("bytes/tls", Target::Tls)],
        "sequential" => vec![("sequential", Target::Tcp)],
        "concurrent" => vec![("concurrent", Target::Tcp)],
        "serve" => vec![("serve", Target::Http)],
        _ => vec![("udp", Target::Udp)],
    }
}

/// Runs one phase with its server sampled, waits for the server's
/// descriptors to settle, and judges it.
fn run_phase(
    servers: &mut Servers,
    sampler: &Sampler,
    setup: &Setup,
    part: &str,
    name: &str,
    target: Target,
    quick: bool,
) -> Phase {
    let mut phase = Phase {
        name: name.to_owned(),
        part: part.to_owned(),
        server: target.label().to_owned(),
        figures: None,
        error: None,
        resources: None,
        failures: Vec::new(),
    };
    let server = match servers.get(target) {
        Ok(server) => server,
        Err(e) => {
            phase.error = Some(format!("{e:#}"));
            phase.failures.push(format!("{name}: {e:#}"));
            return phase;
        }
    };
    let (addr, pid) = (server.addr, server.pid());
    let start = sampler.begin(name, pid);
    let figures = match name {
        "bytes/tcp" => bytes::tcp(addr, pick(quick, bytes::FULL, bytes::QUICK)).map(Figures::Bytes),
        "bytes/tls" => bytes::tls(addr, &setup.certs, pick(quick, bytes::FULL, bytes::QUICK))
            .map(Figures::Bytes),
        "sequential" => conns::sequential(
            addr,
            pick(quick, conns::SEQUENTIAL_FULL, conns::SEQUENTIAL_QUICK),
        )
        .map(Figures::Sequential),
        "concurrent" => conns::concurrent(
            addr,
            pid,
            pick(quick, conns::CONCURRENT_FULL, conns::CONCURRENT_QUICK),
            sampler,
        )
        .map(Figures::Concurrent),
        "serve" => serve::run(addr, pick(quick, serve::FULL, serve::QUICK)).map(Figures::Serve),
        _ => udp::run(addr, pick(quick, udp::FULL, udp::QUICK)).map(Figures::Udp),
    };
    let settled = settle_fds(pid, start.fds + FD_SLACK, FD_SETTLE);
    phase.resources = sampler.end(settled);
    match figures {
        Ok(figures) => {
            eprintln!(
                "   {name}: {}",
                figures
                    .rows()
                    .iter()
                    .filter(|(label, _)| !label.starts_with("round") && !label.contains("SHA"))
                    .map(|(label, value)| format!("{label} {value}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            phase.failures.extend(figures.failures());
            phase.figures = Some(figures);
        }
        Err(e) => {
            phase.failures.push(format!("{name}: {e:#}"));
            phase.error = Some(format!("{e:#}"));
        }
    }
    phase
        .failures
        .extend(judge_server(name, phase.resources.as_ref()));
    phase
}

/// What a phase's server readings fail: the server gone, holding more
/// than [`FD_SLACK`] descriptors beyond its start once the load was over,
/// or more than [`HOST_MEMORY_SLACK_KIB`] more of the host's own memory.
fn judge_server(name: &str, resources: Option<&Resources>) -> Vec<String> {
    let Some(r) = resources else {
        return vec![format!("{name}: no readings of the server")];
    };
    if !r.alive_at_end {
        return vec![format!(
            "{name}: the server (pid {}) is no longer running",
            r.pid
        )];
    }
    let mut failed = Vec::new();
    if r.fds_end > r.fds_start + FD_SLACK {
        failed.push(format!(
            "{name}: the server holds {} descriptors, {} more than at the start ({}), \
             {:.1} s after the load ended (allowed: {FD_SLACK} more)",
            r.fds_end,
            r.fds_end - r.fds_start,
            r.fds_start,
            r.fd_settle_seconds
        ));
    }
    if r.host_end_kib > r.host_start_kib + HOST_MEMORY_SLACK_KIB {
        failed.push(format!(
            "{name}: the host holds {} KiB of its own memory, {} KiB more than at the \
             start (allowed: {HOST_MEMORY_SLACK_KIB} KiB more)",
            r.host_end_kib,
            r.host_end_kib - r.host_start_kib
        ));
    }
    failed
}

/// `quick` under `--quick`, `full` otherwise.
fn pick<T>(quick: bool, full: T, quick_value: T) -> T {
    if quick { quick_value } else { full }
}

#[cfg(test)]
mod tests {
    use super::sampler::Resources;
    use super::{FD_SLACK, HOST_MEMORY_SLACK_KIB, judge_server};

    fn readings(fds_start: usize, fds_end: usize, alive_at_end: bool) -> Resources {
        Resources {
            pid: 1,
            samples: 2,
            rss_start_kib: 1,
            rss_max_kib: 1,
            rss_end_kib: 1,
            host_start_kib: 1,
            host_max_kib: 1,
            host_end_kib: 1,
            fds_start,
            fds_max: fds_end.max(fds_start),
            fds_end,
            fd_settle_seconds: 5.0,
            alive_at_end,
        }
    }

    #[test]
    fn descriptors_past_the_slack_fail() {
        assert!(judge_server("p", Some(&readings(13, 13 + FD_SLACK, true))).is_empty());
        assert!(judge_server("p", Some(&readings(20, 13, true))).is_empty());
        let leak = judge_server("p", Some(&readings(13, 14 + FD_SLACK, true)));
        assert!(leak[0].contains("17 more than at the start"), "{leak:?}");
    }

    #[test]
    fn host_memory_past_the_slack_fails_and_guest_memory_does_not_count() {
        let mut r = readings(13, 13, true);
        // The guest's memory grew by a GiB: not the host's.
        r.rss_end_kib = 1 << 20;
        r.host_end_kib = r.host_start_kib + HOST_MEMORY_SLACK_KIB;
        assert!(judge_server("p", Some(&r)).is_empty());
        r.host_end_kib += 1;
        let grew = judge_server("p", Some(&r));
        assert!(grew[0].contains("KiB more than at the start"), "{grew:?}");
    }

    #[test]
    fn a_dead_server_or_no_readings_fail() {
        assert!(!judge_server("p", Some(&readings(13, 13, false))).is_empty());
        assert!(!judge_server("p", None).is_empty());
    }
}
