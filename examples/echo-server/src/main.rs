//! An echo server: every connection gets back what it sends, until it
//! half-closes; then the server half-closes too.
//!
//! ```text
//! moat run --allow-listen=127.0.0.1:7000 echo-server.wasm 127.0.0.1:7000
//! ```
//!
//! Port 0 picks a free port; the address is printed on stdout as
//! `listening on HOST:PORT`.

use moat_sdk::{Error, TcpListener, TcpStream};

/// The buffer each connection reads into: one 64 KiB chunk, moved to and
/// from the host without a copy.
const CHUNK: usize = 64 * 1024;

#[moat_sdk::main]
async fn main() -> Result<(), Error> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:7000".to_owned());
    let Some((host, port)) = moat_sdk::split_host_port(&addr) else {
        return Err(Error::InvalidArgument(format!(
            "`{addr}` is not HOST:PORT (usage: echo-server HOST:PORT)"
        )));
    };
    let listener = TcpListener::bind((host, port)).await?;
    println!("listening on {}", listener.local_addr()?);
    loop {
        let (conn, _) = listener.accept().await?;
        moat_sdk::spawn(async move {
            if let Err(e) = echo(conn).await {
                eprintln!("echo-server: {e}");
            }
        });
    }
}

async fn echo(mut conn: TcpStream) -> Result<(), Error> {
    let mut buf = Vec::with_capacity(CHUNK);
    loop {
        buf.clear();
        if conn.read_buf(&mut buf).await? == 0 {
            break;
        }
        buf = conn.write_all_owned(buf).await?;
    }
    conn.shutdown().await
}
