//! One container's run: its component under moat, with what its deployment
//! grants.
//!
//! runwasi calls [`MoatSandbox::run_wasi`] inside the container's process
//! (youki's libcontainer has set up its namespaces, cgroups and root
//! filesystem), with the container's stdio as the process's own: the
//! guest's output and moat's log lines go where containerd sends the
//! container's output.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use containerd_shim_wasm::sandbox::Sandbox;
use containerd_shim_wasm::sandbox::context::{RuntimeContext, Source, WasmLayer};
use moat_host::policy::Spelling;
use moat_host::{CacheDir, Moat, MoatConfig, RunOptions, START_FAILED_EXIT};

use crate::deployment::{
    Deployment, DeploymentError, MAX_POLICY_LAYER, POLICY_FILE, POLICY_LAYER_MEDIA_TYPE,
    PolicyLayer,
};

/// Why a container's start is refused before its guest runs.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The entry point names an export (`app.wasm#func`); moat runs
    /// `wasi:cli/run`.
    #[error(
        "the entry point asks for the export {func:?}; moat runs a component's wasi:cli/run (leave out #{func})"
    )]
    EntryPoint {
        /// The export named.
        func: String,
    },
    /// The component file could not be read.
    #[error("cannot read the component {}: {source}", .path.display())]
    Component {
        /// Where it was looked for.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// `/moat-policy.toml` exists but could not be read.
    #[error("cannot read {POLICY_FILE}: {0}")]
    PolicyFile(#[source] std::io::Error),
    /// The image's layers hold no component.
    #[error("the image has no component layer")]
    NoComponent,
    /// The image's layers hold more than one component.
    #[error("the image has {0} component layers; moat runs one")]
    ManyComponents(usize),
    /// The deployment's settings are refused.
    #[error(transparent)]
    Deployment(#[from] DeploymentError),
}

/// Exit status when the deployment's settings are refused: what `moat run`
/// returns for a bad command line or policy file.
pub const REFUSED_EXIT: i32 = 2;

/// Where Kubernetes looks for why a container ended (the default
/// `terminationMessagePath`); `kubectl describe pod` shows its contents.
pub const TERMINATION_LOG: &str = "/dev/termination-log";

/// Runs one container's component under moat.
#[derive(Debug, Clone)]
pub struct MoatSandbox {
    root: PathBuf,
    termination_log: PathBuf,
}

impl Default for MoatSandbox {
    /// The container's root filesystem as the guest's `/`, and
    /// [`TERMINATION_LOG`].
    fn default() -> MoatSandbox {
        MoatSandbox {
            root: PathBuf::from("/"),
            termination_log: PathBuf::from(TERMINATION_LOG),
        }
    }
}

impl MoatSandbox {
    /// A sandbox that gives the guest `root` as its `/` and writes why a
    /// start was refused to `termination_log` (if that file exists, as
    /// the kubelet's mount does).
    pub fn new(root: impl Into<PathBuf>, termination_log: impl Into<PathBuf>) -> MoatSandbox {
        MoatSandbox {
            root: root.into(),
            termination_log: termination_log.into(),
        }
    }

    /// Says why the container ends before its guest ran: on stderr (the
    /// container's log) and in the termination log.
    fn refuse(&self, why: &str) {
        let line = format!("moat: error: {why}");
        let _ = writeln!(std::io::stderr(), "{line}");
        if self.termination_log.is_file() {
            let _ = std::fs::write(&self.termination_log, format!("{line}\n"));
        }
    }
}

/// The component and the policy layer among an image's layers.
fn split_layers(layers: &[WasmLayer]) -> Result<(&WasmLayer, Option<PolicyLayer>), StartError> {
    let (policies, components): (Vec<_>, Vec<_>) = layers
        .iter()
        .partition(|l| l.config.media_type().to_string() == POLICY_LAYER_MEDIA_TYPE);
    let component = match components.as_slice() {
        [one] => *one,
        [] => return Err(StartError::NoComponent),
        many => return Err(StartError::ManyComponents(many.len())),
    };
    let policy = match policies.as_slice() {
        [] => None,
        [one] => Some(PolicyLayer::new(one.layer.clone())),
        many => {
            return Err(DeploymentError::ManyPolicyLayers { count: many.len() }.into());
        }
    };
    Ok((component, policy))
}

impl MoatSandbox {
    /// The image's [`POLICY_FILE`], if its root filesystem has one.
    fn policy_file(&self) -> Result<Option<PolicyLayer>, StartError> {
        let path = self.root.join(POLICY_FILE.trim_start_matches('/'));
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StartError::PolicyFile(e)),
        };
        // One byte past the bound tells a policy at the bound from one
        // past it, without reading more of an oversized file.
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(file, MAX_POLICY_LAYER as u64 + 1),
            &mut bytes,
        )
        .map_err(StartError::PolicyFile)?;
        Ok(Some(PolicyLayer::file(bytes)))
    }
}

