//! The shim's sandbox in-process: `MoatSandbox::run`, called with a
//! container of the test's own (arguments, environment, what the shim read
//! of the image), as the shim's executor calls it inside a container's
//! process. No containerd and no root needed: these run everywhere.
//!
//! What a user sees: the guest's exit status, the connection that reached
//! (or did not reach) a peer, and the message a refused start leaves in the
//! termination log that `kubectl describe pod` shows.

use std::path::Path;

use containerd_shim_moat::figures::FiguresTarget;
use containerd_shim_moat::image::{ImageFacts, Layer};
use containerd_shim_moat::{
    COMPONENT_LAYER_MEDIA_TYPE, Container, Image, MoatSandbox, POLICY_LAYER_MEDIA_TYPE,
};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

use moat_guests as guests;

use crate::support;
use crate::support::recorder::{Recorder, SECRET_VALUE, scan_for_the_value};

/// A container whose root filesystem holds the component `guest` (its
/// path in the container, as an entrypoint names it), `env` its
/// environment, from an image that sets no environment of its own.
fn file(guest: &str, args: &[&str], env: &[&str]) -> Container {
    Container {
        args: std::iter::once(guest.to_owned())
            .chain(args.iter().map(|a| a.to_string()))
            .collect(),
        env: env.iter().map(|e| e.to_string()).collect(),
        image: Image::Read(ImageFacts::default()),
        namespace: "moat-test".to_owned(),
        id: "sandbox-test".to_owned(),
        compiled_code: None,
        observe_allowed: false,
        figures: None,
    }
}

/// A container from a wasm OCI image: the component `guest` (a built
/// guest's path) as a layer, and `policy` as a policy layer if given.
fn image(guest: &str, args: &[&str], env: &[&str], policy: Option<&str>) -> Container {
    let mut container = file("guest.wasm", args, env);
    let mut layers = vec![Layer {
        media_type: COMPONENT_LAYER_MEDIA_TYPE.to_owned(),
        bytes: std::fs::read(guest).expect("the guest is built"),
    }];
    if let Some(policy) = policy {
        layers.push(Layer {
            media_type: POLICY_LAYER_MEDIA_TYPE.to_owned(),
            bytes: policy.as_bytes().to_vec(),
        });
    }
    container.image = Image::Read(ImageFacts {
        name: "localhost/test:latest".to_owned(),
        env: Vec::new(),
        layers,
    });
    container
}

