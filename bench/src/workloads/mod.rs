//! The workloads: each runs the same job against every server, rounds
//! interleaved (native, moat, wasmtime-wasi, native, ...; with a baseline,
//! its moat after moat and its wasmtime-wasi after wasmtime-wasi).
//!
//! One file per kind of traffic: [`tcp`] (throughput, round trips,
//! connections), [`writes`] (a server's own writes meeting a slow or busy
//! reader), [`held`] (thousands of TCP connections held at once), [`udp`],
//! [`tls`], [`http`], [`http_wasi`] (wasi:http: `moat serve` and a guest's
//! outgoing requests) and [`start`] (cold start). The workloads that time
//! round trips share one driver, [`rr`]; this file holds the run's
//! settings, the list of workloads and the helpers every file uses.

mod held;
mod http;
pub(crate) mod http_wasi;
mod rr;
mod start;
mod tcp;
mod tls;
mod udp;
mod writes;

use anyhow::bail;

pub use http_wasi::fetch_native;

use crate::measure;
use crate::report::{Metric, MetricBuilder, Workload};
use crate::servers::{Kind, Mode, Server, Setup};

/// Settings of one harness run.
pub struct Run {
    /// The binaries, guests and certificates the servers use.
    pub setup: Setup,
    /// `--quick`: smaller sizes (see [`Run::scale`]).
    pub quick: bool,
    /// Rounds of each workload (some cap or raise it, and say so).
    pub rounds: usize,
}

impl Run {
    /// `quick` under `--quick`, `full` otherwise.
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
    "http_serve",
    "http_fetch",
    "c10k",
];

/// Runs the workload called `name` (one of [`ALL`]).
pub fn run(name: &str, run: &Run) -> anyhow::Result<Workload> {
    match name {
        "tcp_throughput" => tcp::tcp_throughput(run),
        "tcp_rr" => tcp::tcp_rr(run),
        "tcp_connect" => tcp::tcp_connect(run),
        "idle_sockets" => held::idle_sockets(run),
        "large_write" => writes::large_write(run),
        "busy_guest" => writes::busy_guest(run),
        "busy_guest_large" => writes::busy_guest_large(run),
        "rss_after_burst" => writes::rss_after_burst(run),
        "cold_start" => start::cold_start(run),
        "udp_echo" => udp::udp_echo(run),
        "udp_send" => udp::udp_send(run),
        "udp_send_name" => udp::udp_send_name(run),
        "tls_throughput" => tls::tls_throughput(run),
        "tls_rr" => tls::tls_rr(run),
        "tls_connect" => tls::tls_connect(run),
        "http_rr" => http::http_rr(run),
        "http_serve" => http_wasi::http_serve(run),
        "http_fetch" => http_wasi::http_fetch(run),
        "c10k" => held::c10k(run),
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

/// Every server kind of the run, started serving `mode`.
fn started(run: &Run, mode: Mode, pinned: bool) -> anyhow::Result<Vec<(Kind, Server)>> {
    start_all(run, run.setup.kinds(), mode, pinned)
}

/// As [`started`], with moat running the std::net guest too.
fn started_with_std(run: &Run, mode: Mode, pinned: bool) -> anyhow::Result<Vec<(Kind, Server)>> {
    start_all(run, run.setup.kinds_with_std(), mode, pinned)
}

/// The servers of `kinds`, in that order, each serving `mode`.
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

/// The run's native and moat kinds, for the workloads wasmtime-wasi
/// cannot serve.
fn native_and_moat(run: &Run) -> Vec<Kind> {
    run.setup
        .kinds()
        .into_iter()
        .filter(|k| *k == Kind::Native || k.is_moat())
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

/// `kind`'s median over native's in `w`, or NaN.
fn ratio(w: &Metric, kind: Kind) -> f64 {
    w.ratio_to_native.get(&kind).copied().unwrap_or(f64::NAN)
}

/// `kind`'s median in `w`, or NaN.
fn median(w: &Metric, kind: Kind) -> f64 {
    w.servers.get(&kind).map_or(f64::NAN, |s| s.median)
}
