//! The read side: straight from the kernel into the caller's buffer.

use std::io::{self, Read as _};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, ready};

use tokio::sync::oneshot;

use std::pin::Pin;

use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::TcpStream;

use super::{Core, SideEnd, TcpConn};
use crate::net::error::NetError;
use crate::net::io::{Io, TlsStream, lock};
use crate::net::traffic::{Direction, Transport};

/// The read side's bookkeeping inside the socket.
#[derive(Default)]
pub(super) struct ReceiveState {
    /// A [`Reader`] is checked out.
    open: bool,
    /// A TLS record failed (the error is in `ended`) while rustls still
    /// held plaintext it had authenticated from the records before it: the
    /// read side ends once that plaintext has been read, by whichever
    /// reader. (A flag beside `open`, not a field of its own: every socket
    /// holds this state for as long as it is open.)
    draining: bool,
    /// The read side has ended: `Ok` at the peer's FIN, or the error.
    ended: Option<Result<(), NetError>>,
}

impl ReceiveState {
    /// How the read side ended, once it has (not while draining).
    fn end(&self) -> Option<Result<(), NetError>> {
        if self.draining {
            return None;
        }
        self.ended.clone()
    }
}

/// The read side of a [`TcpConn`], checked out by [`TcpConn::reader`].
///
/// It reads straight into the buffer it is given and holds no buffer of its
/// own. Dropping it returns the read side to the socket (a guard, so this
/// happens on every path: end of stream, the guest dropping its stream, a
/// trap dropping the store), and a later [`TcpConn::reader`] continues
/// where it stopped.
pub struct Reader {
    core: Weak<Core>,
    outcome: Option<oneshot::Sender<Result<(), NetError>>>,
    /// How the read side ended, once it has: kept here too, so that a read
    /// takes no lock.
    ended: Option<Result<(), NetError>>,
    /// The read side is draining what rustls authenticated before a failed
    /// record (`ReceiveState::draining`), kept here too for the same reason.
    draining: bool,
}

impl TcpConn {
    /// Checks out the read side. The [`SideEnd`] resolves to how the read
    /// side ended: `Ok` at the peer's FIN (or when the reader was dropped
    /// first), or the error that ended it.
    ///
    /// After the read side has ended, the reader returned reports that same
    /// end again at once.
    ///
    /// # Errors
    /// [`NetError::InvalidState`] while another [`Reader`] is checked out.
    pub fn reader(&self) -> Result<(Reader, SideEnd), NetError> {
        let core = self.core()?;
        let mut state = core.state();
        if state.receive.open {
            return Err(NetError::InvalidState(
                "a receive stream is already open on this socket".into(),
            ));
        }
        state.receive.open = true;
        let (tx, rx) = oneshot::channel();
        let mut reader = Reader {
            core: Arc::downgrade(core),
            outcome: Some(tx),
            ended: state.receive.end(),
            draining: state.receive.draining,
        };
        if let Some(end) = reader.ended.clone() {
            // Report the same end at once.
            if let Some(tx) = reader.outcome.take() {
                let _ = tx.send(end);
            }
        }
        Ok((reader, SideEnd(rx)))
    }

    /// How the read side ended: `None` while it has not; `Ok` at the peer's
    /// FIN; the error that ended it. (The same end an [`SideEnd`] from
    /// [`reader`](Self::reader) resolves to, for callers that ask once a
    /// reader has ended rather than wait.)
    pub fn receive_outcome(&self) -> Option<Result<(), NetError>> {
        match self.core() {
            Ok(core) => core.state().receive.end(),
            Err(e) => Some(Err(e)),
        }
    }
}

impl Reader {
    /// Reads into `buf`: `Ok(n)` with `n > 0` bytes, `Ok(0)` at end of stream
    /// (the peer's FIN, or the socket was closed), or the error that ended
    /// the read side. An empty `buf` is a readiness check: `Ok(0)` once data
    /// or the end is there, without consuming anything.
    ///
    /// # Cancel safety
    /// Nothing is consumed unless this returns `Ready(Ok(n))`: a `Pending`
    /// read that is abandoned loses no bytes.
    pub fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<Result<usize, NetError>> {
        let Some(core) = self.core.upgrade() else {
            return Poll::Ready(Ok(0));
        };
        let read = self.poll_read_from(cx, &core, buf);
        if let Poll::Ready(Ok(n)) = read {
            core.tasks
                .traffic()
                .bytes_moved(Transport::Tcp, Direction::Received, n);
        }
        read
    }

