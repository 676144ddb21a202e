//! The embedding entry point: an engine that loads and runs moat guests.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::{Component, Linker};
use wasmtime::{Cache, CacheConfig, Engine};

use crate::error::MoatError;
use crate::net::PendingWrites;
use crate::state::RunState;
use crate::ticker::EpochTicker;

/// How long a finished run waits for its sockets to write out the bytes
/// they still hold before closing them anyway. A guest that wrote a reply
/// and exited expects it delivered, as a process's kernel buffer would be;
/// a peer that stopped reading must not hold the host forever.
pub const DEFAULT_LINGER: Duration = Duration::from_secs(10);

/// Where compiled code is cached.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CacheDir {
    /// `$XDG_CACHE_HOME/moat`, else `$HOME/.cache/moat`; no cache if
    /// neither is set.
    #[default]
    Default,
    /// This directory (created if missing).
    At(PathBuf),
    /// No cache: every load compiles.
    Off,
}

impl CacheDir {
    fn resolve(&self) -> Option<PathBuf> {
        match self {
            CacheDir::Off => None,
            CacheDir::At(dir) => Some(dir.clone()),
            CacheDir::Default => std::env::var_os("XDG_CACHE_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .map(|base| base.join("moat")),
        }
    }
}

/// Settings of a [`Moat`] (named so as not to shadow `wasmtime::Config`).
#[derive(Debug, Clone)]
pub struct MoatConfig {
    /// Where compiled code is cached.
    pub cache: CacheDir,
    /// How long a finished run lets its sockets flush (see [`DEFAULT_LINGER`]).
    pub linger: Duration,
}

impl Default for MoatConfig {
    fn default() -> MoatConfig {
        MoatConfig {
            cache: CacheDir::Default,
            linger: DEFAULT_LINGER,
        }
    }
}

/// A compiled guest, ready to run any number of times.
#[derive(Clone)]
pub struct Guest {
    pub(crate) component: Component,
    /// The guest exports the asynchronous `wasi:cli/run@0.3.0` (moat's SDK
    /// does); otherwise it is a classic `wasi:cli/run@0.2.0` command.
    pub(crate) async_run: bool,
}

impl Guest {
    /// Whether the guest exports `wasi:cli/run@0.3.0`, the entry point that
    /// can await moat's asynchronous socket calls.
    pub fn has_async_run(&self) -> bool {
        self.async_run
    }
}

/// A wasm engine set up for moat guests: compile once, run many.
///
/// ```no_run
/// use moat_host::{Moat, MoatConfig, RunOptions};
/// use moat_host::policy::Policy;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let moat = Moat::new(&MoatConfig::default())?;
/// let guest = moat.load("echo-server.wasm")?;
/// let policy = Policy::new().allow_listen("127.0.0.1:7000")?;
/// let exit = moat
///     .run(&guest, RunOptions::new(policy).arg("echo-server").arg("127.0.0.1:7000"))
///     .await?;
/// std::process::exit(exit.code());
/// # }
/// ```
pub struct Moat {
    engine: Engine,
    linker: Linker<RunState>,
    pending: Arc<PendingWrites>,
    linger: Duration,
    // Dropped last: stops the thread that advances the epoch.
    _ticker: EpochTicker,
}

impl Moat {
    /// Sets up the engine, the compiled-code cache and the linker.
    ///
    /// # Errors
    /// [`MoatError::Engine`] if wasmtime refuses the configuration.
    pub fn new(config: &MoatConfig) -> Result<Moat, MoatError> {
        let mut wasm = wasmtime::Config::new();
        wasm.wasm_component_model_async(true);
        // Lets a computing guest yield so socket drains can run; see `ticker`.
        wasm.epoch_interruption(true);
        if let Some(dir) = config.cache.resolve() {
            let mut cache = CacheConfig::new();
            cache.with_directory(dir);
            match Cache::new(cache) {
                Ok(cache) => {
                    wasm.cache(Some(cache));
                }
                Err(e) => {
                    tracing::warn!("compiled-code cache disabled: {e:#}");
                }
            }
        }
        let engine = Engine::new(&wasm).map_err(MoatError::Engine)?;
        let linker = crate::state::linker(&engine).map_err(MoatError::Engine)?;
        let pending = PendingWrites::new();
        let ticker =
            EpochTicker::start(engine.clone(), Arc::clone(&pending)).map_err(|source| {
                MoatError::Thread {
                    what: "epoch",
                    source,
                }
            })?;
        Ok(Moat {
            engine,
            linker,
            pending,
            linger: config.linger,
            _ticker: ticker,
        })
    }

    /// Compiles the component at `path` (or takes it from the cache).
    ///
    /// # Errors
    /// [`MoatError::Read`] or [`MoatError::Compile`].
    pub fn load(&self, path: impl AsRef<Path>) -> Result<Guest, MoatError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| MoatError::Read {
            path: path.to_owned(),
            source,
        })?;
        self.load_bytes(&bytes, path)
    }

    /// Compiles a component from its bytes; `name` appears in errors.
    ///
    /// # Errors
    /// [`MoatError::Compile`].
    pub fn load_bytes(&self, bytes: &[u8], name: impl AsRef<Path>) -> Result<Guest, MoatError> {
        let component =
            Component::from_binary(&self.engine, bytes).map_err(|source| MoatError::Compile {
                path: name.as_ref().to_owned(),
                source,
            })?;
        let async_run = component
            .component_type()
            .exports(&self.engine)
            .any(|(name, _)| name == "wasi:cli/run@0.3.0");
        Ok(Guest {
            component,
            async_run,
        })
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    pub(crate) fn linker(&self) -> &Linker<RunState> {
        &self.linker
    }

    pub(crate) fn pending_writes(&self) -> &Arc<PendingWrites> {
        &self.pending
    }

    pub(crate) fn linger(&self) -> Duration {
        self.linger
    }
}
