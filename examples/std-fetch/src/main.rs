//! A plain `std::net` HTTP/1.0 client, with no moat dependency: it looks a
//! name up and connects to the address, as every stock program does; moat
//! judges the connect as a connect to the name.
//!
//! ```text
//! cargo build --release --target wasm32-wasip2 -p std-fetch
//! moat run --allow-net=example.com:80 std-fetch.wasm example.com /
//! ```
//!
//! `std-fetch HOST[:PORT] [PATH]` prints the response (headers and body).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(target) = args.next() else {
        eprintln!("usage: std-fetch HOST[:PORT] [PATH]");
        return ExitCode::from(2);
    };
    let path = args.next().unwrap_or_else(|| "/".to_owned());
    let (host, port) = match target.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => match port.parse::<u16>() {
            Ok(port) => (host.to_owned(), port),
            Err(_) => {
                eprintln!("std-fetch: bad port in {target}");
                return ExitCode::from(2);
            }
        },
        _ => (target.clone(), 80),
    };
    match fetch(&host, port, &path) {
        Ok(response) => {
            let mut out = std::io::stdout().lock();
            if out.write_all(&response).and_then(|()| out.flush()).is_err() {
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("std-fetch: {host}:{port}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn fetch(host: &str, port: u16, path: &str) -> std::io::Result<Vec<u8>> {
    let mut stream = TcpStream::connect((host, port))?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: {host}\r\nUser-Agent: std-fetch\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    Ok(response)
}
