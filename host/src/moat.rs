//! [`Moat`]: the engine that compiles guests ([`Moat::new`],
//! [`Moat::load`]) and runs them ([`Moat::run`]), each run in a store of
//! its own ([`RunState`]) with its policy, its bounds and its network.

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::p2::pipe::MemoryInputPipe;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use crate::bounds::{Alarm, TimeLimitReached, deadline_callback};
use crate::cache::{CacheRefused, CodeCache, ComponentDigest};
use crate::engines::{self, Linked, Parts, Support};
use crate::error::MoatError;
use crate::kit::{self, MoatCtx};
use crate::net::Notices;
use crate::options::{Exit, Input, InstancePool, MoatConfig, NoticesTo, Output, RunOptions};
use crate::preopen;
use crate::run_state::RunState;
use crate::start;
use crate::ticker::EpochTicker;
use crate::trusted::{Kept, Trusted};

/// The wasi:http handler among a component's `exports`, if any.
fn handler_among(exports: &[String]) -> Option<String> {
    exports
        .iter()
        .find(|name| {
            name.starts_with(engines::INCOMING_HANDLER)
                || name.starts_with(engines::SERVICE_HANDLER)
        })
        .cloned()
}

/// What the compiled-code cache did for one [`Moat`] ([`Moat::cache_use`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheUse {
    /// Where compiled code is kept.
    pub directory: std::path::PathBuf,
    /// Components whose compiled code was found there.
    pub hits: usize,
    /// Code compiled and then written there.
    pub misses: usize,
}

/// A compiled guest, ready to run any number of times.
#[derive(Clone)]
pub struct Guest {
    pub(crate) component: Component,
    /// The guest exports the asynchronous `wasi:cli/run@0.3.0` (moat's SDK
    /// does); otherwise it is a classic `wasi:cli/run@0.2.0` command.
    pub(crate) async_run: bool,
    /// The engine it was compiled for.
    pub(crate) support: Support,
    /// What its linker holds.
    pub(crate) parts: Parts,
    /// The file it was loaded from, or the name given with its bytes.
    pub(crate) name: Arc<Path>,
    /// Its file's name and the SHA-256 of the bytes compiled, when loaded
    /// from a file ([`Moat::load`]): what a reload's record names.
    pub(crate) identity: Option<crate::audit::GuestIdentity>,
}

impl Guest {
    /// Whether it is a wasi:http handler (it exports 0.2's
    /// `wasi:http/incoming-handler` or 0.3's `wasi:http/handler`), which
    /// `moat serve` serves.
    pub fn is_http_handler(&self) -> bool {
        self.http_handler().is_some()
    }

    /// The wasi:http handler it exports (0.2's `incoming-handler` or 0.3's
    /// `handler`, with its version), if it is one.
    pub fn http_handler(&self) -> Option<String> {
        handler_among(&self.exports())
    }

    /// The names the component exports.
    pub fn exports(&self) -> Vec<String> {
        self.component
            .component_type()
            .exports(self.component.engine())
            .map(|(name, _)| name.to_owned())
            .collect()
    }

    /// Whether it runs on the engine with the component model's
    /// concurrency support. Every guest does, but a wasi:http 0.2 proxy
    /// that imports only WASI 0.2: that one gets an engine without it,
    /// whose calls in and out of the guest cost less (`moat serve` makes
    /// an instance per request), with the same grants and bounds.
    pub fn uses_concurrency(&self) -> bool {
        self.support == Support::Concurrent
    }

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
    /// The engine of every guest but plain wasi:http 0.2 proxies.
    concurrent: Linked,
    /// The engine of plain wasi:http 0.2 proxies ([`crate::engines`]),
    /// made when the first one is loaded; `None` if it could not be made
    /// (they then get the concurrent engine).
    plain: OnceLock<Option<Linked>>,
    /// What both engines are made from.
    base: wasmtime::Config,
    /// The compiled-code cache, if on and its directory passed
    /// ([`crate::cache`]).
    cache: Option<CodeCache>,
    /// Why the cache asked for is not used, if it is not.
    cache_refused: Option<CacheRefused>,
    /// The cache directory asked for (used or not), which no guest of
    /// this `Moat`'s may be given.
    apart: Vec<Kept>,
    pool: Option<InstancePool>,
    linger: Duration,
    // Dropped last: stops the thread that advances the epoch.
    ticker: EpochTicker,
}

