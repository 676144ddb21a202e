//! The benchmark servers as a plain std::net guest (wasi:sockets 0.2), for
//! the wasmtime-wasi yardstick. Without threads it serves one connection
//! at a time, which is what such a guest can do.
//!
//! ```text
//! bench-std echo ADDR | hold ADDR | write-once ADDR BYTES | stream ADDR BYTES | busy ADDR BYTES MS
//! bench-std udp-echo ADDR | udp-send ADDR COUNT SIZE
//! ```

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

// The servers' bytes, shared with the harness's native server.
#[path = "../../../src/pattern.rs"]
mod pattern;
use pattern::pattern;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    let num = |i: usize| arg(i).parse::<u64>().unwrap_or(0);
    match arg(0) {
        "udp-echo" => return udp_echo(arg(1)),
        "udp-send" => return udp_send(arg(1), num(2), num(3) as usize),
        _ => {}
    }
    let listener = TcpListener::bind(arg(1)).expect("bind");
    println!(
        "listening on {}",
        listener.local_addr().expect("local addr")
    );
    let mut held = Vec::new();
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        match arg(0) {
            "echo" => echo(conn),
            "hold" => held.push(conn),
            "write-once" => write_once(conn, num(2) as usize),
            "stream" => stream(conn, num(2) as usize),
            "busy" => busy(conn, num(2) as usize, num(3)),
            other => panic!("unknown mode {other}"),
        }
    }
}

fn echo(mut conn: TcpStream) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if conn.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = conn.shutdown(std::net::Shutdown::Write);
}

fn write_once(mut conn: TcpStream, bytes: usize) {
    let _ = conn.write_all(&pattern(bytes));
    let _ = conn.shutdown(std::net::Shutdown::Write);
}

fn stream(mut conn: TcpStream, bytes: usize) {
    const CHUNK: usize = 64 * 1024;
    let chunk = pattern(CHUNK);
    let mut sent = 0;
    while sent < bytes {
        let n = CHUNK.min(bytes - sent);
        if conn.write_all(&chunk[..n]).is_err() {
            return;
        }
        sent += n;
    }
    let _ = conn.shutdown(std::net::Shutdown::Write);
}

fn busy(mut conn: TcpStream, bytes: usize, ms: u64) {
    let _ = conn.write_all(&pattern(bytes));
    let start = Instant::now();
    let mut spins = 0u64;
    while start.elapsed() < Duration::from_millis(ms) {
        spins = std::hint::black_box(spins.wrapping_add(1));
    }
    let _ = conn.shutdown(std::net::Shutdown::Write);
}

fn udp_echo(addr: &str) {
    let socket = std::net::UdpSocket::bind(addr).expect("bind");
    println!("listening on {}", socket.local_addr().expect("local addr"));
    let mut buf = vec![0u8; 65_536];
    loop {
        let Ok((n, from)) = socket.recv_from(&mut buf) else {
            continue;
        };
        let _ = socket.send_to(&buf[..n], from);
    }
}

fn udp_send(addr: &str, count: u64, size: usize) {
    let socket = std::net::UdpSocket::bind(addr).expect("bind");
    println!("listening on {}", socket.local_addr().expect("local addr"));
    let payload = pattern(size);
    let mut buf = [0u8; 64];
    loop {
        let Ok((_, to)) = socket.recv_from(&mut buf) else {
            continue;
        };
        for _ in 0..count {
            let _ = socket.send_to(&payload, to);
        }
        let _ = socket.send_to(b"done", to);
    }
}
