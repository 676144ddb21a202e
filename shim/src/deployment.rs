//! What a deployment grants a guest: the `MOAT_*` variables of the
//! container's environment and, when the pod spec accepts it, the policy
//! the guest's image carries: a layer of its own media type beside the
//! component layer, or, in an image whose component is a file of its root
//! filesystem, the file [`POLICY_FILE`].
//!
//! The pod spec is the authority. Nothing is granted unless it says so:
//! - `MOAT_ALLOW_NET`, `MOAT_DENY_NET`, `MOAT_MAX_MEMORY`, ...: every key of
//!   a `moat run --policy` file, upper-cased with `_` for `-`, with the value
//!   the flag of that name takes.
//! - `MOAT_IMAGE_POLICY`: what to do with the image's policy layer:
//!   `ignore`, `apply`, or `sha256:<digest>` (apply that layer and no
//!   other). An image that carries a policy layer does not start until the
//!   pod spec answers; a pod spec that asks for a layer the image lacks does
//!   not start either.
//! - `MOAT_LOG`: which log lines of moat's to write to the container's
//!   stderr (a tracing filter such as `moat::net=debug`; default `warn`).
//!
//! - `MOAT_HTTP_ADDR`: serve the component, a wasi:http handler (0.2 proxy
//!   or 0.3 service), on
//!   this IP address and port, as `moat serve --addr` does
//!   (`0.0.0.0:8080`: the pod's own network). A handler does not start
//!   without it, and it is refused for a component that is not a handler.
//!
//! The image's policy and the environment add up as `moat run --policy
//! FILE` and its flags do: grants widen, every deny entry holds, and the
//! environment's bounds win.
//!
//! - `MOAT_DIRS`: the container's directories the guest may use, as
//!   `moat run --dir` takes them (`/data:rw,/etc/app`), read-only unless
//!   `:rw`. The guest sees nothing else of the container's filesystem, and
//!   never `/`, `/proc`, `/sys` or `/dev`, nor a directory holding a kernel
//!   filesystem ([`moat_host::preopen`]).
//!
//! The container's environment is the pod spec's variables over the
//! image's own (`ENV` lines in its configuration), which containerd merges
//! before the shim sees them. The shim reads the image's configuration
//! itself ([`crate::image`]): a `MOAT_*` entry that is the image's own
//! (same name, same value) never counts, whatever it says, and the start's
//! audit line names it. So an image cannot grant itself the network, pick
//! its own policy, or silence moat's log; a pod spec that sets a variable
//! to exactly the image's value cannot be told from the image and grants
//! nothing with it.
//!
//! Names match exactly: every `MOAT_` (or `moat_`, `Moat-`, ...) variable
//! that is not one of the table's, spelled as the table spells it, stops the
//! start (`MOAT_ALLOW-NET`, `moat_allow_net` and a look-alike letter
//! included): a misspelt grant must not be a silent denial, nor a misspelt
//! deny a silent grant. None of these variables reaches the guest.

use std::fmt;
use std::path::Path;

use moat_host::preopen::Preopen;
use moat_host::preopen::PreopenSpecError;
use moat_host::settings::{
    Origin, PolicyFile, PolicyFileError, SecretSource, Setting, SettingError, Settings,
};
use sha2::{Digest, Sha256};

/// The prefix of every variable the shim reads and takes out of the guest's
/// environment.
pub const ENV_PREFIX: &str = "MOAT_";

/// The variable that accepts or ignores the image's policy layer.
pub const IMAGE_POLICY_VAR: &str = "MOAT_IMAGE_POLICY";

/// The variable that picks moat's own log lines.
pub const LOG_VAR: &str = "MOAT_LOG";

/// The variable that names the directories the guest may use.
pub const DIRS_VAR: &str = "MOAT_DIRS";

/// The variable that serves an HTTP handler component, and where: an IP
/// address and port of the pod's network (`0.0.0.0:8080`). A component
/// that exports a wasi:http handler does not start without it;
/// the pod spec is what grants listening there.
pub const HTTP_ADDR_VAR: &str = "MOAT_HTTP_ADDR";

/// The variable that names CA certificates (PEM files of the container's,
/// comma-separated) the guest's TLS connections trust besides the
/// built-in Mozilla roots: a cluster's private CA, from a ConfigMap or
/// Secret volume. `moat run`'s `--ca-file`.
pub const CA_FILE_VAR: &str = "MOAT_CA_FILE";

/// Container paths never given to a guest, nor anything below them: the
/// container's processes, kernel state and devices, and the termination
/// log Kubernetes reads.
pub const FORBIDDEN_DIRS: &[&str] = &["/proc", "/sys", "/dev"];

/// The log filter when `MOAT_LOG` is not set: warnings only, as `moat run`.
pub const DEFAULT_LOG: &str = "warn";

/// The media type of a policy layer: a `moat run --policy` file, as TOML.
pub const POLICY_LAYER_MEDIA_TYPE: &str = "application/vnd.moat.policy.v1+toml";

/// Where an image whose component is a file of its root filesystem (built
/// as a Linux image is, `COPY app.wasm /`) carries its policy.
pub const POLICY_FILE: &str = "/moat-policy.toml";

/// Largest policy layer or file the shim reads. A policy is a few dozen lines; a
/// layer past this is refused rather than parsed, so that an image cannot
/// make every start of it parse megabytes.
pub const MAX_POLICY_LAYER: usize = 64 << 10;

