//! The shim's reaper: containerd's shim library reaps every child of the
//! shim (it is the subreaper), and reports each exit on a subscription.
//! A process the shim waits for itself may be reaped first; its status is
//! then found here.

use std::time::Duration;

use containerd_shim::monitor::{ExitEvent, Subject, Subscription};

/// How long to wait for the reaper to report a process it reaped before
/// the shim could (it reports at once; this bounds a bug).
const REAPER_REPORT: Duration = Duration::from_secs(10);

/// The exit status the reaper reported on `reaped` for `pid`; `None` when
/// none came within [`REAPER_REPORT`] of the last report. Blocks.
pub(crate) fn reported_exit(pid: i32, reaped: &Subscription) -> Option<i32> {
    while let Ok(ExitEvent { subject, exit_code }) = reaped.rx.recv_timeout(REAPER_REPORT) {
        if matches!(subject, Subject::Pid(p) if p == pid) {
            return Some(exit_code);
        }
    }
    None
}
