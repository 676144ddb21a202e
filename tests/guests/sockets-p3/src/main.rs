//! A stock wasi:sockets 0.3 program (async, through the `wasip3` crate),
//! with no moat dependency. One thing per run:
//!
//! ```text
//! sockets-p3 lookup NAME                     print the name's addresses
//! sockets-p3 tcp-client HOST PORT MESSAGE    connect (IPv4), send, half-close, print the reply
//! sockets-p3 tcp-sockets N ROUNDS            ROUNDS times: create N TCP sockets, drop them
//! sockets-p3 udp-park N FAILURES SIGNAL_PORT park N receives on one socket; once FAILURES
//!                                            of them failed, connect to 127.0.0.1:SIGNAL_PORT
//!                                            and wait for the peer to close
//! ```
//!
//! A failure prints `error: CODE` and exits with 1.

use std::net::Ipv4Addr;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use wasip3::sockets::ip_name_lookup::resolve_addresses;
use wasip3::sockets::types::{
    ErrorCode, IpAddress, IpAddressFamily, IpSocketAddress, Ipv4SocketAddress, TcpSocket, UdpSocket,
};

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
            "tcp-sockets" => tcp_sockets(num(1), num(2)),
            "udp-park" => udp_park(num(1), num(2), num(3) as u16).await,
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
    let signal = TcpSocket::create(IpAddressFamily::Ipv4).map_err(code)?;
    signal
        .connect(v4(Ipv4Addr::LOCALHOST, signal_port))
        .await
        .map_err(code)?;
    let (mut data, received) = signal.receive();
    loop {
        let (status, _) = data.read(Vec::with_capacity(64)).await;
        if matches!(status, wasip3::wit_bindgen::StreamResult::Dropped) {
            break;
        }
    }
    let _ = received.await;
    println!("parked {} receives", n - failed);
    drop(parked);
    Ok(())
}
