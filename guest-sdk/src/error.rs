//! The SDK's error type: the host's `error-code`, as a Rust enum.

use std::fmt;

use crate::bindings::moat::net::types::{Capability as WitCapability, ErrorCode};

/// The two network capabilities a host grants.
///
/// ```no_run
/// use moat_sdk::{Capability, Error, TcpListener};
///
/// # async fn demo() {
/// if let Err(Error::Denied(denial)) = TcpListener::bind("0.0.0.0:80").await {
///     assert_eq!(denial.capability, Capability::Listen);
/// }
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Capability {
    /// Reaching out (`connect`); granted with `moat run --allow-net`.
    Connect,
    /// Being reachable (`listen`); granted with `moat run --allow-listen`.
    Listen,
}

/// A call the host's policy refused. Nothing was resolved, no socket was
/// made and no port claimed.
///
/// ```no_run
/// use moat_sdk::{Error, TcpStream};
///
/// # async fn demo() {
/// match TcpStream::connect("example.com:443").await {
///     Err(Error::Denied(denial)) => {
///         // "connect to example.com:443 denied: needs --allow-net=example.com:443"
///         eprintln!("{}", denial.message);
///         assert_eq!((denial.host.as_str(), denial.port), ("example.com", 443));
///     }
///     _ => {}
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The capability the call needed.
    pub capability: Capability,
    /// The host as the guest wrote it.
    pub host: String,
    /// The port asked for.
    pub port: u16,
    /// A line for humans naming the flag that would allow the call, like
    /// `connect to example.com:443 denied: needs --allow-net=example.com:443`.
    pub message: String,
}