/// The policy an image carries: its bytes, their digest, and where in the
/// image it was.
#[derive(Debug, Clone)]
pub struct PolicyLayer {
    /// The policy's text (a `moat run --policy` file).
    pub bytes: Vec<u8>,
    /// `sha256:` and the hex of its SHA-256, as OCI digests are written.
    pub digest: String,
    /// `layer`, or `file /moat-policy.toml`: for messages.
    pub origin: String,
}

impl PolicyLayer {
    /// A policy layer of these bytes, its digest computed.
    pub fn new(bytes: Vec<u8>) -> PolicyLayer {
        let digest = format!("sha256:{}", hex(&Sha256::digest(&bytes)));
        PolicyLayer {
            bytes,
            digest,
            origin: "layer".to_owned(),
        }
    }

    /// The policy file [`POLICY_FILE`] of these bytes.
    pub fn file(bytes: Vec<u8>) -> PolicyLayer {
        PolicyLayer {
            origin: format!("file {POLICY_FILE}"),
            ..PolicyLayer::new(bytes)
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What the pod spec said of the image's policy layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImagePolicy {
    /// `MOAT_IMAGE_POLICY` is not set.
    Unanswered,
    /// `ignore`: run without it.
    Ignore,
    /// `apply`: apply whatever the image carries.
    Apply,
    /// `sha256:...`: apply the layer with this digest, refuse any other.
    Pinned(String),
}

/// Why a container is not started: the deployment's settings are wrong or
/// do not agree with its image.
#[derive(Debug, thiserror::Error)]
pub enum DeploymentError {
    /// A `MOAT_*` grant, deny list or bound has a bad value; the error
    /// names the variable (`MOAT_MAX_MEMORY=lots: ...`).
    #[error(transparent)]
    Setting(SettingError),
    /// A `MOAT_` variable that the shim does not know.
    #[error(
        "{var} is not a moat setting{}; the pod spec may set {}",
        near(.var).map(|v| format!(" (did you mean {v}?)")).unwrap_or_default(),
        known_vars().join(", ")
    )]
    UnknownVar {
        /// The variable, as in the pod spec.
        var: String,
    },
    /// An entry of `MOAT_DIRS` is not a directory spec.
    #[error("MOAT_DIRS: {0}")]
    BadDir(#[source] PreopenSpecError),
    /// An entry of `MOAT_DIRS` names a directory a guest may never have.
    #[error("MOAT_DIRS: {dir}: {why}")]
    ForbiddenDir {
        /// The entry as written.
        dir: String,
        /// Why.
        why: String,
    },
    /// `MOAT_AUDIT` names a file: the trail goes to the container's log.
    #[error(
        "MOAT_AUDIT={value}: under the shim the audit trail goes to the container's log (MOAT_AUDIT=-); a path on the node is not the pod spec's to choose"
    )]
    AuditFile {
        /// The value given.
        value: String,
    },
    /// A `MOAT_CA_FILE` entry is not an absolute path of the container.
    #[error("MOAT_CA_FILE: {file:?} is not an absolute path of the container")]
    CaFileNotAbsolute {
        /// The entry as written.
        file: String,
    },
    /// A secret's name is also a variable of the pod spec's: the guest's
    /// variable of that name is the placeholder.
    #[error(
        "MOAT_SECRET: {name} is a secret's name, and the pod spec also sets {name}: the guest's {name} is the secret's placeholder (leave the variable out, or name the secret otherwise)"
    )]
    SecretNameSet {
        /// The name.
        name: String,
    },
    /// `MOAT_OBSERVE` is on in a pod the node's settings do not let run
    /// so: a pod spec may not turn its grants off on its own.
    #[error(
        "MOAT_OBSERVE: this node lets no pod of this namespace run in observe mode (it lets through what the grants refuse); the node's operator names the namespaces that may in observe-namespaces of /etc/moat/shim.toml"
    )]
    ObserveNotAllowed,
    /// `MOAT_OBSERVE` is on without `MOAT_AUDIT=-`: what observe mode
    /// lets through would go unrecorded.
    #[error(
        "MOAT_OBSERVE: observe mode's record of what it let through is the audit trail: set MOAT_AUDIT=- too"
    )]
    ObserveWithoutAudit,
    /// The image's policy sets `audit`: where the trail goes is the pod
    /// spec's to say, not the image's.
    #[error(
        "the image's moat policy ({origin}) sets audit at line {line}: where the audit trail goes is the pod spec's to say (MOAT_AUDIT=-), not the image's"
    )]
    ImageAudit {
        /// `layer` or `file /moat-policy.toml`.
        origin: String,
        /// The line.
        line: usize,
    },
    /// `MOAT_IMAGE_POLICY` is none of `ignore`, `apply`, `sha256:<hex>`.
    #[error(
        "MOAT_IMAGE_POLICY={value}: expected ignore, apply, or the layer's digest (sha256:...)"
    )]
    BadImagePolicy {
        /// The value given.
        value: String,
    },
    /// The image carries a policy and the pod spec did not say whether to
    /// apply it.
    #[error(
        "the image carries a moat policy {origin} ({digest}); set MOAT_IMAGE_POLICY to {digest} (or apply) to grant what it grants, or to ignore"
    )]
    ImagePolicyUnanswered {
        /// `layer` or `file /moat-policy.toml`.
        origin: String,
        /// The policy's digest.
        digest: String,
    },
    /// The pod spec asks for a policy the image does not carry.
    #[error(
        "MOAT_IMAGE_POLICY={value}, but the image carries no moat policy (a layer of type application/vnd.moat.policy.v1+toml, or the file /moat-policy.toml)"
    )]
    NoPolicyLayer {
        /// The value given.
        value: String,
    },
    /// The pod spec pinned another digest than the image's policy's.
    #[error(
        "MOAT_IMAGE_POLICY pins {pinned}, but the image's moat policy is {found}: the image changed; read its policy before you pin the new digest"
    )]
    PolicyDigestMismatch {
        /// The digest in the pod spec.
        pinned: String,
        /// The digest of the image's layer.
        found: String,
    },
    /// The image carries more than one policy layer.
    #[error("the image carries {count} moat policy layers; one at most")]
    ManyPolicyLayers {
        /// How many.
        count: usize,
    },
    /// The policy is larger than [`MAX_POLICY_LAYER`].
    #[error(
        "the image's moat policy {origin} is larger than {MAX_POLICY_LAYER} bytes, the most the shim reads"
    )]
    PolicyLayerTooLarge {
        /// `layer sha256:...` or `file /moat-policy.toml`.
        origin: String,
        /// The bytes read of it (at most one past the bound).
        size: usize,
    },
    /// The policy layer is not a valid policy file (not UTF-8, bad TOML,
    /// unknown key, bad entry): the error names the layer, line and key.
    #[error(transparent)]
    PolicyLayer(#[from] PolicyFileError),
    /// `MOAT_HTTP_ADDR` is not an IP address and port.
    #[error("MOAT_HTTP_ADDR={value}: expected an IP address and port, such as 0.0.0.0:8080")]
    BadHttpAddr {
        /// The value given.
        value: String,
    },
    /// `MOAT_LOG` is not a valid filter.
    #[error("MOAT_LOG={value}: {reason}")]
    BadLog {
        /// The value given.
        value: String,
        /// What the filter parser said.
        reason: String,
    },
}

