//! The write side: the writer's checkout, its phases from open to FIN, and
//! the outcome it reports. How bytes reach the socket is the transport's:
//! [`plain`] (straight from the caller's buffer into the kernel, with a
//! bounded backlog) or [`tls`] (through rustls's own bounded buffer). Each
//! has a drain task for the moments the socket is full.

mod plain;
mod tls;

use std::future::Future;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::{Core, SideEnd, State, TcpConn};
use crate::net::error::NetError;
use crate::net::io::Io;
use crate::net::traffic::{Direction, Transport};
use plain::Backlog;

/// The write side's bookkeeping inside the socket.
#[derive(Default)]
pub(super) struct SendState {
    phase: Phase,
    /// Bytes accepted while the kernel was full; `Some` while a drain runs.
    backlog: Option<Backlog>,
    /// The drain task writing `backlog` (or TLS's buffered records) out.
    drain: Option<JoinHandle<()>>,
    /// A TLS drain is flushing rustls's buffered records (the writer does
    /// not wait for it: rustls's own bounded buffer is the backpressure).
    tls_draining: bool,
    /// Resolved with the open writer's outcome.
    outcome: Option<oneshot::Sender<Result<(), NetError>>>,
    /// `shutdown` calls waiting for the FIN.
    waiters: Vec<oneshot::Sender<Result<(), NetError>>>,
}

#[derive(Default)]
enum Phase {
    /// No writer checked out; sending has not ended.
    #[default]
    Idle,
    /// A [`Writer`] is checked out.
    Writing,
    /// Sending is ending: the FIN goes out once the backlog is drained.
    Finishing,
    /// The FIN was sent, or sending failed.
    Finished(Result<(), NetError>),
    /// The socket is being upgraded ([`super::Upgrade`]): the backlog
    /// drains, and no FIN is sent.
    Upgrading,
}

/// The write side of a [`TcpConn`], checked out by [`TcpConn::writer`].
///
/// Dropping it ends the sending direction: bytes already accepted are
/// written, then a FIN is sent (a half-close; reading stays live).
pub struct Writer {
    core: Weak<Core>,
}

impl TcpConn {
    /// Checks out the write side. The [`SideEnd`] resolves to `Ok` once the
    /// writer is dropped, every accepted byte is written and the FIN sent,
    /// or to the first error.
    ///
    /// # Errors
    /// [`NetError::InvalidState`] if a writer is already checked out or
    /// sending has ended.
    pub fn writer(&self) -> Result<(Writer, SideEnd), NetError> {
        let core = self.core()?;
        let mut state = core.state();
        match state.send.phase {
            Phase::Idle => {}
            Phase::Writing => {
                return Err(NetError::InvalidState(
                    "a send stream is already open on this socket".into(),
                ));
            }
            Phase::Finishing | Phase::Finished(_) | Phase::Upgrading => {
                return Err(NetError::InvalidState(
                    "sending has ended on this socket (shutdown, or an earlier send stream ended)"
                        .into(),
                ));
            }
        }
        let (tx, rx) = oneshot::channel();
        state.send.phase = Phase::Writing;
        state.send.outcome = Some(tx);
        Ok((
            Writer {
                core: Arc::downgrade(core),
            },
            SideEnd(rx),
        ))
    }

    /// How sending ended: `None` while it has not; `Ok` once every accepted
    /// byte is written and the FIN sent; the first error otherwise.
    pub fn send_outcome(&self) -> Option<Result<(), NetError>> {
        let core = match self.core() {
            Ok(core) => core,
            Err(e) => return Some(Err(e)),
        };
        match &core.state().send.phase {
            Phase::Finished(end) => Some(end.clone()),
            Phase::Idle | Phase::Writing | Phase::Finishing | Phase::Upgrading => None,
        }
    }

    /// Ends the sending direction: bytes already accepted are written, then
    /// a FIN is sent. A writer still checked out is ended (its next write
    /// fails with [`NetError::Closed`]). Reading stays live. Once sending
    /// has ended, returns how it ended.
    ///
    /// # Cancel safety
    /// Dropping the future does not undo the shutdown; the FIN still goes
    /// out after the queued bytes.
    pub fn shutdown(&self) -> impl Future<Output = Result<(), NetError>> + Send + use<> {
        let waiting = match self.core() {
            Ok(core) => begin_shutdown(core),
            Err(e) => Ok(Err(e)),
        };
        async move {
            match waiting {
                Ok(done) => done,
                Err(rx) => SideEnd(rx).await,
            }
        }
    }
}

/// Starts a shutdown: `Ok(outcome)` if it is already decided, else the
/// receiver that will carry it.
#[allow(clippy::type_complexity)]
fn begin_shutdown(
    core: &Arc<Core>,
) -> Result<Result<(), NetError>, oneshot::Receiver<Result<(), NetError>>> {
    let mut state = core.state();
    match &state.send.phase {
        Phase::Finished(end) => return Ok(end.clone()),
        Phase::Upgrading => return Ok(Err(NetError::Closed)),
        Phase::Finishing => {}
        Phase::Idle | Phase::Writing => {
            state.send.phase = Phase::Finishing;
            // An open writer learns on its next poll that sending ended.
            core.writer_waker.wake();
            if state.send.backlog.is_none()
                && let Some(end) = send_fin(core, &mut state)
            {
                return Ok(end);
            }
        }
    }
    let (tx, rx) = oneshot::channel();
    state.send.waiters.push(tx);
    Err(rx)
}

