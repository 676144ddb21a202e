//! A stock program: plain std::net (wasi:sockets 0.2), no moat dependency.
//! It does one thing per run and prints what happened, so that tests can
//! run it allowed and denied.
//!
//! ```text
//! std-net tcp-client HOST PORT MESSAGE   connect, send MESSAGE, half-close, print the reply
//! std-net tcp-server ADDR                listen, print "listening on ADDR", echo one client
//! std-net udp-client HOST PORT MESSAGE   send MESSAGE from an ephemeral port, print the reply
//! std-net udp-server ADDR                print "listening on ADDR", echo one datagram
//! std-net lookup NAME                    print the name's addresses
//! std-net lookup-then-tcp NAMES HOST PORT MESSAGE
//!                                        look up each of the comma-separated NAMES
//!                                        (printing their addresses), then tcp-client
//! std-net udp-sockets N ROUNDS           ROUNDS times: open N UDP sockets at once, close them
//! std-net hold-lookups NAME N SIGNAL_PORT
//!                                        start N lookups of NAME (wasi:sockets 0.2
//!                                        `resolve-addresses`, called directly), wait until
//!                                        each has its answer without reading it, read one to
//!                                        its end, then connect to 127.0.0.1:SIGNAL_PORT and
//!                                        hold every lookup until the peer closes
//! std-net self-connect LISTEN [CONNECT_HOST]
//!                                        listen on LISTEN, connect to the port it got (at
//!                                        CONNECT_HOST, or the listener's own address), accept,
//!                                        send "ping" each way, print both and whether the
//!                                        accepted peer is the connecting socket (as CPython's
//!                                        socketpair() does)
//! std-net self-connect-after-close LISTEN SIGNAL_PORT
//!                                        listen on LISTEN, print "listening on ADDR", close the
//!                                        listener, connect to 127.0.0.1:SIGNAL_PORT and wait for
//!                                        a byte, then connect to the closed listener's address
//! ```
//!
//! A failure prints `error: KIND: MESSAGE` and exits with 1.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs, UdpSocket};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    let result = match arg(0) {
        "tcp-client" => tcp_client(arg(1), arg(2), arg(3)),
        "tcp-server" => tcp_server(arg(1)),
        "udp-client" => udp_client(arg(1), arg(2), arg(3)),
        "udp-server" => udp_server(arg(1)),
        "lookup" => lookup(arg(1)),
        "lookup-then-tcp" => lookup_then_tcp(arg(1), arg(2), arg(3), arg(4)),
        "udp-sockets" => udp_sockets(arg(1).parse().unwrap_or(0), arg(2).parse().unwrap_or(1)),
        "hold-lookups" => hold_lookups(arg(1), arg(2).parse().unwrap_or(0), arg(3)),
        "self-connect" => self_connect(arg(1), arg(2)),
        "self-connect-after-close" => self_connect_after_close(arg(1), arg(2)),
        other => {
            eprintln!("unknown mode {other:?}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("error: {:?}: {e}", e.kind());
            ExitCode::FAILURE
        }
    }
}

fn port(text: &str) -> std::io::Result<u16> {
    text.parse()
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "bad port"))
}

fn tcp_client(host: &str, port_text: &str, message: &str) -> std::io::Result<()> {
    let mut stream = TcpStream::connect((host, port(port_text)?))?;
    println!("connected to {}", stream.peer_addr()?);
    stream.write_all(message.as_bytes())?;
    stream.shutdown(Shutdown::Write)?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply)?;
    println!("reply: {}", String::from_utf8_lossy(&reply));
    Ok(())
}

fn tcp_server(addr: &str) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr)?;
    println!("listening on {}", listener.local_addr()?);
    let (mut stream, peer) = listener.accept()?;
    println!("accepted {peer}");
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        stream.write_all(&buf[..n])?;
    }
    Ok(())
}

fn udp_client(host: &str, port_text: &str, message: &str) -> std::io::Result<()> {
    let to = (host, port(port_text)?)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no address"))?;
    let local = if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
    let socket = UdpSocket::bind(local)?;
    socket.send_to(message.as_bytes(), to)?;
    let mut buf = [0u8; 2048];
    let (n, from) = socket.recv_from(&mut buf)?;
    println!("reply from {from}: {}", String::from_utf8_lossy(&buf[..n]));
    Ok(())
}