/// Every variable the shim reads, as the table spells it.
fn known_vars() -> Vec<String> {
    [
        IMAGE_POLICY_VAR,
        LOG_VAR,
        DIRS_VAR,
        HTTP_ADDR_VAR,
        CA_FILE_VAR,
    ]
    .into_iter()
    .map(str::to_owned)
    .chain(Setting::ALL.iter().map(|s| s.variable().to_owned()))
    .collect()
}

/// Whether `var` is in moat's namespace: `MOAT_` or `MOAT-` in any ASCII
/// case. Such a variable is moat's to read, never the guest's.
fn is_moat_var(var: &str) -> bool {
    var.get(..5).is_some_and(|head| {
        head.eq_ignore_ascii_case("moat_") || head.eq_ignore_ascii_case("moat-")
    })
}

/// The known variable `var` is a misspelling of, by case or `-` for `_`.
fn near(var: &str) -> Option<String> {
    let folded = var.to_ascii_uppercase().replace('-', "_");
    known_vars().into_iter().find(|known| *known == folded)
}

/// The directories of `MOAT_DIRS`.
fn parse_dirs(value: &str) -> Result<Vec<Preopen>, DeploymentError> {
    let mut dirs = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let dir = Preopen::parse(entry).map_err(DeploymentError::BadDir)?;
        let forbidden = |why: &str| DeploymentError::ForbiddenDir {
            dir: entry.to_owned(),
            why: why.to_owned(),
        };
        if !dir.host.is_absolute() || !dir.guest.starts_with('/') {
            return Err(forbidden("write the container's path in full, from /"));
        }
        if dir
            .host
            .components()
            .any(|c| c == std::path::Component::ParentDir)
        {
            return Err(forbidden("a path with `..` in it"));
        }
        if dir.host == std::path::Path::new("/") {
            return Err(forbidden(
                "the container's whole filesystem is never given to a guest; name the directories it needs",
            ));
        }
        if let Some(under) = FORBIDDEN_DIRS.iter().find(|f| dir.host.starts_with(f)) {
            return Err(forbidden(&format!(
                "{under} holds the container's processes, kernel state or devices"
            )));
        }
        dirs.push(dir);
    }
    Ok(dirs)
}

/// What one container is granted, and what its guest sees of its
/// environment.
#[derive(Debug)]
pub struct Deployment {
    /// The settings that govern the run: the image's policy (if accepted)
    /// and the environment's, added up.
    pub settings: Settings,
    /// The guest's environment: the container's, without `MOAT_*`.
    pub guest_env: Vec<(String, String)>,
    /// The directories the guest may use (`MOAT_DIRS`), container paths.
    pub dirs: Vec<Preopen>,
    /// Where to serve an HTTP handler (`MOAT_HTTP_ADDR`).
    pub http_addr: Option<std::net::SocketAddr>,
    /// CA certificates the guest's TLS trusts besides the Mozilla roots
    /// (`MOAT_CA_FILE`), container paths.
    pub ca_files: Vec<std::path::PathBuf>,
    /// moat's log filter (`MOAT_LOG`).
    pub log: String,
    /// For the start's audit line: each `MOAT_*` setting as written, and
    /// what became of the image's policy layer.
    pub audit: Audit,
}

