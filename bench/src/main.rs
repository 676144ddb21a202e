//! moat beside native tokio and wasmtime-wasi: the same workloads against
//! three server processes, rounds interleaved, ratios to native.
//!
//! ```text
//! cargo run --release -p moat-bench -- [--quick] [--rounds N] [--baseline DIR] [WORKLOAD...]
//! cargo run --release -p moat-bench -- report FILE.json   # the tables and chart again
//! cargo run --release -p moat-bench -- soak [--quick] [PART...]   # moat under long, checked load
//! ```
//!
//! Writes `target/bench/latest.json`, `target/bench/latest.md` (the table),
//! `target/bench/latest-stock.md` (the std::net guest on moat beside
//! wasmtime-wasi) and `target/bench/ratios.svg` (the chart). `--baseline DIR` also runs
//! the `moat` and wasmtime-wasi servers of another build of this repository
//! (DIR is that checkout's target directory) in the same rounds, and writes
//! the A/B table to `target/bench/latest-ab.md`.
//!
//! `soak` runs only the moat server, under long load whose every byte and
//! connection is checked, its RSS and descriptors read every second (parts
//! `bytes`, `sequential`, `concurrent`, `udp`; see [`soak`]). It writes
//! `target/bench/soak.json`, `soak.md` and `soak.svg`, and exits non-zero
//! if a check fails or the server keeps descriptors past a part.

mod measure;
mod native;
mod pattern;
mod report;
mod servers;
mod soak;
mod wasi;
mod workloads;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use report::Report;
use servers::{Baseline, Setup};
use workloads::Run;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("serve-native") => native::serve(&args[2..]),
        Some("serve-wasi") => wasi::serve(&args[2..]),
        Some("run-wasi") => wasi::run(&args[2..]),
        Some("serve-wasi-http") => wasi::serve_http(&args[2..]),
        Some("run-wasi-http") => wasi::run_http(&args[2..]),
        Some("fetch-native") => workloads::fetch_native(&args[2..]),
        Some("measure") => measure::child(&args[2..]),
        Some("report") => rewrite(&args[2..]),
        Some("soak") => soak::run(&args[2..]),
        _ => harness(&args[1..]),
    }
}

/// What every harness run needs: this build's `moat` (built if stale),
/// the certificates, the compile cache, a raised descriptor limit; and the
/// directory the outputs go to (`target/bench`).
fn set_up(baseline: Option<Baseline>) -> anyhow::Result<(Setup, PathBuf)> {
    let exe = std::env::current_exe()?;
    let target = exe
        .parent()
        .and_then(Path::parent)
        .context("the harness runs from target/release")?
        .to_owned();
    let out = target.join("bench");
    std::fs::create_dir_all(&out)?;
    let setup = Setup {
        moat: build_moat(&exe)?,
        exe,
        cache: out.join("cache"),
        certs: make_certs(&out.join("certs"))?,
        baseline,
    };
    raise_fd_limit();
    Ok((setup, out))
}

