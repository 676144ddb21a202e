//! "Anything on the internet, nothing on my network", end to end: `moat
//! run` in a network namespace of the test's own whose only neighbour is a
//! LAN device (another namespace, support/netns.rs) that answers on every
//! address it has. Under the deny recipe a guest reaches none of them, by
//! address or by a name in /etc/hosts; the same run without the deny (the
//! control) does, so each case proves its path is real and that the test
//! can fail.
//!
//! Every case runs for both kinds of guest: a stock std::net program
//! (std-net, which looks names up itself and connects to addresses) and an
//! SDK guest (probe, which hands the host names). A denial is what the LAN
//! peer did not see (no connection, no datagram), a failed run, and moat's
//! line naming the deny entry; a control is the LAN's echo of the guest's
//! bytes.
//!
//! Needs root and iproute2 (skipped with the reason otherwise; with `CI`
//! set, failed).

use crate::support;

use std::fmt;
use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use crate::support::guests;
use crate::support::netns::{self, Echo, Lan, Responder};
use tokio::io::AsyncReadExt;

/// The `moat` under test: this build's, or the one `MOAT_LAN_BIN` names
/// (to see these tests fail against a moat without the fixes they check).
fn moat_bin() -> String {
    std::env::var("MOAT_LAN_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_moat").to_owned())
}

/// What the stock guest sends; the echo sends it back.
const MESSAGE: &str = "moat-lan-test";
/// What probe's `fin-first` sends.
const PROBE_MESSAGE: &str = "guest is done sending";

/// "Anything on the internet, nothing on my network."
const DENY_PRIVATE: Recipe = Recipe {
    flags: &["--allow-net", "--deny-net=private,metadata"],
    entry: "private",
};
/// The metadata services alone.
const DENY_METADATA: Recipe = Recipe {
    flags: &["--allow-net", "--deny-net=metadata"],
    entry: "metadata",
};
/// The control: the same runs without a deny.
const ALLOW_ALL: &[&str] = &["--allow-net"];

/// A case: an address on the LAN, the name in the client's /etc/hosts that
/// resolves to it (none for a second spelling of an address), and why a
/// guest must not reach it.
struct Case {
    address: &'static str,
    name: Option<&'static str>,
    why: &'static str,
}

const fn case(address: &'static str, name: &'static str, why: &'static str) -> Case {
    Case {
        address,
        name: Some(name),
        why,
    }
}

/// UDP to the LAN's groups, on SSDP's port.
const MULTICAST: &[Case] = &[
    case(
        "239.255.255.250",
        "ssdp.lan.test",
        "SSDP: every UPnP device on the LAN answers",
    ),
    case(
        "255.255.255.255",
        "broadcast.lan.test",
        "limited broadcast: every host on the link",
    ),
    case("224.0.0.1", "all-hosts.lan.test", "all hosts on the link"),
    case(
        "ff02::c",
        "ssdp-link6.lan.test",
        "SSDP over IPv6, link scope",
    ),
    case(
        "ff05::c",
        "ssdp-site6.lan.test",
        "SSDP over IPv6, site scope",
    ),
];
const SSDP_PORT: u16 = 1900;
const SSDP_V4: Ipv4Addr = Ipv4Addr::new(239, 255, 255, 250);
const SSDP_V6: &[Ipv6Addr] = &[
    Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0xc),
    Ipv6Addr::new(0xff05, 0, 0, 0, 0, 0, 0, 0xc),
];

/// TCP to IPv6 addresses that carry the LAN device's 10.0.0.5 (all of them
/// on its interface, so the control reaches a real listener; the kernel
/// assigns every one, IPv4-compatible `::a00:5` included).
const EMBEDDED: &[Case] = &[
    case(
        "64:ff9b::a00:5",
        "nat64.lan.test",
        "NAT64, well-known prefix (RFC 6052)",
    ),
    Case {
        address: "64:ff9b::10.0.0.5",
        name: None,
        why: "NAT64 with the IPv4 address written dotted",
    },
    case(
        "64:ff9b:1::a00:5",
        "nat64-local.lan.test",
        "local-use NAT64 (RFC 8215)",
    ),
    case("2002:a00:5::1", "6to4.lan.test", "6to4 (RFC 3056)"),
    case(
        "2001:0:a00:5::1",
        "teredo.lan.test",
        "Teredo, 10.0.0.5 in the server field (RFC 4380)",
    ),
    case(
        "::a00:5",
        "compat.lan.test",
        "IPv4-compatible (deprecated, RFC 4291)",
    ),
    case(
        "::ffff:0:a00:5",
        "siit.lan.test",
        "IPv4-translated, SIIT (RFC 2765)",
    ),
    case(
        "fec0::5",
        "site-local.lan.test",
        "site-local (deprecated, RFC 3879): denied as itself",
    ),
];

