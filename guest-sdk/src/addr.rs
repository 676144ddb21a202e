//! Socket addresses between WIT and `std::net`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::bindings::moat::net::types::{IpAddress, SocketAddress};

/// Conversion of a WIT socket address into [`std::net::SocketAddr`].
pub(crate) trait ToSocketAddr {
    /// The address as `std::net` spells it.
    fn to_socket_addr(&self) -> SocketAddr;
}

impl ToSocketAddr for SocketAddress {
    fn to_socket_addr(&self) -> SocketAddr {
        let ip = match self.address {
            IpAddress::Ipv4((a, b, c, d)) => IpAddr::V4(Ipv4Addr::new(a, b, c, d)),
            IpAddress::Ipv6((a, b, c, d, e, f, g, h)) => {
                IpAddr::V6(Ipv6Addr::new(a, b, c, d, e, f, g, h))
            }
        };
        SocketAddr::new(ip, self.port)
    }
}

/// Splits `HOST:PORT` as people write it on a command line: `127.0.0.1:80`,
/// `example.com:443`, `[::1]:8080` (brackets removed from the host).
///
/// ```
/// assert_eq!(moat_sdk::split_host_port("[::1]:8080"), Some(("::1", 8080)));
/// assert_eq!(moat_sdk::split_host_port("example.com:443"), Some(("example.com", 443)));
/// assert_eq!(moat_sdk::split_host_port("example.com"), None);
/// ```
pub fn split_host_port(text: &str) -> Option<(&str, u16)> {
    let (host, port) = text.rsplit_once(':')?;
    let host = match host.strip_prefix('[') {
        Some(inner) => inner.strip_suffix(']')?,
        None if host.contains(':') => return None,
        None => host,
    };
    Some((host, port.parse().ok()?))
}
