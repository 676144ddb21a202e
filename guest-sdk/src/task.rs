//! Tasks: running futures side by side in one guest, and taking turns.
//!
//! A guest is one thread, and its tasks take turns on it. A task gives the
//! others their turn when it awaits something that is not ready, when it
//! calls [`yield_now`], and when it has used its budget: after
//! [`BUDGET`] socket, stdin or stdout operations that completed without
//! waiting (a reader whose socket always has data, say), the next one
//! yields first. So a task reading a flood cannot keep a task writing to
//! another socket from running.
//!
//! For coordinating tasks, the `futures` crate's tools work on this
//! executor (they need no runtime): `futures::channel::{mpsc, oneshot}`
//! to pass values, `futures::select!`/`futures::future::select` to wait
//! for the first of several, `futures::lock::Mutex` to share state across
//! awaits. The `chat` example in this crate's tests uses them.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Operations that complete without waiting that a task may do in one turn
/// before it yields to the others. tokio uses 128 for the same purpose; a
/// turn of 128 reads of 64 KiB moves 8 MiB, long enough to keep the cost of
/// yielding (one pass through the executor) out of the throughput, short
/// enough that a waiting writer runs within a few milliseconds.
pub const BUDGET: u32 = 128;

thread_local! {
    /// What the task being polled has left of its budget.
    static LEFT: Cell<u32> = const { Cell::new(BUDGET) };
}

/// Polls a task's future with a fresh budget for this turn.
pub(crate) fn poll_with_budget<F: Future + ?Sized>(
    task: Pin<&mut F>,
    cx: &mut Context<'_>,
) -> Poll<F::Output> {
    let saved = LEFT.with(|left| left.replace(BUDGET));
    let out = task.poll(cx);
    LEFT.with(|left| left.set(saved));
    out
}

/// Runs `main`'s future as the first task, budgeted as the others are.
pub(crate) async fn run_budgeted<F: Future>(main: F) -> F::Output {
    let mut main = Box::pin(main);
    std::future::poll_fn(|cx| poll_with_budget(main.as_mut(), cx)).await
}

