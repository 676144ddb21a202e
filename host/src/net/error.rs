//! The one error type of the socket core, mirroring the WIT `error-code`.

use std::io;

use rustix::io::Errno;

use crate::audit::AuditError;
use moat_policy::policy::{Denied, HostError};
use std::fmt;

use moat_policy::setting::{Setting, Spelling, Worded};

/// Everything a socket operation can fail with. Each case maps to one case
/// of the WIT variant `moat:net/types.error-code`, so a guest can match on
/// it; the embedding API sees the same cases. The cases moat:net 0.2.0 has
/// no case for ([`AccessDenied`](Self::AccessDenied),
/// [`DatagramTooLarge`](Self::DatagramTooLarge)) reach a guest as `other`,
/// with their text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetError {
    /// The policy does not grant the call; nothing was created (and, unless
    /// the denial names a resolved address, nothing was resolved). Boxed:
    /// every socket keeps a `Result<(), NetError>` per direction, and the
    /// denial is the one large case.
    #[error("{0}")]
    Denied(Box<Denied>),
    /// An argument is not acceptable.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The call does not fit the socket's state.
    #[error("invalid state: {0}")]
    InvalidState(String),
    /// A host name could not be resolved.
    #[error("name not resolved: {0}")]
    NameNotResolved(String),
    /// Nothing accepts connections at the address.
    #[error("connection refused")]
    ConnectionRefused,
    /// The peer or the network reset or aborted the connection.
    #[error("connection reset")]
    ConnectionReset,
    /// The operation did not complete in the time allowed: what took too
    /// long, and the run's setting that bounds it, typed. Boxed, as
    /// [`Denied`](Self::Denied) is.
    #[error("{0}")]
    TimedOut(Box<TimedOut>),
    /// The local address is in use.
    #[error("address in use")]
    AddressInUse,
    /// The local address is not available on this machine.
    #[error("address not available")]
    AddressNotAvailable,
    /// No route to the host or network.
    #[error("host or network unreachable")]
    Unreachable,
    /// The socket or listener was closed.
    #[error("the socket is closed")]
    Closed,
    /// TLS: the peer's certificate does not lead to a trusted root.
    #[error("certificate not trusted: {0}")]
    CertificateUntrusted(String),
    /// TLS: the certificate is not valid for the host that was named.
    #[error("certificate name mismatch: {0}")]
    CertificateNameMismatch(String),
    /// TLS: the certificate has expired or is not valid yet.
    #[error("certificate expired: {0}")]
    CertificateExpired(String),
    /// TLS: the handshake failed otherwise.
    #[error("tls handshake failed: {0}")]
    TlsHandshake(String),
    /// A bound of the run was reached: which one, typed, and what was
    /// reached. Boxed, as [`Denied`](Self::Denied) is.
    #[error("limit reached: {0}")]
    LimitReached(Box<LimitReached>),
    /// A secret's placeholder was where the secret may not go: the
    /// request was not sent. Boxed, as [`Denied`](Self::Denied) is.
    #[error("{0}")]
    SecretMisplaced(Box<super::secrets::SecretMisplaced>),
    /// The audit trail could not take the record of the call, so the call
    /// was not made: nothing is done that the trail does not hold.
    #[error("the audit trail failed: {0}")]
    AuditFailed(Box<AuditError>),
    /// The operating system refused the call (EACCES, EPERM: a privileged
    /// port, broadcast without SO_BROADCAST, a firewall rule); moat's
    /// policy allowed it.
    #[error("access denied by the operating system: {0}")]
    AccessDenied(String),
    /// The datagram is longer than the protocol or the path allows
    /// (EMSGSIZE).
    #[error("datagram too large: longer than the protocol or the path allows")]
    DatagramTooLarge,
    /// Anything else the operating system reported.
    #[error("{0}")]
    Other(String),
}

/// A bound of the run that refused a call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct LimitReached {
    /// What was reached, in words: "the run holds 1024 sockets and
    /// listeners".
    pub reached: String,
    /// The setting that raises it; `None` for a fixed cap of moat's that
    /// no setting raises.
    pub setting: Option<Setting>,
}

/// A call that took longer than it was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct TimedOut {
    /// What took too long and which timeout ended it, in words: "lookup of
    /// example.com took longer than 15s, the run's lookup timeout".
    pub what: String,
    /// The run's setting that sets or caps that timeout; `None` for the
    /// call's own timeout or the operating system's.
    pub setting: Option<Setting>,
}

impl Worded for LimitReached {
    /// `the run holds 1024 sockets and listeners; raise it with --max-sockets`.
    fn write_worded(&self, spelling: Spelling, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reached)?;
        match self.setting {
            Some(setting) => write!(f, "; raise it with {}", setting.named(spelling)),
            None => Ok(()),
        }
    }
}

impl Worded for TimedOut {
    /// `lookup of example.com took longer than 15s (--lookup-timeout)`.
    fn write_worded(&self, spelling: Spelling, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)?;
        match self.setting {
            Some(setting) => write!(f, " ({})", setting.named(spelling)),
            None => Ok(()),
        }
    }
}

