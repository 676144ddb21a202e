//! Reading a process from /proc, pinning threads, and timing whole commands.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};
use nix::sched::{CpuSet, sched_setaffinity};
use nix::unistd::Pid;

/// CPU time the process has used, in nanoseconds: the sum over its threads
/// of /proc/PID/task/TID/schedstat's first field (ns resolution, unlike
/// /proc/PID/stat's clock ticks).
pub fn cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// Resident memory now and at its peak, in KiB (VmRSS, VmHWM).
pub fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Open file descriptors of the process.
pub fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Pins the calling thread to `cpu`, or lets it run anywhere with `None`.
pub fn pin_current_thread(cpu: Option<usize>) -> anyhow::Result<()> {
    let mut set = CpuSet::new();
    match cpu {
        Some(cpu) => set.set(cpu)?,
        None => {
            for cpu in 0..num_cpus() {
                set.set(cpu)?;
            }
        }
    }
    sched_setaffinity(Pid::from_raw(0), &set)?;
    Ok(())
}

/// CPUs on this machine: counted once, before any pinning (afterwards
/// `available_parallelism` would report the pinned thread's single CPU).
pub fn num_cpus() -> usize {
    static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CPUS.get_or_init(|| {
        std::fs::read_to_string("/sys/devices/system/cpu/online")
            .ok()
            .and_then(|s| {
                s.trim()
                    .split(',')
                    .map(|range| match range.split_once('-') {
                        Some((a, b)) => {
                            Some(b.parse::<usize>().ok()? - a.parse::<usize>().ok()? + 1)
                        }
                        None => range.parse::<usize>().ok().map(|_| 1),
                    })
                    .sum::<Option<usize>>()
            })
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    })
}

/// What `measure` reports for one command.
#[derive(Debug, Clone, Copy, serde::Deserialize, serde::Serialize)]
pub struct CommandCost {
    /// Wall time from spawn to exit.
    pub wall_ms: f64,
    /// Peak resident memory of the command.
    pub max_rss_kib: u64,
}

/// Clears the variables that make Rust programs capture a backtrace with
/// every error they create: a developer's shell often sets
/// `RUST_BACKTRACE=1`, and wasmtime creates an error each time a store is
/// dropped, so with it set every served request paid for a stack walk
/// (about 6% of moat serve's CPU, and wasmtime serve's alike).
pub fn without_backtraces(command: &mut Command) -> &mut Command {
    command
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
}

/// `moat-bench measure -- CMD ARGS...`: runs the command as this process's
/// only child, so that getrusage(RUSAGE_CHILDREN) is exactly its peak RSS,
/// and prints its [`CommandCost`] as JSON.
pub fn child(args: &[String]) -> anyhow::Result<()> {
    let (program, rest) = args.split_first().context("measure: no command given")?;
    let start = Instant::now();
    let status = without_backtraces(&mut Command::new(program))
        .args(rest)
        .stdout(std::process::Stdio::null())
        .status()
        .with_context(|| format!("measure: cannot run {program}"))?;
    let wall_ms = start.elapsed().as_secs_f64() * 1e3;
    if !status.success() {
        bail!("measure: {program} failed: {status}");
    }
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)?;
    let cost = CommandCost {
        wall_ms,
        max_rss_kib: usage.max_rss() as u64,
    };
    println!("{}", serde_json::to_string(&cost)?);
    Ok(())
}

/// Runs `command` under `measure` (this binary) and returns its cost.
pub fn command_cost(exe: &Path, command: &[&str]) -> anyhow::Result<CommandCost> {
    let out = Command::new(exe).arg("measure").args(command).output()?;
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}
