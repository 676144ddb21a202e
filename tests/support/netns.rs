//! A LAN of the test's own: two network namespaces joined by a veth pair,
//! a client side where `moat` runs and a LAN side where the peers listen,
//! deleted when dropped (also when the test panics).
//!
//! ```text
//!  client namespace                      LAN namespace
//!  lan0 10.0.0.2/24, fd00::2/64  <-->    lan0 10.0.0.5/24, fd00::5/64
//!  default routes via the LAN side       + every address of LAN_ADDRESSES
//! ```
//!
//! Nothing here touches the root namespace's interfaces or routes: the
//! veth pair is made inside the two namespaces, and the client's only
//! route out leads to the LAN side, which forwards nothing.
//!
//! Names for the client come from `/etc/netns/CLIENT/hosts`, which
//! `ip netns exec` mounts over `/etc/hosts` for the command it runs, beside
//! a `resolv.conf` naming 127.0.0.1 in the client namespace, where a
//! [`NameServer`] of the test's own answers every query at once with
//! NXDOMAIN: no query leaves the namespace, and a name's other family (the
//! AAAA of a name the hosts file gives only an A) fails at once instead of
//! waiting out the lookup timeout (hickory does not see the ICMP error of
//! a port where nothing listens).
//!
//! Needs root and `ip` (iproute2). Outside CI a test without them skips
//! with the reason; with `CI` set it fails.

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use socket2::{Domain, Protocol, SockRef, Socket, Type};

/// The client's addresses.
pub const CLIENT_V4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
pub const CLIENT_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
/// The LAN device's own addresses (the client's gateway, too).
pub const LAN_V4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 5);
pub const LAN_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 5);

/// Further addresses of the LAN device, each on its interface as a host
/// route: the IPv6 forms that carry 10.0.0.5, and the cloud metadata
/// services. The kernel assigns all of these (checked on Linux 6.x,
/// IPv4-compatible `::a00:5` included), so a control run reaches a real
/// listener at each.
pub const LAN_ADDRESSES: &[&str] = &[
    // NAT64 (RFC 6052), local-use NAT64 (RFC 8215), 6to4, Teredo (server
    // field), IPv4-compatible, SIIT (IPv4-translated), site-local.
    "64:ff9b::a00:5",
    "64:ff9b:1::a00:5",
    "2002:a00:5::1",
    "2001:0:a00:5::1",
    "::a00:5",
    "::ffff:0:a00:5",
    "fec0::5",
    // ECS task metadata, EKS pod identity, Alibaba, Azure wire server, AWS
    // IPv6 pod identity, and the classic instance-metadata service.
    "169.254.170.2",
    "169.254.170.23",
    "100.100.100.200",
    "168.63.129.16",
    "fd00:ec2::23",
    "169.254.169.254",
    "fd00:ec2::254",
];

/// The interface's name on both sides (names are per namespace).
const INTERFACE: &str = "lan0";

/// Why this machine cannot make network namespaces, if it cannot.
pub fn cannot_make_namespaces() -> Option<String> {
    let found = Command::new("ip")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !found {
        return Some("`ip` is not installed (Debian's iproute2 package provides it)".to_owned());
    }
    if !rustix::process::geteuid().is_root() {
        return Some("making network namespaces and veth pairs needs root".to_owned());
    }
    None
}

/// Skips the test (returns true) when namespaces cannot be made here,
/// saying why; with `CI` set, fails instead.
pub fn skip_without_namespaces(test: &str) -> bool {
    super::skip_unless(test, cannot_make_namespaces())
}

/// Runs `ip ARGS`, failing the test with its stderr if it fails.
fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("`ip` runs");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// The two namespaces and the hosts file of the client side.
pub struct Lan {
    client: String,
    lan: String,
    /// The LAN interface's index (for IPv6 multicast joins).
    lan_index: u32,
    /// The client's name server, once started.
    dns: Option<NameServer>,
}