    /// [`Reader::poll_read`] on the socket's `core`, uncounted.
    fn poll_read_from(
        &mut self,
        cx: &mut Context<'_>,
        core: &Arc<Core>,
        buf: &mut [u8],
    ) -> Poll<Result<usize, NetError>> {
        if let Some(end) = self.ended(core) {
            return Poll::Ready(end);
        }
        let stream = match &core.io {
            Io::Plain(stream) => stream,
            Io::Tls(tls) => return self.poll_read_tls(cx, core, tls, buf),
        };
        if buf.is_empty() {
            return self.poll_ready(cx, core, stream).map(|_| Ok(0));
        }
        loop {
            match stream.try_read(buf) {
                Ok(0) => return Poll::Ready(self.end(core, Ok(())).map(|()| 0)),
                Ok(n) => return Poll::Ready(Ok(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    match ready!(self.poll_ready(cx, core, stream)) {
                        Err(e) => return Poll::Ready(self.end(core, Err(e)).map(|()| 0)),
                        Ok(()) if core.is_closed() => return Poll::Ready(Ok(0)),
                        Ok(()) => {}
                    }
                }
                Err(e) => return Poll::Ready(self.end(core, Err(e.into())).map(|()| 0)),
            }
        }
    }

    /// Ready once the socket is readable or closed.
    fn poll_ready(
        &self,
        cx: &mut Context<'_>,
        core: &Core,
        stream: &TcpStream,
    ) -> Poll<Result<(), NetError>> {
        // Register for the close bell before looking at the flag, so a close
        // in between is seen by one or the other.
        core.reader_waker.register(cx.waker());
        if core.is_closed() {
            return Poll::Ready(Ok(()));
        }
        stream.poll_read_ready(cx).map_err(NetError::from)
    }

    /// The TLS read: rustls decrypts straight into `buf`. A peer that
    /// closes without close_notify ends the stream like a FIN (most HTTP
    /// clients do; the guest's protocol decides whether that is complete).
    fn poll_read_tls(
        &mut self,
        cx: &mut Context<'_>,
        core: &Core,
        tls: &std::sync::Mutex<TlsStream>,
        buf: &mut [u8],
    ) -> Poll<Result<usize, NetError>> {
        core.reader_waker.register(cx.waker());
        if core.is_closed() {
            return Poll::Ready(Ok(0));
        }
        if buf.is_empty() {
            // No way to look without reading: say "ready" and let the read tell.
            return Poll::Ready(Ok(0));
        }
        if self.draining {
            let failed = core.state().receive.ended.clone();
            if let Some(Err(failed)) = failed {
                return Poll::Ready(self.after_failure(core, tls, buf, failed));
            }
        }
        let mut out = ReadBuf::new(buf);
        let polled = Pin::new(&mut *lock(tls)).poll_read(cx, &mut out);
        let filled = out.filled().len();
        // rustls may have written (and taken the socket's write waker).
        core.writer_waker.wake();
        core.drain_waker.wake();
        match ready!(polled) {
            Ok(()) if filled == 0 => Poll::Ready(self.end(core, Ok(())).map(|()| 0)),
            Ok(()) => Poll::Ready(Ok(filled)),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                tracing::debug!(target: "moat::net", "tls peer closed without close_notify");
                Poll::Ready(self.end(core, Ok(())).map(|()| 0))
            }
            Err(e) => Poll::Ready(self.after_failure(core, tls, buf, crate::net::tls::error(e))),
        }
    }

    /// A TLS record failed (`failed`): tokio-rustls says so at once, but
    /// rustls may still hold plaintext it decrypted and authenticated from
    /// the records before it, which the peer did send. That is read first;
    /// the error ends the read side once none is left.
    fn after_failure(
        &mut self,
        core: &Core,
        tls: &std::sync::Mutex<TlsStream>,
        buf: &mut [u8],
        failed: NetError,
    ) -> Result<usize, NetError> {
        let n = {
            let mut stream = lock(tls);
            let read = match &mut *stream {
                tokio_rustls::TlsStream::Client(s) => s.get_mut().1.reader().read(buf),
                tokio_rustls::TlsStream::Server(s) => s.get_mut().1.reader().read(buf),
            };
            read.unwrap_or(0)
        };
        if n == 0 {
            core.state().receive.draining = false;
            self.draining = false;
            return self.end(core, Err(failed)).map(|()| 0);
        }
        tracing::debug!(target: "moat::net", error = %failed, bytes = n, "tls record failed: reading what came before it");
        let mut state = core.state();
        state.receive.ended = Some(Err(failed));
        state.receive.draining = true;
        self.draining = true;
        Ok(n)
    }

    /// `Some` once the read side has ended (or the socket closed).
    fn ended(&self, core: &Core) -> Option<Result<usize, NetError>> {
        if core.is_closed() {
            return Some(Ok(0));
        }
        self.ended.clone().map(|end| end.map(|()| 0))
    }

    /// Records the end of the read side and reports it to the outcome.
    fn end(&mut self, core: &Core, end: Result<(), NetError>) -> Result<(), NetError> {
        match &end {
            Ok(()) => tracing::debug!(target: "moat::net", "tcp receive: end of stream"),
            Err(e) => tracing::debug!(target: "moat::net", error = %e, "tcp receive failed"),
        }
        core.state().receive.ended = Some(end.clone());
        self.ended = Some(end.clone());
        if let Some(tx) = self.outcome.take() {
            let _ = tx.send(end.clone());
        }
        end
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        if let Some(core) = self.core.upgrade() {
            core.state().receive.open = false;
        }
        if let Some(tx) = self.outcome.take() {
            let _ = tx.send(Ok(()));
        }
    }
}
