//! Registers a stock program's loopback listeners as its own
//! ([`crate::net::own_listeners`]): a connect to one of them needs no
//! connect grant.
//!
//! A 0.2 socket is registered once `start-listen` succeeds and
//! unregistered when the socket resource is dropped, before wasmtime-wasi
//! closes it ([`super::WasiNet::release`]). A 0.3 listener is registered by
//! the `listen` of [`super::streams`], and stays registered while
//! wasmtime-wasi's stream of connections (which holds the listening
//! socket) lives.

use std::net::SocketAddr;

use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::p2::bindings::sockets::tcp;
use wasmtime_wasi::sockets::WasiSocketsView;

use super::WasiNetView;

const P2_TCP: &str = "wasi:sockets/tcp@0.2.12";

/// Defines a 0.2 `start-listen` that registers the listener (shadowing
/// wasmtime-wasi's, which does the work).
pub(super) fn add_p2_to_linker<T: WasiNetView + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    use wasmtime_wasi::p2::TcpSocket as P2Tcp;
    use wasmtime_wasi::p2::bindings::sockets::network::ErrorCode;

    linker.instance(P2_TCP)?.func_wrap_async(
        "[method]tcp-socket.start-listen",
        |mut store, (this,): (Resource<P2Tcp>,)| {
            Box::new(async move {
                let rep = this.rep();
                let state = store.data_mut();
                let started = tcp::HostTcpSocket::start_listen(&mut state.sockets(), this).await;
                let result: wasmtime::Result<(Result<(), ErrorCode>,)> = match started {
                    Ok(()) => {
                        let local = tcp::HostTcpSocket::local_address(
                            &mut state.sockets(),
                            Resource::new_borrow(rep),
                        );
                        if let Ok(local) = local {
                            let net = state.wasi_net();
                            if let Some(own) = net.gate().own_listener(SocketAddr::from(local)) {
                                net.listening.insert(rep, own);
                            }
                        }
                        Ok((Ok(()),))
                    }
                    Err(err) => Ok((Err(err.downcast()?),)),
                };
                result
            })
        },
    )?;
    Ok(())
}
