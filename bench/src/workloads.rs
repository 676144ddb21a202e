//! The workloads: each runs the same job against every server, rounds
//! interleaved (native, moat, wasmtime-wasi, native, ...; with a baseline,
//! its moat after moat and its wasmtime-wasi after wasmtime-wasi).

use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::measure::{self, command_cost};
use crate::report::{Better, MetricBuilder, Workload};
use crate::servers::{Guest, Kind, Mode, Server, Setup};

/// Settings of one harness run.
pub struct Run {
    pub setup: Setup,
    pub quick: bool,
    pub rounds: usize,
}

impl Run {
    fn scale(&self, full: usize, quick: usize) -> usize {
        if self.quick { quick } else { full }
    }
}

/// Every workload, in the order of the table.
pub const ALL: &[&str] = &[
    "tcp_throughput",
    "tcp_rr",
    "tcp_connect",
    "idle_sockets",
    "large_write",
    "busy_guest",
    "busy_guest_large",
    "rss_after_burst",
    "cold_start",
    "udp_echo",
    "udp_send",
    "udp_send_name",
    "tls_throughput",
    "tls_rr",
    "tls_connect",
    "http_rr",
    "c10k",
];

pub fn run(name: &str, run: &Run) -> anyhow::Result<Workload> {
    match name {
        "tcp_throughput" => tcp_throughput(run),
        "tcp_rr" => tcp_rr(run),
        "tcp_connect" => tcp_connect(run),
        "idle_sockets" => idle_sockets(run),
        "large_write" => large_write(run),
        "busy_guest" => busy_guest(run),
        "busy_guest_large" => busy_guest_large(run),
        "rss_after_burst" => rss_after_burst(run),
        "cold_start" => cold_start(run),
        "udp_echo" => udp_echo(run),
        "udp_send" => udp_send(run),
        "udp_send_name" => udp_send_name(run),
        "tls_throughput" => tls_throughput(run),
        "tls_rr" => tls_rr(run),
        "tls_connect" => tls_connect(run),
        "http_rr" => http_rr(run),
        "c10k" => c10k(run),
        other => bail!("unknown workload {other}; known: {}", ALL.join(", ")),
    }
}

/// A client runtime on this thread, pinned to CPU 0 (beside the pinned
/// server) or free.
fn client<T>(
    pinned: bool,
    job: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    measure::pin_current_thread(pinned.then_some(0))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(job);
    measure::pin_current_thread(None)?;
    result
}

fn started(run: &Run, mode: Mode, pinned: bool) -> anyhow::Result<Vec<(Kind, Server)>> {
    start_all(run, run.setup.kinds(), mode, pinned)
}

/// As [`started`], with moat running the std::net guest too.
fn started_with_std(run: &Run, mode: Mode, pinned: bool) -> anyhow::Result<Vec<(Kind, Server)>> {
    start_all(run, run.setup.kinds_with_std(), mode, pinned)
}

fn start_all(
    run: &Run,
    kinds: Vec<Kind>,
    mode: Mode,
    pinned: bool,
) -> anyhow::Result<Vec<(Kind, Server)>> {
    kinds
        .into_iter()
        .map(|k| Ok((k, Server::start(&run.setup, k, mode, pinned)?)))
        .collect()
}

/// Adds the p50 and p99 of `times` (sorted here) as `kind`'s samples.
fn add_percentiles(
    p50: &mut MetricBuilder,
    p99: &mut MetricBuilder,
    kind: Kind,
    times: &mut [f64],
) {
    times.sort_by(f64::total_cmp);
    p50.add(kind, times[times.len() / 2]);
    p99.add(kind, times[times.len() * 99 / 100]);
}

fn ratio(w: &crate::report::Metric, kind: Kind) -> f64 {
    w.ratio_to_native.get(&kind).copied().unwrap_or(f64::NAN)
}

fn median(w: &crate::report::Metric, kind: Kind) -> f64 {
    w.servers.get(&kind).map_or(f64::NAN, |s| s.median)
}

// ---------------------------------------------------------------- throughput

/// Writes `total` bytes in `chunk`-sized writes, then half-closes, while
/// reading the echo back; fails unless all of it came back.
async fn echo_through(
    mut rx: impl AsyncRead + Unpin,
    mut tx: impl AsyncWrite + Unpin,
    total: usize,
    chunk: usize,
) -> anyhow::Result<()> {
    let writer = async move {
        let data = vec![7u8; chunk];
        let mut sent = 0;
        while sent < total {
            tx.write_all(&data).await?;
            sent += chunk;
        }
        tx.shutdown().await?;
        anyhow::Ok(())
    };
    let reader = async move {
        let mut buf = vec![0u8; chunk];
        let mut got = 0;
        loop {
            match rx.read(&mut buf).await? {
                0 => break,
                n => got += n,
            }
        }
        anyhow::Ok(got)
    };
    let (w, r) = tokio::join!(writer, reader);
    w?;
    let got = r?;
    if got != total {
        bail!("echoed {got} of {total} bytes");
    }
    Ok(())
}

fn tcp_throughput(run: &Run) -> anyhow::Result<Workload> {
    const CHUNK: usize = 64 * 1024;
    let total = run.scale(512, 64) << 20;
    let servers = started_with_std(run, Mode::Echo, true)?;
    let mut rate = MetricBuilder::new("throughput", "MiB/s", Better::Higher);
    let mut cpu = MetricBuilder::new("server CPU per byte", "ns/B", Better::Lower);
    for _ in 0..run.rounds {
        for (kind, server) in &servers {
            let cpu0 = server.cpu_ns();
            let start = Instant::now();
            client(true, async {
                let stream = TcpStream::connect(server.addr).await?;
                stream.set_nodelay(true)?;
                let (rx, tx) = stream.into_split();
                echo_through(rx, tx, total, CHUNK).await
            })?;
            let secs = start.elapsed().as_secs_f64();
            rate.add(*kind, total as f64 / (1 << 20) as f64 / secs);
            cpu.add(*kind, (server.cpu_ns() - cpu0) as f64 / total as f64);
        }
    }
    let (rate, cpu) = (rate.build(), cpu.build());
    let met = ratio(&rate, Kind::Moat) >= 0.9
        && ratio(&cpu, Kind::Moat) <= 1.1
        && median(&rate, Kind::Moat) > median(&rate, Kind::WasmtimeWasi);
    Ok(Workload {
        name: "tcp_throughput".into(),
        what: format!(
            "1 connection, {} MiB echoed in 64 KiB chunks; client and server pinned to CPU 0",
            total >> 20
        ),
        goal: "≥ 0.9× native MiB/s; CPU/byte ≤ 1.1×; ahead of wasmtime-wasi".into(),
        met: Some(met),
        verdict: format!(
            "moat {:.2}× native throughput, {:.2}× CPU per byte",
            ratio(&rate, Kind::Moat),
            ratio(&cpu, Kind::Moat)
        ),
        metrics: vec![rate, cpu],
    })
}

