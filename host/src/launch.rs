//! One launch of one component, start to end, as `moat run`, `moat serve`
//! and the containerd shim each make it: an async runtime, the host
//! ([`Moat`]), the component loaded, then run to its exit or served until
//! a stop signal, the audit trail finished, and the exit status.
//!
//! What differs between them stays theirs and reaches here as [`Launch`]'s
//! fields and the [`Launcher`] calls: where the component's bytes come
//! from, whether a stop signal ends a run, how many threads serve, how a
//! long compile is shown, the line that says where a server listens.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::MoatError;
use crate::figures::{Loaded, LoadedFrom};
use crate::memory_reset::MemoryReset;
use crate::moat::{Guest, Moat};
use crate::net::TlsIdentity;
use crate::options::{InstancePool, MoatConfig, RunOptions};
use crate::serve::reload::{Load, Reloads};
use crate::serve::{Listening, ServeOptions, stop_signal};
use crate::start::NoEntryPoint;

/// Where the component comes from.
#[derive(Debug, Clone)]
pub enum ComponentSource {
    /// A file, read when it is loaded.
    File(PathBuf),
    /// Bytes read already (so that an audit trail's digest is of the bytes
    /// that run), with the name messages give them.
    Bytes {
        /// The component.
        bytes: Vec<u8>,
        /// Its name in messages: the file it came from.
        name: PathBuf,
    },
}

impl ComponentSource {
    /// The component's name in messages.
    pub fn name(&self) -> &std::path::Path {
        match self {
            ComponentSource::File(path) => path,
            ComponentSource::Bytes { name, .. } => name,
        }
    }
}

/// What the launch does with the component.
#[derive(Debug, Clone)]
pub enum Entry {
    /// Runs its `wasi:cli/run` to the end; an HTTP handler is refused
    /// ([`MoatError::NoEntryPoint`], naming its handler).
    Run,
    /// Serves its wasi:http handler on `addr` until a stop signal (SIGTERM
    /// or SIGINT), with an instance per request from a pool of the run's
    /// `max_instances`.
    Serve {
        /// The address as written (`127.0.0.1:8080`).
        addr: String,
        /// More addresses to serve on as well, as written.
        also: Vec<String>,
        /// The server's certificate and key, for HTTPS.
        tls: Option<TlsIdentity>,
        /// Where to answer Prometheus scrapes, as written.
        metrics: Option<String>,
        /// Whether to load the component again when its file changes, as
        /// at SIGHUP.
        watch: bool,
        /// Whether a request's id is taken from its headers
        /// ([`ServeOptions::trust_request_id`]).
        trust_request_id: bool,
    },
}

/// The threads the runtime drives the run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// One: a guest's own work is one thread's, and a pod's footprint
    /// stays small.
    One,
    /// One per core: `moat serve`'s requests side by side.
    PerCore,
}

/// One launch: the host's configuration, the run's options, the
/// component and what to do with it.
#[derive(Debug)]
pub struct Launch {
    /// The host's configuration (its compile cache, its instance pool).
    pub config: MoatConfig,
    /// The run's policy, bounds, arguments, environment and stdio.
    pub options: RunOptions,
    /// The component.
    pub source: ComponentSource,
    /// Run it, or serve it.
    pub entry: Entry,
    /// The runtime's threads.
    pub threads: Threads,
    /// Whether SIGTERM and SIGINT end a run (the guest is ended, with
    /// 128 + the signal's number as its status): a container's PID 1,
    /// for which the kernel has no default action, needs it; a command
    /// run from a terminal is ended by the signal itself. A server always
    /// stops on them, after its requests in flight.
    pub stop_on_signal: bool,
}

/// How a launch ended, short of an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The guest exited with this status.
    Exited(i32),
    /// A stop signal ended the guest: the status is 128 + its number.
    Stopped(i32),
    /// The server stopped on a signal, its requests in flight finished.
    Served,
}

