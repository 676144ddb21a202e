//! Being reachable: a listener and its accept task.
//!
//! The accept loop is seed 004's: one task owns the listening socket and the
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
use super::resolve::{buffer_size, resolve};
use super::tasks::Tasks;
use super::tcp::TcpConn;
use super::tcp::io::Io;
use super::tls::{ServerTls, handshake_server};
use crate::policy::{Capability, Host, Policy};

/// Connections accepted but not yet taken by the guest. Eight, as in seed
/// 004: enough to absorb a burst while the guest's accept loop turns round;
/// beyond it the accept task stops accepting and clients wait in the
/// kernel's backlog, so the guest's own loop is the backpressure.
pub const ACCEPT_QUEUE: usize = 8;

/// First delay after a failed accept: short enough that a transient error
/// (a connection aborted before accept) costs nothing noticeable.
pub const ACCEPT_RETRY_MIN: Duration = Duration::from_millis(5);

/// Longest delay between retries: when descriptors run out (EMFILE), retry
/// once a second rather than spin, and resume within a second of relief.
pub const ACCEPT_RETRY_MAX: Duration = Duration::from_secs(1);

/// The kernel backlog when the guest does not choose one: 1024, the usual
/// server default (the kernel caps it at net.core.somaxconn).
pub const DEFAULT_BACKLOG: u32 = 1024;

/// TLS handshakes a listener runs at once. Each costs a socket and a few
/// KiB of session state; past this many, the listener stops accepting until
/// one finishes (or times out), so a flood of slow clients cannot grow it.
pub const MAX_HANDSHAKES: usize = 256;

/// Options for [`crate::net::Net::listen`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListenOptions {
    /// The kernel's queue of connections not yet accepted
    /// ([`DEFAULT_BACKLOG`] when `None`).
    pub backlog: Option<u32>,
    /// SO_SNDBUF for accepted connections, in bytes.
    pub send_buffer_size: Option<u64>,
    /// SO_RCVBUF for accepted connections, in bytes.
    pub receive_buffer_size: Option<u64>,
}

/// A listening TCP socket. Dropping it closes it (see [`close`](Self::close)).
pub struct TcpListener {
    local: SocketAddr,
    queue: AcceptQueue,
    task: Option<JoinHandle<()>>,
}

/// The receiving end of a listener's accept channel; cheap to clone, so an
/// accept can wait without borrowing the listener.
#[derive(Clone)]
pub struct AcceptQueue {
    inner: Arc<QueueInner>,
}

struct QueueInner {
    receiver: Mutex<mpsc::Receiver<Io>>,
    closed: AtomicBool,
    tasks: Tasks,
}

/// Checks the policy, then binds, listens and starts the accept task. See
/// [`crate::net::Net::listen`].
pub(crate) async fn listen(
    policy: &Policy,
    tasks: &Tasks,
    host: &str,
    port: u16,
    options: &ListenOptions,
    tls: Option<ServerTls>,
) -> Result<TcpListener, NetError> {
    let target = Host::parse(host)?;
    if let Err(denied) = policy.check(Capability::Listen, &target, port) {
        tracing::debug!(target: "moat::net", %denied, "denied");
        return Err(denied.into());
    }
    let backlog = options.backlog.unwrap_or(DEFAULT_BACKLOG);
    if backlog == 0 {
        return Err(NetError::InvalidArgument(
            "backlog must be at least 1".into(),
        ));
    }
    let send_buffer = options.send_buffer_size.map(buffer_size).transpose()?;
    let receive_buffer = options.receive_buffer_size.map(buffer_size).transpose()?;

    let mut last = None;
    for addr in resolve(&target, port).await? {
        match bind(addr, backlog, send_buffer, receive_buffer) {
            Ok(listener) => return Ok(TcpListener::start(listener, tasks, tls)),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| NetError::NameNotResolved(format!("{target}: no addresses"))))
}

fn bind(
    addr: SocketAddr,
    backlog: u32,
    send_buffer: Option<u32>,
    receive_buffer: Option<u32>,
) -> Result<tokio::net::TcpListener, NetError> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
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

impl TcpListener {
    fn start(
        listener: tokio::net::TcpListener,
        tasks: &Tasks,
        tls: Option<ServerTls>,
    ) -> TcpListener {
        let local = listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        tracing::debug!(target: "moat::net", %local, tls = tls.is_some(), "listening");
        let (sender, receiver) = mpsc::channel(ACCEPT_QUEUE);
        let task = match tls {
            None => tasks.spawn(accept_loop(listener, sender)),
            Some(tls) => tasks.spawn(accept_loop_tls(listener, sender, tls)),
        };
        TcpListener {
            local,
            queue: AcceptQueue {
                inner: Arc::new(QueueInner {
                    receiver: Mutex::new(receiver),
                    closed: AtomicBool::new(false),
                    tasks: tasks.clone(),
                }),
            },
            task: Some(task),
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
    /// The next accepted connection, or `None` once the listener is closed.
    ///
    /// # Cancel safety
    /// Cancel-safe: a connection is taken from the queue only when this
    /// returns it, so an abandoned accept loses none.
    pub async fn accept(&self) -> Option<TcpConn> {
        if self.inner.closed.load(Ordering::Acquire) {
            return None;
        }
        let mut receiver = self.inner.receiver.lock().await;
        let io = receiver.recv().await?;
        if self.inner.closed.load(Ordering::Acquire) {
            return None;
        }
        Some(TcpConn::with_io(io, self.inner.tasks.clone()))
    }
}

/// The accept task: waits for room in the queue, accepts, queues, forever.
async fn accept_loop(listener: tokio::net::TcpListener, sender: mpsc::Sender<Io>) {
    let mut delay = ACCEPT_RETRY_MIN;
    loop {
        // Room first: with the queue full, connections wait in the kernel.
        let Ok(permit) = sender.reserve().await else {
            return;
        };
        match listener.accept().await {
            Ok((stream, peer)) => {
                tracing::debug!(target: "moat::net", %peer, "accepted");
                delay = ACCEPT_RETRY_MIN;
                permit.send(Io::Plain(stream));
            }
            Err(error) => {
                tracing::warn!(
                    target: "moat::net",
                    %error, retry_in = ?delay,
                    "accept failed; retrying"
                );
                drop(permit);
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
    sender: mpsc::Sender<Io>,
    tls: ServerTls,
) {
    let mut handshakes = FuturesUnordered::new();
    let mut delay = ACCEPT_RETRY_MIN;
    let mut backoff: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
    loop {
        tokio::select! {
            accepted = listener.accept(), if backoff.is_none() && handshakes.len() < MAX_HANDSHAKES => {
                match accepted {
                    Ok((stream, peer)) => {
                        delay = ACCEPT_RETRY_MIN;
                        let tls = tls.clone();
                        handshakes.push(async move { (peer, handshake_server(&tls, stream, Vec::new()).await) });
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
            Some((peer, done)) = handshakes.next(), if !handshakes.is_empty() => match done {
                Ok(session) => {
                    tracing::debug!(target: "moat::net", %peer, "accepted (tls)");
                    if sender.send(Io::tls(session)).await.is_err() {
                        return;
                    }
                }
                // Any peer can fail a handshake on purpose: debug, never warn.
                Err(reason) => tracing::debug!(target: "moat::net", %peer, %reason, "tls handshake failed"),
            },
        }
    }
}
