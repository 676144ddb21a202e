//! The epoch ticker: makes a computing guest yield, only while it has to.
//!
//! A drain task (see [`crate::net::tcp`]) runs outside the guest's store, on
//! the same current-thread runtime, so it can only run while the store is
//! not executing guest code. A guest that wrote into a full socket and then
//! computes would hold its queued bytes back for the whole computation.
//! Epoch interruption makes the guest yield to the runtime; the
//! engine's epoch must be advanced from another thread for that.
//!
//! A ticker that always runs costs every guest (interruptions cut into
//! throughput and latency; BENCHMARKS.md has the figures). So this ticker
//! only ticks while some socket has bytes
//! queued ([`PendingWrites`]); the rest of the time its thread sleeps on a
//! condition variable and no guest is ever interrupted.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::Engine;

use crate::net::PendingWrites;

/// Epoch period while bytes are queued: the longest a queued byte waits for
/// a computing guest to yield (BENCHMARKS.md measures it); its cost only
/// applies while a backlog exists.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(1);

/// The thread that advances an engine's epoch while writes are pending.
///
/// [`Moat`](crate::Moat) runs one. An embedder with an engine of its own
/// (set up by [`crate::kit::configure`]) starts one beside it
/// ([`EpochTicker::for_engine`]) and builds each run's context on it
/// ([`crate::kit::MoatCtxBuilder::build`]). Dropping it stops the thread.
pub struct EpochTicker {
    pending: Arc<PendingWrites>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    /// Starts the thread for `engine`, with a gauge of its own for the
    /// runs built on it.
    ///
    /// # Errors
    /// If the thread cannot be spawned.
    pub fn for_engine(engine: &Engine) -> std::io::Result<EpochTicker> {
        EpochTicker::start(engine.clone(), PendingWrites::new())
    }

    /// The gauge of queued writes this ticker watches: the runs of its
    /// engine share it.
    pub fn pending_writes(&self) -> &Arc<PendingWrites> {
        &self.pending
    }

    /// Starts the thread for `engine`, ticking while `pending` has sockets
    /// with bytes queued.
    ///
    /// # Errors
    /// If the thread cannot be spawned.
    pub fn start(engine: Engine, pending: Arc<PendingWrites>) -> std::io::Result<EpochTicker> {
        let gauge = Arc::clone(&pending);
        let thread = std::thread::Builder::new()
            .name("moat-epoch".into())
            .spawn(move || {
                while gauge.wait_busy() {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })?;
        Ok(EpochTicker {
            pending,
            thread: Some(thread),
        })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.pending.close();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
