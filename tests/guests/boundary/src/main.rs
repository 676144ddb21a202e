//! Test guest: reads bytes from stdin and turns them into a sequence of
//! calls on moat:net (through the SDK), wasi:sockets (through std::net)
//! and wasi:http (0.2 through wasip2's raw bindings: fields, requests,
//! bodies filled and never sent, sends, responses left unread; 0.3's
//! fields and requests through wasip3's): connects, listens, binds,
//! sends, receives, TLS upgrades, options, drops at every point, futures
//! cancelled midway, tasks aborted, handles the guest was never given, and
//! an exit or a trap at any point, with hosts from a dictionary of
//! spellings and sizes from zero to a MiB. The test that runs it
//! (tests/whole_process/boundary.rs) gives it a small grant, a sink, a
//! blackhole and a canary, and checks the host after each sequence.
//!
//! Arguments: SINK_PORT BLACKHOLE_PORT CANARY_PORT UDP_SINK_PORT.
//!
//! Each write the guest saw complete to the sink is reported as a line
//! `sent LOCAL_PORT TOTAL` (its connection's total so far): the test checks
//! that at least that many bytes arrived, in order. Every byte sent to the
//! sink, on any connection, is `pattern(local port, offset)`.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::time::Duration;

use moat_sdk::time::{sleep, timeout};
use moat_sdk::{
    ConnectOptions, Error, Keepalive, TcpListener, TcpStream, TlsConnectOptions, UdpSocket,
};

/// The byte at `offset` of what a connection from `port` sends the sink.
/// The test computes the same.
fn pattern(port: u16, offset: u64) -> u8 {
    (offset.wrapping_mul(0x9E37_79B1) >> 11) as u8 ^ (port as u8) ^ ((port >> 8) as u8)
}

fn patterned(port: u16, from: u64, len: usize) -> Vec<u8> {
    (0..len as u64).map(|i| pattern(port, from + i)).collect()
}

/// Hosts as a guest may write them: granted, denied, every spelling of
/// loopback, the unspecified, multicast and broadcast addresses, IPv6
/// forms that carry IPv4, names that are no names. None that the grant
/// allows leaves the machine: the test sends nothing off loopback.
const HOSTS: &[&str] = &[
    "127.0.0.1",
    "127.0.0.1",
    "localhost",
    "::ffff:127.0.0.1",
    "[::ffff:127.0.0.1]",
    "::1",
    "[::1]",
    "0.0.0.0",
    "::",
    "::ffff:0.0.0.0",
    "224.0.0.1",
    "239.255.255.250",
    "255.255.255.255",
    "127.0.0.2",
    "10.0.0.1",
    "169.254.169.254",
    // IPv6 forms that carry an IPv4 address (NAT64, 6to4,
    // IPv4-compatible): of one the grant does not name, and of the
    // granted 127.0.0.1, which the grant does not admit either (the kernel
    // would route them off the machine).
    "64:ff9b::a00:1",
    "2002:a00:1::1",
    "::a00:1",
    "64:ff9b::7f00:1",
    "2002:7f00:1::1",
    "::7f00:1",
    "2130706433",
    "0x7f000001",
    "127.1",
    "LOCALHOST.",
    "",
    "a..b",
    "[127.0.0.1]",
    "example.invalid",
    "xn--",
    "-",
    "[fe80::1%1]",
];

const SIZES: &[usize] = &[0, 1, 7, 1000, 65_536, 1 << 20];

/// One connection the sequence holds.
struct Conn {
    stream: TcpStream,
    /// Its local port, when it goes to the sink and the port is its own in
    /// this run (a port reused by a later connection is not accounted).
    sink_port: Option<u16>,
    /// What the guest saw written to the sink on it.
    sent: u64,
}

struct State {
    sink: u16,
    ports: [u16; 6],
    conns: Vec<Conn>,
    listeners: Vec<TcpListener>,
    udp: Vec<UdpSocket>,
    used_ports: HashSet<u16>,
    /// wasi:http objects the sequence keeps, each until a step drops it or
    /// the run ends.
    http: Vec<Http>,
}

