//! A UDP echo server: every datagram goes back to its sender.
//!
//! ```text
//! moat run --allow-listen=127.0.0.1:9000 --allow-net=127.0.0.1 udp-echo.wasm 127.0.0.1:9000
//! ```
//!
//! A UDP socket is a server and a client at once: `--allow-listen` for its
//! own address, `--allow-net` for the senders it answers. A sender it may
//! not answer is skipped, with a line on stderr. Port 0 picks a free port;
//! the address is printed on stdout as `listening on HOST:PORT`.

use moat_sdk::{Error, UdpSocket};

#[moat_sdk::main]
async fn main() -> Result<(), Error> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9000".to_owned());
    let Some((host, port)) = moat_sdk::split_host_port(&addr) else {
        return Err(Error::InvalidArgument(format!(
            "`{addr}` is not HOST:PORT (usage: udp-echo HOST:PORT)"
        )));
    };
    let socket = UdpSocket::bind((host, port)).await?;
    println!("listening on {}", socket.local_addr()?);
    loop {
        let datagram = socket.recv().await?;
        if let Err(e) = socket.send_to_addr(&datagram.data, datagram.from).await {
            match e {
                Error::Denied(_) | Error::Unreachable(_) => {
                    eprintln!("udp-echo: not answering {}: {e}", datagram.from);
                }
                e => return Err(e),
            }
        }
    }
}