fn harness(args: &[String]) -> anyhow::Result<()> {
    let mut quick = false;
    let mut rounds = None;
    let mut baseline = None;
    let mut chosen = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => quick = true,
            "--rounds" => rounds = Some(it.next().context("--rounds N")?.parse()?),
            "--baseline" => {
                baseline = Some(PathBuf::from(it.next().context("--baseline DIR")?));
            }
            "-h" | "--help" => {
                println!(
                    "usage: moat-bench [--quick] [--rounds N] [--baseline DIR] [WORKLOAD...]\n\
                     \x20      moat-bench report FILE.json\n\
                     \x20      moat-bench soak [--quick] [PART...]   (see `moat-bench soak --help`)\n\
                     --baseline DIR: also run the moat and wasmtime-wasi of the build in the\n\
                     target directory DIR (another checkout, built with `cargo build --release\n\
                     -p moat -p moat-bench -p moat-guests`), in the same rounds\n\
                     workloads: {}",
                    workloads::ALL.join(" ")
                );
                return Ok(());
            }
            w if workloads::ALL.contains(&w) => chosen.push(w.to_owned()),
            other => bail!(
                "unknown argument {other}; workloads: {}",
                workloads::ALL.join(" ")
            ),
        }
    }
    if chosen.is_empty() {
        chosen = workloads::ALL.iter().map(|s| s.to_string()).collect();
    }
    let baseline_setup = baseline
        .as_deref()
        .map(Baseline::in_target_dir)
        .transpose()?;
    let (setup, out) = set_up(baseline_setup)?;
    measure::num_cpus(); // counted before any pinning
    let run = Run {
        setup,
        quick,
        rounds: rounds.unwrap_or(if quick { 3 } else { 5 }),
    };
    let mut report = Report {
        quick,
        rounds: run.rounds,
        machine: machine(),
        baseline: baseline.map(|dir| dir.display().to_string()),
        workloads: Vec::new(),
    };
    eprintln!("{}", report.machine);
    for name in &chosen {
        eprintln!("== {name}");
        let started = std::time::Instant::now();
        let workload = workloads::run(name, &run).with_context(|| format!("workload {name}"))?;
        eprintln!(
            "   {} ({:.0} s)",
            workload.verdict,
            started.elapsed().as_secs_f64()
        );
        report.workloads.push(workload);
    }
    std::fs::write(
        out.join("latest.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    write_outputs(&report, &out)
}

/// `report FILE`: the tables and the chart of a saved run (its
/// `latest.json`), written to `target/bench` as a run writes them.
fn rewrite(args: &[String]) -> anyhow::Result<()> {
    let file = args.first().context("usage: moat-bench report FILE.json")?;
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {file}"))?;
    let report: Report = serde_json::from_str(&text)
        .with_context(|| format!("{file} is not a moat-bench report"))?;
    let out = PathBuf::from("target/bench");
    std::fs::create_dir_all(&out)?;
    write_outputs(&report, &out)
}

/// Prints the tables and writes them and the chart into `out`.
fn write_outputs(report: &Report, out: &Path) -> anyhow::Result<()> {
    let table = report::table(report);
    println!("{table}");
    std::fs::write(out.join("latest.md"), &table)?;
    let stock = report::stock_table(report);
    if !stock.is_empty() {
        println!("{stock}");
        std::fs::write(out.join("latest-stock.md"), &stock)?;
    }
    let hyper = report::hyper_table(report);
    if !hyper.is_empty() {
        println!("{hyper}");
        std::fs::write(out.join("latest-hyper.md"), &hyper)?;
    }
    let audit = report::audit_table(report);
    if !audit.is_empty() {
        println!("{audit}");
        std::fs::write(out.join("latest-audit.md"), &audit)?;
    }
    let secret = report::secret_table(report);
    if !secret.is_empty() {
        println!("{secret}");
        std::fs::write(out.join("latest-secret.md"), &secret)?;
    }
    let ab = report::ab_table(report);
    if !ab.is_empty() {
        println!("{ab}");
        std::fs::write(out.join("latest-ab.md"), &ab)?;
    }
    report::chart(report, &out.join("ratios.svg"))?;
    eprintln!(
        "wrote {}/latest.md, ratios.svg{}",
        out.display(),
        if ab.is_empty() { "" } else { ", latest-ab.md" }
    );
    Ok(())
}

/// target/release/moat, built if needed (`cargo run -p moat-bench` builds
/// only this crate and moat-host's library).
fn build_moat(exe: &Path) -> anyhow::Result<PathBuf> {
    let moat = exe.with_file_name("moat");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build.args(["build", "--release", "-p", "moat", "--bin", "moat"]);
    // `cargo run` describes this crate to it in the environment
    // (CARGO_PKG_NAME=moat-bench, CARGO_MANIFEST_DIR=.../bench, ...). Build
    // scripts that watch those names (ring's does) would see them changed
    // and rebuild, here and again in the next `cargo run`: a minute each
    // way on two cores. Without them the build is the one a plain `cargo
    // build` makes, and nothing is rebuilt twice.
    for (name, _) in std::env::vars_os() {
        let described = name.to_str().is_some_and(|n| {
            [
                "CARGO_PKG_",
                "CARGO_MANIFEST_",
                "CARGO_CRATE_",
                "CARGO_BIN_",
            ]
            .iter()
            .any(|prefix| n.starts_with(prefix))
                || n == "CARGO_PRIMARY_PACKAGE"
        });
        if described {
            build.env_remove(name);
        }
    }
    let status = build.status().context("cannot run cargo to build moat")?;
    if !status.success() || !moat.exists() {
        bail!("building {} failed", moat.display());
    }
    Ok(moat)
}

/// Lifts the soft descriptor limit to the hard one (idle_sockets holds
/// 10,000 client sockets here and 10,000 in the server).
fn raise_fd_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "{} CPUs ({cpu}), Linux {}, {}",
        measure::num_cpus(),
        kernel.trim(),
        std::process::Command::new("rustc")
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    )
}

/// A self-signed certificate for localhost, for the TLS servers.
fn make_certs(dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])?;
    std::fs::write(dir.join("cert.pem"), cert.cert.pem())?;
    std::fs::write(dir.join("key.pem"), cert.signing_key.serialize_pem())?;
    Ok(dir.to_owned())
}