/// A wasi:http object the guest keeps (only to keep it: the host holds
/// what it holds for as long as the handle lives).
#[allow(dead_code)]
enum Http {
    Fields(wasip2::http::types::Fields),
    Request(wasip2::http::types::OutgoingRequest),
    /// A request with its body, filled as far as the body's stream took
    /// it without waiting, and never sent (the stream first: a body is
    /// dropped only after its stream).
    Body(
        wasip2::io::streams::OutputStream,
        wasip2::http::types::OutgoingBody,
        wasip2::http::types::OutgoingRequest,
    ),
    Sent(wasip2::http::types::FutureIncomingResponse),
    Response(wasip2::http::types::IncomingResponse),
    Fields3(wasip3::http::types::Fields),
    Request3(wasip3::http::types::Request),
}

/// The input, read an argument at a time; 0 past its end.
struct Input<'a>(std::slice::Iter<'a, u8>);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        self.0.next().copied().unwrap_or(0)
    }
    fn flag(&mut self) -> bool {
        self.byte() & 1 == 1
    }
    fn pick<'t, T>(&mut self, from: &'t [T]) -> &'t T {
        &from[usize::from(self.byte()) % from.len()]
    }
    fn index(&mut self, len: usize) -> Option<usize> {
        let b = usize::from(self.byte());
        (len > 0).then(|| b % len)
    }
}

impl State {
    fn host_port(&self, input: &mut Input<'_>) -> (&'static str, u16) {
        let host = *input.pick(HOSTS);
        let port = *input.pick(&self.ports);
        (host, port)
    }

    /// Registers a new connection; accounted when it reached the sink from
    /// a port not used before in this run.
    fn add(&mut self, stream: TcpStream) {
        let local = stream.local_addr().ok().map(|a| a.port());
        let to_sink = stream.peer_addr().ok().map(|a| a.port()) == Some(self.sink);
        let sink_port = match local {
            Some(port) if to_sink && self.used_ports.insert(port) => Some(port),
            Some(port) => {
                self.used_ports.insert(port);
                None
            }
            None => None,
        };
        self.conns.push(Conn {
            stream,
            sink_port,
            sent: 0,
        });
    }
}