impl Ended {
    /// The exit status of a process that ended so.
    pub fn status(self) -> i32 {
        match self {
            Ended::Exited(status) | Ended::Stopped(status) => status,
            Ended::Served => 0,
        }
    }
}

/// What a front door does at the moments that are its own.
pub trait Launcher {
    /// Loads the component at the start; `load` does it. The default just
    /// calls it (a command line shows a long compile here). A server's
    /// reloads do not come here: they load on a thread of their own while
    /// the server answers, and say on stderr when they begin and end.
    fn load(
        &self,
        source: &ComponentSource,
        load: &dyn Fn() -> Result<Guest, MoatError>,
    ) -> Result<Guest, MoatError> {
        let _ = source;
        load()
    }

    /// The server listens on `bound` (`scheme` is `http` or `https`):
    /// the default prints `moat: serving http://ADDR/` on stderr (`moat:
    /// serving http on unix:PATH` for a Unix socket), the line a
    /// supervisor or a test waits for.
    fn serving(&self, scheme: &str, bound: &Listening) {
        match bound {
            Listening::Tcp(addr) => eprintln!("moat: serving {scheme}://{addr}/"),
            Listening::Unix(_) => eprintln!("moat: serving {scheme} on {bound}"),
        }
    }

    /// The server's instances are reset by `reset` when each ends: the
    /// default prints `moat: instances: ...` on stderr, saying how.
    fn instances(&self, reset: MemoryReset) {
        eprintln!("moat: instances: {}", reset.explained());
    }

    /// The server answers Prometheus scrapes on `bound`: the default
    /// prints `moat: metrics at http://ADDR/metrics` on stderr (`moat:
    /// metrics at unix:PATH` for a Unix socket).
    fn metrics(&self, bound: &Listening) {
        match bound {
            Listening::Tcp(addr) => eprintln!("moat: metrics at http://{addr}/metrics"),
            Listening::Unix(_) => eprintln!("moat: metrics at {bound}"),
        }
    }
}

/// The front door that changes nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Plain;

impl Launcher for Plain {}

impl Launch {
    /// Launches the component and waits for its end; the audit trail is
    /// finished (every record written) before this returns.
    ///
    /// # Errors
    /// [`MoatError::Runtime`] when the async runtime cannot start; the
    /// host's, the load's, the run's or the server's [`MoatError`]; its
    /// [`exit_status`](MoatError::exit_status) is the process's.
    pub fn start(mut self, launcher: &dyn Launcher) -> Result<Ended, MoatError> {
        let runtime = match self.threads {
            Threads::One => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build(),
            Threads::PerCore => tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build(),
        }
        .map_err(MoatError::Runtime)?;
        if let Entry::Serve { .. } = self.entry
            && self.config.instance_pool.is_none()
        {
            self.config.instance_pool = Some(InstancePool::for_run(&self.options));
        }
        let audit = self.options.audit_trail().clone();
        let serving = matches!(self.entry, Entry::Serve { .. });
        let ended = runtime.block_on(self.go(launcher));
        audit.finish();
        if serving {
            // A reload's compile may still run on a blocking thread: a
            // stopped server does not wait the tens of seconds it may
            // take (its result would be dropped). Anything else blocking
            // (a handler's last write) has a second.
            runtime.shutdown_timeout(std::time::Duration::from_secs(1));
        }
        ended
    }

