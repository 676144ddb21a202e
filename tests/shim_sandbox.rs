//! The shim's sandbox in-process: runwasi's `Sandbox::run_wasi`, called
//! with a container context of the test's own (arguments, environment, an
//! image's layers), as runwasi calls it inside a container's process. No
//! containerd and no root needed: these run everywhere.
//!
//! What a user sees: the guest's exit status, the connection that reached
//! (or did not reach) a peer, and the message a refused start leaves in the
//! termination log that `kubectl describe pod` shows.

use std::path::{Path, PathBuf};

use containerd_shim_moat::{MoatSandbox, POLICY_LAYER_MEDIA_TYPE};
use containerd_shim_wasm::sandbox::Sandbox as _;
use containerd_shim_wasm::sandbox::context::{Entrypoint, RuntimeContext, Source, WasmLayer};
use oci_spec::image::{Descriptor, Digest, MediaType};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

use moat_guests as guests;

mod shim_support;

const COMPONENT_LAYER: &str = "application/vnd.bytecodealliance.wasm.component.layer.v0+wasm";

/// A container as runwasi describes it to the sandbox.
struct Container {
    args: Vec<String>,
    envs: Vec<String>,
    file: PathBuf,
    layers: Vec<WasmLayer>,
}

impl Container {
    /// A container whose root filesystem holds the component `guest` (a
    /// path under the node's root, as a container's entrypoint names it).
    fn file(guest: &str, args: &[&str], envs: &[&str]) -> Container {
        Container {
            args: std::iter::once(guest.to_owned())
                .chain(args.iter().map(|a| a.to_string()))
                .collect(),
            envs: envs.iter().map(|e| e.to_string()).collect(),
            file: PathBuf::from(guest),
            layers: Vec::new(),
        }
    }

    /// A container from an OCI image: the component `guest` (a built
    /// guest's path) as a layer, and `policy` as a policy layer if given.
    fn image(guest: &str, args: &[&str], envs: &[&str], policy: Option<&str>) -> Container {
        let mut container = Container::file("guest.wasm", args, envs);
        let bytes = std::fs::read(guest).expect("the guest is built");
        container.layers.push(layer(COMPONENT_LAYER, bytes));
        if let Some(policy) = policy {
            container
                .layers
                .push(layer(POLICY_LAYER_MEDIA_TYPE, policy.as_bytes().to_vec()));
        }
        container
    }
}

fn layer(media_type: &str, bytes: Vec<u8>) -> WasmLayer {
    let digest: Digest = shim_support::sha256_digest(&bytes)
        .parse()
        .expect("a valid digest");
    WasmLayer {
        config: Descriptor::new(MediaType::from(media_type), bytes.len() as u64, digest),
        precompiled: false,
        layer: bytes,
    }
}

impl RuntimeContext for Container {
    fn args(&self) -> &[String] {
        &self.args
    }

    fn envs(&self) -> &[String] {
        &self.envs
    }

    fn entrypoint(&self) -> Entrypoint<'_> {
        Entrypoint {
            func: "_start".to_owned(),
            name: Some("guest".to_owned()),
            arg0: Some(Path::new(&self.args[0])),
            source: if self.layers.is_empty() {
                Source::File(self.file.clone())
            } else {
                Source::Oci(&self.layers)
            },
        }
    }
}

/// A sandbox whose guest sees an empty directory as `/`, and whose
/// termination log is a file the test reads.
struct Node {
    dir: tempfile::TempDir,
    sandbox: MoatSandbox,
}

impl Node {
    fn new() -> Node {
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::create_dir(dir.path().join("root")).expect("the guest's root");
        std::fs::write(dir.path().join("termination-log"), "").expect("the termination log");
        let sandbox = MoatSandbox::new(dir.path().join("root"), dir.path().join("termination-log"));
        Node { dir, sandbox }
    }

    /// Puts a built guest in the node's root; its path in there.
    fn place(&self, guest: &str) -> String {
        let name = Path::new(guest).file_name().expect("a file name");
        std::fs::copy(guest, self.dir.path().join("root").join(name)).expect("the guest is built");
        format!("/{}", name.to_string_lossy())
    }

    async fn run(&self, container: &Container) -> i32 {
        self.sandbox
            .run_wasi(container)
            .await
            .expect("the sandbox returns an exit status")
    }

    fn termination_message(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("termination-log")).expect("readable")
    }
}

/// A peer the guest may try to reach (non-blocking, for [`reached`]).
fn peer() -> (std::net::TcpListener, String) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("non-blocking");
    let port = listener
        .local_addr()
        .expect("local addr")
        .port()
        .to_string();
    (listener, port)
}

/// The same peer, for a test that serves the guest.
fn served(listener: std::net::TcpListener) -> TcpListener {
    TcpListener::from_std(listener).expect("a tokio listener")
}

