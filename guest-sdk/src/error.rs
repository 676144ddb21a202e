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

/// Everything a network call can fail with.
///
/// ```no_run
/// use moat_sdk::{Error, TcpStream};
///
/// # async fn demo() {
/// match TcpStream::connect("example.com:443").await {
///     Ok(_stream) => {}
///     Err(Error::Denied(denial)) => eprintln!("not allowed: {}", denial.message),
///     // "connection refused by example.com:443"
///     Err(e @ Error::ConnectionRefused { .. }) => eprintln!("{e}"),
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
    /// The host name could not be resolved.
    NameNotResolved(String),
    /// Nothing accepts connections at that address.
    ConnectionRefused {
        /// `HOST:PORT` as the guest wrote it (empty if the call had none).
        address: String,
    },
    /// The connection was reset or aborted.
    ConnectionReset,
    /// The operation did not complete in time.
    TimedOut,
    /// The local address is in use.
    AddressInUse {
        /// `HOST:PORT` as the guest wrote it (empty if the call had none).
        address: String,
    },
    /// The local address is not available on this machine.
    AddressNotAvailable {
        /// `HOST:PORT` as the guest wrote it (empty if the call had none).
        address: String,
    },
    /// No route to the host or network.
    Unreachable {
        /// `HOST:PORT` as the guest wrote it (empty if the call had none).
        address: String,
    },
    /// The socket or listener is closed.
    Closed,
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
            Error::ConnectionRefused { address } => {
                f.write_str("connection refused")?;
                at(f, " by ", address)
            }
            Error::ConnectionReset => f.write_str("connection reset"),
            Error::TimedOut => f.write_str("timed out"),
            Error::AddressInUse { address } => {
                f.write_str("address ")?;
                at(f, "", address)?;
                f.write_str(if address.is_empty() {
                    "in use"
                } else {
                    " in use"
                })
            }
            Error::AddressNotAvailable { address } => {
                f.write_str("address not available")?;
                at(f, ": ", address)?;
                if !address.is_empty() {
                    f.write_str(" is not an address of this machine")?;
                }
                Ok(())
            }
            Error::Unreachable { address } => {
                f.write_str("host or network unreachable")?;
                at(f, ": ", address)
            }
            Error::Closed => f.write_str("closed"),
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
            Error::Other(why) => f.write_str(why),
        }
    }
}

/// Writes `prefix` and `address` when there is an address.
fn at(f: &mut fmt::Formatter<'_>, prefix: &str, address: &str) -> fmt::Result {
    if address.is_empty() {
        Ok(())
    } else {
        write!(f, "{prefix}{address}")
    }
}

impl std::error::Error for Error {}

impl Error {
    /// The host's error for a call on `host`:`port`, naming the address
    /// where the error is about one.
    pub(crate) fn at(code: ErrorCode, host: &str, port: u16) -> Error {
        let address = || {
            if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            }
        };
        match Error::from(code) {
            Error::ConnectionRefused { .. } => Error::ConnectionRefused { address: address() },
            Error::AddressInUse { .. } => Error::AddressInUse { address: address() },
            Error::AddressNotAvailable { .. } => Error::AddressNotAvailable { address: address() },
            Error::Unreachable { .. } => Error::Unreachable { address: address() },
            other => other,
        }
    }
}

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
            ErrorCode::ConnectionRefused => Error::ConnectionRefused {
                address: String::new(),
            },
            ErrorCode::ConnectionReset => Error::ConnectionReset,
            ErrorCode::TimedOut => Error::TimedOut,
            ErrorCode::AddressInUse => Error::AddressInUse {
                address: String::new(),
            },
            ErrorCode::AddressNotAvailable => Error::AddressNotAvailable {
                address: String::new(),
            },
            ErrorCode::Unreachable => Error::Unreachable {
                address: String::new(),
            },
            ErrorCode::Closed => Error::Closed,
            ErrorCode::CertificateUntrusted(why) => Error::CertificateUntrusted(why),
            ErrorCode::CertificateNameMismatch(why) => Error::CertificateNameMismatch(why),
            ErrorCode::CertificateExpired(why) => Error::CertificateExpired(why),
            ErrorCode::TlsHandshake(why) => Error::TlsHandshake(why),
            ErrorCode::LimitReached(why) => Error::LimitReached(why),
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
            Error::ConnectionRefused { .. } => K::ConnectionRefused,
            Error::ConnectionReset => K::ConnectionReset,
            Error::TimedOut => K::TimedOut,
            Error::AddressInUse { .. } => K::AddrInUse,
            Error::AddressNotAvailable { .. } => K::AddrNotAvailable,
            Error::Unreachable { .. } => K::HostUnreachable,
            Error::Closed => K::NotConnected,
            _ => K::Other,
        };
        std::io::Error::new(kind, err)
    }
}
