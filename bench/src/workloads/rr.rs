//! The round-trip driver, shared by tcp_rr, udp_echo, tls_rr and http_rr:
//! each round, each server gets one connection from the workload's client
//! and a run of trips on it, every trip timed at the client; the driver
//! turns the times into p50 and p99 and the server's CPU into CPU per trip.

use std::net::SocketAddr;
use std::time::Instant;

use crate::report::{Better, Metric, MetricBuilder};
use crate::servers::{Kind, Server};

use super::{Run, add_percentiles, client};

/// What a round-trip workload sets besides its client.
pub struct Plan {
    /// What the metrics call one trip: "round trip", or "request".
    pub noun: &'static str,
    /// Timed trips per server per round, all on one connection.
    pub trips: usize,
    /// Which stretch of the server's CPU time is charged to the trips.
    pub cpu: CpuSpan,
}

/// Which stretch of the server's CPU time a round-trip workload divides by
/// its trips.
#[derive(Clone, Copy)]
pub enum CpuSpan {
    /// From before the client's runtime starts to after it ends, so the
    /// server's work on the client's connect and close is counted in
    /// (tcp_rr, udp_echo, http_rr).
    Connection,
    /// The timed trips alone, after `warm_up` untimed ones on the same
    /// connection, so the set-up (tls_rr: the TLS handshake) stays out.
    TimedTrips {
        /// Untimed trips between connecting and the first timed one.
        warm_up: usize,
    },
}

/// A round-trip workload's metrics, as its table lists them.
pub struct Latency {
    /// The p50 of the trips, µs.
    pub p50: Metric,
    /// The p99 of the trips, µs.
    pub p99: Metric,
    /// The server's CPU per trip, µs.
    pub cpu: Metric,
}

impl Latency {
    /// The metrics in the order of the workload's rows: p50, p99, CPU.
    pub fn metrics(self) -> Vec<Metric> {
        vec![self.p50, self.p99, self.cpu]
    }
}

/// Runs `plan` against `servers` for `run.rounds` rounds, the client
/// pinned to CPU 0 (where the workloads start their servers pinned).
/// `connect` opens the client's end (with the
/// buffers its trips reuse); `trip` makes one trip on it, and fails on a
/// wrong or missing answer. Each trip's time is `trip` alone.
pub fn round_trips<C>(
    run: &Run,
    servers: &[(Kind, Server)],
    plan: &Plan,
    connect: impl AsyncFn(SocketAddr) -> anyhow::Result<C>,
    trip: impl AsyncFn(&mut C) -> anyhow::Result<()>,
) -> anyhow::Result<Latency> {
    let Plan { noun, trips, cpu } = *plan;
    let warm_up = match cpu {
        CpuSpan::Connection => 0,
        CpuSpan::TimedTrips { warm_up } => warm_up,
    };
    let mut p50 = MetricBuilder::new(&format!("{noun} p50"), "µs", Better::Lower);
    let mut p99 = MetricBuilder::new(&format!("{noun} p99"), "µs", Better::Lower);
    let mut used = MetricBuilder::new(&format!("server CPU per {noun}"), "µs", Better::Lower);
    for _ in 0..run.rounds {
        for (kind, server) in servers {
            let whole = matches!(cpu, CpuSpan::Connection).then(|| server.cpu_ns());
            let (mut times, timed) = client(true, async {
                let mut conn = connect(server.addr).await?;
                for _ in 0..warm_up {
                    trip(&mut conn).await?;
                }
                let cpu0 = whole.is_none().then(|| server.cpu_ns());
                let mut times = Vec::with_capacity(trips);
                for _ in 0..trips {
                    let t = Instant::now();
                    trip(&mut conn).await?;
                    times.push(t.elapsed().as_secs_f64() * 1e6);
                }
                Ok((times, cpu0.map_or(0, |cpu0| server.cpu_ns() - cpu0)))
            })?;
            // The connection is closed by now, so `whole` counts its close.
            let ns = whole.map_or(timed, |cpu0| server.cpu_ns() - cpu0);
            used.add(*kind, ns as f64 / trips as f64 / 1e3);
            add_percentiles(&mut p50, &mut p99, *kind, &mut times);
        }
    }
    Ok(Latency {
        p50: p50.build(),
        p99: p99.build(),
        cpu: used.build(),
    })
}