/// Everything a run needs, read from the container before it starts.
struct Prepared {
    component: Vec<u8>,
    name: String,
    options: RunOptions,
}

impl MoatSandbox {
    fn prepare(&self, ctx: &impl RuntimeContext) -> Result<(Prepared, Deployment), StartError> {
        let entrypoint = ctx.entrypoint();
        if entrypoint.func != "_start" {
            return Err(StartError::EntryPoint {
                func: entrypoint.func,
            });
        }
        let name = entrypoint
            .arg0
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "component".to_owned());
        let (component, layer) = match &entrypoint.source {
            Source::File(path) => {
                let path = if path.is_absolute() {
                    self.root.join(path.strip_prefix("/").unwrap_or(path))
                } else {
                    path.clone()
                };
                let bytes = std::fs::read(&path)
                    .map_err(|source| StartError::Component { path, source })?;
                (bytes, self.policy_file()?)
            }
            Source::Oci(layers) => {
                let (component, policy) = split_layers(layers)?;
                (component.layer.clone(), policy)
            }
        };
        let deployment = Deployment::read(ctx.envs(), layer.as_ref())?;
        // Denials name the pod spec's variables, not `moat run`'s flags.
        let mut settings = deployment.settings.clone();
        settings.policy = settings.policy.spelled(Spelling::Environment);
        let mut options = settings
            .run_options()
            .args(ctx.args().iter().cloned())
            .dir(self.root.clone(), "/");
        for (key, value) in &deployment.guest_env {
            options = options.env(key, value);
        }
        Ok((
            Prepared {
                component,
                name,
                options,
            },
            deployment,
        ))
    }
}

/// Sends moat's log lines to the container's stderr.
fn init_logging(filter: &str) {
    let Ok(filter) = tracing_subscriber::EnvFilter::try_new(filter) else {
        return;
    };
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .finish();
    // The process is the container's and runs one guest: the first
    // subscriber set is the one.
    let _ = tracing::subscriber::set_global_default(subscriber);
}

/// Compiles and runs the guest on a runtime of its own, as `moat run` does:
/// one thread drives the guest and its sockets.
fn run(prepared: Prepared) -> i32 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("moat: error: cannot start the async runtime: {e}");
            return START_FAILED_EXIT.into();
        }
    };
    let outcome = runtime.block_on(async {
        // Each container starts in a fresh root filesystem: a compile
        // cache there would never be read again.
        let config = MoatConfig {
            cache: CacheDir::Off,
            ..MoatConfig::default()
        };
        let moat = Moat::new(&config)?;
        let guest = moat.load_bytes(&prepared.component, Path::new(&prepared.name))?;
        moat.run(&guest, prepared.options).await
    });
    match outcome {
        Ok(exit) => exit.code(),
        Err(e) => {
            eprintln!("moat: error: {e}");
            e.exit_status().into()
        }
    }
}

impl Sandbox for MoatSandbox {
    /// Runs the container's component under the deployment's grants and
    /// returns its exit status; a refused deployment returns
    /// [`REFUSED_EXIT`] after saying why.
    async fn run_wasi(&self, ctx: &impl RuntimeContext) -> anyhow::Result<i32> {
        let (prepared, deployment) = match self.prepare(ctx) {
            Ok(prepared) => prepared,
            Err(why) => {
                self.refuse(&why.to_string());
                return Ok(REFUSED_EXIT);
            }
        };
        init_logging(&deployment.log);
        let _ = writeln!(std::io::stderr(), "moat: {}", deployment.audit);
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("moat-guest".to_owned())
            .spawn(move || {
                let _ = tx.send(run(prepared));
            })?;
        Ok(rx.await.unwrap_or(START_FAILED_EXIT.into()))
    }
}
