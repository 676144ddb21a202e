//! Sending on a TLS socket: rustls encrypts from the caller's buffer into
//! its own bounded buffer and writes records out as the socket takes them;
//! records still buffered when a write returns are flushed by a drain task,
//! so they go out while the guest computes.

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use tokio::io::AsyncWrite;

use super::{Core, Phase, State, finish};
use crate::net::error::NetError;
use crate::net::io::{Io, TlsStream, lock};
use crate::net::tasks::BusyGuard;
use crate::net::tls;

/// Encrypts from `buf` and writes what the socket takes; what it does not
/// take is left to the drain. Waits while rustls's buffer is full.
pub(super) fn poll_write(
    cx: &mut Context<'_>,
    core: &Arc<Core>,
    state: &mut State,
    tls: &Mutex<TlsStream>,
    buf: &[u8],
) -> Poll<Result<usize, NetError>> {
    let mut session = lock(tls);
    let written = match Pin::new(&mut *session).poll_write(cx, buf) {
        Poll::Pending => {
            core.writer_waker.register(cx.waker());
            return Poll::Pending;
        }
        Poll::Ready(Ok(n)) => Ok(n),
        Poll::Ready(Err(e)) => Err(e),
    };
    core.drain_waker.wake();
    let flushed = match written {
        Ok(_) if session.get_ref().1.wants_write() => {
            match Pin::new(&mut *session).poll_flush(cx) {
                Poll::Ready(done) => done,
                Poll::Pending => {
                    drop(session);
                    start_drain(core, state);
                    Ok(())
                }
            }
        }
        Ok(_) => Ok(()),
        Err(_) => Ok(()),
    };
    match written.and_then(|n| flushed.map(|()| n)) {
        Ok(n) => Poll::Ready(Ok(n)),
        Err(e) => {
            let e = tls::error(e);
            tracing::debug!(target: "moat::net", error = %e, "tls send failed");
            finish(state, Err(e.clone()));
            Poll::Ready(Err(e))
        }
    }
}

/// Spawns the drain that flushes TLS records, unless one is running.
fn start_drain(core: &Arc<Core>, state: &mut State) {
    if state.send.tls_draining {
        return;
    }
    state.send.tls_draining = true;
    let busy = core.tasks.pending_writes().enter();
    state.send.drain = Some(core.tasks.spawn(drain(Arc::clone(core), busy)));
}

/// The TLS drain: flushes what rustls holds; if sending ended meanwhile,
/// sends close_notify and the FIN too.
async fn drain(core: Arc<Core>, _busy: BusyGuard) {
    let Io::Tls(tls) = &core.io else {
        return;
    };
    loop {
        let flushed = poll_fn(|cx| {
            core.drain_waker.register(cx.waker());
            let polled = Pin::new(&mut *lock(tls)).poll_flush(cx);
            if polled.is_ready() {
                core.writer_waker.wake();
            }
            polled
        })
        .await;
        let finishing = {
            let mut state = core.state();
            if let Err(e) = flushed {
                state.send.tls_draining = false;
                let e = tls::error(e);
                tracing::debug!(target: "moat::net", error = %e, "tls send failed while draining");
                finish(&mut state, Err(e));
                core.writer_waker.wake();
                return;
            }
            if !matches!(state.send.phase, Phase::Finishing) {
                state.send.tls_draining = false;
                return;
            }
            true
        };
        if finishing {
            let closed = poll_fn(|cx| {
                core.drain_waker.register(cx.waker());
                Pin::new(&mut *lock(tls)).poll_shutdown(cx)
            })
            .await;
            let mut state = core.state();
            state.send.tls_draining = false;
            let end = closed.map_err(tls::error);
            tracing::debug!(target: "moat::net", ok = end.is_ok(), "tls send: close_notify and FIN");
            finish(&mut state, end);
            core.writer_waker.wake();
            return;
        }
    }
}

/// Sends close_notify and the FIN, records the outcome and returns it; if
/// the socket cannot take them now, leaves them to the drain and returns
/// `None` (the outcome comes when it is done).
///
/// close_notify is one small record, and the socket almost always takes
/// it at once, so the common close needs no drain (no task, and no busy
/// gauge waking the epoch ticker).
pub(super) fn send_fin(
    core: &Arc<Core>,
    state: &mut State,
    tls: &Mutex<TlsStream>,
) -> Option<Result<(), NetError>> {
    if state.send.tls_draining {
        return None;
    }
    // Polling with a no-op waker is sound: on Pending the drain polls again
    // with its own.
    let mut cx = Context::from_waker(Waker::noop());
    match Pin::new(&mut *lock(tls)).poll_shutdown(&mut cx) {
        Poll::Ready(closed) => {
            let end = closed.map_err(tls::error);
            tracing::debug!(target: "moat::net", ok = end.is_ok(), "tls send: close_notify and FIN");
            finish(state, end.clone());
            Some(end)
        }
        Poll::Pending => {
            start_drain(core, state);
            None
        }
    }
}
