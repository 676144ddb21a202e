//! The WIT glue: `moat:net` (wit/, the current version; [`v0_2`], the
//! released version before it) implemented over [`crate::net`], and
//! wasi:sockets under the same policy ([`wasi_sockets`]).
//!
//! Every function here translates types and calls the core; no policy
//! check and no socket logic lives in this layer (the wasi:sockets glue
//! only ties wasmtime-wasi's socket resources to the core's socket count).
//! It is private to moat: [`crate::kit::add_to_linker`] adds it to a
//! linker, and a store's data reaches it through [`crate::kit::NetView`].

/// The bindings of a `moat:net` version's `imports` world, from the WIT
/// at `$path`: every version generated alike, with the core's types for
/// its resources, so that a socket is the same socket whichever version's
/// functions a guest calls on it.
macro_rules! moat_net_bindings {
    ($path:literal) => {
        wasmtime::component::bindgen!({
            path: $path,
            world: "moat:net/imports",
            imports: {
                "moat:net/tcp.[method]tcp-socket.receive": store | trappable,
                "moat:net/tcp.[method]tcp-socket.send": store | trappable,
                default: trappable,
            },
            with: {
                "moat:net/tcp.tcp-socket": crate::net::TcpConn,
                "moat:net/listen.listener": crate::net::TcpListener,
                "moat:net/udp.udp-socket": crate::net::UdpSocket,
            },
        });
    };
}

mod convert;
pub(crate) mod http;
pub(crate) mod io_error;
mod listen;
mod streams;
mod tcp;
mod tls;
mod udp;
pub mod v0_2;
pub mod wasi_sockets;

use wasmtime::component::{HasData, Linker, ResourceTable};

use crate::net::Net;

/// Generated bindings for the `moat:net/imports` world, the current
/// version (`wit/`).
#[allow(missing_docs)]
pub mod generated {
    moat_net_bindings!("../wit");
}

/// What the `moat:net` host functions need from a store's data.
pub struct NetCtxView<'a> {
    /// The run's network (policy and host tasks).
    pub net: &'a Net,
    /// The resource table holding sockets and listeners.
    pub table: &'a mut ResourceTable,
}

/// Implemented by a store's data type to expose [`NetCtxView`].
pub trait NetView: Send {
    /// The network context and resource table of this store.
    fn moat(&mut self) -> NetCtxView<'_>;
}

/// The [`HasData`] marker of the `moat:net` bindings.
pub struct MoatNet;

impl HasData for MoatNet {
    type Data<'a> = NetCtxView<'a>;
}

/// The words the guest's errors name settings in: its run's.
fn words<T>(store: &wasmtime::component::Accessor<T, MoatNet>) -> moat_policy::setting::Spelling {
    store.with(|mut access| access.get().net.words())
}

impl NetCtxView<'_> {
    /// `err` as the guest gets it, in its run's words.
    fn code(&self, err: crate::net::NetError) -> generated::moat::net::types::ErrorCode {
        convert::error_code(err, self.net.words())
    }
}

/// Adds every `moat:net` interface to `linker`, at every version served
/// (the current one and 0.2.0).
///
/// # Errors
/// If the linker already defines one of them.
pub fn add_to_linker<T: NetView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    generated::Imports::add_to_linker::<T, MoatNet>(linker, T::moat)?;
    v0_2::generated::Imports::add_to_linker::<T, MoatNet>(linker, T::moat)
}

/// Runs `define` with shadowing allowed: moat's definitions replace
/// wasmtime-wasi's and wasmtime-wasi-http's of the same names.
pub(crate) fn shadowing<T: 'static>(
    linker: &mut Linker<T>,
    define: impl FnOnce(&mut Linker<T>) -> wasmtime::Result<()>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let defined = define(linker);
    linker.allow_shadowing(false);
    defined
}