impl Worded for NetError {
    /// The cases that name a setting or a grant in `spelling`'s words;
    /// every other case as its `Display`.
    fn write_worded(&self, spelling: Spelling, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetError::Denied(denied) => denied.write_worded(spelling, f),
            NetError::TimedOut(timed_out) => timed_out.write_worded(spelling, f),
            NetError::LimitReached(limit) => write!(f, "limit reached: {}", limit.worded(spelling)),
            NetError::AuditFailed(e) => write!(f, "the audit trail failed: {}", e.worded(spelling)),
            other => fmt::Display::fmt(other, f),
        }
    }
}

moat_policy::display_in_embedding_words!(LimitReached, TimedOut);

impl NetError {
    /// A call that took longer than `what` says, under the run's
    /// `setting` (`None`: the call's own timeout).
    pub(crate) fn timed_out(what: impl Into<String>, setting: Option<Setting>) -> NetError {
        NetError::TimedOut(Box::new(TimedOut {
            what: what.into(),
            setting,
        }))
    }

    /// A refusal by the bound `setting`, having reached what `reached`
    /// says.
    pub(crate) fn limit(reached: impl Into<String>, setting: Setting) -> NetError {
        NetError::LimitReached(Box::new(LimitReached {
            reached: reached.into(),
            setting: Some(setting),
        }))
    }

    /// A refusal by a fixed cap of moat's that no setting raises.
    pub(crate) fn fixed_limit(reached: impl Into<String>) -> NetError {
        NetError::LimitReached(Box::new(LimitReached {
            reached: reached.into(),
            setting: None,
        }))
    }

    /// The setting whose bound refused the call or whose timeout ended
    /// it, if the run's setting did.
    pub fn limit_setting(&self) -> Option<Setting> {
        match self {
            NetError::LimitReached(limit) => limit.setting,
            NetError::TimedOut(timed_out) => timed_out.setting,
            _ => None,
        }
    }
}

/// `host:port` as a guest would write it back: an IPv6 literal in brackets.
pub(crate) fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

impl From<Denied> for NetError {
    fn from(denied: Denied) -> NetError {
        NetError::Denied(Box::new(denied))
    }
}

impl From<AuditError> for NetError {
    fn from(err: AuditError) -> NetError {
        NetError::AuditFailed(Box::new(err))
    }
}

impl From<HostError> for NetError {
    fn from(err: HostError) -> NetError {
        NetError::InvalidArgument(err.to_string())
    }
}

impl From<io::Error> for NetError {
    /// By the operating system's error number first, where it says more
    /// than the [`io::ErrorKind`] (by kind, EACCES, EPERM and EMSGSIZE
    /// would all be [`NetError::Other`]); by the kind for the rest.
    fn from(err: io::Error) -> NetError {
        use io::ErrorKind as K;
        const EACCES: i32 = Errno::ACCESS.raw_os_error();
        const EPERM: i32 = Errno::PERM.raw_os_error();
        const EMSGSIZE: i32 = Errno::MSGSIZE.raw_os_error();
        match err.raw_os_error() {
            Some(EACCES | EPERM) => return NetError::AccessDenied(err.to_string()),
            Some(EMSGSIZE) => return NetError::DatagramTooLarge,
            _ => {}
        }
        match err.kind() {
            K::ConnectionRefused => NetError::ConnectionRefused,
            K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::NotConnected => {
                NetError::ConnectionReset
            }
            K::TimedOut => NetError::timed_out(err.to_string(), None),
            K::AddrInUse => NetError::AddressInUse,
            K::AddrNotAvailable => NetError::AddressNotAvailable,
            K::HostUnreachable | K::NetworkUnreachable | K::NetworkDown => NetError::Unreachable,
            K::InvalidInput => NetError::InvalidArgument(err.to_string()),
            _ => NetError::Other(err.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_errors_map_to_the_cases_a_guest_matches() {
        let from = |code| NetError::from(io::Error::from_raw_os_error(code));
        assert_eq!(from(libc_errno::ECONNREFUSED), NetError::ConnectionRefused);
        assert_eq!(from(libc_errno::ECONNRESET), NetError::ConnectionReset);
        assert_eq!(from(libc_errno::EPIPE), NetError::ConnectionReset);
        assert_eq!(from(libc_errno::EADDRINUSE), NetError::AddressInUse);
        assert!(
            matches!(from(libc_errno::ETIMEDOUT), NetError::TimedOut(t) if t.setting.is_none())
        );
        assert_eq!(from(libc_errno::EHOSTUNREACH), NetError::Unreachable);
        assert!(matches!(
            from(libc_errno::EACCES),
            NetError::AccessDenied(why) if why.contains("os error 13")
        ));
        assert!(matches!(
            from(libc_errno::EPERM),
            NetError::AccessDenied(why) if why.contains("os error 1)")
        ));
        assert_eq!(from(libc_errno::EMSGSIZE), NetError::DatagramTooLarge);
        // An error with no number maps by its kind.
        assert_eq!(
            NetError::from(io::Error::new(io::ErrorKind::ConnectionRefused, "made up")),
            NetError::ConnectionRefused
        );
    }

    /// Linux errno values (stable ABI), so the test needs no libc crate.
    mod libc_errno {
        pub const EPERM: i32 = 1;
        pub const EACCES: i32 = 13;
        pub const EPIPE: i32 = 32;
        pub const EMSGSIZE: i32 = 90;
        pub const EADDRINUSE: i32 = 98;
        pub const ECONNRESET: i32 = 104;
        pub const ETIMEDOUT: i32 = 110;
        pub const ECONNREFUSED: i32 = 111;
        pub const EHOSTUNREACH: i32 = 113;
    }
}
