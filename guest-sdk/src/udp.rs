//! UDP sockets.

use std::net::{IpAddr, SocketAddr};

use crate::addr::{ToHostPort, ToSocketAddr};
use crate::bindings::moat::net::types::{IpAddress, SocketAddress};
use crate::bindings::moat::net::udp::{self, OutgoingDatagram};
use crate::error::Error;
use crate::task::consume_budget;

/// Options for [`UdpSocket::bind_with`], set at the bind and only there.
///
/// ```no_run
/// use moat_sdk::{UdpBindOptions, UdpSocket};
///
/// # async fn demo() -> Result<(), moat_sdk::Error> {
/// let options = UdpBindOptions { reuse_address: true, multicast_ttl: Some(4), ..Default::default() };
/// let socket = UdpSocket::bind_with("0.0.0.0:5353", &options).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UdpBindOptions {
    /// SO_REUSEADDR. With this or `reuse_port` the bind fails with
    /// address-in-use on a port any socket holds: sharing a UDP port would
    /// take the datagrams meant for the socket already there.
    pub reuse_address: bool,
    /// SO_REUSEPORT; as `reuse_address`.
    pub reuse_port: bool,
    /// Hop limit of unicast datagrams.
    pub ttl: Option<u8>,
    /// Hop limit of multicast datagrams.
    pub multicast_ttl: Option<u8>,
    /// Whether this host's own multicast datagrams come back.
    pub multicast_loopback: Option<bool>,
    /// SO_BROADCAST ([`Error::InvalidArgument`] on IPv6, which has none).
    pub broadcast: bool,
}

/// A datagram received.
///
/// ```no_run
/// # async fn demo(socket: &moat_sdk::UdpSocket) -> Result<(), moat_sdk::Error> {
/// let datagram = socket.recv().await?;
/// if datagram.truncated {
///     eprintln!("{} sent more than fits in one datagram buffer", datagram.from);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    /// The payload.
    pub data: Vec<u8>,
    /// The sender.
    pub from: SocketAddr,
    /// It did not fit (longer than 65,507 bytes): the rest is gone.
    pub truncated: bool,
}

/// The interface of a multicast membership.
///
/// ```no_run
/// use moat_sdk::MulticastInterface;
/// # fn demo(socket: &moat_sdk::UdpSocket) -> Result<(), moat_sdk::Error> {
/// // IPv4 groups name their interface by address, IPv6 groups by index.
/// socket.join_multicast("239.255.0.1".parse().unwrap(), MulticastInterface::Address("127.0.0.1".parse().unwrap()))?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MulticastInterface {
    /// The system's choice.
    Any,
    /// An IPv4 interface, by one of its addresses.
    Address(IpAddr),
    /// An IPv6 interface, by index.
    Index(u32),
}

fn ip(addr: IpAddr) -> IpAddress {
    match addr {
        IpAddr::V4(v4) => {
            let [a, b, c, d] = v4.octets();
            IpAddress::Ipv4((a, b, c, d))
        }
        IpAddr::V6(v6) => {
            let [a, b, c, d, e, f, g, h] = v6.segments();
            IpAddress::Ipv6((a, b, c, d, e, f, g, h))
        }
    }
}

impl From<MulticastInterface> for udp::MulticastInterface {
    fn from(i: MulticastInterface) -> udp::MulticastInterface {
        match i {
            MulticastInterface::Any => udp::MulticastInterface::Any,
            MulticastInterface::Address(addr) => udp::MulticastInterface::Address(ip(addr)),
            MulticastInterface::Index(index) => udp::MulticastInterface::Index(index),
        }
    }
}

fn datagram(d: udp::Datagram) -> Datagram {
    Datagram {
        data: d.data,
        from: d.remote_address.to_socket_addr(),
        truncated: d.truncated,
    }
}

/// A UDP socket: a server and a client at once, so it needs both grants
/// (`--allow-listen` for its own address, `--allow-net` for every
/// destination, checked on each send).
///
/// ```no_run
/// use moat_sdk::UdpSocket;
///
/// # async fn demo() -> Result<(), moat_sdk::Error> {
/// let socket = UdpSocket::bind("127.0.0.1:9000").await?;
/// loop {
///     let datagram = socket.recv().await?;
///     socket.send_to_addr(&datagram.data, datagram.from).await?;
/// }
/// # }
/// ```
pub struct UdpSocket {
    socket: udp::UdpSocket,
}

impl UdpSocket {
    /// Binds to `addr` (`"127.0.0.1:9000"`, `("::", 0)`, ...; see
    /// [`ToHostPort`]; port 0: any free port).
    ///
    /// # Errors
    /// [`Error::Denied`] without the listen grant for it (port 0 included);
    /// [`Error::AddressInUse`], naming the address; ...
    pub async fn bind(addr: impl ToHostPort) -> Result<UdpSocket, Error> {
        UdpSocket::bind_with(addr, &UdpBindOptions::default()).await
    }

