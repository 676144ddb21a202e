//! Timers: sleeping, and bounding how long something may take.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use crate::bindings::wasi::clocks::monotonic_clock;

/// Waits for `duration` (other tasks run meanwhile).
pub async fn sleep(duration: Duration) {
    let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
    monotonic_clock::wait_for(nanos).await;
}

/// `future` did not finish in time (from [`timeout`]).
///
/// ```no_run
/// # async fn demo() {
/// use std::time::Duration;
/// use moat_sdk::time::{Elapsed, sleep, timeout};
/// assert_eq!(timeout(Duration::from_millis(1), sleep(Duration::from_secs(1))).await, Err(Elapsed));
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl std::fmt::Display for Elapsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("deadline elapsed")
    }
}

impl std::error::Error for Elapsed {}

/// Runs `future` for at most `limit`; on time out it is dropped.
///
/// Socket reads and accepts are cancel-safe, so a timed-out read loses
/// nothing:
///
/// ```no_run
/// # async fn demo(stream: &mut moat_sdk::TcpStream) {
/// use std::time::Duration;
/// let mut buf = [0; 512];
/// match moat_sdk::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await {
///     Ok(Ok(n)) => println!("{n} bytes"),
///     Ok(Err(e)) => eprintln!("read failed: {e}"),
///     Err(_) => eprintln!("no data for 5 s"),
/// }
/// # }
/// ```
pub async fn timeout<F: Future>(limit: Duration, future: F) -> Result<F::Output, Elapsed> {
    let mut future = pin!(future);
    let mut timer = pin!(sleep(limit));
    poll_fn(|cx| {
        if let Poll::Ready(out) = future.as_mut().poll(cx) {
            return Poll::Ready(Ok(out));
        }
        timer.as_mut().poll(cx).map(|()| Err(Elapsed))
    })
    .await
}

/// Time since an arbitrary start, from the host's monotonic clock.
pub fn now() -> Duration {
    Duration::from_nanos(monotonic_clock::now())
}
