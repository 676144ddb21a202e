//! The `moat` command: flags in, a policy and a run out.

mod args;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Parser;
use moat_host::net::{Limits, TlsTrust};
use moat_host::policy::{Capability, DenyList, Grant, Policy, Rule};
use moat_host::policy_file::{At, GrantSpec, PolicyFile, PolicyFileError};
use moat_host::{CacheDir, Moat, MoatConfig, MoatError, RunOptions};

use args::{Cli, Command, RunArgs};

/// Exit status when the guest traps: what a shell reports for a process
/// killed by SIGABRT (128 + 6): the guest aborted.
const TRAP_EXIT: u8 = 134;

/// Exit status when the guest cannot be started (bad file, missing import).
const START_FAILED_EXIT: u8 = 1;

/// Exit status when the run's --timeout passed: what coreutils' `timeout`
/// reports for a command it stopped.
const TIMEOUT_EXIT: u8 = 124;

pub(crate) fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    match cli.command {
        Command::Run(args) => run(args),
    }
}

fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

fn run(args: RunArgs) -> ExitCode {
    let (options, config) = match prepare(&args) {
        Ok(prepared) => prepared,
        Err(e) => {
            eprintln!("moat: error: {e:#}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("moat: error: cannot start the async runtime: {e}");
            return ExitCode::from(START_FAILED_EXIT);
        }
    };
    let outcome = runtime.block_on(async {
        let moat = Moat::new(&config)?;
        let guest = moat.load(&args.component)?;
        if !guest.has_async_run() {
            tracing::debug!("the guest exports only wasi:cli/run@0.2.0: it cannot use moat:net");
        }
        moat.run(&guest, options).await
    });
    match outcome {
        Ok(exit) => ExitCode::from(u8::try_from(exit.code()).unwrap_or(1)),
        Err(e) => {
            eprintln!("moat: error: {e}");
            if let Some(hint) = hint(&e) {
                eprintln!("moat: hint: {hint}");
            }
            match e {
                MoatError::Trap(_) | MoatError::MemoryLimit(_) => ExitCode::from(TRAP_EXIT),
                MoatError::TimeLimit(_) => ExitCode::from(TIMEOUT_EXIT),
                _ => ExitCode::from(START_FAILED_EXIT),
            }
        }
    }
}

fn hint(err: &MoatError) -> Option<&'static str> {
    match err {
        MoatError::Read { source, .. } if source.kind() == std::io::ErrorKind::NotFound => Some(
            "build guests with `cargo build --release --target wasm32-wasip2`; they land in target/wasm32-wasip2/release/",
        ),
        MoatError::Compile { source, .. } if format!("{source:#}").contains("component") => Some(
            "moat runs components (the wasm32-wasip2 target); a core module (wasm32-wasip1, wasm32-unknown-unknown) is not one",
        ),
        MoatError::Instantiate(source) if format!("{source:#}").contains("import") => Some(
            "the guest needs an interface moat does not provide; moat offers moat:net@0.2.0 and WASI 0.2/0.3, wasi:sockets included",
        ),
        _ => None,
    }
}

/// Turns the flags (and the policy file, if any) into a run's options and
/// the engine's configuration.
fn prepare(args: &RunArgs) -> anyhow::Result<(RunOptions, MoatConfig)> {
    let file = match &args.policy {
        Some(path) => Some((PolicyFile::read(path)?, path.as_path())),
        None => None,
    };
    let (mut policy, file_limits) = match &file {
        Some((file, path)) => from_file(file, path)?,
        None => (Policy::new(), FileLimits::default()),
    };
    for (capability, flag_grant, flag_deny) in [
        (Capability::Connect, &args.allow_net, &args.deny_net),
        (Capability::Listen, &args.allow_listen, &args.deny_listen),
    ] {
        let granted = policy
            .grant(capability)
            .clone()
            .union(grant(flag_grant, capability.flag())?);
        policy = policy.with_grant(capability, granted);
        for list in flag_deny {
            let denied: DenyList = list
                .parse()
                .with_context(|| format!("{}={list}", capability.deny_flag()))?;
            policy = policy.with_denied(capability, denied);
        }
    }
    let defaults = Limits::default();
    let limits = Limits {
        max_sockets: args
            .max_sockets
            .or(file_limits.max_sockets)
            .or(defaults.max_sockets),
        max_waiting_calls: args
            .max_waiting_calls
            .or(file_limits.max_waiting_calls)
            .unwrap_or(defaults.max_waiting_calls),
        max_lookups: args
            .max_lookups
            .or(file_limits.max_lookups)
            .unwrap_or(defaults.max_lookups),
        lookup_timeout: args
            .lookup_timeout
            .or(file_limits.lookup_timeout)
            .unwrap_or(defaults.lookup_timeout),
        tls_handshake_timeout: args
            .tls_handshake_timeout
            .or(file_limits.tls_handshake_timeout)
            .unwrap_or(defaults.tls_handshake_timeout),
        max_connections: args.max_connections.or(file_limits.max_connections),
        max_connections_per_peer: args
            .max_connections_per_peer
            .or(file_limits.max_connections_per_peer),
        close_linger: defaults.close_linger,
        max_recorded_addresses: defaults.max_recorded_addresses,
    };
    let mut options = RunOptions::new(policy)
        .limits(limits)
        .arg(args.component.display().to_string())
        .args(args.args.iter().cloned());
    if let Some(bytes) = args.max_memory.or(file_limits.max_memory) {
        options = options.max_memory(bytes);
    }
    if let Some(limit) = args.timeout.or(file_limits.timeout) {
        options = options.timeout(limit);
    }
    for entry in &args.env {
        let (key, value) = match entry.split_once('=') {
            Some((key, value)) => (key.to_owned(), value.to_owned()),
            None => {
                let value = std::env::var(entry).with_context(|| {
                    format!(
                        "--env {entry}: the host has no such variable to pass on (give KEY=VALUE)"
                    )
                })?;
                (entry.clone(), value)
            }
        };
        if key.is_empty() {
            bail!("--env {entry}: the variable name is empty");
        }
        options = options.env(key, value);
    }
    for dir in &args.dir {
        let (host, guest) = match dir.split_once("::") {
            Some((host, guest)) => (host, guest),
            None => (dir.as_str(), dir.as_str()),
        };
        if host.is_empty() || guest.is_empty() {
            bail!("--dir {dir}: expected HOST_DIR or HOST_DIR::GUEST_DIR");
        }
        if !std::path::Path::new(host).is_dir() {
            bail!("--dir {dir}: {host} is not a directory");
        }
        options = options.dir(PathBuf::from(host), guest);
    }
    if !args.ca_file.is_empty() {
        let mut trust = TlsTrust::webpki();
        for file in &args.ca_file {
            let pem =
                std::fs::read(file).with_context(|| format!("--ca-file {}", file.display()))?;
            trust = trust
                .with_pem(&pem)
                .with_context(|| format!("--ca-file {}", file.display()))?;
        }
        options = options.tls_trust(trust);
    }
    let cache = match (&args.cache_dir, args.no_cache) {
        (_, true) => CacheDir::Off,
        (Some(dir), false) => {
            let dir = std::path::absolute(dir)
                .with_context(|| format!("--cache-dir {}", dir.display()))?;
            CacheDir::At(dir)
        }
        (None, false) => CacheDir::Default,
    };
    let config = MoatConfig {
        cache,
        ..MoatConfig::default()
    };
    Ok((options, config))
}

