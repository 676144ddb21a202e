//! The node's compile of a tenant's component (round four's finding 6),
//! by the shim's own binary as the shim runs it: bounded in memory and in
//! time, and not repeated for a component that failed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use containerd_shim_moat::cache::{self, NodeSettings};

use crate::support;
use moat_guests as guests;

const SHIM: &str = env!("CARGO_BIN_EXE_containerd-shim-moat-v1");

/// A fresh cache directory `name`, the user's alone (as the cache wants).
fn cache_dir(name: &str) -> PathBuf {
    use std::os::unix::fs::DirBuilderExt as _;
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("node-compile-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
    dir
}

fn settings(dir: &Path) -> NodeSettings {
    NodeSettings {
        cache_dir: Some(dir.to_owned()),
        ..NodeSettings::default()
    }
}

/// A compile past its memory bound fails (the container then compiles the
/// component within its own pod's limits), and the next start of the same
/// component fails at once, naming why, without a second compile.
#[test]
fn a_compile_past_its_memory_fails_once_and_is_not_repeated() {
    let dir = cache_dir("memory");
    let component = std::fs::read(guests::FS_PROBE).unwrap();
    let bounded = NodeSettings {
        max_compile_memory: 16 << 20,
        ..settings(&dir)
    };
    let first = cache::compile_with(Path::new(SHIM), &dir, &bounded, &component)
        .expect_err("16 MiB is too little to compile a component");
    assert!(first.to_string().contains("exit status"), "{first}");
    let again = cache::compile_with(Path::new(SHIM), &dir, &bounded, &component)
        .expect_err("a failed compile fails again");
    assert!(
        again.to_string().contains("it failed before on this node"),
        "{again}"
    );
    assert_eq!(
        std::fs::read_dir(dir.join("code")).map_or(0, |entries| entries.count()),
        0,
        "no code was kept"
    );
    // The same component, in another cache under the default bounds,
    // compiles.
    let other = cache_dir("memory-default");
    cache::compile_with(Path::new(SHIM), &other, &settings(&other), &component)
        .expect("the default bounds compile it");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&other);
}

/// A compile past the node's compile-timeout is killed, and says so.
#[test]
fn a_compile_past_its_time_is_killed() {
    let dir = cache_dir("time");
    let component = std::fs::read(guests::FS_PROBE).unwrap();
    let hurried = NodeSettings {
        compile_timeout: Duration::from_millis(1),
        ..settings(&dir)
    };
    let e = cache::compile_with(Path::new(SHIM), &dir, &hurried, &component)
        .expect_err("a millisecond is too little");
    assert!(e.to_string().contains("compile-timeout"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The process that compiles a tenant's component, seen from outside
/// while it waits for the component: in a cgroup of its own with the
/// node's memory bound, one CPU's time and a task limit; in a network
/// namespace of its own; with no capability, no way to gain one, a
/// seccomp filter, and the lowest CPU priority (seen while it compiles).
/// Before, it ran as the
/// shim: root with every capability, on the node's network, in the shim's
/// cgroup. It then compiles as before.
#[test]
fn the_compile_runs_in_a_cgroup_and_a_sandbox_of_its_own() {
    if support::skip_unless(
        "the compile's sandbox",
        (!rustix::process::geteuid().is_root())
            .then(|| "the node's compile is sandboxed as root, as the shim runs".to_owned()),
    ) {
        return;
    }
    let dir = cache_dir("sandbox");
    let settings = settings(&dir);
    let component = std::fs::read(guests::FS_PROBE).unwrap();
    // The shim's own call, with its cgroup, on a thread; the child is
    // found among this process's children while it waits for stdin.
    let compiling = {
        let (dir, settings) = (dir.clone(), settings.clone());
        std::thread::spawn(move || {
            cache::compile_with(Path::new(SHIM), &dir, &settings, &component)
        })
    };
    let me = std::process::id();
    let status =
        |pid: u32| std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |status: &str, name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .map(|v| v.trim().to_owned())
            .unwrap_or_default()
    };
    // Watched until it has entered its sandbox (its seccomp filter is the
    // last step) or the compile is over.
    let child = loop {
        let found = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .find(|&pid| {
                field(&status(pid), "PPid") == me.to_string()
                    && std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                        .is_ok_and(|c| c.contains(cache::COMPILE_FLAG))
                    && field(&status(pid), "Seccomp") == "2"
            });
        if let Some(pid) = found {
            break Some(pid);
        }
        if compiling.is_finished() {
            break None;
        }
        std::thread::yield_now();
    };
    let child = child.expect("the compiling process was never seen in its sandbox");
    let seen = status(child);
    let cgroups = std::fs::read_to_string(format!("/proc/{child}/cgroup")).unwrap_or_default();
    let net = |pid: u32| std::fs::read_link(format!("/proc/{pid}/ns/net")).ok();
    let child_net = net(child);
    let nice = std::fs::read_to_string(format!("/proc/{child}/stat"))
        .unwrap_or_default()
        .rsplit(')')
        .next()
        .and_then(|rest| rest.split_whitespace().nth(16).map(str::to_owned))
        .unwrap_or_default();
    let compiled = compiling.join().unwrap();
    assert_eq!(field(&seen, "NoNewPrivs"), "1", "{seen}");
    assert_eq!(field(&seen, "Seccomp"), "2", "{seen}");
    assert_eq!(field(&seen, "CapEff"), "0000000000000000", "{seen}");
    assert_eq!(field(&seen, "CapBnd"), "0000000000000000", "{seen}");
    assert!(
        child_net.is_some() && child_net != net(me),
        "a network namespace of its own"
    );
    assert_eq!(nice, "19");
    assert!(
        cgroups
            .lines()
            .any(|l| l.ends_with(&format!("/moat-compile/{child}"))),
        "{cgroups}"
    );
    compiled.expect("it compiles in its sandbox");
    assert!(std::fs::read_dir(dir.join("code")).is_ok_and(|mut e| e.next().is_some()));
    let _ = std::fs::remove_dir_all(&dir);
}
