//! What one request cost the server, for `--metrics`: the CPU its
//! handler's instance took (every poll of its call, on whichever worker
//! thread ran it) and the most linear memory it held.
//!
//! The CPU is read from the thread's CPU clock before and after each poll:
//! two `clock_gettime` calls a poll (the CPU clocks have no vDSO path), a
//! few hundred nanoseconds a poll against a Rust handler's tens of
//! microseconds a request. Only a server with `--metrics` pays it.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use rustix::time::{ClockId, clock_gettime};

/// The CPU time the calling thread has run.
fn thread_cpu() -> Duration {
    let now = clock_gettime(ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(now.tv_sec).unwrap_or(0),
        u32::try_from(now.tv_nsec).unwrap_or(0),
    )
}

/// `inner`, with the CPU time its polls took added up (when `on`).
pub(crate) struct CpuTimed<F> {
    inner: F,
    on: bool,
    spent: Duration,
}

impl<F> CpuTimed<F> {
    pub(crate) fn new(inner: F, on: bool) -> CpuTimed<F> {
        CpuTimed {
            inner,
            on,
            spent: Duration::ZERO,
        }
    }

    /// The CPU time its polls took so far.
    pub(crate) fn spent(&self) -> Duration {
        self.spent
    }
}

impl<F: Future + Unpin> Future for CpuTimed<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if !self.on {
            return Pin::new(&mut self.inner).poll(cx);
        }
        let started = thread_cpu();
        let polled = Pin::new(&mut self.inner).poll(cx);
        let took = thread_cpu().saturating_sub(started);
        self.spent += took;
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_cpu_a_future_spins_is_counted_and_its_waits_are_not() {
        let mut spin = CpuTimed::new(
            Box::pin(async {
                let until = thread_cpu() + Duration::from_millis(20);
                while thread_cpu() < until {
                    std::hint::black_box(0);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                7
            }),
            true,
        );
        assert_eq!((&mut spin).await, 7);
        let spent = spin.spent();
        assert!(
            spent >= Duration::from_millis(20) && spent < Duration::from_millis(45),
            "{spent:?}"
        );
    }
}
