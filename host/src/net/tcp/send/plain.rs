//! Sending on a plaintext socket: straight from the caller's buffer into
//! the kernel while it takes the bytes; when it is full, up to
//! [`SEND_BACKLOG_LIMIT`] bytes are copied into a backlog and a drain task
//! writes them out from a cursor.

use std::io;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use socket2::SockRef;
use tokio::net::TcpStream;

use super::{Core, Phase, State, end_sending, finish};
use crate::net::budget::Charge;
use crate::net::error::NetError;
use crate::net::limits::SEND_BACKLOG_LIMIT;
use crate::net::tasks::BusyGuard;

/// Bytes waiting for the kernel, written out from a cursor (never moved),
/// paid from the run's host memory until drained.
pub(super) struct Backlog {
    bytes: Box<[u8]>,
    sent: usize,
    _charge: Charge,
}

impl Backlog {
    pub(super) fn unsent(&self) -> &[u8] {
        &self.bytes[self.sent..]
    }
}

/// Writes from `buf` into the kernel; if it is full, queues up to
/// [`SEND_BACKLOG_LIMIT`] bytes for the drain and reports them accepted.
/// If the run's host memory cannot pay for them, nothing is accepted: the
/// write waits for the kernel to take bytes itself. An empty `buf` waits
/// for the socket to be writable.
pub(super) fn poll_write(
    cx: &mut Context<'_>,
    core: &Arc<Core>,
    state: &mut State,
    stream: &TcpStream,
    buf: &[u8],
) -> Poll<Result<usize, NetError>> {
    if buf.is_empty() {
        return stream
            .poll_write_ready(cx)
            .map(|r| r.map(|()| 0).map_err(NetError::from));
    }
    match stream.try_write(buf) {
        Ok(n) => Poll::Ready(Ok(n)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            let n = buf.len().min(SEND_BACKLOG_LIMIT);
            let Ok(charge) = core.tasks.budget().charge(n, "a send backlog") else {
                return match stream.poll_write_ready(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(_) => {
                        // Writable again already: try once more.
                        cx.waker().wake_by_ref();
                        Poll::Pending
                    }
                };
            };
            start_drain(core, state, &buf[..n], charge);
            Poll::Ready(Ok(n))
        }
        Err(e) => {
            let e = NetError::from(e);
            tracing::debug!(target: "moat::net", error = %e, "tcp send failed");
            finish(state, Err(e.clone()));
            Poll::Ready(Err(e))
        }
    }
}

/// Queues `bytes` and spawns the drain that writes them out.
fn start_drain(core: &Arc<Core>, state: &mut State, bytes: &[u8], charge: Charge) {
    state.send.backlog = Some(Backlog {
        bytes: bytes.into(),
        sent: 0,
        _charge: charge,
    });
    // Counted busy from now, not from the drain's first poll: a guest that
    // computes right after this write must be made to yield so the drain
    // can run at all.
    let busy = core.tasks.pending_writes().enter();
    state.send.drain = Some(core.tasks.spawn(drain(Arc::clone(core), busy)));
}

/// The drain: writes the backlog out, then ends (sending the FIN if sending
/// ended meanwhile) and wakes the writer.
async fn drain(core: Arc<Core>, _busy: BusyGuard) {
    let super::Io::Plain(stream) = &core.io else {
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

/// Sends the FIN, records the outcome and returns it.
pub(super) fn send_fin(state: &mut State, stream: &TcpStream) -> Result<(), NetError> {
    let end = SockRef::from(stream)
        .shutdown(std::net::Shutdown::Write)
        .map_err(NetError::from);
    tracing::debug!(target: "moat::net", ok = end.is_ok(), "tcp send: FIN");
    finish(state, end.clone());
    end
}
