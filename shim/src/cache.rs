//! The node's compiled-code cache: a component's native code, compiled by
//! the shim the first time the node starts a container of it and loaded
//! by every later one, so that a pod's second start compiles nothing.
//!
//! A cache entry is native code that later containers run, so only the
//! shim writes one, and no container can:
//!
//! - **The directory is root's alone** ([`NodeSettings::cache_dir`],
//!   `/var/lib/moat/cache` unless the node's settings say otherwise),
//!   judged as moat judges every cache: owned by the shim's user, writable
//!   by nobody else, nor any directory above it; each entry carries an
//!   HMAC-SHA-256 under the directory's own key, over the entry's name
//!   (the SHA-256 of the engine's settings and the component's bytes) and
//!   its code ([`moat_host`]'s cache).
//! - **The shim compiles in a process of its own** (the shim's binary
//!   started again with [`COMPILE_FLAG`]), before the container is
//!   created, from the component's bytes: its image layer's, or the file
//!   of the container's root filesystem, opened with every step of its
//!   path resolved inside that root (`openat2`'s `RESOLVE_IN_ROOT`), so
//!   that no symlink of the image leads it to a file of the node. The
//!   compile's memory goes when that process ends, not into the
//!   long-lived shim that holds the pod.
//! - **The container gets the directory read-only** at [`MOUNT`], under
//!   `/dev` (no guest is ever given `/dev` or anything below it), and its
//!   moat loads the authenticated entry from there. Whether a container
//!   uses the cache is the shim's word ([`crate::sandbox::Container`]'s
//!   `compiled_code`), never what the container finds at that path, which
//!   an image could have put there.
//!
//! The cache is bounded ([`NodeSettings::max_cache_size`]); past it the
//! shim removes the entries used longest ago.

use std::io::{Read as _, Write as _};
use std::os::fd::AsFd as _;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

use containerd_shim::monitor::{Subscription, Topic, monitor_subscribe};
use moat_host::{CacheDir, MAX_CACHE_BYTES, Moat, MoatConfig};

use crate::image::MAX_COMPONENT;

/// Where a container sees the node's cache, read-only.
pub const MOUNT: &str = "/dev/moat/cache";

/// The node's settings for the shim: what its runtime's configuration on
/// this node says, beside containerd's (containerd hands a shim no
/// settings of its own kind).
pub const SETTINGS_FILE: &str = "/etc/moat/shim.toml";

/// The variable of the shim's environment (containerd's, which the shim
/// inherits) that names another settings file: for a node that keeps it
/// elsewhere, and for tests. A pod's variables never reach it.
pub const SETTINGS_VAR: &str = "MOAT_SHIM_SETTINGS";

/// The cache directory when the node's settings name none.
pub const DEFAULT_CACHE_DIR: &str = moat_host::NODE_CACHE_DIR;

/// The first argument that makes the shim's binary compile a component
/// into the node's cache instead of serving containerd.
pub const COMPILE_FLAG: &str = "--moat-compile-into";

/// The node's settings ([`SETTINGS_FILE`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSettings {
    /// The compiled-code cache's directory; `None`: no cache, every start
    /// compiles.
    pub cache_dir: Option<PathBuf>,
    /// Most bytes of compiled code it keeps.
    pub max_cache_size: u64,
    /// Most memory the process that compiles a component for the cache may
    /// take ([`DEFAULT_MAX_COMPILE_MEMORY`]).
    pub max_compile_memory: u64,
    /// Longest that process may run ([`DEFAULT_COMPILE_TIMEOUT`]).
    pub compile_timeout: std::time::Duration,
    /// The CPUs' time that process may take ([`DEFAULT_COMPILE_CPUS`]).
    pub compile_cpus: u32,
    /// The Kubernetes namespaces whose pods may set `MOAT_OBSERVE` (let
    /// through what their grants refuse, recording each as would-deny):
    /// none unless the node's operator names them, since observe mode
    /// does not contain the program.
    pub observe_namespaces: Vec<String>,
    /// Where each container's figures are written, in a directory of its
    /// own ([`crate::figures`]); `None`: nowhere.
    pub figures_dir: Option<PathBuf>,
    /// How often a running container's figures are brought up to date
    /// ([`DEFAULT_FIGURES_INTERVAL`]).
    pub figures_interval: std::time::Duration,
}