/// TCP to the cloud metadata services (also on the LAN device).
const METADATA: &[Case] = &[
    case(
        "169.254.170.2",
        "ecs.lan.test",
        "AWS ECS task metadata and credentials",
    ),
    case(
        "169.254.170.23",
        "eks-pod-identity.lan.test",
        "AWS EKS pod identity agent",
    ),
    case(
        "100.100.100.200",
        "alibaba.lan.test",
        "Alibaba Cloud instance metadata",
    ),
    case(
        "168.63.129.16",
        "azure-wireserver.lan.test",
        "Azure wire server",
    ),
    case(
        "fd00:ec2::23",
        "eks-pod-identity6.lan.test",
        "AWS EKS pod identity agent, IPv6",
    ),
    case(
        "169.254.169.254",
        "metadata.lan.test",
        "instance metadata (AWS, GCP, Azure, OpenStack, ...)",
    ),
    case(
        "fd00:ec2::254",
        "metadata6.lan.test",
        "AWS instance metadata, IPv6",
    ),
];
const ECHO_PORT: u16 = 80;

/// Two allowed names of one LAN address, one of them denied on a port.
const TRACKER: &str = "tracker.lan.test";
const CDN: &str = "cdn.lan.test";

/// Names of the unspecified addresses, for listen grants.
const UNSPECIFIED: &[(&str, &str)] = &[("0.0.0.0", "zero.lan.test"), ("::", "zero6.lan.test")];
const LISTEN_PORT: u16 = 28080;

/// The client's /etc/hosts: every name above.
fn hosts() -> Vec<(&'static str, &'static str)> {
    let mut hosts: Vec<_> = [MULTICAST, EMBEDDED, METADATA]
        .into_iter()
        .flatten()
        .filter_map(|c| Some((c.address, c.name?)))
        .collect();
    hosts.extend([("10.0.0.5", TRACKER), ("10.0.0.5", CDN)]);
    hosts.extend(UNSPECIFIED.iter().copied());
    hosts
}

/// A deny recipe: the flags, and the entry moat's message names.
struct Recipe {
    flags: &'static [&'static str],
    entry: &'static str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Guest {
    /// std-net: plain std::net, no moat dependency.
    Stock,
    /// probe: the SDK, moat:net.
    Sdk,
}

const GUESTS: [Guest; 2] = [Guest::Stock, Guest::Sdk];

impl Guest {
    fn path(self) -> &'static str {
        match self {
            Guest::Stock => guests::STD_NET,
            Guest::Sdk => guests::PROBE,
        }
    }
}

impl fmt::Display for Guest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Guest::Stock => "the stock guest (std-net)",
            Guest::Sdk => "the SDK guest (probe)",
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Proto {
    /// Connect, send, half-close, read the echo.
    Tcp,
    /// Send a datagram, wait for the answer from whoever sends it.
    Udp,
}

/// One thing a guest tries: its command line, and what it prints when the
/// LAN answered.
struct Attempt {
    guest: Guest,
    args: Vec<String>,
    /// Flags the attempt needs besides the recipe's (the SDK's UDP bind).
    flags: Vec<String>,
    reply: String,
}

impl Attempt {
    /// `proto` to `host`:`port`, `host` as the guest writes it; `v6` is
    /// the family of the address it leads to.
    fn new(guest: Guest, proto: Proto, host: &str, port: u16, v6: bool) -> Attempt {
        let port = port.to_string();
        let owned = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        let (args, flags, reply) = match (guest, proto) {
            (Guest::Stock, Proto::Tcp) => (
                owned(&["tcp-client", host, &port, MESSAGE]),
                vec![],
                format!("reply: {MESSAGE}"),
            ),
            (Guest::Sdk, Proto::Tcp) => (
                owned(&["fin-first", host, &port]),
                vec![],
                format!("got: {PROBE_MESSAGE}"),
            ),
            (Guest::Stock, Proto::Udp) => (
                owned(&["udp-client", host, &port, MESSAGE]),
                vec![],
                format!(": {MESSAGE}"),
            ),
            // A moat:net bind is a listen, even on port 0.
            (Guest::Sdk, Proto::Udp) => {
                let bind = if v6 { "::" } else { "0.0.0.0" };
                let grant = if v6 { "[::]:0" } else { "0.0.0.0:0" };
                (
                    owned(&["udp-ask", bind, host, &port, MESSAGE]),
                    vec![format!("--allow-listen={grant}")],
                    format!(": {MESSAGE}"),
                )
            }
        };
        Attempt {
            guest,
            args,
            flags,
            reply,
        }
    }

