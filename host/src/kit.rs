//! The embedding kit: moat's wasi:sockets under the policy, moat:net, the
//! run's bounds, the epoch ticker and a clean finish, for a wasmtime
//! engine, `Linker` and `Store` of an embedder's own. Three steps, as
//! wasmtime-wasi's (the builder has a one-call form, [`MoatCtx::new`]):
//!
//! 1. a builder: [`MoatCtx::builder`] makes the run's context and sets the
//!    embedder's `WasiCtxBuilder` up to route its sockets through moat;
//! 2. a view trait: [`MoatView`], beside `wasmtime_wasi::WasiView`, for the
//!    store's data;
//! 3. [`add_to_linker`]: WASI 0.2 and 0.3 with moat's sockets and name
//!    lookups, wasi:http 0.2 and 0.3 with moat's HTTP client, and
//!    moat:net.
//!
//! Before them, once: [`engine`], an engine and its
//! [`EpochTicker`]; after them, per store: [`run_to_end`]. Four calls in
//! all. Who drives the store itself has the parts: [`configure`] an
//! engine's `Config` of one's own, [`prepare`] a store, [`call_run`]
//! (which picks `wasi:cli/run` 0.3 or 0.2), and [`MoatCtx::finish`] once
//! the store is dropped. [`crate::Moat::run`] is built on this kit.
//! [`CompileCache`] loads components through moat's compiled-code cache
//! instead of compiling them every time.
//!
//! Denial lines go to `tracing` (target `moat::notice`, debug) unless
//! [`MoatCtxBuilder::notices`] gives a callback; denials and bounds name
//! the embedding API (`Policy::allow_connect`, `Limits::max_sockets`)
//! unless the policy is spelled otherwise.
//!
//! ```no_run
//! use moat_host::kit::{self, MoatCtx, MoatCtxView, MoatView};
//! use moat_host::policy::Policy;
//! use wasmtime::component::{Component, Linker, ResourceTable};
//! use wasmtime::Store;
//! use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
//!
//! struct Host {
//!     wasi: WasiCtx,
//!     moat: MoatCtx,
//!     table: ResourceTable,
//! }
//!
//! impl WasiView for Host {
//!     fn ctx(&mut self) -> WasiCtxView<'_> {
//!         WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
//!     }
//! }
//!
//! impl MoatView for Host {
//!     fn moat(&mut self) -> MoatCtxView<'_> {
//!         MoatCtxView { ctx: &mut self.moat, table: &mut self.table }
//!     }
//! }
//!
//! # async fn demo() -> wasmtime::Result<()> {
//! let (engine, ticker) = kit::engine()?;
//! let mut linker = Linker::<Host>::new(&engine);
//! kit::add_to_linker(&mut linker)?;
//! let component = Component::from_file(&engine, "std-fetch.wasm")?;
//!
//! let mut wasi = WasiCtxBuilder::new();
//! wasi.args(&["std-fetch", "example.com", "/"]).inherit_stdout();
//! let policy = Policy::new().allow_connect("example.com:80")?;
//! let moat = MoatCtx::new(policy, &ticker, &mut wasi);
//! let table = ResourceTable::new();
//! let store = Store::new(&engine, Host { wasi: wasi.build(), moat, table });
//! let status = kit::run_to_end(store, &component, &linker).await?;
//! println!("exit {status}");
//! # Ok(())
//! # }
//! ```

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Store};
use wasmtime_wasi::{I32Exit, WasiCtxBuilder, WasiView};

use crate::audit::Audit;
use crate::bindings::http::{self as wasi_http, HttpState, HttpView};
use crate::bindings::wasi_sockets::{self, WasiNet, WasiNetView};
use crate::bindings::{self, NetCtxView, NetView};
use crate::bounds::{Limiter, MemoryLimitReached, TimeLimitReached};
use crate::cache;
use crate::net::limits::DEFAULT_LINGER;
use crate::net::{Limits, Net, NetConfig, Notices, Resolver, TlsTrust};
use crate::ticker::EpochTicker;
use moat_policy::policy::Policy;

/// Sets what moat's guests need of an engine: the component model's async
/// (moat:net and WASI 0.3 are async) and epoch interruption (the ticker
/// makes a computing guest yield while its socket writes drain).
pub fn configure(config: &mut Config) -> &mut Config {
    config.wasm_component_model_async(true);
    config.epoch_interruption(true);
    config
}

