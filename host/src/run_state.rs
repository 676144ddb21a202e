//! The data of a guest's store under `moat run` and `moat serve`:
//! [`RunState`], wasmtime-wasi's context beside moat's.

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::kit::{MoatCtx, MoatCtxView, MoatView};

/// The data of a guest's store.
pub(crate) struct RunState {
    pub(crate) wasi: WasiCtx,
    pub(crate) moat: MoatCtx,
    pub(crate) table: ResourceTable,
}

impl WasiView for RunState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl MoatView for RunState {
    fn moat(&mut self) -> MoatCtxView<'_> {
        MoatCtxView {
            ctx: &mut self.moat,
            table: &mut self.table,
        }
    }
}
