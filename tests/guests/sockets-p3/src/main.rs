//! A stock wasi:sockets 0.3 program (async, through the `wasip3` crate),
//! with no moat dependency. One thing per run:
//!
//! ```text
//! sockets-p3 lookup NAME                     print the name's addresses
//! sockets-p3 tcp-client HOST PORT MESSAGE    connect (IPv4), send, half-close, print the reply
//! sockets-p3 udp-client HOST PORT MESSAGE    send MESSAGE in one datagram (IPv4, from
//!                                            127.0.0.1), print the reply datagram
//! sockets-p3 tcp-sockets N ROUNDS            ROUNDS times: create N TCP sockets, drop them
//! sockets-p3 udp-park N FAILURES SIGNAL_PORT park N receives on one socket; once FAILURES
//!                                            of them failed, connect to 127.0.0.1:SIGNAL_PORT
//!                                            and wait for the peer to close
//! sockets-p3 hold-streams receive|send HOST PORT N SIGNAL_PORT
//!                                            connect to 127.0.0.1:SIGNAL_PORT (the line), then
//!                                            up to N times: connect to HOST:PORT, take the
//!                                            socket's receive (or send) stream and future, keep
//!                                            them, drop the socket; at the first create that
//!                                            fails, print how many were held and why, and wait
//!                                            for the line's peer to close
//! sockets-p3 drop-streams receive|send HOST PORT BATCH ROUNDS
//!                                            ROUNDS times: BATCH connections to HOST:PORT, each
//!                                            with its stream and future taken, the socket
//!                                            dropped; then every stream and future dropped
//! sockets-p3 hold-listeners N SIGNAL_PORT    the line, then up to N times: listen on
//!                                            127.0.0.1:0, keep the stream of connections, drop
//!                                            the socket; at the first create that fails, print
//!                                            how many were held and why, and wait on the line
//! sockets-p3 drop-listeners N ROUNDS         ROUNDS times: N listeners on 127.0.0.1:0, each
//!                                            with its stream of connections; then every
//!                                            socket and stream dropped
//! sockets-p3 drop-queued-listeners ROUNDS SOCKETS
//!                                            ROUNDS times: listen on 127.0.0.1:0, print
//!                                            "round R listening on ADDR", wait until a
//!                                            connection is ready to be read (reading none),
//!                                            drop the stream and the socket, print "round R
//!                                            dropped"; then hold SOCKETS sockets at once
//! sockets-p3 accept-all                      listen on 127.0.0.1:0, print "listening on ADDR",
//!                                            accept the first connection (the line), then
//!                                            accept and keep every connection (printing
//!                                            "accepted K") until the line's peer sends or closes
//! sockets-p3 self-connect                    listen on 127.0.0.1:0, connect to the port it got,
//!                                            accept, send a line each way, print both and
//!                                            whether the accepted peer is the connecting socket
//! ```
//!
//! A failure prints `error: CODE` and exits with 1.

use std::net::Ipv4Addr;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use wasip3::clocks::monotonic_clock::wait_for;
use wasip3::sockets::ip_name_lookup::resolve_addresses;
use wasip3::sockets::types::{
    ErrorCode, IpAddress, IpAddressFamily, IpSocketAddress, Ipv4SocketAddress, TcpSocket, UdpSocket,
};
use wasip3::wit_bindgen::{FutureReader, StreamReader, StreamResult, StreamWriter};

wasip3::cli::command::export!(SocketsP3);

/// The wasm32-wasip2 target wants a `main`, which it exports as
/// `wasi:cli/run@0.2.0`; hosts that run 0.3 commands (moat does) call the
/// async `run` below instead.
fn main() {
    eprintln!("sockets-p3 runs as a wasi:cli/run@0.3.0 command only");
    std::process::exit(2);
}

struct SocketsP3;

