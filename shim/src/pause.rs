//! A pod's sandbox under moat: the container's process, with the pod's
//! namespaces set up by libcontainer, holds them until it is told to stop.
//! It does what a pause program does, in the shim's own code: it reaps the
//! children it inherits (a pod that shares its process namespace makes it
//! their init) and exits 0 at SIGTERM or SIGINT. containerd stops a
//! sandbox with SIGKILL, which needs nothing.
//!
//! The pause image's entrypoint is never read or run: on a node whose
//! `sandbox_image` is a native program, nothing native from an image runs
//! in a moat pod.

use rustix::process::{WaitId, WaitIdOptions};
use tokio::signal::unix::{SignalKind, signal};

/// The exit status when the sandbox cannot wait for signals (it cannot
/// hold the pod then): what `moat run` reports for a start that failed.
const CANNOT_HOLD: i32 = moat_host::START_FAILED_EXIT as i32;

/// Holds the pod until SIGTERM or SIGINT, reaping children meanwhile, and
/// returns the exit status: 0 when told to stop.
pub fn hold() -> i32 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("moat: error: the pod's sandbox cannot start its runtime: {e}");
            return CANNOT_HOLD;
        }
    };
    runtime.block_on(async {
        let (Ok(mut terminate), Ok(mut interrupt), Ok(mut child)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::child()),
        ) else {
            eprintln!("moat: error: the pod's sandbox cannot wait for signals");
            return CANNOT_HOLD;
        };
        loop {
            tokio::select! {
                _ = terminate.recv() => return 0,
                _ = interrupt.recv() => return 0,
                _ = child.recv() => reap(),
            }
        }
    })
}

/// Reaps every child that has ended.
fn reap() {
    while let Ok(Some(_)) =
        rustix::process::waitid(WaitId::All, WaitIdOptions::EXITED | WaitIdOptions::NOHANG)
    {}
}