impl Moat {
    /// Sets up the engine, the compiled-code cache and the linker. A
    /// cache directory that is not this user's alone is not used (one
    /// warning says why, and [`Moat::cache_refused`] tells it): every load
    /// compiles.
    ///
    /// # Errors
    /// [`MoatError::Engine`] if wasmtime refuses the configuration.
    pub fn new(config: &MoatConfig) -> Result<Moat, MoatError> {
        let base = wasmtime::Config::new();
        let (mut cache, mut cache_refused, mut apart) = (None, None, Vec::new());
        if let Some(dir) = config.cache.resolve() {
            match CodeCache::open(&dir, config.max_cache_bytes) {
                Ok(opened) => {
                    apart.push(Kept::new(opened.directory(), Trusted::Cache));
                    cache = Some(opened);
                }
                Err(refused) => {
                    tracing::warn!(
                        "the compiled-code cache {} is not used: {refused}; every load compiles",
                        dir.display()
                    );
                    cache_refused = Some(refused);
                }
            }
            apart.push(Kept::new(dir, Trusted::Cache));
        }
        let concurrent =
            Linked::concurrent(&base, config.instance_pool).map_err(MoatError::Engine)?;
        let ticker =
            EpochTicker::for_engine(&concurrent.engine).map_err(|source| MoatError::Thread {
                what: "epoch",
                source,
            })?;
        Ok(Moat {
            concurrent,
            plain: OnceLock::new(),
            base,
            cache,
            cache_refused,
            apart,
            pool: config.instance_pool,
            linger: config.linger,
            ticker,
        })
    }

    /// Compiles the component at `path` (or takes it from the cache).
    ///
    /// # Errors
    /// [`MoatError::Read`] or [`MoatError::Compile`].
    pub fn load(&self, path: impl AsRef<Path>) -> Result<Guest, MoatError> {
        let path = path.as_ref();
        let bytes = crate::trusted::read(path, Trusted::Component).map_err(MoatError::Read)?;
        // One pass over the bytes names the component on the trail and in
        // the cache.
        let digest = ComponentDigest::of(&bytes);
        let mut guest = self.load_digested(&bytes, &digest, path)?;
        guest.identity = Some(crate::audit::GuestIdentity::with_digest(path, digest.hex()));
        Ok(guest)
    }

    /// Compiles a component from its bytes; `name` appears in errors.
    ///
    /// # Errors
    /// [`MoatError::Compile`]; [`MoatError::MissingImports`] for a
    /// component that imports what moat does not serve (every such import
    /// named).
    pub fn load_bytes(&self, bytes: &[u8], name: impl AsRef<Path>) -> Result<Guest, MoatError> {
        self.load_digested(bytes, &ComponentDigest::of(bytes), name.as_ref())
    }

    /// [`Moat::load_bytes`], with the digest of `bytes` taken.
    fn load_digested(
        &self,
        bytes: &[u8],
        digest: &ComponentDigest,
        name: &Path,
    ) -> Result<Guest, MoatError> {
        if let Some(starts) = crate::not_wasm::describe(bytes) {
            return Err(MoatError::NotWasm {
                path: name.to_owned(),
                starts,
            });
        }
        // A server's instances each have at most the pool's memory: one
        // that starts with more could never run, so it is refused before
        // the compile, naming the bound.
        if let Some(pool) = &self.pool
            && let Some(needs) = crate::start_memory::largest_initial_memory(bytes)
            && needs > pool.max_memory
        {
            return Err(MoatError::MemoryBelowStart {
                path: name.to_owned(),
                needs,
                max: pool.max_memory,
            });
        }
        if engines::is_plain_proxy(bytes)
            && let Some(plain) = self.plain()
        {
            match self.compile(&plain.engine, bytes, digest) {
                Ok(component) => {
                    let parts = Parts::imported_by(&component);
                    match plain
                        .linker(parts)
                        .and_then(|linker| linker.instantiate_pre(&component))
                    {
                        Ok(_) => {
                            return Ok(Guest {
                                async_run: kit::exports_async_run(&component, &plain.engine),
                                parts,
                                component,
                                support: Support::Plain,
                                name: name.into(),
                                identity: None,
                            });
                        }
                        Err(e) => {
                            tracing::debug!(path = %name.display(), error = %e, "a wasi:http 0.2 proxy that links only with concurrency support");
                        }
                    }
                }
                Err(e) => {
                    tracing::debug!(path = %name.display(), error = %e, "a wasi:http 0.2 proxy that needs concurrency support");
                }
            }
        }
        let engine = &self.concurrent.engine;
        let component =
            self.compile(engine, bytes, digest)
                .map_err(|source| MoatError::Compile {
                    path: name.to_owned(),
                    source,
                })?;
        let parts = Parts::imported_by(&component);
        let linker = self.concurrent.linker(parts).map_err(MoatError::Engine)?;
        if let Err(source) = linker.instantiate_pre(&component) {
            let missing = start::missing_imports(&component, engine);
            if !missing.0.is_empty() {
                return Err(MoatError::MissingImports {
                    path: name.to_owned(),
                    missing,
                    source,
                });
            }
        }
        Ok(Guest {
            async_run: kit::exports_async_run(&component, engine),
            parts,
            component,
            support: Support::Concurrent,
            name: name.into(),
            identity: None,
        })
    }

