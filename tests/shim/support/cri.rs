//! A node as kubelet sees it: containerd with its CRI plugin on, driven
//! over the CRI gRPC API (`RunPodSandbox`, `CreateContainer`,
//! `StartContainer`, ... as kubelet sends them), a pod network made by
//! Debian's CNI plugins (a bridge of the node's own, host-local
//! addresses), and the node's pause image built here from Debian's static
//! busybox (a native program, as every node's pause is). For the CRI tests
//! (`tests/shim/shim_cri.rs`) and the pod density and start measurements
//! (`shim/examples/density.rs`).
//!
//! What kubelet does and this does not: pull images (they are imported
//! with `ctr`), run probes, or set pods' security contexts and resources.

use super::{Containerd, Entry, Release};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_cri::v1::image_service_client::ImageServiceClient;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::{
    ContainerConfig, ContainerMetadata, ContainerState, ContainerStatusRequest,
    CreateContainerRequest, ImageSpec, ImageStatusRequest, KeyValue, LinuxContainerConfig,
    LinuxContainerSecurityContext, LinuxPodSandboxConfig, LinuxSandboxSecurityContext, Mount,
    NamespaceMode, NamespaceOption, PodSandboxConfig, PodSandboxMetadata, PodSandboxState,
    PodSandboxStatusRequest, RemovePodSandboxRequest, RunPodSandboxRequest, StartContainerRequest,
    StopPodSandboxRequest,
};
use tonic::transport::{Channel, Endpoint};

/// The containerd namespace CRI keeps its images and containers in.
pub const NAMESPACE: &str = "k8s.io";

/// The node's pause image (its `sandbox_image`).
pub const PAUSE_IMAGE: &str = "localhost/moat-cri-pause:test";

/// Longest a step may take: containerd starts a shim, the shim a
/// container, moat compiles a component. Past it the test fails with
/// containerd's log.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// Why this machine cannot run a CRI node, if it cannot.
pub fn cannot_run_cri() -> Option<String> {
    if let Some(why) = super::cannot_run_containerd() {
        return Some(why);
    }
    for (path, package) in [
        ("/usr/lib/cni/bridge", "containernetworking-plugins"),
        ("/usr/lib/cni/host-local", "containernetworking-plugins"),
        ("/usr/lib/cni/loopback", "containernetworking-plugins"),
        ("/bin/busybox", "busybox-static"),
    ] {
        if !Path::new(path).exists() {
            return Some(format!(
                "{path} is missing (Debian's {package} provides it)"
            ));
        }
    }
    None
}

/// A containerd with the CRI plugin on, a pod network of its own, and CRI
/// clients.
pub struct Node {
    pub containerd: Containerd,
    pub work: tempfile::TempDir,
    /// The pod network's bridge (its gateway address is the node's).
    bridge: String,
    /// The first three octets of the pod network (`10.89.7`).
    subnet: String,
    /// Where the pods' cgroups go: `/moat-cri-<pid>-<n>`.
    cgroup_parent: String,
    pub runtime: RuntimeServiceClient<Channel>,
    pub images: ImageServiceClient<Channel>,
    /// Whether a failed start is tried again, as kubelet does.
    pub retry: bool,
    /// How many starts were tried again.
    pub retried: std::sync::atomic::AtomicUsize,
}

