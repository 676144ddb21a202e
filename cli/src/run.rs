//! The `moat` command: flags in, a policy and a run out.

use std::process::ExitCode;

use anyhow::{Context, bail};
use moat_host::audit::{self, Audit, GuestIdentity};
use moat_host::launch::{ComponentSource, Entry, Launch, Launcher, Threads};
use moat_host::net::{TlsIdentity, TlsTrust};
use moat_host::preopen::Preopen;
use moat_host::settings::{
    Defaults, Origin, PolicyFile, SecretSource, Setting, Settings, Spelling, Worded,
};
use moat_host::trusted::{self, Kept, Trusted};
use moat_host::{CacheDir, Moat, MoatConfig, MoatError, RunOptions};

use crate::args::{self, CompileArgs, RunArgs, ServeArgs};
use crate::progress::Compiling;

pub(crate) fn main() -> ExitCode {
    let cli = crate::args::parse();
    init_logging();
    match cli.command {
        args::Command::Run(args) => run(args),
        args::Command::Serve(args) => serve(args),
        args::Command::Compile(args) => compile(&args),
        args::Command::Grants(args::GrantsCommand::Suggest(args)) => crate::grants::suggest(&args),
    }
}

/// `moat compile`: each component into the cache, with what it cost.
fn compile(args: &CompileArgs) -> ExitCode {
    let cache = match &args.cache_dir {
        Some(dir) => match std::path::absolute(dir) {
            Ok(dir) => CacheDir::At(dir),
            Err(e) => {
                eprintln!("moat: error: --cache-dir {}: {e}", dir.display());
                return ExitCode::from(2);
            }
        },
        None => CacheDir::Default,
    };
    let config = MoatConfig {
        cache,
        ..MoatConfig::default()
    };
    let moat = match Moat::new(&config) {
        Ok(moat) => moat,
        Err(e) => {
            eprintln!("moat: error: {e}");
            return ExitCode::from(e.exit_status());
        }
    };
    let Some(before) = moat.cache_use() else {
        match moat.cache_refused() {
            Some(refused) => eprintln!("moat: error: the cache directory is not used: {refused}"),
            None => eprintln!(
                "moat: error: no cache directory: set --cache-dir, or HOME or XDG_CACHE_HOME"
            ),
        }
        return ExitCode::from(2);
    };
    let mut misses = before.misses;
    for component in &args.components {
        let started = std::time::Instant::now();
        let loading = Compiling::start(component, true);
        let loaded = moat.load(component);
        loading.done();
        if let Err(e) = loaded {
            eprintln!("moat: error: {e}");
            return ExitCode::from(e.exit_status());
        }
        let now = moat.cache_use().map_or(misses, |used| used.misses);
        let how = if now > misses {
            "compiled"
        } else {
            "already cached"
        };
        misses = now;
        println!(
            "{}: {how} in {:.1} s",
            component.display(),
            started.elapsed().as_secs_f64()
        );
    }
    println!(
        "cache: {} ({:.1} MB)",
        before.directory.display(),
        directory_size(&before.directory) as f64 / 1e6
    );
    ExitCode::SUCCESS
}

