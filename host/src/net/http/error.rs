//! What a guest may ask of one request, and why a request fails:
//! [`HttpRequestOptions`], [`HttpError`].

use std::time::Duration;

use super::Target;
use crate::net::error::{LimitReached, NetError};
use moat_policy::policy::Denied;
use moat_policy::setting::Spelled;

/// Bounds on time a guest may ask for on one request; each is capped by
/// the run's ([`Limits`](crate::net::Limits)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HttpRequestOptions {
    /// Resolving, connecting and the TLS handshake together.
    pub connect_timeout: Option<Duration>,
    /// From the request's head sent to the response's head received.
    pub first_byte_timeout: Option<Duration>,
    /// Between two pieces of the response body.
    pub between_bytes_timeout: Option<Duration>,
}

/// Why an outgoing request failed. Each maps to one wasi:http
/// `error-code`, and says which setting or grant would change it.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The request's URI has no authority, or an empty one.
    #[error(
        "HTTP request denied: it names no host (its URI has {0} authority); \
         moat judges the URI's authority, never the Host header"
    )]
    NoAuthority(&'static str),
    /// The authority is not a host moat can judge (`127.1`, a bad IPv6
    /// literal, a port out of range).
    #[error("HTTP request to {authority} denied: {reason}")]
    BadAuthority {
        /// The authority as written.
        authority: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A scheme other than `http` and `https`.
    #[error("HTTP request with scheme {0} denied: moat sends http and https only")]
    Scheme(String),
    /// The host as written is not granted, or a deny entry names it.
    #[error("HTTP request: {0}")]
    Denied(Box<Denied>),
    /// Every address the name resolved to is refused by a deny entry.
    #[error("HTTP request: {0}")]
    AddressDenied(Box<Denied>),
    /// A bound of the run: requests in flight, sockets, host memory.
    #[error("HTTP request refused: {0}")]
    LimitReached(#[source] Box<LimitReached>),
    /// The audit trail could not take the record of the request.
    #[error("HTTP request refused: the audit trail failed: {0}")]
    AuditFailed(String),
    /// The name could not be resolved.
    #[error("HTTP request: name not resolved: {0}")]
    Lookup(#[source] NetError),
    /// Connecting failed (refused, unreachable, reset, timed out).
    #[error("HTTP request: connect to {host} failed: {source}")]
    Connect {
        /// The host and port as written.
        host: String,
        /// Why (the last address tried).
        #[source]
        source: NetError,
    },
    /// The TLS handshake failed or the certificate was not accepted.
    #[error("HTTP request: TLS: {0}")]
    Tls(#[source] NetError),
    /// Connecting took longer than the connect timeout.
    #[error("HTTP request: connecting took longer than {after:?} (the run's cap is {setting})")]
    ConnectTimeout {
        /// The time allowed.
        after: Duration,
        /// The run's cap on it, as the run writes it.
        setting: Spelled,
    },
    /// The response's head took longer than the first-byte timeout.
    #[error("HTTP request: no response within {after:?} (the run's cap is {setting})")]
    FirstByteTimeout {
        /// The time allowed.
        after: Duration,
        /// The run's cap on it, as the run writes it.
        setting: Spelled,
    },
    /// The body paused longer than the between-bytes timeout.
    #[error("HTTP response body: nothing for {after:?} (the run's cap is {setting})")]
    BetweenBytesTimeout {
        /// The time allowed.
        after: Duration,
        /// The run's cap on it, as the run writes it.
        setting: Spelled,
    },
    /// The response's head is larger than the run allows.
    #[error("HTTP response head is larger than {limit} bytes; raise it with {setting}")]
    HeaderTooLarge {
        /// The largest head allowed, in bytes.
        limit: usize,
        /// The setting that raises it, as the run writes it.
        setting: Spelled,
    },
    /// The peer broke HTTP, or closed the connection early.
    #[error("HTTP: {0}")]
    Protocol(#[source] hyper::Error),
    /// The request's own body failed (the guest's side).
    #[error("HTTP request body: {0}")]
    RequestBody(String),
}

impl HttpError {
    /// A failed connect: a refused address, a lookup, a bound, or the
    /// connection itself.
    pub(super) fn from_connect(err: NetError, target: &Target) -> HttpError {
        match err {
            NetError::Denied(_)
            | NetError::LimitReached(_)
            | NetError::AuditFailed(_)
            | NetError::NameNotResolved(_)
            | NetError::InvalidArgument(_) => HttpError::from_net(err),
            source => HttpError::Connect {
                host: format!("{}:{}", target.host, target.port),
                source,
            },
        }
    }

    pub(super) fn from_net(err: NetError) -> HttpError {
        match err {
            NetError::Denied(denied) => HttpError::AddressDenied(denied),
            NetError::LimitReached(limit) => HttpError::LimitReached(limit),
            NetError::AuditFailed(why) => HttpError::AuditFailed(why),
            other => HttpError::Lookup(other),
        }
    }
}
