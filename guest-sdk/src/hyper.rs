//! hyper 1's runtime pieces beyond I/O (the `hyper` feature): a timer.
//!
//! The `hyper` feature gives [`TcpStream`](crate::TcpStream) hyper's
//! `rt::Read` and `rt::Write`, which is all hyper's HTTP/1 needs to run.
//! Its timeouts need one thing more, a [`Timer`]: without one, a server's
//! `header_read_timeout` does nothing, and a client that sends half a
//! request header and then waits holds its connection, and the task
//! serving it, for as long as it likes.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// hyper's `rt::Timer` on moat's clock ([`time::sleep`](crate::time::sleep)),
/// so hyper's timeouts work in a guest.
///
/// A hyper HTTP/1 server needs it for `header_read_timeout`: hyper turns
/// that timeout (30 s unless set) off when it has no timer, so a client
/// that never finishes its request header keeps its connection open
/// forever. Give the connection builder this timer, and the timeout works:
///
/// ```text
/// hyper::server::conn::http1::Builder::new()
///     .timer(moat_sdk::hyper::Timer)
///     .header_read_timeout(Duration::from_secs(10))
///     .serve_connection(conn, service)
/// ```
///
/// (`examples/hyper-serve` does this.)
///
/// The timer is cheap enough for one sleep per request, which is what
/// hyper's header-read timeout takes: all of a guest's sleeps share one
/// wait in the host, for the earliest deadline, kept by a task the timer
/// starts when a sleep is first waited for and that ends when none is.
/// Starting and dropping a sleep touches only a table in the guest.
///
/// ```no_run
/// # async fn demo() {
/// use hyper::rt::Timer as _;
/// use std::time::Duration;
/// moat_sdk::hyper::Timer.sleep(Duration::from_millis(10)).await;
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Timer;

