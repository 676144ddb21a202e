//! One container's lifecycle for containerd (create, start, kill, delete,
//! wait), on runwasi's containerd-shimkit and youki's libcontainer.
//!
//! [`MoatInstance::new`] runs in the shim's process: it reads the
//! container's image from containerd ([`crate::image`]) and creates the
//! container with `MoatExecutor`, the only workload it can run. The
//! shim's process is multi-threaded and libcontainer forks, so the youki
//! container is built and kept in a zygote (a single-threaded process
//! forked early, runwasi's `zygote` crate), and every later step runs
//! there too, by plain functions.

use std::cell::RefCell;
use std::os::fd::{AsFd as _, OwnedFd};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use containerd_shim::monitor::{Subscription, Topic, monitor_subscribe};
use containerd_shimkit::sandbox::sync::WaitableCell;
use containerd_shimkit::sandbox::{Error, Instance, InstanceConfig};
use containerd_shimkit::zygote::Zygote;
use libcontainer::container::Container as YoukiContainer;
use libcontainer::container::builder::ContainerBuilder;
use libcontainer::signal::Signal;
use libcontainer::syscall::syscall::SyscallType;
use moat_host::REFUSED_EXIT;
use oci_spec::runtime::Spec;
use rustix::process::{Pid, PidfdFlags, WaitId, WaitIdOptions};

use crate::cache;
use crate::deployment::POLICY_LAYER_MEDIA_TYPE;
use crate::executor::MoatExecutor;
use crate::figures::{self, FiguresTarget};
use crate::image;
use crate::pod::{self, Role};
use crate::reaper;
use crate::sandbox::{Image, TERMINATION_LOG};

/// The runtime's name: containerd's `io.containerd.moat.v1`, and the
/// directory under `/run/containerd` where libcontainer keeps state.
pub const RUNTIME_NAME: &str = "moat";

/// Exit status reported when the container's end could not be observed:
/// what a shell reports for a process killed by SIGKILL.
const UNKNOWN_EXIT: u32 = 137;

thread_local! {
    /// The zygote's one container (a zygote holds one).
    static CONTAINER: RefCell<Option<YoukiContainer>> = const { RefCell::new(None) };
}

/// The most of a refused container's termination log the shim copies to
/// its own log: what kubelet reads of it (4096 bytes).
const MAX_TERMINATION_MESSAGE: u64 = 4096;

/// A container of the shim's.
pub struct MoatInstance {
    id: String,
    zygote: Zygote,
    exit: WaitableCell<(u32, DateTime<Utc>)>,
    /// The host file mounted at the container's [`TERMINATION_LOG`], if
    /// any (kubelet mounts one for every app container).
    termination_log: Option<PathBuf>,
    /// The figures removed when the container is deleted: the node's
    /// figures directory, and the pod directory in it (a sandbox's pod, or
    /// a container that is a pod of its own).
    figures_removed: Option<(PathBuf, String)>,
}

/// What the zygote needs to build the container.
#[derive(serde::Serialize, serde::Deserialize)]
struct Build {
    id: String,
    cfg: InstanceConfig,
    image: Image,
    role: Role,
    /// The spec's `process.oomScoreAdj`.
    oom_score_adj: Option<i32>,
    /// Where the node's cache is mounted for the container, if it is.
    compiled_code: Option<PathBuf>,
    /// Whether the node's settings let this pod run in observe mode.
    observe_allowed: bool,
    /// Where its figures go, if anywhere.
    figures: Option<FiguresTarget>,
}

/// `error` and each of its sources, joined by `: ` (libcontainer's own
/// text is often only "io error"; the cause is in its source).
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// In the zygote (whose process becomes the container's): sets the
/// process's OOM score adjustment as the spec asks, before libcontainer
/// does, so that a refusal names itself. Lowering it needs
/// CAP_SYS_RESOURCE; libcontainer would say only "io error".
fn set_oom_score_adj(adj: i32) -> Result<(), String> {
    std::fs::write("/proc/self/oom_score_adj", adj.to_string()).map_err(|e| {
        format!(
            "setting the container's oom_score_adj to {adj} (its spec's process.oomScoreAdj):              {e}; lowering it needs CAP_SYS_RESOURCE, which containerd's process lacks here              (for containerd's CRI, `restrict_oom_score_adj = true` keeps it at or above              containerd's own)"
        )
    })
}