// ---------------------------------------------------------------- round trips

fn tcp_rr(run: &Run) -> anyhow::Result<Workload> {
    let trips = run.scale(20_000, 5_000);
    let servers = started_with_std(run, Mode::Echo, true)?;
    let mut p50 = MetricBuilder::new("round trip p50", "µs", Better::Lower);
    let mut p99 = MetricBuilder::new("round trip p99", "µs", Better::Lower);
    let mut cpu = MetricBuilder::new("server CPU per round trip", "µs", Better::Lower);
    for _ in 0..run.rounds {
        for (kind, server) in &servers {
            let cpu0 = server.cpu_ns();
            let mut times = client(true, async {
                let mut stream = TcpStream::connect(server.addr).await?;
                stream.set_nodelay(true)?;
                let mut times = Vec::with_capacity(trips);
                let mut byte = [0u8; 1];
                for _ in 0..trips {
                    let t = Instant::now();
                    stream.write_all(&byte).await?;
                    stream.read_exact(&mut byte).await?;
                    times.push(t.elapsed().as_secs_f64() * 1e6);
                }
                Ok(times)
            })?;
            cpu.add(*kind, (server.cpu_ns() - cpu0) as f64 / trips as f64 / 1e3);
            add_percentiles(&mut p50, &mut p99, *kind, &mut times);
        }
    }
    let (p50, p99, cpu) = (p50.build(), p99.build(), cpu.build());
    let met = ratio(&p50, Kind::Moat) <= 1.15
        && median(&p50, Kind::Moat) < median(&p50, Kind::WasmtimeWasi);
    Ok(Workload {
        name: "tcp_rr".into(),
        what: format!(
            "{trips} 1-byte round trips on one connection; client and server pinned to CPU 0"
        ),
        goal: "p50 ≤ 1.15× native; ahead of wasmtime-wasi".into(),
        met: Some(met),
        verdict: format!("moat p50 {:.2}× native", ratio(&p50, Kind::Moat)),
        metrics: vec![p50, p99, cpu],
    })
}

// ---------------------------------------------------------------- connections

fn tcp_connect(run: &Run) -> anyhow::Result<Workload> {
    let conns = run.scale(2_000, 400);
    const CLIENTS: usize = 64;
    let servers = started_with_std(run, Mode::Echo, true)?;
    let mut seq = MetricBuilder::new("sequential connections", "conn/s", Better::Higher);
    let mut par = MetricBuilder::new("64 clients at once", "conn/s", Better::Higher);
    let mut cpu = MetricBuilder::new("server CPU per connection", "µs", Better::Lower);
    async fn one(addr: std::net::SocketAddr) -> anyhow::Result<()> {
        let mut stream = TcpStream::connect(addr).await?;
        stream.write_all(&[5u8; 16]).await?;
        stream.shutdown().await?;
        let mut got = Vec::with_capacity(16);
        stream.read_to_end(&mut got).await?;
        if got.len() != 16 {
            bail!("echoed {} of 16 bytes", got.len());
        }
        Ok(())
    }
    for _ in 0..run.rounds {
        for (kind, server) in &servers {
            let addr = server.addr;
            let cpu0 = server.cpu_ns();
            let start = Instant::now();
            client(true, async move {
                for _ in 0..conns {
                    one(addr).await?;
                }
                Ok(())
            })?;
            seq.add(*kind, conns as f64 / start.elapsed().as_secs_f64());
            cpu.add(*kind, (server.cpu_ns() - cpu0) as f64 / conns as f64 / 1e3);
            let start = Instant::now();
            client(true, async move {
                let tasks: Vec<_> = (0..CLIENTS)
                    .map(|_| {
                        tokio::spawn(async move {
                            for _ in 0..conns / CLIENTS {
                                one(addr).await?;
                            }
                            anyhow::Ok(())
                        })
                    })
                    .collect();
                for t in tasks {
                    t.await??;
                }
                Ok(())
            })?;
            par.add(
                *kind,
                (conns / CLIENTS * CLIENTS) as f64 / start.elapsed().as_secs_f64(),
            );
        }
    }
    let (seq, par, cpu) = (seq.build(), par.build(), cpu.build());
    let met = ratio(&seq, Kind::Moat) >= 0.9 && ratio(&par, Kind::Moat) >= 0.9;
    Ok(Workload {
        name: "tcp_connect".into(),
        what: format!(
            "{conns} × (connect, 16 B echoed, close), one after another and from 64 clients at once; pinned to CPU 0"
        ),
        goal: "≥ 0.9× native".into(),
        met: Some(met),
        verdict: format!(
            "moat {:.2}× native sequential, {:.2}× with 64 clients",
            ratio(&seq, Kind::Moat),
            ratio(&par, Kind::Moat)
        ),
        metrics: vec![seq, par, cpu],
    })
}

// ---------------------------------------------------------------- idle sockets

