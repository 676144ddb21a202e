//! `moat:net/listen` over [`crate::net::TcpListener`].

use wasmtime::component::{Accessor, Resource};

use super::convert::{call_error, error_code};
use super::generated::moat::net::listen::{
    Accepted, Host, HostListener, HostListenerWithStore, HostWithStore, ListenOptions,
};
use super::generated::moat::net::types::{ErrorCode, SocketAddress};
use super::{MoatNet, NetCtxView, words};
use crate::net::{self, TcpListener};

/// The core's listen options from the WIT record.
pub(super) fn listen_options(options: ListenOptions) -> net::ListenOptions {
    net::ListenOptions {
        backlog: options.backlog,
        send_buffer_size: options.send_buffer_size,
        receive_buffer_size: options.receive_buffer_size,
        max_connections: options.max_connections,
        max_connections_per_peer: options.max_connections_per_peer,
    }
}

impl Host for NetCtxView<'_> {}

impl<T: Send> HostWithStore<T> for MoatNet {
    async fn listen(
        store: &Accessor<T, Self>,
        host: String,
        port: u16,
        options: ListenOptions,
    ) -> wasmtime::Result<Result<Resource<TcpListener>, ErrorCode>> {
        let net = store.with(|mut access| access.get().net.clone());
        match net.listen(&host, port, &listen_options(options)).await {
            Ok(listener) => Ok(Ok(
                store.with(|mut access| access.get().table.push(listener))?
            )),
            Err(err) => Ok(Err(call_error(err, net.words(), "listen on", &host, port))),
        }
    }
}

impl<T: Send> HostListenerWithStore<T> for MoatNet {
    async fn accept(
        store: &Accessor<T, Self>,
        listener: Resource<TcpListener>,
    ) -> wasmtime::Result<Result<Option<Accepted>, ErrorCode>> {
        let queue =
            store.with(|mut access| access.get().table.get(&listener).map(TcpListener::queue))?;
        let _waiting = match queue.enter_waiting() {
            Ok(permit) => permit,
            Err(e) => return Ok(Err(error_code(e, words(store)))),
        };
        // No await between taking the connection and pushing it: a guest
        // cancelling this accept either gets the socket or leaves it queued.
        let Some((conn, peer)) = queue.accept_from().await else {
            return Ok(Ok(None));
        };
        let socket = store.with(|mut access| access.get().table.push(conn))?;
        Ok(Ok(Some(Accepted {
            socket,
            remote_address: peer.into(),
        })))
    }

    async fn close(
        store: &Accessor<T, Self>,
        listener: Resource<TcpListener>,
    ) -> wasmtime::Result<()> {
        let task = store.with(|mut access| {
            access
                .get()
                .table
                .get_mut(&listener)
                .map(TcpListener::begin_close)
        })?;
        if let Some(task) = task {
            // Aborted: its end, and with it the listening socket's, is all we wait for.
            let _ = task.await;
        }
        Ok(())
    }
}

impl HostListener for NetCtxView<'_> {
    fn local_address(
        &mut self,
        listener: Resource<TcpListener>,
    ) -> wasmtime::Result<Result<SocketAddress, ErrorCode>> {
        let listener = self.table.get(&listener)?;
        Ok(listener
            .local_addr()
            .map(Into::into)
            .map_err(|e| self.code(e)))
    }

    fn drop(&mut self, listener: Resource<TcpListener>) -> wasmtime::Result<()> {
        self.table.delete(listener)?;
        Ok(())
    }
}
