//! What a run is given: its policy, arguments, environment, directories,
//! stdio and bounds ([`RunOptions`]); what a [`crate::Moat`] is set up with
//! ([`MoatConfig`]); and how a run ended ([`Exit`]). Plain data: what is
//! done with it is in `moat.rs`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use wasmtime_wasi::p2::pipe::MemoryOutputPipe;

use crate::audit::Audit;
use crate::cache::{CacheDir, MAX_CACHE_BYTES};
use crate::figures::Figures;
use crate::memory_reset::MemoryReset;
pub(crate) use crate::net::limits::DEFAULT_LINGER;
use crate::net::{Limits, NetConfig, Notices, Resolver, Secret, TlsTrust};
use crate::preopen::Preopen;
use crate::trusted::Kept;
use moat_policy::policy::Policy;

/// Settings of a [`crate::Moat`] (named so as not to shadow `wasmtime::Config`).
#[derive(Debug, Clone)]
pub struct MoatConfig {
    /// Where compiled code is cached.
    pub cache: CacheDir,
    /// Most bytes of compiled code the cache keeps: past it, the entries
    /// used longest ago go (default [`MAX_CACHE_BYTES`]).
    pub max_cache_bytes: u64,
    /// How long a finished run lets its sockets flush (10 s by default).
    pub linger: Duration,
    /// Instances made from pooled memory, for a host that makes one per
    /// request (`moat serve`); `None`: each instance's memory is mapped
    /// when it is made and unmapped when it is dropped.
    pub instance_pool: Option<InstancePool>,
}

impl Default for MoatConfig {
    fn default() -> MoatConfig {
        MoatConfig {
            cache: CacheDir::Default,
            max_cache_bytes: MAX_CACHE_BYTES,
            linger: DEFAULT_LINGER,
            instance_pool: None,
        }
    }
}

/// wasmtime's pooling allocator, sized for `instances` at once, each with
/// up to `max_memory` bytes of linear memory: an instance takes a slot
/// whose memory, tables and stack were reserved once, instead of mapping
/// and unmapping them per instance. The slots are virtual address space
/// until used; a [`crate::Moat`] that has loaded a wasi:http 0.2 proxy of
/// WASI 0.2 imports alone reserves them twice, once for each of its two
/// engines ([`crate::Guest::uses_concurrency`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstancePool {
    /// Component instances at once (`moat serve`'s `--max-instances`).
    pub instances: u32,
    /// The largest linear memory of one instance (`--max-memory`).
    pub max_memory: u64,
}

impl InstancePool {
    /// Core instances one component may hold in the pool: a Rust
    /// component has a handful (its module, WASI's adapter, shims); a
    /// JavaScript or Python one a few dozen.
    pub(crate) const CORE_INSTANCES_PER_COMPONENT: u32 = 64;
    /// Linear memories one component may hold: usually one or two.
    pub(crate) const MEMORIES_PER_COMPONENT: u32 = 16;
    /// Tables one component may hold: a few per core instance.
    pub(crate) const TABLES_PER_COMPONENT: u32 = 64;
    /// Fiber stacks one instance may use at once (one per host call that
    /// suspends; wasi:http 0.3 tasks can have several).
    pub(crate) const STACKS_PER_INSTANCE: u32 = 8;
    /// Bytes of each table slot wiped with a `memset` when its instance
    /// ends, rather than handed back with `madvise` and faulted in again
    /// by the next instance: 64 KiB, a table of 8,192 entries, which
    /// covers the tables of Rust, Python and JavaScript components. A
    /// `madvise` flushes the TLB of every CPU the process runs on, and
    /// the next instance's first call through the table faults; wiping a
    /// Rust component's two tables costs far less than that. What stays
    /// resident is at most what the pool's instances could hold at once
    /// anyway.
    pub(crate) const TABLE_KEEP_RESIDENT: usize = 64 << 10;

    /// The pool for a host running `options`' guests
    /// [`Limits::max_instances`](crate::net::Limits::max_instances) at once.
    pub fn for_run(options: &RunOptions) -> InstancePool {
        InstancePool {
            instances: options.net.limits.max_instances.max(1),
            max_memory: options.net.limits.max_memory,
        }
    }

