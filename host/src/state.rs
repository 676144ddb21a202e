//! The data of a guest's store, and the linker every run uses.

use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::bindings::wasi_sockets::{self, WasiNet, WasiNetView};
use crate::bindings::{MoatCtxView, MoatView};
use crate::bounds::Limiter;
use crate::net::Net;

/// The data of a guest's store.
pub(crate) struct RunState {
    pub(crate) wasi: WasiCtx,
    pub(crate) wasi_net: WasiNet,
    pub(crate) net: Net,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: Limiter,
}

impl WasiView for RunState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiNetView for RunState {
    fn wasi_net(&mut self) -> &mut WasiNet {
        &mut self.wasi_net
    }
}

impl MoatView for RunState {
    fn moat(&mut self) -> MoatCtxView<'_> {
        MoatCtxView {
            net: &self.net,
            table: &mut self.table,
        }
    }
}

/// The linker every run uses: WASI 0.2 and 0.3 with wasi:sockets under
/// the policy, and moat:net.
pub(crate) fn linker(engine: &wasmtime::Engine) -> wasmtime::Result<Linker<RunState>> {
    let mut linker = Linker::new(engine);
    wasi_sockets::add_to_linker(&mut linker)?;
    crate::bindings::add_to_linker(&mut linker)?;
    Ok(linker)
}