impl wasip3::exports::cli::run::Guest for SocketsP3 {
    async fn run() -> Result<(), ()> {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
        let num = |i: usize| arg(i).parse::<usize>().unwrap_or(0);
        let result = match arg(0) {
            "lookup" => lookup(arg(1)).await,
            "tcp-client" => tcp_client(arg(1), num(2) as u16, arg(3)).await,
            "udp-client" => udp_client(arg(1), num(2) as u16, arg(3)).await,
            "tcp-sockets" => tcp_sockets(num(1), num(2)),
            "udp-park" => udp_park(num(1), num(2), num(3) as u16).await,
            "hold-streams" => {
                hold_streams(arg(1), arg(2), num(3) as u16, num(4), num(5) as u16).await
            }
            "drop-streams" => drop_streams(arg(1), arg(2), num(3) as u16, num(4), num(5)).await,
            "hold-listeners" => hold_listeners(num(1), num(2) as u16).await,
            "drop-listeners" => drop_listeners(num(1), num(2)).await,
            "drop-queued-listeners" => drop_queued_listeners(num(1), num(2)).await,
            "accept-all" => accept_all().await,
            "self-connect" => self_connect().await,
            other => Err(format!("unknown mode {other:?}")),
        };
        result.map_err(|e| println!("error: {e}"))
    }
}

fn v4(ip: Ipv4Addr, port: u16) -> IpSocketAddress {
    let [a, b, c, d] = ip.octets();
    IpSocketAddress::Ipv4(Ipv4SocketAddress {
        port,
        address: (a, b, c, d),
    })
}

fn code(e: ErrorCode) -> String {
    format!("{e:?}")
}

async fn lookup(name: &str) -> Result<(), String> {
    let addresses = resolve_addresses(name.to_owned())
        .await
        .map_err(|e| format!("{e:?}"))?;
    for address in addresses {
        match address {
            IpAddress::Ipv4((a, b, c, d)) => println!("address: {}", Ipv4Addr::new(a, b, c, d)),
            IpAddress::Ipv6(v6) => println!("address: {v6:?}"),
        }
    }
    Ok(())
}

async fn first_v4(host: &str) -> Result<Ipv4Addr, String> {
    if let Ok(ip) = host.parse() {
        return Ok(ip);
    }
    let addresses = resolve_addresses(host.to_owned())
        .await
        .map_err(|e| format!("{e:?}"))?;
    addresses
        .into_iter()
        .find_map(|a| match a {
            IpAddress::Ipv4((a, b, c, d)) => Some(Ipv4Addr::new(a, b, c, d)),
            IpAddress::Ipv6(_) => None,
        })
        .ok_or_else(|| "no IPv4 address".to_owned())
}

async fn tcp_client(host: &str, port: u16, message: &str) -> Result<(), String> {
    let ip = first_v4(host).await?;
    let socket = TcpSocket::create(IpAddressFamily::Ipv4).map_err(code)?;
    socket.connect(v4(ip, port)).await.map_err(code)?;
    println!("connected to {ip}:{port}");
    let (mut tx, rx) = wasip3::wit_stream::new();
    let sent = socket.send(rx);
    let rest = tx.write_all(message.as_bytes().to_vec()).await;
    if !rest.is_empty() {
        return Err("the send stream closed early".into());
    }
    drop(tx);
    sent.await.map_err(code)?;
    let (mut data, received) = socket.receive();
    let mut reply = Vec::new();
    loop {
        let (status, chunk) = data.read(Vec::with_capacity(16 * 1024)).await;
        reply.extend_from_slice(&chunk);
        if matches!(status, wasip3::wit_bindgen::StreamResult::Dropped) {
            break;
        }
    }
    received.await.map_err(code)?;
    println!("reply: {}", String::from_utf8_lossy(&reply));
    Ok(())
}