    /// A stock program that looks `names` up, then connects to `host`.
    fn after_lookups(names: &[&str], host: &str, port: u16) -> Attempt {
        let args = [
            "lookup-then-tcp",
            &names.join(","),
            host,
            &port.to_string(),
            MESSAGE,
        ];
        Attempt {
            guest: Guest::Stock,
            args: args.iter().map(|a| a.to_string()).collect(),
            flags: vec![],
            reply: format!("reply: {MESSAGE}"),
        }
    }
}

impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} `{}`", self.guest, self.args.join(" "))
    }
}

/// How a `moat run` ended.
struct Ran {
    /// The exit code (none: killed by a signal).
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl fmt::Display for Ran {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "exit {:?}\n  stdout: {}\n  stderr: {}",
            self.code,
            self.stdout.trim_end().replace('\n', "\n          "),
            self.stderr.trim_end().replace('\n', "\n          ")
        )
    }
}

/// A `moat run` in the client namespace, still running.
struct Running {
    child: tokio::process::Child,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    readers: Vec<tokio::task::JoinHandle<()>>,
    what: String,
}

/// Starts `moat run FLAGS GUEST ARGS` in the client namespace, with the
/// client's /etc/hosts and resolv.conf (`ip netns exec` mounts them).
fn start(lan: &Lan, flags: &[String], guest: Guest, args: &[String]) -> Running {
    start_component(lan, flags, guest.path(), &guest.to_string(), args)
}

/// [`start`] for any component: `path`, called `name` in messages.
fn start_component(
    lan: &Lan,
    flags: &[String],
    path: &str,
    name: &str,
    args: &[String],
) -> Running {
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("lan-cache");
    let what = format!("moat run {} {name} {}", flags.join(" "), args.join(" "));
    let mut child = tokio::process::Command::new("ip")
        .args(["netns", "exec", lan.client(), &moat_bin(), "run"])
        .arg(format!("--cache-dir={}", cache.display()))
        .args(flags)
        .arg(path)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("`ip netns exec CLIENT moat run` starts");
    let stdout = Arc::new(Mutex::new(Vec::new()));
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let readers = vec![
        collect(child.stdout.take().expect("piped stdout"), &stdout),
        collect(child.stderr.take().expect("piped stderr"), &stderr),
    ];
    Running {
        child,
        stdout,
        stderr,
        readers,
        what,
    }
}

fn collect(
    mut pipe: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    into: &Arc<Mutex<Vec<u8>>>,
) -> tokio::task::JoinHandle<()> {
    let into = Arc::clone(into);
    tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = pipe.read(&mut buf).await {
            into.lock()
                .expect("output lock")
                .extend_from_slice(&buf[..n]);
        }
    })
}

impl Running {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.stdout.lock().expect("output lock")).into_owned()
    }

    /// Waits until the run ended or printed `needle` on stdout; true if
    /// it printed it.
    async fn ended_or_printed(&mut self, needle: &str) -> bool {
        let what = format!("{} ended or printed {needle:?}", self.what);
        let (child, stdout) = (&mut self.child, &self.stdout);
        support::eventually(&what, || {
            matches!(child.try_wait(), Ok(Some(_)))
                || String::from_utf8_lossy(&stdout.lock().expect("output lock")).contains(needle)
        })
        .await;
        self.stdout().contains(needle)
    }

    /// Stops the run if it still runs, and returns how it ended.
    async fn kill(mut self) -> Ran {
        let _ = self.child.start_kill();
        self.finish().await
    }

    /// Waits for the run to end (bounded by support::PATIENCE).
    async fn finish(mut self) -> Ran {
        let status = support::within(&self.what, self.child.wait())
            .await
            .expect("wait for moat");
        for reader in self.readers.drain(..) {
            support::within(&self.what, reader)
                .await
                .expect("output reader");
        }
        let text = |b: &Arc<Mutex<Vec<u8>>>| {
            String::from_utf8_lossy(&b.lock().expect("output lock")).into_owned()
        };
        Ran {
            code: status.code(),
            stdout: text(&self.stdout),
            stderr: text(&self.stderr),
        }
    }
}