/// A sandbox whose container's root filesystem is an empty directory, and
/// whose termination log is a file the test reads.
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

    /// Runs the container to its end, on a thread of its own as the
    /// container's process would.
    async fn run(&self, container: &Container) -> i32 {
        let sandbox = self.sandbox.clone();
        let container = container.clone();
        tokio::task::spawn_blocking(move || sandbox.run(&container))
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
    let container = file(
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
    let container = file(
        &node.place(guests::PROBE),
        &["connect", "127.0.0.1", &port],
        &[],
    );
    assert_eq!(node.run(&container).await, 1, "main returned the denial");
    assert!(!reached(&listener), "no connection was made");

    let container = file(
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
    let container = file(
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
    let digest = support::sha256_digest(policy.as_bytes());
    let args = ["connect", "127.0.0.1", &port];

    // Unanswered: the start is refused, and says how to answer.
    let container = image(guests::PROBE, &args, &[], Some(&policy));
    assert_eq!(node.run(&container).await, 2);
    assert_eq!(
        node.termination_message(),
        format!(
            "moat: error: the image carries a moat policy layer ({digest}); set MOAT_IMAGE_POLICY to {digest} (or apply) to grant what it grants, or to ignore\n"
        )
    );
    assert!(!reached(&listener));

    // Ignored: the guest runs, denied.
    let container = image(
        guests::PROBE,
        &args,
        &["MOAT_IMAGE_POLICY=ignore"],
        Some(&policy),
    );
    assert_eq!(node.run(&container).await, 1);
    assert!(!reached(&listener));

    // Pinned to its digest: granted.
    let pin = format!("MOAT_IMAGE_POLICY={digest}");
    let container = image(guests::PROBE, &args, &[&pin], Some(&policy));
    assert_eq!(node.run(&container).await, 0);
    assert!(reached(&listener), "the guest connected");

    // A pod-spec deny holds over the image's grant.
    let container = image(
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
    let container = image(
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
            support::sha256_digest(policy.as_bytes())
        )),
        "{message}"
    );

    let grant = format!("MOAT_ALOW_NET=127.0.0.1:{port}");
    let container = file(&node.place(guests::PROBE), &args, &[&grant]);
    assert_eq!(node.run(&container).await, 2);
    let message = node.termination_message();
    assert!(
        message.starts_with("moat: error: MOAT_ALOW_NET is not a moat setting;"),
        "{message}"
    );
    assert!(!reached(&listener), "a refused start connects nowhere");
}

/// A guest stopped at its time or memory bound leaves why in the
/// termination log, naming the bound as the pod spec writes it (not `moat
/// run`'s flag, not the embedding API's name), with the exit status
/// `moat run` gives.
#[tokio::test(flavor = "multi_thread")]
async fn a_guest_stopped_at_a_bound_says_so_in_the_pod_specs_words() {
    let node = Node::new();
    let hostile = node.place(guests::HOSTILE);
    let container = file(&hostile, &["wait-forever"], &["MOAT_TIMEOUT=300ms"]);
    assert_eq!(
        node.run(&container).await,
        i32::from(moat_host::TIMEOUT_EXIT)
    );
    let message = node.termination_message();
    assert_eq!(
        message,
        "moat: error: the guest ran past its time limit of 300ms (MOAT_TIMEOUT)\n"
    );

    let container = file(
        &hostile,
        &["grow-memory", "256"],
        &["MOAT_MAX_MEMORY=32MiB"],
    );
    assert_eq!(node.run(&container).await, i32::from(moat_host::TRAP_EXIT));
    let message = node.termination_message();
    assert!(
        message.starts_with("moat: error: the guest reached its memory limit: ")
            && message.ends_with("(raise it with MOAT_MAX_MEMORY)\n"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_image_built_with_its_component_as_a_file_carries_its_policy_as_a_file() {
    let node = Node::new();
    let (listener, port) = peer();
    let policy = format!("allow-net = [\"127.0.0.1:{port}\"]\n");
    std::fs::write(node.dir.path().join("root/moat-policy.toml"), &policy).expect("the policy");
    let guest = node.place(guests::PROBE);
    let args = ["connect", "127.0.0.1", &port];

    let container = file(&guest, &args, &[]);
    assert_eq!(node.run(&container).await, 2);
    assert!(
        node.termination_message().starts_with(&format!(
            "moat: error: the image carries a moat policy file /moat-policy.toml ({}); set MOAT_IMAGE_POLICY",
            support::sha256_digest(policy.as_bytes())
        )),
        "{}",
        node.termination_message()
    );
    assert!(!reached(&listener));

    let container = file(&guest, &args, &["MOAT_IMAGE_POLICY=apply"]);
    assert_eq!(node.run(&container).await, 0);
    assert!(reached(&listener), "the guest connected");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_entrypoint_that_is_not_a_component_is_refused_and_nothing_runs() {
    let node = Node::new();
    let root = node.dir.path().join("root");
    let marker = node.dir.path().join("the-script-ran");
    // A native program (this machine's own `true`), a script that would
    // leave a mark, and a core module.
    std::fs::copy("/bin/true", root.join("native")).expect("an ELF program");
    let script = format!("#!/bin/sh\ntouch {}\n", marker.display());
    std::fs::write(root.join("script.sh"), script).expect("a script");
    std::fs::write(root.join("module.wasm"), b"\0asm\x01\x00\x00\x00").expect("a module");
    for (entrypoint, kind) in [
        ("/native", "is a native program (ELF)"),
        ("/script.sh", "is a script (#!)"),
        (
            "/module.wasm",
            "is a core WebAssembly module (build a component, for wasm32-wasip2)",
        ),
    ] {
        let container = file(entrypoint, &[], &["MOAT_ALLOW_NET=*"]);
        assert_eq!(node.run(&container).await, 2, "{entrypoint}");
        assert_eq!(
            node.termination_message(),
            format!(
                "moat: error: {entrypoint} {kind}: moat runs WebAssembly components and nothing else\n"
            )
        );
    }
    assert!(!marker.exists(), "the script ran");
    // A layer that is not a component, the same.
    let mut container = image(guests::PROBE, &[], &[], None);
    if let Image::Read(facts) = &mut container.image {
        facts.layers[0].bytes = std::fs::read("/bin/true").expect("an ELF program");
    }
    assert_eq!(node.run(&container).await, 2);
    assert!(
        node.termination_message()
            .contains("the image's component layer is a native program (ELF)"),
        "{}",
        node.termination_message()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_images_own_moat_variables_grant_nothing() {
    let node = Node::new();
    let (listener, port) = peer();
    let guest = node.place(guests::PROBE);
    let self_granted = [
        "MOAT_ALLOW_NET=*",
        "MOAT_ALLOW-NET=*",
        "MOAT_IMAGE_POLICY=apply",
    ];
    let mut container = file(&guest, &["connect", "127.0.0.1", &port], &self_granted);
    container.image = Image::Read(ImageFacts {
        name: "localhost/self-granted:latest".to_owned(),
        env: self_granted.iter().map(|e| e.to_string()).collect(),
        layers: Vec::new(),
    });
    assert_eq!(
        node.run(&container).await,
        1,
        "the guest's connect was denied"
    );
    assert!(!reached(&listener), "no connection was made");

    // The pod spec's own grant, over the image's, counts.
    let grant = format!("MOAT_ALLOW_NET=127.0.0.1:{port}");
    container.env[0] = grant;
    container.env.remove(1);
    assert_eq!(node.run(&container).await, 0);
    assert!(reached(&listener), "the guest connected");

    // An image that could not be read does not start.
    container.image = Image::Unreadable("containerd: image x: not found".to_owned());
    assert_eq!(node.run(&container).await, 2);
    assert_eq!(
        node.termination_message(),
        "moat: error: cannot read the container's image: containerd: image x: not found\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_guest_sees_only_the_directories_its_pod_spec_names_read_only_unless_writable() {
    let node = Node::new();
    let root = node.dir.path().join("root");
    std::fs::create_dir_all(root.join("data")).expect("a directory");
    std::fs::create_dir_all(root.join("out")).expect("a directory");
    std::fs::write(root.join("data/config"), "from the pod's volume").expect("a file");
    std::fs::write(root.join("secret"), "the container's own file").expect("a file");
    let guest = node.place(guests::FS_PROBE);
    let run = |args: &[&str], env: &[&str]| {
        let container = file(&guest, args, env);
        let node = &node;
        async move {
            let status = node.run(&container).await;
            (status, node.termination_message())
        }
    };

    // Nothing named: nothing there, not even the container's `/`. (The
    // guest reports each attempt on the container's stdout, the test's
    // own here; what the test checks is the files, untouched.)
    let (status, _) = run(&["write", "/data/config", "changed"], &[]).await;
    assert_eq!(status, 0);
    assert_eq!(
        std::fs::read_to_string(root.join("data/config")).expect("the file"),
        "from the pod's volume"
    );
    let dirs = "MOAT_DIRS=/data,/out:rw";
    let (status, message) = run(&["write", "/data/config", "changed"], &[dirs]).await;
    assert_eq!(status, 0, "{message}");
    assert_eq!(
        std::fs::read_to_string(root.join("data/config")).expect("the file"),
        "from the pod's volume",
        "a read-only directory was written"
    );
    let (status, message) = run(&["write", "/out/result", "written"], &[dirs]).await;
    assert_eq!(status, 0, "{message}");
    assert_eq!(
        std::fs::read_to_string(root.join("out/result")).expect("the guest wrote it"),
        "written"
    );
    let (status, _) = run(&["write", "/secret", "changed"], &[dirs]).await;
    assert_eq!(status, 0);
    assert_eq!(
        std::fs::read_to_string(root.join("secret")).expect("the file"),
        "the container's own file"
    );

    // The container's internals are never given, by path or by type.
    for (dirs, why) in [
        (
            "MOAT_DIRS=/",
            "the container's whole filesystem is never given",
        ),
        ("MOAT_DIRS=/proc", "/proc holds the container's processes"),
        ("MOAT_DIRS=/dev:rw", "/dev holds"),
    ] {
        let (status, message) = run(&["read", "/proc/self/environ"], &[dirs]).await;
        assert_eq!(status, 2, "{dirs}");
        assert!(message.contains(why), "{dirs}: {message}");
    }
    let (status, message) = run(&["read", "/x"], &["MOAT_DIRS=/missing"]).await;
    assert_eq!(status, 2);
    assert!(
        message.starts_with("moat: error: MOAT_DIRS: /missing: cannot examine it"),
        "{message}"
    );
}

/// An HTTP handler needs the pod spec to say where to serve it; given
/// `MOAT_HTTP_ADDR`, it is served there, with its outgoing requests under
/// the pod spec's grants.
#[tokio::test(flavor = "multi_thread")]
async fn an_http_handler_is_served_where_its_pod_spec_says_and_nowhere_without_it() {
    let node = Node::new();
    let guest = node.place(guests::WSTD_SERVE);
    // No address: refused at start, with the variable to set.
    let status = node.run(&file(&guest, &[], &[])).await;
    assert_eq!(status, moat_host::REFUSED_EXIT as i32);
    assert!(
        node.termination_message()
            .contains("is an HTTP handler (it exports a wasi:http handler): set MOAT_HTTP_ADDR"),
        "{}",
        node.termination_message()
    );
    // A command given an address: refused too.
    let status = node
        .run(&file(
            &node.place(guests::PROBE),
            &[],
            &["MOAT_HTTP_ADDR=127.0.0.1:0"],
        ))
        .await;
    assert_eq!(status, moat_host::START_FAILED_EXIT as i32);
    let bad = node
        .run(&file(&guest, &[], &["MOAT_HTTP_ADDR=localhost:80"]))
        .await;
    assert_eq!(bad, moat_host::REFUSED_EXIT as i32);
    assert!(
        node.termination_message()
            .contains("MOAT_HTTP_ADDR=localhost:80"),
        "{}",
        node.termination_message()
    );

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let container = file(&guest, &[], &[&format!("MOAT_HTTP_ADDR=127.0.0.1:{port}")]);
    let sandbox = node.sandbox.clone();
    // The server runs until the test process ends.
    std::thread::spawn(move || sandbox.run(&container));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let answer = loop {
        if let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            use tokio::io::AsyncWriteExt;
            stream
                .write_all(b"GET / HTTP/1.1\r\nHost: pod\r\nConnection: close\r\n\r\n")
                .await
                .expect("write");
            let mut answer = Vec::new();
            stream.read_to_end(&mut answer).await.expect("read");
            break String::from_utf8_lossy(&answer).into_owned();
        }
        assert!(std::time::Instant::now() < deadline, "never served");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.contains("hello from a wasi:http handler\n"),
        "{answer}"
    );
}

/// Issue 58: a container's figures, as the shim's mount gives it their
/// directory: labelled with the container's names, its decisions, bytes
/// and load counted, written at its end; and no directory of the guest's
/// may reach them.
#[tokio::test(flavor = "multi_thread")]
async fn a_containers_figures_are_written_where_the_shim_says_and_kept_from_its_guest() {
    let node = Node::new();
    let figures_dir = node.dir.path().join("root/state/figures");
    std::fs::create_dir_all(&figures_dir).expect("the figures' directory");
    let target = FiguresTarget {
        dir: figures_dir.clone(),
        labels: vec![
            ("namespace".to_owned(), "team-a".to_owned()),
            ("pod".to_owned(), "echo-1".to_owned()),
        ],
        interval: std::time::Duration::from_secs(3600),
    };
    let (listener, port) = peer();
    let grant = format!("MOAT_ALLOW_NET=127.0.0.1:{port}");
    let mut container = file(
        &node.place(guests::STD_NET),
        &["tcp-client", "127.0.0.1", &port, "ping"],
        &[&grant],
    );
    container.figures = Some(target.clone());
    let listener = served(listener);
    let serve = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.expect("the guest connects");
        let mut got = Vec::new();
        stream.read_to_end(&mut got).await.expect("its bytes");
        tokio::io::AsyncWriteExt::write_all(&mut stream, b"pong!")
            .await
            .expect("the reply");
        got
    });
    assert_eq!(
        node.run(&container).await,
        0,
        "{}",
        node.termination_message()
    );
    assert_eq!(serve.await.expect("the server"), b"ping");
    let text = std::fs::read_to_string(figures_dir.join(moat_host::figures::FiguresFile::NAME))
        .expect("the figures");
    let labels = r#"namespace="team-a",pod="echo-1""#;
    for line in [
        format!(r#"moat_traffic_bytes_total{{{labels},transport="tcp",direction="sent"}} 4"#),
        format!(r#"moat_traffic_bytes_total{{{labels},transport="tcp",direction="received"}} 5"#),
        format!(r#"moat_tcp_connections_total{{{labels},opened="connected"}} 1"#),
        format!(r#"moat_decisions_total{{{labels},operation="connect",outcome="allowed"}} 1"#),
    ] {
        assert!(text.lines().any(|l| l == line), "no {line} in\n{text}");
    }
    assert!(
        text.contains(&format!(
            r#"moat_component_load_seconds{{{labels},from="compiled"}} "#
        )),
        "{text}"
    );

    // A writable directory of the guest's that reaches them: refused, and
    // the guest never runs.
    let mut container = file(
        &node.place(guests::FS_PROBE),
        &["write", "/state/figures/figures.prom", "forged"],
        &["MOAT_DIRS=/state:rw"],
    );
    container.figures = Some(FiguresTarget {
        dir: figures_dir.clone(),
        ..target
    });
    assert_eq!(node.run(&container).await, moat_host::REFUSED_EXIT as i32);
    let message = node.termination_message();
    assert!(message.contains("the run's figures"), "{message}");
    assert_eq!(
        std::fs::read_to_string(figures_dir.join(moat_host::figures::FiguresFile::NAME))
            .expect("the figures"),
        text,
        "the figures were changed"
    );
}

/// Issue 56 under the shim: a pod binds a value of its own (a variable
/// of its spec, or a file of its Secret volume) to an HTTPS host it
/// trusts through `MOAT_CA_FILE`. The value arrives there, in the bound
/// header; the guest sends and gets back only the placeholder, and holds
/// the value nowhere in its memory (its run exits 5 if it does), though
/// the server echoes it; the placeholder sent elsewhere is refused before
/// anything is sent; a directory of the guest's that reaches the value's
/// file is refused. Before, the shim refused every `MOAT_SECRET`.
#[tokio::test(flavor = "multi_thread")]
async fn a_pods_secret_reaches_its_bound_host_and_never_its_guest() {
    let node = Node::new();
    let root = node.dir.path().join("root");
    let ca = support::certs::Ca::new("moat shim secrets CA");
    std::fs::create_dir_all(root.join("etc/ca")).expect("a directory");
    std::fs::write(root.join("etc/ca/ca.pem"), ca.pem()).expect("the CA");
    std::fs::create_dir_all(root.join("run/secrets/api")).expect("a directory");
    std::fs::write(
        root.join("run/secrets/api/token"),
        format!("{SECRET_VALUE}\n"),
    )
    .expect("the secret's file");
    let api = Recorder::start(&ca, "127.0.0.1", &["localhost"]).await;
    let port = api.port;
    let guest = node.place(guests::HTTP_PROBE);
    let url = format!("https://localhost:{port}/v1/chat");
    let scan = scan_for_the_value();
    let grant = format!("MOAT_ALLOW_NET=localhost:{port}");
    let binding = |from: &str| {
        format!(
            "MOAT_SECRET=API_KEY;from={from};to=https://localhost:{port}/v1/;\
             header=authorization;form=Bearer {{}}"
        )
    };
    let token = format!("API_TOKEN={SECRET_VALUE}");
    // The variable the value is read from is set for the first binding
    // only, which takes it out of the guest's environment; a guest given
    // it would hold the value (its run exits 5: seen when this test set it
    // for the second binding too).
    for (from, env) in [
        ("env:API_TOKEN", token.as_str()),
        ("file:/run/secrets/api/token", "HOME=/"),
    ] {
        let container = file(
            &guest,
            &[
                "send",
                "GET",
                &url,
                "h:authorization=Bearer ${API_KEY}",
                &scan,
            ],
            &[&grant, "MOAT_CA_FILE=/etc/ca/ca.pem", &binding(from), env],
        );
        assert_eq!(
            node.run(&container).await,
            0,
            "from={from}: {}",
            node.termination_message()
        );
    }
    let heads = api.heads();
    assert_eq!(heads.len(), 2, "{heads:?}");
    for head in &heads {
        assert!(head.starts_with("GET /v1/chat HTTP/1.1\r\n"), "{head}");
        assert!(
            head.lines()
                .any(|l| l.eq_ignore_ascii_case(&format!("authorization: Bearer {SECRET_VALUE}"))),
            "the value in the bound header: {head}"
        );
    }

    // The placeholder to a host the binding does not name: refused
    // before any connection.
    let (listener, other) = peer();
    let container = file(
        &guest,
        &[
            "send",
            "GET",
            &format!("http://127.0.0.1:{other}/v1/chat"),
            "h:authorization=Bearer ${API_KEY}",
        ],
        &[
            &format!("MOAT_ALLOW_NET=127.0.0.1:{other}"),
            &binding("env:API_TOKEN"),
            &token,
        ],
    );
    assert_eq!(node.run(&container).await, 1, "the request failed");
    assert!(!reached(&listener), "the placeholder went elsewhere");

    // A writable directory of the guest's that holds the value's file.
    let container = file(
        &guest,
        &["send", "GET", &url],
        &[
            &grant,
            "MOAT_DIRS=/run/secrets:rw",
            &binding("file:/run/secrets/api/token"),
        ],
    );
    assert_eq!(node.run(&container).await, moat_host::REFUSED_EXIT as i32);
    let message = node.termination_message();
    assert!(message.contains("a secret's file"), "{message}");
    assert_eq!(api.heads().len(), 2, "nothing more was sent");
}
