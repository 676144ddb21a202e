//! Many TCP connections held at once: idle_sockets (the server's memory
//! per idle connection) and c10k (10,000 connections each sending once a
//! second, the shape of a real server).

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::report::{Better, MetricBuilder, Workload};
use crate::servers::{Kind, Mode, Server};

use super::{Run, add_percentiles, client, median, native_and_moat, ratio};

/// The server's memory per idle connection: growth of its VmRSS over
/// thousands of accepted, never-read connections, divided by their count.
pub fn idle_sockets(run: &Run) -> anyhow::Result<Workload> {
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

/// Polls `condition` every 10 ms; fails after 120 s, naming `what`.
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

/// What one `c10k` run of a server measured.
struct Steady {
    /// Round trips of the messages sent in the window, µs.
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
pub fn c10k(run: &Run) -> anyhow::Result<Workload> {
    const CONNS: usize = 10_000;
    let window = Duration::from_secs(run.scale(10, 3) as u64);
    let kinds = native_and_moat(run);
    let mut rss = MetricBuilder::new("server RSS, all connected", "MiB", Better::Lower);
    let mut cpu = MetricBuilder::new("server CPU per message", "µs", Better::Lower);
    let mut p50 = MetricBuilder::new("round trip p50", "µs", Better::Lower);
    let mut p99 = MetricBuilder::new("round trip p99", "µs", Better::Lower);
    for _ in 0..run.rounds.min(3) {
        for &kind in &kinds {
            let server = Server::start_with(&run.setup, kind, Mode::Echo, false, C10K_MOAT_FLAGS)?;
            let mut steady = client(false, steady(&server, CONNS, window))?;
            let messages = (CONNS as u64 * window.as_secs()) as f64;
            rss.add(kind, steady.rss_kib as f64 / 1024.0);
            cpu.add(kind, steady.cpu_ns as f64 / messages / 1e3);
            add_percentiles(&mut p50, &mut p99, kind, &mut steady.times);
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
