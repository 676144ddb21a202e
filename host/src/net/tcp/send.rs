//! The write side: straight from the caller's buffer into the kernel, with a
//! bounded backlog and a drain task for the moments the kernel is full.

use std::future::Future;
use std::io;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use socket2::SockRef;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use std::future::poll_fn;
use std::pin::Pin;

use tokio::io::AsyncWrite;

use super::io::{Io, TlsStream, lock};
use super::{Core, Outcome, State, TcpConn};
use crate::net::error::NetError;
use crate::net::tasks::BusyGuard;
use crate::net::tls;

/// Most bytes a socket holds in the host when the kernel will not take a
/// write. One SDK read chunk (64 KiB), so a guest echoing what it reads
/// completes each write even into a full socket; a guest that writes more
/// waits for this much to drain, which bounds a stalled socket's cost at
/// 64 KiB (10,000 stalled sockets: 640 MiB) and nothing for an idle one:
/// the buffer is allocated when needed and freed once drained.
pub const SEND_BACKLOG_LIMIT: usize = 64 * 1024;

/// How long a closed socket's drain may still wait for a peer that does not
/// read before the queued bytes are dropped and the connection reset. As
/// long as Linux's own FIN timeout for an orphaned socket (60 s) would be
/// too generous here: 30 s bounds what a peer that never reads can hold.
/// Until then the socket still counts against the run's socket cap.
pub const CLOSE_LINGER: Duration = Duration::from_secs(30);

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
    /// The socket is being taken back ([`TcpConn::reclaim`]): the backlog
    /// drains, and no FIN is sent.
    Reclaimed,
}

/// Bytes waiting for the kernel, written out from a cursor (never moved).
struct Backlog {
    bytes: Box<[u8]>,
    sent: usize,
}

impl Backlog {
    fn unsent(&self) -> &[u8] {
        &self.bytes[self.sent..]
    }
}

/// The write side of a [`TcpConn`], checked out by [`TcpConn::writer`].
///
/// Dropping it ends the sending direction: bytes already accepted are
/// written, then a FIN is sent (a half-close; reading stays live).
pub struct Writer {
    core: Weak<Core>,
}

