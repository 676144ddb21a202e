//! One run of a guest: its policy, arguments, environment, directories and
//! stdio, the store it runs in, and how it ended.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::Store;
use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi::p2::pipe::{MemoryInputPipe, MemoryOutputPipe};
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtx, WasiCtxBuilder};

use crate::bindings::wasi_sockets::WasiNet;
use crate::bounds::{
    Alarm, DEFAULT_MAX_MEMORY, Limiter, MemoryLimitReached, TimeLimitReached, deadline_callback,
};
use crate::engine::{Guest, Moat};
use crate::error::MoatError;
use crate::net::{Limits, Net, Notices, Resolver, TlsTrust};
use crate::policy::Policy;
use crate::preopen::{self, Preopen};
use crate::state::RunState;

/// Most bytes a captured stdout or stderr keeps; a guest printing more is
/// stopped with an error rather than growing the host without bound.
pub const CAPTURE_LIMIT: usize = 16 << 20;

/// Where a guest's stdout or stderr goes.
#[derive(Debug, Clone, Default)]
pub enum Output {
    /// The host process's own stream.
    #[default]
    Inherit,
    /// Into memory, read back with [`Captured::contents`] (at most
    /// [`CAPTURE_LIMIT`] bytes).
    Capture(Captured),
    /// Nowhere.
    Discard,
}

/// A captured output stream.
#[derive(Debug, Clone)]
pub struct Captured(MemoryOutputPipe);

impl Captured {
    /// An empty capture buffer.
    pub fn new() -> Captured {
        Captured(MemoryOutputPipe::new(CAPTURE_LIMIT))
    }

    /// Everything the guest wrote so far.
    pub fn contents(&self) -> Vec<u8> {
        self.0.contents().to_vec()
    }
}

impl Default for Captured {
    fn default() -> Captured {
        Captured::new()
    }
}

/// Where a guest's stdin comes from.
#[derive(Debug, Clone, Default)]
pub enum Input {
    /// The host process's own stdin.
    #[default]
    Inherit,
    /// These bytes, then end of file.
    Bytes(Vec<u8>),
    /// End of file at once.
    Empty,
}

/// Everything one run is given: its capabilities and its process context.
#[derive(Clone, Default)]
pub struct RunOptions {
    policy: Policy,
    limits: Limits,
    max_memory: Option<u64>,
    timeout: Option<Duration>,
    resolver: Option<Arc<dyn Resolver>>,
    tls_trust: Option<TlsTrust>,
    args: Vec<String>,
    env: Vec<(String, String)>,
    dirs: Vec<Preopen>,
    stdin: Input,
    stdout: Output,
    stderr: Output,
}

impl RunOptions {
    /// A run governed by `policy`, with no arguments, no environment, no
    /// directories and the host's stdio.
    pub fn new(policy: Policy) -> RunOptions {
        RunOptions {
            policy,
            ..RunOptions::default()
        }
    }

