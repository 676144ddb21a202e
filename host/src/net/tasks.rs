//! The host tasks a run owns, and the gauge of sockets with bytes queued.
//!
//! Two kinds of task run outside the guest's store: a listener's accept
//! loop, and a socket's drain, which writes out the bytes a guest handed
//! over while the socket was full. Both are spawned through [`Tasks`], so a
//! run can wait for the drains to finish (no accepted byte is lost when a
//! guest exits) and then stop whatever is left (no socket outlives its run).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};

use super::traffic::Traffic;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use super::budget::Budget;
use super::limits::DEFAULT_CLOSE_LINGER;

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Spawns and tracks the host tasks of one run. Every socket holds one
/// (a pointer: cloning it is one reference count).
#[derive(Clone)]
pub(crate) struct Tasks(Arc<TasksInner>);

pub(crate) struct TasksInner {
    tracker: TaskTracker,
    stop: CancellationToken,
    pending: Arc<PendingWrites>,
    /// How long a closed socket's drain may run (`Limits::close_linger`),
    /// in milliseconds.
    close_linger_ms: AtomicU64,
    /// The run's host memory, which send backlogs are paid from.
    budget: Mutex<Arc<Budget>>,
    /// The run's traffic, which its TCP streams count into.
    traffic: Arc<Traffic>,
}

impl std::ops::Deref for Tasks {
    type Target = TasksInner;

    fn deref(&self) -> &TasksInner {
        &self.0
    }
}

impl Tasks {
    #[cfg(test)]
    pub(crate) fn new(pending: Arc<PendingWrites>) -> Tasks {
        Tasks::counting_into(pending, Arc::default())
    }

    /// [`Tasks::new`], whose sockets count their bytes into `traffic`.
    pub(crate) fn counting_into(pending: Arc<PendingWrites>, traffic: Arc<Traffic>) -> Tasks {
        Tasks(Arc::new(TasksInner {
            tracker: TaskTracker::new(),
            stop: CancellationToken::new(),
            pending,
            close_linger_ms: AtomicU64::new(millis(DEFAULT_CLOSE_LINGER)),
            budget: Mutex::new(Budget::new(None)),
            traffic,
        }))
    }

    /// The run's traffic.
    pub(crate) fn traffic(&self) -> &Arc<Traffic> {
        &self.traffic
    }

    /// The run's host memory.
    pub(crate) fn budget(&self) -> Arc<Budget> {
        Arc::clone(&self.budget.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Pays send backlogs from `budget` from now on.
    pub(crate) fn set_budget(&self, budget: Arc<Budget>) {
        *self.budget.lock().unwrap_or_else(PoisonError::into_inner) = budget;
    }

    /// How long a socket closed with bytes queued may go on writing them.
    pub(crate) fn close_linger(&self) -> Duration {
        Duration::from_millis(self.close_linger_ms.load(Ordering::Relaxed))
    }

    pub(crate) fn set_close_linger(&self, linger: Duration) {
        self.close_linger_ms
            .store(millis(linger), Ordering::Relaxed);
    }

    /// Spawns `task` on the current tokio runtime; it ends early if the run
    /// is stopped.
    pub(crate) fn spawn<F>(&self, task: F) -> JoinHandle<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let stop = self.stop.clone();
        // Records the task makes are paid from the trail share of the
        // request that started it (`moat serve`), as its own are.
        let share = crate::audit::current_share();
        self.tracker
            .spawn(crate::audit::in_share(share, async move {
                tokio::select! {
                    biased;
                    () = stop.cancelled() => {}
                    () = task => {}
                }
            }))
    }

    pub(crate) fn pending_writes(&self) -> &Arc<PendingWrites> {
        &self.pending
    }

    /// Waits up to `linger` for the tasks to end by themselves (drains
    /// writing out their last bytes), then stops the rest and waits for them
    /// to be dropped, so every socket they held is closed on return.
    pub(crate) async fn finish(&self, linger: Duration) {
        self.tracker.close();
        if tokio::time::timeout(linger, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::debug!(
                target: "moat::net",
                tasks = self.tracker.len(),
                "linger over: stopping host tasks with bytes still queued"
            );
        }
        self.stop.cancel();
        self.tracker.wait().await;
    }
}

/// How many sockets have bytes queued in the host, waiting for the kernel.
///
/// Such bytes are written by a drain task outside the guest's store, which
/// can only run while the store is not executing guest code. The host
/// watches this gauge to know when a busy guest must be made to yield now
/// and then (see `crate::moat`); while it reads zero, nothing is queued
/// and a computing guest is never interrupted.
#[derive(Debug, Default)]
pub struct PendingWrites {
    state: Mutex<GaugeState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct GaugeState {
    busy: usize,
    closed: bool,
}

impl PendingWrites {
    /// A gauge reading zero.
    pub fn new() -> Arc<PendingWrites> {
        Arc::default()
    }

    /// The number of sockets with bytes queued now.
    pub fn busy(&self) -> usize {
        self.lock().busy
    }

    /// Blocks the calling thread until some socket has bytes queued (true)
    /// or the gauge is closed (false).
    pub(crate) fn wait_busy(&self) -> bool {
        let mut state = self.lock();
        while state.busy == 0 && !state.closed {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        !state.closed
    }

    /// Wakes every [`wait_busy`](Self::wait_busy) for good.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }

    /// Counts one socket as busy until the returned guard is dropped.
    pub(crate) fn enter(self: &Arc<Self>) -> BusyGuard {
        let mut state = self.lock();
        state.busy += 1;
        if state.busy == 1 {
            self.changed.notify_all();
        }
        BusyGuard(Arc::clone(self))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GaugeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One busy socket on a [`PendingWrites`] gauge; dropping it ends that.
pub(crate) struct BusyGuard(Arc<PendingWrites>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.busy = state.busy.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauge_counts_guards_and_wakes_a_waiter() {
        let gauge = PendingWrites::new();
        let waiter = {
            let gauge = Arc::clone(&gauge);
            std::thread::spawn(move || gauge.wait_busy())
        };
        let guard = gauge.enter();
        assert!(waiter.join().unwrap());
        assert_eq!(gauge.busy(), 1);
        drop(guard);
        assert_eq!(gauge.busy(), 0);
        gauge.close();
        assert!(!gauge.wait_busy());
    }

    #[tokio::test]
    async fn finish_stops_tasks_that_do_not_end() {
        let tasks = Tasks::new(PendingWrites::new());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tasks.spawn(async move {
            let _held = tx;
            std::future::pending::<()>().await;
        });
        tasks.finish(Duration::from_millis(1)).await;
        // The task was dropped, and with it the sender it held.
        assert!(rx.await.is_err());
    }
}
