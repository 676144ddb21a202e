//! The run's bounds on wasi:sockets resources.
//!
//! - Every socket holds a place in the run's socket count (shared with
//!   moat:net sockets, `--max-sockets`) from its creation to its drop: the
//!   create functions take one (at the cap they fail with
//!   `new-socket-limit`, or `other` in 0.3, which has no such code), a 0.2
//!   accept takes one for the socket it returns (at the cap it closes the
//!   connection and fails with `new-socket-limit`; 0.3 accepts are
//!   [`super::streams`]'), and the socket resources' destructors give them
//!   back.
//! - A wasi 0.3 UDP receive that waits holds a 64 KiB buffer in
//!   wasmtime-wasi; receives waiting at once are bounded
//!   ([`MAX_WASI_UDP_RECEIVES`](crate::net::limits::MAX_WASI_UDP_RECEIVES),
//!   and the run's waiting calls).

use wasmtime::component::{Accessor, Linker, Resource, ResourceType};
use wasmtime_wasi::p2::bindings::sockets::network::{ErrorCode, IpAddressFamily};
use wasmtime_wasi::p2::bindings::sockets::{tcp, tcp_create_socket, udp_create_socket};
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream};
use wasmtime_wasi::p3::bindings::sockets::types::{
    self as p3, HostTcpSocket, HostUdpSocket, HostUdpSocketWithStore,
};
use wasmtime_wasi::sockets::{WasiSockets, WasiSocketsView};

use super::WasiNetView;
use crate::net::limits::SocketSlot;
use crate::net::{Direction, Opened};
use moat_policy::setting::Worded as _;

const P2_TCP: &str = "wasi:sockets/tcp@0.2.12";
const P2_TCP_CREATE: &str = "wasi:sockets/tcp-create-socket@0.2.12";
const P2_UDP: &str = "wasi:sockets/udp@0.2.12";
const P2_UDP_CREATE: &str = "wasi:sockets/udp-create-socket@0.2.12";
const P3_TYPES: &str = "wasi:sockets/types@0.3.0";

/// The destructor of a socket resource: no longer an own listener, then
/// wasmtime-wasi's (delete it from the table, which closes it), then the
/// slot back.
fn drop_socket<T: WasiNetView, S: 'static>(
    mut store: wasmtime::StoreContextMut<'_, T>,
    rep: u32,
) -> wasmtime::Result<()> {
    let state = store.data_mut();
    state.wasi_net().unlisten(rep);
    drop(state.ctx().table.delete(Resource::<S>::new_own(rep))?);
    state.wasi_net().release(rep);
    Ok(())
}

/// A place in the run's socket count for a socket about to be created, or
/// why there is none.
fn take_slot<T: WasiNetView>(state: &mut T) -> Result<SocketSlot, String> {
    let gate = state.wasi_net().gate();
    gate.socket_slot()
        .map_err(|e| e.worded(gate.words()).to_string())
}

/// Files `slot` under the socket `created`, if it was.
fn file_slot<T: WasiNetView, S, E>(
    state: &mut T,
    slot: SocketSlot,
    created: &Result<Resource<S>, E>,
) {
    if let Ok(socket) = created {
        state
            .wasi_net()
            .created
            .insert(socket.rep(), std::sync::Arc::new(slot));
    }
}

type P2Result<T> = wasmtime::Result<(Result<T, ErrorCode>,)>;

/// What a 0.2 accept returns: the socket and its two streams.
type Accepted = (
    Resource<wasmtime_wasi::p2::TcpSocket>,
    Resource<DynInputStream>,
    Resource<DynOutputStream>,
);
type P3Result<T> = wasmtime::Result<(Result<T, p3::ErrorCode>,)>;

