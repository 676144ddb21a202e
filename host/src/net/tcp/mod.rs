//! A connected TCP socket: its reader, its writer and the core they share.
//!
//! # Why this shape
//!
//! Bytes move straight between the socket and guest memory inside the
//! store: no buffer held by an idle socket, no copy through a channel, no
//! hand-off to another task. But code inside the store runs only while the
//! guest is waiting: bytes queued for a full socket by a guest that then
//! computes would wait for the whole computation, unless a task outside the
//! store writes them.
//!
//! So each direction takes the cheapest form that keeps every guarantee:
//!
//! * **Reading** ([`Reader`]) needs no task and no buffer. A read goes
//!   straight from the kernel into the guest's buffer when the guest asks.
//!   While the guest computes, the kernel's receive buffer and TCP's window
//!   hold the peer back: backpressure without a copy. Nothing is read
//!   ahead, so nothing can be lost: a cancelled read never consumed a byte.
//! * **Writing** ([`Writer`]) goes straight from guest memory into the
//!   kernel while the kernel takes it. When the kernel is full, up to
//!   [`SEND_BACKLOG_LIMIT`](crate::net::limits::SEND_BACKLOG_LIMIT) bytes
//!   are copied into a host buffer and the guest's write completes; a
//!   drain task outside the store, spawned only for this, writes them out,
//!   also while the guest computes. Until the
//!   buffer is empty, further writes wait: the backpressure reaches the
//!   guest, and through it the peer's window.
//!
//! # What an idle socket costs
//!
//! An open socket that is not moving bytes holds no buffer and no task:
//! the `Arc<Core>` below (the tokio stream, one small mutex-guarded state,
//! two waker slots: about 350 bytes), tokio's registration for the file
//! descriptor (one `ScheduledIo`, 128 bytes), and the resource-table slot
//! of the binding layer. Bench `idle_sockets` measures the whole, including
//! wasmtime's stream state.
//!
//! # Upgrading in place
//!
//! Both directions are checked out of the socket ([`TcpConn::reader`],
//! [`TcpConn::writer`]) and come back when dropped, whatever the path: the
//! guest dropping its stream, a trap dropping the store, or the end of the
//! stream. A reader holds no bytes and a writer's bytes are flushed by the
//! drain before the socket is handed on, so a STARTTLS [`Upgrade`] takes
//! the socket with nothing lost.

mod connect;
mod receive;
mod send;
pub(crate) mod upgrade;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::AtomicWaker;
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use super::error::NetError;
use super::io::Io;
use super::limits::SocketSlot;
use super::tasks::Tasks;

pub use connect::ConnectOptions;
pub(crate) use connect::{connect_admitted, connect_resolved, connect_stream};
pub use receive::Reader;
pub use send::Writer;
pub use upgrade::{Upgrade, Upgraded};

/// TCP keep-alive settings; `None` fields keep the system default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Keepalive {
    /// Idle time before the first probe.
    pub idle: Option<Duration>,
    /// Time between probes.
    pub interval: Option<Duration>,
    /// Unanswered probes before the connection is dropped.
    pub retries: Option<u32>,
}

/// A connected TCP socket.
///
/// Dropping it closes the connection: a reader or writer still checked out
/// ends (reads see end of stream, writes fail with [`NetError::Closed`]),
/// bytes already accepted are still written, and then the file descriptor
/// is released.
pub struct TcpConn {
    stage: Stage,
    /// The peer's address as the listener's accept reported it; `None`
    /// for a connection this side made.
    accepted_from: Option<SocketAddr>,
}

/// Where a connection is in its life; each stage holds what it needs and
/// nothing else, so a call that its stage cannot serve has nothing to
/// reach for.
enum Stage {
    /// Reads, writes and options go through the core (plaintext or TLS).
    /// Dropping the connection in this stage closes the socket.
    Open(Arc<Core>),
    /// A STARTTLS upgrade ([`Upgrade`]) holds the socket; calls fail with
    /// [`NetError::InvalidState`] until [`TcpConn::upgraded`] gives the
    /// connection its new transport. Dropping the connection in this stage
    /// leaves the socket to the upgrade, whose end closes it.
    Upgrading,
    /// The connection is gone (its upgrade failed); calls fail with
    /// [`NetError::Closed`].
    Gone,
}

/// What the socket's owner, its reader, its writer and its drain share.
///
/// The reader and writer hold it weakly: when the owning [`TcpConn`] and
/// any drain have let go, the socket closes even if a guest still holds a
/// stream.
pub(crate) struct Core {
    io: Io,
    state: Mutex<State>,
    /// Set once the owning [`TcpConn`] is dropped.
    closed: AtomicBool,
    /// The reader's waker while it waits, woken when the socket closes.
    reader_waker: AtomicWaker,
    /// The writer's waker while it waits for the backlog to drain (or, on
    /// TLS, for the socket).
    writer_waker: AtomicWaker,
    /// The TLS drain's waker. A TLS session is one object whose socket keeps
    /// one write waker: whoever polls it last (reader, writer or drain)
    /// holds it. So each wakes the others when it may have taken it: the
    /// reader after every poll (it is only woken by reads, so this cannot
    /// loop), the writer and the drain when they made progress.
    drain_waker: AtomicWaker,
    tasks: Tasks,
    /// The socket's place in the run's socket count: held as long as the
    /// descriptor, drains included.
    slot: SocketSlot,
}

