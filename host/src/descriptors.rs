//! The process's descriptor limit, set to what a run's bounds need.
//!
//! Every socket a guest holds is a descriptor; `--max-sockets` bounds them
//! within the run, and the process's soft limit on open files (RLIMIT_NOFILE)
//! bounds them again below, where nothing of moat's accounting can be
//! dodged. A process started by containerd inherits about a million; moat
//! sets the soft limit to what the run's bounds need instead
//! ([`needed`]), so that even a socket moat failed to count could not take
//! the machine's descriptors. At that limit new sockets fail with the
//! operating system's "too many open files", which the guest sees as an
//! error and the host survives.
//!
//! `moat run` and the containerd shim call [`limit_to`] (their process runs
//! one guest); an embedder running many guests in one process sets its own
//! limit.

use std::io;

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

use crate::bindings::wasi_sockets::streams::MAX_WAKEUPS;
use crate::net::Limits;

/// Descriptors a run needs besides its guest's sockets: stdio, the async
/// runtime's epoll and event descriptors, wasmtime's code memory and
/// compile cache, the directories given to the guest, the resolver's DNS
/// sockets (counted apart: one per lookup in flight, `--max-lookups`).
/// Measured: a running guest with no socket open has about 20; 256 leaves
/// room.
pub(crate) const BASE_DESCRIPTORS: u64 = 256;

/// The soft descriptor limit a run under `limits` needs: twice its socket
/// cap (a listener may hold one connection the kernel completed that is
/// not yet handed to the guest, and so not yet counted), plus
/// 256 for the process, the lookups in flight and the host's own
/// connections that end dropped listeners (the wasi:sockets glue's `MAX_WAKEUPS`). `None` when
/// sockets are unbounded.
pub fn needed(limits: &Limits) -> Option<u64> {
    limits.max_sockets.map(|sockets| {
        2 * u64::from(sockets)
            + BASE_DESCRIPTORS
            + u64::from(limits.max_lookups)
            + MAX_WAKEUPS as u64
    })
}

/// Sets this process's soft RLIMIT_NOFILE to [`needed`] for `limits`
/// (never above the hard limit); returns the soft limit now in force.
/// Unbounded sockets leave the limit as it is.
///
/// # Errors
/// The operating system's, from `setrlimit`.
pub fn limit_to(limits: &Limits) -> io::Result<Option<u64>> {
    let current = getrlimit(Resource::Nofile);
    let Some(needed) = needed(limits) else {
        return Ok(current.current);
    };
    let soft = current.maximum.map_or(needed, |hard| needed.min(hard));
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(soft),
            maximum: current.maximum,
        },
    )?;
    tracing::debug!(target: "moat::net", soft, "descriptor limit set");
    Ok(Some(soft))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_follows_the_socket_cap() {
        let limits = Limits {
            max_sockets: Some(100),
            max_lookups: 16,
            ..Limits::default()
        };
        assert_eq!(
            needed(&limits),
            Some(200 + BASE_DESCRIPTORS + 16 + MAX_WAKEUPS as u64)
        );
        assert_eq!(
            needed(&Limits {
                max_sockets: None,
                ..Limits::default()
            }),
            None
        );
    }
}
