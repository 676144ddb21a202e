//! What a socket's bytes go through: the TCP stream itself, or TLS over it.
//!
//! [`Io`] is the transport of a connection ([`super::tcp`]); [`TlsStream`]
//! and [`Prefixed`] are what the handshakes ([`super::tls`]) produce and
//! read from.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A TLS session over a TCP stream (client or server side).
pub(crate) type TlsStream = tokio_rustls::TlsStream<Prefixed>;

/// The transport of a [`super::TcpConn`].
pub(crate) enum Io {
    /// Plaintext: reads and writes go straight between the kernel and the
    /// caller's buffer, with readiness tracked by tokio.
    Plain(TcpStream),
    /// TLS: rustls decrypts into the caller's buffer and encrypts from it.
    /// The reader, the writer and the drain share the session, one at a
    /// time (never across an await).
    Tls(Box<Mutex<TlsStream>>),
}

impl Io {
    pub(crate) fn tls(stream: TlsStream) -> Io {
        Io::Tls(Box::new(Mutex::new(stream)))
    }

    /// Runs `f` on the TCP stream underneath.
    pub(crate) fn with_tcp<R>(&self, f: impl FnOnce(&TcpStream) -> R) -> R {
        match self {
            Io::Plain(stream) => f(stream),
            Io::Tls(tls) => f(&lock(tls).get_ref().0.stream),
        }
    }

    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        self.with_tcp(TcpStream::local_addr)
    }

    pub(crate) fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.with_tcp(TcpStream::peer_addr)
    }

    /// The ALPN protocol TLS negotiated, if any.
    pub(crate) fn alpn_protocol(&self) -> Option<Vec<u8>> {
        match self {
            Io::Plain(_) => None,
            Io::Tls(tls) => lock(tls).get_ref().1.alpn_protocol().map(<[u8]>::to_vec),
        }
    }
}

pub(crate) fn lock(tls: &Mutex<TlsStream>) -> MutexGuard<'_, TlsStream> {
    tls.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A TCP stream with bytes to read before the live socket: what a guest
/// had already read when it asked for STARTTLS (say the peer's first
/// handshake bytes, sent in the same segment as its go-ahead), replayed so
/// that the TLS handshake sees exactly what the peer sent.
pub(crate) struct Prefixed {
    prefix: Vec<u8>,
    /// How much of `prefix` has been read.
    at: usize,
    pub(crate) stream: TcpStream,
}

impl Prefixed {
    pub(crate) fn new(stream: TcpStream, prefix: Vec<u8>) -> Prefixed {
        Prefixed {
            prefix,
            at: 0,
            stream,
        }
    }
}

impl AsyncRead for Prefixed {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let rest = &this.prefix[this.at..];
        if !rest.is_empty() {
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            this.at += n;
            if this.at == this.prefix.len() {
                this.prefix = Vec::new();
                this.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