/// The bytes of the files under `dir` (0 for what cannot be read).
fn directory_size(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(kind) if kind.is_dir() => directory_size(&entry.path()),
            Ok(_) => entry.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
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
    let kept: Vec<Kept> = args
        .prompt_save
        .iter()
        .map(|file| Kept::new(file, Trusted::Policy))
        .collect();
    let prompt = match args.prompt.then(crate::prompt::Terminal::open).transpose() {
        Ok(prompt) => prompt.map(std::sync::Arc::new),
        Err(e) => {
            eprintln!("moat: error: --prompt: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(file) = &args.prompt_save
        && file.exists()
    {
        eprintln!(
            "moat: error: --prompt-save={}: the file exists; name a new one (merge it into your policy by hand)",
            file.display()
        );
        return ExitCode::from(2);
    }
    let prepared = match prepare(&args, Defaults::Run, &kept) {
        Ok(mut prepared) => {
            if let Some(prompt) = &prompt {
                prepared.options = prepared.options.prompt(prompt.clone());
            }
            prepared
        }
        Err(e) => {
            eprintln!("moat: error: {}", chain(&e));
            return ExitCode::from(2);
        }
    };
    let status = launch(prepared, Entry::Run, Threads::One, &args);
    if let (Some(prompt), Some(file)) = (&prompt, &args.prompt_save)
        && let Err(e) = prompt.save(file)
    {
        eprintln!("moat: error: --prompt-save={}: {e}", file.display());
        return ExitCode::from(2);
    }
    status
}

fn serve(args: ServeArgs) -> ExitCode {
    if args.run.prompt {
        eprintln!(
            "moat: error: --prompt: moat serve never asks: its requests come from clients, not from the person at the terminal"
        );
        return ExitCode::from(2);
    }
    let tls_files: Vec<Kept> = [
        args.tls_cert
            .as_ref()
            .map(|cert| Kept::new(cert, Trusted::TlsCertificate)),
        args.tls_key
            .as_ref()
            .map(|key| Kept::new(key, Trusted::TlsKey)),
    ]
    .into_iter()
    .flatten()
    .collect();
    let prepared = prepare(&args.run, Defaults::Serve, &tls_files).and_then(|prepared| {
        let tls = match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => Some(TlsIdentity {
                certificate_chain_pem: trusted::read(cert, Trusted::TlsCertificate)
                    .with_context(|| format!("--tls-cert {}", cert.display()))?,
                private_key_pem: trusted::read(key, Trusted::TlsKey)
                    .with_context(|| format!("--tls-key {}", key.display()))?,
            }),
            _ => None,
        };
        Ok((prepared, tls))
    });
    let (prepared, tls) = match prepared {
        Ok(prepared) => prepared,
        Err(e) => {
            eprintln!("moat: error: {}", chain(&e));
            return ExitCode::from(2);
        }
    };
    let mut addrs = args.addr.iter().cloned();
    let entry = Entry::Serve {
        addr: addrs
            .next()
            .unwrap_or_else(|| moat_host::serve::DEFAULT_ADDR.to_owned()),
        also: addrs.collect(),
        tls,
        metrics: args.metrics.clone(),
        watch: args.watch,
        trust_request_id: args.trust_request_id,
    };
    // Requests run side by side, one per core.
    launch(prepared, entry, Threads::PerCore, &args.run)
}

/// Runs or serves the prepared component; its error and the hint for it
/// on stderr, and the exit status.
fn launch(prepared: Prepared, entry: Entry, threads: Threads, args: &RunArgs) -> ExitCode {
    let cached = prepared.config.cache != CacheDir::Off;
    let source = match prepared.component {
        Some(bytes) => ComponentSource::Bytes {
            bytes,
            name: args.component.clone(),
        },
        None => ComponentSource::File(args.component.clone()),
    };
    let launch = Launch {
        config: prepared.config,
        options: prepared.options,
        source,
        entry,
        threads,
        // A signal from the terminal ends the process itself.
        stop_on_signal: false,
    };
    match launch.start(&Command { cached }) {
        Ok(ended) => ExitCode::from(u8::try_from(ended.status()).unwrap_or(1)),
        Err(e) => {
            // The command line's words: `--timeout`, `--max-memory`.
            eprintln!("moat: error: {}", e.worded(Spelling::Flags));
            if let Some(hint) = hint(&e, args) {
                eprintln!("moat: hint: {hint}");
            }
            ExitCode::from(e.exit_status())
        }
    }
}

/// The command line's own part of a launch: a load that compiles for
/// long says so on a terminal.
struct Command {
    cached: bool,
}

impl Launcher for Command {
    fn load(
        &self,
        source: &ComponentSource,
        load: &dyn Fn() -> Result<moat_host::Guest, MoatError>,
    ) -> Result<moat_host::Guest, MoatError> {
        let loading = Compiling::start(source.name(), self.cached);
        let loaded = load();
        loading.done();
        loaded
    }
}

/// `err` and its causes, as `{:#}` writes them, without a cause whose
/// text the message before it already ends with (a setting's error says
/// what its policy parser said, and keeps that error as its source).
fn chain(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let next = cause.to_string();
        if text.ends_with(&next) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&next);
    }
    text
}