/// Runs `attempt` under `flags` (plus the attempt's own) to the end.
async fn run(lan: &Lan, flags: &[&str], attempt: &Attempt) -> Ran {
    let mut all: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
    all.extend(attempt.flags.iter().cloned());
    start(lan, &all, attempt.guest, &attempt.args)
        .finish()
        .await
}

/// What went wrong, every case of a test, reported together so that one
/// run of a test shows each case that fails.
#[derive(Default)]
struct Failures(Vec<String>);

impl Failures {
    fn push(&mut self, failure: String) {
        self.0.push(failure);
    }

    fn check(self, test: &str) {
        assert!(
            self.0.is_empty(),
            "{test}: {} case(s) failed:\n\n{}",
            self.0.len(),
            self.0.join("\n\n")
        );
    }
}

/// Runs `attempt` under `flags`: it must fail, with moat's line naming
/// `entry`, and the LAN peer (`seen` counts what it saw) must see nothing.
async fn expect_refused(
    lan: &Lan,
    seen: &dyn Fn() -> usize,
    attempt: &Attempt,
    flags: &[&str],
    entry: &str,
    why: &str,
    failures: &mut Failures,
) {
    let before = seen();
    let ran = run(lan, flags, attempt).await;
    let reached = seen() - before;
    let named = format!("denied by --deny-net={entry}");
    let mut wrong = Vec::new();
    if reached > 0 {
        wrong.push(format!(
            "the LAN peer saw {reached} connection(s) or datagram(s)"
        ));
    }
    if ran.stdout.contains(&attempt.reply) {
        wrong.push("the LAN answered".to_owned());
    }
    if !ran.stderr.contains(&named) {
        wrong.push(format!("stderr lacks {named:?}"));
    }
    if ran.code == Some(0) {
        wrong.push("the guest exited 0".to_owned());
    }
    if !wrong.is_empty() {
        failures.push(format!(
            "NOT REFUSED ({why}): {attempt} under {}: {}\n  {ran}",
            flags.join(" "),
            wrong.join("; ")
        ));
    }
}

/// Runs `attempt` under `flags`: the LAN peer must see it and echo the
/// guest's bytes back.
async fn expect_reached(
    lan: &Lan,
    seen: &dyn Fn() -> usize,
    attempt: &Attempt,
    flags: &[&str],
    why: &str,
    failures: &mut Failures,
) {
    let before = seen();
    let ran = run(lan, flags, attempt).await;
    let reached = seen() - before;
    if reached == 0 || !ran.stdout.contains(&attempt.reply) || ran.code != Some(0) {
        failures.push(format!(
            "CONTROL FAILED ({why}): {attempt} under {} should reach the LAN \
             (the peer saw {reached}; expected {:?} on stdout)\n  {ran}",
            flags.join(" "),
            attempt.reply
        ));
    }
}

/// How a case's host is written: the address, or the name that resolves
/// to it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Spelling {
    Address,
    Name,
}

