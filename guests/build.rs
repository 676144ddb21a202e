//! Builds every guest component with an inner `cargo build --release
//! --target wasm32-wasip2`, in a target directory of its own (the outer
//! build holds the lock on the main one), and writes their paths to
//! `$OUT_DIR/guests.rs`.

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const TARGET: &str = "wasm32-wasip2";

/// (constant name, package name, where its sources are) for every guest.
const GUESTS: &[(&str, &str, &str)] = &[
    ("ECHO_SERVER", "echo-server", "examples/echo-server"),
    ("NCAT", "ncat", "examples/ncat"),
    ("UDP_ECHO", "udp-echo", "examples/udp-echo"),
    ("HTTP_SERVER", "http-server", "examples/http-server"),
    ("MAIL_SINK", "mail-sink", "examples/mail-sink"),
    ("STD_ECHO", "std-echo", "examples/std-echo"),
    ("STD_FETCH", "std-fetch", "examples/std-fetch"),
    ("CHAT", "chat", "examples/chat"),
    ("HYPER_SERVE", "hyper-serve", "examples/hyper-serve"),
    ("HYPER_FETCH", "hyper-fetch", "examples/hyper-fetch"),
    ("WSTD_FETCH", "wstd-fetch", "examples/wstd-fetch"),
    ("WSTD_SERVE", "wstd-serve", "examples/wstd-serve"),
    ("PROBE", "probe", "tests/guests/probe"),
    ("STD_NET", "std-net", "tests/guests/std-net"),
    ("FS_PROBE", "fs-probe", "tests/guests/fs-probe"),
    ("HOSTILE", "hostile", "tests/guests/hostile"),
    ("BOUNDARY", "boundary", "tests/guests/boundary"),
    ("SOCKETS_P3", "sockets-p3", "tests/guests/sockets-p3"),
    ("TOKIO_NET", "tokio-net", "tests/guests/tokio-net"),
    ("HTTP_PROBE", "http-probe", "tests/guests/http-probe"),
    ("HTTP_P3", "http-p3", "tests/guests/http-p3"),
    ("HTTP_HOSTILE", "http-hostile", "tests/guests/http-hostile"),
    (
        "HTTP_SERVICE_P3",
        "http-service-p3",
        "tests/guests/http-service-p3",
    ),
    (
        "HTTP_MIDDLEWARE_P3",
        "http-middleware-p3",
        "tests/guests/http-middleware-p3",
    ),
    ("UNSERVED", "unserved", "tests/guests/unserved"),
    ("NET_V0_2", "net-v0-2", "tests/guests/net-v0-2"),
    ("ISOLATION", "isolation", "tests/guests/isolation"),
    ("BENCH_SERVER", "bench-server", "bench/guests/bench-server"),
    ("BENCH_STD", "bench-std", "bench/guests/bench-std"),
    ("HELLO", "hello", "bench/guests/hello"),
    ("BIG_MEMORY", "big-memory", "bench/guests/big-memory"),
];

fn main() {
    let manifest =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let root = manifest
        .parent()
        .expect("guests/ sits in the workspace root")
        .to_owned();
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let target_dir = guest_target_dir(&root, &out);

    // bench/src/pattern.rs: the bench guests include it by path.
    for watched in [
        "guest-sdk",
        "wit",
        "host/wit",
        "Cargo.lock",
        "bench/src/pattern.rs",
        ".cargo/config.toml",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    for (_, _, dir) in GUESTS {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }

    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    ensure_target(&root);

    let mut build = Command::new(&cargo);
    build
        .current_dir(&root)
        .args(["build", "--release", "--target", TARGET, "--target-dir"])
        .arg(&target_dir);
    for (_, package, _) in GUESTS {
        build.args(["-p", package]);
    }
    // Whole-program LTO, as docs/guests.md advises guest authors: it drops the
    // code no guest calls across crate boundaries (hello: 117 → 93 KB), and
    // a smaller component is a faster first start (88 → 60 ms, Cranelift
    // compiles less). The host's own release build stays without it.
    build.env("CARGO_PROFILE_RELEASE_LTO", "true");
    // What the outer build set for itself must not leak into the guests'.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_MAKEFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
    ] {
        build.env_remove(var);
    }
    // Unless asked to lint them: with MOAT_LINT_GUESTS set, the guests and
    // the SDK are compiled by the outer build's workspace wrapper too (CI
    // builds under clippy-driver, whose arguments travel in CLIPPY_ARGS), so
    // that one build of them both lints and makes them.
    println!("cargo:rerun-if-env-changed=MOAT_LINT_GUESTS");
    if env::var_os("MOAT_LINT_GUESTS").is_some() {
        let wrapper = env::var_os("RUSTC_WORKSPACE_WRAPPER")
            .expect("MOAT_LINT_GUESTS is set, but the outer build has no RUSTC_WORKSPACE_WRAPPER");
        build.env("RUSTC_WORKSPACE_WRAPPER", wrapper);
    }
    build.stdout(Stdio::inherit()).stderr(Stdio::inherit());
    let status = build
        .status()
        .expect("cannot run cargo to build the guests");
    assert!(
        status.success(),
        "building the guests failed ({status}); see the output above"
    );

    let mut consts = String::new();
    for (name, package, dir) in GUESTS {
        let wasm = target_dir
            .join(TARGET)
            .join("release")
            .join(format!("{package}.wasm"));
        assert!(wasm.exists(), "{} was not built", wasm.display());
        writeln!(
            consts,
            "/// The `{package}` guest (sources in `{dir}/`).\npub const {name}: &str = {:?};",
            wasm.display().to_string()
        )
        .unwrap();
    }
    std::fs::write(out.join("guests.rs"), consts).expect("cannot write guests.rs");
}

/// `<target>/guests`, where `<target>` is the workspace's target directory
/// (`$OUT_DIR` is `<target>/<profile>/build/<pkg>/out`), so debug and
/// release builds share one build of the guests.
fn guest_target_dir(root: &Path, out: &Path) -> PathBuf {
    if let Some(dir) = env::var_os("CARGO_TARGET_DIR") {
        let dir = PathBuf::from(dir);
        return if dir.is_absolute() {
            dir
        } else {
            root.join(dir)
        }
        .join("guests");
    }
    out.ancestors()
        .nth(4)
        .map(|t| t.join("guests"))
        .unwrap_or_else(|| root.join("target").join("guests"))
}

/// Adds the wasm target when the toolchain lacks it: rustup 1.29 does not
/// install the targets of rust-toolchain.toml into an installed toolchain.
fn ensure_target(root: &Path) {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let installed =
        sysroot.is_some_and(|s| s.join("lib/rustlib").join(TARGET).join("lib").is_dir());
    if installed {
        return;
    }
    println!("cargo:warning=adding the {TARGET} target with rustup (one time)");
    let mut add = Command::new("rustup");
    add.current_dir(root).args(["target", "add", TARGET]);
    if let Some(toolchain) = env::var_os("RUSTUP_TOOLCHAIN") {
        add.arg("--toolchain").arg(toolchain);
    }
    let status = add.status().unwrap_or_else(|e| {
        panic!("the {TARGET} target is missing and rustup cannot be run ({e}); install it with `rustup target add {TARGET}`")
    });
    assert!(
        status.success(),
        "`rustup target add {TARGET}` failed ({status})"
    );
}