impl Lan {
    /// Makes the namespaces, the veth pair and every address, and gives
    /// the client `hosts` (`(address, name)` pairs) as its /etc/hosts.
    pub fn new(hosts: &[(&str, &str)]) -> Lan {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        // One at a time: the first `ip netns add` of a boot makes
        // /var/run/netns a mount point, and two at once could both do it.
        static SETUP: Mutex<()> = Mutex::new(());
        let _one_at_a_time = SETUP.lock().unwrap_or_else(|e| e.into_inner());
        remove_leftovers();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let mut made = Lan {
            client: format!("moat-c-{pid}-{n}"),
            lan: format!("moat-l-{pid}-{n}"),
            lan_index: 0,
            dns: None,
        };
        // From here on, Drop removes whatever was made.
        let (c, l) = (made.client.clone(), made.lan.clone());
        ip(&["netns", "add", &c]);
        ip(&["netns", "add", &l]);
        ip(&[
            "link", "add", INTERFACE, "netns", &c, "type", "veth", "peer", "name", INTERFACE,
            "netns", &l,
        ]);
        for ns in [&c, &l] {
            ip(&["-n", ns, "link", "set", "lo", "up"]);
            // No link-local addresses: nothing waits for duplicate address
            // detection, and every IPv6 address below is added `nodad`.
            ip(&["-n", ns, "link", "set", INTERFACE, "addrgenmode", "none"]);
        }
        let add = |ns: &str, addr: &str| {
            let mut args = vec!["-n", ns, "addr", "add", addr, "dev", INTERFACE];
            if addr.contains(':') {
                args.push("nodad");
            }
            ip(&args);
        };
        add(&c, &format!("{CLIENT_V4}/24"));
        add(&c, &format!("{CLIENT_V6}/64"));
        add(&l, &format!("{LAN_V4}/24"));
        add(&l, &format!("{LAN_V6}/64"));
        for addr in LAN_ADDRESSES {
            let prefix = if addr.contains(':') { 128 } else { 32 };
            add(&l, &format!("{addr}/{prefix}"));
        }
        for ns in [&c, &l] {
            ip(&["-n", ns, "link", "set", INTERFACE, "up"]);
        }
        ip(&[
            "-n",
            &c,
            "route",
            "add",
            "default",
            "via",
            &LAN_V4.to_string(),
        ]);
        ip(&[
            "-n",
            &c,
            "-6",
            "route",
            "add",
            "default",
            "via",
            &LAN_V6.to_string(),
        ]);
        made.lan_index = interface_index(&l);
        made.write_client_files(hosts);
        made.dns = Some(NameServer::start(&made));
        made
    }

    /// Adds `address` (with its prefix length) to the client's interface,
    /// IPv6 without duplicate address detection; it goes with the
    /// namespace.
    pub fn add_client_address(&self, address: &str) {
        let mut args = vec!["-n", &self.client, "addr", "add", address, "dev", INTERFACE];
        if address.contains(':') {
            args.push("nodad");
        }
        ip(&args);
    }

    /// The client namespace's name (for `ip netns exec`).
    pub fn client(&self) -> &str {
        &self.client
    }

    /// The LAN interface's index, in the LAN namespace.
    pub fn lan_index(&self) -> u32 {
        self.lan_index
    }

    /// Runs `f` on a thread of its own inside the LAN namespace; sockets
    /// it makes stay there when used from any thread.
    pub fn in_lan<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        in_namespace(&self.lan, f)
    }

    /// Runs `f` on a thread of its own inside the client namespace.
    pub fn in_client<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        in_namespace(&self.client, f)
    }

    /// `/etc/netns/CLIENT`, where `ip netns exec` finds files to mount
    /// over `/etc`.
    fn etc(&self) -> PathBuf {
        PathBuf::from("/etc/netns").join(&self.client)
    }

    fn write_client_files(&self, hosts: &[(&str, &str)]) {
        let etc = self.etc();
        std::fs::create_dir_all(&etc).expect("make /etc/netns/CLIENT");
        let mut text = String::from("127.0.0.1 localhost\n::1 localhost\n");
        for (addr, name) in hosts {
            text.push_str(&format!("{addr} {name}\n"));
        }
        std::fs::write(etc.join("hosts"), text).expect("write the client's hosts");
        // The client's own name server (see NameServer): a name the hosts
        // file lacks fails at once, and no query leaves the namespace.
        std::fs::write(etc.join("resolv.conf"), "nameserver 127.0.0.1\n")
            .expect("write the client's resolv.conf");
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        // Deleting one end of the veth pair deletes the other; deleting a
        // namespace deletes its interfaces. Errors are ignored: Drop also
        // cleans up after a Lan that was only partly made.
        for ns in [&self.client, &self.lan] {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(self.etc());
    }
}

/// Deletes namespaces (and their /etc/netns files) that an earlier test
/// process, killed before its Drop ran, left behind.
fn remove_leftovers() {
    let Ok(entries) = std::fs::read_dir("/var/run/netns") else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix("moat-c-")
            .or_else(|| name.strip_prefix("moat-l-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        let Some(pid) = pid else { continue };
        if pid == std::process::id() || PathBuf::from(format!("/proc/{pid}")).exists() {
            continue;
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(PathBuf::from("/etc/netns").join(&name));
    }
}

/// `N` of `N: lan0@...: <...>` in `ip -o link show lan0`.
fn interface_index(ns: &str) -> u32 {
    let out = Command::new("ip")
        .args(["-n", ns, "-o", "link", "show", INTERFACE])
        .output()
        .expect("`ip` runs");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split(':')
        .next()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no index for {INTERFACE} in {ns}: {text}"))
}

fn in_namespace<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let handle = File::open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
        rustix::thread::move_into_link_name_space(
            handle.as_fd(),
            Some(rustix::thread::LinkNameSpaceType::Network),
        )
        .unwrap_or_else(|e| panic!("enter {path}: {e}"));
        f()
    })
    .join()
    .unwrap_or_else(|_| panic!("a thread in {ns} panicked"))
}