    /// The compiled-code cache's directory, and how many loads of this
    /// `Moat` it answered (hits) and how many it had to compile and then
    /// kept (misses); `None` when the cache is off.
    pub fn cache_use(&self) -> Option<CacheUse> {
        let cache = self.cache.as_ref()?;
        Some(CacheUse {
            directory: cache.directory().to_owned(),
            hits: cache.hits(),
            misses: cache.misses(),
        })
    }

    /// Why the cache directory asked for is not used (another user owns
    /// it or may write it; its key is not private), if it is not.
    pub fn cache_refused(&self) -> Option<&CacheRefused> {
        self.cache_refused.as_ref()
    }

    /// `bytes` compiled for `engine`, through the cache when it is on.
    fn compile(
        &self,
        engine: &Engine,
        bytes: &[u8],
        digest: &ComponentDigest,
    ) -> wasmtime::Result<Component> {
        match &self.cache {
            Some(cache) => cache.component(engine, bytes, digest),
            None => Component::from_binary(engine, bytes),
        }
    }

    /// What no directory of `guest`'s may reach (see
    /// [`crate::preopen::check_against`]): the caches and its own file (a
    /// reload reads the same path).
    pub(crate) fn apart_from(&self, guest: &Guest) -> Vec<Kept> {
        let mut apart = self.apart.clone();
        apart.push(Kept::new(guest.name.to_path_buf(), Trusted::Component));
        apart
    }

    /// The plain engine, made on first use.
    fn plain(&self) -> Option<&Linked> {
        self.plain
            .get_or_init(|| match Linked::plain(&self.base, self.pool) {
                Ok(plain) => Some(plain),
                Err(e) => {
                    tracing::warn!("no engine without concurrency support, wasi:http 0.2 proxies get the other: {e:#}");
                    None
                }
            })
            .as_ref()
    }

    /// The engine `guest` was compiled for, and its linker.
    ///
    /// # Errors
    /// [`MoatError::Engine`] for a guest of the plain engine that another
    /// [`Moat`] loaded, when this one has none.
    pub(crate) fn linked(&self, guest: &Guest) -> Result<(&Engine, &Linker<RunState>), MoatError> {
        let linked = match guest.support {
            Support::Concurrent => &self.concurrent,
            Support::Plain => self.plain().ok_or_else(|| {
                MoatError::Engine(wasmtime::format_err!(
                    "the guest was compiled for an engine without concurrency support, which this host does not have"
                ))
            })?,
        };
        let linker = linked.linker(guest.parts).map_err(MoatError::Engine)?;
        Ok((&linked.engine, linker))
    }

    pub(crate) fn linger(&self) -> Duration {
        self.linger
    }

    pub(crate) fn ticker(&self) -> &EpochTicker {
        &self.ticker
    }
}

