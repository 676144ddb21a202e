//! `containerd-shim-moat-v1`: containerd starts it for every container whose
//! runtime is `io.containerd.moat.v1`.

use containerd_shim_moat::{MoatInstance, RUNTIME_NAME, cache};

fn main() {
    // The shim compiling a component into the node's cache, in a process
    // of its own ([`cache::compile`]).
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(cache::COMPILE_FLAG) {
        std::process::exit(cache::compile_main(&args[1..]));
    }
    containerd_shimkit::sandbox::cli::shim_main::<MoatInstance>(
        RUNTIME_NAME,
        containerd_shimkit::shim_version!(),
        None,
    );
}
