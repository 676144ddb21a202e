//! Where the node's compile of a tenant's component runs: the shim runs as
//! root on the node, and the component is the tenant's. The compiling
//! process ([`crate::cache::compile_main`]) gets a cgroup of its own with
//! memory, CPU and task limits (made by the shim before the component is
//! handed over, [`CompileCgroup`]), and puts itself, before it reads a byte
//! of the component, in confinement ([`enter`]): network, IPC and host-name
//! namespaces of its own, the lowest CPU priority, no way to gain a
//! privilege, no capability, and a seccomp filter that refuses the calls a
//! compiler never makes.

use std::path::PathBuf;

use libcgroups::common::{AnyCgroupManager, CgroupConfig, CgroupManager as _, ControllerOpt};
use oci_spec::runtime::{
    LinuxCpuBuilder, LinuxMemoryBuilder, LinuxPidsBuilder, LinuxResourcesBuilder,
};

/// Most tasks (threads and processes) the compiling process may have: 256.
/// wasmtime compiles on one thread a CPU, and this covers the largest
/// nodes; the compile starts no process (its seccomp filter refuses
/// `execve`).
pub const MAX_COMPILE_TASKS: i64 = 256;

/// The period the compile's CPU share is counted over, in microseconds:
/// the kernel's default (100 ms).
const CPU_PERIOD: u64 = 100_000;

/// Where the compiles' cgroups are made, below the root of each hierarchy.
const CGROUP_PARENT: &str = "/moat-compile";

/// The compiling process's cgroup, removed when dropped (once the process
/// has ended: a cgroup with a task in it cannot be removed).
pub struct CompileCgroup {
    manager: AnyCgroupManager,
}

/// Why the compile's cgroup could not be made.
#[derive(Debug, thiserror::Error)]
#[error("cannot make the compile's cgroup {path}: {why}")]
pub struct CgroupError {
    /// The cgroup's path below the hierarchy's root.
    pub path: PathBuf,
    /// What failed.
    pub why: String,
}

impl CompileCgroup {
    /// A cgroup of its own for the compiling process `pid`, limited to
    /// `memory` bytes, `cpus` CPUs' time and [`MAX_COMPILE_TASKS`] tasks.
    ///
    /// # Errors
    /// [`CgroupError`]: the process is not moved, and must not compile.
    pub fn enter(pid: i32, memory: u64, cpus: u32) -> Result<CompileCgroup, CgroupError> {
        let path = PathBuf::from(format!("{CGROUP_PARENT}/{pid}"));
        let failed = |why: &dyn std::fmt::Display| CgroupError {
            path: path.clone(),
            why: why.to_string(),
        };
        let manager = libcgroups::common::create_cgroup_manager(CgroupConfig {
            cgroup_path: path.clone(),
            systemd_cgroup: false,
            container_name: format!("moat-compile-{pid}"),
        })
        .map_err(|e| failed(&e))?;
        let memory = i64::try_from(memory).unwrap_or(i64::MAX);
        let resources = LinuxResourcesBuilder::default()
            .memory(
                LinuxMemoryBuilder::default()
                    .limit(memory)
                    .build()
                    .map_err(|e| failed(&e))?,
            )
            .cpu(
                LinuxCpuBuilder::default()
                    .quota(i64::from(cpus.max(1)) * CPU_PERIOD as i64)
                    .period(CPU_PERIOD)
                    .build()
                    .map_err(|e| failed(&e))?,
            )
            .pids(
                LinuxPidsBuilder::default()
                    .limit(MAX_COMPILE_TASKS)
                    .build()
                    .map_err(|e| failed(&e))?,
            )
            .build()
            .map_err(|e| failed(&e))?;
        let cgroup = CompileCgroup { manager };
        cgroup
            .manager
            .add_task(nix::unistd::Pid::from_raw(pid))
            .map_err(|e| failed(&e))?;
        cgroup
            .manager
            .apply(&ControllerOpt {
                resources: &resources,
                disable_oom_killer: false,
                oom_score_adj: None,
                freezer_state: None,
            })
            .map_err(|e| failed(&e))?;
        Ok(cgroup)
    }
}