/// In the zygote: builds the container, keeps it.
fn build(build: Build) -> Result<(), String> {
    let Build {
        id,
        cfg,
        image,
        role,
        oom_score_adj,
        compiled_code,
        observe_allowed,
        figures,
    } = build;
    if let Some(adj) = oom_score_adj {
        set_oom_score_adj(adj)?;
    }
    let root = cfg
        .determine_rootdir(RUNTIME_NAME)
        .map_err(|e| format!("the container's state directory: {}", chain(&e)))?;
    let executor = MoatExecutor {
        role,
        compiled_code,
        observe_allowed,
        figures,
        image,
        namespace: cfg.namespace.clone(),
        id: id.clone(),
    };
    let mut builder = ContainerBuilder::new(id, SyscallType::Linux)
        .with_executor(executor)
        .with_root_path(root)
        .map_err(|e| format!("the container's state directory: {}", chain(&e)))?;
    if let Ok(stdin) = cfg.open_stdin() {
        builder = builder.with_stdin(stdin);
    }
    if let Ok(stdout) = cfg.open_stdout() {
        builder = builder.with_stdout(stdout);
    }
    if let Ok(stderr) = cfg.open_stderr() {
        builder = builder.with_stderr(stderr);
    }
    let container = builder
        .as_init(&cfg.bundle)
        .as_sibling(true)
        .with_systemd(cfg.config.systemd_cgroup)
        .build()
        .map_err(|e| {
            format!(
                "creating the container (namespaces, cgroups, root filesystem, process): {}",
                chain(&e)
            )
        })?;
    CONTAINER.with_borrow_mut(|slot| *slot = Some(container));
    Ok(())
}

/// In the zygote: runs `op` on its container.
fn with_container<T>(op: impl FnOnce(&mut YoukiContainer) -> T) -> Result<T, String> {
    CONTAINER.with_borrow_mut(|slot| match slot {
        Some(container) => Ok(op(container)),
        None => Err("the container was not built".to_owned()),
    })
}

fn pid((): ()) -> Result<Option<i32>, String> {
    with_container(|c| c.pid().map(|pid| pid.as_raw()))
}

fn start((): ()) -> Result<(), String> {
    with_container(|c| {
        c.start()
            .map_err(|e| format!("starting the container: {}", chain(&e)))
    })?
}

fn kill(number: u32) -> Result<(), String> {
    let signal = i32::try_from(number)
        .ok()
        .and_then(|s| Signal::try_from(s).ok())
        .ok_or_else(|| format!("{number} is not a signal"))?;
    with_container(|c| {
        c.kill(signal, true)
            .map_err(|e| format!("signalling the container (signal {number}): {}", chain(&e)))
    })?
}

fn delete((): ()) -> Result<(), String> {
    with_container(|c| {
        c.delete(true)
            .map_err(|e| format!("deleting the container: {}", chain(&e)))
    })?
}

impl MoatInstance {
    /// Runs `op` in the zygote.
    fn in_zygote<A, T>(&self, op: fn(A) -> Result<T, String>, arg: A) -> Result<T, Error>
    where
        A: serde::Serialize + serde::de::DeserializeOwned + 'static,
        T: serde::Serialize + serde::de::DeserializeOwned + 'static,
    {
        self.zygote
            .try_run(op, arg)
            .map_err(|e| Error::Others(format!("the container's zygote: {e}")))?
            .map_err(|e| Error::Others(format!("container {}: {e}", self.id)))
    }
}

