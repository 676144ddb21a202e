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

/// The smallest inaccessible mapping taken for the reservation behind a
/// guest's linear memory. wasmtime reserves each linear memory's whole
/// address space plus its guard (4 GiB and more on 64-bit) and makes only
/// the pages the memory has grown to accessible, so in /proc/PID/smaps a
/// linear memory is the accessible mappings right below one `---p`
/// mapping of GiBs; nothing else in the process maps anywhere near a GiB
/// at once (thread and fiber stacks are MiBs, the heap's arenas 64 MiB).
pub const LINEAR_MEMORY_RESERVATION_BYTES: u64 = 1 << 30;

/// Resident memory of the process's guests' linear memories (see
/// [`LINEAR_MEMORY_RESERVATION_BYTES`]), in KiB, from /proc/PID/smaps: the
/// part of its RSS that a wasm memory holds and never gives back. 0 when
/// smaps cannot be read.
pub fn linear_memory_kib(pid: u32) -> u64 {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    linear_memory_kib_of(&smaps)
}

/// [`linear_memory_kib`] of an smaps text.
fn linear_memory_kib_of(smaps: &str) -> u64 {
    struct Mapping {
        start: u64,
        end: u64,
        accessible: bool,
        rss_kib: u64,
    }
    let mut mappings: Vec<Mapping> = Vec::new();
    for line in smaps.lines() {
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or("");
        if let Some((start, end)) = first.split_once('-')
            && let (Ok(start), Ok(end)) =
                (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16))
        {
            // A mapping's header: `start-end perms offset dev inode path`.
            let accessible = words.next().is_some_and(|perms| !perms.starts_with("---"));
            mappings.push(Mapping {
                start,
                end,
                accessible,
                rss_kib: 0,
            });
        } else if first == "Rss:"
            && let Some(last) = mappings.last_mut()
        {
            last.rss_kib = words.next().and_then(|v| v.parse().ok()).unwrap_or(0);
        }
    }
    let mut kib = 0;
    for (i, reservation) in mappings.iter().enumerate() {
        if reservation.accessible
            || reservation.end - reservation.start < LINEAR_MEMORY_RESERVATION_BYTES
        {
            continue;
        }
        // The memory: the accessible mappings that run without a gap up
        // to the reservation (the kernel splits one memory into several
        // where its pages differ, as the memory image's do).
        let mut next_start = reservation.start;
        for below in mappings[..i].iter().rev() {
            if below.end != next_start || !below.accessible {
                break;
            }
            kib += below.rss_kib;
            next_start = below.start;
        }
    }
    kib
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

#[cfg(test)]
mod tests {
    use super::linear_memory_kib_of;

    #[test]
    fn a_linear_memory_is_what_is_accessible_below_a_big_reservation() {
        // As moat's echo server maps it: a guard before, the memory in
        // three pieces (the image's pages in the middle), the rest of the
        // reservation after; then a heap arena (accessible, then reserved
        // but under a GiB) that is not a linear memory.
        let smaps = "\
7f86b4000000-7f86b6000000 ---p 00000000 00:00 0
Rss:                   0 kB
7f86b6000000-7f86b6100000 rw-p 00000000 00:00 0
Rss:                1024 kB
7f86b6100000-7f86b6105000 rw-p 00000000 00:01 7609                       /memfd:wasm-memory-image (deleted)
Size:                 20 kB
Rss:                  20 kB
7f86b6105000-7f86b6110000 rw-p 00000000 00:00 0
Rss:                  44 kB
7f86b6110000-7f87b8000000 ---p 00000000 00:00 0
Rss:                   0 kB
7f87b8000000-7f87b855a000 rw-p 00000000 00:00 0
Rss:                4876 kB
7f87b855a000-7f87bc000000 ---p 00000000 00:00 0
Rss:                   0 kB
";
        assert_eq!(linear_memory_kib_of(smaps), 1024 + 20 + 44);
        assert_eq!(linear_memory_kib_of(""), 0);
    }
}
