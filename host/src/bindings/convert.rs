//! Conversions between WIT types and the core's.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::generated::moat::net::types::{
    Capability as WitCapability, Denial, ErrorCode, IpAddress, SocketAddress,
};
use crate::net::NetError;
use crate::policy::Capability;

impl From<NetError> for ErrorCode {
    fn from(err: NetError) -> ErrorCode {
        match err {
            NetError::Denied(denied) => ErrorCode::Denied(Denial {
                capability: match denied.capability {
                    Capability::Connect => WitCapability::Connect,
                    Capability::Listen => WitCapability::Listen,
                },
                host: denied.host.to_string(),
                port: denied.port,
                message: denied.to_string(),
            }),
            NetError::InvalidArgument(why) => ErrorCode::InvalidArgument(why),
            NetError::InvalidState(why) => ErrorCode::InvalidState(why),
            NetError::NameNotResolved(why) => ErrorCode::NameNotResolved(why),
            NetError::ConnectionRefused => ErrorCode::ConnectionRefused,
            NetError::ConnectionReset => ErrorCode::ConnectionReset,
            NetError::TimedOut => ErrorCode::TimedOut,
            NetError::AddressInUse => ErrorCode::AddressInUse,
            NetError::AddressNotAvailable => ErrorCode::AddressNotAvailable,
            NetError::Unreachable => ErrorCode::Unreachable,
            NetError::Closed => ErrorCode::Closed,
            NetError::CertificateUntrusted(why) => ErrorCode::CertificateUntrusted(why),
            NetError::CertificateNameMismatch(why) => ErrorCode::CertificateNameMismatch(why),
            NetError::CertificateExpired(why) => ErrorCode::CertificateExpired(why),
            NetError::TlsHandshake(why) => ErrorCode::TlsHandshake(why),
            NetError::LimitReached(why) => ErrorCode::LimitReached(why),
            // moat:net 0.2.0 has no case for these: a guest gets the
            // nearest it has, `other`, with the text saying what happened.
            err @ (NetError::AccessDenied(_) | NetError::DatagramTooLarge) => {
                ErrorCode::Other(err.to_string())
            }
            NetError::Other(why) => ErrorCode::Other(why),
        }
    }
}

/// The error for a `connect` or `listen` call, whose denial reports the
/// host exactly as the guest wrote it.
pub(super) fn call_error(err: NetError, written_host: &str) -> ErrorCode {
    match ErrorCode::from(err) {
        ErrorCode::Denied(denial) => ErrorCode::Denied(Denial {
            host: written_host.to_owned(),
            ..denial
        }),
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

impl super::generated::moat::net::types::Host for super::MoatCtxView<'_> {}
