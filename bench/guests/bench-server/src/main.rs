//! Benchmark servers as a moat guest (the echo server is examples/echo-server).
//!
//! ```text
//! bench-server hold ADDR                    accept and hold every connection
//! bench-server write-once ADDR BYTES        write BYTES in one buffer to each connection, close
//! bench-server stream ADDR BYTES            write BYTES in 64 KiB chunks to each connection, close
//! bench-server busy ADDR BYTES MS SNDBUF    write BYTES, compute MS without awaiting, close
//! bench-server udp-send ADDR COUNT SIZE [TO] on a "go" datagram, send COUNT datagrams of SIZE back, then "done"
//!                                           (with TO, a HOST:PORT such as localhost:9000, send them there instead)
//! bench-server tls-echo ADDR CERT KEY        echo over TLS (the echo server's loop, with a TLS listener)
//! ```
//!
//! (The UDP echo server is examples/udp-echo.)

use std::time::Duration;

use moat_sdk::{Error, ListenOptions, TcpListener, TcpStream};

// The servers' bytes, shared with the harness's native server.
#[path = "../../../src/pattern.rs"]
mod pattern;
use pattern::pattern;

#[moat_sdk::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    let num = |i: usize| arg(i).parse::<u64>().unwrap_or(0);
    let (host, port) = moat_sdk::split_host_port(arg(1))
        .ok_or_else(|| Error::InvalidArgument(format!("bad address {:?}", arg(1))))?;
    if arg(0) == "udp-send" {
        let to = (!arg(4).is_empty()).then(|| arg(4));
        return udp_send(host, port, num(2), num(3) as usize, to).await;
    }
    if arg(0) == "tls-echo" {
        return tls_echo(host, port, arg(2), arg(3)).await;
    }
    let options = ListenOptions {
        send_buffer_size: (arg(0) == "busy" && num(4) > 0).then(|| num(4)),
        ..ListenOptions::default()
    };
    let listener = TcpListener::bind_with((host, port), &options).await?;
    println!("listening on {}", listener.local_addr()?);
    let mut held = Vec::new();
    loop {
        let (conn, _) = listener.accept().await?;
        match arg(0) {
            "hold" => held.push(conn),
            "write-once" => {
                let bytes = num(2) as usize;
                moat_sdk::spawn(async move {
                    let _ = write_once(conn, bytes).await;
                });
            }
            "stream" => {
                let bytes = num(2) as usize;
                moat_sdk::spawn(async move {
                    let _ = stream(conn, bytes).await;
                });
            }
            "busy" => busy(conn, num(2) as usize, num(3)).await?,
            other => return Err(Error::InvalidArgument(format!("unknown mode {other}"))),
        }
    }
}

async fn write_once(mut conn: TcpStream, bytes: usize) -> Result<(), Error> {
    conn.write_all_owned(pattern(bytes)).await?;
    conn.shutdown().await
}

/// Writes `bytes` in 64 KiB chunks, as a server streaming a file would:
/// one buffer per connection, refilled from a shared chunk and handed to
/// the host without a copy.
async fn stream(mut conn: TcpStream, bytes: usize) -> Result<(), Error> {
    const CHUNK: usize = 64 * 1024;
    static SOURCE: std::sync::LazyLock<Vec<u8>> = std::sync::LazyLock::new(|| pattern(CHUNK));
    let mut buf = Vec::with_capacity(CHUNK);
    let mut sent = 0;
    while sent < bytes {
        let n = CHUNK.min(bytes - sent);
        buf.extend_from_slice(&SOURCE[..n]);
        buf = conn.write_all_owned(buf).await?;
        sent += n;
    }
    conn.shutdown().await
}

/// Writes, then computes without awaiting: nothing else in the guest runs.
async fn busy(mut conn: TcpStream, bytes: usize, ms: u64) -> Result<(), Error> {
    conn.write_all_owned(pattern(bytes)).await?;
    let start = moat_sdk::time::now();
    let mut spins = 0u64;
    while moat_sdk::time::now() - start < Duration::from_millis(ms) {
        spins = std::hint::black_box(spins.wrapping_add(1));
    }
    conn.shutdown().await
}

/// Waits for "go", then sends `count` datagrams of `size` bytes, one
/// `send_to` each, and a final "done": to whoever said it (its IP), or to
/// `to` (`HOST:PORT`) as written, a name the host resolves.
async fn udp_send(
    host: &str,
    port: u16,
    count: u64,
    size: usize,
    to: Option<&str>,
) -> Result<(), Error> {
    let socket = moat_sdk::UdpSocket::bind((host, port)).await?;
    println!("listening on {}", socket.local_addr()?);
    let payload = pattern(size);
    let named = match to {
        Some(to) => Some(
            moat_sdk::split_host_port(to)
                .ok_or_else(|| Error::InvalidArgument(format!("bad address {to:?}")))?,
        ),
        None => None,
    };
    loop {
        let go = socket.recv().await?;
        let (to, to_port) = match named {
            Some((name, name_port)) => (name.to_owned(), name_port),
            None => (go.from.ip().to_string(), go.from.port()),
        };
        for _ in 0..count {
            socket.send_to(&payload, (&to, to_port)).await?;
        }
        socket.send_to(b"done", (&to, to_port)).await?;
    }
}

/// The echo server's loop over TLS: 64 KiB reads handed back without a copy.
async fn tls_echo(host: &str, port: u16, cert: &str, key: &str) -> Result<(), Error> {
    let identity =
        moat_sdk::Identity::from_files(cert, key).map_err(|e| Error::Other(e.to_string()))?;
    let listener =
        TcpListener::bind_tls((host, port), &moat_sdk::TlsListenOptions::new(identity)).await?;
    println!("listening on {}", listener.local_addr()?);
    loop {
        let (mut conn, _) = listener.accept().await?;
        moat_sdk::spawn(async move {
            let mut buf = Vec::with_capacity(64 * 1024);
            loop {
                buf.clear();
                match conn.read_buf(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => match conn.write_all_owned(buf).await {
                        Ok(emptied) => buf = emptied,
                        Err(_) => return,
                    },
                }
            }
            let _ = conn.shutdown().await;
        });
    }
}