/// Everything a network call can fail with. Each case carries the host's
/// line for a human, which names what failed and, where the call named an
/// address, which.
///
/// ```no_run
/// use moat_sdk::{Error, TcpStream};
///
/// # async fn demo() {
/// match TcpStream::connect("example.com:443").await {
///     Ok(_stream) => {}
///     Err(Error::Denied(denial)) => eprintln!("not allowed: {}", denial.message),
///     // "connect to example.com:443: connection refused"
///     Err(e @ Error::ConnectionRefused(_)) => eprintln!("{e}"),
///     Err(other) => eprintln!("failed: {other}"),
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The host's policy does not grant the call.
    Denied(Denial),
    /// An argument is not acceptable (the text says why).
    InvalidArgument(String),
    /// The call does not fit the socket's state (the text says why).
    InvalidState(String),
    /// The host name could not be resolved (the text names it and says why).
    NameNotResolved(String),
    /// Nothing accepts connections at that address, like
    /// `connect to 127.0.0.1:9: connection refused`.
    ConnectionRefused(String),
    /// The connection was reset or aborted.
    ConnectionReset(String),
    /// The operation did not complete in time; the text says what took too
    /// long and which timeout ended it, like `lookup of example.com took
    /// longer than 15s, the run's lookup timeout (--lookup-timeout)`.
    TimedOut(String),
    /// The local address is in use, like `listen on 127.0.0.1:7000: address in use`.
    AddressInUse(String),
    /// The local address is not available on this machine.
    AddressNotAvailable(String),
    /// No route to the host or network.
    Unreachable(String),
    /// The socket, the stream or the listener is closed.
    Closed(String),
    /// TLS: the peer's certificate does not lead to a trusted root.
    CertificateUntrusted(String),
    /// TLS: the certificate is not valid for the host that was named.
    CertificateNameMismatch(String),
    /// TLS: the certificate has expired or is not valid yet.
    CertificateExpired(String),
    /// TLS: the handshake failed otherwise.
    TlsHandshake(String),
    /// A bound of the run was reached (too many open sockets); the text
    /// names it and the `moat run` flag that raises it.
    LimitReached(String),
    /// The operating system refused a call the host's policy allowed (a
    /// privileged port, broadcast without `UdpBindOptions::broadcast`, a
    /// firewall rule).
    AccessDenied(String),
    /// A datagram is longer than the protocol or the path allows.
    DatagramTooLarge(String),
    /// Anything else (the text is the host's).
    Other(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Denied(d) => f.write_str(&d.message),
            Error::InvalidArgument(why) => write!(f, "invalid argument: {why}"),
            Error::InvalidState(why) => write!(f, "invalid state: {why}"),
            Error::NameNotResolved(why) => write!(f, "name not resolved: {why}"),
            Error::CertificateUntrusted(why) => write!(
                f,
                "certificate not trusted: {why} (a private CA can be trusted by the run, \
                 `moat run --ca-file=CA.pem`, or by this connection, \
                 `TlsConnectOptions::extra_roots`)"
            ),
            Error::CertificateNameMismatch(why) => write!(f, "certificate name mismatch: {why}"),
            Error::CertificateExpired(why) => write!(f, "certificate expired: {why}"),
            Error::TlsHandshake(why) => write!(f, "tls handshake failed: {why}"),
            Error::LimitReached(why) => write!(f, "limit reached: {why}"),
            Error::ConnectionRefused(why)
            | Error::ConnectionReset(why)
            | Error::TimedOut(why)
            | Error::AddressInUse(why)
            | Error::AddressNotAvailable(why)
            | Error::Unreachable(why)
            | Error::Closed(why)
            | Error::AccessDenied(why)
            | Error::DatagramTooLarge(why)
            | Error::Other(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for Error {}

impl From<ErrorCode> for Error {
    fn from(code: ErrorCode) -> Error {
        match code {
            ErrorCode::Denied(d) => Error::Denied(Denial {
                capability: match d.capability {
                    WitCapability::Connect => Capability::Connect,
                    WitCapability::Listen => Capability::Listen,
                },
                host: d.host,
                port: d.port,
                message: d.message,
            }),
            ErrorCode::InvalidArgument(why) => Error::InvalidArgument(why),
            ErrorCode::InvalidState(why) => Error::InvalidState(why),
            ErrorCode::NameNotResolved(why) => Error::NameNotResolved(why),
            ErrorCode::ConnectionRefused(why) => Error::ConnectionRefused(why),
            ErrorCode::ConnectionReset(why) => Error::ConnectionReset(why),
            ErrorCode::TimedOut(why) => Error::TimedOut(why),
            ErrorCode::AddressInUse(why) => Error::AddressInUse(why),
            ErrorCode::AddressNotAvailable(why) => Error::AddressNotAvailable(why),
            ErrorCode::Unreachable(why) => Error::Unreachable(why),
            ErrorCode::Closed(why) => Error::Closed(why),
            ErrorCode::CertificateUntrusted(why) => Error::CertificateUntrusted(why),
            ErrorCode::CertificateNameMismatch(why) => Error::CertificateNameMismatch(why),
            ErrorCode::CertificateExpired(why) => Error::CertificateExpired(why),
            ErrorCode::TlsHandshake(why) => Error::TlsHandshake(why),
            ErrorCode::LimitReached(why) => Error::LimitReached(why),
            ErrorCode::AccessDenied(why) => Error::AccessDenied(why),
            ErrorCode::DatagramTooLarge(why) => Error::DatagramTooLarge(why),
            ErrorCode::Other(why) => Error::Other(why),
        }
    }
}

impl From<Error> for std::io::Error {
    fn from(err: Error) -> std::io::Error {
        use std::io::ErrorKind as K;
        let kind = match &err {
            Error::Denied(_) => K::PermissionDenied,
            Error::InvalidArgument(_) => K::InvalidInput,
            Error::ConnectionRefused(_) => K::ConnectionRefused,
            Error::ConnectionReset(_) => K::ConnectionReset,
            Error::TimedOut(_) => K::TimedOut,
            Error::AddressInUse(_) => K::AddrInUse,
            Error::AddressNotAvailable(_) => K::AddrNotAvailable,
            Error::Unreachable(_) => K::HostUnreachable,
            Error::Closed(_) => K::NotConnected,
            Error::AccessDenied(_) => K::PermissionDenied,
            Error::DatagramTooLarge(_) => K::InvalidInput,
            _ => K::Other,
        };
        std::io::Error::new(kind, err)
    }
}
