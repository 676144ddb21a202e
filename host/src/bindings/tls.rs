//! `moat:net/tls` over the core's TLS ([`crate::net::tls`]).

use wasmtime::component::{Accessor, Resource};

use super::convert::{call_error, duration, error_code};
use super::generated::moat::net::listen::ListenOptions;
use super::generated::moat::net::tcp::ConnectOptions;
use super::generated::moat::net::tls::{
    ClientOptions, Host, HostWithStore, Identity, ServerOptions,
};
use super::generated::moat::net::types::ErrorCode;
use super::{MoatNet, NetCtxView, listen::listen_options, tcp::connect_options, words};
use crate::net::{self, NetError, TcpConn, TcpListener};

fn identity(id: Identity) -> net::TlsIdentity {
    net::TlsIdentity {
        certificate_chain_pem: id.certificate_chain,
        private_key_pem: id.private_key,
    }
}

fn alpn(list: Vec<String>) -> Vec<Vec<u8>> {
    list.into_iter().map(String::into_bytes).collect()
}

fn client(options: ClientOptions) -> net::TlsClientOptions {
    net::TlsClientOptions {
        alpn: alpn(options.alpn),
        extra_roots_pem: options.extra_roots,
        identity: options.client_identity.map(identity),
    }
}

fn server(options: ServerOptions) -> net::TlsServerOptions {
    net::TlsServerOptions {
        identity: identity(options.identity),
        alpn: alpn(options.alpn),
        client_roots_pem: options.client_roots,
        handshake_timeout: options.handshake_timeout.map(duration),
    }
}

impl Host for NetCtxView<'_> {
    fn alpn_protocol(&mut self, socket: Resource<TcpConn>) -> wasmtime::Result<Option<String>> {
        let conn = self.table.get(&socket)?;
        Ok(conn
            .alpn_protocol()
            .map(|p| String::from_utf8_lossy(&p).into_owned()))
    }

    fn is_tls(&mut self, socket: Resource<TcpConn>) -> wasmtime::Result<bool> {
        Ok(self.table.get(&socket)?.is_tls())
    }
}

impl<T: Send> HostWithStore<T> for MoatNet {
    async fn connect(
        store: &Accessor<T, Self>,
        host: String,
        port: u16,
        options: ConnectOptions,
        tls: ClientOptions,
    ) -> wasmtime::Result<Result<Resource<TcpConn>, ErrorCode>> {
        let net = store.with(|mut access| access.get().net.clone());
        match net
            .connect_tls(&host, port, &connect_options(options), &client(tls))
            .await
        {
            Ok(conn) => Ok(Ok(store.with(|mut access| access.get().table.push(conn))?)),
            Err(err) => Ok(Err(call_error(
                err,
                net.words(),
                "TLS connect to",
                &host,
                port,
            ))),
        }
    }

    async fn listen(
        store: &Accessor<T, Self>,
        host: String,
        port: u16,
        options: ListenOptions,
        tls: ServerOptions,
    ) -> wasmtime::Result<Result<Resource<TcpListener>, ErrorCode>> {
        let net = store.with(|mut access| access.get().net.clone());
        match net
            .listen_tls(&host, port, &listen_options(options), &server(tls))
            .await
        {
            Ok(listener) => Ok(Ok(
                store.with(|mut access| access.get().table.push(listener))?
            )),
            Err(err) => Ok(Err(call_error(
                err,
                net.words(),
                "TLS listen on",
                &host,
                port,
            ))),
        }
    }

    async fn upgrade_client(
        store: &Accessor<T, Self>,
        socket: Resource<TcpConn>,
        server_name: String,
        already_read: Vec<u8>,
        tls: ClientOptions,
    ) -> wasmtime::Result<Result<(), ErrorCode>> {
        let options = client(tls);
        let begun = store.with(|mut access| -> wasmtime::Result<Result<_, NetError>> {
            let view = access.get();
            let net = view.net.clone();
            let conn = view.table.get_mut(&socket)?;
            Ok(net.upgrade_client(conn, &server_name, already_read, &options))
        })?;
        finish(store, socket, begun).await
    }

    async fn upgrade_server(
        store: &Accessor<T, Self>,
        socket: Resource<TcpConn>,
        already_read: Vec<u8>,
        tls: ServerOptions,
    ) -> wasmtime::Result<Result<(), ErrorCode>> {
        let options = server(tls);
        let begun = store.with(|mut access| -> wasmtime::Result<Result<_, NetError>> {
            let view = access.get();
            let net = view.net.clone();
            let conn = view.table.get_mut(&socket)?;
            Ok(net.upgrade_server(conn, already_read, &options))
        })?;
        finish(store, socket, begun).await
    }
}

/// The rest of an upgrade: the handshake outside the store, then the
/// socket gets its TLS transport (or is gone, if the handshake failed).
async fn finish<T: Send>(
    store: &Accessor<T, MoatNet>,
    socket: Resource<TcpConn>,
    begun: Result<net::Upgrade, NetError>,
) -> wasmtime::Result<Result<(), ErrorCode>> {
    let upgrade = match begun {
        Ok(upgrade) => upgrade,
        Err(err) => return Ok(Err(error_code(err, words(store)))),
    };
    let outcome = upgrade.run().await;
    store.with(|mut access| {
        let view = access.get();
        let words = view.net.words();
        let conn = view.table.get_mut(&socket)?;
        Ok(conn.upgraded(outcome).map_err(|e| error_code(e, words)))
    })
}
