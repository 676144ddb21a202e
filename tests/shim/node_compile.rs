//! The node's compile of a tenant's component (round four's finding 6),
//! by the shim's own binary as the shim runs it: bounded in memory and in
//! time, and not repeated for a component that failed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use containerd_shim_moat::cache::{self, NodeSettings};
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
