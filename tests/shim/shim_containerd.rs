//! End to end through a real containerd: OCI images (components and moat
//! policies as files of a filesystem layer, the images built as Linux
//! images are, so that containerd 1.6 runs them too), imported with `ctr
//! image import` and run with `ctr run --runtime io.containerd.moat.v1`.
//! containerd starts `containerd-shim-moat-v1` from this build; tokio
//! peers talk to the guests over the container's network (the host's,
//! `--net-host`).
//!
//! Besides echo-server under its deployment's grants: an image that grants
//! itself in its own `ENV`, images whose entrypoint is a native program or
//! a script, and a hostile guest going for the host's internals.

use crate::support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::Entry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use moat_guests as guests;

const NAMESPACE: &str = "moat-e2e";

/// Longest the guest may take to start listening: containerd starts the
/// shim, the shim the container, moat compiles the component.
const START_DEADLINE: Duration = Duration::from_secs(120);

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("the command runs");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A containerd of the test's own, with this build's shim, and a directory
/// for images and logs; `None` (the test skips) where containerd cannot run.
struct Node {
    containerd: support::Containerd,
    work: tempfile::TempDir,
}

impl Node {
    fn start(test: &str) -> Option<Node> {
        if support::skip_without_containerd(test) {
            return None;
        }
        let shim = Path::new(env!("CARGO_BIN_EXE_containerd-shim-moat-v1"));
        Some(Node {
            containerd: support::Containerd::start(None, shim.parent().expect("a directory")),
            work: tempfile::tempdir().expect("a temporary directory"),
        })
    }

