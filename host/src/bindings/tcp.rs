//! `moat:net/tcp` over [`crate::net::TcpConn`].

use wasmtime::component::{Access, Accessor, Resource, StreamReader};

use super::convert::{call_error, duration, error_code};
use super::generated::moat::net::tcp::{
    ConnectOptions, Host, HostTcpSocket, HostTcpSocketWithStore, HostWithStore, Keepalive,
};
use super::generated::moat::net::types::{ErrorCode, SocketAddress};
use super::streams::{ReceiveProducer, SendConsumer};
use super::{MoatNet, NetCtxView, words};
use crate::net::{self, TcpConn};

fn keepalive(k: Keepalive) -> net::Keepalive {
    net::Keepalive {
        idle: k.idle.map(duration),
        interval: k.interval.map(duration),
        retries: k.retries,
    }
}

/// The core's connect options from the WIT record.
pub(super) fn connect_options(options: ConnectOptions) -> net::ConnectOptions {
    net::ConnectOptions {
        timeout: options.timeout.map(duration),
        nodelay: options.nodelay,
        keepalive: options.keepalive.map(keepalive),
        send_buffer_size: options.send_buffer_size,
        receive_buffer_size: options.receive_buffer_size,
    }
}

impl Host for NetCtxView<'_> {}

impl<T: Send> HostWithStore<T> for MoatNet {
    async fn connect(
        store: &Accessor<T, Self>,
        host: String,
        port: u16,
        options: ConnectOptions,
    ) -> wasmtime::Result<Result<Resource<TcpConn>, ErrorCode>> {
        let net = store.with(|mut access| access.get().net.clone());
        match net.connect(&host, port, &connect_options(options)).await {
            Ok(conn) => Ok(Ok(store.with(|mut access| access.get().table.push(conn))?)),
            Err(err) => Ok(Err(call_error(err, net.words(), "connect to", &host, port))),
        }
    }
}

impl<T: Send> HostTcpSocketWithStore<T> for MoatNet {
    fn receive(
        mut store: Access<'_, T, Self>,
        socket: Resource<TcpConn>,
    ) -> wasmtime::Result<Result<StreamReader<u8>, ErrorCode>> {
        // The socket keeps how the read side ended (`receive-outcome`), so
        // the reader's own outcome is not needed here.
        let checked_out = store.get().table.get(&socket)?.reader();
        match checked_out {
            Ok((reader, _)) => Ok(Ok(StreamReader::new(&mut store, ReceiveProducer(reader))?)),
            Err(err) => Ok(Err(store.get().code(err))),
        }
    }

    fn send(
        mut store: Access<'_, T, Self>,
        socket: Resource<TcpConn>,
        mut data: StreamReader<u8>,
    ) -> wasmtime::Result<Result<(), ErrorCode>> {
        let checked_out = store.get().table.get(&socket)?.writer();
        match checked_out {
            Ok((writer, _)) => {
                data.pipe(&mut store, SendConsumer(writer))?;
                Ok(Ok(()))
            }
            Err(err) => {
                // Every stream handed to the host is piped or closed, or
                // the guest's writer would wait forever.
                data.close(&mut store)?;
                Ok(Err(store.get().code(err)))
            }
        }
    }

    async fn shutdown(
        store: &Accessor<T, Self>,
        socket: Resource<TcpConn>,
    ) -> wasmtime::Result<Result<(), ErrorCode>> {
        let shutdown =
            store.with(|mut access| access.get().table.get(&socket).map(TcpConn::shutdown))?;
        Ok(shutdown.await.map_err(|e| error_code(e, words(store))))
    }
}

impl HostTcpSocket for NetCtxView<'_> {
    fn local_address(
        &mut self,
        socket: Resource<TcpConn>,
    ) -> wasmtime::Result<Result<SocketAddress, ErrorCode>> {
        let conn = self.table.get(&socket)?;
        let local = conn.local_addr();
        Ok(local.map(Into::into).map_err(|e| self.code(e)))
    }

    fn receive_outcome(
        &mut self,
        socket: Resource<TcpConn>,
    ) -> wasmtime::Result<Option<Result<(), ErrorCode>>> {
        let outcome = self.table.get(&socket)?.receive_outcome();
        Ok(outcome.map(|end| end.map_err(|e| self.code(e))))
    }

    fn send_outcome(
        &mut self,
        socket: Resource<TcpConn>,
    ) -> wasmtime::Result<Option<Result<(), ErrorCode>>> {
        let outcome = self.table.get(&socket)?.send_outcome();
        Ok(outcome.map(|end| end.map_err(|e| self.code(e))))
    }

    fn remote_address(
        &mut self,
        socket: Resource<TcpConn>,
    ) -> wasmtime::Result<Result<SocketAddress, ErrorCode>> {
        let peer = self.table.get(&socket)?.peer_addr();
        Ok(peer.map(Into::into).map_err(|e| self.code(e)))
    }

    fn set_nodelay(
        &mut self,
        socket: Resource<TcpConn>,
        enabled: bool,
    ) -> wasmtime::Result<Result<(), ErrorCode>> {
        let conn = self.table.get(&socket)?;
        Ok(conn.set_nodelay(enabled).map_err(|e| self.code(e)))
    }

    fn set_keepalive(
        &mut self,
        socket: Resource<TcpConn>,
        config: Option<Keepalive>,
    ) -> wasmtime::Result<Result<(), ErrorCode>> {
        let conn = self.table.get(&socket)?;
        Ok(conn
            .set_keepalive(config.map(keepalive))
            .map_err(|e| self.code(e)))
    }

    fn drop(&mut self, socket: Resource<TcpConn>) -> wasmtime::Result<()> {
        self.table.delete(socket)?;
        Ok(())
    }
}
