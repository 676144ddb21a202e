//! A TCP server's own writes meeting a slow or busy reader: large_write
//! (one big write to a slow reader), busy_guest and busy_guest_large
//! (writes followed by computation that does not yield) and
//! rss_after_burst (the memory the server keeps after a burst of them).

use std::io::Read;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::report::{Better, MetricBuilder, Workload};
use crate::servers::{Kind, Mode, Server};

use super::{Run, median, started};

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

/// The server's CPU for one large write to a slow reader, at three sizes:
/// how it grows per doubling (linear is 2×).
pub fn large_write(run: &Run) -> anyhow::Result<Workload> {
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

/// How soon a 16-byte response reaches the client when the server
/// computes without yielding right after writing it.
pub fn busy_guest(run: &Run) -> anyhow::Result<Workload> {
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

/// How soon all of an 8 MiB response, written through a 64 KiB send
/// buffer, reaches the client when the server computes without yielding
/// right after writing it.
pub fn busy_guest_large(run: &Run) -> anyhow::Result<Workload> {
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

/// The server's VmRSS after 16 connections at once each read a stream,
/// minus before them, and its peak.
pub fn rss_after_burst(run: &Run) -> anyhow::Result<Workload> {
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