/// Where a container's grants came from, for the line the shim writes to
/// the container's log at every start.
#[derive(Debug, Default)]
pub struct Audit {
    /// `VAR=value` for every setting read from the environment.
    pub env: Vec<String>,
    /// The `MOAT_*` variables that were the image's own, ignored.
    pub ignored: Vec<String>,
    /// The image's policy (`layer sha256:...` or `file /moat-policy.toml
    /// sha256:...`) and whether it was applied.
    pub image: Option<(String, bool)>,
}

impl fmt::Display for Audit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.env.is_empty() {
            write!(f, "pod spec sets no grants")?;
        } else {
            write!(f, "pod spec: {}", self.env.join(" "))?;
        }
        if !self.ignored.is_empty() {
            write!(
                f,
                "; image ENV ignored (only the pod spec grants): {}",
                self.ignored.join(" ")
            )?;
        }
        match &self.image {
            None => write!(f, "; image policy: none"),
            Some((digest, true)) => write!(f, "; image policy {digest}: applied"),
            Some((digest, false)) => write!(f, "; image policy {digest}: ignored"),
        }
    }
}

impl Deployment {
    /// The defaults of what no setting sets: a handler's (a 60 s bound on
    /// each request) when the container serves one, a run's otherwise.
    pub fn defaults(&self) -> moat_host::settings::Defaults {
        match self.http_addr {
            Some(_) => moat_host::settings::Defaults::Serve,
            None => moat_host::settings::Defaults::Run,
        }
    }

    /// Reads the container's environment (`KEY=VALUE` entries, as in the
    /// OCI spec), the image's own environment (its configuration's `Env`:
    /// those `MOAT_*` entries never count), and the image's policy layer,
    /// if it has one.
    ///
    /// `observe_allowed`: whether the node's settings let this pod run in
    /// observe mode ([`crate::cache::NodeSettings::allows_observe`]).
    ///
    /// # Errors
    /// [`DeploymentError`]: the container must not start.
    pub fn read(
        envs: &[String],
        image_env: &[String],
        layer: Option<&PolicyLayer>,
        observe_allowed: bool,
    ) -> Result<Deployment, DeploymentError> {
        let mut from_env = Settings::new();
        let mut guest_env = Vec::new();
        let mut image_policy = ImagePolicy::Unanswered;
        let mut log = DEFAULT_LOG.to_owned();
        let mut dirs = Vec::new();
        let mut http_addr = None;
        let mut ca_files = Vec::new();
        let mut audit = Audit::default();
        for entry in envs {
            let (var, value) = entry.split_once('=').unwrap_or((entry.as_str(), ""));
            if !is_moat_var(var) {
                guest_env.push((var.to_owned(), value.to_owned()));
                continue;
            }
            if image_env.contains(entry) {
                audit.ignored.push(var.to_owned());
                continue;
            }
            if var == IMAGE_POLICY_VAR {
                image_policy = match value.trim() {
                    "ignore" => ImagePolicy::Ignore,
                    "apply" => ImagePolicy::Apply,
                    v if v.strip_prefix("sha256:").is_some_and(|h| {
                        h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit())
                    }) =>
                    {
                        ImagePolicy::Pinned(v.to_ascii_lowercase())
                    }
                    _ => {
                        return Err(DeploymentError::BadImagePolicy {
                            value: value.to_owned(),
                        });
                    }
                };
                continue;
            }
            if var == LOG_VAR {
                value.clone_into(&mut log);
                continue;
            }
            if var == DIRS_VAR {
                dirs.extend(parse_dirs(value)?);
                audit.env.push(entry.clone());
                continue;
            }
            if var == CA_FILE_VAR {
                for file in value.split(',').map(str::trim).filter(|f| !f.is_empty()) {
                    let path = std::path::PathBuf::from(file);
                    if !path.is_absolute() {
                        return Err(DeploymentError::CaFileNotAbsolute {
                            file: file.to_owned(),
                        });
                    }
                    ca_files.push(path);
                }
                audit.env.push(entry.clone());
                continue;
            }
            if var == HTTP_ADDR_VAR {
                let addr: std::net::SocketAddr =
                    value
                        .trim()
                        .parse()
                        .map_err(|_| DeploymentError::BadHttpAddr {
                            value: value.to_owned(),
                        })?;
                http_addr = Some(addr);
                audit.env.push(entry.clone());
                continue;
            }
            let Some(setting) = Setting::ALL.into_iter().find(|s| s.variable() == var) else {
                return Err(DeploymentError::UnknownVar {
                    var: var.to_owned(),
                });
            };
            if setting == Setting::Observe
                && !matches!(value.trim(), "" | "false" | "0" | "no")
                && !observe_allowed
            {
                return Err(DeploymentError::ObserveNotAllowed);
            }
            if setting == Setting::Audit && !matches!(value.trim(), "" | "-") {
                return Err(DeploymentError::AuditFile {
                    value: value.to_owned(),
                });
            }
            from_env
                .set(&Origin::Environment, setting, value)
                .map_err(DeploymentError::Setting)?;
            audit.env.push(entry.clone());
        }
        tracing_subscriber::EnvFilter::try_new(&log).map_err(|e| DeploymentError::BadLog {
            value: log.clone(),
            reason: e.to_string(),
        })?;
        let from_image = match (layer, &image_policy) {
            (None, ImagePolicy::Unanswered | ImagePolicy::Ignore) => Settings::new(),
            (None, ImagePolicy::Apply) => {
                return Err(DeploymentError::NoPolicyLayer {
                    value: "apply".to_owned(),
                });
            }
            (None, ImagePolicy::Pinned(digest)) => {
                return Err(DeploymentError::NoPolicyLayer {
                    value: digest.clone(),
                });
            }
            (Some(layer), ImagePolicy::Unanswered) => {
                return Err(DeploymentError::ImagePolicyUnanswered {
                    origin: layer.origin.clone(),
                    digest: layer.digest.clone(),
                });
            }
            (Some(layer), ImagePolicy::Ignore) => {
                audit.image = Some((format!("{} {}", layer.origin, layer.digest), false));
                Settings::new()
            }
            (Some(layer), ImagePolicy::Pinned(pinned)) if *pinned != layer.digest => {
                return Err(DeploymentError::PolicyDigestMismatch {
                    pinned: pinned.clone(),
                    found: layer.digest.clone(),
                });
            }
            (Some(layer), ImagePolicy::Apply | ImagePolicy::Pinned(_)) => {
                audit.image = Some((format!("{} {}", layer.origin, layer.digest), true));
                parse_layer(layer)?
            }
        };
        let settings = from_image.and(from_env);
        if settings.policy.observes() && settings.audit.is_none() {
            return Err(DeploymentError::ObserveWithoutAudit);
        }
        // A secret's value read from a variable of the pod spec's is the
        // guest's no longer: only moat reads it. Its name is the guest's
        // variable for the placeholder.
        for binding in &settings.secrets {
            if let SecretSource::Env(var) = &binding.from {
                guest_env.retain(|(name, _)| name != var);
            }
            if guest_env.iter().any(|(name, _)| *name == binding.name) {
                return Err(DeploymentError::SecretNameSet {
                    name: binding.name.clone(),
                });
            }
        }
        Ok(Deployment {
            settings,
            guest_env,
            dirs,
            http_addr,
            ca_files,
            log,
            audit,
        })
    }
}

