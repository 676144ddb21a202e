//! Being reachable: a listener and its accept task.
//!
//! One task runs the accept loop: it owns the listening socket and the
//! only sender of a bounded accept channel. That is what makes closing work:
//! aborting the task drops the sender, so an accept already parked on the
//! channel resolves to `None` instead of waiting forever (dropping the
//! receiver would not reach it: a parked accept has it checked out).
//!
//! An error from the operating system's accept is never fatal. ECONNABORTED,
//! EMFILE, ENFILE and EINTR are ordinary on a busy port and say nothing about
//! the listening socket, so every error is retried after a delay that doubles
//! from [`ACCEPT_RETRY_MIN`] to [`ACCEPT_RETRY_MAX`] and resets on the next
//! accepted connection.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::net::TcpSocket;
use tokio::sync::{Mutex, mpsc};
use tokio::task::JoinHandle;

use super::error::NetError;
use super::io::Io;
use super::limits::{ACCEPT_QUEUE, ConnectionCaps, MAX_HANDSHAKES, SocketSlot};
use super::options::buffer_size;
use super::own_listeners::OwnListener;
use super::run::{Admitted, Run};
use super::tasks::Tasks;
use super::tcp::TcpConn;
use super::tls::{ServerTls, handshake_server};
use super::traffic::Opened;

/// First delay after a failed accept: short enough that a transient error
/// (a connection aborted before accept) costs nothing noticeable.
pub(crate) const ACCEPT_RETRY_MIN: Duration = Duration::from_millis(5);

/// Longest delay between retries: when descriptors run out (EMFILE), retry
/// once a second rather than spin, and resume within a second of relief.
pub(crate) const ACCEPT_RETRY_MAX: Duration = Duration::from_secs(1);

/// The kernel backlog when the guest does not choose one: 1024, the usual
/// server default (the kernel caps it at net.core.somaxconn).
pub(crate) const DEFAULT_BACKLOG: u32 = 1024;

/// Options for [`crate::net::Net::listen`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListenOptions {
    /// The kernel's queue of connections not yet accepted
    /// (`DEFAULT_BACKLOG`, 1024, when `None`).
    pub backlog: Option<u32>,
    /// SO_SNDBUF for accepted connections, in bytes.
    pub send_buffer_size: Option<u64>,
    /// SO_RCVBUF for accepted connections, in bytes.
    pub receive_buffer_size: Option<u64>,
    /// Most connections from this listener open at once; past it the
    /// listener stops accepting until one closes (clients wait in the
    /// kernel's backlog). `None`: the run's default
    /// ([`crate::net::Limits::max_connections`]).
    pub max_connections: Option<u32>,
    /// Most connections open at once from one peer address; one more is
    /// accepted and reset at once. `None`: the run's default
    /// ([`crate::net::Limits::max_connections_per_peer`]).
    pub max_connections_per_peer: Option<u32>,
}

/// A listening TCP socket. Dropping it closes it (see [`close`](Self::close)).
pub struct TcpListener {
    local: SocketAddr,
    queue: AcceptQueue,
    task: Option<JoinHandle<()>>,
    /// Its place among the run's own listeners (a loopback listener's),
    /// given up before the socket closes.
    own: Option<OwnListener>,
}

/// The receiving end of a listener's accept channel; cheap to clone, so an
/// accept can wait without borrowing the listener.
#[derive(Clone)]
pub struct AcceptQueue {
    inner: Arc<QueueInner>,
}

/// An accepted connection, its place in the run's socket count, and the
/// peer's address as the accept reported it.
type Accepted = (Io, SocketSlot, SocketAddr);

struct QueueInner {
    receiver: Mutex<mpsc::Receiver<Accepted>>,
    closed: AtomicBool,
    tasks: Tasks,
    run: Arc<Run>,
}

