//! A stock tokio program: tokio's `net` (mio over wasi:sockets 0.2), no
//! moat dependency. tokio builds it for wasm32-wasip2 with `--cfg
//! tokio_unstable` (set in .cargo/config.toml). tokio resolves names on
//! its blocking pool, which has no threads on wasm32-wasip2, so this guest
//! takes addresses.
//!
//! ```text
//! tokio-net tcp-client ADDR MESSAGE   connect, send, half-close, print the reply
//! tokio-net tcp-server ADDR           listen, print "listening on ADDR", echo one client
//! ```
//!
//! A failure prints `error: KIND: MESSAGE` and exits with 1.

use std::process::ExitCode;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    let result = match arg(0) {
        "tcp-client" => tcp_client(arg(1), arg(2)).await,
        "tcp-server" => tcp_server(arg(1)).await,
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

async fn tcp_client(addr: &str, message: &str) -> std::io::Result<()> {
    let addr: std::net::SocketAddr = addr
        .parse()
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "not an address"))?;
    let mut stream = TcpStream::connect(addr).await?;
    stream.write_all(message.as_bytes()).await?;
    stream.shutdown().await?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).await?;
    println!("reply: {}", String::from_utf8_lossy(&reply));
    Ok(())
}

async fn tcp_server(addr: &str) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    println!("listening on {}", listener.local_addr()?);
    let (mut stream, _) = listener.accept().await?;
    let (mut rd, mut wr) = stream.split();
    tokio::io::copy(&mut rd, &mut wr).await?;
    wr.shutdown().await?;
    Ok(())
}