/// Spends one unit of the current task's budget: `Ready` while there is
/// some; when it is spent, wakes the task and returns `Pending` once, so the
/// others run first. The budget is refilled there too, so a future polled
/// outside a [`spawn`]ed task still makes progress.
pub(crate) fn poll_budget(cx: &mut Context<'_>) -> Poll<()> {
    let left = LEFT.with(Cell::get);
    if left > 0 {
        LEFT.with(|l| l.set(left - 1));
        Poll::Ready(())
    } else {
        LEFT.with(|l| l.set(BUDGET));
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// [`poll_budget`] for the async methods: spending a unit is a plain
/// decrement, and only a spent budget awaits (once).
pub(crate) async fn consume_budget() {
    let left = LEFT.with(Cell::get);
    if left > 0 {
        LEFT.with(|l| l.set(left - 1));
    } else {
        std::future::poll_fn(poll_budget).await;
    }
}

/// Lets the other tasks run, then continues.
///
/// ```no_run
/// # async fn demo(work: Vec<u64>) {
/// for (i, item) in work.iter().enumerate() {
///     // ... compute on item ...
///     if i % 1000 == 0 {
///         moat_sdk::task::yield_now().await; // the others get a turn
///     }
/// }
/// # }
/// ```
pub async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await;
}

/// Runs `task` beside the guest's other tasks. Await the handle for its
/// result, [`abort`](JoinHandle::abort) it, or drop the handle to let it
/// run on its own.
///
/// Tasks need no `Send`. When `main` returns the program ends, and with it
/// every task still running, as a process's exit does.
///
/// ```no_run
/// # async fn demo() {
/// let answer = moat_sdk::spawn(async { 6 * 7 });
/// assert_eq!(answer.await.unwrap(), 42);
/// # }
/// ```
pub fn spawn<T: 'static>(task: impl Future<Output = T> + 'static) -> JoinHandle<T> {
    let shared = Rc::new(Shared {
        state: RefCell::new(State::Running),
        join_waker: RefCell::new(None),
        task_waker: RefCell::new(None),
        aborted: Cell::new(false),
    });
    let mine = Rc::clone(&shared);
    let mut task = Box::pin(task);
    wit_bindgen::spawn_local(std::future::poll_fn(move |cx| {
        if mine.aborted.get() {
            // Dropping the future here (not at the handle's `abort`) keeps
            // its destructors out of whatever task called `abort`.
            mine.finish(State::Aborted);
            return Poll::Ready(());
        }
        match poll_with_budget(task.as_mut(), cx) {
            Poll::Ready(value) => {
                mine.finish(State::Done(value));
                Poll::Ready(())
            }
            Poll::Pending => {
                let mut waker = mine.task_waker.borrow_mut();
                if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }));
    JoinHandle(shared)
}

/// A [`spawn`]ed task: await it for the task's output, or
/// [`abort`](Self::abort) it.
///
/// ```no_run
/// # async fn demo() {
/// use std::time::Duration;
/// let ticker = moat_sdk::spawn(async {
///     loop {
///         moat_sdk::time::sleep(Duration::from_secs(1)).await;
///         println!("tick");
///     }
/// });
/// moat_sdk::time::sleep(Duration::from_secs(3)).await;
/// ticker.abort();
/// assert!(ticker.await.unwrap_err().is_cancelled());
/// # }
/// ```
pub struct JoinHandle<T>(Rc<Shared<T>>);

struct Shared<T> {
    state: RefCell<State<T>>,
    /// Who awaits the handle.
    join_waker: RefCell<Option<Waker>>,
    /// The task itself, to wake it when it is aborted.
    task_waker: RefCell<Option<Waker>>,
    aborted: Cell<bool>,
}

enum State<T> {
    Running,
    Done(T),
    Aborted,
    /// The output was taken by the handle.
    Taken,
}

impl<T> Shared<T> {
    fn finish(&self, state: State<T>) {
        *self.state.borrow_mut() = state;
        self.task_waker.borrow_mut().take();
        let waker = self.join_waker.borrow_mut().take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> JoinHandle<T> {
    /// Stops the task at its next turn: its future is dropped (closing its
    /// sockets) without running further, and awaiting the handle gives
    /// [`JoinError`]. A task that already finished keeps its output.
    pub fn abort(&self) {
        if matches!(*self.0.state.borrow(), State::Running) {
            self.0.aborted.set(true);
            let waker = self.0.task_waker.borrow_mut().take();
            if let Some(waker) = waker {
                waker.wake();
            }
        }
    }

    /// Whether the task has ended (finished or aborted).
    pub fn is_finished(&self) -> bool {
        !matches!(*self.0.state.borrow(), State::Running)
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T, JoinError>> {
        let mut state = self.0.state.borrow_mut();
        match std::mem::replace(&mut *state, State::Taken) {
            State::Done(value) => Poll::Ready(Ok(value)),
            State::Aborted | State::Taken => Poll::Ready(Err(JoinError(()))),
            State::Running => {
                *state = State::Running;
                *self.0.join_waker.borrow_mut() = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// A task ended without an output: it was [aborted](JoinHandle::abort)
/// (or its handle was awaited again after it gave its output).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinError(());

impl JoinError {
    /// Whether the task was aborted; always true today (a guest's panic
    /// ends the whole program, so no task ends by panicking alone).
    pub fn is_cancelled(&self) -> bool {
        true
    }
}

impl std::fmt::Display for JoinError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("task was aborted")
    }
}

impl std::error::Error for JoinError {}

impl From<JoinError> for crate::Error {
    fn from(e: JoinError) -> crate::Error {
        crate::Error::Other(e.to_string())
    }
}
