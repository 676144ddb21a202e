//! The shim under runwasi's own test harness (`containerd-shim-wasm`'s
//! `testing` feature): each case builds an OCI bundle, and runwasi runs it
//! in-process as a real container (youki's libcontainer: namespaces, the
//! bundle's root filesystem, the container's stdio as files), calling
//! moat's sandbox inside it.
//!
//! The harness reads images from the containerd at
//! `/run/containerd/containerd.sock`: the test uses the one running there,
//! or starts its own there for the test's length. The harness cannot give
//! a container environment variables or arguments, so grants from the
//! environment are tested in `shim_sandbox.rs` and `shim_containerd.rs`;
//! here a guest runs with no grants at all, as a pod with none would.

mod shim_support;

use std::path::Path;
use std::time::Duration;

use containerd_shim_moat::{MoatShim, POLICY_LAYER_MEDIA_TYPE};
use containerd_shim_wasm::testing::{WasiTest, oci_helpers};

use moat_guests as guests;

/// Where runwasi's harness and `ctr` look for containerd.
const DEFAULT_SOCKET: &str = "/run/containerd/containerd.sock";

/// Longest a guest here may run; these guests end at once.
const RUN_DEADLINE: Duration = Duration::from_secs(60);

fn read(guest: &str) -> Vec<u8> {
    std::fs::read(guest).expect("the guest is built")
}

/// Runs a container named `name` whose root filesystem holds `guest` (on
/// the host's network when `host_network`) to its end: its exit status,
/// stdout and stderr.
fn run_guest(name: &str, guest: &str, host_network: bool) -> (u32, String, String) {
    let mut builder = WasiTest::<MoatShim>::builder().unwrap().with_name(name);
    if host_network {
        builder = builder.with_host_network();
    }
    builder
        .with_wasm(read(guest))
        .unwrap()
        .build()
        .unwrap()
        .start()
        .unwrap()
        .wait(RUN_DEADLINE)
        .unwrap()
}

/// One test, cases in sequence: the harness names its containers and
/// shares one containerd.
#[test]
fn runwasi_runs_moat_guests_in_containers() {
    if shim_support::skip_without_containerd("runwasi_runs_moat_guests_in_containers") {
        return;
    }
    let _containerd = if std::os::unix::net::UnixStream::connect(DEFAULT_SOCKET).is_ok() {
        None
    } else {
        let shim_dir = Path::new(env!("CARGO_BIN_EXE_containerd-shim-moat-v1"))
            .parent()
            .expect("the shim's directory");
        Some(shim_support::Containerd::start(
            Some(Path::new(DEFAULT_SOCKET)),
            shim_dir,
        ))
    };

    // An SDK guest runs to its end: its stdout is the container's.
    let (status, stdout, _) = run_guest("moat-hello", guests::HELLO, false);
    assert_eq!((status, stdout.as_str()), (0, "hello from a moat guest\n"));

    // A stock program's exit status is the container's: std-net returns
    // ExitCode 2 for a missing mode, which Rust's std on wasip2 reports
    // through wasi:cli/exit as an error, status 1.
    let (status, _, stderr) = run_guest("moat-stock", guests::STD_NET, false);
    assert_eq!(
        status, 1,
        "std-net's status for a missing mode; stderr: {stderr}"
    );
    assert!(stderr.contains("unknown mode \"\""), "{stderr}");

    // With no grants a server cannot listen: echo-server's default address
    // is refused, on the host's network, before any socket exists.
    let free_before = std::net::TcpListener::bind("127.0.0.1:7000").is_ok();
    let (status, stdout, stderr) = run_guest("moat-denied", guests::ECHO_SERVER, true);
    assert_eq!(status, 1, "stdout: {stdout}\nstderr: {stderr}");
    assert!(
        stderr.contains("listen on 127.0.0.1:7000 denied: needs MOAT_ALLOW_LISTEN=127.0.0.1:7000"),
        "the denial, naming the pod spec's variable, in the container's stderr: {stderr}"
    );
    assert!(
        stderr.contains("moat: pod spec sets no grants; image policy: none"),
        "the start's audit line: {stderr}"
    );
    if free_before {
        assert!(
            std::net::TcpListener::bind("127.0.0.1:7000").is_ok(),
            "the port was never claimed"
        );
    }

    // An image with a policy layer: containerd hands the layer to the shim
    // beside the component, and a pod spec that did not accept it keeps
    // the container from starting, saying how to accept it.
    if !shim_support::runs_wasm_layers() {
        let why = format!(
            "containerd {:?} unpacks every image and refuses one with wasm or policy layers \
             (\"mismatched image rootfs and manifest layers\"); 1.7 or later runs them",
            shim_support::containerd_version()
        );
        eprintln!("skipping the policy-layer case: {why}");
        return;
    }
    let policy = b"allow-listen = [\"127.0.0.1:7000\"]\n".to_vec();
    let image = "localhost/moat-echo-policy:test";
    let container = "moat-policy";
    oci_helpers::import_image(
        image,
        &[
            &oci_helpers::ImageContent {
                bytes: read(guests::ECHO_SERVER),
                media_type: "application/vnd.bytecodealliance.wasm.component.layer.v0+wasm"
                    .to_owned(),
            },
            &oci_helpers::ImageContent {
                bytes: policy.clone(),
                media_type: POLICY_LAYER_MEDIA_TYPE.to_owned(),
            },
        ],
    )
    .unwrap();
    oci_helpers::create_container(container, image).unwrap();
    let _cleanup = oci_helpers::OCICleanup {
        image_name: image.to_owned(),
        container_name: container.to_owned(),
    };
    let (status, _, stderr) = WasiTest::<MoatShim>::builder()
        .unwrap()
        .with_name(container)
        .with_host_network()
        .build()
        .unwrap()
        .start()
        .unwrap()
        .wait(RUN_DEADLINE)
        .unwrap();
    assert_eq!(status, 2, "{stderr}");
    let digest = shim_support::sha256_digest(&policy);
    assert!(
        stderr.contains(&format!(
            "moat: error: the image carries a moat policy layer ({digest}); set MOAT_IMAGE_POLICY"
        )),
        "{stderr}"
    );
}