fn idle_sockets(run: &Run) -> anyhow::Result<Workload> {
    let count = run.scale(10_000, 2_000);
    let mut per_socket = MetricBuilder::new("server memory per idle socket", "B", Better::Lower);
    for _ in 0..run.rounds.min(3) {
        for kind in run.setup.kinds() {
            let server = Server::start(&run.setup, kind, Mode::Hold, false)?;
            // Settle: one connection first, so lazily made state is counted out.
            let warm = std::net::TcpStream::connect(server.addr)?;
            wait_for(|| server.fd_count() > 0, "server up")?;
            let fds0 = server.fd_count();
            std::thread::sleep(Duration::from_millis(200));
            let (rss0, _) = server.rss_kib();
            let held = client(false, async {
                let mut held = Vec::with_capacity(count);
                for _ in 0..count {
                    held.push(TcpStream::connect(server.addr).await?);
                }
                Ok(held)
            })?;
            wait_for(
                || server.fd_count() >= fds0 + count,
                "server accepted them all",
            )?;
            std::thread::sleep(Duration::from_millis(200));
            let (rss1, _) = server.rss_kib();
            per_socket.add(
                kind,
                (rss1.saturating_sub(rss0) * 1024) as f64 / count as f64,
            );
            drop(held);
            drop(warm);
        }
    }
    let per_socket = per_socket.build();
    let moat = median(&per_socket, Kind::Moat);
    Ok(Workload {
        name: "idle_sockets".into(),
        what: format!(
            "{count} idle connections accepted and held by one server (growth of VmRSS / count)"
        ),
        goal: "≤ 1 KiB of host memory per socket".into(),
        met: Some(moat <= 1024.0),
        verdict: format!("moat {moat:.0} B per idle socket"),
        metrics: vec![per_socket],
    })
}