/// The settings of a policy layer; errors name the layer by its digest.
fn parse_layer(layer: &PolicyLayer) -> Result<Settings, DeploymentError> {
    if layer.bytes.len() > MAX_POLICY_LAYER {
        return Err(DeploymentError::PolicyLayerTooLarge {
            origin: layer.origin.clone(),
            size: layer.bytes.len(),
        });
    }
    let name = if layer.origin == "layer" {
        format!("policy layer {}", layer.digest)
    } else {
        POLICY_FILE.to_owned()
    };
    let path = Path::new(&name);
    let text = std::str::from_utf8(&layer.bytes).map_err(|e| {
        PolicyFileError::Invalid(SettingError {
            origin: Origin::PolicyFile {
                path: path.to_owned(),
                line: 1 + layer.bytes[..e.valid_up_to()]
                    .iter()
                    .filter(|b| **b == b'\n')
                    .count(),
            },
            key: None,
            value: None,
            reason: "not UTF-8 text".to_owned(),
            cause: None,
        })
    })?;
    let file = PolicyFile::parse(text, path)?;
    if let Some(statement) = file
        .statements()
        .iter()
        .find(|s| s.setting == Setting::Audit)
    {
        return Err(DeploymentError::ImageAudit {
            origin: layer.origin.clone(),
            line: statement.line,
        });
    }
    Settings::from_image_policy(&file, &layer.digest)
        .map_err(|e| DeploymentError::PolicyLayer(e.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use moat_host::policy::{Capability, Host};

    /// The deployment of a container whose image sets no environment.
    fn read(envs: &[String], layer: Option<&PolicyLayer>) -> Result<Deployment, DeploymentError> {
        Deployment::read(envs, &[], layer, false)
    }

    /// Issue 56: observe mode under the shim only where the node's
    /// settings allow the pod's namespace, and only with its trail.
    #[test]
    fn observe_mode_is_the_nodes_to_allow_and_needs_the_trail() {
        let asked = envs(&["MOAT_OBSERVE=1", "MOAT_AUDIT=-"]);
        let e = Deployment::read(&asked, &[], None, false).unwrap_err();
        assert!(matches!(e, DeploymentError::ObserveNotAllowed), "{e}");
        assert!(e.to_string().contains("observe-namespaces"), "{e}");
        let d = Deployment::read(&asked, &[], None, true).unwrap();
        assert!(d.settings.policy.observes());
        let e = Deployment::read(&envs(&["MOAT_OBSERVE=1"]), &[], None, true).unwrap_err();
        assert!(matches!(e, DeploymentError::ObserveWithoutAudit), "{e}");
        // Off is off, allowed or not.
        let d = Deployment::read(&envs(&["MOAT_OBSERVE=false"]), &[], None, false).unwrap();
        assert!(!d.settings.policy.observes());
    }

    fn envs(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn allows(d: &Deployment, capability: Capability, host: &str, port: u16) -> bool {
        let host = Host::parse(host).unwrap();
        d.settings.policy.check(capability, &host, port).is_ok()
    }

    #[test]
    fn moat_variables_grant_and_never_reach_the_guest() {
        let d = read(
            &envs(&[
                "PATH=/bin",
                "MOAT_ALLOW_LISTEN=0.0.0.0:8080",
                "MOAT_ALLOW_NET=db.internal:5432",
                "MOAT_DENY_NET=metadata",
                "MOAT_MAX_SOCKETS=64",
                "MOAT_LOG=moat::net=debug",
                "GREETING=a=b",
            ]),
            None,
        )
        .unwrap();
        assert_eq!(
            d.guest_env,
            vec![
                ("PATH".to_owned(), "/bin".to_owned()),
                ("GREETING".to_owned(), "a=b".to_owned())
            ]
        );
        assert!(allows(&d, Capability::Listen, "0.0.0.0", 8080));
        assert!(!allows(&d, Capability::Listen, "0.0.0.0", 8081));
        assert!(allows(&d, Capability::Connect, "db.internal", 5432));
        assert!(!allows(&d, Capability::Connect, "169.254.169.254", 80));
        assert_eq!(d.settings.limits.max_sockets, Some(64));
        assert_eq!(d.log, "moat::net=debug");
        assert_eq!(
            d.audit.to_string(),
            "pod spec: MOAT_ALLOW_LISTEN=0.0.0.0:8080 MOAT_ALLOW_NET=db.internal:5432 \
             MOAT_DENY_NET=metadata MOAT_MAX_SOCKETS=64; image policy: none"
        );
    }

    /// Issue 56 under the shim: a secret binds a value of the pod's own;
    /// the variable it is read from is the guest's no longer, and the
    /// guest's variable of its name is the placeholder's alone.
    #[test]
    fn a_secret_takes_its_variable_out_of_the_guests_environment() {
        let binding = "MOAT_SECRET=API_KEY;from=env:API_TOKEN;to=https://api.example.com/v1/;\
                       header=authorization;form=Bearer {}";
        let d = read(
            &envs(&[binding, "API_TOKEN=sk-live-7Hq2mZ9xR4tW8vB1nK6p", "HOME=/"]),
            None,
        )
        .unwrap();
        assert_eq!(d.settings.secrets.len(), 1);
        assert_eq!(d.guest_env, vec![("HOME".to_owned(), "/".to_owned())]);
        let e = read(&envs(&[binding, "API_KEY=mine"]), None).unwrap_err();
        assert!(matches!(e, DeploymentError::SecretNameSet { .. }), "{e}");
        assert!(e.to_string().contains("API_KEY"), "{e}");
    }

    #[test]
    fn ca_files_are_absolute_paths_of_the_container() {
        let d = read(&envs(&["MOAT_CA_FILE=/etc/ca/a.pem, /etc/ca/b.pem"]), None).unwrap();
        assert_eq!(
            d.ca_files,
            [
                std::path::PathBuf::from("/etc/ca/a.pem"),
                std::path::PathBuf::from("/etc/ca/b.pem")
            ]
        );
        let e = read(&envs(&["MOAT_CA_FILE=ca.pem"]), None).unwrap_err();
        assert!(
            matches!(e, DeploymentError::CaFileNotAbsolute { .. }),
            "{e}"
        );
    }

    #[test]
    fn an_empty_grant_is_no_grant_so_a_pod_spec_can_override_an_image_env() {
        let d = read(
            &envs(&[
                "MOAT_ALLOW_NET=",
                "MOAT_ALLOW_LISTEN=",
                "MOAT_IMAGE_POLICY=ignore",
            ]),
            None,
        )
        .unwrap();
        assert!(!allows(&d, Capability::Connect, "127.0.0.1", 80));
        assert!(!allows(&d, Capability::Listen, "0.0.0.0", 80));
    }

    #[test]
    fn nothing_is_granted_by_default() {
        let d = read(&envs(&["HOME=/"]), None).unwrap();
        assert!(!allows(&d, Capability::Connect, "127.0.0.1", 80));
        assert!(!allows(&d, Capability::Listen, "0.0.0.0", 80));
        assert_eq!(
            d.audit.to_string(),
            "pod spec sets no grants; image policy: none"
        );
    }

    #[test]
    fn a_misspelt_or_bad_variable_stops_the_start() {
        let e = read(&envs(&["MOAT_ALLOW_NETS=x"]), None).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("MOAT_ALLOW_NETS is not a moat setting;"),
            "{e}"
        );
        // Only the table's own spelling is a setting.
        for odd in [
            "MOAT_allow_net=x",
            "moat_allow_net=*",
            "Moat_Allow_Net=*",
            "MOAT_ALLOW-NET=*",
            "MOAT-ALLOW-NET=*",
            "MOAT_ALLOW-LISTEN=*",
            "MOAT_MAX_SOC\u{212a}ETS=9",
            "MOAT_ALLOW_NE\u{0422}=*",
            "MOAT_=x",
        ] {
            let e = read(&envs(&[odd]), None).unwrap_err();
            assert!(
                matches!(e, DeploymentError::UnknownVar { .. }),
                "{odd}: {e}"
            );
        }
        let e = read(&envs(&["MOAT_ALLOW-NET=*"]), None).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "MOAT_ALLOW-NET is not a moat setting (did you mean MOAT_ALLOW_NET?);"
            ),
            "{e}"
        );
        let e = read(&envs(&["MOAT_ALLOW_NET=300.1.1.1:80"]), None).unwrap_err();
        assert!(
            e.to_string().starts_with("MOAT_ALLOW_NET=300.1.1.1:80: "),
            "{e}"
        );
        let e = read(&envs(&["MOAT_MAX_MEMORY=lots"]), None).unwrap_err();
        assert!(e.to_string().starts_with("MOAT_MAX_MEMORY=lots: "), "{e}");
        let e = read(&envs(&["MOAT_IMAGE_POLICY=yes"]), None).unwrap_err();
        assert!(matches!(e, DeploymentError::BadImagePolicy { .. }), "{e}");
        let e = read(&envs(&["MOAT_LOG=moat::net=loud"]), None).unwrap_err();
        assert!(matches!(e, DeploymentError::BadLog { .. }), "{e}");
    }

    #[test]
    fn the_image_policy_counts_only_when_the_pod_spec_accepts_it() {
        let layer =
            PolicyLayer::new(b"allow-net = [\"api.example.com:443\"]\nmax-sockets = 10\n".to_vec());
        let e = read(&[], Some(&layer)).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "the image carries a moat policy layer ({0}); set MOAT_IMAGE_POLICY to {0} (or apply) to grant what it grants, or to ignore",
                layer.digest
            )
        );

        let ignored = read(&envs(&["MOAT_IMAGE_POLICY=ignore"]), Some(&layer)).unwrap();
        assert!(!allows(
            &ignored,
            Capability::Connect,
            "api.example.com",
            443
        ));

        let pin = format!("MOAT_IMAGE_POLICY={}", layer.digest);
        let applied = read(
            &envs(&[&pin, "MOAT_MAX_SOCKETS=20", "MOAT_DENY_NET=api.example.com"]),
            Some(&layer),
        )
        .unwrap();
        assert!(
            !allows(&applied, Capability::Connect, "api.example.com", 443),
            "the pod spec's deny holds over the image's grant"
        );
        assert_eq!(applied.settings.limits.max_sockets, Some(20));

        let applied = read(&envs(&["MOAT_IMAGE_POLICY=apply"]), Some(&layer)).unwrap();
        assert!(allows(
            &applied,
            Capability::Connect,
            "api.example.com",
            443
        ));
        assert_eq!(applied.settings.limits.max_sockets, Some(10));

        let other = format!("MOAT_IMAGE_POLICY=sha256:{}", "0".repeat(64));
        let e = read(&envs(&[&other]), Some(&layer)).unwrap_err();
        assert!(
            matches!(e, DeploymentError::PolicyDigestMismatch { .. }),
            "{e}"
        );
        let e = read(&envs(&["MOAT_IMAGE_POLICY=apply"]), None).unwrap_err();
        assert!(matches!(e, DeploymentError::NoPolicyLayer { .. }), "{e}");
    }

    #[test]
    fn the_audit_trail_goes_to_the_containers_log_and_rules_name_the_image() {
        let d = read(&envs(&["MOAT_AUDIT=-", "MOAT_ALLOW_NET=db:5432"]), None).unwrap();
        assert_eq!(
            d.settings.audit,
            Some(moat_host::audit::Destination::Stderr)
        );
        for path in ["/etc/cron.d/moat", "audit.jsonl"] {
            let e = read(&envs(&[&format!("MOAT_AUDIT={path}")]), None).unwrap_err();
            assert!(
                e.to_string()
                    .starts_with(&format!("MOAT_AUDIT={path}: under the shim")),
                "{e}"
            );
        }
        // An image may not pick where the trail goes (a path on the node).
        let layer =
            PolicyLayer::new(b"allow-net = [\"a.example:443\"]\naudit = \"/etc/x\"\n".to_vec());
        let e = read(&envs(&["MOAT_IMAGE_POLICY=apply"]), Some(&layer)).unwrap_err();
        assert!(
            matches!(e, DeploymentError::ImageAudit { line: 2, .. }),
            "{e}"
        );
        // An image's entries name the image's policy and its line.
        let layer =
            PolicyLayer::new(b"max-sockets = 3\nallow-net = [\"a.example:443\"]\n".to_vec());
        let d = read(
            &envs(&["MOAT_IMAGE_POLICY=apply", "MOAT_DENY_NET=private"]),
            Some(&layer),
        )
        .unwrap();
        let allowed = d
            .settings
            .policy
            .decide(Capability::Connect, &Host::parse("a.example").unwrap(), 443)
            .unwrap();
        assert_eq!(
            allowed.rule.source,
            moat_host::policy::Source::ImagePolicy {
                digest: layer.digest.clone(),
                line: 2
            }
        );
        let denied = d
            .settings
            .policy
            .check(Capability::Connect, &Host::parse("10.0.0.1").unwrap(), 1)
            .unwrap_err();
        let moat_host::policy::DenyReason::DeniedBy { source, .. } = denied.reason else {
            panic!("{denied}")
        };
        assert_eq!(
            *source,
            moat_host::policy::Source::Environment {
                variable: "MOAT_DENY_NET".to_owned()
            }
        );
    }

    #[test]
    fn a_bad_policy_layer_is_named_with_its_line() {
        let layer = PolicyLayer::new(b"max-sockets = 4\nallow-net = [\"300.1.1.1:80\"]\n".to_vec());
        let e = read(&envs(&["MOAT_IMAGE_POLICY=apply"]), Some(&layer)).unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with(&format!("policy layer {}:2: allow-net: ", layer.digest)),
            "{text}"
        );
        let big = PolicyLayer::new(vec![b'#'; MAX_POLICY_LAYER + 1]);
        let e = read(&envs(&["MOAT_IMAGE_POLICY=apply"]), Some(&big)).unwrap_err();
        assert!(
            matches!(e, DeploymentError::PolicyLayerTooLarge { .. }),
            "{e}"
        );
    }

    #[test]
    fn the_images_own_moat_variables_never_count() {
        let image_env = envs(&[
            "PATH=/bin",
            "MOAT_ALLOW_NET=*",
            "MOAT_ALLOW-LISTEN=*",
            "MOAT_IMAGE_POLICY=apply",
            "MOAT_LOG=off",
            "MOAT_DIRS=/data:rw",
        ]);
        // What the container holds when the pod spec says nothing: the
        // image's entries, merged in.
        let d = Deployment::read(&image_env, &image_env, None, false).unwrap();
        assert!(!allows(&d, Capability::Connect, "127.0.0.1", 80));
        assert!(!allows(&d, Capability::Listen, "0.0.0.0", 80));
        assert!(d.dirs.is_empty());
        assert_eq!(d.log, DEFAULT_LOG);
        assert_eq!(d.guest_env, vec![("PATH".to_owned(), "/bin".to_owned())]);
        assert_eq!(
            d.audit.to_string(),
            "pod spec sets no grants; image ENV ignored (only the pod spec grants): \
             MOAT_ALLOW_NET MOAT_ALLOW-LISTEN MOAT_IMAGE_POLICY MOAT_LOG MOAT_DIRS; image policy: none"
        );
        // The pod spec's own values, over the image's, count.
        let pod = envs(&[
            "MOAT_ALLOW_NET=db.internal:5432",
            "MOAT_ALLOW-LISTEN=*",
            "MOAT_IMAGE_POLICY=ignore",
        ]);
        let d = Deployment::read(&pod, &image_env, None, false).unwrap();
        assert!(allows(&d, Capability::Connect, "db.internal", 5432));
        assert!(!allows(&d, Capability::Connect, "127.0.0.1", 80));
        assert!(!allows(&d, Capability::Listen, "0.0.0.0", 80));
    }

    #[test]
    fn dirs_are_read_only_unless_writable_and_never_the_containers_internals() {
        let d = read(&envs(&["MOAT_DIRS=/data:rw, /etc/app ,/srv/x::/x"]), None).unwrap();
        assert_eq!(
            d.dirs,
            vec![
                Preopen::writable("/data", "/data"),
                Preopen::read_only("/etc/app", "/etc/app"),
                Preopen::read_only("/srv/x", "/x"),
            ]
        );
        for (dirs, why) in [
            ("/", "whole filesystem"),
            ("/:rw", "whole filesystem"),
            ("/proc", "/proc holds"),
            ("/proc/self", "/proc holds"),
            ("/sys/fs/cgroup", "/sys holds"),
            ("/dev", "/dev holds"),
            ("/dev/termination-log", "/dev holds"),
            ("data", "in full"),
            ("/data/../proc", "`..`"),
            ("/data:rx", "HOST_DIR"),
        ] {
            let e = read(&envs(&[&format!("MOAT_DIRS={dirs}")]), None).unwrap_err();
            assert!(e.to_string().contains(why), "{dirs}: {e}");
        }
        assert!(read(&envs(&["HOME=/"]), None).unwrap().dirs.is_empty());
    }

    #[test]
    fn an_http_address_is_an_ip_address_and_port() {
        let d = read(&envs(&["MOAT_HTTP_ADDR=0.0.0.0:8080"]), None).unwrap();
        assert_eq!(d.http_addr, Some("0.0.0.0:8080".parse().unwrap()));
        assert!(
            d.audit
                .env
                .contains(&"MOAT_HTTP_ADDR=0.0.0.0:8080".to_owned())
        );
        assert_eq!(read(&envs(&[]), None).unwrap().http_addr, None);
        // Its audit settings record gives the per-request timeout that
        // applies when it serves, none when it runs.
        let timeout = |d: &Deployment| {
            moat_host::settings::audited(&d.settings, d.defaults())
                .into_iter()
                .find(|s| s.setting == "timeout")
                .map(|s| s.value)
        };
        assert_eq!(timeout(&d).as_deref(), Some("1m"));
        assert_eq!(
            timeout(&read(&envs(&[]), None).unwrap()).as_deref(),
            Some("none")
        );
        // The image's own MOAT_HTTP_ADDR serves nothing: the pod spec grants.
        let own = envs(&["MOAT_HTTP_ADDR=0.0.0.0:80"]);
        let d = Deployment::read(&own, &own, None, false).unwrap();
        assert_eq!(d.http_addr, None);
        assert_eq!(d.audit.ignored, ["MOAT_HTTP_ADDR"]);
        for bad in ["localhost:8080", "8080", "0.0.0.0"] {
            let e = read(&envs(&[&format!("MOAT_HTTP_ADDR={bad}")]), None).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "MOAT_HTTP_ADDR={bad}: expected an IP address and port, such as 0.0.0.0:8080"
                )
            );
        }
    }
}