/// Where a run's denial lines go: what the options say
/// ([`RunOptions::notices`]), `tracing` by default, or the guest's stderr,
/// prefixed with `moat: NAME:` (the program's file name, from its first
/// argument).
pub(crate) fn notices(options: &RunOptions) -> Notices {
    match &options.notices {
        NoticesTo::Tracing => return Notices::tracing(),
        NoticesTo::Given(notices) => return notices.clone(),
        NoticesTo::GuestStderr => {}
    }
    let name = options
        .args
        .first()
        .map(|arg0| {
            std::path::Path::new(arg0)
                .file_stem()
                .map_or_else(|| arg0.clone(), |s| s.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "guest".to_owned());
    match &options.stderr {
        Output::Inherit => Notices::new(move |line| eprintln!("moat: {name}: {line}")),
        Output::Capture(captured) => {
            let pipe = captured.0.clone();
            Notices::new(move |line| {
                use wasmtime_wasi::p2::OutputStream;
                let mut pipe = pipe.clone();
                // A full capture drops the line, as it drops the guest's.
                let _ = pipe.write(format!("moat: {name}: {line}\n").into());
            })
        }
        Output::Discard => Notices::default(),
    }
}

/// The guest's WASI context as `options` describe it: arguments,
/// environment, stdio and directories (its sockets are set up by
/// [`kit::MoatCtxBuilder::build`]). No directory may reach `apart` (the
/// caches and the component), the files `options` keep or the trail's file.
pub(crate) fn wasi_ctx(options: &RunOptions, apart: &[Kept]) -> Result<WasiCtxBuilder, MoatError> {
    let mut wasi = WasiCtxBuilder::new();
    wasi.args(&options.args);
    wasi.envs(&options.env);
    match &options.stdin {
        Input::Inherit => {
            wasi.inherit_stdin();
        }
        Input::Bytes(bytes) => {
            wasi.stdin(MemoryInputPipe::new(bytes.clone()));
        }
        Input::Empty => {
            wasi.stdin(MemoryInputPipe::new(Vec::new()));
        }
    }
    match &options.stdout {
        Output::Inherit => wasi.inherit_stdout(),
        Output::Capture(captured) => wasi.stdout(captured.0.clone()),
        Output::Discard => wasi.stdout(std::io::empty()),
    };
    match &options.stderr {
        Output::Inherit => wasi.inherit_stderr(),
        Output::Capture(captured) => wasi.stderr(captured.0.clone()),
        Output::Discard => wasi.stderr(std::io::empty()),
    };
    // Gathered only for a run that gives directories (`moat serve` makes
    // a context per request).
    let mut kept: Vec<Kept> = Vec::new();
    if !options.dirs.is_empty() {
        kept.extend(apart.iter().chain(&options.kept).cloned());
        kept.extend(
            options
                .net
                .audit
                .file()
                .map(|file| Kept::new(file, Trusted::Trail)),
        );
    }
    for dir in &options.dirs {
        let checked = preopen::check_against(&dir.host, dir.writable, &kept).map_err(|source| {
            MoatError::PreopenRefused {
                host: dir.host.clone(),
                guest: dir.guest.clone(),
                source,
            }
        })?;
        let perms = if dir.writable {
            FsPerms::ReadWrite
        } else {
            FsPerms::ReadOnly
        };
        tracing::debug!(host = %checked.display(), guest = %dir.guest, ?perms, "directory given");
        wasi.preopened_dir(&checked, &dir.guest, perms)
            .map_err(|source| MoatError::Preopen {
                host: dir.host.clone(),
                guest: dir.guest.clone(),
                source,
            })?;
    }
    Ok(wasi)
}

impl Moat {
    /// Runs `guest` to completion under `options`.
    ///
    /// Call it on a tokio runtime; a current-thread runtime keeps the
    /// store and its sockets on one thread, which measured fastest. When the
    /// guest is done, its sockets get the configured linger to write out
    /// what they still hold; on return every socket and listener of the run
    /// is closed.
    ///
    /// # Errors
    /// [`MoatError::NoEntryPoint`] if the guest exports no `wasi:cli/run`
    /// (an HTTP handler without one: see [`crate::serve`]); [`MoatError::Instantiate`]
    /// if it cannot start otherwise; [`MoatError::Preopen`] for a directory
    /// that cannot be given; [`MoatError::Trap`] if it traps. A guest that
    /// exits with a code is an `Ok(Exit)`.
    pub async fn run(&self, guest: &Guest, options: RunOptions) -> Result<Exit, MoatError> {
        let exports = guest.exports();
        let http_handler = handler_among(&exports);
        if !exports.iter().any(|name| start::is_run(name)) {
            return Err(MoatError::NoEntryPoint {
                path: guest.name.to_path_buf(),
                reason: start::NoEntryPoint {
                    http_handler,
                    exports,
                },
            });
        }
        let builder = MoatCtx::configured(options.net.clone())
            .notices(notices(&options))
            .linger(self.linger());
        let (engine, linker) = self.linked(guest)?;
        let mut wasi = wasi_ctx(&options, &self.apart_from(guest))?;
        let moat = builder.build(&self.ticker, &mut wasi);
        let finish = moat.finish();
        let mut store = Store::new(
            engine,
            RunState {
                wasi: wasi.build(),
                moat,
                table: ResourceTable::new(),
            },
        );
        kit::prepare(&mut store);
        let ended = match options.net.limits.timeout {
            None => call_run(&mut store, guest, linker).await,
            Some(limit) => {
                let mut callback = deadline_callback(Instant::now() + limit, limit);
                store.epoch_deadline_callback(move |_| callback());
                let _alarm =
                    Alarm::set(engine.clone(), limit).map_err(|source| MoatError::Thread {
                        what: "timeout",
                        source,
                    })?;
                match tokio::time::timeout(limit, call_run(&mut store, guest, linker)).await {
                    Ok(ended) => ended,
                    Err(_) => {
                        tracing::debug!(target: "moat::net", ?limit, "time limit reached: stopping the waiting guest");
                        Err(MoatError::TimeLimit(TimeLimitReached { limit }))
                    }
                }
            }
        };
        store.data().moat.http.guest_gone();
        drop(store);
        finish.await;
        ended
    }
}

async fn call_run(
    store: &mut Store<RunState>,
    guest: &Guest,
    linker: &Linker<RunState>,
) -> Result<Exit, MoatError> {
    kit::run_command(store, &guest.component, linker, guest.async_run)
        .await
        .map(Exit)
        .map_err(MoatError::from)
}
