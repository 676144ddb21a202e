//! Pods on one node, through containerd's CRI plugin as kubelet drives it
//! (`tests/shim/support/cri.rs`: a containerd of its own, a CNI bridge, a
//! pause image of Debian's static busybox): how long a pod takes from
//! `RunPodSandbox` to its app's first answer, and what N pods hold.
//!
//! ```text
//! cargo build --release -p containerd-shim-moat --bin containerd-shim-moat-v1 --example density
//! sudo target/release/examples/density [--containerd 1.7.24|2.1.9] 50 [path/to/py-handler.wasm]
//! ```
//!
//! `--containerd` runs the node on a release `tests/shim/fetch-containerd`
//! fetches (into `target/containerd/`) instead of the system's.
//!
//! 1. **Starts**: for each kind of pod, `ROUNDS` pods one after another,
//!    each removed before the next: a runc pod running busybox's `nc` as
//!    a native echo, a moat pod running echo-server (211 KB), and, when
//!    its path is given, a moat pod serving componentize-py's
//!    `py-handler.wasm` (examples/foreign/build.sh builds it) with
//!    `MOAT_HTTP_ADDR`. The first pod of each kind is reported apart from
//!    the rest.
//! 2. **Density**: N pods of each kind (runc echo, moat echo-server)
//!    running at once, started `PARALLEL` at a time: memory (PSS: shared
//!    pages split among the processes that map them, so the totals add up
//!    to what the node spends), processes and threads per pod, and pods
//!    started per second.
//!
//! Needs root, containerd and ctr, Debian's containernetworking-plugins
//! and busybox-static.

#[path = "../../tests/shim/support/mod.rs"]
mod shim_support;

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shim_support::Entry;
use shim_support::cri::{App, Node, Pod, busybox_layer, processes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Pods of each kind started one after another for the start times.
const ROUNDS: usize = 6;

/// Pods started at once in the density part.
const PARALLEL: usize = 4;

/// A kind of pod.
#[derive(Clone, Copy)]
enum Kind {
    /// runc, busybox `nc -ll -e cat` on 8080.
    Runc,
    /// moat, echo-server on 8080.
    Echo,
    /// moat, py-handler served on 8080.
    PyHandler,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Runc => "runc, native echo (busybox nc)",
            Kind::Echo => "moat, echo-server (Rust, 208 KB)",
            Kind::PyHandler => "moat, py-handler (componentize-py, HTTP)",
        }
    }
}

