//! `moat:net@0.2.0`, the released version before the current one, served
//! beside it (`wit/README.md`: a released version never changes, and the
//! host serves every one). Each function converts its arguments to the
//! current version's types, calls the current glue, and converts the
//! result back, so both versions reach the core through the same code.
//!
//! What 0.2.0 cannot say: its connection, timeout, address and `closed`
//! errors carry no text (a 0.2.0 guest gets the case alone), and it has no
//! `access-denied` or `datagram-too-large` (it gets `other`, with the text).
//! Resources are the core's types in both versions, so a socket is the same
//! socket whichever version's functions a guest calls on it.

use wasmtime::component::{Access, Accessor, Resource, StreamReader};

use super::generated::moat::net as now;
use super::{MoatNet, NetCtxView};
use crate::net::{TcpConn, TcpListener, UdpSocket};

/// Generated bindings for `moat:net/imports@0.2.0` (`host/wit/moat-net-0.2.0`).
#[allow(missing_docs)]
pub mod generated {
    moat_net_bindings!("wit/moat-net-0.2.0");
}

use generated::moat::net as old;

type Called<T> = wasmtime::Result<Result<T, old::types::ErrorCode>>;

/// The current glue's result as 0.2.0's.
fn back<T, U: From<T>>(result: wasmtime::Result<Result<T, now::types::ErrorCode>>) -> Called<U> {
    Ok(result?.map(Into::into).map_err(Into::into))
}

// Errors: the current version's cases, each to its 0.2.0 case.

impl From<now::types::ErrorCode> for old::types::ErrorCode {
    fn from(err: now::types::ErrorCode) -> Self {
        use now::types::ErrorCode as Now;
        use old::types::ErrorCode as Old;
        match err {
            Now::Denied(denial) => Old::Denied(old::types::Denial {
                capability: match denial.capability {
                    now::types::Capability::Connect => old::types::Capability::Connect,
                    now::types::Capability::Listen => old::types::Capability::Listen,
                },
                host: denial.host,
                port: denial.port,
                message: denial.message,
            }),
            Now::InvalidArgument(why) => Old::InvalidArgument(why),
            Now::InvalidState(why) => Old::InvalidState(why),
            Now::NameNotResolved(why) => Old::NameNotResolved(why),
            Now::ConnectionRefused(_) => Old::ConnectionRefused,
            Now::ConnectionReset(_) => Old::ConnectionReset,
            Now::TimedOut(_) => Old::TimedOut,
            Now::AddressInUse(_) => Old::AddressInUse,
            Now::AddressNotAvailable(_) => Old::AddressNotAvailable,
            Now::Unreachable(_) => Old::Unreachable,
            Now::Closed(_) => Old::Closed,
            Now::CertificateUntrusted(why) => Old::CertificateUntrusted(why),
            Now::CertificateNameMismatch(why) => Old::CertificateNameMismatch(why),
            Now::CertificateExpired(why) => Old::CertificateExpired(why),
            Now::TlsHandshake(why) => Old::TlsHandshake(why),
            Now::LimitReached(why) => Old::LimitReached(why),
            Now::AccessDenied(why) | Now::DatagramTooLarge(why) | Now::Other(why) => {
                Old::Other(why)
            }
        }
    }
}

// Addresses, both ways.

impl From<now::types::IpAddress> for old::types::IpAddress {
    fn from(ip: now::types::IpAddress) -> Self {
        match ip {
            now::types::IpAddress::Ipv4(octets) => Self::Ipv4(octets),
            now::types::IpAddress::Ipv6(groups) => Self::Ipv6(groups),
        }
    }
}

impl From<old::types::IpAddress> for now::types::IpAddress {
    fn from(ip: old::types::IpAddress) -> Self {
        match ip {
            old::types::IpAddress::Ipv4(octets) => Self::Ipv4(octets),
            old::types::IpAddress::Ipv6(groups) => Self::Ipv6(groups),
        }
    }
}

impl From<now::types::SocketAddress> for old::types::SocketAddress {
    fn from(addr: now::types::SocketAddress) -> Self {
        Self {
            address: addr.address.into(),
            port: addr.port,
        }
    }
}

impl From<old::types::SocketAddress> for now::types::SocketAddress {
    fn from(addr: old::types::SocketAddress) -> Self {
        Self {
            address: addr.address.into(),
            port: addr.port,
        }
    }
}

impl old::types::Host for NetCtxView<'_> {}

// tcp

impl From<old::tcp::Keepalive> for now::tcp::Keepalive {
    fn from(k: old::tcp::Keepalive) -> Self {
        Self {
            idle: k.idle,
            interval: k.interval,
            retries: k.retries,
        }
    }
}

