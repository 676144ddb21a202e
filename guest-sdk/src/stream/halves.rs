//! The two halves of a TCP connection: each reads or writes, from async
//! methods or (for the `AsyncRead`/`AsyncWrite` traits) from `poll_*`
//! functions.
//!
//! A poll-driven read or write moves the half's reader or writer into a
//! boxed future for as long as the host holds the call; the async methods
//! first wait for such a call to finish, so the two styles can be mixed on
//! one stream without losing or reordering bytes.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, ready};

use crate::addr::ToSocketAddr;
use crate::bindings::moat::net::tcp::TcpSocket;
use crate::bindings::moat::net::types::ErrorCode;
use crate::bindings::wit_stream;
use crate::error::Error;
use crate::io::Report;
use crate::io::incoming::{Incoming, READ_CHUNK};
use crate::io::outgoing::{Outgoing, WriteError};
use crate::stream::TcpStream;
use crate::task::{consume_budget, poll_budget};

/// Most bytes one `poll_write` takes: what it copies into the host's
/// buffer before the call returns. One read chunk, so a copying relay moves
/// data in the sizes the host's direct reads are tuned for.
pub(crate) const WRITE_CHUNK: usize = READ_CHUNK;

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
///     reader
/// });
/// writer.write_all(b"hello").await?;
/// let reader = printing.await.expect("not aborted");
/// let stream = reader.reunite(writer).expect("halves of one stream");
/// # Ok(())
/// # }
/// ```
pub struct OwnedReadHalf {
    pub(crate) socket: Rc<TcpSocket>,
    pub(crate) incoming: Incoming<ErrorCode>,
    /// A poll-driven read the host still holds; it owns `incoming` until
    /// it completes.
    polled: Option<PolledRead>,
}

type PolledRead =
    Pin<Box<dyn Future<Output = (Incoming<ErrorCode>, Vec<u8>, Result<usize, ErrorCode>)>>>;

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
    pub(crate) socket: Rc<TcpSocket>,
    pub(crate) outgoing: Outgoing<ErrorCode>,
    /// A poll-driven write or shutdown the host still holds; it owns
    /// `outgoing` until it completes.
    polled: Option<PolledWrite>,
    /// A poll-driven write's failure, for the next call to report. Boxed:
    /// a server holds thousands of idle streams, and an error inline would
    /// make each of them 24 bytes larger.
    failed: Option<Box<Error>>,
}

type PolledWrite = Pin<Box<dyn Future<Output = (Outgoing<ErrorCode>, Result<(), Error>)>>>;

/// The halves given to [`OwnedReadHalf::reunite`] came from different
/// streams; they are given back.
#[derive(Debug)]
pub struct ReuniteError(pub OwnedReadHalf, pub OwnedWriteHalf);

impl std::fmt::Display for ReuniteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("tried to reunite halves of different streams")
    }
}

impl std::error::Error for ReuniteError {}

impl std::fmt::Debug for OwnedReadHalf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedReadHalf")
            .field("peer", &self.peer_addr().ok())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for OwnedWriteHalf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedWriteHalf")
            .field("peer", &self.peer_addr().ok())
            .finish_non_exhaustive()
    }
}

pub(crate) fn halves(socket: TcpSocket) -> (OwnedReadHalf, OwnedWriteHalf) {
    let socket = Rc::new(socket);
    (
        OwnedReadHalf {
            socket: Rc::clone(&socket),
            incoming: Incoming::new(),
            polled: None,
        },
        OwnedWriteHalf {
            socket,
            outgoing: Outgoing::new(),
            polled: None,
            failed: None,
        },
    )
}

/// Opens `incoming` on a receive stream of `socket`, whose end the socket
/// reports when asked; if the socket refuses, `incoming` reports that.
fn open_incoming(incoming: &mut Incoming<ErrorCode>, socket: &Rc<TcpSocket>) {
    match socket.receive() {
        Ok(stream) => incoming.open(
            stream,
            Report::Ask(Rc::clone(socket), TcpSocket::receive_outcome),
        ),
        Err(e) => incoming.fail(e),
    }
}

fn local_addr(socket: &TcpSocket) -> Result<SocketAddr, Error> {
    Ok(socket.local_address()?.to_socket_addr())
}

fn peer_addr(socket: &TcpSocket) -> Result<SocketAddr, Error> {
    Ok(socket.remote_address()?.to_socket_addr())
}

impl OwnedReadHalf {
    /// Joins the halves again; they must come from the same stream.
    ///
    /// # Errors
    /// [`ReuniteError`], holding both halves, if they do not.
    pub fn reunite(self, write: OwnedWriteHalf) -> Result<TcpStream, ReuniteError> {
        if Rc::ptr_eq(&self.socket, &write.socket) {
            Ok(TcpStream { read: self, write })
        } else {
            Err(ReuniteError(self, write))
        }
    }