/// What a case must show for one guest.
enum Expect {
    /// Refused under the deny, reached under the control.
    Both,
    /// Refused under the deny; no control run, for the reason given.
    DenyOnly(&'static str),
    /// wasmtime-wasi refuses the address before moat's check, allowed or
    /// not, with the error given (as the guest prints it): the guest
    /// cannot reach it, and moat has nothing to deny.
    RefusedBeforeMoat {
        error: &'static str,
        why: &'static str,
    },
}

/// Every case of `cases`, for both guests, spelled `spelling`: refused
/// under `deny`, reached under the control, except as `expect` says.
#[allow(clippy::too_many_arguments)]
async fn refused_but_reachable(
    lan: &Lan,
    seen: &dyn Fn() -> usize,
    cases: &[Case],
    proto: Proto,
    port: u16,
    spelling: Spelling,
    deny: &Recipe,
    expect: fn(Guest, &Case) -> Expect,
) -> Failures {
    let mut failures = Failures::default();
    for guest in GUESTS {
        for case in cases {
            let host = match spelling {
                Spelling::Address => case.address,
                Spelling::Name => match case.name {
                    Some(name) => name,
                    None => continue,
                },
            };
            let v6 = case.address.contains(':');
            let attempt = Attempt::new(guest, proto, host, port, v6);
            let why = format!("{}: {}", case.address, case.why);
            match expect(guest, case) {
                Expect::Both => {
                    let entry = deny.entry;
                    expect_refused(lan, seen, &attempt, deny.flags, entry, &why, &mut failures)
                        .await;
                    expect_reached(lan, seen, &attempt, ALLOW_ALL, &why, &mut failures).await;
                }
                Expect::DenyOnly(reason) => {
                    let entry = deny.entry;
                    expect_refused(lan, seen, &attempt, deny.flags, entry, &why, &mut failures)
                        .await;
                    eprintln!("{attempt}: no control run: {reason}");
                }
                Expect::RefusedBeforeMoat { error, why: before } => {
                    let why = format!("{why}; {before}");
                    let before = seen();
                    let ran = run(lan, deny.flags, &attempt).await;
                    let reached = seen() - before;
                    if reached > 0 || ran.code == Some(0) || !ran.stdout.contains(error) {
                        failures.push(format!(
                            "NOT REFUSED ({why}): {attempt} under {}: expected {error:?} \
                             (the peer saw {reached})\n  {ran}",
                            deny.flags.join(" ")
                        ));
                    }
                }
            }
        }
    }
    failures
}

fn both(_: Guest, _: &Case) -> Expect {
    Expect::Both
}

/// wasi:sockets has no SO_BROADCAST, and Linux refuses a broadcast from a
/// socket without it (EACCES): a stock program cannot broadcast, allowed
/// or not, so only the deny half runs for it.
fn multicast_expects(guest: Guest, case: &Case) -> Expect {
    if guest == Guest::Stock && case.address == "255.255.255.255" {
        Expect::DenyOnly("wasi:sockets cannot set SO_BROADCAST, so Linux refuses the send anyway")
    } else {
        Expect::Both
    }
}

/// wasmtime-wasi refuses IPv4-compatible addresses (`::a.b.c.d`, deprecated
/// since 2006) with invalid-argument before any check of moat's, so a stock
/// program can never connect to one; the SDK guest can, and is checked.
fn embedded_expects(guest: Guest, case: &Case) -> Expect {
    if guest == Guest::Stock && case.address == "::a00:5" {
        Expect::RefusedBeforeMoat {
            error: "InvalidInput",
            why: "wasmtime-wasi refuses IPv4-compatible addresses itself",
        }
    } else {
        Expect::Both
    }
}

fn skip(test: &str) -> bool {
    netns::skip_without_namespaces(test)
}

async fn multicast(test: &str, spelling: Spelling) {
    if skip(test) {
        return;
    }
    let lan = Lan::new(&hosts());
    let responder = Responder::start(&lan, SSDP_PORT, &[SSDP_V4], SSDP_V6);
    refused_but_reachable(
        &lan,
        &|| responder.datagrams(),
        MULTICAST,
        Proto::Udp,
        SSDP_PORT,
        spelling,
        &DENY_PRIVATE,
        multicast_expects,
    )
    .await
    .check(test);
}

async fn tcp_cases(
    test: &str,
    cases: &[Case],
    spelling: Spelling,
    deny: &Recipe,
    expect: fn(Guest, &Case) -> Expect,
) {
    if skip(test) {
        return;
    }
    let lan = Lan::new(&hosts());
    let echo = Echo::start(&lan, ECHO_PORT);
    refused_but_reachable(
        &lan,
        &|| echo.connections(),
        cases,
        Proto::Tcp,
        ECHO_PORT,
        spelling,
        deny,
        expect,
    )
    .await
    .check(test);
}

#[tokio::test]
async fn ssdp_broadcast_and_multicast_to_the_lan_are_refused_under_the_deny_private_recipe() {
    multicast(
        "ssdp_broadcast_and_multicast_to_the_lan_are_refused_under_the_deny_private_recipe",
        Spelling::Address,
    )
    .await;
}

#[tokio::test]
async fn names_of_lan_multicast_and_broadcast_addresses_are_refused_under_the_deny_private_recipe()
{
    multicast(
        "names_of_lan_multicast_and_broadcast_addresses_are_refused_under_the_deny_private_recipe",
        Spelling::Name,
    )
    .await;
}

#[tokio::test]
async fn ipv6_forms_that_carry_a_lan_address_are_refused_under_the_deny_private_recipe() {
    tcp_cases(
        "ipv6_forms_that_carry_a_lan_address_are_refused_under_the_deny_private_recipe",
        EMBEDDED,
        Spelling::Address,
        &DENY_PRIVATE,
        embedded_expects,
    )
    .await;
}

#[tokio::test]
async fn names_of_ipv6_forms_that_carry_a_lan_address_are_refused_under_the_deny_private_recipe() {
    tcp_cases(
        "names_of_ipv6_forms_that_carry_a_lan_address_are_refused_under_the_deny_private_recipe",
        EMBEDDED,
        Spelling::Name,
        &DENY_PRIVATE,
        embedded_expects,
    )
    .await;
}

#[tokio::test]
async fn cloud_metadata_services_are_refused_under_deny_metadata_alone() {
    tcp_cases(
        "cloud_metadata_services_are_refused_under_deny_metadata_alone",
        METADATA,
        Spelling::Address,
        &DENY_METADATA,
        both,
    )
    .await;
}

#[tokio::test]
async fn names_of_cloud_metadata_services_are_refused_under_deny_metadata_alone() {
    tcp_cases(
        "names_of_cloud_metadata_services_are_refused_under_deny_metadata_alone",
        METADATA,
        Spelling::Name,
        &DENY_METADATA,
        both,
    )
    .await;
}

/// The LAN device's echo on two ports, and a way to count each.
struct TwoPorts {
    denied: Echo,
    other: Echo,
}

const DENIED_PORT: u16 = 8080;
const OTHER_PORT: u16 = 8081;

impl TwoPorts {
    fn start(lan: &Lan) -> TwoPorts {
        TwoPorts {
            denied: Echo::start(lan, DENIED_PORT),
            other: Echo::start(lan, OTHER_PORT),
        }
    }