/// An engine set up for moat's guests ([`configure`]d, wasmtime's other
/// defaults kept) and its epoch ticker: what every run on it shares.
///
/// # Errors
/// wasmtime's, if the engine cannot be made; the ticker's thread's.
pub fn engine() -> wasmtime::Result<(wasmtime::Engine, EpochTicker)> {
    let engine = wasmtime::Engine::new(configure(&mut Config::new()))?;
    let ticker = EpochTicker::for_engine(&engine).map_err(wasmtime::Error::new)?;
    Ok((engine, ticker))
}

/// Runs `component` in `store` to its end: [`prepare`]s the store, calls
/// its `wasi:cli/run` ([`call_run`]), then drops the store and awaits the
/// run's [`MoatCtx::finish`] (its sockets flush within the linger). The
/// exit status, as `call_run`'s.
///
/// # Errors
/// [`RunError`].
pub async fn run_to_end<T: MoatView + 'static>(
    mut store: Store<T>,
    component: &Component,
    linker: &Linker<T>,
) -> Result<i32, RunError> {
    prepare(&mut store);
    let ran = call_run(&mut store, component, linker).await;
    let finish = MoatView::moat(store.data_mut()).ctx.finish();
    drop(store);
    finish.await;
    ran
}

/// One run's moat state: its network under the policy, its wasi:sockets
/// layer and its memory limiter.
pub struct MoatCtx {
    pub(crate) net: Net,
    pub(crate) wasi_net: WasiNet,
    pub(crate) limiter: Limiter,
    pub(crate) http: HttpState,
    linger: Duration,
}

/// Makes a [`MoatCtx`]: the policy, then whatever the run sets besides
/// the defaults.
#[must_use]
pub struct MoatCtxBuilder {
    net: NetConfig,
    notices: Option<Notices>,
    linger: Duration,
}

impl MoatCtx {
    /// The context of a run under `policy`, everything else at its
    /// default, on `ticker`'s engine: [`builder`](Self::builder) and
    /// [`build`](MoatCtxBuilder::build) in one.
    pub fn new(policy: Policy, ticker: &EpochTicker, wasi: &mut WasiCtxBuilder) -> MoatCtx {
        MoatCtx::builder(policy).build(ticker, wasi)
    }

    /// A builder for a run under `policy`, every bound at its default.
    pub fn builder(policy: Policy) -> MoatCtxBuilder {
        MoatCtx::configured(NetConfig::new(policy))
    }

    /// A builder for a run whose network `net` describes (what
    /// `RunOptions` holds too).
    pub fn configured(net: NetConfig) -> MoatCtxBuilder {
        MoatCtxBuilder {
            net,
            notices: None,
            linger: DEFAULT_LINGER,
        }
    }

    /// The run's network.
    pub fn net(&self) -> &Net {
        &self.net
    }

    /// Ends the run's network, once the store is dropped: its sockets get
    /// the linger to write out what they still hold, then every socket and
    /// host task of the run is closed.
    pub fn finish(&self) -> impl Future<Output = ()> + Send + 'static {
        let net = self.net.clone();
        let linger = self.linger;
        async move { net.finish(linger).await }
    }
}

impl MoatCtxBuilder {
    /// Every bound of the run: sockets, lookups, host memory, the
    /// guest's memory (which [`max_memory`](Self::max_memory) sets alone).
    pub fn limits(mut self, limits: Limits) -> MoatCtxBuilder {
        self.net.limits = limits;
        self
    }

    /// Resolves names with `resolver` (for tests, or a resolver of your
    /// own); the deny lists judge its answers too.
    pub fn resolver(mut self, resolver: Arc<dyn Resolver>) -> MoatCtxBuilder {
        self.net.resolver = Some(resolver);
        self
    }

    /// The roots the guest's TLS connections trust.
    pub fn tls_trust(mut self, trust: TlsTrust) -> MoatCtxBuilder {
        self.net.tls_trust = Some(trust);
        self
    }

    /// Where the run's denial lines go (default: `tracing`, target
    /// `moat::notice`, debug level; never straight to stderr).
    pub fn notices(mut self, notices: Notices) -> MoatCtxBuilder {
        self.notices = Some(notices);
        self
    }

    /// The guest's linear memory bound, in bytes.
    pub fn max_memory(mut self, bytes: u64) -> MoatCtxBuilder {
        self.net.limits.max_memory = bytes;
        self
    }

