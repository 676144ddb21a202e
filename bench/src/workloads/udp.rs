//! UDP: udp_echo (64-byte datagram round trips), udp_send (a burst of
//! datagrams from the server) and udp_send_name (the same burst addressed
//! to a name).

use std::time::Duration;

use anyhow::{Context, bail};

use crate::report::{Better, MetricBuilder, Workload};
use crate::servers::{Kind, Mode, Server};

use super::rr::{CpuSpan, Plan, round_trips};
use super::{Run, median, native_and_moat, ratio, start_all, started, started_with_std};

/// Round trips of a 64-byte datagram on one connected socket: p50, p99 and
/// server CPU per round trip.
pub fn udp_echo(run: &Run) -> anyhow::Result<Workload> {
    let trips = run.scale(10_000, 3_000);
    let mut servers = started_with_std(run, Mode::UdpEcho, true)?;
    // Every echo is a send the trail counts.
    servers.push((
        Kind::MoatAudited,
        Server::start(&run.setup, Kind::MoatAudited, Mode::UdpEcho, true)?,
    ));
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
            let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await?;
            socket.connect(addr).await?;
            Ok((socket, [3u8; 64], [0u8; 128]))
        },
        async |(socket, payload, buf): &mut (tokio::net::UdpSocket, [u8; 64], [u8; 128])| {
            socket.send(payload).await?;
            let n = tokio::time::timeout(Duration::from_secs(5), socket.recv(buf))
                .await
                .context("no echo within 5 s")??;
            if n != payload.len() {
                bail!("echoed {n} of 64 bytes");
            }
            Ok(())
        },
    )?;
    let met = ratio(&rr.p50, Kind::Moat) <= 1.25
        && median(&rr.p50, Kind::Moat) < median(&rr.p50, Kind::WasmtimeWasi);
    Ok(Workload {
        name: "udp_echo".into(),
        what: format!(
            "{trips} round trips of a 64-byte datagram; client and server pinned to CPU 0"
        ),
        goal: "p50 ≤ 1.25× native; ahead of wasmtime-wasi".into(),
        met: Some(met),
        verdict: format!("moat p50 {:.2}× native", ratio(&rr.p50, Kind::Moat)),
        metrics: rr.metrics(),
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

/// A burst of 512-byte datagrams from the server, one send each: the
/// sender's CPU per datagram, and the share that arrived.
pub fn udp_send(run: &Run) -> anyhow::Result<Workload> {
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
pub fn udp_send_name(run: &Run) -> anyhow::Result<Workload> {
    const SIZE: usize = 512;
    let count = run.scale(50_000, 20_000);
    // One receiving socket throughout: the name servers learn its port on
    // their command line.
    let socket = udp_receiver()?;
    let port = socket.local_addr()?.port();
    let kinds = native_and_moat(run);
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