    fn on(&self, port: u16) -> &Echo {
        if port == DENIED_PORT {
            &self.denied
        } else {
            &self.other
        }
    }
}

#[tokio::test]
async fn a_deny_entry_with_a_port_binds_a_program_that_looked_the_name_up() {
    let test = "a_deny_entry_with_a_port_binds_a_program_that_looked_the_name_up";
    if skip(test) {
        return;
    }
    let lan = Lan::new(&hosts());
    let echo = TwoPorts::start(&lan);
    let deny = ["--allow-net", "--deny-net=tracker.lan.test:8080"];
    let entry = "tracker.lan.test:8080";
    let lan_v4 = netns::LAN_V4.to_string();
    let mut failures = Failures::default();
    for port in [DENIED_PORT, OTHER_PORT] {
        let attempts = [
            // std looks tracker up, then connects to its address.
            Attempt::new(Guest::Stock, Proto::Tcp, TRACKER, port, false),
            // A program that looked it up earlier connects to the address.
            Attempt::after_lookups(&[TRACKER], &lan_v4, port),
            Attempt::new(Guest::Sdk, Proto::Tcp, TRACKER, port, false),
        ];
        let seen = || echo.on(port).connections();
        for attempt in &attempts {
            let why = format!("{TRACKER}:{port}, {TRACKER} is 10.0.0.5");
            if port == DENIED_PORT {
                expect_refused(&lan, &seen, attempt, &deny, entry, &why, &mut failures).await;
                expect_reached(&lan, &seen, attempt, ALLOW_ALL, &why, &mut failures).await;
            } else {
                // The entry names port 8080 only: 8081 works under it.
                expect_reached(&lan, &seen, attempt, &deny, &why, &mut failures).await;
            }
        }
    }
    failures.check(test);
}

#[tokio::test]
async fn a_deny_entry_with_a_port_wins_for_an_address_two_allowed_names_share() {
    let test = "a_deny_entry_with_a_port_wins_for_an_address_two_allowed_names_share";
    if skip(test) {
        return;
    }
    let lan = Lan::new(&hosts());
    let echo = TwoPorts::start(&lan);
    let allow: &[&str] = &["--allow-net=*.lan.test"];
    let deny: &[&str] = &["--allow-net=*.lan.test", "--deny-net=tracker.lan.test:8080"];
    let entry = "tracker.lan.test:8080";
    let lan_v4 = netns::LAN_V4.to_string();
    let why = format!("{CDN} and {TRACKER} are both 10.0.0.5");
    let mut failures = Failures::default();
    for port in [DENIED_PORT, OTHER_PORT] {
        let seen = || echo.on(port).connections();
        let attempts = [
            Attempt::after_lookups(&[CDN, TRACKER], &lan_v4, port),
            Attempt::after_lookups(&[TRACKER, CDN], &lan_v4, port),
            Attempt::new(Guest::Sdk, Proto::Tcp, TRACKER, port, false),
        ];
        for attempt in &attempts {
            if port == DENIED_PORT {
                expect_refused(&lan, &seen, attempt, deny, entry, &why, &mut failures).await;
                expect_reached(&lan, &seen, attempt, allow, &why, &mut failures).await;
            } else {
                expect_reached(&lan, &seen, attempt, deny, &why, &mut failures).await;
            }
        }
    }
    failures.check(test);
}

#[tokio::test]
async fn a_name_based_listen_grant_never_binds_the_unspecified_address() {
    let test = "a_name_based_listen_grant_never_binds_the_unspecified_address";
    if skip(test) {
        return;
    }
    let lan = Lan::new(&hosts());
    let port = LISTEN_PORT.to_string();
    let mut failures = Failures::default();

    // The control: a listen on 0.0.0.0 granted as an address binds the
    // port, and the check below sees it.
    let flags = [format!("--allow-listen=0.0.0.0:{port}")];
    let args = ["tcp-server".to_owned(), format!("0.0.0.0:{port}")];
    let mut running = start(&lan, &flags, Guest::Stock, &args);
    let listening = running.ended_or_printed("listening on").await;
    let bound = netns::client_port_is_bound(&lan, LISTEN_PORT);
    let ran = running.kill().await;
    if !listening || !bound {
        failures.push(format!(
            "CONTROL FAILED: {} under {} should listen on port {port} \
             (printed it: {listening}; bound: {bound})\n  {ran}",
            args.join(" "),
            flags.join(" ")
        ));
    }

    for (address, name) in UNSPECIFIED {
        // The name resolves (so a failed listen below is not a failed lookup).
        let lookup = Attempt {
            guest: Guest::Stock,
            args: vec!["lookup".into(), name.to_string()],
            flags: vec![],
            reply: format!("address: {address}"),
        };
        let ran = run(&lan, ALLOW_ALL, &lookup).await;
        if !ran.stdout.contains(&lookup.reply) {
            failures.push(format!(
                "CONTROL FAILED: {lookup} should print {:?}\n  {ran}",
                lookup.reply
            ));
        }

        let flags = [format!("--allow-listen={name}:{port}")];
        for guest in GUESTS {
            let args: Vec<String> = match guest {
                Guest::Stock => vec!["tcp-server".into(), format!("{name}:{port}")],
                Guest::Sdk => vec!["listen".into(), name.to_string(), port.clone()],
            };
            let mut running = start(&lan, &flags, guest, &args);
            // The stock server would wait for a client once listening: look
            // at the port while it still runs.
            let listening = running.ended_or_printed("listening on").await;
            let bound = netns::client_port_is_bound(&lan, LISTEN_PORT);
            let ran = running.kill().await;
            // Refused as an invalid argument or denied, not failed otherwise.
            let refused = match guest {
                Guest::Stock => ["error: InvalidInput", "error: PermissionDenied"]
                    .iter()
                    .any(|e| ran.stdout.contains(e)),
                Guest::Sdk => ["error: invalid argument", "denied"]
                    .iter()
                    .any(|e| ran.stderr.contains(e)),
            };
            if listening || bound || ran.code == Some(0) || !refused {
                failures.push(format!(
                    "LISTENED ({name} is {address}): {guest} `{}` under {}: \
                     printed a listen: {listening}; port {port} bound: {bound}; \
                     refused as invalid or denied: {refused}\n  {ran}",
                    args.join(" "),
                    flags.join(" ")
                ));
            }
        }
    }
    failures.check(test);
}

/// Three clients of one /64 (one host, as a network hands out IPv6), the
/// address they reach, and a client of the next /64.
const SAME_64: [Ipv6Addr; 3] = [
    Ipv6Addr::new(0x2001, 0xdb8, 1, 2, 0, 0, 0, 0x11),
    Ipv6Addr::new(0x2001, 0xdb8, 1, 2, 0, 0, 0, 0x12),
    Ipv6Addr::new(0x2001, 0xdb8, 1, 2, 0, 0, 0, 0x13),
];
const SERVER_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 2, 0, 0, 0, 1);
const OTHER_64: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 3, 0, 0, 0, 1);
const PER_PEER_PORT: u16 = 28081;