impl From<old::tcp::ConnectOptions> for now::tcp::ConnectOptions {
    fn from(o: old::tcp::ConnectOptions) -> Self {
        Self {
            timeout: o.timeout,
            nodelay: o.nodelay,
            keepalive: o.keepalive.map(Into::into),
            send_buffer_size: o.send_buffer_size,
            receive_buffer_size: o.receive_buffer_size,
        }
    }
}

impl old::tcp::Host for NetCtxView<'_> {}

impl<T: Send> old::tcp::HostWithStore<T> for MoatNet {
    async fn connect(
        store: &Accessor<T, Self>,
        host: String,
        port: u16,
        options: old::tcp::ConnectOptions,
    ) -> Called<Resource<TcpConn>> {
        back(now::tcp::HostWithStore::connect(store, host, port, options.into()).await)
    }
}

impl<T: Send> old::tcp::HostTcpSocketWithStore<T> for MoatNet {
    fn receive(store: Access<'_, T, Self>, socket: Resource<TcpConn>) -> Called<StreamReader<u8>> {
        back(<Self as now::tcp::HostTcpSocketWithStore<T>>::receive(
            store, socket,
        ))
    }

    fn send(
        store: Access<'_, T, Self>,
        socket: Resource<TcpConn>,
        data: StreamReader<u8>,
    ) -> Called<()> {
        back(<Self as now::tcp::HostTcpSocketWithStore<T>>::send(
            store, socket, data,
        ))
    }

    async fn shutdown(store: &Accessor<T, Self>, socket: Resource<TcpConn>) -> Called<()> {
        back(<Self as now::tcp::HostTcpSocketWithStore<T>>::shutdown(store, socket).await)
    }
}

impl old::tcp::HostTcpSocket for NetCtxView<'_> {
    fn receive_outcome(
        &mut self,
        socket: Resource<TcpConn>,
    ) -> wasmtime::Result<Option<Result<(), old::types::ErrorCode>>> {
        let outcome = now::tcp::HostTcpSocket::receive_outcome(self, socket)?;
        Ok(outcome.map(|end| end.map_err(Into::into)))
    }

    fn send_outcome(
        &mut self,
        socket: Resource<TcpConn>,
    ) -> wasmtime::Result<Option<Result<(), old::types::ErrorCode>>> {
        let outcome = now::tcp::HostTcpSocket::send_outcome(self, socket)?;
        Ok(outcome.map(|end| end.map_err(Into::into)))
    }

    fn local_address(&mut self, socket: Resource<TcpConn>) -> Called<old::types::SocketAddress> {
        back(now::tcp::HostTcpSocket::local_address(self, socket))
    }

    fn remote_address(&mut self, socket: Resource<TcpConn>) -> Called<old::types::SocketAddress> {
        back(now::tcp::HostTcpSocket::remote_address(self, socket))
    }

    fn set_nodelay(&mut self, socket: Resource<TcpConn>, enabled: bool) -> Called<()> {
        back(now::tcp::HostTcpSocket::set_nodelay(self, socket, enabled))
    }

    fn set_keepalive(
        &mut self,
        socket: Resource<TcpConn>,
        config: Option<old::tcp::Keepalive>,
    ) -> Called<()> {
        back(now::tcp::HostTcpSocket::set_keepalive(
            self,
            socket,
            config.map(Into::into),
        ))
    }

    fn drop(&mut self, socket: Resource<TcpConn>) -> wasmtime::Result<()> {
        now::tcp::HostTcpSocket::drop(self, socket)
    }
}

// listen

impl From<old::listen::ListenOptions> for now::listen::ListenOptions {
    fn from(o: old::listen::ListenOptions) -> Self {
        Self {
            backlog: o.backlog,
            send_buffer_size: o.send_buffer_size,
            receive_buffer_size: o.receive_buffer_size,
            max_connections: o.max_connections,
            max_connections_per_peer: o.max_connections_per_peer,
        }
    }
}

impl From<now::listen::Accepted> for old::listen::Accepted {
    fn from(a: now::listen::Accepted) -> Self {
        Self {
            socket: a.socket,
            remote_address: a.remote_address.into(),
        }
    }
}

impl old::listen::Host for NetCtxView<'_> {}

impl<T: Send> old::listen::HostWithStore<T> for MoatNet {
    async fn listen(
        store: &Accessor<T, Self>,
        host: String,
        port: u16,
        options: old::listen::ListenOptions,
    ) -> Called<Resource<TcpListener>> {
        back(now::listen::HostWithStore::listen(store, host, port, options.into()).await)
    }
}

