//! TCP connections.

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use crate::addr::ToSocketAddr;
use crate::bindings::moat::net::tcp::{self, TcpSocket};
use crate::bindings::moat::net::types::ErrorCode;
use crate::bindings::wit_stream;
use crate::error::Error;
use crate::io::incoming::Incoming;
use crate::io::outgoing::{Outgoing, WriteError};

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
/// let stream = TcpStream::connect_with("127.0.0.1", 7000, &options).await?;
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
/// let mut stream = TcpStream::connect("example.com", 80).await?;
/// stream.write_all(b"HEAD / HTTP/1.0\r\nHost: example.com\r\n\r\n").await?;
/// stream.shutdown().await?; // our FIN; reading stays live
/// let reply = stream.read_to_end().await?;
/// println!("{}", String::from_utf8_lossy(&reply));
/// # Ok(())
/// # }
/// ```
pub struct TcpStream {
    read: OwnedReadHalf,
    write: OwnedWriteHalf,
}

/// The reading half of a [`TcpStream`], from [`TcpStream::into_split`].
///
/// ```no_run
/// # async fn demo(stream: moat_sdk::TcpStream) -> Result<(), moat_sdk::Error> {
/// let (mut reader, mut writer) = stream.into_split();
/// // Read in one task while another writes.
/// let printing = moat_sdk::spawn(async move {
///     let mut buf = [0u8; 1024];
///     while let Ok(n @ 1..) = reader.read(&mut buf).await {
///         println!("{}", String::from_utf8_lossy(&buf[..n]));
///     }
/// });
/// writer.write_all(b"hello").await?;
/// writer.shutdown().await?;
/// printing.await;
/// # Ok(())
/// # }
/// ```
pub struct OwnedReadHalf {
    socket: Rc<TcpSocket>,
    incoming: Incoming<ErrorCode>,
}

/// The writing half of a [`TcpStream`], from [`TcpStream::into_split`].
/// Dropping it sends a FIN (a half-close) after the bytes written.
///
/// ```no_run
/// # async fn demo(stream: moat_sdk::TcpStream) -> Result<(), moat_sdk::Error> {
/// let (_reader, mut writer) = stream.into_split();
/// writer.write_all(b"request").await?;
/// drop(writer); // FIN after "request"; the reader stays usable
/// # Ok(())
/// # }
/// ```
pub struct OwnedWriteHalf {
    socket: Rc<TcpSocket>,
    outgoing: Outgoing<ErrorCode>,
}

impl TcpStream {
    /// Connects to `host`:`port`. `host` is a name or an IP literal; the
    /// host's policy judges it exactly as written.
    ///
    /// # Errors
    /// [`Error::Denied`] if the run was not granted connect to it, and the
    /// network's errors ([`Error::ConnectionRefused`], ...).
    ///
    /// # Cancel safety
    /// Dropping the future abandons the attempt (the host stops it too).
    pub async fn connect(host: &str, port: u16) -> Result<TcpStream, Error> {
        TcpStream::connect_with(host, port, &ConnectOptions::default()).await
    }

