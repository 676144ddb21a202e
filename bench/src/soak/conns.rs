//! Parts `sequential` and `concurrent`: many TCP connections to moat's
//! echo server, each checked. A connection connects, sends 16 bytes of its
//! own ([`Stream`] seeded with its number), reads the 16 echoed back and
//! compares them, then closes: it half-closes and reads the server's end
//! of stream, so both sides have closed cleanly. `sequential` makes them
//! one after another; `concurrent` holds thousands open at once, in
//! rounds. A failure is counted, never fatal, and the first few are kept
//! with their cause.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio::time::timeout;

use super::sampler::{Sampler, settle_fds};
use super::stream::Stream;
use super::{FD_SETTLE, FD_SLACK};
use crate::measure;

/// `sequential`: connections one after another. 100,000 takes the
/// server's accept, per-connection setup and teardown through enough
/// cycles that a leak of one descriptor or a few hundred bytes each shows.
pub const SEQUENTIAL_FULL: u64 = 100_000;
pub const SEQUENTIAL_QUICK: u64 = 5_000;

/// `concurrent`: connections held open at once, and how many rounds of
/// open-all, echo-all, close-all. 10,000 is the c10k shape; three rounds
/// show whether each round leaves the server where the first began.
pub const CONCURRENT_FULL: u64 = 10_000;
pub const CONCURRENT_QUICK: u64 = 1_000;
pub const ROUNDS: usize = 3;

/// How much more of its own memory (RSS without the guest's linear
/// memory) the server may hold after a `concurrent` round than after the
/// first. The first round leaves the allocator's arenas and the tables
/// sized for 10,000 sockets; a later round that finds them should need
/// nothing more (measured: within 0.3 MiB over six rounds), while a KiB
/// kept per connection would be 10 MiB a round.
pub const ROUND_HOST_MEMORY_SLACK_KIB: u64 = 4 << 10;

/// Connects in flight at once, and (with [`FD_SLACK`]) the most the server
/// has yet to accept before more are made: under moat's listen backlog
/// (1024), so the accept queue never overflows (a dropped SYN costs its client a 1 s
/// retransmit, which would be measured as the server's slowness).
const CONNECT_BATCH: u64 = 256;

/// How long the server may take to accept a batch before the next is
/// made anyway (and the wait is counted as a stall).
const ACCEPT_WAIT: Duration = Duration::from_secs(10);

/// The longest one step of a connection (connect, write, read, the
/// server's close) may take: on loopback each is well under a
/// millisecond, and even 10,000 at once are served within seconds, so 30 s
/// is a lost connection, not a slow one.
const STEP: Duration = Duration::from_secs(30);

/// The failures whose messages are kept (the count is always exact).
pub(super) const KEPT_ERRORS: usize = 10;

/// Bytes each connection sends and expects back.
const MESSAGE: usize = 16;

/// The rounds after the first whose server held more than
/// [`ROUND_HOST_MEMORY_SLACK_KIB`] more of its own memory, once closed,
/// than after the first round.
fn host_memory_growth(rounds: &[Round]) -> Vec<String> {
    let Some((first, later)) = rounds.split_first() else {
        return Vec::new();
    };
    let first_kib = first.host_after_kib();
    later
        .iter()
        .enumerate()
        .filter(|(_, r)| r.host_after_kib() > first_kib + ROUND_HOST_MEMORY_SLACK_KIB)
        .map(|(i, r)| {
            format!(
                "concurrent: after round {} the host holds {} KiB of its own memory, {} KiB more \
                 than after round 1 (allowed: {ROUND_HOST_MEMORY_SLACK_KIB} KiB more)",
                i + 2,
                r.host_after_kib(),
                r.host_after_kib() - first_kib
            )
        })
        .collect()
}

/// Failures so far, and the first few messages.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Tally {
    pub failures: u64,
    pub errors: Vec<String>,
}

impl Tally {
    pub(super) fn fail(&mut self, what: String, error: &anyhow::Error) {
        self.failures += 1;
        if self.errors.len() < KEPT_ERRORS {
            self.errors.push(format!("{what}: {error:#}"));
        }
    }
}

/// The figures of `sequential`.
#[derive(Debug, Clone, Serialize)]
pub struct Sequential {
    pub connections: u64,
    pub ok: u64,
    pub tally: Tally,
    pub seconds: f64,
    pub per_second: f64,
}

impl Sequential {
    pub fn failures(&self) -> Vec<String> {
        failures_of("sequential", self.connections, &self.tally)
    }