/// A TCP connection from `from` to `to`, made in the client namespace,
/// whose reads give up after support::PATIENCE (a bound on a hang only).
fn connect_from(lan: &Lan, from: Ipv6Addr, to: SocketAddr) -> std::net::TcpStream {
    lan.in_client(move || {
        use socket2::{Domain, Protocol, Socket, Type};
        let socket =
            Socket::new(Domain::IPV6, Type::STREAM, Some(Protocol::TCP)).expect("a client socket");
        socket
            .bind(&SocketAddr::from((from, 0)).into())
            .unwrap_or_else(|e| panic!("bind {from}: {e}"));
        socket
            .connect(&to.into())
            .unwrap_or_else(|e| panic!("connect from {from} to {to}: {e}"));
        let stream = std::net::TcpStream::from(socket);
        stream
            .set_read_timeout(Some(support::PATIENCE))
            .expect("a read timeout");
        stream
    })
}

/// Sends `message` on `stream` and reads until as many bytes came back or
/// the connection ended: the echo, or what ended it.
fn echo_of(stream: &mut std::net::TcpStream, message: &[u8]) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Write};
    stream.write_all(message)?;
    let mut back = vec![0u8; message.len()];
    let mut got = 0;
    while got < back.len() {
        match stream.read(&mut back[got..])? {
            0 => break,
            n => got += n,
        }
    }
    back.truncate(got);
    Ok(back)
}