async fn step(op: u8, input: &mut Input<'_>, s: &mut State) {
    match op % OPS {
        0 => {
            // A quarter of the connects go to the sink, so that many
            // sequences have bytes to account for.
            if input.byte() < 64 {
                if let Ok(stream) = TcpStream::connect(("127.0.0.1", s.sink)).await {
                    s.add(stream);
                }
                return;
            }
            let (host, port) = s.host_port(input);
            let options = ConnectOptions {
                timeout: match input.byte() % 4 {
                    0 => None,
                    1 => Some(Duration::ZERO),
                    _ => Some(Duration::from_millis(200)),
                },
                nodelay: input.flag(),
                send_buffer_size: *input.pick(&[None, Some(0), Some(1), Some(u64::MAX)]),
                receive_buffer_size: *input.pick(&[None, Some(0), Some(u64::MAX)]),
                ..ConnectOptions::default()
            };
            if let Ok(stream) = TcpStream::connect_with((host, port), &options).await {
                s.add(stream);
            }
        }
        1 => {
            let size = *input.pick(SIZES);
            // Half the writes go to the newest connection, often the sink's.
            let newest = input.flag();
            let Some(i) = input.index(s.conns.len()) else {
                return;
            };
            let i = if newest { s.conns.len() - 1 } else { i };
            let conn = &mut s.conns[i];
            // Up to a MiB to the sink, which reads everything; a little to
            // anything else (the guest's own connections, which nothing may
            // read: a MiB would fill their buffers and block the sequence).
            let size = if conn.sink_port.is_some() {
                size
            } else {
                size.min(1000)
            };
            let port = conn.sink_port.unwrap_or(0);
            let data = patterned(port, conn.sent, size);
            if conn.stream.write_all(&data).await.is_ok()
                && let Some(port) = conn.sink_port
            {
                conn.sent += size as u64;
                println!("sent {port} {}", conn.sent);
            }
        }
        2 => {
            let size = *input.pick(&[0usize, 1, 4096, 1 << 20]);
            let Some(i) = input.index(s.conns.len()) else {
                return;
            };
            let mut buf = vec![0u8; size];
            // Cancelled midway unless something is there already.
            let _ = timeout(Duration::from_millis(2), s.conns[i].stream.read(&mut buf)).await;
        }
        3 => {
            if let Some(i) = input.index(s.conns.len()) {
                drop(s.conns.swap_remove(i));
            }
        }
        4 => {
            if let Some(i) = input.index(s.conns.len()) {
                let _ = s.conns[i].stream.shutdown().await;
            }
        }
        5 => {
            let (host, port) = s.host_port(input);
            let port = if input.flag() { 0 } else { port };
            if let Ok(listener) = TcpListener::bind((host, port)).await {
                s.listeners.push(listener);
            }
        }
        6 => {
            let Some(i) = input.index(s.listeners.len()) else {
                return;
            };
            if let Ok(Ok((stream, _))) =
                timeout(Duration::from_millis(2), s.listeners[i].accept()).await
            {
                s.add(stream);
            }
        }
        7 => {
            if let Some(i) = input.index(s.listeners.len()) {
                drop(s.listeners.swap_remove(i));
            }
        }
        8 => {
            let host = *input.pick(HOSTS);
            if let Ok(udp) = UdpSocket::bind((host, 0)).await {
                s.udp.push(udp);
            }
        }
        9 => {
            let (host, port) = s.host_port(input);
            let size = *input.pick(&[0usize, 1, 512, 65_507, 70_000]);
            let Some(i) = input.index(s.udp.len()) else {
                return;
            };
            let _ = s.udp[i].send_to(&vec![0x5a; size], (host, port)).await;
        }
        10 => {
            if let Some(i) = input.index(s.udp.len()) {
                let _ = timeout(Duration::from_millis(2), s.udp[i].recv()).await;
            }
        }
        11 => {
            // TLS on a connection that is not the sink's (its bytes would
            // not be the pattern), cancelled midway or failing.
            let Some(i) = input.index(s.conns.len()) else {
                return;
            };
            if s.conns[i].sink_port.is_some() {
                return;
            }
            let conn = &mut s.conns[i];
            let options = TlsConnectOptions::default();
            let upgrade = conn.stream.start_tls("localhost", &[], &options);
            let _ = timeout(Duration::from_millis(20), upgrade).await;
        }
        12 => {
            let (host, port) = s.host_port(input);
            if port == s.sink {
                return;
            }
            let options = TlsConnectOptions::default();
            let connecting = TcpStream::connect_tls((host, port), &options);
            let _ = timeout(Duration::from_millis(20), connecting).await;
        }
        13 => {
            // A task that connects to the sink and writes, aborted after a
            // few turns: its bytes may have gone, partly, in order.
            let sink = s.sink;
            let turns = input.byte() % 8;
            let task = moat_sdk::spawn(async move {
                let Ok(mut stream) = TcpStream::connect(("127.0.0.1", sink)).await else {
                    return;
                };
                let port = stream.local_addr().map(|a| a.port()).unwrap_or(0);
                let _ = stream.write_all(&patterned(port, 0, 256 << 10)).await;
            });
            for _ in 0..turns {
                moat_sdk::task::yield_now().await;
            }
            task.abort();
        }
        14 => {
            // wasi:sockets, through std::net.
            let (host, port) = s.host_port(input);
            let size = *input.pick(&SIZES[..5]);
            let Ok(mut stream) = std::net::TcpStream::connect((host, port)) else {
                return;
            };
            let Ok(local) = stream.local_addr() else {
                return;
            };
            let to_sink = stream.peer_addr().map(|a| a.port()).ok() == Some(s.sink);
            let fresh = s.used_ports.insert(local.port());
            let size = if to_sink { size } else { size.min(1000) };
            let data = patterned(if to_sink { local.port() } else { 0 }, 0, size);
            if stream.write_all(&data).is_ok() && to_sink && fresh {
                println!("sent {} {size}", local.port());
            }
            if input.flag() {
                let _ = stream.set_nonblocking(true);
                let _ = stream.read(&mut [0u8; 16]);
            }
        }
        15 => {
            let (host, port) = s.host_port(input);
            if let Ok(udp) = std::net::UdpSocket::bind("127.0.0.1:0") {
                let _ = udp.send_to(b"std", (host, port));
            }
        }
        16 => {
            if let Some(i) = input.index(s.conns.len()) {
                let stream = &s.conns[i].stream;
                let _ = stream.set_nodelay(input.flag());
                let forever = Some(Duration::from_secs(u64::MAX / 4));
                let _ = stream.set_keepalive(Some(Keepalive {
                    idle: forever,
                    interval: Some(Duration::ZERO),
                    retries: Some(u32::MAX),
                }));
            }
        }
        17 => {
            if input.byte() < 8 {
                moat_sdk::exit(3);
            }
        }
        18 => {
            if input.byte() < 8 {
                panic!("boundary: trapping midway");
            }
        }
        // Rare, as exits and traps are: a bad index ends the run.
        19 if input.byte() < 8 => {
            let index = if input.flag() {
                u32::from(input.byte())
            } else {
                u32::from_le_bytes([input.byte(), input.byte(), input.byte(), input.byte()])
            };
            forge(input.byte(), index);
        }
        20 => http_fields(input, s),
        21 => {
            // A copy of a kept map, made by a deletion from its clone.
            let kept: Vec<usize> = (0..s.http.len())
                .filter(|&i| matches!(s.http[i], Http::Fields(_)))
                .collect();
            if let Some(j) = input.index(kept.len())
                && let Http::Fields(fields) = &s.http[kept[j]]
            {
                let copy = fields.clone();
                let _ = copy.delete("x-0");
                s.http.push(Http::Fields(copy));
            }
        }
        22 => http_bodies(input, s),
        23 => http_send(input, s),
        24 => {
            if let Some(i) = input.index(s.http.len()) {
                drop(s.http.swap_remove(i));
            }
        }
        25 => http3_fields(input, s),
        26 => http3_request(input, s),
        _ => sleep(Duration::from_millis(1)).await,
    }
}