impl Writer {
    /// Writes from `buf`: `Ok(n)` once `n > 0` bytes are accepted, either
    /// written to the kernel or (when it is full) queued in the host, up to
    /// `SEND_BACKLOG_LIMIT` (64 KiB).
    /// While queued bytes remain, this waits. An empty `buf` is a readiness
    /// check. An error ends the writer; the socket's [`SideEnd`] carries it
    /// too.
    ///
    /// # Cancel safety
    /// A `Pending` write has accepted nothing; abandoning it loses nothing.
    pub fn poll_write(
        &mut self,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<Result<usize, NetError>> {
        let Some(core) = self.core.upgrade() else {
            return Poll::Ready(Err(NetError::Closed));
        };
        if core.is_closed() {
            return Poll::Ready(Err(NetError::Closed));
        }
        let mut state = core.state();
        match &state.send.phase {
            Phase::Writing => {}
            Phase::Finished(Err(e)) => return Poll::Ready(Err(e.clone())),
            _ => return Poll::Ready(Err(NetError::Closed)),
        }
        if state.send.backlog.is_some() {
            // The drain wakes us once the backlog is empty (under the lock,
            // so the wake cannot fall between this check and the register).
            core.writer_waker.register(cx.waker());
            return Poll::Pending;
        }
        if state
            .send
            .drain
            .as_ref()
            .is_some_and(JoinHandle::is_finished)
        {
            // The last drain is over; release its task.
            state.send.drain = None;
        }
        let written = match &core.io {
            Io::Plain(stream) => plain::poll_write(cx, &core, &mut state, stream, buf),
            Io::Tls(session) => tls::poll_write(cx, &core, &mut state, session, buf),
        };
        if let Poll::Ready(Ok(n)) = written {
            core.tasks
                .traffic()
                .bytes_moved(Transport::Tcp, Direction::Sent, n);
        }
        written
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let Some(core) = self.core.upgrade() else {
            return;
        };
        let mut state = core.state();
        if matches!(state.send.phase, Phase::Writing) {
            state.send.phase = Phase::Finishing;
            if state.send.backlog.is_none() {
                end_sending(&core, &mut state);
            }
        }
    }
}

/// Called when the owning [`TcpConn`] is dropped: an open writer ends as if
/// dropped, and a drain still running gets its close linger
/// ([`Limits::close_linger`](crate::net::Limits::close_linger)) to finish.
/// Past it the queued bytes are dropped and the connection is reset, not
/// closed with a FIN: the peer must not take a cut stream for a whole one.
pub(super) fn on_close(core: &Arc<Core>) {
    let mut state = core.state();
    if matches!(state.send.phase, Phase::Writing) {
        state.send.phase = Phase::Finishing;
        if state.send.backlog.is_none() {
            end_sending(core, &mut state);
        }
    }
    if let (Some(drain), Ok(runtime)) = (
        state.send.drain.as_ref().map(JoinHandle::abort_handle),
        tokio::runtime::Handle::try_current(),
    ) {
        let linger = core.tasks.close_linger();
        runtime.spawn(async move {
            tokio::time::sleep(linger).await;
            if !drain.is_finished() {
                tracing::debug!(target: "moat::net", ?linger, "closed socket's peer stopped reading for its whole linger");
                // The drain resets the connection as it goes (`ResetIfCut`).
                drain.abort();
            }
        });
    }
}

/// Sends the FIN (on TLS, close_notify first), records the outcome and
/// returns it; or, if the socket cannot take it now, leaves it to a drain
/// and returns `None` (the outcome comes when the drain is done).
fn send_fin(core: &Arc<Core>, state: &mut State) -> Option<Result<(), NetError>> {
    match &core.io {
        Io::Plain(stream) => Some(plain::send_fin(state, stream)),
        Io::Tls(session) => tls::send_fin(core, state, session),
    }
}

/// [`send_fin`] where the outcome goes only to those waiting for it.
fn end_sending(core: &Arc<Core>, state: &mut State) {
    // The outcome is recorded in `state` and sent to every waiter.
    let _recorded = send_fin(core, state);
}

/// Records how sending ended and tells everyone waiting for it.
fn finish(state: &mut State, end: Result<(), NetError>) {
    let send = &mut state.send;
    send.phase = Phase::Finished(end.clone());
    if let Some(tx) = send.outcome.take() {
        let _ = tx.send(end.clone());
    }
    for tx in send.waiters.drain(..) {
        let _ = tx.send(end.clone());
    }
}

/// Stops sending for an upgrade: no FIN (an open writer ends, the backlog
/// still drains). Returns the drain to wait for.
///
/// # Errors
/// [`NetError::InvalidState`] if sending has already ended; the error that
/// ended it, if it failed.
pub(super) fn stop_for_upgrade(state: &mut State) -> Result<Option<JoinHandle<()>>, NetError> {
    match &state.send.phase {
        Phase::Idle | Phase::Writing => {}
        Phase::Finished(Err(e)) => return Err(e.clone()),
        Phase::Finishing | Phase::Finished(Ok(())) | Phase::Upgrading => {
            return Err(NetError::InvalidState(
                "sending has ended on this socket: nothing to take over".into(),
            ));
        }
    }
    state.send.phase = Phase::Upgrading;
    // Everything the writer handed over is delivered (or queued for the
    // drain): its stream ended cleanly.
    if let Some(tx) = state.send.outcome.take() {
        let _ = tx.send(Ok(()));
    }
    Ok(state.send.drain.take())
}

/// After the drain: how the backlog's writing ended.
pub(super) fn upgrade_outcome(state: &State) -> Result<(), NetError> {
    match &state.send.phase {
        Phase::Finished(Err(e)) => Err(e.clone()),
        _ => Ok(()),
    }
}
