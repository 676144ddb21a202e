//! One container's run: its component under moat, with what its deployment
//! grants, or a refusal before anything runs.
//!
//! The shim's executor (the `executor` module) calls [`MoatSandbox::run`]
//! inside the container's process (youki's libcontainer has set up its
//! namespaces, cgroups and root filesystem), with the container's stdio as
//! the process's own: the guest's output and moat's log lines go where
//! containerd sends the container's output. The sandbox runs WebAssembly
//! components and nothing else: an entrypoint that is a native program, a
//! script or a core module is refused with a message in the termination
//! log, and nothing is executed.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

use std::sync::Arc;

use moat_host::audit::{self, Audit, GuestIdentity};
use moat_host::figures::{Figures, FiguresFile};
use moat_host::launch::{ComponentSource, Entry, Launch, Plain, Threads};
use moat_host::net::TlsTrust;
use moat_host::preopen::Preopen;
use moat_host::preopen::{self, PreopenError};
use moat_host::settings::{SecretSource, Spelling, Worded};
use moat_host::trusted::{Kept, Trusted};
use moat_host::{CacheDir, MoatConfig, MoatError, REFUSED_EXIT, RunOptions};

use crate::deployment::HTTP_ADDR_VAR;
use crate::figures::FiguresTarget;

use crate::deployment::{
    Deployment, DeploymentError, MAX_POLICY_LAYER, POLICY_FILE, POLICY_LAYER_MEDIA_TYPE,
    PolicyLayer,
};
use crate::image::{ImageFacts, Layer, MAX_COMPONENT};

/// A container as the shim hands it to the sandbox.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Container {
    /// The process's arguments from the OCI spec: the entrypoint first (the
    /// component's path in the container, or a name for an image whose
    /// component is a layer), then the guest's arguments.
    pub args: Vec<String>,
    /// The process's environment from the OCI spec (`KEY=VALUE`): the pod
    /// spec's variables over the image's own.
    pub env: Vec<String>,
    /// What the shim read of the image.
    pub image: Image,
    /// The container's containerd namespace (`k8s.io`), for the audit
    /// trail.
    pub namespace: String,
    /// The container's id, for the audit trail.
    pub id: String,
    /// Where the node's compiled-code cache is mounted for this container
    /// (read-only), when the shim mounted it ([`crate::cache`]); `None`:
    /// the guest is compiled afresh. Only the shim says so: a directory
    /// the container finds at that path could be the image's.
    #[serde(default)]
    pub compiled_code: Option<PathBuf>,
    /// Whether the node's settings let this container's pod run in
    /// observe mode (`observe-namespaces`); only the shim says so.
    #[serde(default)]
    pub observe_allowed: bool,
    /// Where the container's moat writes its figures, when the shim gave
    /// it a directory for them ([`crate::figures`]); only the shim says
    /// so.
    #[serde(default)]
    pub figures: Option<FiguresTarget>,
}