fn udp_server(addr: &str) -> std::io::Result<()> {
    let socket = UdpSocket::bind(addr)?;
    println!("listening on {}", socket.local_addr()?);
    let mut buf = [0u8; 2048];
    let (n, from) = socket.recv_from(&mut buf)?;
    socket.send_to(&buf[..n], from)?;
    println!("echoed {n} bytes to {from}");
    Ok(())
}

fn lookup(name: &str) -> std::io::Result<()> {
    for addr in (name, 0).to_socket_addrs()? {
        println!("address: {}", addr.ip());
    }
    Ok(())
}

/// Looks names up first, as a program that caches them would, then connects
/// to HOST (usually one of the addresses it saw).
fn lookup_then_tcp(names: &str, host: &str, port_text: &str, message: &str) -> std::io::Result<()> {
    for name in names.split(',') {
        for addr in (name, 0).to_socket_addrs()? {
            println!("{name}: {}", addr.ip());
        }
    }
    tcp_client(host, port_text, message)
}

fn udp_sockets(n: usize, rounds: usize) -> std::io::Result<()> {
    for round in 1..=rounds {
        let mut held = Vec::new();
        let mut failure = None;
        for _ in 0..n {
            match UdpSocket::bind("127.0.0.1:0") {
                Ok(socket) => held.push(socket),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        println!("round {round}: opened {} sockets", held.len());
        if let Some(e) = failure {
            return Err(e);
        }
    }
    Ok(())
}

fn hold_lookups(name: &str, n: usize, signal_port: &str) -> std::io::Result<()> {
    use wasip2::sockets::instance_network::instance_network;
    use wasip2::sockets::ip_name_lookup::resolve_addresses;

    let failed = |e| std::io::Error::other(format!("{e:?}"));
    let network = instance_network();
    let lookups = (0..n)
        .map(|_| resolve_addresses(&network, name).map_err(failed))
        .collect::<std::io::Result<Vec<_>>>()?;
    for lookup in &lookups {
        lookup.subscribe().block();
    }
    let first = lookups
        .first()
        .ok_or_else(|| std::io::Error::other("no lookups"))?;
    let mut addresses = 0;
    while first.resolve_next_address().map_err(failed)?.is_some() {
        addresses += 1;
    }
    println!("one stream: {addresses} addresses");
    let mut signal = TcpStream::connect(("127.0.0.1", port(signal_port)?))?;
    println!("holding {} lookups", lookups.len());
    signal.read_to_end(&mut Vec::new())?;
    drop(lookups);
    Ok(())
}

/// A connected pair through the program's own listener, as CPython's
/// `socket.socketpair()` makes one where there are no Unix sockets.
fn self_connect(listen: &str, connect_host: &str) -> std::io::Result<()> {
    let listener = TcpListener::bind(listen)?;
    let local = listener.local_addr()?;
    println!("listening on {local}");
    let to = match connect_host {
        "" => local,
        host => (host, local.port())
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no address"))?,
    };
    let mut client = TcpStream::connect(to)?;
    let (mut server, peer) = listener.accept()?;
    println!(
        "accepted peer is the client: {}",
        peer == client.local_addr()?
    );
    client.write_all(b"ping from the client")?;
    client.shutdown(Shutdown::Write)?;
    let mut got = String::new();
    server.read_to_string(&mut got)?;
    println!("server read: {got}");
    server.write_all(b"pong from the server")?;
    server.shutdown(Shutdown::Write)?;
    got.clear();
    client.read_to_string(&mut got)?;
    println!("client read: {got}");
    Ok(())
}

/// The program's own listener, closed: a connect to its address is judged
/// as any other.
fn self_connect_after_close(listen: &str, signal_port: &str) -> std::io::Result<()> {
    let listener = TcpListener::bind(listen)?;
    let local = listener.local_addr()?;
    println!("listening on {local}");
    drop(listener);
    let mut signal = TcpStream::connect(("127.0.0.1", port(signal_port)?))?;
    signal.read_exact(&mut [0u8; 1])?;
    let stream = TcpStream::connect(local)?;
    println!("connected to {}", stream.peer_addr()?);
    Ok(())
}