#[derive(Default)]
struct State {
    receive: receive::ReceiveState,
    send: send::SendState,
}

impl TcpConn {
    pub(crate) fn new(stream: TcpStream, tasks: Tasks, slot: SocketSlot) -> TcpConn {
        TcpConn::with_io(Io::Plain(stream), tasks, slot)
    }

    pub(crate) fn with_io(io: Io, tasks: Tasks, slot: SocketSlot) -> TcpConn {
        TcpConn {
            stage: Stage::Open(Core::new(io, tasks, slot)),
            accepted_from: None,
        }
    }

    /// The socket's core, if the connection is open.
    fn core(&self) -> Result<&Arc<Core>, NetError> {
        match &self.stage {
            Stage::Open(core) => Ok(core),
            Stage::Upgrading => Err(NetError::InvalidState(
                "the socket is being upgraded to TLS".into(),
            )),
            Stage::Gone => Err(NetError::Closed),
        }
    }

    /// The open core, if any.
    fn open(&self) -> Option<&Arc<Core>> {
        match &self.stage {
            Stage::Open(core) => Some(core),
            Stage::Upgrading | Stage::Gone => None,
        }
    }

    /// The local address of the connection.
    ///
    /// # Errors
    /// What the operating system reports.
    pub fn local_addr(&self) -> Result<SocketAddr, NetError> {
        Ok(self.core()?.io.local_addr()?)
    }

    /// The peer's address as the accept that made this connection reported
    /// it (so known even if the peer has reset the connection since);
    /// `None` for a connection made by `connect`.
    pub fn accepted_from(&self) -> Option<SocketAddr> {
        self.accepted_from
    }

    /// Records the peer's address as the accept reported it.
    pub(crate) fn set_accepted_from(&mut self, peer: SocketAddr) {
        self.accepted_from = Some(peer);
    }

    /// The peer's address.
    ///
    /// # Errors
    /// What the operating system reports ([`NetError::ConnectionReset`]
    /// once the connection is gone).
    pub fn peer_addr(&self) -> Result<SocketAddr, NetError> {
        Ok(self.core()?.io.peer_addr()?)
    }

    /// Sets TCP_NODELAY (disables Nagle's algorithm when `true`).
    ///
    /// # Errors
    /// What the operating system reports.
    pub fn set_nodelay(&self, enabled: bool) -> Result<(), NetError> {
        Ok(self.core()?.io.with_tcp(|tcp| tcp.set_nodelay(enabled))?)
    }

    /// Enables keep-alive probing with `config`, or disables it with `None`.
    ///
    /// # Errors
    /// [`NetError::InvalidArgument`] for a zero or out-of-range setting;
    /// what the operating system reports.
    pub fn set_keepalive(&self, config: Option<Keepalive>) -> Result<(), NetError> {
        self.core()?
            .io
            .with_tcp(|tcp| connect::apply_keepalive(tcp, config))
    }

    /// Whether the connection is TLS.
    pub fn is_tls(&self) -> bool {
        self.open()
            .is_some_and(|core| matches!(core.io, Io::Tls(_)))
    }

    /// The application protocol TLS negotiated with ALPN, if any.
    pub fn alpn_protocol(&self) -> Option<Vec<u8>> {
        self.open().and_then(|core| core.io.alpn_protocol())
    }
}

impl Drop for TcpConn {
    fn drop(&mut self) {
        if let Stage::Open(core) = &self.stage {
            core.end_streams();
            send::on_close(core);
            tracing::debug!(target: "moat::net", local = ?core.io.local_addr().ok(), "tcp socket closed");
        }
    }
}

impl Core {
    fn new(io: Io, tasks: Tasks, slot: SocketSlot) -> Arc<Core> {
        Arc::new(Core {
            io,
            state: Mutex::default(),
            closed: AtomicBool::new(false),
            reader_waker: AtomicWaker::new(),
            writer_waker: AtomicWaker::new(),
            drain_waker: AtomicWaker::new(),
            tasks,
            slot,
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Ends the reader and writer: their next poll sees the end.
    fn end_streams(&self) {
        self.closed.store(true, Ordering::Release);
        self.reader_waker.wake();
        self.writer_waker.wake();
    }
}

/// Resolves to how one direction of a socket ended (see
/// [`TcpConn::reader`] and [`TcpConn::writer`]).
pub struct SideEnd(oneshot::Receiver<Result<(), NetError>>);

impl Future for SideEnd {
    type Output = Result<(), NetError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Every sender sends before it is dropped; a lost one can only mean
        // the socket itself went away.
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(NetError::Closed)))
    }
}

#[cfg(test)]
mod tests;
