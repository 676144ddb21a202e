//! `moat:net/tcp` over [`crate::net::TcpConn`].

use wasmtime::component::{Access, Accessor, FutureReader, Resource, StreamReader};

use super::convert::{call_error, duration};
use super::generated::moat::net::tcp::{
    ConnectOptions, Host, HostTcpSocket, HostTcpSocketWithStore, HostWithStore, Keepalive,
};
use super::generated::moat::net::types::{ErrorCode, SocketAddress};
use super::streams::{ReceiveProducer, SendConsumer};
use super::{MoatCtxView, MoatNet};
use crate::net::{self, NetError, Outcome, TcpConn};

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

/// A future for the guest that resolves to how `outcome` ended.
fn outcome_future<T>(
    store: &mut Access<'_, T, MoatNet>,
    outcome: Outcome,
) -> wasmtime::Result<FutureReader<Result<(), ErrorCode>>> {
    FutureReader::new(store, async move {
        wasmtime::error::Ok(outcome.await.map_err(ErrorCode::from))
    })
}

/// A future for the guest that is already resolved to `err`.
fn failed_future<T>(
    store: &mut Access<'_, T, MoatNet>,
    err: NetError,
) -> wasmtime::Result<FutureReader<Result<(), ErrorCode>>> {
    let err = ErrorCode::from(err);
    FutureReader::new(store, async move { wasmtime::error::Ok(Err(err)) })
}

impl Host for MoatCtxView<'_> {}

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
            Err(err) => Ok(Err(call_error(err, &host))),
        }
    }
}

impl<T: Send> HostTcpSocketWithStore<T> for MoatNet {
    fn receive(
        mut store: Access<'_, T, Self>,
        socket: Resource<TcpConn>,
    ) -> wasmtime::Result<(StreamReader<u8>, FutureReader<Result<(), ErrorCode>>)> {
        let checked_out = store.get().table.get(&socket)?.reader();
        match checked_out {
            Ok((reader, outcome)) => Ok((
                StreamReader::new(&mut store, ReceiveProducer(reader))?,
                outcome_future(&mut store, outcome)?,
            )),
            Err(err) => Ok((
                StreamReader::new(&mut store, std::iter::empty())?,
                failed_future(&mut store, err)?,
            )),
        }
    }

    fn send(
        mut store: Access<'_, T, Self>,
        socket: Resource<TcpConn>,
        mut data: StreamReader<u8>,
    ) -> wasmtime::Result<FutureReader<Result<(), ErrorCode>>> {
        let checked_out = store.get().table.get(&socket)?.writer();
        match checked_out {
            Ok((writer, outcome)) => {
                data.pipe(&mut store, SendConsumer(writer))?;
                outcome_future(&mut store, outcome)
            }
            Err(err) => {
                // Every stream handed to the host is piped or closed, or
                // the guest's writer would wait forever.
                data.close(&mut store)?;
                failed_future(&mut store, err)
            }
        }
    }

    async fn shutdown(
        store: &Accessor<T, Self>,
        socket: Resource<TcpConn>,
    ) -> wasmtime::Result<Result<(), ErrorCode>> {
        let shutdown =
            store.with(|mut access| access.get().table.get(&socket).map(TcpConn::shutdown))?;
        Ok(shutdown.await.map_err(ErrorCode::from))
    }
}

impl HostTcpSocket for MoatCtxView<'_> {
    fn local_address(
        &mut self,
        socket: Resource<TcpConn>,
    ) -> wasmtime::Result<Result<SocketAddress, ErrorCode>> {
        let conn = self.table.get(&socket)?;
        Ok(conn.local_addr().map(Into::into).map_err(Into::into))
    }

    fn remote_address(
        &mut self,
        socket: Resource<TcpConn>,
    ) -> wasmtime::Result<Result<SocketAddress, ErrorCode>> {
        let conn = self.table.get(&socket)?;
        Ok(conn.peer_addr().map(Into::into).map_err(Into::into))
    }

    fn set_nodelay(
        &mut self,
        socket: Resource<TcpConn>,
        enabled: bool,
    ) -> wasmtime::Result<Result<(), ErrorCode>> {
        let conn = self.table.get(&socket)?;
        Ok(conn.set_nodelay(enabled).map_err(Into::into))
    }

    fn set_keepalive(
        &mut self,
        socket: Resource<TcpConn>,
        config: Option<Keepalive>,
    ) -> wasmtime::Result<Result<(), ErrorCode>> {
        let conn = self.table.get(&socket)?;
        Ok(conn
            .set_keepalive(config.map(keepalive))
            .map_err(Into::into))
    }

    fn drop(&mut self, socket: Resource<TcpConn>) -> wasmtime::Result<()> {
        self.table.delete(socket)?;
        Ok(())
    }
}