/// Runs one pod of `kind` to its first answer: the pod and how long that
/// took.
async fn start(node: &Node, kind: Kind, name: &str) -> (Pod, Duration) {
    let started = Instant::now();
    let (handler, image, command, env): (_, _, &[&str], &[(&str, &str)]) = match kind {
        Kind::Runc => (
            "runc",
            "localhost/native-echo:density",
            &["/bin/busybox", "nc", "-ll", "-p", "8080", "-e", "/bin/cat"],
            &[],
        ),
        Kind::Echo => (
            "moat",
            "localhost/moat-echo-server:density",
            &["/echo-server.wasm", "0.0.0.0:8080"],
            &[("MOAT_ALLOW_LISTEN", "0.0.0.0:8080")],
        ),
        Kind::PyHandler => (
            "moat",
            "localhost/moat-py-handler:density",
            &["/py-handler.wasm"],
            &[("MOAT_HTTP_ADDR", "0.0.0.0:8080")],
        ),
    };
    let mut pod = node.run_pod(name, handler).await;
    node.start_container(
        &mut pod,
        App {
            name: "app",
            attempt: 0,
            image,
            command,
            env,
            mounts: Vec::new(),
        },
    )
    .await;
    let addr = format!("{}:8080", pod.ip);
    loop {
        if let Ok(mut stream) = tokio::net::TcpStream::connect(&addr).await {
            let (ask, answer): (&[u8], &[u8]) = match kind {
                Kind::PyHandler => (
                    b"GET / HTTP/1.1\r\nHost: pod\r\nConnection: close\r\n\r\n",
                    b"HTTP/1.1 ",
                ),
                _ => (b"ping", b"ping"),
            };
            stream.write_all(ask).await.expect("write");
            let mut got = vec![0u8; answer.len()];
            if stream.read_exact(&mut got).await.is_ok() && got == answer {
                break;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "{name} never answered; containerd's log:\n{}",
            node.containerd.log()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    (pod, started.elapsed())
}

fn stats(v: &[f64]) -> String {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    format!(
        "{:.0} min, {:.0} median, {:.0} max",
        v[0],
        v[v.len() / 2],
        v[v.len() - 1]
    )
}

/// PSS in KiB and threads of one process.
fn footprint(pid: i32) -> (u64, u64) {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    let pss = rollup
        .lines()
        .find(|l| l.starts_with("Pss:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let threads = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0);
    (pss, threads)
}

/// Every process of the shims of `shim_binary` serving this node's
/// containerd, with their descendants.
fn pod_processes(node: &Node, shim_binary: &str) -> Vec<i32> {
    let socket = node.containerd.socket().display().to_string();
    let all = processes();
    let mut ours: HashSet<i32> = all
        .iter()
        .filter(|(_, _, cmd)| cmd.contains(shim_binary) && cmd.contains(&socket))
        .map(|(pid, _, _)| *pid)
        .collect();
    loop {
        let before = ours.len();
        for (pid, ppid, _) in &all {
            if ours.contains(ppid) {
                ours.insert(*pid);
            }
        }
        if ours.len() == before {
            break;
        }
    }
    ours.into_iter().collect()
}

async fn density(node: &Arc<Node>, kind: Kind, n: usize, shim_binary: &str) {
    let started = Instant::now();
    let permits = Arc::new(tokio::sync::Semaphore::new(PARALLEL));
    let mut tasks = Vec::new();
    for i in 0..n {
        let node = Arc::clone(node);
        let permits = Arc::clone(&permits);
        tasks.push(tokio::spawn(async move {
            let _permit = permits.acquire().await.expect("permits");
            start(&node, kind, &format!("density-{i}")).await.0
        }));
    }
    let mut pods = Vec::new();
    for task in tasks {
        pods.push(task.await.expect("a pod"));
    }
    let elapsed = started.elapsed();
    // Let the starts' page faults settle into what stays resident.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pids = pod_processes(node, shim_binary);
    let (mut pss, mut threads) = (0, 0);
    for pid in &pids {
        let (p, t) = footprint(*pid);
        pss += p;
        threads += t;
    }
    println!(
        "| {} | {n} | {:.1} MiB | {:.1} | {:.1} | {:.1} |",
        kind.name(),
        pss as f64 / 1024.0 / n as f64,
        pids.len() as f64 / n as f64,
        threads as f64 / n as f64,
        n as f64 / elapsed.as_secs_f64(),
    );
    for pod in &pods {
        node.remove_pod(pod).await;
    }
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1).peekable();
    let containerd = match args.peek().map(String::as_str) {
        Some("--containerd") => {
            args.next();
            let upstream = args.next().expect("--containerd VERSION");
            shim_support::Release::fetched(&upstream)
        }
        _ => shim_support::Release::system(),
    };
    let containerd = containerd.unwrap_or_else(|why| {
        eprintln!("density: {why}");
        std::process::exit(2);
    });
    eprintln!("density: {}", containerd.name);
    let n: usize = args
        .next()
        .map(|a| a.parse().expect("N is a number"))
        .unwrap_or(20);
    let py_handler = args.next();
    if let Some(why) = shim_support::cri::cannot_run_cri() {
        eprintln!("density: {why}");
        std::process::exit(2);
    }
    let here = std::env::current_exe().expect("this program");
    let release = here
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/examples");
    assert!(
        release.join("containerd-shim-moat-v1").exists(),
        "build the shim first: {}",
        release.display()
    );
    let mut node = Node::start(release, 9, true, &containerd).await;
    node.retry = true;
    let node = Arc::new(node);
    node.import(
        "localhost/native-echo:density",
        &busybox_layer(),
        &["/bin/busybox"],
    )
    .await;
    let echo = std::fs::read(moat_guests::ECHO_SERVER).expect("the guest is built");
    node.import(
        "localhost/moat-echo-server:density",
        &[Entry::File("echo-server.wasm", &echo, 0o644)],
        &["/echo-server.wasm"],
    )
    .await;
    let mut kinds = vec![Kind::Runc, Kind::Echo];
    if let Some(path) = &py_handler {
        let handler = std::fs::read(path).expect("py-handler.wasm");
        node.import(
            "localhost/moat-py-handler:density",
            &[Entry::File("py-handler.wasm", &handler, 0o644)],
            &["/py-handler.wasm"],
        )
        .await;
        kinds.push(Kind::PyHandler);
    }

    println!(
        "| pod | first start (ms) | later starts (ms), {} pods |",
        ROUNDS - 1
    );
    println!("|---|---|---|");
    for kind in kinds {
        let mut times = Vec::new();
        for round in 0..ROUNDS {
            let (pod, took) = start(&node, kind, &format!("start-{round}")).await;
            times.push(took.as_secs_f64() * 1000.0);
            node.remove_pod(&pod).await;
        }
        println!(
            "| {} | {:.0} | {} |",
            kind.name(),
            times[0],
            stats(&times[1..])
        );
    }

    println!();
    println!(
        "| pods | N | memory per pod (PSS) | processes per pod | threads per pod | pods started per second ({PARALLEL} at a time) |"
    );
    println!("|---|---|---|---|---|---|");
    density(&node, Kind::Runc, n, "containerd-shim-runc-v2").await;
    density(&node, Kind::Echo, n, "containerd-shim-moat-v1").await;
    println!(
        "\nstarts tried again, as kubelet would: {}",
        node.retried.load(std::sync::atomic::Ordering::Relaxed)
    );
}
