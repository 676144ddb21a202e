//! TCP listeners.

use std::net::SocketAddr;

use crate::addr::{ToHostPort, ToSocketAddr};
use crate::bindings::moat::net::listen::{self, Listener};
use crate::error::Error;
use crate::stream::TcpStream;
use crate::task::consume_budget;

/// Options for [`TcpListener::bind_with`]; the default is the system's.
///
/// ```no_run
/// use moat_sdk::{ListenOptions, TcpListener};
///
/// # async fn demo() -> Result<(), moat_sdk::Error> {
/// let options = ListenOptions { backlog: Some(4096), ..ListenOptions::default() };
/// let listener = TcpListener::bind_with("0.0.0.0:8080", &options).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListenOptions {
    /// The kernel's queue of connections not yet accepted (default 1024).
    pub backlog: Option<u32>,
    /// Kernel send buffer of accepted connections, in bytes.
    pub send_buffer_size: Option<u64>,
    /// Kernel receive buffer of accepted connections, in bytes.
    pub receive_buffer_size: Option<u64>,
    /// Most connections from this listener open at once; past it the host
    /// stops accepting until one closes (default: the run's
    /// `--max-connections`).
    pub max_connections: Option<u32>,
    /// Most connections open at once from one peer address; one more is
    /// reset as soon as it arrives (default: the run's
    /// `--max-connections-per-peer`).
    pub max_connections_per_peer: Option<u32>,
}

impl From<&ListenOptions> for listen::ListenOptions {
    fn from(options: &ListenOptions) -> listen::ListenOptions {
        listen::ListenOptions {
            backlog: options.backlog,
            send_buffer_size: options.send_buffer_size,
            receive_buffer_size: options.receive_buffer_size,
            max_connections: options.max_connections,
            max_connections_per_peer: options.max_connections_per_peer,
        }
    }
}

/// A TCP listener.
///
/// ```no_run
/// use moat_sdk::TcpListener;
///
/// # async fn demo() -> Result<(), moat_sdk::Error> {
/// let listener = TcpListener::bind("127.0.0.1:0").await?;
/// println!("listening on {}", listener.local_addr()?);
/// loop {
///     let (mut conn, peer) = listener.accept().await?;
///     moat_sdk::spawn(async move {
///         let _ = conn.write_all(format!("hello, {peer}\n").as_bytes()).await;
///     });
/// }
/// # }
/// ```
pub struct TcpListener {
    listener: Listener,
}

impl TcpListener {
    /// Listens on `addr`: `"127.0.0.1:8080"`, `("localhost", 8080)`, a
    /// `SocketAddr` (see [`ToHostPort`]); port 0 is any free port, see
    /// [`local_addr`](Self::local_addr). The host part is an IP literal or a
    /// local name, judged by the host's policy as written.
    ///
    /// # Errors
    /// [`Error::Denied`] if the run was not granted listen on it (then no
    /// port was claimed); [`Error::AddressInUse`], naming the address; ...
    pub async fn bind(addr: impl ToHostPort) -> Result<TcpListener, Error> {
        TcpListener::bind_with(addr, &ListenOptions::default()).await
    }

    /// [`bind`](Self::bind) with options.
    ///
    /// # Errors
    /// As [`bind`](Self::bind).
    pub async fn bind_with(
        addr: impl ToHostPort,
        options: &ListenOptions,
    ) -> Result<TcpListener, Error> {
        let (host, port) = addr.to_host_port()?;
        match listen::listen(host.clone(), port, options.into()).await {
            Ok(listener) => Ok(TcpListener { listener }),
            Err(code) => Err(code.into()),
        }
    }

    pub(crate) fn from_listener(listener: Listener) -> TcpListener {
        TcpListener { listener }
    }

    /// The next connection and its peer's address.
    ///
    /// Several tasks may wait at once; each connection goes to one of them.
    ///
    /// # Errors
    /// [`Error::Closed`] once the listener is closed (by
    /// [`close`](Self::close), here or in another task).
    ///
    /// # Cancel safety
    /// Cancel-safe: a dropped accept loses no connection.
    pub async fn accept(&self) -> Result<(TcpStream, SocketAddr), Error> {
        consume_budget().await;
        match self.listener.accept().await? {
            Some(accepted) => Ok((
                TcpStream::from_socket(accepted.socket),
                accepted.remote_address.to_socket_addr(),
            )),
            None => Err(Error::Closed("the listener is closed".into())),
        }
    }

    /// The bound address, with the port the system picked for port 0.
    ///
    /// # Errors
    /// [`Error::Closed`] after [`close`](Self::close).
    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        Ok(self.listener.local_address()?.to_socket_addr())
    }

    /// Stops listening: accepts waiting now or later fail with
    /// [`Error::Closed`], and the
    /// port is free when this returns.
    pub async fn close(&self) {
        self.listener.close().await;
    }
}