/// Checks the policy, then binds, listens and starts the accept task. See
/// [`crate::net::Net::listen`].
pub(crate) async fn listen(
    run: &Arc<Run>,
    tasks: &Tasks,
    admitted: &Admitted,
    options: &ListenOptions,
    tls: Option<ServerTls>,
) -> Result<TcpListener, NetError> {
    for (name, cap) in [
        ("max-connections", options.max_connections),
        ("max-connections-per-peer", options.max_connections_per_peer),
    ] {
        if cap == Some(0) {
            return Err(NetError::InvalidArgument(format!(
                "{name} must be at least 1"
            )));
        }
    }
    let caps = ConnectionCaps::new(
        options.max_connections.or(run.limits.max_connections),
        options
            .max_connections_per_peer
            .or(run.limits.max_connections_per_peer),
    );
    let backlog = options.backlog.unwrap_or(DEFAULT_BACKLOG);
    if backlog == 0 {
        return Err(NetError::InvalidArgument(
            "backlog must be at least 1".into(),
        ));
    }
    let send_buffer = options.send_buffer_size.map(buffer_size).transpose()?;
    let receive_buffer = options.receive_buffer_size.map(buffer_size).transpose()?;

    let slot = run.slot_for(admitted)?;
    let mut last = None;
    let resolved = run.addresses(admitted).await?;
    for &addr in &resolved.addrs {
        let dual_stack = run.dual_stack_allowed(addr);
        match bind(addr, dual_stack, backlog, send_buffer, receive_buffer) {
            Ok(listener) => {
                run.allowed(admitted, Some(&resolved), listener.local_addr().ok())?;
                let accepting = Accepting {
                    run: Arc::clone(run),
                    caps,
                };
                let own = listener.local_addr().ok().and_then(|local| {
                    run.own_listeners
                        .register(local, Arc::clone(&admitted.rule))
                });
                return Ok(TcpListener::start(
                    listener, tasks, tls, accepting, slot, own,
                ));
            }
            Err(e) => last = Some(e),
        }
    }
    let target = &admitted.host;
    let failed =
        last.unwrap_or_else(|| NetError::NameNotResolved(format!("{target}: no addresses")));
    run.failed(admitted, Some(&resolved), &failed);
    Err(failed)
}

fn bind(
    addr: SocketAddr,
    dual_stack: bool,
    backlog: u32,
    send_buffer: Option<u32>,
    receive_buffer: Option<u32>,
) -> Result<tokio::net::TcpListener, NetError> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    if addr.is_ipv6() {
        socket2::SockRef::from(&socket).set_only_v6(!dual_stack)?;
    }
    // As std and tokio do on Unix: a restarted server can bind while old
    // connections sit in TIME_WAIT.
    socket.set_reuseaddr(true)?;
    if let Some(size) = send_buffer {
        socket.set_send_buffer_size(size)?;
    }
    if let Some(size) = receive_buffer {
        socket.set_recv_buffer_size(size)?;
    }
    socket.bind(addr)?;
    Ok(socket.listen(backlog)?)
}

/// What an accept loop needs to admit a connection: the run's socket
/// count, and the listener's caps.
struct Accepting {
    run: Arc<Run>,
    caps: ConnectionCaps,
}

impl Accepting {
    /// A slot for the next connection: waits while the run holds its
    /// maximum of sockets or the listener its maximum of connections.
    async fn slot(&self) -> SocketSlot {
        let mut slot = self.run.slots.take().await;
        self.caps.reserve(&mut slot).await;
        slot
    }

    /// Counts `stream` against its peer's share, or resets it if the peer
    /// has its share open already.
    fn admit(
        &self,
        slot: &mut SocketSlot,
        stream: &tokio::net::TcpStream,
        peer: SocketAddr,
    ) -> bool {
        if self.caps.admit(slot, peer.ip()) {
            return true;
        }
        tracing::debug!(target: "moat::net", %peer, "peer has its share of connections open: resetting");
        // A reset, not a FIN: the client learns at once it was refused.
        let _ = socket2::SockRef::from(stream).set_linger(Some(Duration::ZERO));
        false
    }
}

