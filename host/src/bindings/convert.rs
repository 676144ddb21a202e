//! Conversions between WIT types and the core's.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::generated::moat::net::types::{
    Capability as WitCapability, Denial, ErrorCode, IpAddress, SocketAddress,
};
use crate::net::{NetError, host_port};
use moat_policy::policy::Capability;
use moat_policy::setting::{Spelling, Worded};

/// Each case with the core's text, naming settings in `spelling`'s words
/// (the run's); where the call named an address, [`call_error`] adds it.
pub(super) fn error_code(err: NetError, spelling: Spelling) -> ErrorCode {
    let text = err.worded(spelling).to_string();
    match err {
        NetError::Denied(denied) => ErrorCode::Denied(Denial {
            capability: match denied.capability {
                Capability::Connect => WitCapability::Connect,
                Capability::Listen => WitCapability::Listen,
            },
            host: denied.host.to_string(),
            port: denied.port,
            message: text,
        }),
        NetError::InvalidArgument(why) => ErrorCode::InvalidArgument(why),
        NetError::InvalidState(why) => ErrorCode::InvalidState(why),
        NetError::NameNotResolved(why) => ErrorCode::NameNotResolved(why),
        NetError::ConnectionRefused => ErrorCode::ConnectionRefused(text),
        NetError::ConnectionReset => ErrorCode::ConnectionReset(text),
        NetError::TimedOut(_) => ErrorCode::TimedOut(text),
        NetError::AddressInUse => ErrorCode::AddressInUse(text),
        NetError::AddressNotAvailable => ErrorCode::AddressNotAvailable(text),
        NetError::Unreachable => ErrorCode::Unreachable(text),
        NetError::Closed => ErrorCode::Closed(text),
        NetError::CertificateUntrusted(why) => ErrorCode::CertificateUntrusted(why),
        NetError::CertificateNameMismatch(why) => ErrorCode::CertificateNameMismatch(why),
        NetError::CertificateExpired(why) => ErrorCode::CertificateExpired(why),
        NetError::TlsHandshake(why) => ErrorCode::TlsHandshake(why),
        NetError::LimitReached(limit) => {
            ErrorCode::LimitReached(limit.worded(spelling).to_string())
        }
        NetError::AuditFailed(why) => ErrorCode::LimitReached(why.worded(spelling).to_string()),
        NetError::AccessDenied(_) | NetError::SecretMisplaced(_) => ErrorCode::AccessDenied(text),
        NetError::DatagramTooLarge => ErrorCode::DatagramTooLarge(text),
        NetError::Other(why) => ErrorCode::Other(why),
    }
}

/// The error of a call that named a host and port (`call` is what it
/// did: "connect to", "listen on"...). A denial reports the host exactly
/// as the guest wrote it; an error whose text would not say which address
/// (`connection refused`, `address in use`, what the operating system
/// reported) is prefixed with the call and the address, as in
/// `connect to 127.0.0.1:9: connection refused`. Texts that already name
/// what failed (a lookup, a timeout, a certificate) are left as they are.
pub(super) fn call_error(
    err: NetError,
    spelling: Spelling,
    call: &str,
    written_host: &str,
    port: u16,
) -> ErrorCode {
    let at = || format!("{call} {}", host_port(written_host, port));
    match error_code(err, spelling) {
        ErrorCode::Denied(denial) => ErrorCode::Denied(Denial {
            host: written_host.to_owned(),
            ..denial
        }),
        ErrorCode::ConnectionRefused(why) => {
            ErrorCode::ConnectionRefused(format!("{}: {why}", at()))
        }
        ErrorCode::ConnectionReset(why) => ErrorCode::ConnectionReset(format!("{}: {why}", at())),
        ErrorCode::AddressInUse(why) => ErrorCode::AddressInUse(format!("{}: {why}", at())),
        ErrorCode::AddressNotAvailable(why) => {
            ErrorCode::AddressNotAvailable(format!("{}: {why}", at()))
        }
        ErrorCode::Unreachable(why) => ErrorCode::Unreachable(format!("{}: {why}", at())),
        ErrorCode::Closed(why) => ErrorCode::Closed(format!("{}: {why}", at())),
        ErrorCode::AccessDenied(why) => ErrorCode::AccessDenied(format!("{}: {why}", at())),
        ErrorCode::DatagramTooLarge(why) => ErrorCode::DatagramTooLarge(format!("{}: {why}", at())),
        ErrorCode::Other(why) => ErrorCode::Other(format!("{}: {why}", at())),
        other => other,
    }
}

impl From<SocketAddr> for SocketAddress {
    fn from(addr: SocketAddr) -> SocketAddress {
        let address = match addr.ip() {
            IpAddr::V4(ip) => {
                let [a, b, c, d] = ip.octets();
                IpAddress::Ipv4((a, b, c, d))
            }
            IpAddr::V6(ip) => {
                let [a, b, c, d, e, f, g, h] = ip.segments();
                IpAddress::Ipv6((a, b, c, d, e, f, g, h))
            }
        };
        SocketAddress {
            address,
            port: addr.port(),
        }
    }
}

impl From<IpAddress> for IpAddr {
    fn from(ip: IpAddress) -> IpAddr {
        match ip {
            IpAddress::Ipv4((a, b, c, d)) => IpAddr::from([a, b, c, d]),
            IpAddress::Ipv6((a, b, c, d, e, f, g, h)) => IpAddr::from([a, b, c, d, e, f, g, h]),
        }
    }
}

impl From<SocketAddress> for SocketAddr {
    fn from(addr: SocketAddress) -> SocketAddr {
        SocketAddr::new(addr.address.into(), addr.port)
    }
}

/// A WIT duration (nanoseconds).
pub(super) fn duration(nanos: u64) -> Duration {
    Duration::from_nanos(nanos)
}

impl super::generated::moat::net::types::Host for super::NetCtxView<'_> {}
