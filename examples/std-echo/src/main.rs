//! A plain `std::net` echo server, with no moat dependency: the kind of
//! program someone else built, run under moat's grants.
//!
//! ```text
//! cargo build --release --target wasm32-wasip2 -p std-echo
//! moat run --allow-listen=127.0.0.1:7000 std-echo.wasm 127.0.0.1:7000
//! ```
//!
//! wasm32-wasip2 has no threads, so it serves one client at a time, each
//! until it closes its side. `std-echo ADDR [CLIENTS]` stops after CLIENTS
//! clients (default: never).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:7000".to_owned());
    let clients: Option<usize> = args.next().and_then(|n| n.parse().ok());
    let listener = match TcpListener::bind(&addr) {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("std-echo: cannot listen on {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    match listener.local_addr() {
        Ok(local) => println!("listening on {local}"),
        Err(e) => eprintln!("std-echo: {e}"),
    }
    let mut served = 0;
    while clients.is_none_or(|n| served < n) {
        match listener.accept() {
            Ok((stream, peer)) => {
                if let Err(e) = echo(stream) {
                    eprintln!("std-echo: {peer}: {e}");
                }
                served += 1;
            }
            Err(e) => eprintln!("std-echo: accept: {e}"),
        }
    }
    ExitCode::SUCCESS
}

fn echo(mut stream: TcpStream) -> std::io::Result<()> {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        stream.write_all(&buf[..n])?;
    }
}