    /// [`bind`](Self::bind) with options.
    ///
    /// # Errors
    /// As [`bind`](Self::bind); [`Error::InvalidArgument`] for broadcast on IPv6.
    pub async fn bind_with(
        addr: impl ToHostPort,
        options: &UdpBindOptions,
    ) -> Result<UdpSocket, Error> {
        let (host, port) = addr.to_host_port()?;
        let options = udp::BindOptions {
            reuse_address: options.reuse_address,
            reuse_port: options.reuse_port,
            ttl: options.ttl,
            multicast_ttl: options.multicast_ttl,
            multicast_loopback: options.multicast_loopback,
            broadcast: options.broadcast,
        };
        match udp::bind(host.clone(), port, options).await {
            Ok(socket) => Ok(UdpSocket { socket }),
            Err(code) => Err(code.into()),
        }
    }

    /// Sends `data` (may be empty) to `target` (`"example.com:53"`,
    /// `("example.com", 53)`, ...; see [`ToHostPort`]), the host judged as
    /// written.
    ///
    /// # Errors
    /// [`Error::Denied`] (nothing sent); [`Error::InvalidArgument`] for a
    /// datagram too long; ...
    pub async fn send_to(&self, data: &[u8], target: impl ToHostPort) -> Result<(), Error> {
        consume_budget().await;
        let (host, port) = target.to_host_port()?;
        match self.socket.send(data.to_vec(), host.clone(), port).await {
            Ok(()) => Ok(()),
            Err(code) => Err(code.into()),
        }
    }

    /// Sends `data` to `to`, an address (a received datagram's `from`, to
    /// answer it), judged by the host's policy as the IP literal it is.
    ///
    /// # Errors
    /// As [`send_to`](Self::send_to).
    pub async fn send_to_addr(&self, data: &[u8], to: SocketAddr) -> Result<(), Error> {
        let remote = SocketAddress {
            address: ip(to.ip()),
            port: to.port(),
        };
        consume_budget().await;
        Ok(self.socket.send_to(data.to_vec(), remote).await?)
    }

    /// Sends a batch, in order, each `(data, host, port)`. If any
    /// destination is denied, nothing is sent. Returns how many were sent
    /// (all, unless one failed: then the error says why the next was not).
    ///
    /// # Errors
    /// [`Error::Denied`] for any destination, with nothing sent.
    pub async fn send_many(
        &self,
        datagrams: Vec<(Vec<u8>, String, u16)>,
    ) -> Result<(usize, Option<Error>), Error> {
        let batch = datagrams
            .into_iter()
            .map(|(data, host, port)| OutgoingDatagram { data, host, port })
            .collect();
        let (sent, failed) = self.socket.send_many(batch).await?;
        Ok((sent as usize, failed.map(Error::from)))
    }

    /// Waits for the next datagram.
    ///
    /// # Errors
    /// [`Error::Closed`] once the socket is closed.
    ///
    /// # Cancel safety
    /// Cancel-safe: no datagram is taken unless returned.
    pub async fn recv(&self) -> Result<Datagram, Error> {
        consume_budget().await;
        Ok(datagram(self.socket.receive().await?))
    }

    /// Waits for the first datagram, then returns up to `max - 1` more that
    /// are already queued.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `max` 0; as [`recv`](Self::recv).
    pub async fn recv_many(&self, max: u32) -> Result<Vec<Datagram>, Error> {
        consume_budget().await;
        Ok(self
            .socket
            .receive_many(max)
            .await?
            .into_iter()
            .map(datagram)
            .collect())
    }

    /// Joins multicast `group` on `interface`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a group or interface of the wrong family.
    pub fn join_multicast(
        &self,
        group: IpAddr,
        interface: MulticastInterface,
    ) -> Result<(), Error> {
        Ok(self.socket.join_multicast(ip(group), interface.into())?)
    }

    /// Leaves multicast `group` on `interface`.
    ///
    /// # Errors
    /// As [`join_multicast`](Self::join_multicast).
    pub fn leave_multicast(
        &self,
        group: IpAddr,
        interface: MulticastInterface,
    ) -> Result<(), Error> {
        Ok(self.socket.leave_multicast(ip(group), interface.into())?)
    }

    /// The bound address.
    ///
    /// # Errors
    /// [`Error::Closed`] after [`close`](Self::close).
    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        Ok(self.socket.local_address()?.to_socket_addr())
    }

    /// Closes the socket; receives waiting now or later fail with
    /// [`Error::Closed`].
    pub fn close(&self) {
        self.socket.close();
    }
}