/// Whether a connection reached `listener`. The guest has exited, so a
/// connection it made is in the backlog; this takes it.
fn reached(listener: &std::net::TcpListener) -> bool {
    match listener.accept() {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
        Err(e) => panic!("accept: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_sdk_guest_runs_to_its_exit_status_with_the_grants_of_its_pod_spec() {
    let node = Node::new();
    let (listener, port) = peer();
    let grant = format!("MOAT_ALLOW_NET=127.0.0.1:{port}");
    let container = Container::file(
        &node.place(guests::PROBE),
        &["exit", "127.0.0.1", &port, "0", "7"],
        &[&grant, "MOAT_ALLOW_LISTEN=127.0.0.1"],
    );
    let listener = served(listener);
    let serve = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.expect("the guest connects");
        let mut held = [0u8; 7];
        stream.read_exact(&mut held).await.expect("its bytes");
        held
    });
    let status = node.run(&container).await;
    assert_eq!(status, 7, "the guest's own exit code");
    let held = serve.await.expect("the server");
    assert_eq!(&held, b"holding");
    assert_eq!(node.termination_message(), "", "a run is not a refusal");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_guest_without_grants_reaches_nothing() {
    let node = Node::new();
    let (listener, port) = peer();
    let container = Container::file(
        &node.place(guests::PROBE),
        &["connect", "127.0.0.1", &port],
        &[],
    );
    assert_eq!(node.run(&container).await, 1, "main returned the denial");
    assert!(!reached(&listener), "no connection was made");

    let container = Container::file(
        &node.place(guests::STD_NET),
        &["tcp-client", "127.0.0.1", &port, "hi"],
        &[],
    );
    assert_eq!(
        node.run(&container).await,
        1,
        "the stock guest's connect failed"
    );
    assert!(!reached(&listener), "no connection was made");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stock_guest_runs_under_the_same_grants() {
    let node = Node::new();
    let (listener, port) = peer();
    let grant = format!("MOAT_ALLOW_NET=127.0.0.1:{port}");
    let container = Container::file(
        &node.place(guests::STD_NET),
        &["tcp-client", "127.0.0.1", &port, "ping"],
        &[&grant],
    );
    let listener = served(listener);
    let serve = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.expect("the guest connects");
        let mut got = Vec::new();
        stream.read_to_end(&mut got).await.expect("its bytes");
        tokio::io::AsyncWriteExt::write_all(&mut stream, b"pong")
            .await
            .expect("the reply");
        got
    });
    let status = node.run(&container).await;
    assert_eq!(status, 0);
    let got = serve.await.expect("the server");
    assert_eq!(got, b"ping");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_image_policy_layer_grants_once_the_pod_spec_accepts_it() {
    let node = Node::new();
    let (listener, port) = peer();
    let policy = format!("allow-net = [\"127.0.0.1:{port}\"]\n");
    let digest = shim_support::sha256_digest(policy.as_bytes());
    let args = ["connect", "127.0.0.1", &port];

    // Unanswered: the start is refused, and says how to answer.
    let container = Container::image(guests::PROBE, &args, &[], Some(&policy));
    assert_eq!(node.run(&container).await, 2);
    assert_eq!(
        node.termination_message(),
        format!(
            "moat: error: the image carries a moat policy layer ({digest}); set MOAT_IMAGE_POLICY to {digest} (or apply) to grant what it grants, or to ignore\n"
        )
    );
    assert!(!reached(&listener));

    // Ignored: the guest runs, denied.
    let container = Container::image(
        guests::PROBE,
        &args,
        &["MOAT_IMAGE_POLICY=ignore"],
        Some(&policy),
    );
    assert_eq!(node.run(&container).await, 1);
    assert!(!reached(&listener));

    // Pinned to its digest: granted.
    let pin = format!("MOAT_IMAGE_POLICY={digest}");
    let container = Container::image(guests::PROBE, &args, &[&pin], Some(&policy));
    assert_eq!(node.run(&container).await, 0);
    assert!(reached(&listener), "the guest connected");

    // A pod-spec deny holds over the image's grant.
    let container = Container::image(
        guests::PROBE,
        &args,
        &[&pin, "MOAT_DENY_NET=127.0.0.1"],
        Some(&policy),
    );
    assert_eq!(node.run(&container).await, 1);
    assert!(!reached(&listener));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_policy_is_refused_at_start_with_a_message_kubectl_shows() {
    let node = Node::new();
    let (listener, port) = peer();
    let args = ["connect", "127.0.0.1", &port];

    let policy = "max-sockets = 8\nallow-net = [\"127.0.0.1:99999\"]\n";
    let container = Container::image(
        guests::PROBE,
        &args,
        &["MOAT_IMAGE_POLICY=apply"],
        Some(policy),
    );
    assert_eq!(node.run(&container).await, 2);
    let message = node.termination_message();
    assert!(
        message.starts_with(&format!(
            "moat: error: policy layer {}:2: allow-net: ",
            shim_support::sha256_digest(policy.as_bytes())
        )),
        "{message}"
    );

    let grant = format!("MOAT_ALOW_NET=127.0.0.1:{port}");
    let container = Container::file(&node.place(guests::PROBE), &args, &[&grant]);
    assert_eq!(node.run(&container).await, 2);
    let message = node.termination_message();
    assert!(
        message.starts_with("moat: error: MOAT_ALOW_NET is not a moat setting;"),
        "{message}"
    );
    assert!(!reached(&listener), "a refused start connects nowhere");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_image_built_with_its_component_as_a_file_carries_its_policy_as_a_file() {
    let node = Node::new();
    let (listener, port) = peer();
    let policy = format!("allow-net = [\"127.0.0.1:{port}\"]\n");
    std::fs::write(node.dir.path().join("root/moat-policy.toml"), &policy).expect("the policy");
    let guest = node.place(guests::PROBE);
    let args = ["connect", "127.0.0.1", &port];

    let container = Container::file(&guest, &args, &[]);
    assert_eq!(node.run(&container).await, 2);
    assert!(
        node.termination_message().starts_with(&format!(
            "moat: error: the image carries a moat policy file /moat-policy.toml ({}); set MOAT_IMAGE_POLICY",
            shim_support::sha256_digest(policy.as_bytes())
        )),
        "{}",
        node.termination_message()
    );
    assert!(!reached(&listener));

    let container = Container::file(&guest, &args, &["MOAT_IMAGE_POLICY=apply"]);
    assert_eq!(node.run(&container).await, 0);
    assert!(reached(&listener), "the guest connected");
}
