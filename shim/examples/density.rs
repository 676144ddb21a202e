//! How many moat guests one node holds: starts N echo-server containers
//! through a containerd of its own with `containerd-shim-moat-v1`, one
//! after another, and reports how long each took to answer on its port and
//! what the shims' processes hold in memory with all N running.
//!
//! ```text
//! cargo build --release -p containerd-shim-moat --bin containerd-shim-moat-v1 --example density
//! sudo target/release/examples/density 50
//! ```
//!
//! Needs root, `containerd` and `ctr` (Debian's containerd package).
//! Memory is PSS (shared pages split among the processes that map them),
//! so the totals add up to what the node spends.

#[path = "../../tests/shim/support/mod.rs"]
mod shim_support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NAMESPACE: &str = "moat-density";
const IMAGE: &str = "localhost/moat-echo-server:density";

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("the command runs");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// PSS and RSS in KiB of one process.
fn memory(pid: u32) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
    };
    Some((field("Pss:")?, field("Rss:")?))
}

/// Every process running the shim's binary.
fn shim_processes(shim: &Path) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        if std::fs::read_link(entry.path().join("exe")).is_ok_and(|exe| exe == shim) {
            pids.push(pid);
        }
    }
    pids
}

fn stats(mut v: Vec<f64>) -> String {
    v.sort_by(|a, b| a.total_cmp(b));
    let median = v[v.len() / 2];
    format!(
        "min {:.0} median {:.0} max {:.0}",
        v[0],
        median,
        v[v.len() - 1]
    )
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("N is a number"))
        .unwrap_or(20);
    if let Some(why) = shim_support::cannot_run_containerd() {
        eprintln!("density: {why}");
        std::process::exit(2);
    }
    let here = std::env::current_exe().expect("this program");
    let release = here
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/examples");
    let shim = release.join("containerd-shim-moat-v1");
    assert!(shim.exists(), "build the shim first: {}", shim.display());
    let containerd = shim_support::Containerd::start(None, release);
    let work = tempfile::tempdir().expect("tempdir");
    run(containerd
        .ctr(NAMESPACE)
        .args(["image", "import", "--all-platforms"])
        .arg(shim_support::rootfs_image_archive(
            work.path(),
            IMAGE,
            &[(
                "echo-server.wasm",
                &std::fs::read(moat_guests::ECHO_SERVER).expect("the guest is built"),
            )],
            "/echo-server.wasm",
            &[],
        )));

    let mut starts = Vec::new();
    for i in 0..n {
        let port = shim_support::free_port();
        let started = Instant::now();
        run(containerd
            .ctr(NAMESPACE)
            .args([
                "run",
                "-d",
                "--net-host",
                "--runtime",
                "io.containerd.moat.v1",
            ])
            .arg(format!("--env=MOAT_ALLOW_LISTEN=127.0.0.1:{port}"))
            .arg("--env=MOAT_MAX_MEMORY=64MiB")
            .args([IMAGE, &format!("echo{i}"), "/echo-server.wasm"])
            .arg(format!("127.0.0.1:{port}")));
        let mut stream = loop {
            if let Ok(s) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
                break s;
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "container {i} did not start"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        stream.write_all(b"ping").await.expect("write");
        let mut pong = [0u8; 4];
        stream.read_exact(&mut pong).await.expect("echo");
        assert_eq!(&pong, b"ping");
        starts.push(started.elapsed().as_secs_f64() * 1000.0);
    }

    // Let the first start's page faults settle into what stays resident.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pids = shim_processes(&shim);
    let mut pss_total = 0;
    let mut rss: Vec<f64> = Vec::new();
    for pid in &pids {
        if let Some((pss, r)) = memory(*pid) {
            pss_total += pss;
            rss.push(r as f64);
        }
    }
    println!("containers: {n}, shim-binary processes: {}", pids.len());
    // What each process of the first few is: its parent, threads, memory.
    for pid in pids.iter().take(8) {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .map(|l| l[name.len()..].trim().to_owned())
                .unwrap_or_default()
        };
        let (pss, rss) = memory(*pid).unwrap_or_default();
        println!(
            "  pid {pid} ppid {} threads {} PSS {pss} KiB RSS {rss} KiB",
            field("PPid:"),
            field("Threads:")
        );
    }
    println!("start to first echo (ms): {}", stats(starts));
    println!("RSS per process (KiB): {}", stats(rss));
    println!(
        "PSS of all of them: {} KiB, {} KiB per container",
        pss_total,
        pss_total / n as u64
    );

    for i in 0..n {
        let _ = containerd
            .ctr(NAMESPACE)
            .args(["task", "kill", "--signal", "SIGKILL", &format!("echo{i}")])
            .output();
    }
    for i in 0..n {
        let id = format!("echo{i}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline
            && !containerd
                .ctr(NAMESPACE)
                .args(["task", "rm", &id])
                .output()
                .is_ok_and(|o| o.status.success())
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = containerd
            .ctr(NAMESPACE)
            .args(["container", "rm", &id])
            .output();
    }
}