/// What to try after `err`, when moat can tell.
fn hint(err: &MoatError, args: &RunArgs) -> Option<String> {
    match err {
        MoatError::Read(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => {
            Some(match spaced_grant(args) {
                Some(flag) => {
                    let list = args.component.display();
                    format!(
                        "`{flag} {list}` is {flag} with no list (any host) and a component named {list}; \
                         a list follows an `=`: {flag}={list}"
                    )
                }
                None => "build guests with `cargo build --release --target wasm32-wasip2`; \
                         they land in target/wasm32-wasip2/release/"
                    .to_owned(),
            })
        }
        MoatError::Compile { source, .. } if format!("{source:#}").contains("component") => Some(
            "moat runs components (the wasm32-wasip2 target); a core module (wasm32-wasip1, wasm32-unknown-unknown) is not one"
                .to_owned(),
        ),
        MoatError::Instantiate(source) if format!("{source:#}").contains("import") => Some(
            "an import has the name of one moat serves and another type: the component was \
             built against another revision of that interface"
                .to_owned(),
        ),
        _ => None,
    }
}

/// The grant flag a missing "component" was most likely meant for:
/// `--allow-net example.com:443` (a space, not `=`) gives `--allow-net` no
/// list, which grants any host, and takes the list for the component. A
/// path with a `/` or a `.wasm` name is a component; one with a `:` or a
/// `,`, or `*`, reads as a list of grants.
fn spaced_grant(args: &RunArgs) -> Option<&'static str> {
    let written = args.component.to_str()?;
    let looks_like_a_list = !written.contains('/')
        && !written.ends_with(".wasm")
        && (written.contains(':') || written.contains(',') || written == "*");
    if !looks_like_a_list {
        return None;
    }
    let bare = |setting: Setting| {
        args.settings
            .given
            .iter()
            .any(|(given, value)| *given == setting && value == "*")
    };
    [Setting::AllowNet, Setting::AllowListen]
        .into_iter()
        .find(|&setting| bare(setting))
        .map(Setting::flag)
}

