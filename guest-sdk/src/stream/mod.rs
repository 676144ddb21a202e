//! TCP connections.

mod halves;

use std::net::SocketAddr;
use std::time::Duration;

use crate::addr::ToHostPort;
use crate::bindings::moat::net::tcp::{self, TcpSocket};
use crate::error::Error;
use crate::io::incoming::Incoming;
pub use halves::{OwnedReadHalf, OwnedWriteHalf, ReuniteError};

/// Options for [`TcpStream::connect_with`]; the default is the system's.
///
/// ```no_run
/// use std::time::Duration;
/// use moat_sdk::{ConnectOptions, TcpStream};
///
/// # async fn demo() -> Result<(), moat_sdk::Error> {
/// let options = ConnectOptions {
///     timeout: Some(Duration::from_secs(3)),
///     nodelay: true,
///     ..ConnectOptions::default()
/// };
/// let stream = TcpStream::connect_with(("127.0.0.1", 7000), &options).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectOptions {
    /// Give up after this long with [`Error::TimedOut`] (name resolution and
    /// every address tried included).
    pub timeout: Option<Duration>,
    /// Disable Nagle's algorithm from the start.
    pub nodelay: bool,
    /// Enable keep-alive probing from the start.
    pub keepalive: Option<Keepalive>,
    /// Kernel send buffer, in bytes.
    pub send_buffer_size: Option<u64>,
    /// Kernel receive buffer, in bytes.
    pub receive_buffer_size: Option<u64>,
}

/// TCP keep-alive probing; `None` fields keep the system default.
///
/// ```no_run
/// use std::time::Duration;
/// use moat_sdk::Keepalive;
///
/// # fn demo(stream: &moat_sdk::TcpStream) -> Result<(), moat_sdk::Error> {
/// stream.set_keepalive(Some(Keepalive {
///     idle: Some(Duration::from_secs(60)),
///     interval: Some(Duration::from_secs(10)),
///     retries: Some(5),
/// }))?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Keepalive {
    /// Idle time before the first probe.
    pub idle: Option<Duration>,
    /// Time between probes.
    pub interval: Option<Duration>,
    /// Unanswered probes before the connection is dropped.
    pub retries: Option<u32>,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl From<&ConnectOptions> for tcp::ConnectOptions {
    fn from(options: &ConnectOptions) -> tcp::ConnectOptions {
        tcp::ConnectOptions {
            timeout: options.timeout.map(nanos),
            nodelay: options.nodelay,
            keepalive: options.keepalive.map(Into::into),
            send_buffer_size: options.send_buffer_size,
            receive_buffer_size: options.receive_buffer_size,
        }
    }
}

impl From<Keepalive> for tcp::Keepalive {
    fn from(k: Keepalive) -> tcp::Keepalive {
        tcp::Keepalive {
            idle: k.idle.map(nanos),
            interval: k.interval.map(nanos),
            retries: k.retries,
        }
    }
}

// A server holds a stream per connection, idle ones included: keep it small
// (guest memory; bench `idle_sockets` measures it with the host's).
#[cfg(target_arch = "wasm32")]
const _: () = assert!(std::mem::size_of::<TcpStream>() <= 36);

/// A TCP connection.
///
/// Reading and writing go straight between the socket and the guest's
/// buffers. Dropping the stream closes the connection; bytes already
/// written are still delivered.
///
/// ```no_run
/// use moat_sdk::TcpStream;
///
/// # async fn demo() -> Result<(), moat_sdk::Error> {
/// let mut stream = TcpStream::connect("example.com:80").await?;
/// stream.write_all(b"HEAD / HTTP/1.0\r\nHost: example.com\r\n\r\n").await?;
/// stream.shutdown().await?; // our FIN; reading stays live
/// let reply = stream.read_to_end().await?;
/// println!("{}", String::from_utf8_lossy(&reply));
/// # Ok(())
/// # }
/// ```
pub struct TcpStream {
    pub(crate) read: OwnedReadHalf,
    pub(crate) write: OwnedWriteHalf,
}

impl std::fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpStream")
            .field("local", &self.local_addr().ok())
            .field("peer", &self.peer_addr().ok())
            .finish_non_exhaustive()
    }
}

impl TcpStream {
    /// Connects to `addr`: `"example.com:443"`, `("example.com", 443)`, a
    /// `SocketAddr` (see [`ToHostPort`]). The host part is a name or an IP
    /// literal; the host's policy judges it exactly as written.
    ///
    /// # Errors
    /// [`Error::Denied`] if the run was not granted connect to it, and the
    /// network's errors ([`Error::ConnectionRefused`], ...), which name the
    /// address.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the attempt (the host stops it too).
    pub async fn connect(addr: impl ToHostPort) -> Result<TcpStream, Error> {
        TcpStream::connect_with(addr, &ConnectOptions::default()).await
    }

    /// [`connect`](Self::connect) with options.
    ///
    /// # Errors
    /// As [`connect`](Self::connect), plus [`Error::TimedOut`] and
    /// [`Error::InvalidArgument`] for a bad option.
    pub async fn connect_with(
        addr: impl ToHostPort,
        options: &ConnectOptions,
    ) -> Result<TcpStream, Error> {
        let (host, port) = addr.to_host_port()?;
        match tcp::connect(host.clone(), port, options.into()).await {
            Ok(socket) => Ok(TcpStream::from_socket(socket)),
            Err(code) => Err(code.into()),
        }
    }

    pub(crate) fn socket(&self) -> &TcpSocket {
        &self.read.socket
    }

