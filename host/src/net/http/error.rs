//! What a guest may ask of one request, and why a request fails:
//! [`HttpRequestOptions`], [`HttpError`].

use std::fmt;
use std::time::Duration;

use super::Target;
use crate::audit::AuditError;
use crate::net::error::{LimitReached, NetError};
use crate::net::secrets::SecretMisplaced;
use moat_policy::policy::Denied;
use moat_policy::setting::{Setting, Spelling, Worded};

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
/// `error-code`, and says which setting or grant would change it (in the
/// words the edge that shows it renders, [`Worded`]).
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The request's URI has no authority, or an empty one.
    NoAuthority(&'static str),
    /// The authority is not a host moat can judge (`127.1`, a bad IPv6
    /// literal, a port out of range).
    BadAuthority {
        /// The authority as written.
        authority: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A scheme other than `http` and `https`.
    Scheme(String),
    /// The host as written is not granted, or a deny entry names it.
    Denied(Box<Denied>),
    /// Every address the name resolved to is refused by a deny entry.
    AddressDenied(Box<Denied>),
    /// A secret's placeholder is where the secret may not go; nothing
    /// was sent (or, found in the body, nothing more).
    SecretMisplaced(#[source] Box<SecretMisplaced>),
    /// A bound of the run: requests in flight, sockets, host memory.
    LimitReached(#[source] Box<LimitReached>),
    /// The audit trail could not take the record of the request.
    AuditFailed(Box<AuditError>),
    /// The name could not be resolved.
    Lookup(#[source] NetError),
    /// Connecting failed (refused, unreachable, reset, timed out).
    Connect {
        /// The host and port as written.
        host: String,
        /// Why (the last address tried).
        #[source]
        source: NetError,
    },
    /// The TLS handshake failed or the certificate was not accepted.
    Tls(#[source] NetError),
    /// Connecting took longer than the connect timeout.
    ConnectTimeout {
        /// The time allowed.
        after: Duration,
        /// The run's cap on it.
        setting: Setting,
    },
    /// The response's head took longer than the first-byte timeout.
    FirstByteTimeout {
        /// The time allowed.
        after: Duration,
        /// The run's cap on it.
        setting: Setting,
    },
    /// The body paused longer than the between-bytes timeout.
    BetweenBytesTimeout {
        /// The time allowed.
        after: Duration,
        /// The run's cap on it.
        setting: Setting,
    },
    /// The response's head is larger than the run allows.
    HeaderTooLarge {
        /// The largest head allowed, in bytes.
        limit: usize,
        /// The setting that raises it.
        setting: Setting,
    },
    /// The peer broke HTTP, or closed the connection early.
    Protocol(#[source] hyper::Error),
    /// The request's own body failed (the guest's side).
    RequestBody(String),
}

impl Worded for HttpError {
    fn write_worded(&self, spelling: Spelling, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpError::NoAuthority(what) => write!(
                f,
                "HTTP request denied: it names no host (its URI has {what} authority); \
                 moat judges the URI's authority, never the Host header"
            ),
            HttpError::BadAuthority { authority, reason } => {
                write!(f, "HTTP request to {authority} denied: {reason}")
            }
            HttpError::Scheme(scheme) => write!(
                f,
                "HTTP request with scheme {scheme} denied: moat sends http and https only"
            ),
            HttpError::Denied(denied) | HttpError::AddressDenied(denied) => {
                write!(f, "HTTP request: {}", denied.worded(spelling))
            }
            HttpError::SecretMisplaced(misplaced) => write!(f, "HTTP request denied: {misplaced}"),
            HttpError::LimitReached(limit) => {
                write!(f, "HTTP request refused: {}", limit.worded(spelling))
            }
            HttpError::AuditFailed(why) => write!(
                f,
                "HTTP request refused: the audit trail failed: {}",
                why.worded(spelling)
            ),
            HttpError::Lookup(e) => {
                write!(f, "HTTP request: name not resolved: {}", e.worded(spelling))
            }
            HttpError::Connect { host, source } => write!(
                f,
                "HTTP request: connect to {host} failed: {}",
                source.worded(spelling)
            ),
            HttpError::Tls(e) => write!(f, "HTTP request: TLS: {}", e.worded(spelling)),
            HttpError::ConnectTimeout { after, setting } => write!(
                f,
                "HTTP request: connecting took longer than {after:?} (the run's cap is {})",
                setting.named(spelling)
            ),
            HttpError::FirstByteTimeout { after, setting } => write!(
                f,
                "HTTP request: no response within {after:?} (the run's cap is {})",
                setting.named(spelling)
            ),
            HttpError::BetweenBytesTimeout { after, setting } => write!(
                f,
                "HTTP response body: nothing for {after:?} (the run's cap is {})",
                setting.named(spelling)
            ),
            HttpError::HeaderTooLarge { limit, setting } => write!(
                f,
                "HTTP response head is larger than {limit} bytes; raise it with {}",
                setting.named(spelling)
            ),
            HttpError::Protocol(e) => write!(f, "HTTP: {e}"),
            HttpError::RequestBody(why) => write!(f, "HTTP request body: {why}"),
        }
    }
}

moat_policy::display_in_embedding_words!(HttpError);

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
            NetError::SecretMisplaced(misplaced) => HttpError::SecretMisplaced(misplaced),
            other => HttpError::Lookup(other),
        }
    }
}
