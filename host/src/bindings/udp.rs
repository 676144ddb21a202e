//! `moat:net/udp` over [`crate::net::UdpSocket`].

use wasmtime::component::{Accessor, Resource};

use super::convert::{call_error, error_code};
use super::generated::moat::net::types::{ErrorCode, IpAddress, SocketAddress};
use super::generated::moat::net::udp::{
    BindOptions, Datagram, Host, HostUdpSocket, HostUdpSocketWithStore, HostWithStore,
    MulticastInterface, OutgoingDatagram,
};
use super::{MoatNet, NetCtxView, words};
use crate::net::{self, UdpSocket};

fn datagram(d: net::Datagram) -> Datagram {
    Datagram {
        data: d.data,
        remote_address: d.from.into(),
        truncated: d.truncated,
    }
}

fn interface(i: MulticastInterface) -> net::MulticastInterface {
    match i {
        MulticastInterface::Any => net::MulticastInterface::Any,
        MulticastInterface::Address(ip) => net::MulticastInterface::Address(ip.into()),
        MulticastInterface::Index(index) => net::MulticastInterface::Index(index),
    }
}

/// The socket behind `socket`, as a handle an async call can hold.
fn handle<T>(
    store: &Accessor<T, MoatNet>,
    socket: &Resource<UdpSocket>,
) -> wasmtime::Result<UdpSocket> {
    store.with(|mut access| Ok(access.get().table.get(socket)?.clone()))
}

impl Host for NetCtxView<'_> {}

impl<T: Send> HostWithStore<T> for MoatNet {
    async fn bind(
        store: &Accessor<T, Self>,
        host: String,
        port: u16,
        options: BindOptions,
    ) -> wasmtime::Result<Result<Resource<UdpSocket>, ErrorCode>> {
        let net = store.with(|mut access| access.get().net.clone());
        let options = net::BindOptions {
            reuse_address: options.reuse_address,
            reuse_port: options.reuse_port,
            ttl: options.ttl,
            multicast_ttl: options.multicast_ttl,
            multicast_loopback: options.multicast_loopback,
            broadcast: options.broadcast,
        };
        match net.bind_udp(&host, port, &options).await {
            Ok(socket) => Ok(Ok(store.with(|mut access| access.get().table.push(socket))?)),
            Err(err) => Ok(Err(call_error(err, net.words(), "bind to", &host, port))),
        }
    }
}

impl<T: Send> HostUdpSocketWithStore<T> for MoatNet {
    async fn send(
        store: &Accessor<T, Self>,
        socket: Resource<UdpSocket>,
        data: Vec<u8>,
        host: String,
        port: u16,
    ) -> wasmtime::Result<Result<(), ErrorCode>> {
        let socket = handle(store, &socket)?;
        Ok(socket
            .send(&data, &host, port)
            .await
            .map_err(|e| call_error(e, words(store), "send to", &host, port)))
    }

    async fn send_to(
        store: &Accessor<T, Self>,
        socket: Resource<UdpSocket>,
        data: Vec<u8>,
        remote: SocketAddress,
    ) -> wasmtime::Result<Result<(), ErrorCode>> {
        let socket = handle(store, &socket)?;
        Ok(socket
            .send_to_addr(&data, remote.into())
            .await
            .map_err(|e| error_code(e, words(store))))
    }

    async fn send_many(
        store: &Accessor<T, Self>,
        socket: Resource<UdpSocket>,
        datagrams: Vec<OutgoingDatagram>,
    ) -> wasmtime::Result<Result<(u32, Option<ErrorCode>), ErrorCode>> {
        let socket = handle(store, &socket)?;
        let batch: Vec<_> = datagrams
            .into_iter()
            .map(|d| (d.data, d.host, d.port))
            .collect();
        Ok(match socket.send_many(&batch).await {
            Ok((sent, failed)) => Ok((
                u32::try_from(sent).unwrap_or(u32::MAX),
                failed.map(|e| error_code(e, words(store))),
            )),
            Err(err) => Err(error_code(err, words(store))),
        })
    }

    async fn receive(
        store: &Accessor<T, Self>,
        socket: Resource<UdpSocket>,
    ) -> wasmtime::Result<Result<Datagram, ErrorCode>> {
        let socket = handle(store, &socket)?;
        Ok(socket
            .receive()
            .await
            .map(datagram)
            .map_err(|e| error_code(e, words(store))))
    }

    async fn receive_many(
        store: &Accessor<T, Self>,
        socket: Resource<UdpSocket>,
        max: u32,
    ) -> wasmtime::Result<Result<Vec<Datagram>, ErrorCode>> {
        let socket = handle(store, &socket)?;
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        Ok(socket
            .receive_many(max)
            .await
            .map(|all| all.into_iter().map(datagram).collect())
            .map_err(|e| error_code(e, words(store))))
    }
}

impl HostUdpSocket for NetCtxView<'_> {
    fn join_multicast(
        &mut self,
        socket: Resource<UdpSocket>,
        group: IpAddress,
        on: MulticastInterface,
    ) -> wasmtime::Result<Result<(), ErrorCode>> {
        let socket = self.table.get(&socket)?;
        Ok(socket
            .join_multicast(group.into(), interface(on))
            .map_err(|e| self.code(e)))
    }

    fn leave_multicast(
        &mut self,
        socket: Resource<UdpSocket>,
        group: IpAddress,
        on: MulticastInterface,
    ) -> wasmtime::Result<Result<(), ErrorCode>> {
        let socket = self.table.get(&socket)?;
        Ok(socket
            .leave_multicast(group.into(), interface(on))
            .map_err(|e| self.code(e)))
    }

    fn local_address(
        &mut self,
        socket: Resource<UdpSocket>,
    ) -> wasmtime::Result<Result<SocketAddress, ErrorCode>> {
        let socket = self.table.get(&socket)?;
        Ok(socket
            .local_addr()
            .map(Into::into)
            .map_err(|e| self.code(e)))
    }

    fn close(&mut self, socket: Resource<UdpSocket>) -> wasmtime::Result<()> {
        self.table.get(&socket)?.close();
        Ok(())
    }

    fn drop(&mut self, socket: Resource<UdpSocket>) -> wasmtime::Result<()> {
        self.table.delete(socket)?.close();
        Ok(())
    }
}