impl TcpListener {
    fn start(
        listener: tokio::net::TcpListener,
        tasks: &Tasks,
        tls: Option<ServerTls>,
        accepting: Accepting,
        slot: SocketSlot,
        own: Option<OwnListener>,
    ) -> TcpListener {
        let local = listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        tracing::debug!(target: "moat::net", %local, tls = tls.is_some(), "listening");
        let run = Arc::clone(&accepting.run);
        let (sender, receiver) = mpsc::channel(ACCEPT_QUEUE);
        let task = match tls {
            None => tasks.spawn(accept_loop(listener, sender, accepting, slot)),
            Some(tls) => tasks.spawn(accept_loop_tls(listener, sender, tls, accepting, slot)),
        };
        TcpListener {
            local,
            queue: AcceptQueue {
                inner: Arc::new(QueueInner {
                    receiver: Mutex::new(receiver),
                    closed: AtomicBool::new(false),
                    tasks: tasks.clone(),
                    run,
                }),
            },
            task: Some(task),
            own,
        }
    }

    /// The bound address (with the port the system picked for port 0).
    ///
    /// # Errors
    /// [`NetError::Closed`] after [`close`](Self::close).
    pub fn local_addr(&self) -> Result<SocketAddr, NetError> {
        match self.task {
            Some(_) => Ok(self.local),
            None => Err(NetError::Closed),
        }
    }

    /// A handle to accept connections with.
    pub fn queue(&self) -> AcceptQueue {
        self.queue.clone()
    }

    /// Starts closing: accepts waiting now or later get `None`, queued
    /// connections are dropped. Await the returned handle (if any) to know
    /// the port is free; it is `None` if the listener was already closed.
    pub fn begin_close(&mut self) -> Option<JoinHandle<()>> {
        // No longer the program's own before the socket can close.
        self.own = None;
        let task = self.task.take()?;
        task.abort();
        self.queue.inner.closed.store(true, Ordering::Release);
        // A parked accept holds the lock, and then the queue is empty.
        if let Ok(mut receiver) = self.queue.inner.receiver.try_lock() {
            receiver.close();
            while receiver.try_recv().is_ok() {}
        }
        tracing::debug!(target: "moat::net", local = %self.local, "listener closed");
        Some(task)
    }

    /// Closes the listener and waits until the port is released.
    pub async fn close(&mut self) {
        if let Some(task) = self.begin_close() {
            // The task was aborted: its end (and the socket's) is all we wait for.
            let _ = task.await;
        }
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        self.begin_close();
    }
}

impl AcceptQueue {
    /// Counts one accept as waiting, for the run's limit on waiting calls;
    /// the guest's accepts hold one while they wait.
    ///
    /// # Errors
    /// [`NetError::LimitReached`] when the run has its maximum waiting.
    pub(crate) fn enter_waiting(&self) -> Result<tokio::sync::OwnedSemaphorePermit, NetError> {
        self.inner.run.waiting.enter("accept")
    }

    /// The next accepted connection, or `None` once the listener is closed.
    ///
    /// # Cancel safety
    /// Cancel-safe: a connection is taken from the queue only when this
    /// returns it, so an abandoned accept loses none.
    pub async fn accept(&self) -> Option<TcpConn> {
        self.accept_from().await.map(|(conn, _)| conn)
    }

    /// [`accept`](Self::accept), with the peer's address as the operating
    /// system's accept reported it (also in [`TcpConn::accepted_from`]).
    ///
    /// # Cancel safety
    /// As [`accept`](Self::accept).
    pub async fn accept_from(&self) -> Option<(TcpConn, SocketAddr)> {
        let mut receiver = self.inner.receiver.lock().await;
        let (io, slot, peer) = receiver.recv().await?;
        if self.inner.closed.load(Ordering::Acquire) {
            return None;
        }
        self.inner.tasks.traffic().connection(Opened::Accepted);
        let mut conn = TcpConn::with_io(io, self.inner.tasks.clone(), slot);
        conn.set_accepted_from(peer);
        Some((conn, peer))
    }
}