/// How many kinds of step there are (`step`'s arms, the last a pause).
const OPS: u8 = 28;

/// Ports an HTTP request may go to: never the sink (whose every byte must
/// be the pattern).
fn http_port(input: &mut Input<'_>, s: &State) -> u16 {
    let ports: Vec<u16> = s.ports.iter().copied().filter(|&p| p != s.sink).collect();
    *input.pick(&ports)
}

/// Sizes a request's path or method may take.
const TEXT_SIZES: &[usize] = &[0, 1, 100, 8000, 65_000, 200_000];

/// Up to 16 fields, each filled with names `x-0`, `x-1`, ... of values
/// up to 8000 bytes until it holds about a size from zero to 256 KiB (its
/// bound is 128 KiB at the default head bound); kept.
fn http_fields(input: &mut Input<'_>, s: &mut State) {
    let count = usize::from(input.byte() % 16) + 1;
    let target = *input.pick(&[0usize, 1000, 16 << 10, 128 << 10, 256 << 10]);
    let value = vec![b'v'; *input.pick(&[0usize, 10, 1000, 8000])];
    for _ in 0..count {
        let fields = wasip2::http::types::Fields::new();
        let mut filled = 0;
        let mut k = 0;
        while filled < target {
            if fields.append(&format!("x-{k}"), &value).is_err() {
                break;
            }
            filled += value.len() + 4;
            k += 1;
        }
        s.http.push(Http::Fields(fields));
    }
}