#[tokio::test]
async fn max_connections_per_peer_counts_an_ipv6_slash_64_as_one_peer() {
    let test = "max_connections_per_peer_counts_an_ipv6_slash_64_as_one_peer";
    if skip(test) {
        return;
    }
    let lan = Lan::new(&hosts());
    lan.add_client_address(&format!("{SERVER_V6}/64"));
    for client in SAME_64.iter().chain([&OTHER_64]) {
        lan.add_client_address(&format!("{client}/128"));
    }
    let flags = [
        format!("--allow-listen=[::]:{PER_PEER_PORT}"),
        "--max-connections-per-peer=2".to_owned(),
    ];
    let args = [format!("[::]:{PER_PEER_PORT}")];
    let mut server = start_component(&lan, &flags, guests::ECHO_SERVER, "echo-server", &args);
    assert!(
        server.ended_or_printed("listening on").await,
        "{}",
        server.kill().await
    );
    let to = SocketAddr::from((SERVER_V6, PER_PEER_PORT));

    // Two addresses of the /64 take its two connections, kept open.
    let mut kept = Vec::new();
    for from in &SAME_64[..2] {
        let mut stream = connect_from(&lan, *from, to);
        let message = format!("from {from}");
        let echo = echo_of(&mut stream, message.as_bytes());
        assert_eq!(
            echo.as_ref().map(Vec::as_slice).map_err(|e| e.kind()),
            Ok(message.as_bytes()),
            "{from} was not served"
        );
        kept.push(stream);
    }
    // A third address of the same /64 is the same peer: accepted and
    // dropped at once, never served. (Counted per address, it would be a
    // peer of its own, and one host with a /64 would have 2^64 shares.)
    let third = SAME_64[2];
    let mut stream = connect_from(&lan, third, to);
    let ended = echo_of(&mut stream, b"from the third");
    let refused = match &ended {
        Ok(echo) => echo.is_empty(),
        Err(e) => matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe),
    };
    assert!(
        refused,
        "{third}, the third client of its /64, was not refused: {:?}",
        ended.map(|echo| String::from_utf8_lossy(&echo).into_owned())
    );
    // Another /64 is another peer, served while the first has its share.
    let mut stream = connect_from(&lan, OTHER_64, to);
    let echo = echo_of(&mut stream, b"from another /64");
    assert_eq!(
        echo.as_ref().map(Vec::as_slice).map_err(|e| e.kind()),
        Ok(&b"from another /64"[..]),
        "{OTHER_64} was not served"
    );
    drop((kept, stream));
    let ran = server.kill().await;
    assert!(!ran.stderr.contains("panicked"), "{ran}");
}

/// The addresses the cases name are parsed the way the hosts file and the
/// guests parse them (a typo in a table would make a case vacuous).
#[test]
fn every_case_address_is_an_address() {
    for case in [MULTICAST, EMBEDDED, METADATA].into_iter().flatten() {
        let parsed: Result<IpAddr, _> = case.address.parse();
        assert!(parsed.is_ok(), "{} is not an address", case.address);
    }
    for address in netns::LAN_ADDRESSES {
        let parsed: Result<IpAddr, _> = address.parse();
        assert!(parsed.is_ok(), "{address} is not an address");
    }
}