/// Whether something in the client namespace holds `port` on any address:
/// binding the unspecified addresses fails if anything is bound to the port.
pub fn client_port_is_bound(lan: &Lan, port: u16) -> bool {
    lan.in_client(move || {
        let in_use = |e: std::io::Error| e.kind() == ErrorKind::AddrInUse;
        let v4 = TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).err();
        let v6 = only_v6(
            Type::STREAM,
            SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)),
        )
        .err();
        v4.is_some_and(in_use) || v6.is_some_and(in_use)
    })
}

/// An IPv6-only socket bound to `addr` (a listener, for streams), so that
/// an IPv4 socket can hold the same port beside it.
fn only_v6(kind: Type, addr: SocketAddr) -> std::io::Result<Socket> {
    let protocol = if kind == Type::STREAM {
        Protocol::TCP
    } else {
        Protocol::UDP
    };
    let socket = Socket::new(Domain::IPV6, kind, Some(protocol))?;
    socket.set_only_v6(true)?;
    socket.bind(&addr.into())?;
    if kind == Type::STREAM {
        socket.listen(64)?;
    }
    Ok(socket)
}

/// What a peer saw, shared with its threads.
#[derive(Default)]
struct Seen {
    /// (the address the client reached, who it was).
    from: Mutex<Vec<(SocketAddr, SocketAddr)>>,
    stop: AtomicBool,
}

impl Seen {
    fn note(&self, local: SocketAddr, peer: SocketAddr) {
        self.from.lock().expect("seen lock").push((local, peer));
    }

    fn count(&self) -> usize {
        self.from.lock().expect("seen lock").len()
    }
}

/// A TCP echo server on every address of the LAN device, on one port: each
/// connection gets back what it sent once it half-closes.
pub struct Echo {
    port: u16,
    listeners: Vec<TcpListener>,
    seen: Arc<Seen>,
}

impl Echo {
    pub fn start(lan: &Lan, port: u16) -> Echo {
        let listeners = lan.in_lan(move || {
            let v4 = TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)).expect("echo on 0.0.0.0");
            let v6 = only_v6(
                Type::STREAM,
                SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)),
            )
            .expect("echo on [::]");
            vec![v4, TcpListener::from(v6)]
        });
        let seen = Arc::new(Seen::default());
        for listener in &listeners {
            let listener = listener.try_clone().expect("clone the echo listener");
            let seen = Arc::clone(&seen);
            std::thread::spawn(move || accept_loop(listener, seen));
        }
        Echo {
            port,
            listeners,
            seen,
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Connections accepted so far, on any address.
    pub fn connections(&self) -> usize {
        self.seen.count()
    }

    /// (the address the client reached, who it was) for every connection.
    pub fn seen(&self) -> Vec<(SocketAddr, SocketAddr)> {
        self.seen.from.lock().expect("seen lock").clone()
    }
}

fn accept_loop(listener: TcpListener, seen: Arc<Seen>) {
    loop {
        match listener.accept() {
            Ok((stream, peer)) => {
                let local = stream.local_addr().expect("local address");
                seen.note(local, peer);
                std::thread::spawn(move || echo(stream));
            }
            Err(_) if seen.stop.load(Ordering::Relaxed) => return,
            Err(_) => continue,
        }
    }
}

fn echo(mut stream: TcpStream) {
    // Bounds a broken client only.
    let _ = stream.set_read_timeout(Some(super::PATIENCE));
    let mut got = Vec::new();
    if stream.read_to_end(&mut got).is_ok() {
        let _ = stream.write_all(&got);
    }
    let _ = stream.shutdown(Shutdown::Both);
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.seen.stop.store(true, Ordering::Relaxed);
        for listener in &self.listeners {
            // Wakes the accept waiting on it (it fails, and sees `stop`).
            let _ = SockRef::from(listener).shutdown(Shutdown::Both);
        }
    }
}

/// A UDP responder on the LAN device, as an SSDP device is: on `port` of
/// every address, joined to the IPv4 and IPv6 groups given on the LAN
/// interface, answering each datagram with the same bytes, unicast, from
/// its own address.
pub struct Responder {
    sockets: Vec<UdpSocket>,
    seen: Arc<Seen>,
}

