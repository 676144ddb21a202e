//! TLS, terminated in the host: connect, listen, and STARTTLS both ways.
//!
//! ```no_run
//! use moat_sdk::{TcpStream, TlsConnectOptions};
//!
//! # async fn demo() -> Result<(), moat_sdk::Error> {
//! let options = TlsConnectOptions { alpn: vec!["http/1.1".into()], ..Default::default() };
//! let mut stream = TcpStream::connect_tls("example.com:443", &options).await?;
//! stream.write_all(b"GET / HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n").await?;
//! let page = stream.read_to_end().await?;
//! # Ok(())
//! # }
//! ```

use std::time::Duration;

use crate::addr::ToHostPort;
use crate::bindings::moat::net::tls;
use crate::error::Error;
use crate::listener::{ListenOptions, TcpListener};
use crate::stream::{ConnectOptions, TcpStream};

/// A certificate chain (leaf first) and its private key, PEM.
///
/// ```no_run
/// # fn demo() -> std::io::Result<()> {
/// // Paths inside the guest: a directory the user gave with --dir.
/// let identity = moat_sdk::Identity::from_files("/certs/cert.pem", "/certs/key.pem")?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Identity {
    /// The certificate chain, PEM.
    pub certificate_chain: Vec<u8>,
    /// The private key, PEM.
    pub private_key: Vec<u8>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity").finish_non_exhaustive()
    }
}

impl Identity {
    /// Reads a certificate chain and key from files (in a directory the
    /// guest was given with `moat run --dir`).
    ///
    /// # Errors
    /// If either file cannot be read.
    pub fn from_files(certificate_chain: &str, private_key: &str) -> std::io::Result<Identity> {
        let read = |path: &str| {
            std::fs::read(path).map_err(|e| std::io::Error::new(e.kind(), format!("{path}: {e}")))
        };
        Ok(Identity {
            certificate_chain: read(certificate_chain)?,
            private_key: read(private_key)?,
        })
    }
}

impl From<&Identity> for tls::Identity {
    fn from(id: &Identity) -> tls::Identity {
        tls::Identity {
            certificate_chain: id.certificate_chain.clone(),
            private_key: id.private_key.clone(),
        }
    }
}

/// A TLS client's choices; the default verifies against the host's roots
/// and offers no ALPN.
///
/// ```no_run
/// # fn demo() -> std::io::Result<()> {
/// let options = moat_sdk::TlsConnectOptions {
///     alpn: vec!["h2".into(), "http/1.1".into()],
///     extra_roots: Some(std::fs::read("/certs/private-ca.pem")?),
///     ..Default::default()
/// };
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsConnectOptions {
    /// Protocols to offer with ALPN, in order of preference.
    pub alpn: Vec<String>,
    /// PEM roots to trust for this connection, besides the host's.
    pub extra_roots: Option<Vec<u8>>,
    /// A client certificate to present (mutual TLS).
    pub client_identity: Option<Identity>,
}

impl From<&TlsConnectOptions> for tls::ClientOptions {
    fn from(o: &TlsConnectOptions) -> tls::ClientOptions {
        tls::ClientOptions {
            alpn: o.alpn.clone(),
            extra_roots: o.extra_roots.clone(),
            client_identity: o.client_identity.as_ref().map(Into::into),
        }
    }
}

/// A TLS server's configuration.
///
/// ```no_run
/// # fn demo() -> std::io::Result<()> {
/// let options = moat_sdk::TlsListenOptions::new(moat_sdk::Identity::from_files("/certs/cert.pem", "/certs/key.pem")?);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsListenOptions {
    /// The certificate chain and key to present.
    pub identity: Identity,
    /// Protocols to accept with ALPN, in order of preference.
    pub alpn: Vec<String>,
    /// Require client certificates signed by these PEM roots.
    pub client_roots: Option<Vec<u8>>,
    /// Bound on each handshake (the host's default is 10 s).
    pub handshake_timeout: Option<Duration>,
}

impl TlsListenOptions {
    /// Options presenting `identity`, with no ALPN and no client certificates.
    pub fn new(identity: Identity) -> TlsListenOptions {
        TlsListenOptions {
            identity,
            alpn: Vec::new(),
            client_roots: None,
            handshake_timeout: None,
        }
    }
}

impl From<&TlsListenOptions> for tls::ServerOptions {
    fn from(o: &TlsListenOptions) -> tls::ServerOptions {
        tls::ServerOptions {
            identity: (&o.identity).into(),
            alpn: o.alpn.clone(),
            client_roots: o.client_roots.clone(),
            handshake_timeout: o
                .handshake_timeout
                .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        }
    }
}