    /// Adds an argument (the first is the program name, by convention).
    pub fn arg(mut self, arg: impl Into<String>) -> RunOptions {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> RunOptions {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> RunOptions {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Gives the guest `host` as `guest`, to read only. The run refuses to
    /// start ([`MoatError::PreopenRefused`]) if `host` is or contains a
    /// procfs, sysfs, devfs or other kernel filesystem
    /// ([`crate::preopen::check`]).
    pub fn dir(self, host: impl Into<PathBuf>, guest: impl Into<String>) -> RunOptions {
        self.preopen(Preopen::read_only(host, guest))
    }

    /// Gives the guest `host` as `guest`, to read and change; refused as
    /// for [`dir`](Self::dir).
    pub fn dir_writable(self, host: impl Into<PathBuf>, guest: impl Into<String>) -> RunOptions {
        self.preopen(Preopen::writable(host, guest))
    }

    /// Gives the guest a directory as `preopen` says.
    pub fn preopen(mut self, preopen: Preopen) -> RunOptions {
        self.dirs.push(preopen);
        self
    }

    /// Sets where stdin comes from.
    pub fn stdin(mut self, input: Input) -> RunOptions {
        self.stdin = input;
        self
    }

    /// Sets where stdout goes.
    pub fn stdout(mut self, output: Output) -> RunOptions {
        self.stdout = output;
        self
    }

    /// Sets where stderr goes.
    pub fn stderr(mut self, output: Output) -> RunOptions {
        self.stderr = output;
        self
    }

    /// Sets the roots TLS clients trust (default: webpki-roots, the
    /// Mozilla set). Build it with [`TlsTrust::webpki`] and
    /// [`TlsTrust::with_pem`] to add roots, or [`TlsTrust::from_store`] to
    /// replace them.
    pub fn tls_trust(mut self, trust: TlsTrust) -> RunOptions {
        self.tls_trust = Some(trust);
        self
    }

    /// Sets the network bounds (sockets, lookups, handshakes, listener
    /// caps); the default is [`Limits::default`].
    pub fn limits(mut self, limits: Limits) -> RunOptions {
        self.limits = limits;
        self
    }

    /// Bounds the guest's linear memory, all memories together, in bytes
    /// (default [`DEFAULT_MAX_MEMORY`]). Growing past it traps the guest
    /// and the run ends with [`MoatError::MemoryLimit`].
    pub fn max_memory(mut self, bytes: u64) -> RunOptions {
        self.max_memory = Some(bytes);
        self
    }

    /// Bounds the run's wall-clock time (default: none, so that servers
    /// run until stopped). When it is up the guest is stopped, computing or
    /// waiting, and the run ends with [`MoatError::TimeLimit`].
    pub fn timeout(mut self, limit: Duration) -> RunOptions {
        self.timeout = Some(limit);
        self
    }

    /// Resolves the guest's names with `resolver` instead of the system's
    /// DNS configuration (see [`crate::net::resolve`]).
    pub fn resolver(mut self, resolver: Arc<dyn Resolver>) -> RunOptions {
        self.resolver = Some(resolver);
        self
    }

    /// The policy of this run.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("policy", &self.policy)
            .field("limits", &self.limits)
            .field("max_memory", &self.max_memory)
            .field("timeout", &self.timeout)
            .field("resolver", &self.resolver.as_ref().map(|_| "custom"))
            .field("args", &self.args)
            .field("dirs", &self.dirs)
            .finish_non_exhaustive()
    }
}

/// How a run ended: the guest's exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit(i32);

impl Exit {
    /// The exit code: 0 when `main` returned success, 1 when it returned an
    /// error, or the code the guest passed to `exit`.
    pub fn code(self) -> i32 {
        self.0
    }

    /// Whether the code is 0.
    pub fn success(self) -> bool {
        self.0 == 0
    }
}

/// Where a run's denial lines go: the guest's stderr, prefixed with
/// `moat: NAME:` (the program's file name, from its first argument).
fn notices(options: &RunOptions) -> Notices {
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

fn wasi_ctx(options: &RunOptions, wasi_net: &WasiNet) -> Result<WasiCtx, MoatError> {
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
    for dir in &options.dirs {
        let checked = preopen::check(&dir.host).map_err(|source| MoatError::PreopenRefused {
            host: dir.host.clone(),
            guest: dir.guest.clone(),
            source,
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
    wasi_net.configure(&mut wasi);
    Ok(wasi.build())
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
    /// [`MoatError::Instantiate`] if the guest cannot start (a missing
    /// import, a directory that cannot be opened); [`MoatError::Trap`] if it
    /// traps. A guest that exits with a code is an `Ok(Exit)`.
    pub async fn run(&self, guest: &Guest, options: RunOptions) -> Result<Exit, MoatError> {
        let mut net =
            Net::with_pending_writes(options.policy.clone(), self.pending_writes().clone())
                .with_limits(options.limits.clone());
        if let Some(resolver) = options.resolver.clone() {
            net = net.with_resolver(resolver);
        }
        if let Some(trust) = options.tls_trust.clone() {
            net = net.with_tls_trust(trust);
        }
        let wasi_net = WasiNet::new(&net, notices(&options));
        let wasi = wasi_ctx(&options, &wasi_net)?;
        let max_memory = options.max_memory.unwrap_or(DEFAULT_MAX_MEMORY);
        let mut store = Store::new(
            self.engine(),
            RunState {
                wasi,
                wasi_net,
                net: net.clone(),
                table: ResourceTable::new(),
                limiter: Limiter::new(max_memory),
            },
        );
        store.limiter(|state| &mut state.limiter);
        // Yield at every epoch tick; ticks only happen while a socket has
        // bytes queued (see `ticker`), and at a run's deadline.
        store.set_epoch_deadline(1);
        let ended = match options.timeout {
            None => {
                store.epoch_deadline_async_yield_and_update(1);
                call_run(&mut store, guest, self.linker()).await
            }
            Some(limit) => {
                let mut callback = deadline_callback(Instant::now() + limit, limit);
                store.epoch_deadline_callback(move |_| callback());
                let _alarm = Alarm::set(self.engine().clone(), limit).map_err(|source| {
                    MoatError::Thread {
                        what: "timeout",
                        source,
                    }
                })?;
                match tokio::time::timeout(limit, call_run(&mut store, guest, self.linker())).await
                {
                    Ok(ended) => ended,
                    Err(_) => {
                        tracing::debug!(target: "moat::net", ?limit, "time limit reached: stopping the waiting guest");
                        Err(MoatError::TimeLimit(TimeLimitReached { limit }))
                    }
                }
            }
        };
        drop(store);
        net.finish(self.linger()).await;
        ended
    }
}

async fn call_run(
    store: &mut Store<RunState>,
    guest: &Guest,
    linker: &Linker<RunState>,
) -> Result<Exit, MoatError> {
    let instantiate = MoatError::Instantiate;
    let result = if guest.async_run {
        let command = wasmtime_wasi::p3::bindings::Command::instantiate_async(
            &mut *store,
            &guest.component,
            linker,
        )
        .await
        .map_err(instantiate)?;
        store
            .run_concurrent(async move |access| command.wasi_cli_run().call_run(access).await)
            .await
            .and_then(|ran| ran)
    } else {
        let command = wasmtime_wasi::p2::bindings::Command::instantiate_async(
            &mut *store,
            &guest.component,
            linker,
        )
        .await
        .map_err(instantiate)?;
        command.wasi_cli_run().call_run(&mut *store).await
    };
    match result {
        Ok(Ok(())) => Ok(Exit(0)),
        Ok(Err(())) => Ok(Exit(1)),
        Err(e) => {
            if let Some(exit) = e.downcast_ref::<I32Exit>() {
                Ok(Exit(exit.0))
            } else if let Some(reached) = e.downcast_ref::<MemoryLimitReached>() {
                Err(MoatError::MemoryLimit(reached.clone()))
            } else if let Some(reached) = e.downcast_ref::<TimeLimitReached>() {
                Err(MoatError::TimeLimit(reached.clone()))
            } else {
                Err(MoatError::Trap(e))
            }
        }
    }
}
