//! One container's lifecycle for containerd (create, start, kill, delete,
//! wait), on runwasi's containerd-shimkit and youki's libcontainer.
//!
//! [`MoatInstance::new`] runs in the shim's process: it reads the
//! container's image from containerd ([`crate::image`]) and creates the
//! container with [`MoatExecutor`], the only workload it can run. The
//! shim's process is multi-threaded and libcontainer forks, so the youki
//! container is built and kept in a zygote (a single-threaded process
//! forked early, runwasi's `zygote` crate), and every later step runs
//! there too, by plain functions.

use std::cell::RefCell;
use std::os::fd::{AsFd as _, OwnedFd};
use std::time::Duration;

use chrono::{DateTime, Utc};
use containerd_shim::monitor::{ExitEvent, Subject, Subscription, Topic, monitor_subscribe};
use containerd_shimkit::sandbox::sync::WaitableCell;
use containerd_shimkit::sandbox::{Error, Instance, InstanceConfig};
use containerd_shimkit::zygote::Zygote;
use libcontainer::container::Container as YoukiContainer;
use libcontainer::container::builder::ContainerBuilder;
use libcontainer::signal::Signal;
use libcontainer::syscall::syscall::SyscallType;
use rustix::process::{Pid, PidfdFlags, WaitId, WaitIdOptions};

use crate::executor::MoatExecutor;
use crate::image;
use crate::sandbox::Image;

/// The runtime's name: containerd's `io.containerd.moat.v1`, and the
/// directory under `/run/containerd` where libcontainer keeps state.
pub const RUNTIME_NAME: &str = "moat";

/// Exit status reported when the container's end could not be observed:
/// what a shell reports for a process killed by SIGKILL.
const UNKNOWN_EXIT: u32 = 137;

/// How long to wait for the shim's reaper to report a container process it
/// reaped before the shim could (it reports at once; this bounds a bug).
const REAPER_REPORT: Duration = Duration::from_secs(10);

thread_local! {
    /// The zygote's one container (a zygote holds one).
    static CONTAINER: RefCell<Option<YoukiContainer>> = const { RefCell::new(None) };
}

/// A container of the shim's.
pub struct MoatInstance {
    id: String,
    zygote: Zygote,
    exit: WaitableCell<(u32, DateTime<Utc>)>,
}

/// What the zygote needs to build the container.
#[derive(serde::Serialize, serde::Deserialize)]
struct Build {
    id: String,
    cfg: InstanceConfig,
    image: Image,
}

/// In the zygote: builds the container, keeps it.
fn build(build: Build) -> Result<(), String> {
    let Build { id, cfg, image } = build;
    let root = cfg
        .determine_rootdir(RUNTIME_NAME)
        .map_err(|e| e.to_string())?;
    let executor = MoatExecutor {
        image,
        namespace: cfg.namespace.clone(),
        id: id.clone(),
    };
    let mut builder = ContainerBuilder::new(id, SyscallType::Linux)
        .with_executor(executor)
        .with_root_path(root)
        .map_err(|e| e.to_string())?;
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
        .map_err(|e| e.to_string())?;
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
    with_container(|c| c.start().map_err(|e| e.to_string()))?
}

fn kill(signal: u32) -> Result<(), String> {
    let signal = i32::try_from(signal)
        .ok()
        .and_then(|s| Signal::try_from(s).ok())
        .ok_or_else(|| format!("{signal} is not a signal"))?;
    with_container(|c| c.kill(signal, true).map_err(|e| e.to_string()))?
}

fn delete((): ()) -> Result<(), String> {
    with_container(|c| c.delete(true).map_err(|e| e.to_string()))?
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
        let image = match image::read(&cfg.containerd_address, &cfg.namespace, &id).await {
            Ok(None) => Image::None,
            Ok(Some(facts)) => Image::Read(facts),
            // The container still starts, to say why it ends in its
            // termination log.
            Err(e) => {
                tracing::info!(container = %id, error = %e, "cannot read the container's image");
                Image::Unreadable(e.to_string())
            }
        };
        let instance = MoatInstance {
            zygote: Zygote::global().spawn(),
            exit: WaitableCell::new(),
            id: id.clone(),
        };
        instance.in_zygote(
            build,
            Build {
                id,
                cfg: cfg.clone(),
                image,
            },
        )?;
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
        tokio::spawn(async move {
            let _guard = guard;
            let status = wait_for_exit(pidfd, pid, reaped).await;
            let _ = exit.set((status, Utc::now()));
        });
        u32::try_from(pid).map_err(|_| Error::Others(format!("pid {pid}")))
    }

    async fn kill(&self, signal: u32) -> Result<(), Error> {
        self.in_zygote(kill, signal)
    }

    async fn delete(&self) -> Result<(), Error> {
        self.in_zygote(delete, ())
    }

    async fn wait(&self) -> (u32, DateTime<Utc>) {
        *self.exit.wait().await
    }
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
        while let Ok(ExitEvent { subject, exit_code }) = reaped.rx.recv_timeout(REAPER_REPORT) {
            if matches!(subject, Subject::Pid(p) if p == pid) {
                return u32::try_from(exit_code).ok();
            }
        }
        None
    })
    .await;
    seen.ok().flatten().unwrap_or(UNKNOWN_EXIT)
}