impl TcpStream {
    /// Connects with TLS to `addr` (as [`connect`](Self::connect) takes
    /// it): the handshake is done when this returns. The certificate is
    /// verified against the host as written.
    ///
    /// # Errors
    /// [`connect`](Self::connect)'s, and [`Error::CertificateUntrusted`],
    /// [`Error::CertificateNameMismatch`], [`Error::CertificateExpired`],
    /// [`Error::TlsHandshake`].
    pub async fn connect_tls(
        addr: impl ToHostPort,
        tls: &TlsConnectOptions,
    ) -> Result<TcpStream, Error> {
        TcpStream::connect_tls_with(addr, &ConnectOptions::default(), tls).await
    }

    /// [`connect_tls`](Self::connect_tls) with TCP options.
    ///
    /// # Errors
    /// As [`connect_tls`](Self::connect_tls).
    pub async fn connect_tls_with(
        addr: impl ToHostPort,
        options: &ConnectOptions,
        tls: &TlsConnectOptions,
    ) -> Result<TcpStream, Error> {
        let (host, port) = addr.to_host_port()?;
        match tls::connect(host.clone(), port, options.into(), tls.into()).await {
            Ok(socket) => Ok(TcpStream::from_socket(socket)),
            Err(code) => Err(code.into()),
        }
    }

    /// STARTTLS as the client: upgrades this plaintext connection in place,
    /// verifying the server as `server_name`. Everything written before is
    /// sent first; `already_read` is whatever you read past your protocol's
    /// go-ahead (it is replayed to the handshake).
    ///
    /// # Errors
    /// [`Error::InvalidState`] if already TLS or after [`shutdown`](Self::shutdown)
    /// (the stream is left as it was); the TLS errors of
    /// [`connect_tls`](Self::connect_tls) (the connection is then gone).
    pub async fn start_tls(
        &mut self,
        server_name: &str,
        already_read: &[u8],
        tls: &TlsConnectOptions,
    ) -> Result<(), Error> {
        self.settle().await?;
        let replay = self.replay(already_read);
        let done =
            tls::upgrade_client(self.socket(), server_name.to_owned(), replay, tls.into()).await;
        self.after_upgrade();
        Ok(done?)
    }

    /// STARTTLS as the server: upgrades this plaintext connection (say one
    /// from [`TcpListener::accept`]) in place. `already_read` is whatever you
    /// read past the client's request to start TLS (a client may send its
    /// first handshake bytes right behind it).
    ///
    /// # Errors
    /// As [`start_tls`](Self::start_tls); [`Error::InvalidArgument`] for an
    /// unusable certificate or key (the stream is left as it was).
    pub async fn start_tls_server(
        &mut self,
        already_read: &[u8],
        tls: &TlsListenOptions,
    ) -> Result<(), Error> {
        self.settle().await?;
        let replay = self.replay(already_read);
        let done = tls::upgrade_server(self.socket(), replay, tls.into()).await;
        self.after_upgrade();
        Ok(done?)
    }

    /// The protocol ALPN chose, on a TLS stream.
    pub fn alpn_protocol(&self) -> Option<String> {
        tls::alpn_protocol(self.socket())
    }

    /// Whether the stream is TLS.
    pub fn is_tls(&self) -> bool {
        tls::is_tls(self.socket())
    }
}

impl TcpListener {
    /// Listens for TLS connections: each comes out of
    /// [`accept`](Self::accept) with its handshake done. The certificate and
    /// key are checked here: an unusable one fails the call and claims no
    /// port.
    ///
    /// # Errors
    /// [`bind`](Self::bind)'s; [`Error::InvalidArgument`] for an unusable
    /// certificate or key.
    pub async fn bind_tls(
        addr: impl ToHostPort,
        tls: &TlsListenOptions,
    ) -> Result<TcpListener, Error> {
        TcpListener::bind_tls_with(addr, &ListenOptions::default(), tls).await
    }

    /// [`bind_tls`](Self::bind_tls) with listen options.
    ///
    /// # Errors
    /// As [`bind_tls`](Self::bind_tls).
    pub async fn bind_tls_with(
        addr: impl ToHostPort,
        options: &ListenOptions,
        tls: &TlsListenOptions,
    ) -> Result<TcpListener, Error> {
        let (host, port) = addr.to_host_port()?;
        match tls::listen(host.clone(), port, options.into(), tls.into()).await {
            Ok(listener) => Ok(TcpListener::from_listener(listener)),
            Err(code) => Err(code.into()),
        }
    }
}