impl Instance for MoatInstance {
    async fn new(id: String, cfg: &InstanceConfig) -> Result<MoatInstance, Error> {
        let spec = Spec::load(cfg.bundle.join("config.json")).map_err(|e| {
            Error::InvalidArgument(format!("container {id}: its OCI spec: {}", chain(&e)))
        })?;
        let role = pod::role(spec.annotations().as_ref(), &id).map_err(|e| {
            tracing::info!(container = %id, "refused: {e}");
            Error::InvalidArgument(format!("container {id}: {e}"))
        })?;
        let image = match role {
            // A sandbox runs nothing of its image: it is not read.
            Role::Sandbox => Image::None,
            Role::Workload => {
                match image::read(&cfg.containerd_address, &cfg.namespace, &id).await {
                    Ok(None) => Image::None,
                    Ok(Some(facts)) => Image::Read(facts),
                    // The container still starts, to say why it ends in its
                    // termination log.
                    Err(e) => {
                        tracing::info!(container = %id, error = %e, "cannot read the container's image");
                        Image::Unreadable(e.to_string())
                    }
                }
            }
        };
        let settings = match role {
            Role::Sandbox => None,
            Role::Workload => match cache::NodeSettings::read() {
                Ok(settings) => Some(settings),
                Err(e) => {
                    tracing::warn!(
                        "{e}; containers start without the node's compiled-code cache, and no pod may observe"
                    );
                    None
                }
            },
        };
        let compiled_code = match &settings {
            None => None,
            Some(settings) => node_cache(&id, &cfg.bundle, &spec, &image, settings).await,
        };
        let place = figures::Place::of(spec.annotations().as_ref(), &id);
        let figures = match &settings {
            Some(settings) => figures_of(&id, &place, &cfg.bundle, &spec, settings),
            None => None,
        };
        let figures_removed = match role {
            // A pod's end takes its containers' figures; nothing was
            // written for the sandbox itself, and no settings were read.
            Role::Sandbox => cache::NodeSettings::read()
                .ok()
                .and_then(|s| s.figures_dir)
                .map(|dir| (dir, id.clone())),
            Role::Workload if place.alone(&id) => settings
                .as_ref()
                .and_then(|s| s.figures_dir.clone())
                .map(|dir| (dir, id.clone())),
            Role::Workload => None,
        };
        let observe_allowed = settings.as_ref().is_some_and(|settings| {
            settings.allows_observe(pod::namespace(spec.annotations().as_ref()).as_deref())
        });
        let termination_log = spec
            .mounts()
            .iter()
            .flatten()
            .find(|m| m.destination() == Path::new(TERMINATION_LOG))
            .and_then(|m| m.source().clone());
        let oom_score_adj = spec.process().as_ref().and_then(|p| p.oom_score_adj());
        let instance = MoatInstance {
            zygote: Zygote::global().spawn(),
            exit: WaitableCell::new(),
            id: id.clone(),
            termination_log,
            figures_removed,
        };
        instance
            .in_zygote(
                build,
                Build {
                    id: id.clone(),
                    cfg: cfg.clone(),
                    image,
                    role,
                    oom_score_adj,
                    compiled_code,
                    observe_allowed,
                    figures,
                },
            )
            .inspect_err(|e| tracing::info!(container = %id, "cannot be created: {e}"))?;
        Ok(instance)
    }

    async fn start(&self) -> Result<u32, Error> {
        // Whatever happens, `wait` gets a status.
        let guard = self
            .exit
            .clone()
            .set_guard_with(|| (UNKNOWN_EXIT, Utc::now()));
        let pid = self
            .in_zygote(pid, ())?
            .ok_or_else(|| Error::Others(format!("container {} has no process", self.id)))?;
        // Both before the start, so that its end cannot be missed: the
        // process is the shim's child, and the shim's reaper may reap it
        // before a waitid here does.
        let reaped = monitor_subscribe(Topic::Pid)?;
        let pidfd = rustix::process::pidfd_open(
            Pid::from_raw(pid).ok_or_else(|| Error::Others(format!("pid {pid}")))?,
            PidfdFlags::empty(),
        )
        .map_err(std::io::Error::from)?;
        self.in_zygote(start, ())?;
        let exit = self.exit.clone();
        let id = self.id.clone();
        let termination_log = self.termination_log.clone();
        tokio::spawn(async move {
            let _guard = guard;
            let status = wait_for_exit(pidfd, pid, reaped).await;
            if status == u32::from(REFUSED_EXIT) {
                log_refusal(&id, termination_log.as_deref());
            }
            let _ = exit.set((status, Utc::now()));
        });
        u32::try_from(pid).map_err(|_| Error::Others(format!("pid {pid}")))
    }

    async fn kill(&self, signal: u32) -> Result<(), Error> {
        self.in_zygote(kill, signal)
    }

    async fn delete(&self) -> Result<(), Error> {
        self.in_zygote(delete, ())?;
        if let Some((dir, pod)) = &self.figures_removed {
            figures::remove(dir, pod);
        }
        Ok(())
    }

    async fn wait(&self) -> (u32, DateTime<Utc>) {
        *self.exit.wait().await
    }
}

/// Compiles the component of container `id` into the node's cache (unless
/// it is there) and mounts the cache into the container, read-only
/// ([`cache`]): where the container sees it, or `None` when the node has
/// no cache or this container cannot use it (it then compiles its
/// component itself, and says why if it cannot).
async fn node_cache(
    id: &str,
    bundle: &Path,
    spec: &Spec,
    image: &Image,
    settings: &cache::NodeSettings,
) -> Option<PathBuf> {
    let dir = settings.cache_dir.clone()?;
    let component = match image {
        Image::Unreadable(_) => return None,
        Image::Read(facts) if !facts.layers.is_empty() => {
            let mut components = facts
                .layers
                .iter()
                .filter(|l| l.media_type != POLICY_LAYER_MEDIA_TYPE);
            match (components.next(), components.next()) {
                (Some(one), None) => one.bytes.clone(),
                _ => return None,
            }
        }
        _ => {
            let entrypoint = spec.process().as_ref()?.args().as_ref()?.first()?;
            let path = entrypoint.split('#').next()?.to_owned();
            let root = spec.root().as_ref()?.path();
            let root = if root.is_absolute() {
                root.clone()
            } else {
                bundle.join(root)
            };
            match tokio::task::spawn_blocking(move || cache::read_in_root(&root, &path)).await {
                Ok(Ok(bytes)) => bytes,
                Ok(Err(e)) => {
                    tracing::debug!(container = %id, "starts without the node's compiled-code cache: {e}");
                    return None;
                }
                Err(_) => return None,
            }
        }
    };
    // Only a component is compiled; anything else is refused in the
    // container, with the reason.
    if !component.starts_with(b"\0asm\x0d\x00\x01\x00") {
        return None;
    }
    let bundle = bundle.to_owned();
    let settings = settings.clone();
    let prepared = tokio::task::spawn_blocking(move || {
        cache::compile(&dir, &settings, &component)?;
        cache::mount_into(&bundle, &dir)
    })
    .await;
    match prepared {
        Ok(Ok(())) => Some(PathBuf::from(cache::MOUNT)),
        Ok(Err(e)) => {
            tracing::info!(container = %id, "starts without the node's compiled-code cache: {e}");
            None
        }
        Err(_) => None,
    }
}