    pub(crate) fn strategy(&self) -> wasmtime::InstanceAllocationStrategy {
        let n = self.instances;
        let mut pool = wasmtime::PoolingAllocationConfig::default();
        pool.total_component_instances(n)
            .total_core_instances(n.saturating_mul(Self::CORE_INSTANCES_PER_COMPONENT))
            .total_memories(n.saturating_mul(Self::MEMORIES_PER_COMPONENT))
            .total_tables(n.saturating_mul(Self::TABLES_PER_COMPONENT))
            .total_stacks(n.saturating_mul(Self::STACKS_PER_INSTANCE))
            .max_memories_per_module(Self::MEMORIES_PER_COMPONENT)
            .max_tables_per_module(Self::TABLES_PER_COMPONENT)
            .table_elements(crate::bounds::MAX_TABLE_ELEMENTS)
            .max_memory_size(usize::try_from(self.max_memory).unwrap_or(usize::MAX))
            .table_keep_resident(Self::TABLE_KEEP_RESIDENT)
            .linear_memory_keep_resident(MemoryReset::KEEP_RESIDENT);
        // The page-map scan without write tracking finds every page ever
        // written, and lost to copying the lowest bytes on every handler
        // measured (BENCHMARKS.md): it is used only with tracking. `Auto`:
        // should the scan fail now where it worked a moment ago, the pool
        // copies the lowest bytes rather than not being made.
        if MemoryReset::available() == MemoryReset::WrittenPages {
            pool.pagemap_scan(wasmtime::Enabled::Auto);
        }
        wasmtime::InstanceAllocationStrategy::Pooling(pool)
    }
}

/// Most bytes a captured stdout or stderr keeps; a guest printing more is
/// stopped with an error rather than growing the host without bound.
pub(crate) const CAPTURE_LIMIT: usize = 16 << 20;

/// Where a guest's stdout or stderr goes.
#[derive(Debug, Clone, Default)]
pub enum Output {
    /// The host process's own stream.
    #[default]
    Inherit,
    /// Into memory, read back with [`Captured::contents`] (at most
    /// 16 MiB).
    Capture(Captured),
    /// Nowhere.
    Discard,
}

/// A captured output stream.
#[derive(Debug, Clone)]
pub struct Captured(pub(crate) MemoryOutputPipe);

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
    /// What the run's network is made from.
    pub(crate) net: NetConfig,
    pub(crate) args: Vec<String>,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) dirs: Vec<Preopen>,
    /// Files a later run trusts, which no directory of the guest's may
    /// reach (with the trail's file and the component, added by the run).
    pub(crate) kept: Vec<Kept>,
    pub(crate) stdin: Input,
    pub(crate) stdout: Output,
    pub(crate) stderr: Output,
    pub(crate) notices: NoticesTo,
    /// Where the run's figures are counted, if anywhere.
    pub(crate) figures: Option<Arc<Figures>>,
}

/// Where a run's denial lines go.
#[derive(Clone, Default)]
pub(crate) enum NoticesTo {
    /// `tracing`, target `moat::notice`, at debug: a guest can make them
    /// on demand.
    #[default]
    Tracing,
    /// The guest's stderr (as it is set: inherited, captured or
    /// discarded), each line prefixed `moat: NAME:` (`moat run`, the
    /// shim).
    GuestStderr,
    /// The embedder's.
    Given(Notices),
}

impl RunOptions {
    /// A run governed by `policy`, with no arguments, no environment, no
    /// directories and the host's stdio.
    pub fn new(policy: Policy) -> RunOptions {
        RunOptions {
            net: NetConfig::new(policy),
            ..RunOptions::default()
        }
    }

    /// Sends the run's denial lines (`connect to 10.0.0.5:5432 denied:
    /// needs ...`, each distinct one once) to `notices`, a callback of
    /// the embedder's ([`Notices::new`]). Without this they go to
    /// `tracing` (target `moat::notice`, debug level), never straight to
    /// the process's stderr.
    pub fn notices(mut self, notices: Notices) -> RunOptions {
        self.notices = NoticesTo::Given(notices);
        self
    }

