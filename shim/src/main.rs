//! `containerd-shim-moat-v1`: containerd starts it for every container whose
//! runtime is `io.containerd.moat.v1`.

use containerd_shim_moat::MoatShim;
use containerd_shim_wasm::shim::{Cli, Config};

fn main() {
    MoatShim::run(Config::default());
}