/// The memory the process that compiles a tenant's component for the
/// node's cache may take (its data segment and private mappings,
/// `RLIMIT_DATA`): 4 GiB. A 2.8 MB component took 1.9 GB to compile; past
/// the bound the compile fails, and the container compiles the component
/// itself, inside its own pod's limits.
pub const DEFAULT_MAX_COMPILE_MEMORY: u64 = 4 << 30;

/// The longest the node's compile of one component may run: 5 minutes,
/// many times what the largest components seen take (a 2.8 MB one took 14
/// s of CPU); past it the process is killed and the container compiles
/// the component itself.
pub const DEFAULT_COMPILE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// The CPUs' time the node's compile of one component may take: one. A
/// compile for the cache happens before a pod starts, beside the node's
/// running pods, which keep the rest; wasmtime would otherwise take every
/// CPU for the 14 s of CPU the largest component seen takes.
pub const DEFAULT_COMPILE_CPUS: u32 = 1;

/// How often a running container's figures are brought up to date, by
/// default: 10 s, shorter than the 15 s and longer a scraper usually waits
/// between two looks, so that each look sees figures at most one scrape
/// old; a rewrite costs one small file on a tmpfs, and happens only when a
/// figure changed.
pub const DEFAULT_FIGURES_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

impl Default for NodeSettings {
    fn default() -> NodeSettings {
        NodeSettings {
            cache_dir: Some(PathBuf::from(DEFAULT_CACHE_DIR)),
            max_cache_size: MAX_CACHE_BYTES,
            max_compile_memory: DEFAULT_MAX_COMPILE_MEMORY,
            compile_timeout: DEFAULT_COMPILE_TIMEOUT,
            compile_cpus: DEFAULT_COMPILE_CPUS,
            observe_namespaces: Vec::new(),
            figures_dir: Some(PathBuf::from(crate::figures::DEFAULT_FIGURES_DIR)),
            figures_interval: DEFAULT_FIGURES_INTERVAL,
        }
    }
}

/// Why the node's settings are refused.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The file exists and cannot be read.
    #[error("{SETTINGS_FILE}: {0}")]
    Read(#[source] std::io::Error),
    /// It is not TOML.
    #[error("{SETTINGS_FILE}: {0}")]
    Toml(#[source] toml::de::Error),
    /// A key the shim does not know.
    #[error(
        "{SETTINGS_FILE}: `{0}` is not a setting (the settings are cache-dir, max-cache-size, \
         max-compile-memory, compile-timeout, compile-cpus, observe-namespaces, figures-dir \
         and figures-interval)"
    )]
    Unknown(String),
    /// A value of the wrong kind or out of range.
    #[error("{SETTINGS_FILE}: {key}: {why}")]
    Value {
        /// The setting.
        key: &'static str,
        /// What is wrong with it.
        why: String,
    },
}

/// The size `value` of the setting `key`: a string such as `"2GiB"`.
fn size(key: &'static str, value: &toml::Value) -> Result<u64, SettingsError> {
    let text = value.as_str().ok_or_else(|| SettingsError::Value {
        key,
        why: "a size such as \"2GiB\"".to_owned(),
    })?;
    moat_host::settings::parse_size(text).map_err(|why| SettingsError::Value { key, why })
}

/// An absolute directory, or `"off"` (`None`).
fn dir_or_off(key: &'static str, value: &toml::Value) -> Result<Option<PathBuf>, SettingsError> {
    let dir = value.as_str().ok_or_else(|| SettingsError::Value {
        key,
        why: "a path, or \"off\"".to_owned(),
    })?;
    match dir {
        "off" => Ok(None),
        dir if Path::new(dir).is_absolute() => Ok(Some(PathBuf::from(dir))),
        _ => Err(SettingsError::Value {
            key,
            why: format!("{dir:?} is not an absolute path"),
        }),
    }
}

/// A list of Kubernetes namespace names (DNS labels: 1 to 63 of `a-z`,
/// `0-9` and `-`, a letter or digit at each end).
fn namespaces(key: &'static str, value: &toml::Value) -> Result<Vec<String>, SettingsError> {
    let bad = |why: String| SettingsError::Value { key, why };
    let list = value
        .as_array()
        .ok_or_else(|| bad("a list of namespaces, such as [\"agents-dev\"]".to_owned()))?;
    list.iter()
        .map(|item| {
            let name = item
                .as_str()
                .ok_or_else(|| bad(format!("{item:?} is not a namespace's name")))?;
            let label = (1..=63).contains(&name.len())
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !name.starts_with('-')
                && !name.ends_with('-');
            if label {
                Ok(name.to_owned())
            } else {
                Err(bad(format!(
                    "{name:?} is not a Kubernetes namespace's name"
                )))
            }
        })
        .collect()
}