    /// Imports an image of `entries`, `entrypoint` and `env` as its own
    /// environment.
    fn import(&self, image: &str, entries: &[Entry<'_>], entrypoint: &[&str], env: &[&str]) {
        let archive = support::rootfs_image(self.work.path(), image, entries, entrypoint, env);
        run(self
            .containerd
            .ctr(NAMESPACE)
            .args(["image", "import", "--all-platforms"])
            .arg(&archive));
    }

    /// Runs a container of `image` to its end (`args` replace the image's
    /// entrypoint when given; `env` are the pod spec's variables), with a
    /// termination log of its own at `/dev/termination-log`: its exit
    /// status, what it printed, and what it left in the termination log.
    fn run_to_end(
        &self,
        image: &str,
        args: &[&str],
        env: &[&str],
    ) -> (Option<i32>, String, String) {
        let id = format!(
            "{}-{}",
            image.rsplit('/').next().unwrap_or("c").replace(':', "-"),
            std::process::id()
        );
        let termination_log = self.work.path().join(format!("{id}.termination-log"));
        std::fs::write(&termination_log, "").expect("the termination log");
        let mut ctr = self.containerd.ctr(NAMESPACE);
        ctr.args([
            "run",
            "--rm",
            "--net-host",
            "--runtime",
            "io.containerd.moat.v1",
        ])
        .arg("--mount")
        .arg(format!(
            "type=bind,src={},dst=/dev/termination-log,options=rbind:rw",
            termination_log.display()
        ));
        for var in env {
            ctr.args(["--env", var]);
        }
        let out = ctr
            .args([image, &id])
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("ctr runs");
        let output = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let message = std::fs::read_to_string(&termination_log).unwrap_or_default();
        (out.status.code(), output, message)
    }

    /// A connection to `port` on the host's network once the container
    /// `ctr_run` runs serves it; fails the test, with the container's
    /// `log` and containerd's, if the container ends first or never
    /// serves within [`START_DEADLINE`].
    async fn connect_when_served(
        &self,
        port: u16,
        ctr_run: &mut std::process::Child,
        log: &Path,
    ) -> tokio::net::TcpStream {
        let container_log = || std::fs::read_to_string(log).unwrap_or_default();
        let started = Instant::now();
        loop {
            if let Ok(stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
                return stream;
            }
            if let Some(status) = ctr_run.try_wait().expect("ctr's status") {
                panic!(
                    "the container ended ({status}):\n{}\ncontainerd's log:\n{}",
                    container_log(),
                    self.containerd.log()
                );
            }
            assert!(
                started.elapsed() < START_DEADLINE,
                "nothing served 127.0.0.1:{port} in {START_DEADLINE:?}:\n{}\ncontainerd's log:\n{}",
                container_log(),
                self.containerd.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Imports an image of echo-server with `files` beside it and `env` as
    /// its own environment.
    fn import_echo_server(&self, image: &str, files: &[(&str, &[u8])], env: &[&str]) {
        let component = std::fs::read(guests::ECHO_SERVER).expect("the guest is built");
        let mut all = vec![("echo-server.wasm", component.as_slice())];
        all.extend_from_slice(files);
        let archive =
            support::rootfs_image_archive(self.work.path(), image, &all, "/echo-server.wasm", env);
        run(self
            .containerd
            .ctr(NAMESPACE)
            .args(["image", "import", "--all-platforms"])
            .arg(&archive));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn ctr_runs_echo_server_under_the_grants_of_its_deployment() {
    let Some(node) = Node::start("ctr_runs_echo_server_under_the_grants_of_its_deployment") else {
        return;
    };
    let containerd = &node.containerd;
    containerd.add_shim_setting(r#"figures-interval = "1s""#);
    let port = support::free_port();
    let policy = format!("allow-listen = [\"127.0.0.1:{port}\"]\nmax-connections = 8\n");
    let image = "localhost/moat-echo-server:e2e";
    node.import_echo_server(image, &[("moat-policy.toml", policy.as_bytes())], &[]);

    // `ctr run` attached: containerd hands the shim FIFOs for the
    // container's stdio, and ctr copies them to its own, a file here.
    let log = node.work.path().join("container.log");
    let out = std::fs::File::create(&log).expect("the log");
    let id = format!("echo-{}", std::process::id());
    let pin = format!(
        "MOAT_IMAGE_POLICY={}",
        support::sha256_digest(policy.as_bytes())
    );
    let mut ctr_run = containerd
        .ctr(NAMESPACE)
        .args(["run", "--net-host", "--runtime", "io.containerd.moat.v1"])
        .args(["--env", &pin, "--env", "MOAT_LOG=moat::net=debug"])
        .args(["--env", "MOAT_AUDIT=-"])
        // ctr's arguments after the id replace the image's entrypoint.
        .args([image, &id, "/echo-server.wasm"])
        .arg(format!("127.0.0.1:{port}"))
        .stdin(std::process::Stdio::null())
        .stdout(out.try_clone().expect("the log"))
        .stderr(out)
        .spawn()
        .expect("ctr runs");
    let container_log = || std::fs::read_to_string(&log).unwrap_or_default();

    // Wait until the guest listens (or its container has ended).
    let mut stream = node.connect_when_served(port, &mut ctr_run, &log).await;

    let sent: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let (mut rd, mut wr) = stream.split();
    let write = async {
        wr.write_all(&sent).await.expect("write");
        wr.shutdown().await.expect("half-close");
    };
    let mut echoed = Vec::new();
    let read = rd.read_to_end(&mut echoed);
    let (_, got) = tokio::join!(write, read);
    got.expect("read");
    assert!(
        echoed == sent,
        "{} bytes back of {}",
        echoed.len(),
        sent.len()
    );

    // The trail is written in batches, at most AUDIT_BATCH_WAIT after
    // each record: the listen is there before the kill.
    let deadline = std::time::Instant::now() + START_DEADLINE;
    while !container_log().contains(r#""operation":"listen""#) {
        assert!(
            std::time::Instant::now() < deadline,
            "no listen on the trail in the container's log:\n{}",
            container_log()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Its figures (issue 58): a container without a pod is a pod of its
    // own, its directory named by its id twice.
    let own = containerd.figures_dir().join(&id);
    let listened = format!(
        r#"moat_decisions_total{{namespace="",pod="",container="",container_id="{id}",operation="listen",outcome="allowed"}} 1"#
    );
    let started = std::time::Instant::now();
    loop {
        let figures =
            std::fs::read_to_string(own.join(&id).join(moat_host::figures::FiguresFile::NAME))
                .unwrap_or_default();
        if figures.lines().any(|l| l == listened) {
            break;
        }
        assert!(
            started.elapsed() < START_DEADLINE,
            "no {listened} in the running container's figures:\n{figures}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    run(containerd
        .ctr(NAMESPACE)
        .args(["task", "kill", "--signal", "SIGKILL", &id]));
    let status = ctr_run.wait().expect("ctr ends with its task");
    // ... and they go with it.
    let started = std::time::Instant::now();
    while own.exists() {
        assert!(
            started.elapsed() < START_DEADLINE,
            "the ended container's figures are left: {}",
            own.display()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let output = container_log();
    assert_eq!(status.code(), Some(137), "killed: 128 + SIGKILL\n{output}");
    assert!(
        output.contains(&format!(
            "moat: pod spec: MOAT_AUDIT=-; image policy file /moat-policy.toml {}: applied",
            support::sha256_digest(policy.as_bytes())
        )),
        "the audit line, in the container's log:\n{output}"
    );
    assert!(
        output.contains("DEBUG moat::net: listening"),
        "moat's own lines, as MOAT_LOG picked them, in the container's log:\n{output}"
    );
    assert!(
        output.contains(&format!("listening on 127.0.0.1:{port}")),
        "the guest's stdout, in the container's log:\n{output}"
    );
    // The audit trail, in the container's log: the listen, the image's
    // rule that allowed it, and the container it happened in.
    let listen = output
        .lines()
        .find(|l| l.starts_with('{') && l.contains(r#""operation":"listen""#))
        .unwrap_or_else(|| panic!("no listen on the trail in the container's log:\n{output}"));
    for part in [
        format!(r#""address":"127.0.0.1:{port}""#),
        format!(r#""id":"{id}""#),
        format!(r#""namespace":"{NAMESPACE}""#),
        r#""decision":"allowed""#.to_owned(),
        format!(
            r#""digest":"{}""#,
            support::sha256_digest(policy.as_bytes())
        ),
        r#""kind":"image-policy""#.to_owned(),
    ] {
        assert!(listen.contains(&part), "{part} in {listen}");
    }
    run(containerd.ctr(NAMESPACE).args(["container", "rm", &id]));
}

/// A peer the guests may try to reach, non-blocking so that the test can
/// ask afterwards whether anything connected.
fn peer() -> (std::net::TcpListener, u16) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("non-blocking");
    let port = listener.local_addr().expect("local addr").port();
    (listener, port)
}

/// Whether a connection reached `listener` (the container has ended, so a
/// connection it made is in the backlog).
fn reached(listener: &std::net::TcpListener) -> bool {
    match listener.accept() {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
        Err(e) => panic!("accept: {e}"),
    }
}

/// An image whose configuration grants itself everything, in every
/// spelling: with a pod spec that says nothing, its guest connects nowhere
/// and listens nowhere; with the pod spec's grant, it listens.
#[test]
fn an_image_that_grants_itself_in_its_env_reaches_nothing_the_pod_spec_does_not_grant() {
    let Some(node) = Node::start("an_image_that_grants_itself_in_its_env") else {
        return;
    };
    let probe = std::fs::read(guests::PROBE).expect("the guest is built");
    let image = "localhost/moat-self-granted:e2e";
    let self_granted = [
        "MOAT_ALLOW_NET=*",
        "MOAT_ALLOW_LISTEN=*",
        "MOAT_ALLOW-NET=*",
        "MOAT_ALLOW-LISTEN=*",
        "MOAT_IMAGE_POLICY=apply",
        "MOAT_DIRS=/",
    ];
    node.import(
        image,
        &[Entry::File("probe.wasm", &probe, 0o644)],
        &["/probe.wasm"],
        &self_granted,
    );
    let (listener, peer_port) = peer();
    let (status, output, _) = node.run_to_end(
        image,
        &[
            "/probe.wasm",
            "connect",
            "127.0.0.1",
            &peer_port.to_string(),
        ],
        &[],
    );
    assert_eq!(status, Some(1), "the guest's connect failed:\n{output}");
    assert!(
        output.contains(&format!(
            "connect to 127.0.0.1:{peer_port} denied: needs MOAT_ALLOW_NET=127.0.0.1:{peer_port}"
        )),
        "{output}"
    );
    assert!(
        output.contains(
            "moat: pod spec sets no grants; image ENV ignored (only the pod spec grants): \
             MOAT_ALLOW_NET MOAT_ALLOW_LISTEN MOAT_ALLOW-NET MOAT_ALLOW-LISTEN MOAT_IMAGE_POLICY MOAT_DIRS"
        ),
        "the audit line names what the image tried:\n{output}"
    );
    assert!(!reached(&listener), "the guest connected");

    let port = support::free_port();
    let listen = ["/probe.wasm", "listen", "127.0.0.1", &port.to_string()];
    let (status, output, _) = node.run_to_end(image, &listen, &[]);
    assert_eq!(status, Some(1), "the guest's listen failed:\n{output}");
    assert!(
        output.contains(&format!(
            "listen on 127.0.0.1:{port} denied: needs MOAT_ALLOW_LISTEN=127.0.0.1:{port}"
        )),
        "{output}"
    );

    // The pod spec's grant is what counts.
    let grant = format!("MOAT_ALLOW_LISTEN=127.0.0.1:{port}");
    let (status, output, _) = node.run_to_end(image, &listen, &[&grant]);
    assert_eq!(status, Some(0), "{output}");
    assert!(
        output.contains(&format!("listening on 127.0.0.1:{port}")),
        "{output}"
    );
}

/// Where Debian's busybox-static puts its static binary: a native program
/// that runs in an image `FROM scratch`.
const BUSYBOX: &str = "/bin/busybox";

/// Whether `path` is a statically linked ELF program (no interpreter).
fn is_static_elf(path: &str) -> bool {
    let Ok(bytes) = std::fs::read(path) else {
        return false;
    };
    bytes.starts_with(b"\x7fELF") && !bytes.windows(15).any(|w| w == b"/lib64/ld-linux")
}

/// Images whose entrypoint is a native program, or a script for one, are
/// refused before anything runs: the program would have fetched from a
/// local peer, and the peer sees nothing.
#[test]
fn a_native_or_script_entrypoint_is_refused_before_it_runs() {
    let Some(node) = Node::start("a_native_or_script_entrypoint_is_refused_before_it_runs") else {
        return;
    };
    let not_static = (!is_static_elf(BUSYBOX))
        .then(|| format!("{BUSYBOX} is not a static program (Debian's busybox-static)"));
    if support::skip_unless("a_native_or_script_entrypoint_is_refused", not_static) {
        return;
    }

    let busybox = std::fs::read(BUSYBOX).expect("busybox");
    let (listener, port) = peer();
    let url = format!("http://127.0.0.1:{port}/");
    let script = format!("#!/bin/sh\nwget -q -O - {url}\n");
    let image = "localhost/moat-native:e2e";
    node.import(
        image,
        &[
            Entry::Dir("bin"),
            Entry::File("bin/busybox", &busybox, 0o755),
            Entry::File("bin/sh", &busybox, 0o755),
            Entry::File("fetch.sh", script.as_bytes(), 0o755),
        ],
        &["/bin/busybox", "wget", "-q", "-O", "-", &url],
        &[],
    );
    // Even a pod spec that grants the network runs no native program.
    let grants = ["MOAT_ALLOW_NET=*", "MOAT_ALLOW_LISTEN=*"];
    for (args, kind) in [
        (vec![], "/bin/busybox is a native program (ELF)"),
        (vec!["/fetch.sh"], "/fetch.sh is a script (#!)"),
    ] {
        let (status, output, message) = node.run_to_end(image, &args, &grants);
        assert_eq!(status, Some(2), "refused:\n{output}");
        assert_eq!(
            message,
            format!("moat: error: {kind}: moat runs WebAssembly components and nothing else\n"),
            "the termination log says why:\n{output}"
        );
        assert!(!reached(&listener), "the native program ran and connected");
    }
}

/// A hostile guest under the shim goes for the host's internals: the
/// container's `/`, `/proc/self/mem`, `/proc/self/environ`, the
/// termination log, and `..` and symlinks out of the directory its pod
/// spec gives it. Every attempt fails; the termination log is untouched.
#[test]
fn a_guest_under_the_shim_reaches_nothing_of_the_host_but_its_directory() {
    let Some(node) = Node::start("a_guest_under_the_shim_reaches_nothing_of_the_host") else {
        return;
    };
    let probe = std::fs::read(guests::FS_PROBE).expect("the guest is built");
    let secret = "the container's own secret, outside its directory";
    let image = "localhost/moat-fs-probe:e2e";
    node.import(
        image,
        &[
            Entry::File("fs-probe.wasm", &probe, 0o644),
            Entry::File("secret", secret.as_bytes(), 0o644),
            Entry::Dir("data"),
            Entry::File("data/inside.txt", b"inside the grant\n", 0o644),
            Entry::Symlink("data/root", "/"),
            Entry::Symlink("data/p", "/proc"),
            Entry::Symlink("data/up", ".."),
        ],
        &["/fs-probe.wasm"],
        &[],
    );
    let (status, output, message) = node.run_to_end(
        image,
        &["/fs-probe.wasm", "read", "/data/inside.txt"],
        &["MOAT_DIRS=/data:rw"],
    );
    assert_eq!(status, Some(0), "{output}");
    assert!(
        output.contains("read /data/inside.txt: ok 17 bytes: inside the grant"),
        "the directory is there:\n{output}"
    );
    assert_eq!(message, "");

    let (status, output, message) = node.run_to_end(
        image,
        &["/fs-probe.wasm", "escape", "/data"],
        &["MOAT_DIRS=/data:rw"],
    );
    assert_eq!(status, Some(0), "{output}");
    let attempts: Vec<&str> = output.lines().filter(|l| l.contains(": ")).collect();
    for wanted in [
        "poke /proc/self/mem: error",
        "read /proc/self/environ: error",
        "append /dev/termination-log: error",
        "read /data/../secret: error",
        "read /data/root/etc/passwd: error",
        "read /data/p/self/environ: error",
    ] {
        assert!(
            attempts.iter().any(|l| l.starts_with(wanted)),
            "{wanted}:\n{output}"
        );
    }
    let succeeded: Vec<_> = attempts.iter().filter(|l| l.contains(": ok")).collect();
    assert!(
        succeeded.is_empty(),
        "these succeeded: {succeeded:#?}\n{output}"
    );
    assert!(!output.contains(secret), "the secret leaked:\n{output}");
    assert!(
        !output.contains("root:x:0:0"),
        "/etc/passwd leaked:\n{output}"
    );
    assert_eq!(message, "", "the guest wrote the termination log");
}

/// An HTTP handler component under containerd: served on the address the
/// pod spec's `MOAT_HTTP_ADDR` gives, its own outgoing requests under the
/// pod spec's grants, stopped cleanly by SIGTERM.
#[tokio::test(flavor = "multi_thread")]
async fn ctr_serves_an_http_handler_on_the_address_its_pod_spec_gives() {
    let Some(node) = Node::start("ctr_serves_an_http_handler_on_the_address_its_pod_spec_gives")
    else {
        return;
    };
    let containerd = &node.containerd;
    let port = support::free_port();
    let component = std::fs::read(guests::WSTD_SERVE).expect("the guest is built");
    let image = "localhost/moat-wstd-serve:e2e";
    let archive = support::rootfs_image_archive(
        node.work.path(),
        image,
        &[("wstd-serve.wasm", component.as_slice())],
        "/wstd-serve.wasm",
        &[],
    );
    run(containerd
        .ctr(NAMESPACE)
        .args(["image", "import", "--all-platforms"])
        .arg(&archive));
    let log = node.work.path().join("http.log");
    let out = std::fs::File::create(&log).expect("the log");
    let id = format!("http-{}", std::process::id());
    let addr = format!("MOAT_HTTP_ADDR=127.0.0.1:{port}");
    let mut ctr_run = containerd
        .ctr(NAMESPACE)
        .args(["run", "--net-host", "--runtime", "io.containerd.moat.v1"])
        .args(["--env", &addr])
        .args([image, &id])
        .stdin(std::process::Stdio::null())
        .stdout(out.try_clone().expect("the log"))
        .stderr(out)
        .spawn()
        .expect("ctr runs");
    let container_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let mut stream = node.connect_when_served(port, &mut ctr_run, &log).await;
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: pod\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("read");
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.contains("hello from a wasi:http handler\n"),
        "{answer}"
    );
    run(containerd
        .ctr(NAMESPACE)
        .args(["task", "kill", "--signal", "SIGTERM", &id]));
    let status = ctr_run.wait().expect("ctr ends with its task");
    let output = container_log();
    assert_eq!(status.code(), Some(0), "SIGTERM stops it cleanly\n{output}");
    assert!(
        output.contains(&format!("moat: serving http://127.0.0.1:{port}/")),
        "{output}"
    );
    run(containerd.ctr(NAMESPACE).args(["container", "rm", &id]));
}