impl Responder {
    pub fn start(
        lan: &Lan,
        port: u16,
        v4_groups: &[Ipv4Addr],
        v6_groups: &[Ipv6Addr],
    ) -> Responder {
        let (v4_groups, v6_groups) = (v4_groups.to_vec(), v6_groups.to_vec());
        let index = lan.lan_index();
        let sockets = lan.in_lan(move || {
            let v4 = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, port)).expect("responder on 0.0.0.0");
            for group in &v4_groups {
                v4.join_multicast_v4(group, &LAN_V4)
                    .unwrap_or_else(|e| panic!("join {group}: {e}"));
            }
            let v6 = UdpSocket::from(
                only_v6(Type::DGRAM, SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)))
                    .expect("responder on [::]"),
            );
            for group in &v6_groups {
                v6.join_multicast_v6(group, index)
                    .unwrap_or_else(|e| panic!("join {group}: {e}"));
            }
            vec![v4, v6]
        });
        let seen = Arc::new(Seen::default());
        for socket in &sockets {
            let socket = socket.try_clone().expect("clone the responder socket");
            let seen = Arc::clone(&seen);
            std::thread::spawn(move || respond(socket, seen));
        }
        Responder { sockets, seen }
    }

    /// Datagrams received so far.
    pub fn datagrams(&self) -> usize {
        self.seen.count()
    }
}

fn respond(socket: UdpSocket, seen: Arc<Seen>) {
    let local = socket.local_addr().expect("local address");
    let mut buf = [0u8; 2048];
    loop {
        if seen.stop.load(Ordering::Relaxed) {
            return;
        }
        if let Ok((n, from)) = socket.recv_from(&mut buf) {
            if seen.stop.load(Ordering::Relaxed) {
                return;
            }
            seen.note(local, from);
            let _ = socket.send_to(&buf[..n], from);
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.seen.stop.store(true, Ordering::Relaxed);
        for socket in &self.sockets {
            // Linux wakes a receive waiting on an unconnected UDP socket
            // that is shut down (and answers ENOTCONN, ignored here).
            let _ = SockRef::from(socket).shutdown(Shutdown::Both);
        }
    }
}

/// A name server on 127.0.0.1:53 in the client namespace that answers
/// every query at once with NXDOMAIN (the client's names are all in its
/// hosts file), counting the queries.
pub struct NameServer {
    socket: UdpSocket,
    seen: Arc<Seen>,
}

impl NameServer {
    fn start(lan: &Lan) -> NameServer {
        let socket = lan.in_client(|| {
            UdpSocket::bind((Ipv4Addr::LOCALHOST, 53)).expect("name server on 127.0.0.1:53")
        });
        let seen = Arc::new(Seen::default());
        let (serving, seen_there) = (
            socket.try_clone().expect("clone the name server socket"),
            Arc::clone(&seen),
        );
        std::thread::spawn(move || serve_dns(serving, seen_there));
        NameServer { socket, seen }
    }
}

fn serve_dns(socket: UdpSocket, seen: Arc<Seen>) {
    let local = socket.local_addr().expect("local address");
    let mut buf = [0u8; 4096];
    while !seen.stop.load(Ordering::Relaxed) {
        if let Ok((n, from)) = socket.recv_from(&mut buf) {
            if seen.stop.load(Ordering::Relaxed) {
                return;
            }
            seen.note(local, from);
            if let Some(reply) = nxdomain(&buf[..n]) {
                let _ = socket.send_to(&reply, from);
            }
        }
    }
}

/// The NXDOMAIN answer to a DNS query: its header and question, with QR,
/// RA and RCODE 3 set and no records (a malformed query gets none).
fn nxdomain(query: &[u8]) -> Option<Vec<u8>> {
    // The question: QNAME's labels up to the root label, QTYPE, QCLASS.
    let mut end = 12;
    loop {
        let len = usize::from(*query.get(end)?);
        end += 1;
        if len == 0 {
            break;
        }
        if len & 0xc0 != 0 {
            return None;
        }
        end += len;
    }
    end += 4;
    let mut reply = query.get(..end)?.to_vec();
    // QR, the query's opcode and RD; RA and NXDOMAIN.
    reply[2] = 0x80 | (query[2] & 0x79);
    reply[3] = 0x80 | 3;
    // One question, no answers, no authority, no additional records.
    reply[4..12].copy_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
    Some(reply)
}

impl Drop for NameServer {
    fn drop(&mut self) {
        self.seen.stop.store(true, Ordering::Relaxed);
        let _ = SockRef::from(&self.socket).shutdown(Shutdown::Both);
    }
}