/// A request to a host from the dictionary, with a path and a method of
/// sizes from the input.
fn http_request(input: &mut Input<'_>, s: &State) -> wasip2::http::types::OutgoingRequest {
    use wasip2::http::types::{Method, OutgoingRequest, Scheme};
    let request = OutgoingRequest::new(wasip2::http::types::Fields::new());
    let host = *input.pick(HOSTS);
    let port = http_port(input, s);
    let authority = if input.flag() {
        format!("{host}:{port}")
    } else {
        format!("user@{host}:{port}")
    };
    let _ = request.set_authority(Some(&authority));
    let _ = request.set_scheme(Some(if input.flag() {
        &Scheme::Http
    } else {
        &Scheme::Https
    }));
    let path = format!("/{}", "p".repeat(*input.pick(TEXT_SIZES)));
    let _ = request.set_path_with_query(Some(&path));
    if input.flag() {
        let method = "M".repeat(*input.pick(TEXT_SIZES)).max("POST".to_owned());
        let _ = request.set_method(&Method::Other(method));
    }
    request
}

/// Up to 16 requests, each with its body filled as far as its stream takes
/// it without waiting; none sent, all kept.
fn http_bodies(input: &mut Input<'_>, s: &mut State) {
    let count = usize::from(input.byte() % 16) + 1;
    let chunk = vec![0x42u8; 1 << 20];
    for _ in 0..count {
        let request = http_request(input, s);
        let Ok(body) = request.body() else {
            s.http.push(Http::Request(request));
            return;
        };
        let Ok(stream) = body.write() else {
            return;
        };
        while let Ok(permit) = stream.check_write() {
            if permit == 0
                || stream
                    .write(&chunk[..(permit as usize).min(chunk.len())])
                    .is_err()
            {
                break;
            }
        }
        s.http.push(Http::Body(stream, body, request));
    }
}

/// Sends a kept request (its body unfinished) or a new one, keeps the
/// future, and keeps the response if it is there already, unread.
fn http_send(input: &mut Input<'_>, s: &mut State) {
    let kept = input
        .index(s.http.len())
        .filter(|&i| matches!(s.http[i], Http::Request(_) | Http::Body(..)));
    let request = match kept.map(|i| s.http.swap_remove(i)) {
        Some(Http::Request(request)) => request,
        Some(Http::Body(stream, body, request)) => {
            // Sent with its body unfinished: the body goes with it.
            drop(stream);
            std::mem::forget(body);
            request
        }
        _ => http_request(input, s),
    };
    if let Ok(future) = wasip2::http::outgoing_handler::handle(request, None) {
        match future.get() {
            Some(Ok(Ok(response))) => s.http.push(Http::Response(response)),
            _ => s.http.push(Http::Sent(future)),
        }
    }
}

/// Up to 16 wasi:http 0.3 fields, filled as the 0.2 ones are; kept.
fn http3_fields(input: &mut Input<'_>, s: &mut State) {
    let count = usize::from(input.byte() % 16) + 1;
    let entries = usize::from(input.byte()) * 4;
    let value = vec![b'v'; *input.pick(&[0usize, 10, 1000])];
    for _ in 0..count {
        let list: Vec<(String, Vec<u8>)> = (0..entries)
            .map(|k| (format!("x-{k}"), value.clone()))
            .collect();
        if let Ok(fields) = wasip3::http::types::Fields::from_list(&list) {
            let _ = fields.append("x-more", &value);
            s.http.push(Http::Fields3(fields));
        }
    }
}

/// A wasi:http 0.3 request, made with a path, method and authority of
/// sizes from the input, never sent; kept.
fn http3_request(input: &mut Input<'_>, s: &mut State) {
    use wasip3::http::types::{ErrorCode, Fields, Method, Request, Trailers};
    let (_no_trailers, trailers) =
        wasip3::wit_future::new::<Result<Option<Trailers>, ErrorCode>>(|| Ok(None));
    let (request, _transmitted) = Request::new(Fields::new(), None, trailers, None);
    let host = *input.pick(HOSTS);
    let _ = request.set_authority(Some(&format!("{host}:{}", http_port(input, s))));
    let _ = request.set_path_with_query(Some(&format!("/{}", "p".repeat(*input.pick(TEXT_SIZES)))));
    if input.flag() {
        let method = "M".repeat(*input.pick(TEXT_SIZES)).max("PUT".to_owned());
        let _ = request.set_method(&Method::Other(method));
    }
    s.http.push(Http::Request3(request));
}

