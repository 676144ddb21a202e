//! End to end through a real containerd: an OCI image of echo-server (its
//! component and its moat policy as files of a filesystem layer, the image
//! built as a Linux image is, so that containerd 1.6 runs it too), imported
//! with `ctr image import` and run with `ctr run --runtime
//! io.containerd.moat.v1`. containerd starts `containerd-shim-moat-v1`
//! from this build; a tokio client talks to the guest over the container's
//! network (the host's, `--net-host`).

mod shim_support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

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
    containerd: shim_support::Containerd,
    work: tempfile::TempDir,
}

impl Node {
    fn start(test: &str) -> Option<Node> {
        if shim_support::skip_without_containerd(test) {
            return None;
        }
        let shim = Path::new(env!("CARGO_BIN_EXE_containerd-shim-moat-v1"));
        Some(Node {
            containerd: shim_support::Containerd::start(None, shim.parent().expect("a directory")),
            work: tempfile::tempdir().expect("a temporary directory"),
        })
    }

    /// Imports an image of echo-server with `files` beside it and `env` as
    /// its own environment.
    fn import_echo_server(&self, image: &str, files: &[(&str, &[u8])], env: &[&str]) {
        let component = std::fs::read(guests::ECHO_SERVER).expect("the guest is built");
        let mut all = vec![("echo-server.wasm", component.as_slice())];
        all.extend_from_slice(files);
        let archive = shim_support::rootfs_image_archive(
            self.work.path(),
            image,
            &all,
            "/echo-server.wasm",
            env,
        );
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
    let port = shim_support::free_port();
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
        shim_support::sha256_digest(policy.as_bytes())
    );
    let mut ctr_run = containerd
        .ctr(NAMESPACE)
        .args(["run", "--net-host", "--runtime", "io.containerd.moat.v1"])
        .args(["--env", &pin, "--env", "MOAT_LOG=moat::net=debug"])
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
    let started = Instant::now();
    let mut stream = loop {
        if let Ok(stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            break stream;
        }
        if let Some(status) = ctr_run.try_wait().expect("ctr's status") {
            panic!(
                "the container ended ({status}):\n{}\ncontainerd's log:\n{}",
                container_log(),
                containerd.log()
            );
        }
        assert!(
            started.elapsed() < START_DEADLINE,
            "echo-server did not listen in {START_DEADLINE:?}:\n{}\ncontainerd's log:\n{}",
            container_log(),
            containerd.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

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

    run(containerd
        .ctr(NAMESPACE)
        .args(["task", "kill", "--signal", "SIGKILL", &id]));
    let status = ctr_run.wait().expect("ctr ends with its task");
    let output = container_log();
    assert_eq!(status.code(), Some(137), "killed: 128 + SIGKILL\n{output}");
    assert!(
        output.contains(&format!(
            "moat: pod spec sets no grants; image policy file /moat-policy.toml {}: applied",
            shim_support::sha256_digest(policy.as_bytes())
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
    run(containerd.ctr(NAMESPACE).args(["container", "rm", &id]));
}

/// An image whose config sets `MOAT_ALLOW_LISTEN` itself: the pod spec's
/// empty `MOAT_ALLOW_LISTEN` overrides it, and the guest is refused.
#[test]
fn a_pod_spec_variable_overrides_a_grant_in_the_images_own_env() {
    let Some(node) = Node::start("a_pod_spec_variable_overrides_a_grant_in_the_images_own_env")
    else {
        return;
    };
    let containerd = &node.containerd;
    let port = shim_support::free_port();
    let image = "localhost/moat-echo-self-granted:e2e";
    let self_grant = format!("MOAT_ALLOW_LISTEN=127.0.0.1:{port}");
    node.import_echo_server(image, &[], &[&self_grant]);
    let id = format!("self-granted-{}", std::process::id());
    let out = containerd
        .ctr(NAMESPACE)
        .args([
            "run",
            "--rm",
            "--net-host",
            "--runtime",
            "io.containerd.moat.v1",
        ])
        .args(["--env", "MOAT_ALLOW_LISTEN="])
        .args([image, &id, "/echo-server.wasm"])
        .arg(format!("127.0.0.1:{port}"))
        .stdin(std::process::Stdio::null())
        .output()
        .expect("ctr runs");
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "the guest's listen failed:\n{output}"
    );
    assert!(
        output.contains(&format!(
            "listen on 127.0.0.1:{port} denied: needs MOAT_ALLOW_LISTEN=127.0.0.1:{port}"
        )),
        "{output}"
    );
    assert!(
        output.contains("moat: pod spec: MOAT_ALLOW_LISTEN=;"),
        "{output}"
    );
}
