//! What can go wrong loading or running a guest.
//!
//! wasmtime's errors are kept as sources, not flattened to text: an
//! embedder matches [`MoatError::Trap`] and downcasts its
//! [`wasmtime::Error`] to a [`wasmtime::Trap`], or walks
//! [`std::error::Error::source`].

use std::path::PathBuf;

use moat_policy::setting::{Spelling, Worded};

use crate::bounds::{MemoryLimitReached, TimeLimitReached};

/// What can go wrong loading or running a guest.
#[derive(Debug, thiserror::Error)]
pub enum MoatError {
    /// wasmtime refused the engine's configuration.
    #[error("cannot set up the wasm engine: {0:#}")]
    Engine(#[source] wasmtime::Error),
    /// The async runtime a launch runs on could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// A helper thread (the epoch ticker, a run's alarm) could not start.
    #[error("cannot start the {what} thread: {source}")]
    Thread {
        /// Which thread.
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// The component's file could not be read, or is not one moat reads
    /// ([`crate::trusted`]: a symbolic link, not a regular file, too large).
    #[error("cannot read {0}")]
    Read(#[source] crate::trusted::TrustedFileError),
    /// The file is not WebAssembly at all (a script, an archive, an HTML
    /// page a download saved): found before compiling.
    #[error("{} is not WebAssembly: it starts with {starts}", path.display())]
    NotWasm {
        /// The file (or the name given with the bytes).
        path: PathBuf,
        /// What it starts with, in words.
        starts: String,
    },
    /// The bytes are not a component wasmtime can compile.
    #[error("{path} is not a WebAssembly component moat can run: {source:#}")]
    Compile {
        /// The file (or the name given with the bytes).
        path: PathBuf,
        /// Why, as wasmtime reports it.
        source: wasmtime::Error,
    },
    /// A directory given to the guest could not be opened.
    #[error("cannot give the guest {} as {guest}: {source:#}", host.display())]
    Preopen {
        /// The directory on the host.
        host: PathBuf,
        /// Where the guest would have seen it.
        guest: String,
        /// Why.
        source: wasmtime::Error,
    },
    /// A directory given to the guest is, or contains, a filesystem of the
    /// host's internals (procfs, sysfs, devices: see [`crate::preopen`]),
    /// or could not be examined; the guest did not start.
    #[error("cannot give the guest {} as {guest}: {source}", host.display())]
    PreopenRefused {
        /// The directory on the host, as given.
        host: PathBuf,
        /// Where the guest would have seen it.
        guest: String,
        /// Why.
        source: crate::preopen::PreopenError,
    },
    /// The component imports what moat does not serve: each such import,
    /// grouped by package, with what moat serves instead.
    #[error("cannot start {}: it imports what moat does not serve:\n{missing}", path.display())]
    MissingImports {
        /// The component as named.
        path: PathBuf,
        /// The imports, by package.
        missing: crate::start::MissingImports,
        /// wasmtime's refusal to link it.
        #[source]
        source: wasmtime::Error,
    },
    /// `moat run` was given a component it does not call: an HTTP handler
    /// (for `moat serve`), or one with no `wasi:cli/run` (a library).
    #[error("cannot run {}: {reason}", path.display())]
    NoEntryPoint {
        /// The component as named.
        path: PathBuf,
        /// What it exports instead.
        reason: crate::start::NoEntryPoint,
    },
    /// The component could not be instantiated (an import of the right
    /// name and the wrong type, ...).
    #[error("cannot start the guest: {0:#}")]
    Instantiate(#[source] wasmtime::Error),
    /// The guest trapped (or a host call failed fatally) while running;
    /// downcast the source to [`wasmtime::Trap`] for the trap code. The
    /// message is the guest's wasm backtrace and the causes; the host's
    /// own stack (captured under `RUST_BACKTRACE`) only when no trap of the
    /// guest's is among them, since then it is the host's failure.
    #[error("the guest trapped: {}", Trapped(.0))]
    Trap(#[source] wasmtime::Error),
    /// The component's memory at its start is more than a server's
    /// instances may have (`--max-memory`): found before compiling.
    #[error("{}", below_start(path, *needs, *max, Spelling::Flags))]
    MemoryBelowStart {
        /// The component as named.
        path: PathBuf,
        /// The largest memory one of its modules starts with, in bytes.
        needs: u64,
        /// The bound, in bytes.
        max: u64,
    },
    /// The guest tried to grow its memory past the run's limit, and was
    /// stopped.
    #[error("{0}")]
    MemoryLimit(#[source] MemoryLimitReached),
    /// The run's time limit passed, and the guest was stopped.
    #[error("{0}")]
    TimeLimit(#[source] TimeLimitReached),
    /// `moat serve` could not listen where it was told to.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address as given (`--addr`).
        addr: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `moat serve` was given a component that is not an HTTP handler.
    #[error("{path} is not an HTTP handler moat serve can run: {reason}")]
    NotAHandler {
        /// The component as named.
        path: std::path::PathBuf,
        /// What it exports instead.
        reason: String,
    },
    /// A component given to a running server
    /// ([`crate::serve::Reloader::reload`]) needs the other engine than
    /// the one the server runs handlers on.
    #[error(
        "{} cannot replace the handler being served: it {} the component model's \
         concurrency support (a wasi:http 0.3 service or a moat:net guest needs it, \
         a 0.2 proxy of WASI 0.2 alone does not) and the server's engine {}; \
         restart moat serve to serve it",
        path.display(),
        if *needs_concurrency { "needs" } else { "is compiled without" },
        if *needs_concurrency { "has none" } else { "has it" }
    )]
    ReloadEngine {
        /// The new component as named.
        path: std::path::PathBuf,
        /// Whether the new component needs concurrency support (and the
        /// server's engine lacks it), or the other way round.
        needs_concurrency: bool,
    },
}

/// Exit status for a guest that trapped or reached its memory bound: what a
/// shell reports for a process killed by SIGABRT (128 + 6), the guest
/// aborted.
pub const TRAP_EXIT: u8 = 134;

/// Exit status for a run stopped at its time bound: what coreutils'
/// `timeout` reports for a command it stopped.
pub const TIMEOUT_EXIT: u8 = 124;

/// Exit status for a guest that could not be started (a file that cannot
/// be read or is not a component, an import moat does not serve, no entry
/// point): what a shell reports for a command found but not executable, so
/// that it differs from a guest's own failure (1).
pub const START_FAILED_EXIT: u8 = 126;

/// Exit status for a run refused for what it was given, before the guest
/// started (a directory it may not have): what `moat run` returns for a bad
/// command line, and the containerd shim for a bad deployment.
pub const REFUSED_EXIT: u8 = 2;

impl MoatError {
    /// The exit status a process running one guest reports for this error,
    /// as `moat run` and the containerd shim do: [`TRAP_EXIT`] for a trap
    /// or the memory bound, [`TIMEOUT_EXIT`] for the time bound,
    /// [`REFUSED_EXIT`] for a directory refused or an address that is
    /// not one, [`START_FAILED_EXIT`] otherwise.
    pub fn exit_status(&self) -> u8 {
        match self {
            MoatError::Trap(_) | MoatError::MemoryLimit(_) => TRAP_EXIT,
            MoatError::TimeLimit(_) => TIMEOUT_EXIT,
            MoatError::PreopenRefused { .. } => REFUSED_EXIT,
            // Not an address at all: the command line was wrong.
            MoatError::Bind { source, .. } if source.kind() == std::io::ErrorKind::InvalidInput => {
                REFUSED_EXIT
            }
            _ => START_FAILED_EXIT,
        }
    }
}

impl From<crate::kit::RunError> for MoatError {
    fn from(err: crate::kit::RunError) -> MoatError {
        use crate::kit::RunError;
        match err {
            RunError::Instantiate(e) => MoatError::Instantiate(e),
            RunError::MemoryLimit(reached) => MoatError::MemoryLimit(reached),
            RunError::TimeLimit(reached) => MoatError::TimeLimit(reached),
            RunError::Trap(e) => MoatError::Trap(e),
        }
    }
}

/// A run's fatal error as [`MoatError::Trap`] shows it: as wasmtime's
/// `{:?}` does (the error, its wasm backtrace, "Caused by:" and each
/// cause), without the host's Rust stack when the guest trapped: thirty
/// frames of wasmtime's fibers say nothing about the guest's bug.
struct Trapped<'a>(&'a wasmtime::Error);

impl std::fmt::Display for Trapped<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let err = self.0;
        if err.downcast_ref::<wasmtime::Trap>().is_none() {
            return write!(f, "{err:?}");
        }
        write!(f, "{err}")?;
        let mut causes = err.chain().skip(1).peekable();
        if causes.peek().is_some() {
            f.write_str("\n\nCaused by:")?;
            for cause in causes {
                write!(f, "\n    {cause}")?;
            }
        }
        Ok(())
    }
}

/// [`MoatError::MemoryBelowStart`]'s text, naming the bound as `spelling`
/// writes it.
fn below_start(path: &std::path::Path, needs: u64, max: u64, spelling: Spelling) -> String {
    let flag = moat_policy::setting::Setting::MaxMemory.named(spelling);
    format!(
        "{} needs {needs} bytes of memory at its start, more than each instance may have \
         ({max} bytes, {flag}): raise {flag}",
        path.display()
    )
}

impl Worded for MoatError {
    /// The limits in `spelling`'s words (the CLI's `--timeout`, the
    /// shim's `MOAT_TIMEOUT`); every other case as its `Display`.
    fn write_worded(
        &self,
        spelling: Spelling,
        f: &mut std::fmt::Formatter<'_>,
    ) -> std::fmt::Result {
        match self {
            MoatError::MemoryLimit(reached) => reached.write_worded(spelling, f),
            MoatError::TimeLimit(reached) => reached.write_worded(spelling, f),
            MoatError::MemoryBelowStart { path, needs, max } => {
                f.write_str(&below_start(path, *needs, *max, spelling))
            }
            other => std::fmt::Display::fmt(other, f),
        }
    }
}