    pub fn rows(&self) -> Vec<(String, String)> {
        vec![
            ("connections".into(), self.connections.to_string()),
            ("echoed and closed cleanly".into(), self.ok.to_string()),
            ("failures".into(), self.tally.failures.to_string()),
            ("seconds".into(), format!("{:.1}", self.seconds)),
            ("connections/s".into(), format!("{:.0}", self.per_second)),
        ]
    }
}

/// One round of `concurrent`.
#[derive(Debug, Clone, Serialize)]
pub struct Round {
    pub opened: u64,
    pub echoed: u64,
    pub closed: u64,
    pub tally: Tally,
    /// Batches the server had not accepted within [`ACCEPT_WAIT`].
    pub accept_stalls: u64,
    pub open_seconds: f64,
    pub echo_seconds: f64,
    pub close_seconds: f64,
    /// The server with every connection open.
    pub server_fds_all_open: usize,
    pub server_rss_all_open_kib: u64,
    /// Of that RSS, what the guest's linear memory holds.
    pub server_guest_all_open_kib: u64,
    /// The server once the round's connections were closed and its
    /// descriptors had settled (or [`FD_SETTLE`] had passed).
    pub server_fds_after: usize,
    pub server_rss_after_kib: u64,
    pub server_guest_after_kib: u64,
}

impl Round {
    /// The server's own memory once the round's connections were closed:
    /// its RSS without the guest's linear memory.
    fn host_after_kib(&self) -> u64 {
        self.server_rss_after_kib
            .saturating_sub(self.server_guest_after_kib)
    }
}

/// The figures of `concurrent`.
#[derive(Debug, Clone, Serialize)]
pub struct Concurrent {
    /// Connections held at once, each round.
    pub connections: u64,
    pub connect_batch: u64,
    pub rounds: Vec<Round>,
}

impl Concurrent {
    fn failed(&self) -> u64 {
        self.rounds.iter().map(|r| r.tally.failures).sum()
    }

    pub fn failures(&self) -> Vec<String> {
        let mut tally = Tally {
            failures: self.failed(),
            errors: Vec::new(),
        };
        for round in &self.rounds {
            tally.errors.extend(round.tally.errors.iter().cloned());
        }
        tally.errors.truncate(KEPT_ERRORS);
        let total = self.connections * self.rounds.len() as u64;
        let mut out = failures_of("concurrent", total, &tally);
        if self.rounds.len() < ROUNDS {
            out.push(format!(
                "concurrent: {} of {ROUNDS} rounds ran",
                self.rounds.len()
            ));
        }
        out.extend(host_memory_growth(&self.rounds));
        out
    }

