//! `containerd-shim-moat-v1`: containerd starts it for every container whose
//! runtime is `io.containerd.moat.v1`.

use containerd_shim_moat::{MoatInstance, RUNTIME_NAME};

fn main() {
    containerd_shimkit::sandbox::cli::shim_main::<MoatInstance>(
        RUNTIME_NAME,
        containerd_shimkit::shim_version!(),
        None,
    );
}