/// Defines the counted 0.2 create functions, accept and destructors on
/// `linker` (shadowing wasmtime-wasi's).
///
/// One piece: one registration of a few lines for each function shadowed.
pub(super) fn add_p2_to_linker<T: WasiNetView + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    use wasmtime_wasi::p2::{TcpSocket as P2Tcp, UdpSocket as P2Udp};

    let mut p2_tcp = linker.instance(P2_TCP)?;
    p2_tcp.resource(
        "tcp-socket",
        ResourceType::host::<P2Tcp>(),
        drop_socket::<T, P2Tcp>,
    )?;
    p2_tcp.func_wrap(
        "[method]tcp-socket.accept",
        |mut store, (this,): (Resource<P2Tcp>,)| -> P2Result<Accepted> {
            let state = store.data_mut();
            let (socket, input, output) =
                match tcp::HostTcpSocket::accept(&mut state.sockets(), this) {
                    Ok(accepted) => accepted,
                    Err(err) => return Ok((Err(err.downcast()?),)),
                };
            match take_slot(state) {
                Ok(slot) => {
                    state
                        .wasi_net()
                        .created
                        .insert(socket.rep(), std::sync::Arc::new(slot));
                    state
                        .wasi_net()
                        .gate()
                        .traffic()
                        .connection(Opened::Accepted);
                    Ok((Ok((socket, input, output)),))
                }
                Err(_) => {
                    tracing::debug!(target: "moat::net", "socket limit reached: closing an accepted connection");
                    let table = state.ctx().table;
                    drop(table.delete(output)?);
                    drop(table.delete(input)?);
                    drop(table.delete(socket)?);
                    Ok((Err(ErrorCode::NewSocketLimit),))
                }
            }
        },
    )?;
    linker.instance(P2_UDP)?.resource(
        "udp-socket",
        ResourceType::host::<P2Udp>(),
        drop_socket::<T, P2Udp>,
    )?;
    linker.instance(P2_TCP_CREATE)?.func_wrap(
        "create-tcp-socket",
        |mut store, (family,): (IpAddressFamily,)| -> P2Result<Resource<P2Tcp>> {
            let state = store.data_mut();
            let Ok(slot) = take_slot(state) else {
                return Ok((Err(ErrorCode::NewSocketLimit),));
            };
            let created = tcp_create_socket::Host::create_tcp_socket(&mut state.sockets(), family);
            file_slot(state, slot, &created);
            Ok((match created {
                Ok(socket) => Ok(socket),
                Err(err) => Err(err.downcast()?),
            },))
        },
    )?;
    linker.instance(P2_UDP_CREATE)?.func_wrap_async(
        "create-udp-socket",
        |mut store, (family,): (IpAddressFamily,)| {
            Box::new(async move {
                let state = store.data_mut();
                let Ok(slot) = take_slot(state) else {
                    return Ok((Err(ErrorCode::NewSocketLimit),));
                };
                let created =
                    udp_create_socket::Host::create_udp_socket(&mut state.sockets(), family).await;
                file_slot(state, slot, &created);
                let result: P2Result<Resource<P2Udp>> = match created {
                    Ok(socket) => Ok((Ok(socket),)),
                    Err(err) => Ok((Err(err.downcast()?),)),
                };
                result
            })
        },
    )?;
    Ok(())
}

/// Defines the counted 0.3 create functions and destructors, and the
/// bounded 0.3 UDP receive, on `linker` (shadowing wasmtime-wasi's).
///
/// One piece, as [`add_p2_to_linker`]: one registration for each function
/// shadowed.
pub(super) fn add_p3_to_linker<T: WasiNetView + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    use wasmtime_wasi::sockets::{TcpSocket as P3Tcp, UdpSocket as P3Udp};

    let mut types = linker.instance(P3_TYPES)?;
    types.resource(
        "tcp-socket",
        ResourceType::host::<P3Tcp>(),
        drop_socket::<T, P3Tcp>,
    )?;
    types.resource(
        "udp-socket",
        ResourceType::host::<P3Udp>(),
        drop_socket::<T, P3Udp>,
    )?;
    types.func_wrap(
        "[static]tcp-socket.create",
        |mut store, (family,): (p3::IpAddressFamily,)| -> P3Result<Resource<P3Tcp>> {
            let state = store.data_mut();
            let slot = match take_slot(state) {
                Ok(slot) => slot,
                Err(why) => return Ok((Err(p3::ErrorCode::Other(Some(why))),)),
            };
            let created = HostTcpSocket::create(&mut state.sockets(), family);
            file_slot(state, slot, &created);
            Ok((match created {
                Ok(socket) => Ok(socket),
                Err(err) => Err(err.downcast()?),
            },))
        },
    )?;
    types.func_wrap_async(
        "[static]udp-socket.create",
        |mut store, (family,): (p3::IpAddressFamily,)| {
            Box::new(async move {
                let state = store.data_mut();
                let slot = match take_slot(state) {
                    Ok(slot) => slot,
                    Err(why) => return Ok((Err(p3::ErrorCode::Other(Some(why))),)),
                };
                let created = HostUdpSocket::create(&mut state.sockets(), family).await;
                file_slot(state, slot, &created);
                let result: P3Result<Resource<P3Udp>> = match created {
                    Ok(socket) => Ok((Ok(socket),)),
                    Err(err) => Ok((Err(err.downcast()?),)),
                };
                result
            })
        },
    )?;
    types.func_wrap_concurrent(
        "[method]udp-socket.receive",
        |accessor: &Accessor<T>, (socket,): (Resource<P3Udp>,)| {
            Box::pin(async move {
                let turn = accessor.with(|mut access| {
                    let gate = access.get().wasi_net().gate();
                    gate.udp_receive_turn()
                        .map_err(|why| why.worded(gate.words()).to_string())
                });
                let _turn = match turn {
                    Ok(turn) => turn,
                    Err(why) => return Ok((Err(p3::ErrorCode::Other(Some(why))),)),
                };
                let wasi = accessor.with_getter::<WasiSockets>(<T as WasiSocketsView>::sockets);
                let received: P3Result<(Vec<u8>, p3::IpSocketAddress)> =
                    match <WasiSockets as HostUdpSocketWithStore<T>>::receive(&wasi, socket).await {
                        Ok(datagram) => {
                            let len = datagram.0.len();
                            super::traffic::count(accessor, |t| {
                                t.datagram(Direction::Received, len);
                            });
                            Ok((Ok(datagram),))
                        }
                        Err(err) => Ok((Err(err.downcast()?),)),
                    };
                received
            })
        },
    )?;
    Ok(())
}