/// A handle the guest was never given: an index from the input, used as a
/// moat:net socket, listener or UDP socket, a wasi:sockets TCP or UDP
/// socket or name lookup, a wasi:io stream or pollable, then forgotten or
/// dropped, as a hostile guest writing its own canonical ABI calls may.
/// The host checks every index and its type: a wrong one traps the guest,
/// a right one is a resource of the guest's own (its later use may then
/// trap too).
fn forge(kind: u8, index: u32) {
    use moat_sdk::bindings::moat::net::{listen::Listener, tcp::TcpSocket, udp};
    use wasip2::io::{poll::Pollable, streams};
    use wasip2::sockets::{ip_name_lookup::ResolveAddressStream, tcp, udp as wasi_udp};
    // 0 and u32::MAX are wit-bindgen's own markers for "no handle".
    let index = index.clamp(1, u32::MAX - 1);
    // SAFETY: `from_handle` only wraps the integer; the wrapper holds no
    // guest memory, and every use of it is a canonical ABI call whose
    // handle the host looks up and type-checks in its own table, trapping
    // the guest on a bad one. Misuse ends the run; it cannot corrupt
    // memory. Every call below returns at once (none waits on a pollable).
    match kind % 11 {
        0 => forged(unsafe { TcpSocket::from_handle(index) }, |socket| {
            socket.local_address()
        }),
        1 => forged(unsafe { Listener::from_handle(index) }, |listener| {
            listener.local_address()
        }),
        2 => forged(unsafe { udp::UdpSocket::from_handle(index) }, |socket| {
            socket.local_address()
        }),
        3 => drop(unsafe { TcpSocket::from_handle(index) }),
        4 => forged(unsafe { tcp::TcpSocket::from_handle(index) }, |socket| {
            socket.local_address()
        }),
        5 => forged(
            unsafe { wasi_udp::UdpSocket::from_handle(index) },
            |socket| socket.local_address(),
        ),
        6 => forged(
            unsafe { ResolveAddressStream::from_handle(index) },
            |lookup| lookup.resolve_next_address(),
        ),
        7 => forged(
            unsafe { streams::OutputStream::from_handle(index) },
            |stream| stream.check_write(),
        ),
        8 => forged(
            unsafe { streams::InputStream::from_handle(index) },
            |stream| stream.read(16),
        ),
        9 => forged(unsafe { Pollable::from_handle(index) }, |pollable| {
            pollable.ready()
        }),
        _ => drop(unsafe { tcp::TcpSocket::from_handle(index) }),
    }
}

/// Makes one call on a forged handle, ignoring what it returns, then
/// forgets the handle: the guest never
/// owned it, so dropping it would be a second, different misuse (which
/// `forge` makes on purpose, apart).
fn forged<T, R>(handle: T, call: impl FnOnce(&T) -> R) {
    let _ = call(&handle);
    std::mem::forget(handle);
}

#[moat_sdk::main]
async fn main() -> Result<(), Error> {
    let args: Vec<u16> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap_or(0))
        .collect();
    let [sink, blackhole, canary, udp_sink] = args[..] else {
        return Err(Error::InvalidArgument(
            "boundary: SINK BLACKHOLE CANARY UDP_SINK".into(),
        ));
    };
    let mut bytes = Vec::new();
    std::io::stdin()
        .read_to_end(&mut bytes)
        .map_err(|e| Error::Other(format!("stdin: {e}")))?;
    let mut state = State {
        sink,
        ports: [sink, blackhole, canary, udp_sink, 0, 65_535],
        conns: Vec::new(),
        listeners: Vec::new(),
        udp: Vec::new(),
        used_ports: HashSet::new(),
        http: Vec::new(),
    };
    let mut input = Input(bytes.iter());
    while let Some(&op) = input.0.next() {
        // What the test shows of a sequence that failed or ran out of time.
        eprintln!("op {}", op % OPS);
        step(op, &mut input, &mut state).await;
    }
    // Everything still open is dropped here, as the run ends.
    Ok(())
}