    /// Records every network decision of the run on `audit` (default:
    /// none). See [`crate::audit`].
    pub fn audit(mut self, audit: Audit) -> MoatCtxBuilder {
        self.net.audit = audit;
        self
    }

    /// How long [`MoatCtx::finish`] lets the sockets flush.
    pub fn linger(mut self, linger: Duration) -> MoatCtxBuilder {
        self.linger = linger;
        self
    }

    /// The context of one store on `ticker`'s engine; sets `wasi` up so
    /// that the guest's wasi:sockets calls are held to the policy and its
    /// name lookups go through moat.
    pub fn build(self, ticker: &EpochTicker, wasi: &mut WasiCtxBuilder) -> MoatCtx {
        let (net, notices, max_memory, linger) = self.into_net(ticker);
        MoatCtx::on_net(net, notices, max_memory, linger, wasi)
    }

    /// The run's network, and what each store on it needs besides
    /// (`moat serve` makes one network for all its requests' stores).
    pub(crate) fn into_net(self, ticker: &EpochTicker) -> (Net, Notices, u64, Duration) {
        let max_memory = self.net.limits.max_memory;
        let net = Net::build(self.net, Arc::clone(ticker.pending_writes()));
        let notices = self.notices.unwrap_or_else(Notices::tracing);
        (net, notices, max_memory, self.linger)
    }
}

impl MoatCtx {
    /// A store's context on `net`, which other stores may share: the
    /// sockets, connections and bounds are the network's, the memory
    /// limiter and the wasi:sockets and wasi:http state the store's own.
    pub(crate) fn on_net(
        net: Net,
        notices: Notices,
        max_memory: u64,
        linger: Duration,
        wasi: &mut WasiCtxBuilder,
    ) -> MoatCtx {
        let http = HttpState::new(&net, notices.clone());
        let wasi_net = WasiNet::new(&net, notices);
        wasi_net.configure(wasi);
        MoatCtx {
            net,
            wasi_net,
            http,
            limiter: Limiter::new(max_memory),
            linger,
        }
    }
}

/// A store's [`MoatCtx`] and its resource table.
pub struct MoatCtxView<'a> {
    /// The run's moat state.
    pub ctx: &'a mut MoatCtx,
    /// The table its sockets and listeners live in (the one
    /// `wasmtime_wasi::WasiView` gives).
    pub table: &'a mut ResourceTable,
}

/// The store data of a run with moat: implement it beside
/// `wasmtime_wasi::WasiView`.
pub trait MoatView: WasiView {
    /// The run's moat state and the store's resource table.
    fn moat(&mut self) -> MoatCtxView<'_>;
}

impl<T: MoatView> WasiNetView for T {
    fn wasi_net(&mut self) -> &mut WasiNet {
        let MoatCtxView { ctx, .. } = MoatView::moat(self);
        &mut ctx.wasi_net
    }
}

impl<T: MoatView> NetView for T {
    fn moat(&mut self) -> NetCtxView<'_> {
        let MoatCtxView { ctx, table } = MoatView::moat(self);
        NetCtxView {
            net: &ctx.net,
            table,
        }
    }
}

impl<T: MoatView> HttpView for T {
    fn http_view(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        let MoatCtxView { ctx, table } = MoatView::moat(self);
        ctx.http.view(table)
    }

    fn http_state(&mut self) -> &mut HttpState {
        let MoatCtxView { ctx, .. } = MoatView::moat(self);
        &mut ctx.http
    }

    fn http_parts(&mut self) -> (&mut HttpState, &mut ResourceTable) {
        let MoatCtxView { ctx, table } = MoatView::moat(self);
        (&mut ctx.http, table)
    }
}

/// Adds WASI 0.2 and 0.3, with wasi:sockets and name lookups under the
/// policy, wasi:http 0.2 and 0.3 with every request under the policy too,
/// and moat:net, to `linker`. Use it instead of wasmtime-wasi's and
/// wasmtime-wasi-http's `add_to_linker` functions.
///
/// # Errors
/// wasmtime's, if the linker already holds a conflicting definition.
pub fn add_to_linker<T: MoatView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    wasi_sockets::add_to_linker(linker)?;
    wasi_http::add_to_linker(linker)?;
    bindings::add_to_linker(linker)
}