/// What the shim knows of a container's image.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub enum Image {
    /// The container has no image (a root filesystem of its own).
    #[default]
    None,
    /// Its configuration's environment and its wasm layers.
    Read(ImageFacts),
    /// It could not be read, so what it sets cannot be known: the
    /// container does not start.
    Unreadable(String),
}

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
    /// The container's process has no arguments, so no entry point.
    #[error("the container has no entry point (its process has no arguments)")]
    NoEntryPoint,
    /// The component file could not be read.
    #[error("cannot read the component {}: {source}", .path.display())]
    Component {
        /// Where it was looked for.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The entry point is not a WebAssembly component.
    #[error("{what} is {kind}: moat runs WebAssembly components and nothing else")]
    NotAComponent {
        /// The file, or the layer.
        what: String,
        /// What it is instead.
        kind: &'static str,
    },
    /// The component is larger than the shim reads.
    #[error("{what} is larger than {MAX_COMPONENT} bytes, the most the shim reads")]
    ComponentTooLarge {
        /// The file, or the layer.
        what: String,
    },
    /// `MOAT_AUDIT`'s trail cannot be started.
    #[error("MOAT_AUDIT: {0}")]
    Audit(#[source] moat_host::audit::AuditError),
    /// `/moat-policy.toml` exists but could not be read.
    #[error("cannot read {POLICY_FILE}: {0}")]
    PolicyFile(#[source] std::io::Error),
    /// The image could not be read from containerd.
    #[error("cannot read the container's image: {0}")]
    ImageUnreadable(String),
    /// A `MOAT_CA_FILE` file could not be read or is not PEM
    /// certificates.
    #[error("MOAT_CA_FILE: {}: {why}", .file.display())]
    CaFile {
        /// The file, as the container has it.
        file: PathBuf,
        /// Why.
        why: String,
    },
    /// A secret's value (`MOAT_SECRET`) could not be read from the
    /// container's environment or files.
    #[error("MOAT_SECRET: {0}")]
    Secret(#[source] moat_host::secrets::SecretError),
    /// The image's layers hold no component.
    #[error("the image has no component layer")]
    NoComponent,
    /// The image's layers hold more than one component.
    #[error("the image has {0} component layers; moat runs one")]
    ManyComponents(usize),
    /// A directory of `MOAT_DIRS` cannot be given to the guest.
    #[error("MOAT_DIRS: {}: {source}", .dir.host.display())]
    Dir {
        /// The directory, as the deployment names it.
        dir: Preopen,
        /// Why not.
        #[source]
        source: PreopenError,
    },
    /// The deployment's settings are refused.
    #[error(transparent)]
    Deployment(#[from] DeploymentError),
}

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
    /// The container's root filesystem as the process sees it, and
    /// [`TERMINATION_LOG`].
    fn default() -> MoatSandbox {
        MoatSandbox {
            root: PathBuf::from("/"),
            termination_log: PathBuf::from(TERMINATION_LOG),
        }
    }
}

impl MoatSandbox {
    /// A sandbox that finds the container's files (its component, policy
    /// file and `MOAT_DIRS`) under `root`, and writes why a start was
    /// refused, or a run ended at a bound or in a trap, to
    /// `termination_log` (if that file exists, as the kubelet's mount
    /// does).
    pub fn new(root: impl Into<PathBuf>, termination_log: impl Into<PathBuf>) -> MoatSandbox {
        MoatSandbox {
            root: root.into(),
            termination_log: termination_log.into(),
        }
    }

    /// Says why the container ends without its guest's own exit status (a
    /// start refused, a guest stopped at a bound or trapped): on stderr
    /// (the container's log) and in the termination log, which kubelet
    /// keeps as the container's termination message.
    fn report(&self, why: &str) {
        let line = format!("moat: error: {why}");
        let _ = writeln!(std::io::stderr(), "{line}");
        if self.termination_log.is_file() {
            let _ = std::fs::write(&self.termination_log, format!("{line}\n"));
        }
    }

    /// A path of the container's filesystem, as this sandbox reaches it.
    fn in_root(&self, path: &Path) -> PathBuf {
        match path.strip_prefix("/") {
            Ok(relative) => self.root.join(relative),
            Err(_) => path.to_owned(),
        }
    }

    /// Runs `container`'s component to its end, on a runtime of its own
    /// on this thread, and returns the exit status: the guest's, or
    /// [`REFUSED_EXIT`] after saying why the start was refused. Call it
    /// outside any async runtime.
    pub fn run(&self, container: &Container) -> i32 {
        let (prepared, deployment) = match self.prepare(container) {
            Ok(prepared) => prepared,
            Err(why) => {
                self.report(&why.to_string());
                return REFUSED_EXIT.into();
            }
        };
        init_logging(&deployment.log);
        let _ = writeln!(std::io::stderr(), "moat: {}", deployment.audit);
        if deployment.settings.policy.observes() {
            let _ = writeln!(
                std::io::stderr(),
                "moat: OBSERVE MODE (the node allows it for this pod's namespace): what no grant \
                 allows goes through, each recorded as would-deny on the audit trail (deny \
                 entries still hold); this drafts grants, it does not contain the program"
            );
        }
        run(prepared, |why| self.report(why))
    }
}

/// What a component's first bytes say it is: `Ok` for a component.
fn component_kind(bytes: &[u8]) -> Result<(), &'static str> {
    match bytes {
        [0, b'a', b's', b'm', 0x0d, 0x00, 0x01, 0x00, ..] => Ok(()),
        [0, b'a', b's', b'm', 0x01, 0x00, 0x00, 0x00, ..] => {
            Err("a core WebAssembly module (build a component, for wasm32-wasip2)")
        }
        [0x7f, b'E', b'L', b'F', ..] => Err("a native program (ELF)"),
        [b'#', b'!', ..] => Err("a script (#!)"),
        _ => Err("not a WebAssembly component"),
    }
}

/// The component and the policy layer among an image's layers.
fn split_layers(layers: &[Layer]) -> Result<(&Layer, Option<PolicyLayer>), StartError> {
    let (policies, components): (Vec<_>, Vec<_>) = layers
        .iter()
        .partition(|l| l.media_type == POLICY_LAYER_MEDIA_TYPE);
    let component = match components.as_slice() {
        [one] => *one,
        [] => return Err(StartError::NoComponent),
        many => return Err(StartError::ManyComponents(many.len())),
    };
    let policy = match policies.as_slice() {
        [] => None,
        [one] => Some(PolicyLayer::new(one.bytes.clone())),
        many => {
            return Err(DeploymentError::ManyPolicyLayers { count: many.len() }.into());
        }
    };
    Ok((component, policy))
}

/// Reads at most `max` bytes of `path`, and one more to tell a file at the
/// bound from a longer one.
fn read_bounded(path: &Path, max: usize) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(max as u64 + 1)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

impl MoatSandbox {
    /// The image's [`POLICY_FILE`], if its root filesystem has one.
    fn policy_file(&self) -> Result<Option<PolicyLayer>, StartError> {
        match read_bounded(&self.in_root(Path::new(POLICY_FILE)), MAX_POLICY_LAYER) {
            Ok(bytes) => Ok(Some(PolicyLayer::file(bytes))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StartError::PolicyFile(e)),
        }
    }

    /// The component's bytes, checked to be a component, and the image's
    /// policy.
    fn component(
        &self,
        container: &Container,
        path: &str,
    ) -> Result<(Vec<u8>, Option<PolicyLayer>), StartError> {
        let layers = match &container.image {
            Image::Read(facts) => facts.layers.as_slice(),
            Image::None => &[],
            Image::Unreadable(why) => return Err(StartError::ImageUnreadable(why.clone())),
        };
        let (bytes, what, policy) = if layers.is_empty() {
            let file = self.in_root(Path::new(path));
            let bytes =
                read_bounded(&file, MAX_COMPONENT).map_err(|source| StartError::Component {
                    path: PathBuf::from(path),
                    source,
                })?;
            (bytes, path.to_owned(), self.policy_file()?)
        } else {
            let (component, policy) = split_layers(layers)?;
            (
                component.bytes.clone(),
                "the image's component layer".to_owned(),
                policy,
            )
        };
        if bytes.len() > MAX_COMPONENT {
            return Err(StartError::ComponentTooLarge { what });
        }
        component_kind(&bytes).map_err(|kind| StartError::NotAComponent { what, kind })?;
        Ok((bytes, policy))
    }
}

/// Everything a run needs, read from the container before it starts.
struct Prepared {
    component: Vec<u8>,
    name: String,
    options: RunOptions,
    /// `MOAT_HTTP_ADDR`: serve the component there.
    http_addr: Option<std::net::SocketAddr>,
    /// The node's cache, as [`Container::compiled_code`] says.
    compiled_code: Option<PathBuf>,
    /// Where the figures go, as [`Container::figures`] says.
    figures: Option<FiguresTarget>,
}

impl MoatSandbox {
    fn prepare(&self, container: &Container) -> Result<(Prepared, Deployment), StartError> {
        let entrypoint = container.args.first().ok_or(StartError::NoEntryPoint)?;
        let path = match entrypoint.split_once('#') {
            None | Some((_, "_start")) => entrypoint.split('#').next().unwrap_or_default(),
            Some((_, func)) => {
                return Err(StartError::EntryPoint {
                    func: func.to_owned(),
                });
            }
        };
        let (component, policy) = self.component(container, path)?;
        let image_env = match &container.image {
            Image::Read(facts) => facts.env.as_slice(),
            _ => &[],
        };
        let deployment = Deployment::read(
            &container.env,
            image_env,
            policy.as_ref(),
            container.observe_allowed,
        )?;
        // Refusals name the pod spec's variables, not `moat run`'s flags;
        // the container's process runs this one guest, so its descriptors
        // are bounded by the guest's own caps, not containerd's million.
        let settings = &deployment.settings;
        let mut options = moat_host::settings::one_guest_process(settings, Spelling::Environment)
            .args(container.args.iter().cloned());
        // The node's cache, whichever the settings name (every default one
        // is kept by the host too).
        let secret_files = settings.secrets.iter().filter_map(|b| match &b.from {
            SecretSource::File(path) => Some(Kept::new(self.in_root(path), Trusted::SecretFile)),
            SecretSource::Env(_) => None,
        });
        let ca_files = deployment
            .ca_files
            .iter()
            .map(|file| Kept::new(self.in_root(file), Trusted::CaFile));
        let kept: Vec<Kept> = container
            .compiled_code
            .iter()
            .map(|dir| Kept::new(dir, Trusted::Cache))
            .chain(
                container
                    .figures
                    .iter()
                    .map(|f| Kept::new(&f.dir, Trusted::Figures)),
            )
            .chain(secret_files)
            .chain(ca_files)
            .collect();
        for dir in &deployment.dirs {
            let checked = preopen::check_against(&self.in_root(&dir.host), dir.writable, &kept)
                .map_err(|source| StartError::Dir {
                    dir: dir.clone(),
                    source,
                })?;
            options = options.preopen(Preopen {
                host: checked,
                ..dir.clone()
            });
        }
        for (key, value) in &deployment.guest_env {
            options = options.env(key, value);
        }
        if !deployment.ca_files.is_empty() {
            let mut trust = TlsTrust::webpki();
            for file in &deployment.ca_files {
                let bad = |why: String| StartError::CaFile {
                    file: file.clone(),
                    why,
                };
                let pem = moat_host::trusted::read(&self.in_root(file), Trusted::CaFile)
                    .map_err(|e| bad(e.to_string()))?;
                trust = trust.with_pem(&pem).map_err(|e| bad(e.to_string()))?;
            }
            options = options.tls_trust(trust);
        }
        // Each secret's value, from the container's own environment (the
        // pod spec's, which the guest no longer gets) or a file of its
        // filesystem (a Secret volume), kept from every directory of the
        // guest's; the guest gets its placeholder.
        if !settings.secrets.is_empty()
            && let Err(e) = moat_host::secrets::keep_out_of_core_dumps()
        {
            tracing::warn!("cannot keep the secrets out of core dumps: {e}");
        }
        for binding in &settings.secrets {
            let secret = moat_host::secrets::read_from(
                binding.clone(),
                |var| {
                    container.env.iter().find_map(|entry| {
                        let (name, value) = entry.split_once('=')?;
                        (name == var).then(|| value.to_owned())
                    })
                },
                |path| self.in_root(path),
            )
            .map_err(StartError::Secret)?;
            options = options.secret(secret);
        }
        if let Some(destination) = &settings.audit {
            let guest = GuestIdentity::of(Path::new(path), &component);
            let context = audit::Context::new(Some(guest))
                .in_container(container.namespace.clone(), container.id.clone())
                .observing(settings.policy.observes());
            let trail = Audit::to_destination(
                destination,
                context,
                moat_host::settings::audited(settings, deployment.defaults()),
            )
            .map_err(StartError::Audit)?;
            options = options.audit(trail);
        }
        Ok((
            Prepared {
                component,
                name: entrypoint.clone(),
                options,
                http_addr: deployment.http_addr,
                compiled_code: container.compiled_code.clone(),
                figures: container.figures.clone(),
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
fn run(prepared: Prepared, report: impl Fn(&str)) -> i32 {
    let entry = match prepared.http_addr {
        Some(addr) => Entry::Serve {
            addr: addr.to_string(),
            also: Vec::new(),
            tls: None,
            metrics: None,
            watch: false,
            // A pod's clients reach it through the cluster's network,
            // not one proxy the operator vouches for.
            trust_request_id: false,
        },
        None => Entry::Run,
    };
    let mut options = prepared.options;
    let figures = prepared.figures.and_then(|target| {
        let figures = Figures::new(target.labels);
        options = std::mem::take(&mut options).figures(Arc::clone(&figures));
        match FiguresFile::start(figures, &target.dir, target.interval) {
            Ok(file) => Some(file),
            Err(e) => {
                report_figures(&e);
                None
            }
        }
    });
    let launch = Launch {
        // The node's cache, read-only, when the shim mounted it; never one
        // of the container's own root filesystem, which is the image's.
        config: MoatConfig {
            cache: prepared
                .compiled_code
                .clone()
                .map_or(CacheDir::Off, CacheDir::At),
            ..MoatConfig::default()
        },
        options,
        source: ComponentSource::Bytes {
            bytes: prepared.component,
            name: PathBuf::from(&prepared.name),
        },
        entry,
        // A pod's guest is one thread's work; its footprint stays small.
        threads: Threads::One,
        // The guest's process is its container's PID 1, for which the
        // kernel has no default action for SIGTERM or SIGINT: without
        // this, kubelet's stop of a running guest would wait out the pod's
        // whole grace period (30 s by default) and then SIGKILL it.
        stop_on_signal: true,
    };
    let ended = launch.start(&Plain);
    if let Some(file) = figures
        && let Err(e) = file.finish()
    {
        report_figures(&e);
    }
    match ended {
        Ok(ended) => ended.status(),
        Err(MoatError::NoEntryPoint { reason, .. }) if reason.http_handler.is_some() => {
            report(&format!(
                "{} is an HTTP handler (it exports a wasi:http handler): set \
                 {HTTP_ADDR_VAR} in the pod spec (for example {HTTP_ADDR_VAR}=0.0.0.0:8080) \
                 to serve it",
                prepared.name
            ));
            REFUSED_EXIT.into()
        }
        Err(e) => {
            // In the pod spec's words: `MOAT_TIMEOUT`, `MOAT_MAX_MEMORY`.
            report(&e.worded(Spelling::Environment).to_string());
            e.exit_status().into()
        }
    }
}

/// Says on the container's stderr (its log) that its figures could not
/// be written: the run goes on without them.
fn report_figures(error: &moat_host::figures::FiguresError) {
    eprintln!("moat: {error}; the node's figures of this container are not up to date");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_component_is_a_component() {
        assert_eq!(component_kind(b"\0asm\x0d\x00\x01\x00rest"), Ok(()));
        for (bytes, kind) in [
            (&b"\0asm\x01\x00\x00\x00"[..], "core WebAssembly module"),
            (b"\x7fELF\x02\x01\x01", "native program"),
            (b"#!/bin/sh\nexec nc", "script"),
            (b"", "not a WebAssembly component"),
            (b"\0as", "not a WebAssembly component"),
        ] {
            assert!(component_kind(bytes).unwrap_err().contains(kind), "{kind}");
        }
    }
}