impl NodeSettings {
    /// Whether a pod of Kubernetes namespace `namespace` may run in observe
    /// mode: only one the node's operator named, and never a container CRI
    /// did not place in a namespace.
    pub fn allows_observe(&self, namespace: Option<&str>) -> bool {
        namespace.is_some_and(|ns| self.observe_namespaces.iter().any(|n| n == ns))
    }

    /// The settings in `text` (the file's contents).
    ///
    /// # Errors
    /// [`SettingsError`] for text that is not TOML, an unknown key or a bad
    /// value.
    pub fn parse(text: &str) -> Result<NodeSettings, SettingsError> {
        let table: toml::Table = text.parse().map_err(SettingsError::Toml)?;
        let mut settings = NodeSettings::default();
        for (key, value) in &table {
            match key.as_str() {
                "cache-dir" => settings.cache_dir = dir_or_off("cache-dir", value)?,
                "figures-dir" => settings.figures_dir = dir_or_off("figures-dir", value)?,
                "figures-interval" => {
                    let text = value.as_str().ok_or_else(|| SettingsError::Value {
                        key: "figures-interval",
                        why: "a duration such as \"10s\"".to_owned(),
                    })?;
                    settings.figures_interval = moat_host::settings::parse_duration(text)
                        .ok()
                        .filter(|d| *d >= std::time::Duration::from_secs(1))
                        .ok_or_else(|| SettingsError::Value {
                            key: "figures-interval",
                            why: format!("{text:?} is not a duration of 1s or more"),
                        })?;
                }
                "max-cache-size" => settings.max_cache_size = size("max-cache-size", value)?,
                "max-compile-memory" => {
                    settings.max_compile_memory = size("max-compile-memory", value)?;
                }
                "compile-timeout" => {
                    let text = value.as_str().ok_or_else(|| SettingsError::Value {
                        key: "compile-timeout",
                        why: "a duration such as \"5m\"".to_owned(),
                    })?;
                    settings.compile_timeout =
                        moat_host::settings::parse_duration(text).map_err(|why| {
                            SettingsError::Value {
                                key: "compile-timeout",
                                why,
                            }
                        })?;
                }
                "compile-cpus" => {
                    settings.compile_cpus = value
                        .as_integer()
                        .and_then(|n| u32::try_from(n).ok())
                        .filter(|&n| n >= 1)
                        .ok_or_else(|| SettingsError::Value {
                            key: "compile-cpus",
                            why: "a whole number of CPUs, 1 or more".to_owned(),
                        })?;
                }
                "observe-namespaces" => {
                    settings.observe_namespaces = namespaces("observe-namespaces", value)?;
                }
                other => return Err(SettingsError::Unknown(other.to_owned())),
            }
        }
        Ok(settings)
    }

    /// The node's settings: [`SETTINGS_FILE`]'s (or the file
    /// [`SETTINGS_VAR`] names), or the defaults where the file does not
    /// exist.
    ///
    /// # Errors
    /// As [`NodeSettings::parse`], or the file cannot be read.
    pub fn read() -> Result<NodeSettings, SettingsError> {
        let file = std::env::var_os(SETTINGS_VAR)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(SETTINGS_FILE));
        match std::fs::read_to_string(file) {
            Ok(text) => NodeSettings::parse(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(NodeSettings::default()),
            Err(e) => Err(SettingsError::Read(e)),
        }
    }
}

