//! The command line, as clap sees it.

use std::path::PathBuf;

use clap::{Arg, ArgAction, ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use moat_host::settings::{Defaults, Kind, Setting, default_of};

const ABOUT: &str = "Run WebAssembly components with the network access you grant, and no more";

const LONG_ABOUT: &str = "\
Run WebAssembly components with the network access you grant, and no more.

A guest can reach nothing until you say so. Reaching out (connect) and being
reachable (listen) are separate grants, each an allowlist of HOST[:PORT]
entries. Hosts are judged as the guest wrote them, before any DNS lookup.

Any wasm32-wasip2 command runs: guests built with moat-sdk, and stock programs
that use wasi:sockets (std::net and the like). A stock program's name lookups
go through moat: a name no grant names is refused before any query, and the
addresses a granted name resolved to are judged as that name.";

/// `moat run --help`'s text after the flags, before the bounds' table
/// ([`run_after_help`]).
const RUN_EXAMPLES: &str = "\
Examples:
  Serve on one port:
    moat run --allow-listen=127.0.0.1:7000 echo-server.wasm 127.0.0.1:7000
  Talk to one service, with stdin and stdout relayed:
    moat run --allow-net=127.0.0.1:7000 ncat.wasm 127.0.0.1 7000
  A plain std::net program, reaching one name on one port:
    moat run --allow-net=example.com:80 std-fetch.wasm example.com /
  Reach any subdomain on 443, and a private range on any port:
    moat run --allow-net='*.example.com:443,10.0.0.0/8' client.wasm
  Give the guest a directory and a variable:
    moat run --dir=./certs::/certs --env=LOG=debug server.wasm
  Serve HTTPS with a certificate from a directory, and trust a private CA:
    moat run --allow-listen=127.0.0.1:8443 --dir=certs http-server.wasm --tls certs/cert.pem certs/key.pem 127.0.0.1:8443
    moat run --allow-net=db.internal:5432 --ca-file=./private-ca.pem client.wasm

Allowlist entries (comma-separated):
  example.com          that name, any port (any case; a trailing dot is the same name)
  *.example.com:443    names under example.com (not example.com itself), port 443
  127.0.0.1:8000-8100  that address, ports 8000 to 8100
  [::1]:80             an IPv6 address with a port
  10.0.0.0/8           IP literals in that range
  *:443                any host, port 443
A name never matches an IP literal, nor the reverse: allowing localhost does not
allow 127.0.0.1. The bare flag (--allow-net) allows everything of its kind.
IPv4 addresses match IPv4 entries however written (::ffff:10.0.0.1 is 10.0.0.1);
an IPv6 range such as ::/0 holds no IPv4 address.

Deny entries (--deny-net, --deny-listen) win over any grant, and judge the host
as written and every address a name resolves to. Besides allowlist entries:
  private              loopback, RFC 1918, link-local, CGNAT, unique-local, unspecified
  metadata             cloud metadata services (169.254.169.254, fd00:ec2::254)
Anything on the internet, nothing on my network:
    moat run --allow-net --deny-net=private,metadata client.wasm

";

const EXIT_STATUS: &str = "\
Exit status: the guest's (0, 1 when main returns an error, or its exit code);
134 if the guest traps or reaches --max-memory; 124 past --timeout; 2 for a bad
command line or policy file; 126 if the component cannot start (not readable,
not a component, imports moat does not serve, no wasi:cli/run).";

/// `moat`'s command line.
#[derive(Debug, Parser)]
#[command(name = "moat", version, about = ABOUT, long_about = LONG_ABOUT)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a component: any wasm32-wasip2 command (moat-sdk or plain
    /// wasi:sockets, as std::net uses), under the grants given
    Run(RunArgs),
    /// Serve HTTP with a wasi:http handler (a 0.2 proxy or a 0.3 service,
    /// as `wasmtime serve`): each request in a fresh instance, the
    /// handler's own requests and sockets under the grants given
    Serve(ServeArgs),
    /// Compile components into the cache ahead of their first run (for an
    /// image, a CI job or the containerd shim's node): `moat run` and
    /// `moat serve` with the same --cache-dir then start at once
    Compile(CompileArgs),
    /// Grants from an audit trail: `moat grants suggest TRAIL.jsonl`
    /// drafts the narrowest grants that would have allowed what the trail
    /// shows denied (or let through by --observe)
    #[command(subcommand)]
    Grants(GrantsCommand),
}

/// `moat grants`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum GrantsCommand {
    /// Print the grants that would have allowed what TRAIL shows denied
    /// or would-denied, as flags and as a policy file, each with how many
    /// refusals it answers: names as written, their ports, nothing wider
    /// unless --widen
    Suggest(SuggestArgs),
}