    /// [`connect`](Self::connect) with options.
    ///
    /// # Errors
    /// As [`connect`](Self::connect), plus [`Error::TimedOut`] and
    /// [`Error::InvalidArgument`] for a bad option.
    pub async fn connect_with(
        host: &str,
        port: u16,
        options: &ConnectOptions,
    ) -> Result<TcpStream, Error> {
        let socket = tcp::connect(host.to_owned(), port, options.into()).await?;
        Ok(TcpStream::from_socket(socket))
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

    /// After an upgrade the host has ended both streams: the next read or
    /// write opens new ones, on the new transport.
    pub(crate) fn after_upgrade(&mut self) {
        self.read.incoming = Incoming::new();
        self.write.outgoing.reset();
    }

    pub(crate) fn from_socket(socket: TcpSocket) -> TcpStream {
        let socket = Rc::new(socket);
        TcpStream {
            read: OwnedReadHalf {
                socket: Rc::clone(&socket),
                incoming: Incoming::new(),
            },
            write: OwnedWriteHalf {
                socket,
                outgoing: Outgoing::new(),
            },
        }
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

    /// Reads into `buf` until it holds `delimiter` (a line's `b"\r\n"`, a
    /// request head's `b"\r\n\r\n"`), and returns the index just past
    /// the first one; `None` if the stream ends first. What follows the
    /// delimiter stays in `buf` for the next call: drain what you consumed.
    ///
    /// ```no_run
    /// # async fn demo(stream: &mut moat_sdk::TcpStream) -> Result<(), moat_sdk::Error> {
    /// let mut buf = Vec::new();
    /// while let Some(end) = stream.read_until(&mut buf, b"\r\n", 1024).await? {
    ///     let line: Vec<u8> = buf.drain(..end).collect();
    ///     println!("{}", String::from_utf8_lossy(&line).trim_end());
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `buf` reaches `limit` bytes without the
    /// delimiter; as [`read`](Self::read).
    pub async fn read_until(
        &mut self,
        buf: &mut Vec<u8>,
        delimiter: &[u8],
        limit: usize,
    ) -> Result<Option<usize>, Error> {
        self.read.read_until(buf, delimiter, limit).await
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
        Ok(self.read.socket.local_address()?.to_socket_addr())
    }

    /// The peer's address.
    ///
    /// # Errors
    /// If the host cannot tell (after a reset, say).
    pub fn peer_addr(&self) -> Result<SocketAddr, Error> {
        Ok(self.read.socket.remote_address()?.to_socket_addr())
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

    /// Splits the stream into halves that can be used from different tasks.
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        (self.read, self.write)
    }
}

impl OwnedReadHalf {
    fn incoming(&mut self) -> &mut Incoming<ErrorCode> {
        if !self.incoming.is_open() {
            let (stream, outcome) = self.socket.receive();
            self.incoming.open(stream, outcome);
        }
        &mut self.incoming
    }

    /// As [`TcpStream::read`].
    ///
    /// # Errors
    /// As [`TcpStream::read`].
    pub async fn read(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        Ok(self.incoming().read(buf).await?)
    }

    /// As [`TcpStream::read_buf`].
    ///
    /// # Errors
    /// As [`TcpStream::read`].
    pub async fn read_buf(&mut self, buf: &mut Vec<u8>) -> Result<usize, Error> {
        Ok(self.incoming().read_buf(buf).await?)
    }

    /// As [`TcpStream::read_exact`].
    ///
    /// # Errors
    /// As [`TcpStream::read_exact`].
    pub async fn read_exact(&mut self, mut buf: &mut [u8]) -> Result<(), Error> {
        while !buf.is_empty() {
            match self.read(buf).await? {
                0 => return Err(Error::Closed),
                n => buf = &mut buf[n..],
            }
        }
        Ok(())
    }

    /// As [`TcpStream::read_to_end`].
    ///
    /// # Errors
    /// As [`TcpStream::read`].
    pub async fn read_to_end(&mut self) -> Result<Vec<u8>, Error> {
        let mut all = Vec::new();
        while self.read_buf(&mut all).await? > 0 {}
        Ok(all)
    }

    /// As [`TcpStream::read_until`].
    ///
    /// # Errors
    /// As [`TcpStream::read_until`].
    pub async fn read_until(
        &mut self,
        buf: &mut Vec<u8>,
        delimiter: &[u8],
        limit: usize,
    ) -> Result<Option<usize>, Error> {
        if delimiter.is_empty() {
            return Ok(Some(0));
        }
        // Only the new bytes (and the last few old ones) are searched again.
        let mut searched: usize = 0;
        loop {
            let from = searched.saturating_sub(delimiter.len().saturating_sub(1));
            if let Some(i) = buf[from..]
                .windows(delimiter.len())
                .position(|w| w == delimiter)
            {
                return Ok(Some(from + i + delimiter.len()));
            }
            searched = buf.len();
            if buf.len() >= limit {
                return Err(Error::InvalidArgument(format!(
                    "no delimiter within {limit} bytes"
                )));
            }
            buf.reserve((limit - buf.len()).min(16 * 1024));
            if self.read_buf(buf).await? == 0 {
                return Ok(None);
            }
        }
    }
}

impl OwnedWriteHalf {
    fn outgoing(&mut self) -> &mut Outgoing<ErrorCode> {
        if !self.outgoing.is_open() {
            let (tx, rx) = wit_stream::new::<u8>();
            let outcome = self.socket.send(rx);
            self.outgoing.open(tx, outcome);
        }
        &mut self.outgoing
    }

    /// As [`TcpStream::write_all`].
    ///
    /// # Errors
    /// As [`TcpStream::write_all`].
    pub async fn write_all(&mut self, data: &[u8]) -> Result<(), Error> {
        // The host reads straight from the buffer it is lent, which must be
        // owned for the length of the write: one copy here.
        self.write_all_owned(data.to_vec()).await.map(drop)
    }

    /// As [`TcpStream::write_all_owned`].
    ///
    /// # Errors
    /// As [`TcpStream::write_all`].
    pub async fn write_all_owned(&mut self, data: Vec<u8>) -> Result<Vec<u8>, Error> {
        self.outgoing().write_all(data).await.map_err(|e| match e {
            WriteError::Failed(code) => code.into(),
            WriteError::Ended => Error::Closed,
        })
    }

    /// As [`TcpStream::shutdown`].
    ///
    /// # Errors
    /// As [`TcpStream::shutdown`].
    pub async fn shutdown(&mut self) -> Result<(), Error> {
        if self.outgoing.is_open() {
            return Ok(self.outgoing.close().await?);
        }
        let end = self.socket.shutdown().await;
        self.outgoing.mark_ended(end.clone());
        Ok(end?)
    }
}