    async fn go(self, launcher: &dyn Launcher) -> Result<Ended, MoatError> {
        let moat = Arc::new(Moat::new(&self.config)?);
        let loading = std::time::Instant::now();
        let guest = launcher.load(&self.source, &|| match &self.source {
            ComponentSource::File(path) => moat.load(path),
            ComponentSource::Bytes { bytes, name } => moat.load_bytes(bytes, name),
        })?;
        if let Some(figures) = self.options.figures_counted() {
            figures.set_loaded(loaded(&moat, loading));
        }
        match self.entry {
            Entry::Serve {
                addr,
                also,
                tls,
                metrics,
                watch,
                trust_request_id,
            } => {
                let mut options = ServeOptions::new(addr, self.options);
                options.trust_request_id = trust_request_id;
                for addr in also {
                    options = options.also(addr);
                }
                if let Some(addr) = metrics {
                    options = options.metrics(addr);
                }
                let scheme = match tls {
                    Some(identity) => {
                        options = options.tls(identity);
                        "https"
                    }
                    None => "http",
                };
                let server = moat.bind_server(&guest, options).await?;
                // Taken over before the line a supervisor may wait for.
                let stop = stop_signal();
                let reloads = Reloads::listen(self.source.name(), watch);
                if let Some(reset) = server.memory_reset() {
                    launcher.instances(reset);
                }
                for bound in server.metrics_bound() {
                    launcher.metrics(&bound);
                }
                for bound in server.bound() {
                    launcher.serving(scheme, &bound);
                }
                // Read again from the file (for bytes, the file they came
                // from), on a thread of its own: the server goes on
                // answering while it compiles.
                let file = self.source.name().to_owned();
                let loader = Arc::clone(&moat);
                let load: Load = Arc::new(move || loader.load(&file));
                reloads.serve(server, stop, load).await?;
                Ok(Ended::Served)
            }
            Entry::Run => {
                let name = self.source.name();
                run_to_its_end(&moat, &guest, name, self.options, self.stop_on_signal).await
            }
        }
    }
}

/// Where the run's component came from (the compiled-code cache, or
/// compiled for it) and how long loading it took, for its figures.
fn loaded(moat: &Moat, since: std::time::Instant) -> Loaded {
    let cached = moat.cache_use().is_some_and(|used| used.hits > 0);
    Loaded {
        from: if cached {
            LoadedFrom::Cache
        } else {
            LoadedFrom::Compiled
        },
        took: since.elapsed(),
    }
}

/// `moat run`'s entry: the guest's `wasi:cli/run` until it returns, or,
/// with `stop_on_signal`, until SIGTERM or SIGINT stops it. A component
/// that is an HTTP handler is refused: its toolchain may give it a
/// wasi:cli/run too (Rust's wasm32-wasip2 target does), which only traps
/// or exits.
async fn run_to_its_end(
    moat: &Moat,
    guest: &Guest,
    name: &std::path::Path,
    options: RunOptions,
    stop_on_signal: bool,
) -> Result<Ended, MoatError> {
    if let Some(handler) = guest.http_handler() {
        return Err(MoatError::NoEntryPoint {
            path: name.to_owned(),
            reason: NoEntryPoint {
                exports: guest.exports(),
                http_handler: Some(handler),
            },
        });
    }
    if !guest.has_async_run() {
        tracing::debug!("the guest exports only wasi:cli/run@0.2.0: it cannot use moat:net");
    }
    let run = moat.run(guest, options);
    if !stop_on_signal {
        return Ok(Ended::Exited(run.await?.code()));
    }
    let stopped = guest_stop_signal();
    tokio::select! {
        exit = run => Ok(Ended::Exited(exit?.code())),
        status = stopped => Ok(Ended::Stopped(status)),
    }
}

/// The status a guest ends with when SIGTERM or SIGINT comes (128 + the
/// signal), once one comes.
///
/// A component has no way to be told of a signal (WASI has none), so it
/// gets no grace of its own: its instance is dropped, its sockets close,
/// and the trail is finished as at any end. (An HTTP handler's server
/// does finish the requests in flight first: [`stop_signal`].)
fn guest_stop_signal() -> impl Future<Output = i32> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let signals = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    );
    async move {
        let (Ok(mut terminate), Ok(mut interrupt)) = signals else {
            eprintln!("moat: cannot listen for SIGTERM: the guest stops only when killed");
            return std::future::pending().await;
        };
        let (name, number) = tokio::select! {
            _ = terminate.recv() => ("SIGTERM", 15),
            _ = interrupt.recv() => ("SIGINT", 2),
        };
        eprintln!("moat: {name}: the guest is ended");
        128 + number
    }
}