impl TcpConn {
    /// Checks out the write side. The [`Outcome`] resolves to `Ok` once the
    /// writer is dropped, every accepted byte is written and the FIN sent,
    /// or to the first error.
    ///
    /// # Errors
    /// [`NetError::InvalidState`] if a writer is already checked out or
    /// sending has ended.
    pub fn writer(&self) -> Result<(Writer, Outcome), NetError> {
        let core = self.core()?;
        let mut state = core.state();
        match state.send.phase {
            Phase::Idle => {}
            Phase::Writing => {
                return Err(NetError::InvalidState(
                    "a send stream is already open on this socket".into(),
                ));
            }
            Phase::Finishing | Phase::Finished(_) | Phase::Reclaimed => {
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
            Outcome(rx),
        ))
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
                Err(rx) => Outcome(rx).await,
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
        Phase::Reclaimed => return Ok(Err(NetError::Closed)),
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
    /// [`SEND_BACKLOG_LIMIT`]. While queued bytes remain, this waits. An
    /// empty `buf` is a readiness check. An error ends the writer; the
    /// socket's [`Outcome`] carries it too.
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
        let stream = match &core.io {
            Io::Plain(stream) => stream,
            Io::Tls(tls) => return poll_write_tls(cx, &core, &mut state, tls, buf),
        };
        if buf.is_empty() {
            drop(state);
            return stream
                .poll_write_ready(cx)
                .map(|r| r.map(|()| 0).map_err(NetError::from));
        }
        match stream.try_write(buf) {
            Ok(n) => Poll::Ready(Ok(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let n = buf.len().min(SEND_BACKLOG_LIMIT);
                start_drain(&core, &mut state, &buf[..n]);
                Poll::Ready(Ok(n))
            }
            Err(e) => {
                let e = NetError::from(e);
                tracing::debug!(target: "moat::net", error = %e, "tcp send failed");
                finish(&mut state, Err(e.clone()));
                Poll::Ready(Err(e))
            }
        }
    }
}

/// The TLS write: rustls encrypts from `buf` into its own bounded buffer and
/// writes records out as the socket takes them. Records still buffered when
/// the write returns are flushed by a drain outside the store, so they go
/// out while the guest computes.
fn poll_write_tls(
    cx: &mut Context<'_>,
    core: &Arc<Core>,
    state: &mut State,
    tls: &std::sync::Mutex<TlsStream>,
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
                    start_tls_drain(core, state);
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
/// dropped, and a drain still running gets [`CLOSE_LINGER`] to finish.
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

/// Queues `bytes` and spawns the drain that writes them out.
fn start_drain(core: &Arc<Core>, state: &mut State, bytes: &[u8]) {
    state.send.backlog = Some(Backlog {
        bytes: bytes.into(),
        sent: 0,
    });
    // Counted busy from now, not from the drain's first poll: a guest that
    // computes right after this write must be made to yield so the drain
    // can run at all.
    let busy = core.tasks.pending_writes().enter();
    state.send.drain = Some(core.tasks.spawn(drain(Arc::clone(core), busy)));
}

/// Spawns the drain that flushes TLS records, unless one is running.
fn start_tls_drain(core: &Arc<Core>, state: &mut State) {
    if state.send.tls_draining {
        return;
    }
    state.send.tls_draining = true;
    let busy = core.tasks.pending_writes().enter();
    state.send.drain = Some(core.tasks.spawn(drain_tls(Arc::clone(core), busy)));
}

/// The TLS drain: flushes what rustls holds; if sending ended meanwhile,
/// sends close_notify and the FIN too.
async fn drain_tls(core: Arc<Core>, _busy: BusyGuard) {
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

/// The drain: writes the backlog out, then ends (sending the FIN if sending
/// ended meanwhile) and wakes the writer.
async fn drain(core: Arc<Core>, _busy: BusyGuard) {
    let Io::Plain(stream) = &core.io else {
        return;
    };
    let _cut = ResetIfCut(&core);
    loop {
        let ready = stream.writable().await;
        let mut state = core.state();
        let Some(backlog) = state.send.backlog.as_mut() else {
            break;
        };
        let written = match ready {
            Ok(()) => stream.try_write(backlog.unsent()),
            Err(e) => Err(e),
        };
        match written {
            Ok(n) => {
                backlog.sent += n;
                if backlog.unsent().is_empty() {
                    state.send.backlog = None;
                    if matches!(state.send.phase, Phase::Finishing) {
                        end_sending(&core, &mut state);
                    }
                    core.writer_waker.wake();
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => {
                let e = NetError::from(e);
                tracing::debug!(target: "moat::net", error = %e, "tcp send failed while draining");
                state.send.backlog = None;
                finish(&mut state, Err(e));
                core.writer_waker.wake();
                break;
            }
        }
    }
}

/// Resets the connection if its drain is dropped with bytes still queued
/// (the socket's close linger ran out, or its run ended): a FIN after a cut
/// would tell the peer the stream was whole. SO_LINGER 0 makes the close
/// that follows (the drain held the last reference) send a reset.
struct ResetIfCut<'a>(&'a Core);

impl Drop for ResetIfCut<'_> {
    fn drop(&mut self) {
        let unsent = self
            .0
            .state()
            .send
            .backlog
            .as_ref()
            .map_or(0, |b| b.unsent().len());
        if unsent > 0 {
            let _ = self
                .0
                .io
                .with_tcp(|tcp| SockRef::from(tcp).set_linger(Some(Duration::ZERO)));
            tracing::debug!(target: "moat::net", unsent, "queued bytes dropped: resetting the connection");
        }
    }
}

/// Sends the FIN on a plaintext socket, records the outcome and returns
/// it; on TLS, starts the drain that sends close_notify and the FIN, and
/// returns `None` (the outcome comes when it is done).
fn send_fin(core: &Arc<Core>, state: &mut State) -> Option<Result<(), NetError>> {
    match &core.io {
        Io::Plain(stream) => {
            let end = SockRef::from(stream)
                .shutdown(std::net::Shutdown::Write)
                .map_err(NetError::from);
            tracing::debug!(target: "moat::net", ok = end.is_ok(), "tcp send: FIN");
            finish(state, end.clone());
            Some(end)
        }
        Io::Tls(tls) => {
            // close_notify is one small record, and the socket almost always
            // takes it at once: finish here. Only a socket that is full
            // needs the drain (a task, and the busy gauge that wakes the
            // epoch ticker, whose ticks make the guest yield): with every
            // close going through it, a TLS connection cost 353 µs of server
            // CPU against 289 µs now (`tls_connect`, native tokio-rustls:
            // 221). Polling with a no-op waker is sound: on Pending the
            // drain polls again with its own.
            if state.send.tls_draining {
                return None;
            }
            let mut cx = Context::from_waker(Waker::noop());
            match Pin::new(&mut *lock(tls)).poll_shutdown(&mut cx) {
                Poll::Ready(closed) => {
                    let end = closed.map_err(tls::error);
                    tracing::debug!(target: "moat::net", ok = end.is_ok(), "tls send: close_notify and FIN");
                    finish(state, end.clone());
                    Some(end)
                }
                Poll::Pending => {
                    start_tls_drain(core, state);
                    None
                }
            }
        }
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

/// Starts taking the socket back: sending stops without a FIN (an open
/// writer ends, the backlog still drains). Returns the drain to wait for.
///
/// # Errors
/// [`NetError::InvalidState`] if sending has already ended; the error that
/// ended it, if it failed.
pub(super) fn begin_reclaim(state: &mut State) -> Result<Option<JoinHandle<()>>, NetError> {
    match &state.send.phase {
        Phase::Idle | Phase::Writing => {}
        Phase::Finished(Err(e)) => return Err(e.clone()),
        Phase::Finishing | Phase::Finished(Ok(())) | Phase::Reclaimed => {
            return Err(NetError::InvalidState(
                "sending has ended on this socket: nothing to take over".into(),
            ));
        }
    }
    state.send.phase = Phase::Reclaimed;
    // Everything the writer handed over is delivered (or queued for the
    // drain): its stream ended cleanly.
    if let Some(tx) = state.send.outcome.take() {
        let _ = tx.send(Ok(()));
    }
    Ok(state.send.drain.take())
}

/// After the drain: how the backlog's writing ended.
pub(super) fn reclaimed_outcome(state: &State) -> Result<(), NetError> {
    match &state.send.phase {
        Phase::Finished(Err(e)) => Err(e.clone()),
        _ => Ok(()),
    }
}