    /// What an upgrade replays to the handshake: the bytes the caller read
    /// past its protocol's go-ahead, then any this stream took back from a
    /// cancelled read (they came after).
    pub(crate) fn replay(&mut self, already_read: &[u8]) -> Vec<u8> {
        let mut replay = already_read.to_vec();
        replay.extend(self.read.incoming.take_unread());
        replay
    }

    /// Before an upgrade: no poll-driven read or write may still be in
    /// the host's hands.
    pub(crate) async fn settle(&mut self) -> Result<(), Error> {
        self.read.settle().await;
        self.write.settle().await
    }

    /// After an upgrade the host has ended both streams: the next read or
    /// write opens new ones, on the new transport.
    pub(crate) fn after_upgrade(&mut self) {
        self.read.incoming = Incoming::new();
        self.write.outgoing.reset();
    }

    pub(crate) fn from_socket(socket: TcpSocket) -> TcpStream {
        let (read, write) = halves::halves(socket);
        TcpStream { read, write }
    }

    /// Reads into `buf`: the number of bytes read, 0 at end of stream (the
    /// peer's FIN).
    ///
    /// # Errors
    /// [`Error::ConnectionReset`] and the like.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read dropped before it completes loses no bytes.
    pub async fn read(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        self.read.read(buf).await
    }

    /// Appends to `buf`, into its spare capacity (reserving 64 KiB if there
    /// is none): the host writes straight into it, with no copy. Returns
    /// the number of bytes, 0 at end of stream.
    ///
    /// # Errors
    /// As [`read`](Self::read).
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`read`](Self::read); `buf` keeps what it held.
    pub async fn read_buf(&mut self, buf: &mut Vec<u8>) -> Result<usize, Error> {
        self.read.read_buf(buf).await
    }

    /// Reads exactly `buf.len()` bytes.
    ///
    /// # Errors
    /// [`Error::Closed`] if the stream ends first.
    ///
    /// # Cancel safety
    /// Not cancel-safe: bytes read before the drop are gone.
    pub async fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), Error> {
        self.read.read_exact(buf).await
    }

    /// Reads until the peer's FIN.
    ///
    /// # Errors
    /// As [`read`](Self::read).
    pub async fn read_to_end(&mut self) -> Result<Vec<u8>, Error> {
        self.read.read_to_end().await
    }

    /// Reads until `delimiter` (a line's `b"\r\n"`, a request head's
    /// `b"\r\n\r\n"`), appending to `buf` the bytes up to and including
    /// it; returns how many it appended. What the stream holds after the
    /// delimiter stays there, for the next read. At end of stream it
    /// returns what came before it (0 if nothing did), as
    /// tokio's `read_until` does.
    ///
    /// ```no_run
    /// # async fn demo(stream: &mut moat_sdk::TcpStream) -> Result<(), moat_sdk::Error> {
    /// let mut line = Vec::new();
    /// while stream.read_until(b"\r\n", &mut line, 1024).await? > 0 {
    ///     println!("{}", String::from_utf8_lossy(&line).trim_end());
    ///     line.clear();
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `limit` bytes come without the
    /// delimiter (they are in `buf`, appended); as [`read`](Self::read).
    ///
    /// # Cancel safety
    /// Not cancel-safe: bytes appended before the drop stay in `buf`, and
    /// are not read again.
    pub async fn read_until(
        &mut self,
        delimiter: &[u8],
        buf: &mut Vec<u8>,
        limit: usize,
    ) -> Result<usize, Error> {
        self.read.read_until(delimiter, buf, limit).await
    }

    /// Writes all of `data`. It returns once the host has the bytes: in the
    /// kernel, or (when the socket is full) in a bounded host buffer that
    /// keeps draining while the guest computes.
    ///
    /// # Errors
    /// [`Error::ConnectionReset`] and the like; [`Error::Closed`] after
    /// [`shutdown`](Self::shutdown).
    ///
    /// # Cancel safety
    /// Not cancel-safe: a dropped write may have sent part of `data`.
    pub async fn write_all(&mut self, data: &[u8]) -> Result<(), Error> {
        self.write.write_all(data).await
    }

    /// Writes all of `data` without copying it, and gives the emptied buffer
    /// back (capacity kept) for the next write.
    ///
    /// # Errors
    /// As [`write_all`](Self::write_all).
    pub async fn write_all_owned(&mut self, data: Vec<u8>) -> Result<Vec<u8>, Error> {
        self.write.write_all_owned(data).await
    }

    /// Half-closes: waits until every byte written is delivered to the
    /// kernel, then sends a FIN. Reading stays live.
    ///
    /// # Errors
    /// The error that kept the bytes from being delivered.
    pub async fn shutdown(&mut self) -> Result<(), Error> {
        self.write.shutdown().await
    }

    /// The local address.
    ///
    /// # Errors
    /// If the host cannot tell.
    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        self.read.local_addr()
    }

    /// The peer's address.
    ///
    /// # Errors
    /// If the host cannot tell (after a reset, say).
    pub fn peer_addr(&self) -> Result<SocketAddr, Error> {
        self.read.peer_addr()
    }

    /// Disables (`true`) or enables Nagle's algorithm.
    ///
    /// # Errors
    /// If the host's OS refuses.
    pub fn set_nodelay(&self, nodelay: bool) -> Result<(), Error> {
        Ok(self.read.socket.set_nodelay(nodelay)?)
    }

    /// Enables keep-alive probing, or disables it with `None`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero time.
    pub fn set_keepalive(&self, keepalive: Option<Keepalive>) -> Result<(), Error> {
        Ok(self.read.socket.set_keepalive(keepalive.map(Into::into))?)
    }

    /// Splits the stream into halves that can be used from different tasks;
    /// [`OwnedReadHalf::reunite`] joins them again.
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        (self.read, self.write)
    }
}