fn wait_for(mut condition: impl FnMut() -> bool, what: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !condition() {
        if Instant::now() > deadline {
            bail!("timed out waiting: {what}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

// ---------------------------------------------------------------- large writes

/// Reads everything from `addr`, slowly: 16 KiB at a time with a pause,
/// so the server's writes keep meeting a full socket (seed 000's case).
fn slow_read_all(addr: std::net::SocketAddr) -> anyhow::Result<usize> {
    let mut stream = std::net::TcpStream::connect(addr)?;
    let mut buf = vec![0u8; 16 * 1024];
    let mut got = 0;
    loop {
        match stream.read(&mut buf)? {
            0 => return Ok(got),
            n => got += n,
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

fn large_write(run: &Run) -> anyhow::Result<Workload> {
    let sizes: Vec<usize> = if run.quick {
        vec![8, 16, 32]
    } else {
        vec![16, 32, 64]
    };
    let mut metrics: Vec<MetricBuilder> = sizes
        .iter()
        .map(|mib| {
            MetricBuilder::new(
                &format!("server CPU, one {mib} MiB write"),
                "ms",
                Better::Lower,
            )
        })
        .collect();
    let mut doubling = MetricBuilder::new("CPU growth per doubling", "×", Better::Lower);
    for _ in 0..run.rounds {
        for kind in run.setup.kinds() {
            let mut cpu = Vec::new();
            for (i, mib) in sizes.iter().enumerate() {
                let bytes = mib << 20;
                let server = Server::start(&run.setup, kind, Mode::WriteOnce(bytes), false)?;
                let cpu0 = server.cpu_ns();
                let got = slow_read_all(server.addr)?;
                if got != bytes {
                    bail!("{}: read {got} of {bytes} bytes", kind.label());
                }
                let used = (server.cpu_ns() - cpu0) as f64 / 1e6;
                metrics[i].add(kind, used);
                cpu.push(used);
            }
            let growth = cpu.windows(2).map(|w| w[1] / w[0]).sum::<f64>() / (cpu.len() - 1) as f64;
            doubling.add(kind, growth);
        }
    }
    let doubling = doubling.build();
    let moat = median(&doubling, Kind::Moat);
    let mut all: Vec<_> = metrics.into_iter().map(MetricBuilder::build).collect();
    all.insert(0, doubling);
    Ok(Workload {
        name: "large_write".into(),
        what: format!(
            "the server writes one buffer of {sizes:?} MiB to a client reading 16 KiB at a time"
        ),
        goal: "server CPU per doubling ≤ 2.2× (seed 000's bug: 4.2×)".into(),
        met: Some(moat <= 2.2),
        verdict: format!("moat ×{moat:.2} CPU per doubling"),
        metrics: all,
    })
}

// ---------------------------------------------------------------- busy guests

/// Connects, and returns (time to the first byte, time to the last) in ms.
fn timed_read(addr: std::net::SocketAddr, expected: usize) -> anyhow::Result<(f64, f64)> {
    let start = Instant::now();
    let mut stream = std::net::TcpStream::connect(addr)?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut got = 0;
    let mut first = None;
    while got < expected {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            bail!("closed after {got} of {expected} bytes");
        }
        first.get_or_insert_with(|| start.elapsed());
        got += n;
    }
    let last = start.elapsed();
    Ok((
        first.context("no bytes")?.as_secs_f64() * 1e3,
        last.as_secs_f64() * 1e3,
    ))
}

fn busy_guest(run: &Run) -> anyhow::Result<Workload> {
    let mode = Mode::Busy {
        bytes: 16,
        ms: 500,
        sndbuf: 0,
    };
    let servers = started(run, mode, false)?;
    let mut first = MetricBuilder::new("first byte at the client", "ms", Better::Lower);
    for _ in 0..run.rounds {
        for (kind, server) in &servers {
            let (t, _) = timed_read(server.addr, 16)?;
            first.add(*kind, t);
            // Let the computation end before the next client.
            std::thread::sleep(Duration::from_millis(550));
        }
    }
    let first = first.build();
    let moat = median(&first, Kind::Moat);
    Ok(Workload {
        name: "busy_guest".into(),
        what: "the server writes a 16-byte response, then computes for 500 ms".into(),
        goal: "first byte < 5 ms (seed 003's bug: 502 ms)".into(),
        met: Some(moat < 5.0),
        verdict: format!("moat first byte after {moat:.2} ms"),
        metrics: vec![first],
    })
}

fn busy_guest_large(run: &Run) -> anyhow::Result<Workload> {
    const BYTES: usize = 8 << 20;
    let mode = Mode::Busy {
        bytes: BYTES,
        ms: 500,
        sndbuf: 64 * 1024,
    };
    let servers = started(run, mode, false)?;
    let mut all = MetricBuilder::new("all 8 MiB at the client", "ms", Better::Lower);
    for _ in 0..run.rounds {
        for (kind, server) in &servers {
            let (_, t) = timed_read(server.addr, BYTES)?;
            all.add(*kind, t);
            std::thread::sleep(Duration::from_millis(600));
        }
    }
    let all = all.build();
    let moat = median(&all, Kind::Moat);
    Ok(Workload {
        name: "busy_guest_large".into(),
        what: "the server writes 8 MiB with a 64 KiB SO_SNDBUF, then computes for 500 ms".into(),
        goal: "all 8 MiB well before the computation ends (< 250 ms; prototypes: 505 ms direct, 99 ms writer task)".into(),
        met: Some(moat < 250.0),
        verdict: format!("moat delivers all 8 MiB in {moat:.0} ms"),
        metrics: vec![all],
    })
}

// ---------------------------------------------------------------- burst RSS

fn rss_after_burst(run: &Run) -> anyhow::Result<Workload> {
    const CLIENTS: usize = 16;
    let bytes = run.scale(32, 8) << 20;
    let mut growth = MetricBuilder::new("RSS after the burst, minus before", "MiB", Better::Lower);
    let mut peak = MetricBuilder::new("peak RSS", "MiB", Better::Lower);
    for _ in 0..run.rounds.min(3) {
        for kind in run.setup.kinds() {
            let server = Server::start(&run.setup, kind, Mode::Stream(bytes), false)?;
            std::thread::sleep(Duration::from_millis(300));
            let (before, _) = server.rss_kib();
            let addr = server.addr;
            let readers: Vec<_> = (0..CLIENTS)
                .map(|_| std::thread::spawn(move || timed_read(addr, bytes)))
                .collect();
            for r in readers {
                r.join().map_err(|_| anyhow::anyhow!("reader panicked"))??;
            }
            std::thread::sleep(Duration::from_secs(2));
            let (after, hwm) = server.rss_kib();
            growth.add(kind, (after as f64 - before as f64) / 1024.0);
            peak.add(kind, hwm as f64 / 1024.0);
        }
    }
    let (growth, peak) = (growth.build(), peak.build());
    let moat = median(&growth, Kind::Moat);
    Ok(Workload {
        name: "rss_after_burst".into(),
        what: format!(
            "{CLIENTS} connections at once each read {} MiB (written in 64 KiB chunks), then 2 s idle",
            bytes >> 20
        ),
        goal: "RSS back within 2 MiB of before (seed 002)".into(),
        met: Some(moat <= 2.0),
        verdict: format!("moat keeps {moat:.2} MiB after the burst"),
        metrics: vec![growth, peak],
    })
}

// ---------------------------------------------------------------- cold start

/// Rounds of `cold_start`, whatever `--rounds` says: a first start varies
/// by ±15% from run to run here, and a round costs only about 0.2 s, so
/// nine rounds buy a steadier median cheaply.
const COLD_START_ROUNDS: usize = 9;

fn cold_start(run: &Run) -> anyhow::Result<Workload> {
    let setup = &run.setup;
    let exe = &setup.exe;
    let mut first = MetricBuilder::new("first run (compiles)", "ms", Better::Lower);
    let mut cached = MetricBuilder::new("cached run", "ms", Better::Lower);
    let mut rss = MetricBuilder::new("peak RSS, cached run", "MiB", Better::Lower);
    // The same component both ways: moat compiles it with its own engine
    // configuration; the wasmtime-wasi column runs it as `wasmtime run`
    // does (wasmtime's default configuration and cache).
    let command = |kind: Kind, cache: Option<&Path>| -> Vec<String> {
        let hello = setup.guest(kind, Guest::Hello).display().to_string();
        if kind.is_moat() {
            let cache = match cache {
                Some(dir) => format!("--cache-dir={}", dir.display()),
                None => "--no-cache".into(),
            };
            let moat = setup.moat_binary(kind).display().to_string();
            vec![moat, "run".into(), cache, hello]
        } else {
            let mut command = vec![
                setup.wasi_binary(kind).display().to_string(),
                "run-wasi".into(),
            ];
            if let Some(dir) = cache {
                command.extend(["--cache-dir".into(), dir.display().to_string()]);
            }
            command.push(hello);
            command
        }
    };
    let cost = |args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        command_cost(exe, &args)
    };
    for _ in 0..run.rounds.max(COLD_START_ROUNDS) {
        for kind in setup.kinds().into_iter().filter(|&k| k != Kind::Native) {
            let cache = setup.cache.join(format!("cold-start-{}", kind.slug()));
            first.add(kind, cost(command(kind, None))?.wall_ms);
            let _ = std::fs::remove_dir_all(&cache);
            cost(command(kind, Some(&cache)))?;
            let cached_cost = cost(command(kind, Some(&cache)))?;
            cached.add(kind, cached_cost.wall_ms);
            rss.add(kind, cached_cost.max_rss_kib as f64 / 1024.0);
        }
    }
    let (first, cached, rss) = (first.build(), cached.build(), rss.build());
    let (f, c) = (median(&first, Kind::Moat), median(&cached, Kind::Moat));
    let (wf, wc) = (
        median(&first, Kind::WasmtimeWasi),
        median(&cached, Kind::WasmtimeWasi),
    );
    let met = c <= 0.15 * f && f <= wf && c <= wc;
    Ok(Workload {
        name: "cold_start".into(),
        what: "a hello guest, compiled, then from the cache: `moat run`, and the same component run as `wasmtime run` runs it (wasmtime's default configuration, in this harness)".into(),
        goal: "cached ≤ 0.15× first; both no slower than wasmtime on the same component".into(),
        met: Some(met),
        verdict: format!(
            "first {f:.1} ms (wasmtime {wf:.1}), cached {c:.1} ms (wasmtime {wc:.1}); cached {:.2}× first",
            c / f
        ),
        metrics: vec![first, cached, rss],
    })
}

// ---------------------------------------------------------------- UDP

fn udp_echo(run: &Run) -> anyhow::Result<Workload> {
    let trips = run.scale(10_000, 3_000);
    let servers = started_with_std(run, Mode::UdpEcho, true)?;
    let mut p50 = MetricBuilder::new("round trip p50", "µs", Better::Lower);
    let mut p99 = MetricBuilder::new("round trip p99", "µs", Better::Lower);
    let mut cpu = MetricBuilder::new("server CPU per round trip", "µs", Better::Lower);
    for _ in 0..run.rounds {
        for (kind, server) in &servers {
            let cpu0 = server.cpu_ns();
            let mut times = client(true, async {
                let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await?;
                socket.connect(server.addr).await?;
                let payload = [3u8; 64];
                let mut buf = [0u8; 128];
                let mut times = Vec::with_capacity(trips);
                for _ in 0..trips {
                    let t = Instant::now();
                    socket.send(&payload).await?;
                    let n = tokio::time::timeout(Duration::from_secs(5), socket.recv(&mut buf))
                        .await
                        .context("no echo within 5 s")??;
                    if n != payload.len() {
                        bail!("echoed {n} of 64 bytes");
                    }
                    times.push(t.elapsed().as_secs_f64() * 1e6);
                }
                Ok(times)
            })?;
            cpu.add(*kind, (server.cpu_ns() - cpu0) as f64 / trips as f64 / 1e3);
            add_percentiles(&mut p50, &mut p99, *kind, &mut times);
        }
    }
    let (p50, p99, cpu) = (p50.build(), p99.build(), cpu.build());
    let met = ratio(&p50, Kind::Moat) <= 1.25
        && median(&p50, Kind::Moat) < median(&p50, Kind::WasmtimeWasi);
    Ok(Workload {
        name: "udp_echo".into(),
        what: format!(
            "{trips} round trips of a 64-byte datagram; client and server pinned to CPU 0"
        ),
        goal: "p50 ≤ 1.25× native; ahead of wasmtime-wasi".into(),
        met: Some(met),
        verdict: format!("moat p50 {:.2}× native", ratio(&p50, Kind::Moat)),
        metrics: vec![p50, p99, cpu],
    })
}

/// The harness's end of a `udp_send` burst: 127.0.0.1, a free port.
fn udp_receiver() -> anyhow::Result<std::net::UdpSocket> {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0")?;
    // A deep queue, so the harness drops as little as it can.
    let _ = socket2::SockRef::from(&socket).set_recv_buffer_size(8 << 20);
    socket.set_read_timeout(Some(Duration::from_secs(3)))?;
    Ok(socket)
}

/// Sends "go" from `socket` to a `udp-send` server and counts what arrives
/// on `socket` until "done": (the server's CPU per datagram in µs, the
/// share of the `count` datagrams received in %).
fn udp_burst(
    socket: &std::net::UdpSocket,
    server: &Server,
    count: usize,
) -> anyhow::Result<(f64, f64)> {
    let cpu0 = server.cpu_ns();
    socket.send_to(b"go", server.addr)?;
    let mut buf = [0u8; 1024];
    let mut got = 0usize;
    loop {
        match socket.recv_from(&mut buf) {
            Ok((4, _)) if &buf[..4] == b"done" => break,
            Ok(_) => got += 1,
            Err(_) => break, // 3 s of silence: "done" was dropped
        }
    }
    Ok((
        (server.cpu_ns() - cpu0) as f64 / count as f64 / 1e3,
        got as f64 * 100.0 / count as f64,
    ))
}

fn udp_send(run: &Run) -> anyhow::Result<Workload> {
    const SIZE: usize = 512;
    let count = run.scale(50_000, 20_000);
    let mode = Mode::UdpSend {
        count,
        size: SIZE,
        to_name: None,
    };
    let servers = started(run, mode, false)?;
    let mut cpu = MetricBuilder::new("sender CPU per datagram", "µs", Better::Lower);
    let mut delivered =
        MetricBuilder::new("datagrams received by the harness", "%", Better::Higher);
    for _ in 0..run.rounds {
        for (kind, server) in &servers {
            let socket = udp_receiver()?;
            let (used, got) = udp_burst(&socket, server, count)?;
            cpu.add(*kind, used);
            delivered.add(*kind, got);
        }
    }
    let (cpu, delivered) = (cpu.build(), delivered.build());
    let met = ratio(&cpu, Kind::Moat) <= 1.5
        && median(&cpu, Kind::Moat) < median(&cpu, Kind::WasmtimeWasi);
    Ok(Workload {
        name: "udp_send".into(),
        what: format!("the server sends {count} datagrams of {SIZE} B, one send each"),
        goal: "sender CPU ≤ 1.5× native; ahead of wasmtime-wasi".into(),
        met: Some(met),
        verdict: format!(
            "moat {:.2}× native sender CPU per datagram",
            ratio(&cpu, Kind::Moat)
        ),
        metrics: vec![cpu, delivered],
    })
}

/// What sending to a name costs: the `udp_send` burst, but each datagram
/// addressed to `localhost:PORT` (the harness's port, written as a name)
/// rather than to the IP the "go" came from. moat's guest passes the name
/// with every `send_to`, and the host judges it and turns it into an
/// address; the native server resolves it once per burst (`lookup_host`)
/// and sends to the address, as a native program does. The same burst to
/// the IP runs in the same rounds, on servers of its own, so the two rows
/// compare directly. The sender's CPU per datagram is what is measured.
/// wasmtime-wasi: n/a. (A `--baseline` build's bench-server from before
/// its TO argument ignores it and sends to the IP.)
fn udp_send_name(run: &Run) -> anyhow::Result<Workload> {
    const SIZE: usize = 512;
    let count = run.scale(50_000, 20_000);
    // One receiving socket throughout: the name servers learn its port on
    // their command line.
    let socket = udp_receiver()?;
    let port = socket.local_addr()?.port();
    let kinds: Vec<Kind> = run
        .setup
        .kinds()
        .into_iter()
        .filter(|k| *k == Kind::Native || k.is_moat())
        .collect();
    let mode = |to_name| Mode::UdpSend {
        count,
        size: SIZE,
        to_name,
    };
    let to_name = start_all(run, kinds.clone(), mode(Some(port)), false)?;
    let to_ip = start_all(run, kinds, mode(None), false)?;
    let mut name_cpu = MetricBuilder::new(
        "sender CPU per datagram, to localhost:PORT",
        "µs",
        Better::Lower,
    );
    let mut ip_cpu = MetricBuilder::new(
        "sender CPU per datagram, to 127.0.0.1:PORT",
        "µs",
        Better::Lower,
    );
    let mut delivered =
        MetricBuilder::new("datagrams received, sent to the name", "%", Better::Higher);
    for _ in 0..run.rounds {
        for ((kind, named), (_, ip)) in to_name.iter().zip(&to_ip) {
            let (used, got) = udp_burst(&socket, named, count)?;
            name_cpu.add(*kind, used);
            delivered.add(*kind, got);
            ip_cpu.add(*kind, udp_burst(&socket, ip, count)?.0);
        }
    }
    let (name_cpu, ip_cpu, delivered) = (name_cpu.build(), ip_cpu.build(), delivered.build());
    Ok(Workload {
        name: "udp_send_name".into(),
        what: format!(
            "the server sends {count} datagrams of {SIZE} B, one send each, to localhost:PORT \
             (moat: the name on every send; native: resolved once per burst, then the address) \
             and, in the same rounds, to the IP (wasmtime-wasi: n/a)"
        ),
        goal: "beside udp_send (no goal set)".into(),
        met: None,
        verdict: format!(
            "moat to a name {:.2} µs per datagram: {:.2}× moat to the IP, {:.2}× native",
            median(&name_cpu, Kind::Moat),
            median(&name_cpu, Kind::Moat) / median(&ip_cpu, Kind::Moat),
            ratio(&name_cpu, Kind::Moat)
        ),
        metrics: vec![name_cpu, ip_cpu, delivered],
    })
}

// ---------------------------------------------------------------- TLS

/// The TLS echo servers, pinned: native tokio-rustls and moat. wasmtime-wasi
/// has no TLS of its own: a std::net guest would compile its own TLS stack
/// to wasm, which is not this comparison.
fn tls_servers(run: &Run) -> anyhow::Result<Vec<(Kind, Server)>> {
    run.setup
        .kinds()
        .into_iter()
        .filter(|k| *k == Kind::Native || k.is_moat())
        .map(|k| Ok((k, Server::start(&run.setup, k, Mode::TlsEcho, true)?)))
        .collect()
}

/// A client trusting the servers' certificate. Without `resume`, every
/// connection makes a full handshake (no session tickets, no session IDs).
fn tls_connector(run: &Run, resume: bool) -> anyhow::Result<tokio_rustls::TlsConnector> {
    let cert = std::fs::read(run.setup.certs.join("cert.pem"))?;
    let mut roots = rustls::RootCertStore::empty();
    for der in rustls::pki_types::pem::PemObject::pem_slice_iter(&cert) {
        roots.add(der?)?;
    }
    let mut config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    if !resume {
        config.resumption = rustls::client::Resumption::disabled();
    }
    Ok(tokio_rustls::TlsConnector::from(std::sync::Arc::new(
        config,
    )))
}

fn tls_throughput(run: &Run) -> anyhow::Result<Workload> {
    const CHUNK: usize = 64 * 1024;
    let total = run.scale(256, 32) << 20;
    let servers = tls_servers(run)?;
    let connector = tls_connector(run, true)?;
    let mut rate = MetricBuilder::new("throughput", "MiB/s", Better::Higher);
    let mut cpu = MetricBuilder::new("server CPU per byte", "ns/B", Better::Lower);
    for _ in 0..run.rounds {
        for (kind, server) in &servers {
            let cpu0 = server.cpu_ns();
            let start = Instant::now();
            let connector = connector.clone();
            client(true, async move {
                let tcp = TcpStream::connect(server.addr).await?;
                tcp.set_nodelay(true)?;
                let name = rustls::pki_types::ServerName::try_from("localhost")?;
                let tls = connector.connect(name, tcp).await?;
                let (rx, tx) = tokio::io::split(tls);
                echo_through(rx, tx, total, CHUNK).await
            })?;
            rate.add(
                *kind,
                total as f64 / (1 << 20) as f64 / start.elapsed().as_secs_f64(),
            );
            cpu.add(*kind, (server.cpu_ns() - cpu0) as f64 / total as f64);
        }
    }
    let (rate, cpu) = (rate.build(), cpu.build());
    Ok(Workload {
        name: "tls_throughput".into(),
        what: format!(
            "1 TLS connection, {} MiB echoed in 64 KiB chunks; pinned to CPU 0 (wasmtime-wasi has no TLS: n/a)",
            total >> 20
        ),
        goal: "beside tcp_throughput (no goal set)".into(),
        met: None,
        verdict: format!(
            "moat {:.2}× native TLS throughput, {:.2}× CPU per byte",
            ratio(&rate, Kind::Moat),
            ratio(&cpu, Kind::Moat)
        ),
        metrics: vec![rate, cpu],
    })
}

/// One 1-byte round trip over TLS: writes the byte, flushes, reads it back.
async fn tls_trip(
    tls: &mut tokio_rustls::client::TlsStream<TcpStream>,
    byte: &mut [u8; 1],
) -> anyhow::Result<()> {
    tls.write_all(byte).await?;
    tls.flush().await?;
    tls.read_exact(byte).await?;
    Ok(())
}

/// TLS round-trip latency, beside `tcp_rr`: 1-byte round trips on one TLS
/// connection (one record each way), timed at the client, p50 and p99; and
/// the server's CPU per round trip. The handshake and a few warm-up trips
/// (which also take the server's session tickets) come before the timed
/// trips and outside both numbers. Client and server pinned to CPU 0, as in
/// `tcp_rr`. wasmtime-wasi has no TLS: n/a.
fn tls_rr(run: &Run) -> anyhow::Result<Workload> {
    const WARM_UP: usize = 100;
    let trips = run.scale(20_000, 5_000);
    let servers = tls_servers(run)?;
    let connector = tls_connector(run, true)?;
    let mut p50 = MetricBuilder::new("round trip p50", "µs", Better::Lower);
    let mut p99 = MetricBuilder::new("round trip p99", "µs", Better::Lower);
    let mut cpu = MetricBuilder::new("server CPU per round trip", "µs", Better::Lower);
    for _ in 0..run.rounds {
        for (kind, server) in &servers {
            let connector = connector.clone();
            let (mut times, used) = client(true, async move {
                let tcp = TcpStream::connect(server.addr).await?;
                tcp.set_nodelay(true)?;
                let name = rustls::pki_types::ServerName::try_from("localhost")?;
                let mut tls = connector.connect(name, tcp).await?;
                let mut byte = [0u8; 1];
                for _ in 0..WARM_UP {
                    tls_trip(&mut tls, &mut byte).await?;
                }
                let cpu0 = server.cpu_ns();
                let mut times = Vec::with_capacity(trips);
                for _ in 0..trips {
                    let t = Instant::now();
                    tls_trip(&mut tls, &mut byte).await?;
                    times.push(t.elapsed().as_secs_f64() * 1e6);
                }
                Ok((times, server.cpu_ns() - cpu0))
            })?;
            cpu.add(*kind, used as f64 / trips as f64 / 1e3);
            add_percentiles(&mut p50, &mut p99, *kind, &mut times);
        }
    }
    let (p50, p99, cpu) = (p50.build(), p99.build(), cpu.build());
    Ok(Workload {
        name: "tls_rr".into(),
        what: format!(
            "{trips} 1-byte round trips on one TLS connection, after the handshake and {WARM_UP} untimed trips; client and server pinned to CPU 0 (wasmtime-wasi has no TLS: n/a)"
        ),
        goal: "beside tcp_rr (no goal set)".into(),
        met: None,
        verdict: format!(
            "moat p50 {:.2}× native over TLS, {:.2}× server CPU per round trip",
            ratio(&p50, Kind::Moat),
            ratio(&cpu, Kind::Moat)
        ),
        metrics: vec![p50, p99, cpu],
    })
}

fn tls_connect(run: &Run) -> anyhow::Result<Workload> {
    let conns = run.scale(1_000, 200);
    let servers = tls_servers(run)?;
    let connector = tls_connector(run, false)?;
    let mut rate = MetricBuilder::new("sequential connections", "conn/s", Better::Higher);
    let mut cpu = MetricBuilder::new("server CPU per connection", "µs", Better::Lower);
    for _ in 0..run.rounds {
        for (kind, server) in &servers {
            let (addr, connector) = (server.addr, connector.clone());
            let cpu0 = server.cpu_ns();
            let start = Instant::now();
            client(true, async move {
                for _ in 0..conns {
                    let tcp = TcpStream::connect(addr).await?;
                    tcp.set_nodelay(true)?;
                    let name = rustls::pki_types::ServerName::try_from("localhost")?;
                    let mut tls = connector.connect(name, tcp).await?;
                    tls.write_all(&[7u8; 16]).await?;
                    tls.shutdown().await?;
                    let mut got = Vec::with_capacity(16);
                    tls.read_to_end(&mut got).await?;
                    if got.len() != 16 {
                        bail!("echoed {} of 16 bytes", got.len());
                    }
                }
                Ok(())
            })?;
            rate.add(*kind, conns as f64 / start.elapsed().as_secs_f64());
            cpu.add(*kind, (server.cpu_ns() - cpu0) as f64 / conns as f64 / 1e3);
        }
    }
    let (rate, cpu) = (rate.build(), cpu.build());
    Ok(Workload {
        name: "tls_connect".into(),
        what: format!(
            "{conns} × (TCP connect, full TLS handshake, 16 B echoed, close), one after another; pinned to CPU 0 (wasmtime-wasi has no TLS: n/a)"
        ),
        goal: "server CPU per connection ≤ 1.15× native tokio-rustls".into(),
        met: Some(ratio(&cpu, Kind::Moat) <= 1.15),
        verdict: format!(
            "moat {:.2}× native TLS connections/s, {:.2}× server CPU per connection",
            ratio(&rate, Kind::Moat),
            ratio(&cpu, Kind::Moat)
        ),
        metrics: vec![rate, cpu],
    })
}

// ---------------------------------------------------------------- HTTP

/// Reads one HTTP/1.1 response with a Content-Length body; its length.
async fn read_response(stream: &mut TcpStream, buf: &mut Vec<u8>) -> anyhow::Result<usize> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = std::str::from_utf8(&buf[..end])?;
            if !head.starts_with("HTTP/1.1 200") {
                bail!("not a 200: {head}");
            }
            let length: usize = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())?
                })
                .context("no content-length")?;
            let total = end + 4 + length;
            while buf.len() < total {
                if stream.read_buf(buf).await? == 0 {
                    bail!("closed mid-body");
                }
            }
            buf.drain(..total);
            return Ok(total);
        }
        if stream.read_buf(buf).await? == 0 {
            bail!("closed mid-head");
        }
    }
}

