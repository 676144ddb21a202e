//! A netcat: relays stdin to a TCP connection and the connection to stdout.
//!
//! ```text
//! ncat HOST PORT         connect, then relay
//! ncat -l HOST PORT      accept one connection, then relay
//! ncat -u HOST PORT      UDP: each stdin line is a datagram; print replies
//! ncat -u -l HOST PORT   UDP: print each datagram and echo it back
//! ```
//!
//! TCP: when stdin ends, ncat half-closes the connection (sends a FIN) and
//! keeps printing what the peer sends until the peer closes too. It exits 0
//! when both directions are done, 1 with a message on error.
//!
//! UDP: the client binds an ephemeral port on the wildcard address of the
//! destination's family (grant it with `--allow-listen=0.0.0.0:0`, or
//! `[::]:0`), sends each line of stdin (without its newline) as one
//! datagram, prints every datagram that comes back on a line of its own, and
//! exits once stdin has ended and no datagram came for one second.

use std::time::Duration;

use moat_sdk::io::{stdin, stdout};
use moat_sdk::{Error, OwnedReadHalf, OwnedWriteHalf, TcpListener, TcpStream, UdpSocket};

const USAGE: &str = "usage: ncat [-u] [-l] HOST PORT";

/// How long a UDP client waits for more replies once stdin has ended.
const UDP_LINGER: Duration = Duration::from_secs(1);

#[moat_sdk::main]
async fn main() -> Result<(), String> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut flag = |name: &str| match args.iter().position(|a| a == name) {
        Some(i) => {
            args.remove(i);
            true
        }
        None => false,
    };
    let (udp, listen) = (flag("-u"), flag("-l"));
    let [host, port] = &args[..] else {
        return Err(USAGE.to_owned());
    };
    let port: u16 = port
        .parse()
        .map_err(|_| format!("`{port}` is not a port number; {USAGE}"))?;
    if udp {
        let done = if listen {
            udp_serve(host, port).await
        } else {
            udp_client(host, port).await
        };
        return done.map_err(|e| format!("ncat: {e}"));
    }
    let stream = if listen {
        accept_one(host, port).await
    } else {
        TcpStream::connect(host, port).await
    }
    .map_err(|e| format!("ncat: {e}"))?;
    relay(stream).await.map_err(|e| format!("ncat: {e}"))
}

async fn accept_one(host: &str, port: u16) -> Result<TcpStream, Error> {
    let listener = TcpListener::bind(host, port).await?;
    eprintln!("ncat: listening on {}", listener.local_addr()?);
    let stream = listener.accept().await?.ok_or(Error::Closed)?;
    listener.close().await;
    Ok(stream)
}

async fn relay(stream: TcpStream) -> Result<(), Error> {
    let (from_peer, to_peer) = stream.into_split();
    let printing = moat_sdk::spawn(socket_to_stdout(from_peer));
    stdin_to_socket(to_peer).await?;
    printing.await
}

async fn stdin_to_socket(mut to_peer: OwnedWriteHalf) -> Result<(), Error> {
    let mut input = stdin();
    let mut buf = Vec::with_capacity(64 * 1024);
    loop {
        buf.clear();
        let n = input
            .read_buf(&mut buf)
            .await
            .map_err(|e| Error::Other(format!("stdin: {e}")))?;
        if n == 0 {
            break;
        }
        buf = to_peer.write_all_owned(buf).await?;
    }
    to_peer.shutdown().await
}

async fn socket_to_stdout(mut from_peer: OwnedReadHalf) -> Result<(), Error> {
    let mut out = stdout();
    let mut buf = Vec::with_capacity(64 * 1024);
    loop {
        buf.clear();
        if from_peer.read_buf(&mut buf).await? == 0 {
            break;
        }
        out.write_all(&buf)
            .await
            .map_err(|e| Error::Other(format!("stdout: {e}")))?;
    }
    out.close()
        .await
        .map_err(|e| Error::Other(format!("stdout: {e}")))
}

/// `-u -l`: print each datagram and send it back to its sender.
async fn udp_serve(host: &str, port: u16) -> Result<(), Error> {
    let socket = UdpSocket::bind(host, port).await?;
    eprintln!("ncat: listening on {} (udp)", socket.local_addr()?);
    let mut out = stdout();
    loop {
        let datagram = socket.recv().await?;
        let mut line = datagram.data.clone();
        line.push(b'\n');
        out.write_all(&line)
            .await
            .map_err(|e| Error::Other(format!("stdout: {e}")))?;
        let from = datagram.from;
        socket
            .send_to(&datagram.data, &from.ip().to_string(), from.port())
            .await?;
    }
}

/// `-u`: each stdin line goes out as a datagram; replies are printed.
async fn udp_client(host: &str, port: u16) -> Result<(), Error> {
    use std::cell::Cell;
    use std::rc::Rc;

    let wildcard = if host.contains(':') { "::" } else { "0.0.0.0" };
    let socket = Rc::new(UdpSocket::bind(wildcard, 0).await?);
    // When the last datagram came: the client lingers until it is a while ago.
    let last_heard = Rc::new(Cell::new(moat_sdk::time::now()));
    let printing = {
        let (socket, last_heard) = (Rc::clone(&socket), Rc::clone(&last_heard));
        moat_sdk::spawn(async move {
            let mut out = stdout();
            while let Ok(datagram) = socket.recv().await {
                last_heard.set(moat_sdk::time::now());
                let mut line = datagram.data;
                line.push(b'\n');
                if out.write_all(&line).await.is_err() {
                    break;
                }
            }
            let _ = out.close().await;
        })
    };
    let mut input = stdin();
    let mut pending = Vec::new();
    let mut buf = Vec::with_capacity(64 * 1024);
    loop {
        buf.clear();
        let n = input
            .read_buf(&mut buf)
            .await
            .map_err(|e| Error::Other(format!("stdin: {e}")))?;
        pending.extend_from_slice(&buf);
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            socket.send_to(&line[..line.len() - 1], host, port).await?;
        }
        if n == 0 {
            if !pending.is_empty() {
                socket.send_to(&pending, host, port).await?;
            }
            break;
        }
    }
    last_heard.set(last_heard.get().max(moat_sdk::time::now()));
    loop {
        let quiet = moat_sdk::time::now().saturating_sub(last_heard.get());
        if quiet >= UDP_LINGER {
            break;
        }
        moat_sdk::time::sleep(UDP_LINGER - quiet).await;
    }
    socket.close();
    printing.await;
    Ok(())
}