    /// Writes the run's denial lines on the guest's stderr, each prefixed
    /// `moat: NAME:` (the program's name), as `moat run` and the shim do.
    pub fn notices_on_guest_stderr(mut self) -> RunOptions {
        self.notices = NoticesTo::GuestStderr;
        self
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

    /// Gives the guest `secret`'s placeholder in the environment variable
    /// its binding names, and lets its HTTP requests carry the value where
    /// the binding says ([`crate::net::secrets`]); a secret read from a
    /// file keeps that file from every directory the guest gets.
    pub fn secret(mut self, secret: Secret) -> RunOptions {
        let binding = secret.binding();
        self.env
            .push((binding.name.clone(), secret.placeholder().to_owned()));
        if let moat_policy::settings::SecretSource::File(path) = &binding.from {
            self.kept
                .push(Kept::new(path, crate::trusted::Trusted::SecretFile));
        }
        self.net.secrets = self.net.secrets.with(secret);
        self
    }

    /// Asks `prompter` about each call no grant allows before refusing it
    /// ([`crate::net::prompt`]): moat:net connects and listens and
    /// wasi:http requests; a deny entry's refusal is never asked about.
    pub fn prompt(mut self, prompter: Arc<dyn crate::net::prompt::Prompter>) -> RunOptions {
        self.net.prompt = Some(prompter);
        self
    }

    /// Gives the guest `host` as `guest`, to read only. The run refuses to
    /// start ([`crate::MoatError::PreopenRefused`]) if `host` is or contains a
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

    /// Keeps `kept` (a policy file, a TLS key, ...) out of every directory
    /// given to the guest: the run refuses one that reaches it
    /// ([`crate::preopen::check_against`]). The trail's file, the
    /// component and the compiled-code caches are kept without asking.
    pub fn keep(mut self, kept: Kept) -> RunOptions {
        self.kept.push(kept);
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
        self.net.tls_trust = Some(trust);
        self
    }

    /// Sets every bound of the run (sockets, lookups, handshakes, listener
    /// caps, and the guest's memory and time, which
    /// [`max_memory`](Self::max_memory) and [`timeout`](Self::timeout) set
    /// alone); the default is [`Limits::default`].
    pub fn limits(mut self, limits: Limits) -> RunOptions {
        self.net.limits = limits;
        self
    }

    /// Names settings in the run's messages as `spelling` writes them
    /// (default: the policy's, `Spelling::Embedding` for one made in
    /// code): `Flags` for `--allow-net=...` as `moat run` says it.
    pub fn spelled(mut self, spelling: moat_policy::setting::Spelling) -> RunOptions {
        self.net.policy = self.net.policy.spelled(spelling);
        self
    }

    /// Bounds the guest's linear memory, all memories together, in bytes
    /// (default 512 MiB). Growing past it traps the guest
    /// and the run ends with [`crate::MoatError::MemoryLimit`].
    pub fn max_memory(mut self, bytes: u64) -> RunOptions {
        self.net.limits.max_memory = bytes;
        self
    }

    /// Bounds the run's wall-clock time (default: none, so that servers
    /// run until stopped). When it is up the guest is stopped, computing or
    /// waiting, and the run ends with [`crate::MoatError::TimeLimit`].
    pub fn timeout(mut self, limit: Duration) -> RunOptions {
        self.net.limits.timeout = Some(limit);
        self
    }

    /// Resolves the guest's names with `resolver` instead of the system's
    /// DNS configuration (see [`crate::net::SystemResolver`]).
    pub fn resolver(mut self, resolver: Arc<dyn Resolver>) -> RunOptions {
        self.net.resolver = Some(resolver);
        self
    }

    /// Records every network decision of the run on `audit` (default:
    /// none): see [`crate::audit`]. The trail is finished when its last
    /// clone is dropped, or by [`Audit::finish`].
    pub fn audit(mut self, audit: Audit) -> RunOptions {
        self.net.audit = match &self.figures {
            Some(figures) => audit.counting(Arc::clone(figures.decisions())),
            None => audit,
        };
        self
    }

    /// Counts the run's decisions, traffic and load into `figures`
    /// ([`crate::figures`]), whatever its audit trail (set before or
    /// after this). A served component's figures are its server's: every
    /// handler's and the server's own decisions and traffic.
    pub fn figures(mut self, figures: Arc<Figures>) -> RunOptions {
        self.net.audit = self
            .net
            .audit
            .clone()
            .counting(Arc::clone(figures.decisions()));
        self.net.traffic = Some(Arc::clone(figures.traffic()));
        self.figures = Some(figures);
        self
    }

    /// Where the run's figures are counted, if [`figures`](Self::figures)
    /// set it.
    pub fn figures_counted(&self) -> Option<&Arc<Figures>> {
        self.figures.as_ref()
    }

    /// The run's audit trail (off unless [`audit`](Self::audit) set one).
    pub fn audit_trail(&self) -> &Audit {
        &self.net.audit
    }

    /// The policy of this run.
    pub fn policy(&self) -> &Policy {
        &self.net.policy
    }
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("net", &self.net)
            .field("args", &self.args)
            .field("dirs", &self.dirs)
            .finish_non_exhaustive()
    }
}

/// How a run ended: the guest's exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit(pub(crate) i32);

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