/// Sets a store up for a run: the memory limiter, and a yield at every
/// epoch tick (ticks only come while a socket has bytes queued).
pub fn prepare<T: MoatView + 'static>(store: &mut Store<T>) {
    store.limiter(|data| {
        let MoatCtxView { ctx, .. } = MoatView::moat(data);
        &mut ctx.limiter
    });
    store.set_epoch_deadline(1);
    store.epoch_deadline_async_yield_and_update(1);
}

/// How a guest's run ended, other than with an exit status.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The component cannot be instantiated (a missing import).
    #[error("cannot start the guest: {0:#}")]
    Instantiate(#[source] wasmtime::Error),
    /// The guest reached its memory limit.
    #[error(transparent)]
    MemoryLimit(MemoryLimitReached),
    /// The guest ran past its time.
    #[error(transparent)]
    TimeLimit(TimeLimitReached),
    /// The guest trapped.
    #[error("the guest trapped: {0:?}")]
    Trap(#[source] wasmtime::Error),
}

/// Instantiates `component` and calls its `wasi:cli/run`: 0.3's (an SDK
/// guest, whose calls may await moat's) when it exports it, else 0.2's.
/// Returns the exit status: 0, 1 when `run` returns an error, or the code
/// the guest exited with.
///
/// # Errors
/// [`RunError`].
pub async fn call_run<T: MoatView + 'static>(
    store: &mut Store<T>,
    component: &Component,
    linker: &Linker<T>,
) -> Result<i32, RunError> {
    let async_run = exports_async_run(component, store.engine());
    run_command(store, component, linker, async_run).await
}

/// [`call_run`] for a component whose exports were read once, when it was
/// loaded ([`crate::Guest`]): `async_run` says it exports 0.3's run.
pub(crate) async fn run_command<T: MoatView + 'static>(
    store: &mut Store<T>,
    component: &Component,
    linker: &Linker<T>,
    async_run: bool,
) -> Result<i32, RunError> {
    let result = if async_run {
        let command =
            wasmtime_wasi::p3::bindings::Command::instantiate_async(&mut *store, component, linker)
                .await
                .map_err(RunError::Instantiate)?;
        store
            .run_concurrent(async move |access| command.wasi_cli_run().call_run(access).await)
            .await
            .and_then(|ran| ran)
    } else {
        let command =
            wasmtime_wasi::p2::bindings::Command::instantiate_async(&mut *store, component, linker)
                .await
                .map_err(RunError::Instantiate)?;
        command.wasi_cli_run().call_run(&mut *store).await
    };
    match result {
        Ok(Ok(())) => Ok(0),
        Ok(Err(())) => Ok(1),
        Err(e) => {
            if let Some(exit) = e.downcast_ref::<I32Exit>() {
                Ok(exit.0)
            } else if let Some(reached) = e.downcast_ref::<MemoryLimitReached>() {
                Err(RunError::MemoryLimit(reached.clone()))
            } else if let Some(reached) = e.downcast_ref::<TimeLimitReached>() {
                Err(RunError::TimeLimit(reached.clone()))
            } else {
                Err(RunError::Trap(e))
            }
        }
    }
}

/// Whether `component` exports `wasi:cli/run@0.3.0`.
pub fn exports_async_run(component: &Component, engine: &wasmtime::Engine) -> bool {
    component
        .component_type()
        .exports(engine)
        .any(|(name, _)| name == "wasi:cli/run@0.3.0")
}

/// The compiled-code cache for an engine of the embedder's own: a
/// component's native code kept on disk, so that its next load skips
/// Cranelift (a 12 MB JavaScript component compiles for seconds; a cached
/// load maps it in milliseconds). The same cache, with the same checks,
/// as `moat run`'s (see [`crate::CacheDir`]): a directory that is not the
/// user's alone is refused, and an entry is loaded only if it is
/// authenticated as this cache's own.
///
/// Never give a guest a directory that is, holds or lies inside the
/// cache: judge the directories you preopen with
/// [`crate::preopen::check_against`]`(dir, writable, &[Kept::new(cache.directory(), Trusted::Cache)])`
/// (with [`crate::trusted::Kept`] and [`crate::trusted::Trusted`]).
///
/// ```no_run
/// use moat_host::CacheDir;
/// use moat_host::kit::{self, CompileCache};
///
/// # fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let (engine, _ticker) = kit::engine()?;
/// let cache = CompileCache::open(&CacheDir::Default)?;
/// let bytes = std::fs::read("handler.wasm")?;
/// let component = match &cache {
///     Some(cache) => cache.component(&engine, &bytes)?,
///     None => wasmtime::component::Component::from_binary(&engine, &bytes)?,
/// };
/// # drop(component);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct CompileCache {
    cache: cache::CodeCache,
}