impl Node {
    /// A node of containerd `release` that finds `containerd-shim-moat-v1`
    /// in `shim_dir`; `n` tells apart the nodes of concurrent tests, and
    /// `restrict_oom_score_adj` is containerd's CRI setting.
    pub async fn start(
        shim_dir: &Path,
        n: u8,
        restrict_oom_score_adj: bool,
        release: &Release,
    ) -> Node {
        let work = tempfile::tempdir().expect("a temporary directory");
        let pid = std::process::id();
        let bridge = format!("mcri{}{n}", pid % 100_000);
        let subnet = format!("10.{}.{}", 89 + n, pid % 250);
        let cni = work.path().join("cni");
        std::fs::create_dir_all(&cni).expect("the CNI directory");
        std::fs::write(
            cni.join("10-moat-cri.conflist"),
            serde_json::json!({
                "cniVersion": "0.4.0",
                "name": format!("moat-cri-{pid}-{n}"),
                "plugins": [{
                    "type": "bridge",
                    "bridge": bridge,
                    "isGateway": true,
                    "ipMasq": false,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": format!("{subnet}.0/24")}]],
                        "dataDir": work.path().join("ipam"),
                    },
                }],
            })
            .to_string(),
        )
        .expect("the CNI configuration");
        let cri = cri_config(release, &cni, restrict_oom_score_adj);
        let containerd = Containerd::start_with(None, shim_dir, Some(&cri), release);
        let socket = containerd.socket().to_path_buf();
        let channel = Endpoint::try_from("http://[::]:0")
            .expect("an endpoint")
            .connect_with_connector(tower::service_fn(move |_| {
                let socket = socket.clone();
                async move {
                    tokio::net::UnixStream::connect(socket)
                        .await
                        .map(hyper_util::rt::TokioIo::new)
                }
            }))
            .await
            .expect("containerd's CRI socket");
        let node = Node {
            containerd,
            work,
            bridge,
            subnet,
            cgroup_parent: format!("/moat-cri-{pid}-{n}"),
            runtime: RuntimeServiceClient::new(channel.clone()),
            images: ImageServiceClient::new(channel),
            retry: false,
            retried: std::sync::atomic::AtomicUsize::new(0),
        };
        node.import(
            PAUSE_IMAGE,
            &busybox_layer(),
            &["/bin/busybox", "sleep", "2147483647"],
        )
        .await;
        node
    }

    /// The node's address on the pod network.
    pub fn gateway(&self) -> String {
        format!("{}.1", self.subnet)
    }

    /// Imports an image of `entries` with `entrypoint` into CRI's
    /// namespace, and waits until CRI knows it.
    pub async fn import(&self, image: &str, entries: &[Entry<'_>], entrypoint: &[&str]) {
        let archive = super::rootfs_image(self.work.path(), image, entries, entrypoint, &[]);
        self.import_archive(image, &archive).await;
    }

    /// Imports the image archive `archive` (named `image`) into CRI's
    /// namespace, and waits until CRI knows it.
    pub async fn import_archive(&self, image: &str, archive: &Path) {
        if let Err(why) = self.try_import_archive(image, archive).await {
            panic!("ctr image import {image}: {why}");
        }
    }

    /// As [`Node::import_archive`], what `ctr image import` said when it
    /// fails.
    pub async fn try_import_archive(&self, image: &str, archive: &Path) -> Result<(), String> {
        let out = self
            .containerd
            .ctr(NAMESPACE)
            .args(["image", "import", "--all-platforms"])
            .arg(archive)
            .output()
            .expect("ctr runs");
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let images = self.images.clone();
        self.until(&format!("CRI knows {image}"), || {
            let mut images = images.clone();
            async move {
                let status = images
                    .image_status(ImageStatusRequest {
                        image: Some(image_spec(image)),
                        verbose: false,
                    })
                    .await
                    .ok()?;
                status.into_inner().image.map(|_| ())
            }
        })
        .await;
        Ok(())
    }

    /// Polls `check` until it gives a value; fails the test with
    /// containerd's log past [`DEADLINE`].
    pub async fn until<T, F, Fut>(&self, what: &str, mut check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        let started = Instant::now();
        loop {
            if let Some(value) = check().await {
                return value;
            }
            assert!(
                started.elapsed() < DEADLINE,
                "{what}: not within {DEADLINE:?}; containerd's log:\n{}",
                self.containerd.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The pod sandbox config of pod `name`.
    pub fn pod_config(&self, name: &str) -> PodSandboxConfig {
        self.pod_config_in(name, "default")
    }

    /// As [`Node::pod_config`], for a pod of Kubernetes namespace
    /// `namespace`.
    pub fn pod_config_in(&self, name: &str, namespace: &str) -> PodSandboxConfig {
        let logs = self.work.path().join("pods").join(name);
        std::fs::create_dir_all(&logs).expect("the pod's log directory");
        PodSandboxConfig {
            metadata: Some(PodSandboxMetadata {
                name: name.to_owned(),
                uid: format!("uid-{name}-{}", std::process::id()),
                namespace: namespace.to_owned(),
                attempt: 0,
            }),
            hostname: name.to_owned(),
            log_directory: logs.display().to_string(),
            linux: Some(LinuxPodSandboxConfig {
                cgroup_parent: self.cgroup_parent.clone(),
                security_context: Some(LinuxSandboxSecurityContext {
                    namespace_options: Some(kubelet_namespaces()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// `RunPodSandbox` of pod `name` under `handler`: its id and address.
    pub async fn run_pod(&self, name: &str, handler: &str) -> Pod {
        self.run_pod_in(name, handler, "default").await
    }

    /// As [`Node::run_pod`], a pod of Kubernetes namespace `namespace`.
    pub async fn run_pod_in(&self, name: &str, handler: &str, namespace: &str) -> Pod {
        let config = self.pod_config_in(name, namespace);
        let mut tries = 0;
        let id = loop {
            match self
                .runtime
                .clone()
                .run_pod_sandbox(RunPodSandboxRequest {
                    config: Some(config.clone()),
                    runtime_handler: handler.to_owned(),
                })
                .await
            {
                Ok(answer) => break answer.into_inner().pod_sandbox_id,
                Err(e) if self.retry_as_kubelet(&mut tries, &e) => {}
                Err(e) => panic!(
                    "RunPodSandbox {name} ({handler}): {e}\ncontainerd's log:\n{}",
                    self.containerd.log()
                ),
            }
        };
        let status = self
            .runtime
            .clone()
            .pod_sandbox_status(PodSandboxStatusRequest {
                pod_sandbox_id: id.clone(),
                verbose: true,
            })
            .await
            .expect("PodSandboxStatus")
            .into_inner();
        let (state, ip) = status
            .status
            .as_ref()
            .map(|s| {
                (
                    s.state,
                    s.network.as_ref().map(|n| n.ip.clone()).unwrap_or_default(),
                )
            })
            .expect("a sandbox status");
        assert_eq!(
            state,
            PodSandboxState::SandboxReady as i32,
            "pod {name} ({handler}) is ready; containerd's log:\n{}",
            self.containerd.log()
        );
        assert!(
            ip.starts_with(&format!("{}.", self.subnet)),
            "pod {name} has an address of the pod network: {ip:?}"
        );
        let netns = status
            .info
            .get("info")
            .and_then(|info| serde_json::from_str::<serde_json::Value>(info).ok())
            .and_then(|info| {
                info["runtimeSpec"]["linux"]["namespaces"]
                    .as_array()?
                    .iter()
                    .find(|ns| ns["type"] == "network")?["path"]
                    .as_str()
                    .map(PathBuf::from)
            });
        Pod {
            id,
            ip,
            config,
            netns,
            containers: Vec::new(),
        }
    }

    /// `CreateContainer` and `StartContainer` of `app` in `pod`: its id.
    pub async fn start_container(&self, pod: &mut Pod, app: App<'_>) -> String {
        let App {
            name,
            attempt,
            image,
            command,
            env,
            mounts,
        } = app;
        let config = ContainerConfig {
            metadata: Some(ContainerMetadata {
                name: name.to_owned(),
                attempt,
            }),
            image: Some(image_spec(image)),
            command: command.iter().map(|w| w.to_string()).collect(),
            envs: env
                .iter()
                .map(|(key, value)| KeyValue {
                    key: key.to_string(),
                    value: value.to_string(),
                })
                .collect(),
            mounts,
            log_path: format!("{name}/{attempt}.log"),
            linux: Some(LinuxContainerConfig {
                security_context: Some(LinuxContainerSecurityContext {
                    namespace_options: Some(kubelet_namespaces()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut tries = 0;
        let id = loop {
            let mut config = config.clone();
            if let Some(metadata) = &mut config.metadata {
                // kubelet's next attempt after a failed start.
                metadata.attempt += tries;
            }
            let id = self
                .runtime
                .clone()
                .create_container(CreateContainerRequest {
                    pod_sandbox_id: pod.id.clone(),
                    config: Some(config),
                    sandbox_config: Some(pod.config.clone()),
                })
                .await
                .unwrap_or_else(|e| {
                    panic!(
                        "CreateContainer {name}: {e}\ncontainerd's log:\n{}",
                        self.containerd.log()
                    )
                })
                .into_inner()
                .container_id;
            match self
                .runtime
                .clone()
                .start_container(StartContainerRequest {
                    container_id: id.clone(),
                })
                .await
            {
                Ok(_) => break id,
                Err(e) if self.retry_as_kubelet(&mut tries, &e) => {}
                Err(e) => panic!(
                    "StartContainer {name}: {e}\ncontainerd's log:\n{}",
                    self.containerd.log()
                ),
            }
        };
        pod.containers.push(id.clone());
        id
    }

    /// The exit code of container `id` once it has ended.
    pub async fn exit_code(&self, id: &str) -> i32 {
        let runtime = self.runtime.clone();
        self.until(&format!("container {id} ends"), || {
            let mut runtime = runtime.clone();
            async move {
                let status = runtime
                    .container_status(ContainerStatusRequest {
                        container_id: id.to_owned(),
                        verbose: false,
                    })
                    .await
                    .ok()?
                    .into_inner()
                    .status?;
                (status.state == ContainerState::ContainerExited as i32).then_some(status.exit_code)
            }
        })
        .await
    }

    /// What container `name` (attempt `attempt`) of pod `pod` wrote, from
    /// the log CRI keeps of it.
    pub fn log(&self, pod: &str, name: &str, attempt: u32) -> String {
        let path = self
            .work
            .path()
            .join("pods")
            .join(pod)
            .join(name)
            .join(format!("{attempt}.log"));
        std::fs::read_to_string(path).unwrap_or_default()
    }

    /// Whether to try a failed `RunPodSandbox` or `StartContainer` again,
    /// as kubelet does (the density measurements do, up to three times,
    /// counting them in [`Node::retried`]; the tests never do).
    fn retry_as_kubelet(&self, tries: &mut u32, error: &tonic::Status) -> bool {
        if !self.retry || *tries >= 3 {
            return false;
        }
        *tries += 1;
        self.retried
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        eprintln!("retrying as kubelet would: {}", error.message());
        true
    }

    /// The log of container `(pod, name, attempt)` once it holds `needle`
    /// (CRI copies a container's stdout and stderr to it each on its own,
    /// so a line may land after the container has ended).
    pub async fn log_with(&self, (pod, name, attempt): (&str, &str, u32), needle: &str) -> String {
        let started = Instant::now();
        loop {
            let log = self.log(pod, name, attempt);
            if log.contains(needle) {
                return log;
            }
            assert!(
                started.elapsed() < DEADLINE,
                "{needle:?} in the log of {name} ({attempt}): not within {DEADLINE:?}; \
                 the log:\n{log}\ncontainerd's log:\n{}",
                self.containerd.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `StopPodSandbox` and `RemovePodSandbox` of `pod`, then waits until
    /// nothing of it is left on the node: no shim or container process,
    /// no mount, no cgroup, no network namespace.
    pub async fn remove_pod(&self, pod: &Pod) {
        let mut runtime = self.runtime.clone();
        runtime
            .stop_pod_sandbox(StopPodSandboxRequest {
                pod_sandbox_id: pod.id.clone(),
            })
            .await
            .expect("StopPodSandbox");
        runtime
            .remove_pod_sandbox(RemovePodSandboxRequest {
                pod_sandbox_id: pod.id.clone(),
            })
            .await
            .expect("RemovePodSandbox");
        let ids: Vec<&String> = std::iter::once(&pod.id).chain(&pod.containers).collect();
        self.until("the pod's processes end", || async {
            let left: Vec<String> = processes()
                .into_iter()
                .filter(|(_, _, cmdline)| ids.iter().any(|id| cmdline.contains(id.as_str())))
                .map(|(pid, _, cmdline)| format!("{pid} {cmdline}"))
                .collect();
            left.is_empty().then_some(())
        })
        .await;
        let mounts = std::fs::read_to_string("/proc/self/mounts").expect("the mount table");
        let left: Vec<&str> = mounts
            .lines()
            .filter(|line| ids.iter().any(|id| line.contains(id.as_str())))
            .collect();
        assert!(left.is_empty(), "mounts left behind: {left:#?}");
        for id in &ids {
            for controller in ["memory", "pids", "cpu", "devices", "freezer", "blkio"] {
                let cgroup = Path::new("/sys/fs/cgroup")
                    .join(controller)
                    .join(self.cgroup_parent.trim_start_matches('/'))
                    .join(id);
                assert!(!cgroup.exists(), "cgroup left behind: {}", cgroup.display());
            }
        }
        if let Some(netns) = &pod.netns {
            assert!(
                !netns.exists(),
                "network namespace left behind: {}",
                netns.display()
            );
        }
    }

    /// The shim processes of this containerd at the top of their tree (a
    /// shim's zygotes and containers are its children and share its
    /// command line).
    pub fn moat_shims(&self) -> Vec<i32> {
        let socket = self.containerd.socket().display().to_string();
        let all = processes();
        let ours: HashMap<i32, i32> = all
            .iter()
            .filter(|(_, _, cmdline)| {
                cmdline.contains("containerd-shim-moat-v1") && cmdline.contains(&socket)
            })
            .map(|(pid, ppid, _)| (*pid, *ppid))
            .collect();
        ours.iter()
            .filter(|(_, ppid)| !ours.contains_key(ppid))
            .map(|(pid, _)| *pid)
            .collect()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.bridge])
            .stderr(std::process::Stdio::null())
            .status();
        for controller in [
            "memory", "pids", "cpu", "devices", "freezer", "blkio", "cpuset",
        ] {
            let _ = std::fs::remove_dir(
                Path::new("/sys/fs/cgroup")
                    .join(controller)
                    .join(self.cgroup_parent.trim_start_matches('/')),
            );
        }
    }
}

/// A container of a pod, as kubelet asks for it.
pub struct App<'a> {
    /// Its name in the pod.
    pub name: &'a str,
    /// Which attempt (kubelet's restart count).
    pub attempt: u32,
    pub image: &'a str,
    /// Its command (the image's entrypoint replaced).
    pub command: &'a [&'a str],
    /// The pod spec's variables.
    pub env: &'a [(&'a str, &'a str)],
    pub mounts: Vec<Mount>,
}

/// A pod made on a [`Node`].
pub struct Pod {
    pub id: String,
    /// Its address on the pod network.
    pub ip: String,
    pub config: PodSandboxConfig,
    /// Its network namespace, as CRI's status names it.
    pub netns: Option<PathBuf>,
    /// Its containers' ids.
    pub containers: Vec<String>,
}

/// The namespaces kubelet asks for, for a pod without `hostNetwork`,
/// `hostIPC` or `shareProcessNamespace`: the pod's network and IPC, a PID
/// namespace for each container.
/// The CRI plugin's tables for `release`: the node's pause image, runc
/// and moat as runtimes, the pod network's CNI configuration in `cni`.
/// containerd 1.x reads them under `io.containerd.grpc.v1.cri` (version 2
/// of the file); 2.x splits them among `io.containerd.cri.v1.images`,
/// `io.containerd.cri.v1.runtime` and `io.containerd.grpc.v1.cri` (the
/// streaming server) in version 3, where the pause image is a pinned
/// image and CNI takes a list of plugin directories.
fn cri_config(release: &Release, cni: &Path, restrict_oom_score_adj: bool) -> String {
    // Root here lacks CAP_SYS_RESOURCE, so a sandbox's oom_score_adj of
    // -998 cannot be set (a real node does not need the setting).
    let cni = cni.display();
    if release.config_version() >= 3 {
        format!(
            r#"[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{PAUSE_IMAGE}"
[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = {restrict_oom_score_adj}
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.moat]
      runtime_type = "io.containerd.moat.v1"
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "{cni}"
[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"#
        )
    } else {
        format!(
            r#"[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = {restrict_oom_score_adj}
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.moat]
      runtime_type = "io.containerd.moat.v1"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni}"
"#
        )
    }
}

fn kubelet_namespaces() -> NamespaceOption {
    NamespaceOption {
        network: NamespaceMode::Pod as i32,
        pid: NamespaceMode::Container as i32,
        ipc: NamespaceMode::Pod as i32,
        ..Default::default()
    }
}

pub fn image_spec(image: &str) -> ImageSpec {
    ImageSpec {
        image: image.to_owned(),
        ..Default::default()
    }
}

/// Every process's pid, parent pid and command line (NULs as spaces).
pub fn processes() -> Vec<(i32, i32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|p| p.parse().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // The parent pid is the second field after the command's `)`.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or(0);
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        found.push((pid, ppid, cmdline));
    }
    found
}

/// A layer of Debian's static busybox, with `cat` beside it.
pub fn busybox_layer() -> Vec<Entry<'static>> {
    let busybox: &'static [u8] = std::fs::read("/bin/busybox").expect("busybox").leak();
    vec![
        Entry::Dir("bin"),
        Entry::File("bin/busybox", busybox, 0o755),
        Entry::Symlink("bin/cat", "busybox"),
    ]
}