/// Why a container starts without the node's cache (it then compiles its
/// component itself, as with no cache).
#[derive(Debug, thiserror::Error)]
pub enum Uncached {
    /// The component file could not be read from the root filesystem.
    #[error("cannot read the component {path} in the container's root filesystem: {source}")]
    Component {
        /// Its path in the container.
        path: String,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The component file is not a regular file, or too large.
    #[error("the component {0} is not a regular file of at most {MAX_COMPONENT} bytes")]
    NotAFile(String),
    /// The compiling process could not be run, or it failed.
    #[error("compiling into the node's cache: {0}")]
    Compile(String),
    /// The container's spec could not be given the mount.
    #[error("the container's spec: {0}")]
    Spec(String),
}

/// Reads the file at `path` (a path of the container) under `root`, every
/// step resolved inside `root`, as the container would see it: at most
/// [`MAX_COMPONENT`] bytes of a regular file.
///
/// # Errors
/// [`Uncached`] when it cannot be opened, is not a regular file or is too
/// large.
pub fn read_in_root(root: &Path, path: &str) -> Result<Vec<u8>, Uncached> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let io = |source: std::io::Error| Uncached::Component {
        path: path.to_owned(),
        source,
    };
    let root = std::fs::File::open(root).map_err(io)?;
    // Non-blocking, so that a FIFO the image put there does not hold the
    // shim; no controlling terminal; checked to be a regular file before
    // it is read.
    let fd = rustix::fs::openat2(
        root.as_fd(),
        path.trim_start_matches('/'),
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS | ResolveFlags::NO_XDEV,
    )
    .map_err(|e| io(e.into()))?;
    let file = std::fs::File::from(fd);
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() || meta.len() > MAX_COMPONENT as u64 {
        return Err(Uncached::NotAFile(path.to_owned()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_COMPONENT as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() > MAX_COMPONENT {
        return Err(Uncached::NotAFile(path.to_owned()));
    }
    Ok(bytes)
}

/// Compiles `component` into the cache at `dir` in a process of its own
/// (this binary with [`COMPILE_FLAG`]), unless this build of the shim
/// already did since entries were last removed ([`moat_host::last_eviction`]):
/// then the code is there, and even the check is skipped (the compiling
/// process takes 0.13 s to find a 35 MB entry and check it, which the
/// container does again anyway).
///
/// # Errors
/// [`Uncached::Compile`] when the process cannot run or fails (a
/// component that does not compile: the container says why when it
/// compiles it itself).
pub fn compile(dir: &Path, settings: &NodeSettings, component: &[u8]) -> Result<(), Uncached> {
    let exe = std::env::current_exe().map_err(|e| Uncached::Compile(e.to_string()))?;
    compile_with(&exe, dir, settings, component)
}

/// [`compile`], by the shim's binary at `exe`.
///
/// # Errors
/// As [`compile`].
pub fn compile_with(
    exe: &Path,
    dir: &Path,
    settings: &NodeSettings,
    component: &[u8],
) -> Result<(), Uncached> {
    let known = known_marker(dir, exe, component);
    if let Some(marker) = &known
        && is_current(dir, marker)
    {
        return Ok(());
    }
    // A component this build of the shim failed to compile before fails
    // again at once: a pod that restarts does not make the node compile it
    // on every restart.
    let failed = known
        .as_ref()
        .and_then(|marker| Some(dir.join(FAILED).join(marker.file_name()?)));
    if let Some(said) = failed.as_ref().and_then(|f| std::fs::read(f).ok()) {
        return Err(Uncached::Compile(format!(
            "it failed before on this node: {}",
            String::from_utf8_lossy(&said).trim()
        )));
    }
    // Before the child exists: the shim's reaper may reap it before this
    // thread waits for it, and then reports its status here.
    let reaped = monitor_subscribe(Topic::Pid).map_err(|e| Uncached::Compile(e.to_string()))?;
    let mut child = std::process::Command::new(exe)
        .arg(COMPILE_FLAG)
        .arg(dir)
        .arg(settings.max_cache_size.to_string())
        .arg(settings.max_compile_memory.to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| Uncached::Compile(e.to_string()))?;
    // As root (a node's shim), the child compiles in a cgroup of its own,
    // or not at all: it is moved there before it reads the component.
    let cgroup = match rustix::process::geteuid().is_root() {
        false => None,
        true => match crate::confine::CompileCgroup::enter(
            i32::try_from(child.id()).unwrap_or(i32::MAX),
            settings.max_compile_memory,
            settings.compile_cpus,
        ) {
            Ok(cgroup) => Some(cgroup),
            Err(e) => {
                let _ = child.kill();
                let _ = exit_code(&mut child, &reaped);
                return Err(Uncached::Compile(e.to_string()));
            }
        },
    };
    // The compile's time bound: a watchdog that kills the child once it is
    // up, unless told first that the child ended.
    let pid = rustix::process::Pid::from_child(&child);
    let (ended, watch) = std::sync::mpsc::channel::<()>();
    let timeout = settings.compile_timeout;
    let watchdog = std::thread::spawn(move || {
        let over = matches!(
            watch.recv_timeout(timeout),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout)
        );
        if over {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
        over
    });
    if let Some(mut stdin) = child.stdin.take() {
        // The child reads it all before it compiles; a write error shows
        // in its status.
        let _ = stdin.write_all(component);
    }
    let mut said = Vec::new();
    if let Some(stderr) = child.stderr.take() {
        // What the child says is one line; past this much, the rest is
        // not read (the child then fails its write, and ends).
        let _ = stderr.take(MAX_COMPILE_MESSAGE).read_to_end(&mut said);
    }
    let status = exit_code(&mut child, &reaped);
    // The child has ended: its cgroup is empty, and goes.
    drop(cgroup);
    let _ = ended.send(());
    let timed_out = watchdog.join().unwrap_or(false);
    let status = status.map_err(|e| Uncached::Compile(e.to_string()))?;
    if status == 0 {
        if let Some(marker) = known {
            // Only a hint: a marker that is wrong costs the container a
            // compile of its own, never wrong code.
            let _ = std::fs::DirBuilder::new()
                .mode(0o700)
                .create(dir.join(KNOWN));
            let _ = std::fs::write(marker, b"");
        }
        Ok(())
    } else {
        let why = if timed_out {
            format!(
                "it ran past the node's compile-timeout of {}",
                humantime_duration(settings.compile_timeout)
            )
        } else {
            format!(
                "exit status {status}: {}",
                String::from_utf8_lossy(&said).trim()
            )
        };
        if let Some(failed) = failed {
            let _ = std::fs::DirBuilder::new()
                .mode(0o700)
                .create(dir.join(FAILED));
            let _ = std::fs::write(failed, why.as_bytes());
        }
        Err(Uncached::Compile(why))
    }
}

/// `duration` as a setting may be written: whole seconds (`300s`).
fn humantime_duration(duration: std::time::Duration) -> String {
    format!("{}s", duration.as_secs())
}

/// The directory of the cache where the shim notes the components it
/// failed to compile, and why.
const FAILED: &str = "failed";

/// Most bytes of what the compiling process says that the shim reads.
const MAX_COMPILE_MESSAGE: u64 = 64 << 10;

/// The exit code of `child` (128 + the signal for one a signal killed):
/// from its own wait, or, when the shim's reaper reaped it first (the wait
/// then fails with `ECHILD`), from the reaper's report on `reaped`.
fn exit_code(child: &mut std::process::Child, reaped: &Subscription) -> std::io::Result<i32> {
    use std::os::unix::process::ExitStatusExt as _;
    let pid = i32::try_from(child.id()).unwrap_or(i32::MAX);
    match child.wait() {
        Ok(status) => Ok(status
            .code()
            .or_else(|| status.signal().map(|s| 128 + s))
            .unwrap_or(-1)),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::CHILD.raw_os_error()) => {
            crate::reaper::reported_exit(pid, reaped).ok_or_else(|| {
                std::io::Error::other(format!(
                    "the compiling process {pid} was reaped, and its status not reported"
                ))
            })
        }
        Err(e) => Err(e),
    }
}

/// The directory of the cache where the shim notes which components it
/// has put in the cache.
const KNOWN: &str = "known";

/// The note that this build of the shim put `component` in the cache at
/// `dir`: named after the component's SHA-256 and the shim's binary (its
/// device, inode, size and modification time, so that an upgrade of the
/// shim compiles anew). `None` when the binary cannot be examined.
fn known_marker(dir: &Path, exe: &Path, component: &[u8]) -> Option<PathBuf> {
    use sha2::{Digest as _, Sha256};
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(exe).ok()?;
    let mut digest = Sha256::new();
    digest.update(component);
    for fact in [
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime() as u64,
        meta.mtime_nsec() as u64,
    ] {
        digest.update(fact.to_le_bytes());
    }
    let name: String = digest
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Some(dir.join(KNOWN).join(name))
}

/// Whether `marker` exists and is newer than the last removal of entries.
fn is_current(dir: &Path, marker: &Path) -> bool {
    let Ok(noted) = std::fs::metadata(marker).and_then(|m| m.modified()) else {
        return false;
    };
    match moat_host::last_eviction(dir) {
        Some(evicted) => noted > evicted,
        None => true,
    }
}

/// The compiling process: `args` are the cache directory and its size
/// bound, the component's bytes come on stdin. Returns the exit status.
pub fn compile_main(args: &[String]) -> i32 {
    let [dir, max_bytes, max_memory] = args else {
        eprintln!("usage: {COMPILE_FLAG} DIR MAX_BYTES MAX_MEMORY < component.wasm");
        return 2;
    };
    let (Ok(max_bytes), Ok(max_memory)) = (max_bytes.parse::<u64>(), max_memory.parse::<u64>())
    else {
        eprintln!("{COMPILE_FLAG}: {max_bytes:?} or {max_memory:?} is not a number of bytes");
        return 2;
    };
    // The compile of a tenant's component runs as the shim (root, on the
    // node): before it reads the component it enters its sandbox, and
    // takes at most `max_memory` (the allocator's failure past it ends the
    // process).
    if let Err(e) = crate::confine::enter() {
        eprintln!("{COMPILE_FLAG}: {e}");
        return 1;
    }
    let limit = rustix::process::Rlimit {
        current: Some(max_memory),
        maximum: Some(max_memory),
    };
    if let Err(e) = rustix::process::setrlimit(rustix::process::Resource::Data, limit) {
        eprintln!("{COMPILE_FLAG}: cannot bound the compile's memory: {e}");
        return 1;
    }
    let mut component = Vec::new();
    if let Err(e) = std::io::stdin()
        .take(MAX_COMPONENT as u64 + 1)
        .read_to_end(&mut component)
    {
        eprintln!("{COMPILE_FLAG}: reading the component: {e}");
        return 1;
    }
    let config = MoatConfig {
        cache: CacheDir::At(PathBuf::from(dir)),
        max_cache_bytes: max_bytes,
        ..MoatConfig::default()
    };
    let moat = match Moat::new(&config) {
        Ok(moat) => moat,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    if let Some(refused) = moat.cache_refused() {
        eprintln!("the cache directory is not used: {refused}");
        return 1;
    }
    if let Err(e) = moat.load_bytes(&component, Path::new("component")) {
        eprintln!("{e}");
        return 1;
    }
    // Compiled but not kept (a full disk, say): the container compiles it.
    match moat.cache_use() {
        Some(used) if used.hits + used.misses > 0 => 0,
        _ => {
            eprintln!("the code was not kept in the cache");
            1
        }
    }
}

/// Gives the container of the bundle at `bundle` the cache at `dir`,
/// read-only, at [`MOUNT`]: a bind mount added to its spec before the
/// container is created.
///
/// # Errors
/// [`Uncached::Spec`] when the spec cannot be read or written.
pub fn mount_into(bundle: &Path, dir: &Path) -> Result<(), Uncached> {
    crate::spec_mount::bind(bundle, dir, MOUNT, false).map_err(Uncached::Spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shim's reaper takes every child that ends; a compiling process
    /// it reaped first still has its status, from the reaper's report.
    #[test]
    fn a_compile_the_reaper_took_first_still_has_its_status() {
        let reaped = monitor_subscribe(Topic::Pid).unwrap();
        let mut child = std::process::Command::new("sh")
            .args(["-c", "exit 3"])
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        // The reaper's part: it waits first, then reports.
        let status = rustix::process::waitpid(
            rustix::process::Pid::from_raw(pid),
            rustix::process::WaitOptions::empty(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(status.1.exit_status(), Some(3));
        containerd_shim::monitor::monitor_notify_by_pid(pid, 3).unwrap();
        assert_eq!(exit_code(&mut child, &reaped).unwrap(), 3);
        // And a child waited for as usual.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "exit 4"])
            .spawn()
            .unwrap();
        assert_eq!(exit_code(&mut child, &reaped).unwrap(), 4);
    }

    #[test]
    fn the_node_settings_are_read_strictly() {
        assert_eq!(NodeSettings::parse("").unwrap(), NodeSettings::default());
        // Issue 56: observe mode is the node's to allow, by namespace.
        let observe = NodeSettings::parse("observe-namespaces = [\"agents-dev\", \"ci\"]").unwrap();
        assert!(observe.allows_observe(Some("ci")));
        assert!(!observe.allows_observe(Some("default")));
        assert!(!observe.allows_observe(None));
        assert!(!NodeSettings::default().allows_observe(Some("ci")));
        let set =
            NodeSettings::parse("cache-dir = \"/srv/moat-cache\"\nmax-cache-size = \"512MiB\"\n")
                .unwrap();
        assert_eq!(set.cache_dir.as_deref(), Some(Path::new("/srv/moat-cache")));
        assert_eq!(set.max_cache_size, 512 << 20);
        assert_eq!(
            NodeSettings::parse("compile-cpus = 3")
                .unwrap()
                .compile_cpus,
            3
        );
        assert_eq!(
            NodeSettings::parse("cache-dir = \"off\"")
                .unwrap()
                .cache_dir,
            None
        );
        // Issue 58: each container's figures, where and how often.
        let figures =
            NodeSettings::parse("figures-dir = \"/srv/figures\"\nfigures-interval = \"30s\"")
                .unwrap();
        assert_eq!(
            figures.figures_dir.as_deref(),
            Some(Path::new("/srv/figures"))
        );
        assert_eq!(figures.figures_interval, std::time::Duration::from_secs(30));
        assert_eq!(
            NodeSettings::parse("figures-dir = \"off\"")
                .unwrap()
                .figures_dir,
            None
        );
        assert_eq!(
            NodeSettings::default().figures_dir.as_deref(),
            Some(Path::new("/run/moat/figures"))
        );
        for (text, says) in [
            ("figures-dir = \"figures\"", "not an absolute path"),
            ("figures-interval = \"0s\"", "1s or more"),
            ("figures-interval = \"100ms\"", "1s or more"),
            ("figures-interval = 10", "a duration"),
            ("cache_dir = \"/x\"", "`cache_dir` is not a setting"),
            ("cache-dir = \"relative\"", "not an absolute path"),
            ("cache-dir = 3", "a path"),
            ("max-cache-size = \"2GB\"", "max-cache-size"),
            ("max-cache-size = 5", "a size"),
            ("compile-cpus = 0", "1 or more"),
            ("compile-cpus = \"2\"", "a whole number of CPUs"),
            ("cache-dir = ", "TOML"),
            ("observe-namespaces = \"dev\"", "a list of namespaces"),
            (
                "observe-namespaces = [\"Dev\"]",
                "not a Kubernetes namespace's name",
            ),
            (
                "observe-namespaces = [\"-dev\"]",
                "not a Kubernetes namespace's name",
            ),
            ("observe-namespaces = [3]", "not a namespace's name"),
        ] {
            let error = NodeSettings::parse(text).unwrap_err().to_string();
            assert!(
                error.contains(says) || matches!(says, "TOML"),
                "{text}: {error}"
            );
        }
    }

    #[test]
    fn a_note_of_a_compiled_component_holds_until_entries_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let exe = std::env::current_exe().unwrap();
        let marker = known_marker(dir.path(), &exe, b"component").unwrap();
        assert_ne!(marker, known_marker(dir.path(), &exe, b"another").unwrap());
        assert!(!is_current(dir.path(), &marker), "not noted yet");
        std::fs::create_dir(dir.path().join(KNOWN)).unwrap();
        std::fs::write(&marker, b"").unwrap();
        assert!(is_current(dir.path(), &marker));
        // The note moat_host::last_eviction reads (the cache's own test
        // makes it by evicting).
        let evicted = std::fs::File::create(dir.path().join("evicted")).unwrap();
        evicted
            .set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(1))
            .unwrap();
        assert!(!is_current(dir.path(), &marker), "entries went since");
    }

    #[test]
    fn a_component_is_read_inside_its_root_whatever_its_symlinks_say() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"node file").unwrap();
        std::fs::write(root.path().join("app.wasm"), b"\0asm").unwrap();
        // An absolute link resolves inside the root, as in the container.
        std::os::unix::fs::symlink("/app.wasm", root.path().join("abs")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), root.path().join("escape"))
            .unwrap();
        std::os::unix::fs::symlink("../../../../..", root.path().join("up")).unwrap();
        assert_eq!(read_in_root(root.path(), "/app.wasm").unwrap(), b"\0asm");
        assert_eq!(read_in_root(root.path(), "/abs").unwrap(), b"\0asm");
        // The link to the node's file is read as the container's own path,
        // which does not exist.
        assert!(matches!(
            read_in_root(root.path(), "/escape"),
            Err(Uncached::Component { .. })
        ));
        assert!(read_in_root(root.path(), "/up/etc/passwd").is_err());
        std::fs::create_dir(root.path().join("dir")).unwrap();
        assert!(matches!(
            read_in_root(root.path(), "/dir"),
            Err(Uncached::NotAFile(_))
        ));
    }
}