impl CompileCache {
    /// Opens the cache `dir` names, keeping at most
    /// [`crate::MAX_CACHE_BYTES`] of entries; `None` for
    /// [`CacheDir::Off`](crate::CacheDir::Off), or the default with
    /// neither `XDG_CACHE_HOME` nor `HOME` set.
    ///
    /// # Errors
    /// [`crate::CacheRefused`]: the directory is not this user's alone,
    /// or cannot be made or read.
    pub fn open(dir: &cache::CacheDir) -> Result<Option<CompileCache>, cache::CacheRefused> {
        dir.resolve()
            .map(|dir| CompileCache::at(&dir, cache::MAX_CACHE_BYTES))
            .transpose()
    }

    /// Opens the cache at `dir` (made, mode 0700, if missing), keeping at
    /// most `max_bytes` of entries.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn at(dir: &std::path::Path, max_bytes: u64) -> Result<CompileCache, cache::CacheRefused> {
        Ok(CompileCache {
            cache: cache::CodeCache::open(dir, max_bytes)?,
        })
    }

    /// The component in `bytes` for `engine`: loaded from the cache if an
    /// authenticated entry is there, else compiled and kept.
    ///
    /// # Errors
    /// wasmtime's, when the bytes do not compile. A cache that cannot be
    /// read or written only costs the compile.
    pub fn component(
        &self,
        engine: &wasmtime::Engine,
        bytes: &[u8],
    ) -> wasmtime::Result<Component> {
        self.cache
            .component(engine, bytes, &cache::ComponentDigest::of(bytes))
    }

    /// The cache's directory (canonical): what no guest may be given.
    pub fn directory(&self) -> &std::path::Path {
        self.cache.directory()
    }

    /// Loads served from the cache, and loads compiled, so far.
    pub fn counts(&self) -> (usize, usize) {
        (self.cache.hits(), self.cache.misses())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A writer that keeps what a subscriber writes.
    #[derive(Clone, Default)]
    struct Kept(Arc<Mutex<Vec<u8>>>);

    impl Write for Kept {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A component compiled once is loaded from the kit's cache the second
    /// time, on the same engine, and runs the same.
    #[test]
    fn the_kit_cache_serves_a_second_load() {
        let dir = std::env::temp_dir().join(format!("moat-kit-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (engine, _ticker) = engine().unwrap();
        let cache = CompileCache::at(&dir, 1 << 30).unwrap();
        let bytes = wat::parse_str("(component)").unwrap();
        cache.component(&engine, &bytes).unwrap();
        assert_eq!(cache.counts(), (0, 1));
        let again = CompileCache::open(&cache::CacheDir::At(dir.clone()))
            .unwrap()
            .unwrap();
        again.component(&engine, &bytes).unwrap();
        assert_eq!(again.counts(), (1, 0), "the second load is the cache's");
        assert!(CompileCache::open(&cache::CacheDir::Off).unwrap().is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// An embedder who gives no notices gets the denial lines on
    /// `tracing` (target moat::notice, debug), not on the process's
    /// stderr; one who gives a callback gets them there.
    #[tokio::test]
    async fn notices_go_to_tracing_unless_the_embedder_gives_a_callback() {
        let (_engine, ticker) = engine().unwrap();
        let kept = Kept::default();
        let writer = kept.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .finish();
        let (_net, notices, _, _) = MoatCtx::builder(Policy::new()).into_net(&ticker);
        tracing::subscriber::with_default(subscriber, || {
            notices.tell("connect to 10.0.0.1:80 denied".to_owned());
        });
        let logged = String::from_utf8(kept.0.lock().unwrap().clone()).unwrap();
        assert!(
            logged.contains("DEBUG moat::notice: connect to 10.0.0.1:80 denied"),
            "{logged}"
        );

        let given = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&given);
        let (_net, notices, _, _) = MoatCtx::builder(Policy::new())
            .notices(Notices::new(move |line| {
                into.lock().unwrap().push(line.to_owned())
            }))
            .into_net(&ticker);
        notices.tell("listen on 0.0.0.0:80 denied".to_owned());
        assert_eq!(*given.lock().unwrap(), ["listen on 0.0.0.0:80 denied"]);
    }
}