fn tcp_sockets(n: usize, rounds: usize) -> Result<(), String> {
    for round in 1..=rounds {
        let mut held = Vec::new();
        let mut failure = None;
        for _ in 0..n {
            match TcpSocket::create(IpAddressFamily::Ipv4) {
                Ok(socket) => held.push(socket),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        println!("round {round}: created {} sockets", held.len());
        if let Some(e) = failure {
            return Err(code(e));
        }
    }
    Ok(())
}

async fn udp_client(host: &str, port: u16, message: &str) -> Result<(), String> {
    let ip = first_v4(host).await?;
    let socket = UdpSocket::create(IpAddressFamily::Ipv4).map_err(code)?;
    socket.bind(v4(Ipv4Addr::LOCALHOST, 0)).map_err(code)?;
    socket
        .send(message.as_bytes().to_vec(), Some(v4(ip, port)))
        .await
        .map_err(code)?;
    let (reply, _from) = socket.receive().await.map_err(code)?;
    println!("reply: {}", String::from_utf8_lossy(&reply));
    Ok(())
}

async fn udp_park(n: usize, failures: usize, signal_port: u16) -> Result<(), String> {
    let socket = UdpSocket::create(IpAddressFamily::Ipv4).map_err(code)?;
    socket.bind(v4(Ipv4Addr::LOCALHOST, 0)).map_err(code)?;
    let mut parked: FuturesUnordered<_> = (0..n).map(|_| socket.receive()).collect();
    let mut failed = 0;
    while failed < failures {
        match parked.next().await {
            Some(Err(e)) => {
                if failed == 0 {
                    println!("receive failed: {e:?}");
                }
                failed += 1;
            }
            Some(Ok(_)) => return Err("a datagram arrived".into()),
            None => return Err("every receive ended".into()),
        }
    }
    println!("failures: {failed}");
    // The rest are parked: let the test look at the host, and wait for it.
    let signal = line(signal_port).await?;
    closed(&signal).await;
    println!("parked {} receives", n - failed);
    drop(parked);
    Ok(())
}

/// A connection to the test at 127.0.0.1:`port`, which it closes when it
/// has looked at the host.
async fn line(port: u16) -> Result<TcpSocket, String> {
    let socket = TcpSocket::create(IpAddressFamily::Ipv4).map_err(code)?;
    socket
        .connect(v4(Ipv4Addr::LOCALHOST, port))
        .await
        .map_err(code)?;
    Ok(socket)
}

/// Waits until the peer of `socket` closes it (reading what it sends).
async fn closed(socket: &TcpSocket) {
    let (mut data, received) = socket.receive();
    loop {
        let (status, _) = data.read(Vec::with_capacity(64)).await;
        if matches!(status, StreamResult::Dropped) {
            break;
        }
    }
    let _ = received.await;
}

/// The local address of `socket`, as `IP:PORT`.
fn address(socket: &TcpSocket) -> Result<String, String> {
    match socket.get_local_address().map_err(code)? {
        IpSocketAddress::Ipv4(Ipv4SocketAddress {
            port,
            address: (a, b, c, d),
        }) => Ok(format!("{}:{port}", Ipv4Addr::new(a, b, c, d))),
        IpSocketAddress::Ipv6(_) => Err("an IPv6 address".into()),
    }
}

/// What the guest keeps of a connection whose socket it dropped: the
/// stream it took (its reading end, or the writing end of the stream it
/// gave `send`) and the stream's result future.
enum Kept {
    Receive {
        _data: StreamReader<u8>,
        _done: FutureReader<Result<(), ErrorCode>>,
    },
    Send {
        _data: StreamWriter<u8>,
        _done: FutureReader<Result<(), ErrorCode>>,
    },
}

/// Connects a new socket to `ip`:`port`, takes its `which` stream, and
/// drops the socket. `Err(Ok(code))` if the create failed, `Err(Err(_))`
/// if anything else did.
async fn connected_stream(
    which: &str,
    ip: Ipv4Addr,
    port: u16,
    socket: Result<TcpSocket, ErrorCode>,
) -> Result<Kept, Result<ErrorCode, String>> {
    let socket = socket.map_err(Ok)?;
    socket
        .connect(v4(ip, port))
        .await
        .map_err(|e| Err(code(e)))?;
    match which {
        "receive" => {
            let (data, done) = socket.receive();
            Ok(Kept::Receive {
                _data: data,
                _done: done,
            })
        }
        "send" => {
            let (tx, rx) = wasip3::wit_stream::new();
            let done = socket.send(rx);
            Ok(Kept::Send {
                _data: tx,
                _done: done,
            })
        }
        other => Err(Err(format!("no stream {other:?}"))),
    }
}

async fn hold_streams(
    which: &str,
    host: &str,
    port: u16,
    n: usize,
    signal_port: u16,
) -> Result<(), String> {
    let ip = first_v4(host).await?;
    let signal = line(signal_port).await?;
    let mut kept = Vec::new();
    for _ in 0..n {
        let socket = TcpSocket::create(IpAddressFamily::Ipv4);
        match connected_stream(which, ip, port, socket).await {
            Ok(stream) => kept.push(stream),
            Err(Ok(e)) => {
                println!("create failed: {e:?}");
                break;
            }
            Err(Err(e)) => return Err(e),
        }
    }
    println!("held {} {which} streams", kept.len());
    closed(&signal).await;
    drop(kept);
    Ok(())
}

/// Creates a TCP socket, trying again for a while as long as the run is
/// at its socket cap. A place a dropped stream gives back reaches the
/// run's count when the host has run the stream's end, which it does
/// between the guest's calls, not necessarily before the next one.
async fn create_patiently(waits: &mut usize) -> Result<TcpSocket, ErrorCode> {
    loop {
        match TcpSocket::create(IpAddressFamily::Ipv4) {
            Err(ErrorCode::Other(Some(why))) if why.contains("--max-sockets") && *waits < 5000 => {
                *waits += 1;
                wait_for(1_000_000).await;
            }
            created => return created,
        }
    }
}

async fn drop_streams(
    which: &str,
    host: &str,
    port: u16,
    batch: usize,
    rounds: usize,
) -> Result<(), String> {
    let ip = first_v4(host).await?;
    let mut waits = 0;
    for round in 1..=rounds {
        let mut kept = Vec::new();
        for _ in 0..batch {
            let socket = create_patiently(&mut waits).await;
            match connected_stream(which, ip, port, socket).await {
                Ok(stream) => kept.push(stream),
                Err(Ok(e)) => return Err(format!("round {round}: create failed: {e:?}")),
                Err(Err(e)) => return Err(e),
            }
        }
        println!("round {round}: held {} {which} streams", kept.len());
    }
    println!("waited {waits} times for a place");
    Ok(())
}

async fn hold_listeners(n: usize, signal_port: u16) -> Result<(), String> {
    let signal = line(signal_port).await?;
    let mut kept = Vec::new();
    for _ in 0..n {
        let socket = match TcpSocket::create(IpAddressFamily::Ipv4) {
            Ok(socket) => socket,
            Err(e) => {
                println!("create failed: {e:?}");
                break;
            }
        };
        socket.bind(v4(Ipv4Addr::LOCALHOST, 0)).map_err(code)?;
        kept.push(socket.listen().map_err(code)?);
    }
    println!("held {} listeners", kept.len());
    closed(&signal).await;
    drop(kept);
    Ok(())
}

async fn drop_listeners(n: usize, rounds: usize) -> Result<(), String> {
    let mut waits = 0;
    for round in 1..=rounds {
        let mut kept = Vec::new();
        for _ in 0..n {
            let socket = create_patiently(&mut waits)
                .await
                .map_err(|e| format!("round {round}: create failed: {e:?}"))?;
            socket.bind(v4(Ipv4Addr::LOCALHOST, 0)).map_err(code)?;
            let connections = socket.listen().map_err(code)?;
            kept.push((socket, connections));
        }
        println!("round {round}: held {} listeners", kept.len());
    }
    println!("waited {waits} times for a place");
    Ok(())
}

async fn drop_queued_listeners(rounds: usize, sockets: usize) -> Result<(), String> {
    let mut waits = 0;
    for round in 1..=rounds {
        let listener = create_patiently(&mut waits).await.map_err(code)?;
        listener.bind(v4(Ipv4Addr::LOCALHOST, 0)).map_err(code)?;
        let mut connections = listener.listen().map_err(code)?;
        println!("round {round} listening on {}", address(&listener)?);
        // A zero-length read: it returns once a connection is there to be
        // read (accepted by the host and judged), and takes none.
        let (status, _) = connections.read(Vec::new()).await;
        if matches!(status, StreamResult::Dropped) {
            return Err(format!("round {round}: the stream of connections ended"));
        }
        drop(connections);
        drop(listener);
        println!("round {round} dropped");
    }
    let mut held = Vec::new();
    for _ in 0..sockets {
        held.push(create_patiently(&mut waits).await.map_err(code)?);
    }
    println!("created {} sockets", held.len());
    println!("waited {waits} times for a place");
    Ok(())
}

async fn accept_all() -> Result<(), String> {
    let listener = TcpSocket::create(IpAddressFamily::Ipv4).map_err(code)?;
    listener.bind(v4(Ipv4Addr::LOCALHOST, 0)).map_err(code)?;
    let mut connections = listener.listen().map_err(code)?;
    println!("listening on {}", address(&listener)?);
    let first = connections
        .next()
        .await
        .ok_or("the stream of connections ended")?;
    println!("accepted 1");
    let (mut quit, _quit_done) = first.receive();
    let mut held = vec![first];
    {
        let accepting = async {
            while let Some(connection) = connections.next().await {
                held.push(connection);
                println!("accepted {}", held.len());
            }
        };
        let quitting = quit.read(Vec::with_capacity(1));
        futures::pin_mut!(accepting, quitting);
        futures::future::select(accepting, quitting).await;
    }
    println!("held {} connections", held.len());
    Ok(())
}

/// Writes `bytes` on `socket` and ends its sending side.
async fn send_all(socket: &TcpSocket, bytes: &[u8]) -> Result<(), String> {
    let (mut tx, rx) = wasip3::wit_stream::new();
    let sent = socket.send(rx);
    if !tx.write_all(bytes.to_vec()).await.is_empty() {
        return Err("the send stream closed early".into());
    }
    drop(tx);
    sent.await.map_err(code)
}

/// Reads `socket` to its end.
async fn receive_all(socket: &TcpSocket) -> Result<String, String> {
    let (mut data, received) = socket.receive();
    let mut got = Vec::new();
    loop {
        let (status, chunk) = data.read(Vec::with_capacity(16 * 1024)).await;
        got.extend_from_slice(&chunk);
        if matches!(status, StreamResult::Dropped) {
            break;
        }
    }
    received.await.map_err(code)?;
    Ok(String::from_utf8_lossy(&got).into_owned())
}

/// A connected pair through the program's own listener.
async fn self_connect() -> Result<(), String> {
    let listener = TcpSocket::create(IpAddressFamily::Ipv4).map_err(code)?;
    listener.bind(v4(Ipv4Addr::LOCALHOST, 0)).map_err(code)?;
    let mut connections = listener.listen().map_err(code)?;
    let local = listener.get_local_address().map_err(code)?;
    println!("listening on {}", address(&listener)?);
    let client = TcpSocket::create(IpAddressFamily::Ipv4).map_err(code)?;
    client.connect(local).await.map_err(code)?;
    let server = connections
        .next()
        .await
        .ok_or("the stream of connections ended")?;
    let peer = server.get_remote_address().map_err(code)?;
    let own = client.get_local_address().map_err(code)?;
    println!(
        "accepted peer is the client: {}",
        format!("{peer:?}") == format!("{own:?}")
    );
    send_all(&client, b"ping from the client").await?;
    println!("server read: {}", receive_all(&server).await?);
    send_all(&server, b"pong from the server").await?;
    println!("client read: {}", receive_all(&client).await?);
    Ok(())
}