impl<T: Send> old::listen::HostListenerWithStore<T> for MoatNet {
    async fn accept(
        store: &Accessor<T, Self>,
        listener: Resource<TcpListener>,
    ) -> Called<Option<old::listen::Accepted>> {
        let accepted =
            <Self as now::listen::HostListenerWithStore<T>>::accept(store, listener).await?;
        Ok(accepted.map(|a| a.map(Into::into)).map_err(Into::into))
    }

    async fn close(
        store: &Accessor<T, Self>,
        listener: Resource<TcpListener>,
    ) -> wasmtime::Result<()> {
        <Self as now::listen::HostListenerWithStore<T>>::close(store, listener).await
    }
}

impl old::listen::HostListener for NetCtxView<'_> {
    fn local_address(
        &mut self,
        listener: Resource<TcpListener>,
    ) -> Called<old::types::SocketAddress> {
        back(now::listen::HostListener::local_address(self, listener))
    }

    fn drop(&mut self, listener: Resource<TcpListener>) -> wasmtime::Result<()> {
        now::listen::HostListener::drop(self, listener)
    }
}

// tls

impl From<old::tls::Identity> for now::tls::Identity {
    fn from(id: old::tls::Identity) -> Self {
        Self {
            certificate_chain: id.certificate_chain,
            private_key: id.private_key,
        }
    }
}

impl From<old::tls::ClientOptions> for now::tls::ClientOptions {
    fn from(o: old::tls::ClientOptions) -> Self {
        Self {
            alpn: o.alpn,
            extra_roots: o.extra_roots,
            client_identity: o.client_identity.map(Into::into),
        }
    }
}

impl From<old::tls::ServerOptions> for now::tls::ServerOptions {
    fn from(o: old::tls::ServerOptions) -> Self {
        Self {
            identity: o.identity.into(),
            alpn: o.alpn,
            client_roots: o.client_roots,
            handshake_timeout: o.handshake_timeout,
        }
    }
}

impl old::tls::Host for NetCtxView<'_> {
    fn alpn_protocol(&mut self, socket: Resource<TcpConn>) -> wasmtime::Result<Option<String>> {
        now::tls::Host::alpn_protocol(self, socket)
    }

    fn is_tls(&mut self, socket: Resource<TcpConn>) -> wasmtime::Result<bool> {
        now::tls::Host::is_tls(self, socket)
    }
}

impl<T: Send> old::tls::HostWithStore<T> for MoatNet {
    async fn connect(
        store: &Accessor<T, Self>,
        host: String,
        port: u16,
        options: old::tcp::ConnectOptions,
        tls: old::tls::ClientOptions,
    ) -> Called<Resource<TcpConn>> {
        let (options, tls) = (options.into(), tls.into());
        back(now::tls::HostWithStore::connect(store, host, port, options, tls).await)
    }

    async fn listen(
        store: &Accessor<T, Self>,
        host: String,
        port: u16,
        options: old::listen::ListenOptions,
        tls: old::tls::ServerOptions,
    ) -> Called<Resource<TcpListener>> {
        let (options, tls) = (options.into(), tls.into());
        back(now::tls::HostWithStore::listen(store, host, port, options, tls).await)
    }

    async fn upgrade_client(
        store: &Accessor<T, Self>,
        socket: Resource<TcpConn>,
        server_name: String,
        already_read: Vec<u8>,
        tls: old::tls::ClientOptions,
    ) -> Called<()> {
        let upgraded = now::tls::HostWithStore::upgrade_client(
            store,
            socket,
            server_name,
            already_read,
            tls.into(),
        );
        back(upgraded.await)
    }

    async fn upgrade_server(
        store: &Accessor<T, Self>,
        socket: Resource<TcpConn>,
        already_read: Vec<u8>,
        tls: old::tls::ServerOptions,
    ) -> Called<()> {
        back(now::tls::HostWithStore::upgrade_server(store, socket, already_read, tls.into()).await)
    }
}

// udp

impl From<old::udp::BindOptions> for now::udp::BindOptions {
    fn from(o: old::udp::BindOptions) -> Self {
        Self {
            reuse_address: o.reuse_address,
            reuse_port: o.reuse_port,
            ttl: o.ttl,
            multicast_ttl: o.multicast_ttl,
            multicast_loopback: o.multicast_loopback,
            broadcast: o.broadcast,
        }
    }
}