fn http_rr(run: &Run) -> anyhow::Result<Workload> {
    let requests = run.scale(10_000, 2_000);
    let kinds = vec![Kind::Native, Kind::Moat, Kind::MoatHyper];
    let servers = start_all(run, kinds, Mode::Http, true)?;
    let mut p50 = MetricBuilder::new("request p50", "µs", Better::Lower);
    let mut p99 = MetricBuilder::new("request p99", "µs", Better::Lower);
    let mut cpu = MetricBuilder::new("server CPU per request", "µs", Better::Lower);
    for _ in 0..run.rounds {
        for (kind, server) in &servers {
            let cpu0 = server.cpu_ns();
            let mut times = client(true, async {
                let mut stream = TcpStream::connect(server.addr).await?;
                stream.set_nodelay(true)?;
                let mut times = Vec::with_capacity(requests);
                let mut buf = Vec::with_capacity(4096);
                for _ in 0..requests {
                    let t = Instant::now();
                    stream
                        .write_all(b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n")
                        .await?;
                    read_response(&mut stream, &mut buf).await?;
                    times.push(t.elapsed().as_secs_f64() * 1e6);
                }
                Ok(times)
            })?;
            cpu.add(
                *kind,
                (server.cpu_ns() - cpu0) as f64 / requests as f64 / 1e3,
            );
            add_percentiles(&mut p50, &mut p99, *kind, &mut times);
        }
    }
    let (p50, p99, cpu) = (p50.build(), p99.build(), cpu.build());
    Ok(Workload {
        name: "http_rr".into(),
        what: format!(
            "{requests} keep-alive GET / on one connection: native is hyper on tokio, moat runs http-server (HTTP by hand) and hyper-serve (hyper on moat-sdk); client and server pinned to CPU 0"
        ),
        goal: "none yet: hyper-serve beside http-server".into(),
        met: None,
        verdict: format!(
            "p50: http-server {:.2}×, hyper-serve {:.2}× native hyper",
            ratio(&p50, Kind::Moat),
            ratio(&p50, Kind::MoatHyper)
        ),
        metrics: vec![p50, p99, cpu],
    })
}

// ---------------------------------------------------------------- c10k

/// What one `c10k` run of a server measured.
struct Steady {
    /// Round trips of the messages sent in the window, µs, sorted.
    times: Vec<f64>,
    /// The server's CPU over the window, ns.
    cpu_ns: u64,
    /// The server's VmRSS at the end of the window, every connection
    /// still open, KiB.
    rss_kib: u64,
}

/// Connects `conns` clients to `server`, in batches each accepted before
/// the next, then has each send `MESSAGE` bytes once a second and wait for
/// the echo: connection i at i/`conns` of the second, so the sends are
/// spread evenly (tokio's timer fires in 1 ms ticks: about `conns`/1000
/// leave together). One warm-up second, then `window` measured: every
/// connection sends exactly `window` seconds' worth of messages in it.
/// One task per connection, each with its own timer, on the caller's
/// runtime.
async fn steady(server: &Server, conns: usize, window: Duration) -> anyhow::Result<Steady> {
    const MESSAGE: usize = 32;
    // Connected in batches under the listen backlog (128 for the native
    // server, tokio's; 1024 for moat), each accepted before the next: a
    // full accept queue drops SYNs, and each drop costs its client a 1 s
    // retransmit.
    const BATCH: usize = 64;
    let fds0 = server.fd_count();
    let mut streams = Vec::with_capacity(conns);
    while streams.len() < conns {
        for _ in 0..BATCH.min(conns - streams.len()) {
            let stream = TcpStream::connect(server.addr).await?;
            stream.set_nodelay(true)?;
            streams.push(stream);
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while server.fd_count() < fds0 + streams.len() {
            if Instant::now() > deadline {
                bail!(
                    "the server accepted {} of {} connections in 60 s",
                    server.fd_count().saturating_sub(fds0),
                    streams.len()
                );
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let second = Duration::from_secs(1);
    let start = tokio::time::Instant::now() + Duration::from_millis(100);
    let measured = start + second;
    let end = measured + window;
    let tasks: Vec<_> = streams
        .into_iter()
        .enumerate()
        .map(|(i, mut stream)| {
            let first = start + second.mul_f64(i as f64 / conns as f64);
            tokio::spawn(async move {
                let message = [9u8; MESSAGE];
                let mut echo = [0u8; MESSAGE];
                let mut times = Vec::with_capacity(window.as_secs() as usize + 1);
                let mut at = first;
                while at < end {
                    tokio::time::sleep_until(at).await;
                    let t = Instant::now();
                    stream.write_all(&message).await?;
                    tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut echo))
                        .await
                        .context("no echo within 10 s")??;
                    if at >= measured {
                        times.push(t.elapsed().as_secs_f64() * 1e6);
                    }
                    at += second;
                }
                // The stream goes back open: the server's RSS is read with
                // every connection still there.
                anyhow::Ok((times, stream))
            })
        })
        .collect();
    tokio::time::sleep_until(measured).await;
    let cpu0 = server.cpu_ns();
    tokio::time::sleep_until(end).await;
    let cpu_ns = server.cpu_ns() - cpu0;
    let mut times = Vec::with_capacity(conns * window.as_secs() as usize);
    let mut open = Vec::with_capacity(conns);
    for task in tasks {
        let (mine, stream) = task.await??;
        times.extend(mine);
        open.push(stream);
    }
    let (rss_kib, _) = server.rss_kib();
    drop(open);
    times.sort_by(f64::total_cmp);
    Ok(Steady {
        times,
        cpu_ns,
        rss_kib,
    })
}

/// What `c10k` raises on moat beyond the socket cap: examples/echo-server
/// gives each connection a 64 KiB read buffer in linear memory, 625 MiB
/// for 10,000, past the default `--max-memory` of 512 MiB.
const C10K_MOAT_FLAGS: &[&str] = &["--max-memory=1GiB"];

/// The shape of a real server: 10,000 connections held at once, each
/// sending 32 bytes about once a second (spread evenly over the second)
/// and waiting for the echo, measured over a steady window after one
/// warm-up second: the server's VmRSS with all of them connected, its CPU
/// per message, and the p50 and p99 of the round trips at the client (see
/// [`steady`]). A fresh server each round; nothing pinned; the client is
/// one current-thread runtime, so a round trip includes the client's own
/// turn among the sends due in the same millisecond. moat runs
/// examples/echo-server with its socket cap lifted and memory enough for
/// 10,000 64 KiB read buffers ([`C10K_MOAT_FLAGS`]). Both servers reserve
/// that buffer without filling it (`Vec::with_capacity`), so a page becomes
/// resident only where a read wrote. wasmtime-wasi's std::net guest serves
/// one connection at a time, so it cannot hold 10,000: n/a.
fn c10k(run: &Run) -> anyhow::Result<Workload> {
    const CONNS: usize = 10_000;
    let window = Duration::from_secs(run.scale(10, 3) as u64);
    let kinds: Vec<Kind> = run
        .setup
        .kinds()
        .into_iter()
        .filter(|k| *k == Kind::Native || k.is_moat())
        .collect();
    let mut rss = MetricBuilder::new("server RSS, all connected", "MiB", Better::Lower);
    let mut cpu = MetricBuilder::new("server CPU per message", "µs", Better::Lower);
    let mut p50 = MetricBuilder::new("round trip p50", "µs", Better::Lower);
    let mut p99 = MetricBuilder::new("round trip p99", "µs", Better::Lower);
    for _ in 0..run.rounds.min(3) {
        for &kind in &kinds {
            let server = Server::start_with(&run.setup, kind, Mode::Echo, false, C10K_MOAT_FLAGS)?;
            let steady = client(false, steady(&server, CONNS, window))?;
            let messages = (CONNS as u64 * window.as_secs()) as f64;
            rss.add(kind, steady.rss_kib as f64 / 1024.0);
            cpu.add(kind, steady.cpu_ns as f64 / messages / 1e3);
            let times = &steady.times;
            p50.add(kind, times[times.len() / 2]);
            p99.add(kind, times[times.len() * 99 / 100]);
        }
    }
    let (rss, cpu, p50, p99) = (rss.build(), cpu.build(), p50.build(), p99.build());
    Ok(Workload {
        name: "c10k".into(),
        what: format!(
            "{CONNS} connections held at once, each sending 32 B once a second (spread evenly) and waiting for the echo; {} s measured after 1 s of warm-up; fresh server each round, nothing pinned (wasmtime-wasi: n/a, its std::net guest serves one connection at a time)",
            window.as_secs()
        ),
        goal: "the shape of a real server (no goal set)".into(),
        met: None,
        verdict: format!(
            "moat holds {CONNS} connections in {:.0} MiB ({:.2}× native), {:.2}× native CPU per message, p99 {:.2}× native (wasmtime-wasi: n/a, one connection at a time)",
            median(&rss, Kind::Moat),
            ratio(&rss, Kind::Moat),
            ratio(&cpu, Kind::Moat),
            ratio(&p99, Kind::Moat)
        ),
        metrics: vec![rss, cpu, p50, p99],
    })
}