impl ::hyper::rt::Timer for Timer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn ::hyper::rt::Sleep>> {
        // A duration past what an Instant can hold is a sleep forever.
        Box::pin(Sleep::new(Instant::now().checked_add(duration)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn ::hyper::rt::Sleep>> {
        Box::pin(Sleep::new(Some(deadline)))
    }

    /// Moves the deadline of a sleep this timer made, without a new
    /// allocation.
    fn reset(&self, sleep: &mut Pin<Box<dyn ::hyper::rt::Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<Sleep>() {
            Some(mine) => mine.get_mut().reset(new_deadline),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

/// The next [`Sleep::key`].
static NEXT_KEY: AtomicU64 = AtomicU64::new(0);

/// The sleeps being waited for, and the task that wakes them.
///
/// Why a table and a task instead of a host wait in each sleep: hyper
/// needs its sleeps `Send` and `Sync`, and a host wait (the SDK's
/// `time::sleep`) is neither, as it is tied to the component task that
/// started it. So a [`Sleep`] holds only its key and deadline (both
/// `Send` and `Sync`), and what is not stays here, in a thread-local. A
/// guest has one thread (`wasm32-wasip2` has no threads to spawn), so this
/// is the table every sleep is in. One wait for all sleeps is also much
/// cheaper than one each: a host wait is a subtask to start and, when
/// hyper drops the sleep because the header came, to cancel.
#[derive(Default)]
struct Timers {
    /// Each sleep waited for and not yet due, by deadline (then key), with
    /// the waker of the task waiting for it. The driver removes a sleep
    /// when it is due, so one that finds itself missing has fired.
    pending: BTreeMap<(Instant, u64), Waker>,
    /// The driver, while it runs.
    driver: Option<Driver>,
}

/// What the sleeps know of the task waking them ([`drive`]).
struct Driver {
    /// When it wakes next: a deadline in `pending`, or one no longer there
    /// (its sleep was dropped; the driver then finds nothing due and waits
    /// for the earliest deadline left).
    until: Instant,
    /// Wakes it to wait for an earlier `until`.
    waker: Option<Waker>,
}

thread_local! {
    static TIMERS: RefCell<Timers> = RefCell::new(Timers::default());
}

/// The sleep [`Timer`] returns, in [`Timers`] once first polled.
#[derive(Debug)]
struct Sleep {
    /// Tells its entry from others with the same deadline.
    key: u64,
    /// When it fires; `None`, never.
    deadline: Option<Instant>,
    /// The deadline its entry in `pending` has, if it has one.
    registered: Option<Instant>,
    /// It fired: later polls return `Ready` at once.
    fired: bool,
}

impl Sleep {
    fn new(deadline: Option<Instant>) -> Sleep {
        Sleep {
            key: NEXT_KEY.fetch_add(1, Ordering::Relaxed),
            deadline,
            registered: None,
            fired: false,
        }
    }

    /// Fires at `deadline` instead (its entry goes; the next poll makes
    /// one for the new deadline).
    fn reset(&mut self, deadline: Instant) {
        self.deregister();
        self.deadline = Some(deadline);
        self.fired = false;
    }

    fn deregister(&mut self) {
        if let Some(at) = self.registered.take() {
            // `try_with`: nothing to remove while the thread's locals are
            // being destroyed.
            let waker = TIMERS
                .try_with(|timers| timers.borrow_mut().pending.remove(&(at, self.key)))
                .ok()
                .flatten();
            drop(waker);
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.fired {
            return Poll::Ready(());
        }
        let Some(deadline) = this.deadline else {
            return Poll::Pending;
        };
        let key = this.key;
        let mut start = false;
        let mut nudge = None;
        let fired = TIMERS.with(|timers| {
            let mut timers = timers.borrow_mut();
            if let Some(at) = this.registered {
                return match timers.pending.get_mut(&(at, key)) {
                    Some(waker) => {
                        if !waker.will_wake(cx.waker()) {
                            waker.clone_from(cx.waker());
                        }
                        false
                    }
                    // The driver took it out: it is due.
                    None => true,
                };
            }
            timers.pending.insert((deadline, key), cx.waker().clone());
            this.registered = Some(deadline);
            match &mut timers.driver {
                None => {
                    timers.driver = Some(Driver {
                        until: deadline,
                        waker: None,
                    });
                    start = true;
                }
                Some(driver) if deadline < driver.until => {
                    driver.until = deadline;
                    nudge = driver.waker.take();
                }
                Some(_) => {}
            }
            false
        });
        if fired {
            this.registered = None;
            this.fired = true;
            return Poll::Ready(());
        }
        // Outside the table's borrow, though neither runs the driver now.
        if start {
            drop(crate::spawn(drive()));
        }
        if let Some(driver) = nudge {
            driver.wake();
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.deregister();
    }
}

impl ::hyper::rt::Sleep for Sleep {}

/// The driver: waits in the host until the earliest deadline (or an
/// earlier one that came meanwhile), wakes the sleeps then due, and goes
/// on while any are left.
async fn drive() {
    loop {
        let Some(until) = TIMERS.with(|timers| timers.borrow().driver.as_ref().map(|d| d.until))
        else {
            return;
        };
        let mut wait = pin!(crate::time::sleep(
            until.saturating_duration_since(Instant::now())
        ));
        let elapsed = poll_fn(|cx| {
            if wait.as_mut().poll(cx).is_ready() {
                return Poll::Ready(true);
            }
            TIMERS.with(|timers| {
                let mut timers = timers.borrow_mut();
                let Some(driver) = timers.driver.as_mut() else {
                    return Poll::Ready(false);
                };
                if driver.until != until {
                    return Poll::Ready(false);
                }
                match &mut driver.waker {
                    Some(waker) if waker.will_wake(cx.waker()) => {}
                    slot => *slot = Some(cx.waker().clone()),
                }
                Poll::Pending
            })
        })
        .await;
        if !elapsed {
            // An earlier deadline came: wait for that one instead.
            continue;
        }
        let now = Instant::now();
        let due = TIMERS.with(|timers| {
            let mut timers = timers.borrow_mut();
            let later = timers.pending.split_off(&(now, u64::MAX));
            let due = std::mem::replace(&mut timers.pending, later);
            match timers.pending.first_key_value() {
                Some((&(next, _), _)) => {
                    if let Some(driver) = timers.driver.as_mut() {
                        driver.until = next;
                        driver.waker = None;
                    }
                }
                None => timers.driver = None,
            }
            due
        });
        for waker in due.into_values() {
            waker.wake();
        }
    }
}