impl From<old::udp::OutgoingDatagram> for now::udp::OutgoingDatagram {
    fn from(d: old::udp::OutgoingDatagram) -> Self {
        Self {
            data: d.data,
            host: d.host,
            port: d.port,
        }
    }
}

impl From<now::udp::Datagram> for old::udp::Datagram {
    fn from(d: now::udp::Datagram) -> Self {
        Self {
            data: d.data,
            remote_address: d.remote_address.into(),
            truncated: d.truncated,
        }
    }
}

impl From<old::udp::MulticastInterface> for now::udp::MulticastInterface {
    fn from(i: old::udp::MulticastInterface) -> Self {
        match i {
            old::udp::MulticastInterface::Any => Self::Any,
            old::udp::MulticastInterface::Address(ip) => Self::Address(ip.into()),
            old::udp::MulticastInterface::Index(index) => Self::Index(index),
        }
    }
}

impl old::udp::Host for NetCtxView<'_> {}

impl<T: Send> old::udp::HostWithStore<T> for MoatNet {
    async fn bind(
        store: &Accessor<T, Self>,
        host: String,
        port: u16,
        options: old::udp::BindOptions,
    ) -> Called<Resource<UdpSocket>> {
        back(now::udp::HostWithStore::bind(store, host, port, options.into()).await)
    }
}

impl<T: Send> old::udp::HostUdpSocketWithStore<T> for MoatNet {
    async fn send(
        store: &Accessor<T, Self>,
        socket: Resource<UdpSocket>,
        data: Vec<u8>,
        host: String,
        port: u16,
    ) -> Called<()> {
        back(
            <Self as now::udp::HostUdpSocketWithStore<T>>::send(store, socket, data, host, port)
                .await,
        )
    }

    async fn send_to(
        store: &Accessor<T, Self>,
        socket: Resource<UdpSocket>,
        data: Vec<u8>,
        remote: old::types::SocketAddress,
    ) -> Called<()> {
        let sent = <Self as now::udp::HostUdpSocketWithStore<T>>::send_to(
            store,
            socket,
            data,
            remote.into(),
        );
        back(sent.await)
    }

    async fn send_many(
        store: &Accessor<T, Self>,
        socket: Resource<UdpSocket>,
        datagrams: Vec<old::udp::OutgoingDatagram>,
    ) -> Called<(u32, Option<old::types::ErrorCode>)> {
        let datagrams = datagrams.into_iter().map(Into::into).collect();
        let sent =
            <Self as now::udp::HostUdpSocketWithStore<T>>::send_many(store, socket, datagrams)
                .await?;
        Ok(sent
            .map(|(count, failed)| (count, failed.map(Into::into)))
            .map_err(Into::into))
    }

    async fn receive(
        store: &Accessor<T, Self>,
        socket: Resource<UdpSocket>,
    ) -> Called<old::udp::Datagram> {
        back(<Self as now::udp::HostUdpSocketWithStore<T>>::receive(store, socket).await)
    }

    async fn receive_many(
        store: &Accessor<T, Self>,
        socket: Resource<UdpSocket>,
        max: u32,
    ) -> Called<Vec<old::udp::Datagram>> {
        let received =
            <Self as now::udp::HostUdpSocketWithStore<T>>::receive_many(store, socket, max).await?;
        Ok(received
            .map(|all| all.into_iter().map(Into::into).collect())
            .map_err(Into::into))
    }
}

impl old::udp::HostUdpSocket for NetCtxView<'_> {
    fn join_multicast(
        &mut self,
        socket: Resource<UdpSocket>,
        group: old::types::IpAddress,
        on: old::udp::MulticastInterface,
    ) -> Called<()> {
        back(now::udp::HostUdpSocket::join_multicast(
            self,
            socket,
            group.into(),
            on.into(),
        ))
    }

    fn leave_multicast(
        &mut self,
        socket: Resource<UdpSocket>,
        group: old::types::IpAddress,
        on: old::udp::MulticastInterface,
    ) -> Called<()> {
        back(now::udp::HostUdpSocket::leave_multicast(
            self,
            socket,
            group.into(),
            on.into(),
        ))
    }

    fn local_address(&mut self, socket: Resource<UdpSocket>) -> Called<old::types::SocketAddress> {
        back(now::udp::HostUdpSocket::local_address(self, socket))
    }

    fn close(&mut self, socket: Resource<UdpSocket>) -> wasmtime::Result<()> {
        now::udp::HostUdpSocket::close(self, socket)
    }

    fn drop(&mut self, socket: Resource<UdpSocket>) -> wasmtime::Result<()> {
        now::udp::HostUdpSocket::drop(self, socket)
    }
}