    pub fn rows(&self) -> Vec<(String, String)> {
        let mut rows = vec![
            (
                "connections held at once".into(),
                self.connections.to_string(),
            ),
            (
                "connects in flight at most".into(),
                self.connect_batch.to_string(),
            ),
            ("rounds".into(), self.rounds.len().to_string()),
            ("failures, all rounds".into(), self.failed().to_string()),
        ];
        for (i, r) in self.rounds.iter().enumerate() {
            let n = i + 1;
            rows.push((
                format!("round {n}: opened / echoed / closed"),
                format!("{} / {} / {}", r.opened, r.echoed, r.closed),
            ));
            rows.push((format!("round {n}: failures"), r.tally.failures.to_string()));
            rows.push((
                format!("round {n}: open / echo / close (s)"),
                format!(
                    "{:.2} / {:.2} / {:.2}",
                    r.open_seconds, r.echo_seconds, r.close_seconds
                ),
            ));
            rows.push((
                format!("round {n}: server fds all open → after close"),
                format!("{} → {}", r.server_fds_all_open, r.server_fds_after),
            ));
            rows.push((
                format!("round {n}: server RSS all open → after close (MiB)"),
                format!(
                    "{:.1} → {:.1}",
                    mib(r.server_rss_all_open_kib),
                    mib(r.server_rss_after_kib)
                ),
            ));
            rows.push((
                format!("round {n}: of it the guest's memory (MiB)"),
                format!(
                    "{:.1} → {:.1}",
                    mib(r.server_guest_all_open_kib),
                    mib(r.server_guest_after_kib)
                ),
            ));
            if r.accept_stalls > 0 {
                rows.push((
                    format!("round {n}: batches not accepted within 10 s"),
                    r.accept_stalls.to_string(),
                ));
            }
        }
        rows
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn failures_of(part: &str, total: u64, tally: &Tally) -> Vec<String> {
    if tally.failures == 0 {
        return Vec::new();
    }
    let mut out = vec![format!(
        "{part}: {} of {total} connections failed",
        tally.failures
    )];
    out.extend(tally.errors.iter().map(|e| format!("{part}:   {e}")));
    out
}

/// A current-thread runtime: one connection's work is a few system
/// calls, and the server needs the other core.
pub(super) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the client's runtime")
}

/// `count` connections to `addr`, one after another.
pub fn sequential(addr: SocketAddr, count: u64) -> anyhow::Result<Sequential> {
    runtime()?.block_on(async {
        let mut tally = Tally::default();
        let start = Instant::now();
        let mut last_report = Instant::now();
        for i in 0..count {
            let result = async {
                let mut stream = connect(addr).await?;
                echo(&mut stream, i).await?;
                close(stream).await
            }
            .await;
            if let Err(e) = result {
                tally.fail(format!("connection {i}"), &e);
            }
            if last_report.elapsed() >= Duration::from_secs(10) {
                last_report = Instant::now();
                eprintln!(
                    "   {} of {count} connections, {} failed",
                    i + 1,
                    tally.failures
                );
            }
        }
        let seconds = start.elapsed().as_secs_f64();
        Ok(Sequential {
            connections: count,
            ok: count - tally.failures,
            tally,
            seconds,
            per_second: count as f64 / seconds,
        })
    })
}

/// [`ROUNDS`] rounds of `count` connections held at once to the server
/// `pid` at `addr`; `sampler` notes the server with all of them open and
/// again once they are closed.
pub fn concurrent(
    addr: SocketAddr,
    pid: u32,
    count: u64,
    sampler: &Sampler,
) -> anyhow::Result<Concurrent> {
    let runtime = runtime()?;
    let mut rounds = Vec::with_capacity(ROUNDS);
    for n in 1..=ROUNDS {
        let round = runtime.block_on(round(addr, pid, count, sampler))?;
        eprintln!(
            "   round {n}: {} opened, {} echoed, {} closed, {} failed; server fds {} all open, {} after",
            round.opened,
            round.echoed,
            round.closed,
            round.tally.failures,
            round.server_fds_all_open,
            round.server_fds_after
        );
        rounds.push(round);
    }
    Ok(Concurrent {
        connections: count,
        connect_batch: CONNECT_BATCH,
        rounds,
    })
}

/// Opens `count` connections (at most [`CONNECT_BATCH`] in flight, each
/// batch accepted before the next), then has each echo its message, then
/// closes them all.
async fn round(addr: SocketAddr, pid: u32, count: u64, sampler: &Sampler) -> anyhow::Result<Round> {
    let mut tally = Tally::default();
    let fds0 = measure::fd_count(pid);
    let mut accept_stalls = 0;

    let start = Instant::now();
    let mut open: Vec<(u64, TcpStream)> = Vec::with_capacity(count as usize);
    let mut next = 0;
    while next < count {
        let batch = CONNECT_BATCH.min(count - next);
        let mut connects = JoinSet::new();
        for i in next..next + batch {
            connects.spawn(async move { (i, connect(addr).await) });
        }
        while let Some(done) = connects.join_next().await {
            match done.context("a connecting task")? {
                (i, Ok(stream)) => open.push((i, stream)),
                (i, Err(e)) => tally.fail(format!("connection {i}: connect"), &e),
            }
        }
        next += batch;
        // Within FD_SLACK: the server's own descriptors come and go by one
        // or two (a timer, a worker's), which must not read as a stall.
        let deadline = Instant::now() + ACCEPT_WAIT;
        while measure::fd_count(pid) + FD_SLACK < fds0 + open.len() {
            if Instant::now() > deadline {
                accept_stalls += 1;
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    // The last batch fully accepted, for the all-open reading (briefly:
    // a baseline descriptor gone meanwhile would keep the count one short).
    let deadline = Instant::now() + Duration::from_secs(1);
    while measure::fd_count(pid) < fds0 + open.len() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let open_seconds = start.elapsed().as_secs_f64();
    let server_fds_all_open = measure::fd_count(pid);
    let server_rss_all_open_kib = measure::rss_kib(pid).0;
    let server_guest_all_open_kib = measure::linear_memory_kib(pid);
    sampler.note();
    let opened = open.len() as u64;

    let start = Instant::now();
    let mut echoes = JoinSet::new();
    for (i, mut stream) in open {
        echoes.spawn(async move {
            let result = echo(&mut stream, i).await;
            (i, stream, result)
        });
    }
    let mut echoed = Vec::with_capacity(opened as usize);
    while let Some(done) = echoes.join_next().await {
        match done.context("an echoing task")? {
            (i, stream, Ok(())) => echoed.push((i, stream)),
            (i, _, Err(e)) => tally.fail(format!("connection {i}: echo"), &e),
        }
    }
    let echo_seconds = start.elapsed().as_secs_f64();
    let echoed_count = echoed.len() as u64;

    let start = Instant::now();
    let mut closes = JoinSet::new();
    for (i, stream) in echoed {
        closes.spawn(async move { (i, close(stream).await) });
    }
    let mut closed = 0;
    while let Some(done) = closes.join_next().await {
        match done.context("a closing task")? {
            (_, Ok(())) => closed += 1,
            (i, Err(e)) => tally.fail(format!("connection {i}: close"), &e),
        }
    }
    let close_seconds = start.elapsed().as_secs_f64();
    // Nothing else runs on this runtime now: waiting here blocks no one.
    settle_fds(pid, fds0 + FD_SLACK, FD_SETTLE);
    sampler.note();
    Ok(Round {
        opened,
        echoed: echoed_count,
        closed,
        tally,
        accept_stalls,
        open_seconds,
        echo_seconds,
        close_seconds,
        server_fds_all_open,
        server_rss_all_open_kib,
        server_guest_all_open_kib,
        server_fds_after: measure::fd_count(pid),
        server_rss_after_kib: measure::rss_kib(pid).0,
        server_guest_after_kib: measure::linear_memory_kib(pid),
    })
}

async fn connect(addr: SocketAddr) -> anyhow::Result<TcpStream> {
    let stream = timeout(STEP, TcpStream::connect(addr))
        .await
        .context("no connection within 30 s")?
        .context("connect")?;
    stream.set_nodelay(true).context("TCP_NODELAY")?;
    Ok(stream)
}

/// Sends connection `i`'s message and checks the echo.
async fn echo(stream: &mut TcpStream, i: u64) -> anyhow::Result<()> {
    let message: [u8; MESSAGE] = Stream::bytes(i);
    timeout(STEP, stream.write_all(&message))
        .await
        .context("could not send within 30 s")?
        .context("send")?;
    let mut back = [0u8; MESSAGE];
    timeout(STEP, stream.read_exact(&mut back))
        .await
        .context("no echo within 30 s")?
        .context("reading the echo")?;
    if back != message {
        bail!("echoed {back:02x?}, sent {message:02x?}");
    }
    Ok(())
}

/// Half-closes and reads the server's end of stream: nothing more may
/// come.
async fn close(mut stream: TcpStream) -> anyhow::Result<()> {
    timeout(STEP, stream.shutdown())
        .await
        .context("could not half-close within 30 s")?
        .context("half-close")?;
    let mut byte = [0u8; 1];
    let n = timeout(STEP, stream.read(&mut byte))
        .await
        .context("the server did not close within 30 s of the client")?
        .context("reading the server's close")?;
    if n != 0 {
        bail!("the server sent more after the echo");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{ROUND_HOST_MEMORY_SLACK_KIB, Round, Tally, host_memory_growth};

    fn round(rss_after_kib: u64, guest_after_kib: u64) -> Round {
        Round {
            opened: 1,
            echoed: 1,
            closed: 1,
            tally: Tally::default(),
            accept_stalls: 0,
            open_seconds: 0.0,
            echo_seconds: 0.0,
            close_seconds: 0.0,
            server_fds_all_open: 14,
            server_rss_all_open_kib: rss_after_kib,
            server_guest_all_open_kib: guest_after_kib,
            server_fds_after: 13,
            server_rss_after_kib: rss_after_kib,
            server_guest_after_kib: guest_after_kib,
        }
    }

    #[test]
    fn host_memory_growing_past_the_first_round_fails_and_guest_memory_does_not_count() {
        let slack = ROUND_HOST_MEMORY_SLACK_KIB;
        // The guest's memory grows by 100 MiB a round (pages it touches
        // anew): the host's own stays put, which passes.
        let flat = [round(50_000, 10_000), round(150_000, 110_000)];
        assert!(host_memory_growth(&flat).is_empty());
        let at_slack = [round(50_000, 0), round(50_000 + slack, 0)];
        assert!(host_memory_growth(&at_slack).is_empty());
        let grew = [round(50_000, 0), round(50_000, 0), round(50_001 + slack, 0)];
        let failed = host_memory_growth(&grew);
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert!(failed[0].contains("after round 3"), "{failed:?}");
        assert!(host_memory_growth(&[]).is_empty());
    }
}