/// The accept task: waits for room in the queue and a socket slot,
/// accepts, queues, forever. It owns the listener's own slot.
async fn accept_loop(
    listener: tokio::net::TcpListener,
    sender: mpsc::Sender<Accepted>,
    accepting: Accepting,
    _own_slot: SocketSlot,
) {
    let mut delay = ACCEPT_RETRY_MIN;
    loop {
        // Room first: with the queue full, or the run at its socket cap,
        // connections wait in the kernel.
        let Ok(permit) = sender.reserve().await else {
            return;
        };
        let mut slot = accepting.slot().await;
        match listener.accept().await {
            Ok((stream, peer)) => {
                delay = ACCEPT_RETRY_MIN;
                if accepting.admit(&mut slot, &stream, peer) {
                    tracing::debug!(target: "moat::net", %peer, "accepted");
                    permit.send((Io::Plain(stream), slot, peer));
                }
            }
            Err(error) => {
                tracing::warn!(
                    target: "moat::net",
                    %error, retry_in = ?delay,
                    "accept failed; retrying"
                );
                drop((permit, slot));
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(ACCEPT_RETRY_MAX);
            }
        }
    }
}

/// The accept task of a TLS listener: handshakes run here, side by side
/// (a slow one never holds up the next accept), and only finished sessions
/// reach the queue. They belong to this task, so closing the listener (which
/// aborts it) ends them too: none keeps the queue alive past a close.
async fn accept_loop_tls(
    listener: tokio::net::TcpListener,
    sender: mpsc::Sender<Accepted>,
    tls: ServerTls,
    accepting: Accepting,
    _own_slot: SocketSlot,
) {
    let mut handshakes = FuturesUnordered::new();
    let mut delay = ACCEPT_RETRY_MIN;
    let mut backoff: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
    // The slot for the next connection, taken before it is accepted.
    let mut next_slot: Option<SocketSlot> = None;
    loop {
        tokio::select! {
            slot = accepting.slot(), if next_slot.is_none() && backoff.is_none() && handshakes.len() < MAX_HANDSHAKES => {
                next_slot = Some(slot);
            }
            accepted = listener.accept(), if next_slot.is_some() && backoff.is_none() && handshakes.len() < MAX_HANDSHAKES => {
                match accepted {
                    Ok((stream, peer)) => {
                        delay = ACCEPT_RETRY_MIN;
                        let Some(mut slot) = next_slot.take() else { continue };
                        if accepting.admit(&mut slot, &stream, peer) {
                            let tls = tls.clone();
                            handshakes.push(async move { (peer, slot, handshake_server(&tls, stream, Vec::new()).await) });
                        }
                    }
                    Err(error) => {
                        tracing::warn!(target: "moat::net", %error, retry_in = ?delay, "accept failed; retrying");
                        backoff = Some(Box::pin(tokio::time::sleep(delay)));
                        delay = (delay * 2).min(ACCEPT_RETRY_MAX);
                    }
                }
            }
            () = async { if let Some(sleep) = backoff.as_mut() { sleep.await } }, if backoff.is_some() => {
                backoff = None;
            }
            Some((peer, slot, done)) = handshakes.next(), if !handshakes.is_empty() => match done {
                Ok(session) => {
                    tracing::debug!(target: "moat::net", %peer, "accepted (tls)");
                    if sender.send((Io::tls(session), slot, peer)).await.is_err() {
                        return;
                    }
                }
                // Any peer can fail a handshake on purpose: debug, never warn.
                Err(reason) => tracing::debug!(target: "moat::net", %peer, %reason, "tls handshake failed"),
            },
        }
    }
}