    /// The local address, as [`TcpStream::local_addr`].
    ///
    /// # Errors
    /// As [`TcpStream::local_addr`].
    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        local_addr(&self.socket)
    }

    /// The peer's address, as [`TcpStream::peer_addr`].
    ///
    /// # Errors
    /// As [`TcpStream::peer_addr`].
    pub fn peer_addr(&self) -> Result<SocketAddr, Error> {
        peer_addr(&self.socket)
    }

    /// Waits for a poll-driven read to finish and takes its bytes back
    /// (they are the next ones to read).
    pub(crate) async fn settle(&mut self) {
        if let Some(read) = self.polled.take() {
            // An error is not lost: the ended stream gives it again.
            let (incoming, chunk, _result) = read.await;
            self.incoming = incoming;
            self.incoming.unread(&chunk);
        }
    }

    /// The reader, its stream opened, once no poll-driven read holds it
    /// (the caller settles first).
    fn incoming(&mut self) -> &mut Incoming<ErrorCode> {
        if !self.incoming.is_open() {
            open_incoming(&mut self.incoming, &self.socket);
        }
        &mut self.incoming
    }

    /// As [`TcpStream::read`].
    ///
    /// # Errors
    /// As [`TcpStream::read`].
    pub async fn read(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        consume_budget().await;
        if self.polled.is_some() {
            self.settle().await;
        }
        Ok(self.incoming().read(buf).await?)
    }

    /// As [`TcpStream::read_buf`].
    ///
    /// # Errors
    /// As [`TcpStream::read`].
    pub async fn read_buf(&mut self, buf: &mut Vec<u8>) -> Result<usize, Error> {
        consume_budget().await;
        if self.polled.is_some() {
            self.settle().await;
        }
        Ok(self.incoming().read_buf(buf).await?)
    }

    /// As [`TcpStream::read_exact`].
    ///
    /// # Errors
    /// As [`TcpStream::read_exact`].
    pub async fn read_exact(&mut self, mut buf: &mut [u8]) -> Result<(), Error> {
        while !buf.is_empty() {
            match self.read(buf).await? {
                0 => {
                    return Err(Error::Closed(
                        "the stream ended before the buffer was filled".into(),
                    ));
                }
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
        delimiter: &[u8],
        buf: &mut Vec<u8>,
        limit: usize,
    ) -> Result<usize, Error> {
        let start = buf.len();
        if delimiter.is_empty() {
            return Ok(0);
        }
        // Only the new bytes (and the last few old ones) are searched again.
        let mut searched = start;
        loop {
            let from = searched.saturating_sub(delimiter.len() - 1).max(start);
            if let Some(i) = buf[from..]
                .windows(delimiter.len())
                .position(|w| w == delimiter)
            {
                let end = from + i + delimiter.len();
                // What came after the delimiter is the next call's.
                // read_buf settled any poll-driven read already.
                self.incoming().unread(&buf[end..]);
                buf.truncate(end);
                return Ok(end - start);
            }
            searched = buf.len();
            if buf.len() - start >= limit {
                return Err(Error::InvalidArgument(format!(
                    "no delimiter within {limit} bytes (they are in the buffer)"
                )));
            }
            buf.reserve((limit - (buf.len() - start)).min(16 * 1024));
            if self.read_buf(buf).await? == 0 {
                return Ok(buf.len() - start);
            }
        }
    }

    /// The poll-driven read behind the `AsyncRead` traits: asks the host
    /// for up to `want` bytes (bytes taken back earlier come first) and
    /// hands them to `put`, which takes at most `want`. `Ready(Ok(0))` at
    /// end of stream.
    pub(crate) fn poll_read_into(
        &mut self,
        cx: &mut Context<'_>,
        want: usize,
        put: impl FnOnce(&[u8]),
    ) -> Poll<io::Result<usize>> {
        if want == 0 {
            return Poll::Ready(Ok(0));
        }
        if self.polled.is_none() {
            ready!(poll_budget(cx));
            if !self.incoming.is_open() {
                open_incoming(&mut self.incoming, &self.socket);
            }
            let mut incoming = std::mem::replace(&mut self.incoming, Incoming::new());
            let want = want.min(READ_CHUNK);
            self.polled = Some(Box::pin(async move {
                let mut chunk = Vec::with_capacity(want);
                let result = incoming.read_buf(&mut chunk).await;
                (incoming, chunk, result)
            }));
        }
        let Some(read) = self.polled.as_mut() else {
            return Poll::Ready(Ok(0));
        };
        let (incoming, chunk, result) = ready!(read.as_mut().poll(cx));
        self.polled = None;
        self.incoming = incoming;
        match result {
            Ok(_) => {
                let n = chunk.len().min(want);
                put(&chunk[..n]);
                self.incoming.unread(&chunk[n..]);
                Poll::Ready(Ok(n))
            }
            Err(e) => Poll::Ready(Err(Error::from(e).into())),
        }
    }
}

impl OwnedWriteHalf {
    /// The local address, as [`TcpStream::local_addr`].
    ///
    /// # Errors
    /// As [`TcpStream::local_addr`].
    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        local_addr(&self.socket)
    }

    /// The peer's address, as [`TcpStream::peer_addr`].
    ///
    /// # Errors
    /// As [`TcpStream::peer_addr`].
    pub fn peer_addr(&self) -> Result<SocketAddr, Error> {
        peer_addr(&self.socket)
    }

    fn open(&mut self) {
        if !self.outgoing.is_open() {
            let (tx, rx) = wit_stream::new::<u8>();
            match self.socket.send(rx) {
                Ok(()) => self.outgoing.open(
                    tx,
                    Report::Ask(Rc::clone(&self.socket), TcpSocket::send_outcome),
                ),
                Err(e) => self.outgoing.mark_ended(Err(e)),
            }
        }
    }

    /// Waits for a poll-driven write to finish; its error, if it failed.
    pub(crate) async fn settle(&mut self) -> Result<(), Error> {
        if let Some(write) = self.polled.take() {
            let (outgoing, result) = write.await;
            self.outgoing = outgoing;
            result?;
        }
        match self.failed.take() {
            Some(e) => Err(*e),
            None => Ok(()),
        }
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
        consume_budget().await;
        if self.polled.is_some() || self.failed.is_some() {
            self.settle().await?;
        }
        self.open();
        self.outgoing.write_all(data).await.map_err(write_error)
    }

    /// As [`TcpStream::shutdown`].
    ///
    /// # Errors
    /// As [`TcpStream::shutdown`].
    pub async fn shutdown(&mut self) -> Result<(), Error> {
        self.settle().await?;
        // The host sends the FIN once it has written every byte the stream
        // handed over, and tells how sending ended (the first outcome, if
        // it had already ended).
        self.outgoing.end_stream();
        let end = self.socket.shutdown().await;
        self.outgoing.mark_ended(end.clone());
        Ok(end?)
    }

    /// Finishes a poll-driven write; `Ready(Err)` if it (or an earlier
    /// one) failed.
    fn poll_settle(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(write) = self.polled.as_mut() {
            let (outgoing, result) = ready!(write.as_mut().poll(cx));
            self.polled = None;
            self.outgoing = outgoing;
            if let Err(e) = result {
                self.failed = Some(Box::new(e));
            }
        }
        match &self.failed {
            Some(e) => Poll::Ready(Err(Error::clone(e).into())),
            None => Poll::Ready(Ok(())),
        }
    }

    /// The poll-driven write behind `AsyncWrite`: takes up to
    /// [`WRITE_CHUNK`] bytes of `data` (copied, as the host needs a buffer
    /// it owns for the length of the call) and reports them written; the
    /// host may still be sending them, and a failure comes back from the
    /// next write, flush or shutdown.
    pub(crate) fn poll_write_slice(
        &mut self,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_settle(cx))?;
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        ready!(poll_budget(cx));
        self.open();
        let n = data.len().min(WRITE_CHUNK);
        let chunk = data[..n].to_vec();
        let mut outgoing = std::mem::replace(&mut self.outgoing, Outgoing::new());
        let mut write: PolledWrite = Box::pin(async move {
            let result = outgoing
                .write_all(chunk)
                .await
                .map(drop)
                .map_err(write_error);
            (outgoing, result)
        });
        match write.as_mut().poll(cx) {
            Poll::Ready((outgoing, result)) => {
                self.outgoing = outgoing;
                if let Err(e) = result {
                    self.failed = Some(Box::new(e));
                }
            }
            Poll::Pending => self.polled = Some(write),
        }
        Poll::Ready(Ok(n))
    }

    /// Waits until the host has every byte written (as `write_all` does
    /// before it returns).
    pub(crate) fn poll_flush_writes(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_settle(cx)
    }

    /// Flushes, then half-closes, as [`shutdown`](Self::shutdown).
    pub(crate) fn poll_shutdown_writes(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_settle(cx))?;
        if self.polled.is_none() {
            let mut outgoing = std::mem::replace(&mut self.outgoing, Outgoing::new());
            let socket = Rc::clone(&self.socket);
            self.polled = Some(Box::pin(async move {
                outgoing.end_stream();
                let end = socket.shutdown().await;
                outgoing.mark_ended(end.clone());
                (outgoing, end.map_err(Error::from))
            }));
        }
        self.poll_settle(cx)
    }
}

fn write_error(e: WriteError<ErrorCode>) -> Error {
    match e {
        WriteError::Failed(code) => code.into(),
        WriteError::Ended => Error::Closed("the socket's write side is closed".into()),
    }
}
