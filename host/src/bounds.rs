//! The bounds on a run's own resources: its memory and its time.
//!
//! Memory: a [`wasmtime::ResourceLimiter`] refuses any growth of the
//! guest's linear memories past [`RunOptions::max_memory`] in all
//! (default 512 MiB, `Limits::max_memory`) and traps the guest with
//! [`MemoryLimitReached`], so the run ends with a clear error instead of the
//! guest's allocator failing somewhere later.
//!
//! Time: [`RunOptions::timeout`] bounds the run's wall-clock time. A guest
//! that waits (on a socket, a timer) is simply dropped when the time is up;
//! one that computes is interrupted through the engine's epoch: a thread
//! advances the epoch at the deadline, and the store's epoch callback traps
//! with [`TimeLimitReached`] once the deadline has passed (before it, the
//! callback only yields, as the socket drains need).
//!
//! [`RunOptions::max_memory`]: crate::RunOptions::max_memory
//! [`RunOptions::timeout`]: crate::RunOptions::timeout

use std::sync::mpsc;
use std::time::{Duration, Instant};

use wasmtime::{Engine, ResourceLimiter, UpdateDeadline};

use moat_policy::setting::{Setting, Spelling, Worded};

/// Table elements a guest may grow its tables to, all together: a million
/// (8 to 16 MiB of host memory). Compilers emit fixed-size tables; only a
/// guest growing them on purpose comes near this.
pub(crate) const MAX_TABLE_ELEMENTS: usize = 1_000_000;

/// The guest tried to grow its memory past the run's limit
/// ([`Setting::MaxMemory`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct MemoryLimitReached {
    /// The limit, in bytes.
    pub limit: u64,
    /// The total the guest asked for.
    pub desired: u64,
}

/// The run's time was up ([`Setting::Timeout`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct TimeLimitReached {
    /// The limit.
    pub limit: Duration,
}

impl Worded for MemoryLimitReached {
    fn write_worded(
        &self,
        spelling: Spelling,
        f: &mut std::fmt::Formatter<'_>,
    ) -> std::fmt::Result {
        let MemoryLimitReached { limit, desired } = self;
        write!(
            f,
            "the guest reached its memory limit: it asked for {desired} bytes with {limit} \
             allowed (raise it with {})",
            Setting::MaxMemory.named(spelling)
        )
    }
}

impl Worded for TimeLimitReached {
    fn write_worded(
        &self,
        spelling: Spelling,
        f: &mut std::fmt::Formatter<'_>,
    ) -> std::fmt::Result {
        write!(
            f,
            "the guest ran past its time limit of {:?} ({})",
            self.limit,
            Setting::Timeout.named(spelling)
        )
    }
}

moat_policy::display_in_embedding_words!(MemoryLimitReached, TimeLimitReached);

/// The limiter a run's store consults before any memory or table grows:
/// linear memories together up to a limit (growth past it traps with
/// [`MemoryLimitReached`]), tables up to a million elements in all. An
/// embedder with a store of its own installs it with
/// `store.limiter(|state| &mut state.limiter)`.
pub struct Limiter {
    max_memory: u64,
    memory: u64,
    table_elements: usize,
}

impl Limiter {
    /// A limiter allowing `max_memory` bytes of linear memory in all.
    pub fn new(max_memory: u64) -> Limiter {
        Limiter {
            max_memory,
            memory: 0,
            table_elements: 0,
        }
    }
}

impl Limiter {
    /// The linear memory granted so far, in bytes: the most the store's
    /// memories held at once (a memory never shrinks).
    pub fn memory(&self) -> u64 {
        self.memory
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let grown = (desired as u64).saturating_sub(current as u64);
        let total = self.memory.saturating_add(grown);
        if total > self.max_memory {
            tracing::debug!(target: "moat::net", total, limit = self.max_memory, "memory limit reached");
            return Err(wasmtime::Error::new(MemoryLimitReached {
                limit: self.max_memory,
                desired: total,
            }));
        }
        self.memory = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self
            .table_elements
            .saturating_add(desired.saturating_sub(current));
        if total > MAX_TABLE_ELEMENTS {
            return Ok(false);
        }
        self.table_elements = total;
        Ok(true)
    }
}

/// The epoch callback of a run with a deadline: trap once it has passed,
/// else yield (the socket drains' ticks come through here too).
pub(crate) fn deadline_callback(
    deadline: Instant,
    limit: Duration,
) -> impl FnMut() -> wasmtime::Result<UpdateDeadline> + Send + Sync + 'static {
    move || {
        if Instant::now() >= deadline {
            tracing::debug!(target: "moat::net", ?limit, "time limit reached: interrupting the guest");
            Err(wasmtime::Error::new(TimeLimitReached { limit }))
        } else {
            Ok(UpdateDeadline::Yield(1))
        }
    }
}

/// Advances `engine`'s epoch once at `deadline`, unless dropped before.
pub(crate) struct Alarm(Option<mpsc::Sender<()>>);

impl Alarm {
    pub(crate) fn set(engine: Engine, after: Duration) -> std::io::Result<Alarm> {
        let (cancel, cancelled) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("moat-timeout".into())
            .spawn(move || {
                if let Err(mpsc::RecvTimeoutError::Timeout) = cancelled.recv_timeout(after) {
                    engine.increment_epoch();
                }
            })?;
        Ok(Alarm(Some(cancel)))
    }
}

impl Drop for Alarm {
    fn drop(&mut self) {
        // Dropping the sender wakes the thread, which then ends.
        self.0.take();
    }
}