/// Turns the flags (and the policy file, if any) into the options of a
/// run with `defaults` and the engine's configuration. No directory given
/// to the guest may reach a file the run trusts: the policy file, the
/// component, the trail, the CA files, the cache and `also_kept`.
fn prepare(args: &RunArgs, defaults: Defaults, also_kept: &[Kept]) -> anyhow::Result<Prepared> {
    let mut kept: Vec<Kept> = also_kept.to_vec();
    kept.push(Kept::new(&args.component, Trusted::Component));
    let from_file = match &args.policy {
        Some(path) => {
            kept.push(Kept::new(path, Trusted::Policy));
            let bytes = trusted::read(path, Trusted::Policy).map_err(|e| {
                let text = format!("cannot read {e}");
                anyhow::Error::new(e).context(text)
            })?;
            let text = String::from_utf8(bytes).map_err(|_| {
                anyhow::anyhow!("the policy file {}: it is not UTF-8 text", path.display())
            })?;
            Settings::from_file(&PolicyFile::parse(&text, path)?)?
        }
        None => Settings::new(),
    };
    let mut from_flags = Settings::new();
    for (setting, value) in &args.settings.given {
        from_flags.set(&Origin::Flag, *setting, value.as_str())?;
    }
    let settings = from_file.and(from_flags);
    if settings.policy.observes() {
        if settings.audit.is_none() {
            bail!(
                "--observe: observe mode's record of what it let through is the audit trail; \
                 give --audit=FILE (or --audit=- for standard error)"
            );
        }
        eprintln!(
            "moat: OBSERVE MODE: what no grant allows goes through, each recorded as \
             would-deny on the audit trail (deny entries still hold); this drafts grants \
             (moat grants suggest), it does not contain the program"
        );
    }
    // One guest per process: its descriptors are bounded by its own caps.
    let mut options = moat_host::settings::one_guest_process(&settings, Spelling::Flags)
        .arg(args.component.display().to_string())
        .args(args.args.iter().cloned());
    // The trail is kept from the guest's directories, which are judged
    // before it is opened (created, if new).
    if let Some(moat_host::settings::Destination::File(path)) = &settings.audit {
        kept.push(Kept::new(path, Trusted::Trail));
    }
    // A secret's file is kept from every directory the guest gets, read
    // or write, as a TLS key is.
    for binding in &settings.secrets {
        if let SecretSource::File(path) = &binding.from {
            kept.push(Kept::new(path, Trusted::SecretFile));
        }
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
        if settings.secrets.iter().any(|b| b.name == key) {
            bail!(
                "--env {entry}: {key} is a secret's name (--secret); its value is the placeholder"
            );
        }
        options = options.env(key, value);
    }
    if !settings.secrets.is_empty() {
        // Values in this process's memory: no core dump of it, and no
        // other process of the same user reads it through /proc or ptrace.
        if let Err(e) = moat_host::secrets::keep_out_of_core_dumps() {
            tracing::warn!("cannot keep the secrets out of core dumps: {e}");
        }
    }
    for binding in &settings.secrets {
        let secret = moat_host::secrets::read(binding.clone())
            .with_context(|| format!("--secret {binding}"))?;
        options = options.secret(secret);
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
    // No guest may be given the cache's directory (nor a default one,
    // which the host keeps apart always).
    if let CacheDir::At(dir) = &cache {
        kept.push(Kept::new(dir, Trusted::Cache));
    }
    kept.extend(
        args.ca_file
            .iter()
            .map(|file| Kept::new(file, Trusted::CaFile)),
    );
    for dir in &args.dir {
        let preopen = Preopen::parse(dir).with_context(|| format!("--dir {dir}"))?;
        if !preopen.host.is_dir() {
            bail!("--dir {dir}: {} is not a directory", preopen.host.display());
        }
        // Judged again when the run opens it; here it fails as a bad
        // command line, before the component is compiled.
        if let Err(source) =
            moat_host::preopen::check_against(&preopen.host, preopen.writable, &kept)
        {
            let refused = MoatError::PreopenRefused {
                host: preopen.host,
                guest: preopen.guest,
                source,
            };
            bail!("--dir {dir}: {refused}");
        }
        options = options.preopen(preopen);
    }
    for file in kept {
        options = options.keep(file);
    }
    let mut component = None;
    if let Some(destination) = &settings.audit {
        // The digest of the bytes that run names them in every record; a
        // component that cannot be read fails the run when it is loaded.
        component = trusted::read(&args.component, Trusted::Component).ok();
        let guest = component
            .as_deref()
            .map(|bytes| GuestIdentity::of(&args.component, bytes));
        let audit = Audit::to_destination(
            destination,
            audit::Context::new(guest).observing(settings.policy.observes()),
            moat_host::settings::audited(&settings, defaults),
        )?;
        options = options.audit(audit);
    }
    if !args.ca_file.is_empty() {
        let mut trust = TlsTrust::webpki();
        for file in &args.ca_file {
            let pem = trusted::read(file, Trusted::CaFile)
                .with_context(|| format!("--ca-file {}", file.display()))?;
            trust = trust
                .with_pem(&pem)
                .with_context(|| format!("--ca-file {}", file.display()))?;
        }
        options = options.tls_trust(trust);
    }
    let config = MoatConfig {
        cache,
        ..MoatConfig::default()
    };
    Ok(Prepared {
        options,
        config,
        component,
    })
}

/// A run's options and engine configuration, and (when the run is audited)
/// the component's bytes, read once: the digest on the trail is of the
/// bytes that run.
struct Prepared {
    options: RunOptions,
    config: MoatConfig,
    component: Option<Vec<u8>>,
}
