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
/// assert_eq!(moat_sdk::split_host_port("[::1]:8080"), Some("::1:8080"));
/// assert_eq!(moat_sdk::split_host_port("example.com:443"), Some("example.com:443"));
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

/// Where to connect, bind or send: what [`TcpStream::connect`],
/// [`TcpListener::bind`] and [`UdpSocket::send_to`] take, as tokio's
/// `ToSocketAddrs` is.
///
/// - `"example.com:443"`, `"127.0.0.1:80"`, `"[::1]:8080"`: a string
///   `HOST:PORT` (brackets around an IPv6 host);
/// - `("example.com", 443)`: a host and a port;
/// - a [`SocketAddr`], or `(IpAddr, u16)`.
///
/// The host goes to moat's policy exactly as written: a name stays a name
/// (it is resolved by the host, after the policy allowed it).
///
/// ```no_run
/// use moat_sdk::TcpStream;
/// # async fn demo() -> Result<(), moat_sdk::Error> {
/// let a = TcpStream::connect("example.com:80").await?;
/// let b = TcpStream::connect("example.com:80").await?;
/// let c = TcpStream::connect("127.0.0.1:80".parse::<std::net::SocketAddr>().unwrap()).await?;
/// # Ok(())
/// # }
/// ```
///
/// [`TcpStream::connect`]: crate::TcpStream::connect
/// [`TcpListener::bind`]: crate::TcpListener::bind
/// [`UdpSocket::send_to`]: crate::UdpSocket::send_to
pub trait ToHostPort: sealed::Sealed {
    /// The host as written and the port.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a
    /// string that is not `HOST:PORT`.
    fn to_host_port(&self) -> Result<(String, u16), crate::Error>;
}

mod sealed {
    pub trait Sealed {}
}

impl sealed::Sealed for str {}
impl ToHostPort for str {
    fn to_host_port(&self) -> Result<(String, u16), crate::Error> {
        match split_host_port(self) {
            Some((host, port)) if !host.is_empty() => Ok((host.to_owned(), port)),
            _ => Err(crate::Error::InvalidArgument(format!(
                "{self:?} is not HOST:PORT (examples: \"example.com:443\", \"127.0.0.1:80\", \"[::1]:8080\")"
            ))),
        }
    }
}

impl sealed::Sealed for String {}
impl ToHostPort for String {
    fn to_host_port(&self) -> Result<(String, u16), crate::Error> {
        self.as_str().to_host_port()
    }
}

impl sealed::Sealed for (&str, u16) {}
impl ToHostPort for (&str, u16) {
    fn to_host_port(&self) -> Result<(String, u16), crate::Error> {
        Ok((self.0.to_owned(), self.1))
    }
}

impl sealed::Sealed for (String, u16) {}
impl ToHostPort for (String, u16) {
    fn to_host_port(&self) -> Result<(String, u16), crate::Error> {
        Ok((self.0.clone(), self.1))
    }
}

impl sealed::Sealed for (&String, u16) {}
impl ToHostPort for (&String, u16) {
    fn to_host_port(&self) -> Result<(String, u16), crate::Error> {
        Ok((self.0.clone(), self.1))
    }
}

impl sealed::Sealed for (IpAddr, u16) {}
impl ToHostPort for (IpAddr, u16) {
    fn to_host_port(&self) -> Result<(String, u16), crate::Error> {
        Ok((self.0.to_string(), self.1))
    }
}

impl sealed::Sealed for SocketAddr {}
impl ToHostPort for SocketAddr {
    fn to_host_port(&self) -> Result<(String, u16), crate::Error> {
        Ok((self.ip().to_string(), self.port()))
    }
}

impl<T: ToHostPort + ?Sized> sealed::Sealed for &T {}
impl<T: ToHostPort + ?Sized> ToHostPort for &T {
    fn to_host_port(&self) -> Result<(String, u16), crate::Error> {
        (**self).to_host_port()
    }
}
