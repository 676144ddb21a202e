//! The server's resources over time: a thread that reads the moat
//! process's resident memory (VmRSS, and how much of it is its guest's
//! linear memory, from /proc/PID/smaps) and its open descriptors (entries
//! of /proc/PID/fd) every second while a phase runs, plus one reading when
//! the phase begins and one when it ends; and each phase's start, peak and
//! end figures from those readings.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::measure;

/// How often the thread reads the server: often enough that a part of a
/// minute gives a line, seldom enough that reading /proc/PID/fd (10,000
/// entries at the concurrent part's peak) costs the run nothing.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// When a reading was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mark {
    /// As the phase began.
    Start,
    /// By the thread, every [`SAMPLE_EVERY`].
    Tick,
    /// By the part, at a moment of its own (every connection open).
    Note,
    /// As the phase ended, after its descriptors had settled.
    End,
}

/// One reading of the server.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    /// The phase it belongs to (`bytes/tcp`, `sequential`, ...).
    pub phase: String,
    pub pid: u32,
    pub mark: Mark,
    /// Seconds since the soak began.
    pub t: f64,
    /// Seconds since the phase began.
    pub t_phase: f64,
    /// VmRSS, KiB.
    pub rss_kib: u64,
    /// Of VmRSS, what the guest's linear memory holds, KiB.
    pub guest_kib: u64,
    /// VmRSS without the guest's linear memory: the host's own, KiB.
    pub host_kib: u64,
    /// Entries of /proc/PID/fd.
    pub fds: usize,
}

/// One phase's readings, summed up.
#[derive(Debug, Clone, Serialize)]
pub struct Resources {
    pub pid: u32,
    pub samples: usize,
    pub rss_start_kib: u64,
    pub rss_max_kib: u64,
    pub rss_end_kib: u64,
    /// The host's own memory (VmRSS without the guest's linear memory).
    pub host_start_kib: u64,
    pub host_max_kib: u64,
    pub host_end_kib: u64,
    pub fds_start: usize,
    pub fds_max: usize,
    pub fds_end: usize,
    /// How long the descriptors took to come back down after the load
    /// (or the whole wait, if they did not).
    pub fd_settle_seconds: f64,
    /// Whether the server process was still running at the end.
    pub alive_at_end: bool,
}

/// The phase being sampled.
struct Current {
    phase: String,
    pid: u32,
    began: Instant,
}

struct Shared {
    current: Option<Current>,
    samples: Vec<Sample>,
}

/// The sampling thread and everything it has read.
pub struct Sampler {
    origin: Instant,
    shared: Arc<Mutex<Shared>>,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    /// Starts the thread; times are counted from `origin`.
    pub fn start(origin: Instant) -> Sampler {
        let shared = Arc::new(Mutex::new(Shared {
            current: None,
            samples: Vec::new(),
        }));
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                let mut next = Instant::now() + SAMPLE_EVERY;
                // Until told to stop (or the sender is gone).
                while let Err(RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(next.saturating_duration_since(Instant::now()))
                {
                    read_into(&mut lock(&shared), origin, Mark::Tick);
                    // A late tick (a slow /proc read) does not make the
                    // next ones come in a burst.
                    next = (next + SAMPLE_EVERY).max(Instant::now());
                }
            })
        };
        Sampler {
            origin,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Begins sampling the server `pid` as `phase`; returns the first
    /// reading.
    pub fn begin(&self, phase: &str, pid: u32) -> Sample {
        let mut shared = lock(&self.shared);
        shared.current = Some(Current {
            phase: phase.to_owned(),
            pid,
            began: Instant::now(),
        });
        read_into(&mut shared, self.origin, Mark::Start)
    }

    /// A reading now, marked as the part's own.
    pub fn note(&self) {
        read_into(&mut lock(&self.shared), self.origin, Mark::Note);
    }

    /// Ends the phase with a last reading and sums up its readings;
    /// `settled` is how long its descriptors took to come down.
    pub fn end(&self, settled: Duration) -> Option<Resources> {
        let mut shared = lock(&self.shared);
        read_into(&mut shared, self.origin, Mark::End);
        let current = shared.current.take()?;
        let mine: Vec<&Sample> = shared
            .samples
            .iter()
            .filter(|s| s.phase == current.phase && s.pid == current.pid)
            .collect();
        let (first, last) = (mine.first()?, mine.last()?);
        Some(Resources {
            pid: current.pid,
            samples: mine.len(),
            rss_start_kib: first.rss_kib,
            rss_max_kib: mine.iter().map(|s| s.rss_kib).max().unwrap_or(0),
            rss_end_kib: last.rss_kib,
            host_start_kib: first.host_kib,
            host_max_kib: mine.iter().map(|s| s.host_kib).max().unwrap_or(0),
            host_end_kib: last.host_kib,
            fds_start: first.fds,
            fds_max: mine.iter().map(|s| s.fds).max().unwrap_or(0),
            fds_end: last.fds,
            fd_settle_seconds: settled.as_secs_f64(),
            alive_at_end: alive(current.pid),
        })
    }

    /// Stops the thread; every reading, in order.
    pub fn finish(mut self) -> Vec<Sample> {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        std::mem::take(&mut lock(&self.shared).samples)
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The shared state; a panic elsewhere while holding it leaves readings
/// that are still worth keeping.
fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads the current phase's server, if a phase is running, and keeps
/// the reading.
fn read_into(shared: &mut Shared, origin: Instant, mark: Mark) -> Sample {
    let (phase, pid, began) = match &shared.current {
        Some(c) => (c.phase.clone(), c.pid, c.began),
        None => (String::new(), 0, Instant::now()),
    };
    let (rss_kib, guest_kib) = if pid == 0 {
        (0, 0)
    } else {
        (measure::rss_kib(pid).0, measure::linear_memory_kib(pid))
    };
    let sample = Sample {
        t: origin.elapsed().as_secs_f64(),
        t_phase: began.elapsed().as_secs_f64(),
        rss_kib,
        guest_kib,
        host_kib: rss_kib.saturating_sub(guest_kib),
        fds: if pid == 0 { 0 } else { measure::fd_count(pid) },
        phase,
        pid,
        mark,
    };
    if pid != 0 {
        shared.samples.push(sample.clone());
    }
    sample
}

/// Whether `pid` is a running process: it has a resident set (an exited
/// child not yet reaped has none).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .is_ok_and(|status| status.lines().any(|l| l.starts_with("VmRSS:")))
}

/// Polls the server's descriptor count every 20 ms until it is at most
/// `ceiling` or `patience` has passed; returns how long that took.
pub fn settle_fds(pid: u32, ceiling: usize, patience: Duration) -> Duration {
    let start = Instant::now();
    while measure::fd_count(pid) > ceiling && start.elapsed() < patience {
        std::thread::sleep(Duration::from_millis(20));
    }
    start.elapsed()
}