/// `moat grants suggest`.
#[derive(Debug, Args)]
pub(crate) struct SuggestArgs {
    /// Names that share a parent and a port (two or more) become one
    /// `*.parent:port` entry
    #[arg(long)]
    pub(crate) widen: bool,

    /// The audit trail (JSON Lines, as --audit writes it); - for standard
    /// input
    #[arg(value_name = "TRAIL")]
    pub(crate) trail: PathBuf,
}

/// `moat compile`.
#[derive(Debug, Args)]
pub(crate) struct CompileArgs {
    /// Cache compiled code in DIR [default: $XDG_CACHE_HOME/moat or ~/.cache/moat]
    #[arg(long = "cache-dir", value_name = "DIR")]
    pub(crate) cache_dir: Option<PathBuf>,

    /// The components to compile (.wasm files)
    #[arg(value_name = "COMPONENT", required = true)]
    pub(crate) components: Vec<PathBuf>,
}

/// `moat serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Listen here: an IP address and port (loopback unless you write
    /// 0.0.0.0 or [::]), unix:PATH for a Unix socket, or systemd for the
    /// sockets systemd hands over (socket activation). This is the
    /// operator's grant, the handler needs no --allow-listen for it. Give
    /// it again to listen on more addresses
    #[arg(
        long = "addr",
        value_name = "ADDR",
        default_value = moat_host::serve::DEFAULT_ADDR,
        action = clap::ArgAction::Append
    )]
    pub(crate) addr: Vec<String>,

    /// Serve HTTPS with this certificate chain (PEM, leaf first); needs
    /// --tls-key
    #[arg(long = "tls-cert", value_name = "PEM", requires = "tls_key")]
    pub(crate) tls_cert: Option<PathBuf>,

    /// The private key for --tls-cert (PEM)
    #[arg(long = "tls-key", value_name = "PEM", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,

    /// Answer Prometheus scrapes (GET /metrics) here, written as --addr
    /// is. Requests by method and status, latency, instances
    /// busy and waiting, refusals, network decisions, host memory
    #[arg(long = "metrics", value_name = "ADDR")]
    pub(crate) metrics: Option<String>,

    /// Load the component again when its file changes (looked at once a
    /// second), as at SIGHUP: new requests get the new one
    #[arg(long = "watch")]
    pub(crate) watch: bool,

    /// Take a request's id from its x-request-id header (1 to 128 of
    /// A-Z a-z 0-9 . _ : -), or its traceparent's trace id, instead of
    /// making one: only behind a proxy that sets them, since a client
    /// would choose the ids in the server's lines and trail
    #[arg(long = "trust-request-id")]
    pub(crate) trust_request_id: bool,

    /// As `moat run`'s; --timeout is per request.
    #[command(flatten)]
    pub(crate) run: RunArgs,
}

/// `moat run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// Read grants, deny lists and bounds from a TOML file (keys as the flags,
    /// without --); flags add to it and override its bounds.
    #[arg(long = "policy", value_name = "FILE")]
    pub(crate) policy: Option<PathBuf>,

    /// The grants, deny lists and bounds, each a row of moat's table of
    /// settings.
    #[command(flatten)]
    pub(crate) settings: SettingArgs,

    /// Set an environment variable for the guest (repeatable); KEY alone
    /// passes the host's value. Example: --env=RUST_LOG=debug
    #[arg(long = "env", value_name = "KEY[=VALUE]")]
    pub(crate) env: Vec<String>,

    /// Give the guest a host directory, under GUEST_DIR or the same path,
    /// read-only unless `:rw` (repeatable). A directory that is or holds a
    /// proc, sys, device or other kernel filesystem is refused.
    /// Example: --dir=./certs::/certs --dir=./out::/out:rw
    #[arg(long = "dir", value_name = "HOST_DIR[::GUEST_DIR][:ro|:rw]")]
    pub(crate) dir: Vec<String>,

    /// Trust the CA certificates in PEM for the guest's TLS connections,
    /// besides the built-in Mozilla roots (repeatable).
    /// Example: --ca-file=./certs/private-ca.pem
    #[arg(long = "ca-file", value_name = "PEM")]
    pub(crate) ca_file: Vec<PathBuf>,

    /// Cache compiled code in DIR [default: $XDG_CACHE_HOME/moat or ~/.cache/moat]
    #[arg(long = "cache-dir", value_name = "DIR", conflicts_with = "no_cache")]
    pub(crate) cache_dir: Option<PathBuf>,

    /// Compile every time; do not read or write the cache
    #[arg(long = "no-cache")]
    pub(crate) no_cache: bool,

    /// moat run, on a terminal: ask before refusing a connect, listen or
    /// HTTP request no grant allows (allow once, allow always, deny); deny
    /// entries are never asked about. Never without a terminal, never in
    /// moat serve
    #[arg(long = "prompt")]
    pub(crate) prompt: bool,

    /// With --prompt: write the destinations allowed always as a policy
    /// file (a new file, for --policy next time)
    #[arg(long = "prompt-save", value_name = "FILE", requires = "prompt")]
    pub(crate) prompt_save: Option<PathBuf>,

    /// The component to run (a .wasm file)
    #[arg(value_name = "COMPONENT")]
    pub(crate) component: PathBuf,

    /// Arguments for the guest (its argv[0] is the component's path)
    #[arg(
        value_name = "ARGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub(crate) args: Vec<String>,
}