/// The bounds a policy file sets.
#[derive(Default)]
struct FileLimits {
    max_sockets: Option<u32>,
    max_waiting_calls: Option<u32>,
    max_memory: Option<u64>,
    timeout: Option<std::time::Duration>,
    max_lookups: Option<u32>,
    lookup_timeout: Option<std::time::Duration>,
    tls_handshake_timeout: Option<std::time::Duration>,
    max_connections: Option<u32>,
    max_connections_per_peer: Option<u32>,
}

/// The policy and bounds of a policy file; a bad entry is an error naming
/// the file, its line and its key.
fn from_file(
    file: &PolicyFile,
    path: &std::path::Path,
) -> Result<(Policy, FileLimits), PolicyFileError> {
    let mut policy = Policy::new();
    for (capability, key, spec) in [
        (Capability::Connect, "allow-net", &file.allow_net),
        (Capability::Listen, "allow-listen", &file.allow_listen),
    ] {
        let granted = match spec.as_ref().map(|at| &at.value) {
            None | Some(GrantSpec::Nothing) => Grant::Nothing,
            Some(GrantSpec::Everything) => Grant::Everything,
            Some(GrantSpec::Entries(entries)) => Grant::Only(
                entries
                    .iter()
                    .map(|At { value, line }| {
                        value
                            .parse::<Rule>()
                            .map_err(|e| PolicyFileError::at(path, *line, key, e.to_string()))
                    })
                    .collect::<Result<_, _>>()?,
            ),
        };
        policy = policy.with_grant(capability, granted);
    }
    for (capability, key, list) in [
        (Capability::Connect, "deny-net", &file.deny_net),
        (Capability::Listen, "deny-listen", &file.deny_listen),
    ] {
        for At { value, line } in list.iter().flat_map(|at| &at.value) {
            let denied: DenyList = value.parse().map_err(|e: moat_host::policy::PolicyError| {
                PolicyFileError::at(path, *line, key, e.to_string())
            })?;
            policy = policy.with_denied(capability, denied);
        }
    }
    let value = |at: &Option<At<u32>>| at.as_ref().map(|a| a.value);
    let limits = FileLimits {
        max_sockets: value(&file.max_sockets),
        max_waiting_calls: value(&file.max_waiting_calls),
        max_memory: file.max_memory.as_ref().map(|a| a.value),
        timeout: file.timeout.as_ref().map(|a| a.value),
        max_lookups: value(&file.max_lookups),
        lookup_timeout: file.lookup_timeout.as_ref().map(|a| a.value),
        tls_handshake_timeout: file.tls_handshake_timeout.as_ref().map(|a| a.value),
        max_connections: value(&file.max_connections),
        max_connections_per_peer: value(&file.max_connections_per_peer),
    };
    Ok((policy, limits))
}

/// One capability's grant from its flag's values (the flag may repeat).
fn grant(values: &[String], flag: &str) -> anyhow::Result<Grant> {
    let mut grant = Grant::Nothing;
    for value in values {
        let added = if value.trim() == "*" {
            Grant::Everything
        } else {
            value.parse().with_context(|| format!("{flag}={value}"))?
        };
        grant = grant.union(added);
    }
    Ok(grant)
}
