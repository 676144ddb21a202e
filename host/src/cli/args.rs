//! The command line, as clap sees it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const ABOUT: &str = "Run WebAssembly components with the network access you grant, and no more";

const LONG_ABOUT: &str = "\
Run WebAssembly components with the network access you grant, and no more.

A guest can reach nothing until you say so. Reaching out (connect) and being
reachable (listen) are separate grants, each an allowlist of HOST[:PORT]
entries. Hosts are judged as the guest wrote them, before any DNS lookup.";

const RUN_EXAMPLES: &str = "\
Examples:
  Serve on one port:
    moat run --allow-listen=127.0.0.1:7000 echo-server.wasm 127.0.0.1:7000
  Talk to one service, with stdin and stdout relayed:
    moat run --allow-net=127.0.0.1:7000 ncat.wasm 127.0.0.1 7000
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

Exit status: the guest's (0, 1 when main returns an error, or its exit code);
134 if the guest traps; 2 for a bad command line; 1 if the guest cannot start.";

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
    /// Run a component (a wasm32-wasip2 program built with moat-sdk)
    #[command(after_help = RUN_EXAMPLES)]
    Run(RunArgs),
}

/// `moat run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// Allow connecting to these hosts (comma-separated HOST[:PORT] entries;
    /// no value: any host). Example: --allow-net=example.com:443,10.0.0.0/8
    #[arg(
        long = "allow-net",
        value_name = "LIST",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "*"
    )]
    pub(crate) allow_net: Vec<String>,

    /// Allow listening on these addresses (comma-separated HOST[:PORT]
    /// entries; no value: anywhere). Example: --allow-listen=127.0.0.1:8000-8100
    #[arg(
        long = "allow-listen",
        value_name = "LIST",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "*"
    )]
    pub(crate) allow_listen: Vec<String>,

    /// Set an environment variable for the guest (repeatable); KEY alone
    /// passes the host's value. Example: --env=RUST_LOG=debug
    #[arg(long = "env", value_name = "KEY[=VALUE]")]
    pub(crate) env: Vec<String>,

    /// Give the guest a host directory, under GUEST_DIR or the same path
    /// (repeatable). Example: --dir=./certs::/certs
    #[arg(long = "dir", value_name = "HOST_DIR[::GUEST_DIR]")]
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