/// The settings given on the command line, in the order of the table, each
/// flag's values in the order given. Their flags, value names and help
/// come from moat's table of settings ([`Setting`]); their values are read
/// by `Settings::set`, as a policy file's and the shim's are.
#[derive(Debug, Default)]
pub(crate) struct SettingArgs {
    pub(crate) given: Vec<(Setting, String)>,
}

impl FromArgMatches for SettingArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut given = Vec::new();
        for setting in Setting::ALL {
            if let Some(values) = matches.get_many::<String>(setting.key()) {
                given.extend(values.map(|value| (setting, value.clone())));
            }
        }
        Ok(SettingArgs { given })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = SettingArgs::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Args for SettingArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        Setting::ALL
            .into_iter()
            .fold(cmd, |cmd, setting| cmd.arg(flag_of(setting)))
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        SettingArgs::augment_args(cmd)
    }
}

/// The flag of one setting. A grant's flag alone grants everything
/// (`--allow-net`); a list takes `=` (`--allow-net=example.com:443`), so
/// that the component after a bare flag is not taken for its list; a
/// list may repeat and adds up; a bound is given once.
fn flag_of(setting: Setting) -> Arg {
    let kind = setting.kind();
    let help = match default_of(setting, Defaults::Run) {
        Some(default) => format!("{} [default: {default}]", setting.help()),
        None => setting.help().to_owned(),
    };
    let arg = Arg::new(setting.key())
        .long(setting.key())
        .value_name(kind.value_name())
        .help(help);
    match kind {
        Kind::Grant => arg
            .action(ArgAction::Append)
            .num_args(0..=1)
            .require_equals(true)
            .default_missing_value("*"),
        Kind::Deny | Kind::Secret => arg.action(ArgAction::Append).require_equals(true),
        Kind::Switch => arg
            .action(ArgAction::Set)
            .num_args(0..=1)
            .require_equals(true)
            .default_missing_value("true"),
        Kind::Count | Kind::Size | Kind::Duration | Kind::File => arg.action(ArgAction::Set),
    }
}

/// `moat run --help`'s text after the flags: examples, the bounds with
/// their defaults (from the table), and the exit statuses.
fn run_after_help() -> String {
    let mut bounds = String::from(
        "Bounds (defaults in brackets; a policy file takes the same keys, see --policy):\n",
    );
    for setting in Setting::ALL {
        if let Some(default) = default_of(setting, Defaults::Run) {
            bounds.push_str(&format!("  {} [{default}]\n", setting.flag()));
        }
    }
    format!("{}\n\n{bounds}\n{EXIT_STATUS}", RUN_EXAMPLES.trim_end())
}

/// `moat serve --help`'s text after the flags.
fn serve_after_help() -> String {
    format!(
        "Examples:\n  Serve a handler on 127.0.0.1:8080, letting it fetch from one API:\n    \
         moat serve --allow-net=api.example.com:443 handler.wasm\n  Serve HTTPS on every \
         interface, port 443:\n    moat serve --addr=0.0.0.0:443 --tls-cert=cert.pem \
         --tls-key=key.pem handler.wasm\n\n\
         Each request runs in a new instance: nothing a handler keeps in memory is seen \
         by the next request. --max-memory is per instance, --timeout per request \
         [default: {}]. A handler that traps or reaches a bound answers 500; SIGINT \
         or SIGTERM stops accepting, lets requests in flight finish (--shutdown-timeout, \
         {}), and exits 0.",
        default_of(Setting::Timeout, Defaults::Serve).unwrap_or_default(),
        default_of(Setting::ShutdownTimeout, Defaults::Serve).unwrap_or_default(),
    )
}

/// Parses `moat`'s command line (exits on a bad one, as clap does).
pub(crate) fn parse() -> Cli {
    let command = Cli::command()
        .mut_subcommand("run", |run| run.after_help(run_after_help()))
        .mut_subcommand("serve", |serve| {
            serve
                .after_help(serve_after_help())
                .mut_arg(Setting::Timeout.key(), |timeout| {
                    timeout.help(format!(
                        "Stop a request's handler after this long, e.g. 30s, 5m [default: {}]",
                        default_of(Setting::Timeout, Defaults::Serve).unwrap_or_default()
                    ))
                })
        });
    let matches = command.get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}
