//! TLS, native tokio-rustls beside moat: tls_throughput (bulk echo),
//! tls_rr (1-byte round trips after the handshake) and tls_connect (full
//! handshakes, one after another).

use std::net::SocketAddr;
use std::time::Instant;

use anyhow::bail;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::report::{Better, MetricBuilder, Workload};
use crate::servers::{Kind, Mode, Server};

use super::rr::{CpuSpan, Plan, round_trips};
use super::tcp::echo_throughput;
use super::{Run, client, native_and_moat, ratio, start_all};

/// The client's end of a TLS connection.
type TlsStream = tokio_rustls::client::TlsStream<TcpStream>;

/// The TLS echo servers, pinned: native tokio-rustls and moat. wasmtime-wasi
/// has no TLS of its own: a std::net guest would compile its own TLS stack
/// to wasm, which is not this comparison.
fn tls_servers(run: &Run) -> anyhow::Result<Vec<(Kind, Server)>> {
    start_all(run, native_and_moat(run), Mode::TlsEcho, true)
}

/// A client trusting the servers' certificate. Without `resume`, every
/// connection makes a full handshake (no session tickets, no session IDs).
fn tls_connector(run: &Run, resume: bool) -> anyhow::Result<TlsConnector> {
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
    Ok(TlsConnector::from(std::sync::Arc::new(config)))
}

/// A TCP connection to `addr` (Nagle off) and the TLS handshake on it, for
/// the name `localhost` (the servers' certificate).
async fn handshake(connector: &TlsConnector, addr: SocketAddr) -> anyhow::Result<TlsStream> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let name = rustls::pki_types::ServerName::try_from("localhost")?;
    Ok(connector.connect(name, tcp).await?)
}

/// Bulk echo over one TLS connection, beside `tcp_throughput`: throughput
/// and server CPU per byte, the handshake included.
pub fn tls_throughput(run: &Run) -> anyhow::Result<Workload> {
    let total = run.scale(256, 32) << 20;
    let servers = tls_servers(run)?;
    let connector = tls_connector(run, true)?;
    let (rate, cpu) = echo_throughput(run, &servers, total, async |addr| {
        Ok(tokio::io::split(handshake(&connector, addr).await?))
    })?;
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

/// TLS round-trip latency, beside `tcp_rr`: 1-byte round trips on one TLS
/// connection (one record each way: the byte is written, flushed and read
/// back), timed at the client, p50 and p99; and the server's CPU per round
/// trip. The handshake and a few warm-up trips (which also take the
/// server's session tickets) come before the timed trips and outside both
/// numbers. Client and server pinned to CPU 0, as in `tcp_rr`.
/// wasmtime-wasi has no TLS: n/a.
pub fn tls_rr(run: &Run) -> anyhow::Result<Workload> {
    const WARM_UP: usize = 100;
    let trips = run.scale(20_000, 5_000);
    let servers = tls_servers(run)?;
    let connector = tls_connector(run, true)?;
    let plan = Plan {
        noun: "round trip",
        trips,
        cpu: CpuSpan::TimedTrips { warm_up: WARM_UP },
    };
    let rr = round_trips(
        run,
        &servers,
        &plan,
        async |addr| Ok((handshake(&connector, addr).await?, [0u8; 1])),
        async |(tls, byte): &mut (TlsStream, [u8; 1])| {
            tls.write_all(byte).await?;
            tls.flush().await?;
            tls.read_exact(byte).await?;
            Ok(())
        },
    )?;
    Ok(Workload {
        name: "tls_rr".into(),
        what: format!(
            "{trips} 1-byte round trips on one TLS connection, after the handshake and {WARM_UP} untimed trips; client and server pinned to CPU 0 (wasmtime-wasi has no TLS: n/a)"
        ),
        goal: "beside tcp_rr (no goal set)".into(),
        met: None,
        verdict: format!(
            "moat p50 {:.2}× native over TLS, {:.2}× server CPU per round trip",
            ratio(&rr.p50, Kind::Moat),
            ratio(&rr.cpu, Kind::Moat)
        ),
        metrics: rr.metrics(),
    })
}

/// Connections that each make a full TLS handshake, echo 16 bytes and
/// close, one after another: connections/s and server CPU per connection.
pub fn tls_connect(run: &Run) -> anyhow::Result<Workload> {
    let conns = run.scale(1_000, 200);
    let servers = tls_servers(run)?;
    let connector = tls_connector(run, false)?;
    let mut rate = MetricBuilder::new("sequential connections", "conn/s", Better::Higher);
    let mut cpu = MetricBuilder::new("server CPU per connection", "µs", Better::Lower);
    for _ in 0..run.rounds {
        for (kind, server) in &servers {
            let (addr, connector) = (server.addr, &connector);
            let cpu0 = server.cpu_ns();
            let start = Instant::now();
            client(true, async move {
                for _ in 0..conns {
                    let mut tls = handshake(connector, addr).await?;
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