impl Drop for CompileCgroup {
    fn drop(&mut self) {
        if let Err(e) = self.manager.remove() {
            tracing::debug!(target: "moat::shim", error = %e, "the compile's cgroup was not removed");
        }
    }
}

/// Why the compiling process could not enter its confinement.
#[derive(Debug, thiserror::Error)]
#[error("cannot {step}: {why}")]
pub struct ConfineError {
    /// What it was doing.
    pub step: &'static str,
    /// What failed.
    pub why: String,
}

fn step(step: &'static str) -> impl Fn(&dyn std::fmt::Display) -> ConfineError {
    move |why| ConfineError {
        step,
        why: why.to_string(),
    }
}

/// The calls a compile never makes, refused with `EPERM`: other
/// processes' memory, mounts and namespaces, the kernel's modules, BPF and
/// performance counters, keys, sockets, starting a program, the clock and
/// the machine. Names the running architecture lacks are skipped.
const REFUSED_CALLS: &[&str] = &[
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "socket",
    "socketpair",
    "connect",
    "bind",
    "listen",
    "accept",
    "accept4",
    "execve",
    "execveat",
    "open_by_handle_at",
    "name_to_handle_at",
    "reboot",
    "swapon",
    "swapoff",
    "syslog",
    "acct",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "iopl",
    "ioperm",
    "quotactl",
    "fanotify_init",
    "io_uring_setup",
];

/// Puts the calling process, single-threaded still, in the compile's
/// confinement. As root: namespaces of its own for the network, IPC and the
/// host name, then every capability dropped (the bounding set too). As
/// anyone: the lowest CPU priority, no gaining of privileges, and the
/// seccomp filter of [`REFUSED_CALLS`].
///
/// # Errors
/// [`ConfineError`], naming the step that failed.
pub fn enter() -> Result<(), ConfineError> {
    use caps::CapSet;
    use nix::sched::CloneFlags;
    let root = rustix::process::geteuid().is_root();
    if root {
        nix::sched::unshare(
            CloneFlags::CLONE_NEWNET | CloneFlags::CLONE_NEWIPC | CloneFlags::CLONE_NEWUTS,
        )
        .map_err(|e| step("leave the node's network, IPC and host name")(&e))?;
    }
    rustix::process::setpriority_process(None, 19)
        .map_err(|e| step("take the lowest CPU priority")(&e))?;
    rustix::thread::set_no_new_privs(true)
        .map_err(|e| step("drop the gaining of privileges")(&e))?;
    if root {
        // The bounding set first: dropping from it takes CAP_SETPCAP,
        // which goes with the effective set.
        let bounding =
            caps::read(None, CapSet::Bounding).map_err(|e| step("read the capabilities")(&e))?;
        for cap in bounding {
            caps::drop(None, CapSet::Bounding, cap)
                .map_err(|e| step("drop the bounding capabilities")(&e))?;
        }
    }
    for set in [
        CapSet::Ambient,
        CapSet::Inheritable,
        CapSet::Effective,
        CapSet::Permitted,
    ] {
        caps::clear(None, set).map_err(|e| step("drop the capabilities")(&e))?;
    }
    seccomp()
}

/// Loads the filter of [`REFUSED_CALLS`].
fn seccomp() -> Result<(), ConfineError> {
    use libseccomp::{ScmpAction, ScmpFilterContext, ScmpSyscall};
    let failed = step("load the seccomp filter");
    let mut filter = ScmpFilterContext::new(ScmpAction::Allow).map_err(|e| failed(&e))?;
    let refused = ScmpAction::Errno(rustix::io::Errno::PERM.raw_os_error());
    for name in REFUSED_CALLS {
        let Ok(call) = ScmpSyscall::from_name(name) else {
            continue;
        };
        filter.add_rule(refused, call).map_err(|e| failed(&e))?;
    }
    filter.load().map_err(|e| failed(&e))
}
