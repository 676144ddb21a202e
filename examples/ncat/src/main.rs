//! A netcat: relays stdin to a TCP connection and the connection to stdout.
//!
//! ```text
//! ncat HOST PORT         connect, then relay
//! ncat -l HOST PORT      accept one connection, then relay
//! ```
//!
//! When stdin ends, ncat half-closes the connection (sends a FIN) and keeps
//! printing what the peer sends until the peer closes too. It exits 0 when
//! both directions are done, 1 with a message on error.

use moat_sdk::io::{stdin, stdout};
use moat_sdk::{Error, OwnedReadHalf, OwnedWriteHalf, TcpListener, TcpStream};

const USAGE: &str = "usage: ncat [-l] HOST PORT";

#[moat_sdk::main]
async fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (listen, rest) = match args.first().map(String::as_str) {
        Some("-l") => (true, &args[1..]),
        _ => (false, &args[..]),
    };
    let [host, port] = rest else {
        return Err(USAGE.to_owned());
    };
    let port: u16 = port
        .parse()
        .map_err(|_| format!("`{port}` is not a port number; {USAGE}"))?;
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