/// Gives container `id` a directory of its own (at `place`) in the node's
/// figures directory, mounted into it ([`figures`]): where its moat writes its
/// figures, and what labels them; `None` when the node writes none, or
/// this container's cannot be (it starts all the same, and the shim's log
/// says why).
fn figures_of(
    id: &str,
    place: &figures::Place,
    bundle: &Path,
    spec: &Spec,
    settings: &cache::NodeSettings,
) -> Option<FiguresTarget> {
    let base = settings.figures_dir.as_ref()?;
    let user = spec.process().as_ref().map(|p| p.user());
    let owner = user.map_or((0, 0), |u| (u.uid(), u.gid()));
    match figures::prepare(base, place, owner, bundle) {
        Ok(_) => Some(FiguresTarget {
            dir: PathBuf::from(figures::MOUNT),
            labels: figures::labels(spec.annotations().as_ref(), id),
            interval: settings.figures_interval,
        }),
        Err(e) => {
            tracing::info!(container = %id, "its figures are not written: {e}");
            None
        }
    }
}

/// Copies why container `id` was refused, from its termination log, to the
/// shim's log: where an operator reading containerd's log looks.
fn log_refusal(id: &str, termination_log: Option<&Path>) {
    use std::io::Read as _;
    let mut message = Vec::new();
    if let Some(path) = termination_log
        && let Ok(file) = std::fs::File::open(path)
    {
        let _ = file.take(MAX_TERMINATION_MESSAGE).read_to_end(&mut message);
    }
    // One string, so that the line's facts reach containerd's log in one
    // write: containerd-shim's logger writes a record piece by piece, and
    // containerd copies the shim's log into its own between lines of its
    // own, so fields written apart can land on different lines.
    let line = match String::from_utf8_lossy(&message).trim() {
        "" => format!("container {id} refused (exit {REFUSED_EXIT}); the reason is in its log"),
        why => format!("container {id} refused: {why}"),
    };
    tracing::info!("{line}");
}

/// The exit status of the container's process (128 + the signal for one
/// killed by a signal), from its pidfd, or from the shim's reaper if that
/// reaped it first. Waits on a blocking thread: registering the pidfd with
/// tokio's reactor takes `unsafe`, and the shim has none.
async fn wait_for_exit(pidfd: OwnedFd, pid: i32, reaped: Subscription) -> u32 {
    let waited = tokio::task::spawn_blocking(move || {
        rustix::process::waitid(WaitId::PidFd(pidfd.as_fd()), WaitIdOptions::EXITED)
    })
    .await;
    match waited {
        Ok(Ok(Some(status))) => status
            .exit_status()
            .or_else(|| status.terminating_signal().map(|s| 128 + s))
            .and_then(|code| u32::try_from(code).ok())
            .unwrap_or(UNKNOWN_EXIT),
        // ECHILD: the reaper took it.
        Ok(Err(rustix::io::Errno::CHILD)) | Ok(Ok(None)) => from_reaper(pid, reaped).await,
        Ok(Err(e)) => {
            tracing::info!(pid, error = %e, "waitid on the container's process failed");
            from_reaper(pid, reaped).await
        }
        Err(_) => UNKNOWN_EXIT,
    }
}

/// The status the shim's reaper saw for `pid`.
async fn from_reaper(pid: i32, reaped: Subscription) -> u32 {
    let seen = tokio::task::spawn_blocking(move || {
        reaper::reported_exit(pid, &reaped).and_then(|code| u32::try_from(code).ok())
    })
    .await;
    seen.ok().flatten().unwrap_or(UNKNOWN_EXIT)
}
