//! The TCP data path: tcp_throughput (bulk echo), tcp_rr (1-byte round
//! trips) and tcp_connect (connection set-up and close); and the bulk echo
//! loop tls_throughput shares.

use std::net::SocketAddr;
use std::time::Instant;

use anyhow::bail;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::report::{Better, Metric, MetricBuilder, Workload};
use crate::servers::{Kind, Mode, Server};

use super::rr::{CpuSpan, Plan, round_trips};
use super::{Run, client, median, ratio, started_with_std};

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

/// The bulk echo of tcp_throughput and tls_throughput: each round, each
/// server echoes `total` bytes, written in 64 KiB chunks, through one
/// connection that `connect` opens (its read and write halves), the
/// client pinned to CPU 0 beside servers started pinned. The time and the
/// server's CPU run from before the client's runtime starts to after it
/// ends, connection set-up included. Returns the
/// throughput (MiB/s) and the server's CPU per byte (ns/B).
pub(super) fn echo_throughput<R, W>(
    run: &Run,
    servers: &[(Kind, Server)],
    total: usize,
    connect: impl AsyncFn(SocketAddr) -> anyhow::Result<(R, W)>,
) -> anyhow::Result<(Metric, Metric)>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    const CHUNK: usize = 64 * 1024;
    let mut rate = MetricBuilder::new("throughput", "MiB/s", Better::Higher);
    let mut cpu = MetricBuilder::new("server CPU per byte", "ns/B", Better::Lower);
    for _ in 0..run.rounds {
        for (kind, server) in servers {
            let cpu0 = server.cpu_ns();
            let start = Instant::now();
            client(true, async {
                let (rx, tx) = connect(server.addr).await?;
                echo_through(rx, tx, total, CHUNK).await
            })?;
            let secs = start.elapsed().as_secs_f64();
            rate.add(*kind, total as f64 / (1 << 20) as f64 / secs);
            cpu.add(*kind, (server.cpu_ns() - cpu0) as f64 / total as f64);
        }
    }
    Ok((rate.build(), cpu.build()))
}

/// Bulk echo over one TCP connection: throughput and server CPU per byte.
pub fn tcp_throughput(run: &Run) -> anyhow::Result<Workload> {
    let total = run.scale(512, 64) << 20;
    let servers = started_with_std(run, Mode::Echo, true)?;
    let (rate, cpu) = echo_throughput(run, &servers, total, async |addr| {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(stream.into_split())
    })?;
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

/// 1-byte round trips on one TCP connection: p50, p99 and server CPU per
/// round trip, connect and close included in the CPU.
pub fn tcp_rr(run: &Run) -> anyhow::Result<Workload> {
    let trips = run.scale(20_000, 5_000);
    let servers = started_with_std(run, Mode::Echo, true)?;
    let plan = Plan {
        noun: "round trip",
        trips,
        cpu: CpuSpan::Connection,
    };
    let rr = round_trips(
        run,
        &servers,
        &plan,
        async |addr| {
            let stream = TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            Ok((stream, [0u8; 1]))
        },
        async |(stream, byte): &mut (TcpStream, [u8; 1])| {
            stream.write_all(byte).await?;
            stream.read_exact(byte).await?;
            Ok(())
        },
    )?;
    let met = ratio(&rr.p50, Kind::Moat) <= 1.15
        && median(&rr.p50, Kind::Moat) < median(&rr.p50, Kind::WasmtimeWasi);
    Ok(Workload {
        name: "tcp_rr".into(),
        what: format!(
            "{trips} 1-byte round trips on one connection; client and server pinned to CPU 0"
        ),
        goal: "p50 ≤ 1.15× native; ahead of wasmtime-wasi".into(),
        met: Some(met),
        verdict: format!("moat p50 {:.2}× native", ratio(&rr.p50, Kind::Moat)),
        metrics: rr.metrics(),
    })
}

/// Connections that each connect, echo 16 bytes and close: one after
/// another, then from 64 clients at once.
pub fn tcp_connect(run: &Run) -> anyhow::Result<Workload> {
    let conns = run.scale(2_000, 400);
    const CLIENTS: usize = 64;
    let servers = started_with_std(run, Mode::Echo, true)?;
    let mut seq = MetricBuilder::new("sequential connections", "conn/s", Better::Higher);
    let mut par = MetricBuilder::new("64 clients at once", "conn/s", Better::Higher);
    let mut cpu = MetricBuilder::new("server CPU per connection", "µs", Better::Lower);
    async fn one(addr: SocketAddr) -> anyhow::Result<()> {
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
