//! The command line, as clap sees it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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

Bounds (defaults in brackets; a policy file takes the same keys, see --policy):
  --max-sockets [1024]  --max-waiting-calls [4096]  --max-memory [512MiB]
  --max-host-memory [64MiB]  --timeout [none]
  --max-lookups [16]  --lookup-timeout [15s]  --tls-handshake-timeout [10s]
  --max-connections, --max-connections-per-peer [none]: per listener

Exit status: the guest's (0, 1 when main returns an error, or its exit code);
134 if the guest traps or reaches --max-memory; 124 past --timeout; 2 for a bad
command line or policy file; 1 if the guest cannot start.";

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

    /// Refuse connecting to these, whatever --allow-net allows: entries as in
    /// allowlists, or the words private and metadata; judged on the host as
    /// written and on every address a name resolves to.
    /// Example: --deny-net=private,metadata
    #[arg(long = "deny-net", value_name = "LIST", require_equals = true)]
    pub(crate) deny_net: Vec<String>,

    /// Refuse listening on these, whatever --allow-listen allows.
    /// Example: --deny-listen=0.0.0.0,::
    #[arg(long = "deny-listen", value_name = "LIST", require_equals = true)]
    pub(crate) deny_listen: Vec<String>,

    /// Read grants, deny lists and bounds from a TOML file (keys as the flags,
    /// without --); flags add to it and override its bounds.
    #[arg(long = "policy", value_name = "FILE")]
    pub(crate) policy: Option<PathBuf>,

    /// Most sockets and listeners open at once, closed sockets still sending
    /// included [default: 1024]
    #[arg(long = "max-sockets", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_sockets: Option<u32>,

    /// Most UDP receives, accepts and name lookups waiting at once
    /// [default: 4096]
    #[arg(long = "max-waiting-calls", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_waiting_calls: Option<u32>,

    /// Most linear memory the guest may grow to, e.g. 64MiB [default: 512MiB]
    #[arg(long = "max-memory", value_name = "SIZE", value_parser = moat_host::policy_file::parse_size)]
    pub(crate) max_memory: Option<u64>,

    /// Most host memory the guest may make moat keep (DNS answers, TLS
    /// configurations, send backlogs, the record of resolved names), e.g.
    /// 256MiB [default: 64MiB]
    #[arg(long = "max-host-memory", value_name = "SIZE", value_parser = moat_host::policy_file::parse_size)]
    pub(crate) max_host_memory: Option<u64>,

    /// Stop the guest after this long, e.g. 30s, 5m [default: none]
    #[arg(long = "timeout", value_name = "DURATION", value_parser = moat_host::policy_file::parse_duration)]
    pub(crate) timeout: Option<std::time::Duration>,

    /// Most name lookups in flight at once [default: 16]
    #[arg(long = "max-lookups", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_lookups: Option<u32>,

    /// Longest one name lookup may take [default: 15s]
    #[arg(long = "lookup-timeout", value_name = "DURATION", value_parser = moat_host::policy_file::parse_duration)]
    pub(crate) lookup_timeout: Option<std::time::Duration>,

    /// Longest any TLS handshake may take, whatever the guest asks [default: 10s]
    #[arg(long = "tls-handshake-timeout", value_name = "DURATION", value_parser = moat_host::policy_file::parse_duration)]
    pub(crate) tls_handshake_timeout: Option<std::time::Duration>,

    /// Most connections one listener has open at once, for listeners whose
    /// guest sets no cap [default: none]
    #[arg(long = "max-connections", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_connections: Option<u32>,

    /// Most connections one listener has open from one peer address, for
    /// listeners whose guest sets no cap [default: none]
    #[arg(long = "max-connections-per-peer", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_connections_per_peer: Option<u32>,

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
