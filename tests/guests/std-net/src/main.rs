//! Tries the network through std::net (wasi:sockets), the way around
//! moat:net that moat keeps shut. Prints what happened to each attempt.
//!
//! usage: std-net HOST PORT

use std::io::Write;
use std::net::{TcpListener, TcpStream};

fn main() {
    let mut args = std::env::args().skip(1);
    let host = args.next().unwrap_or_else(|| "127.0.0.1".into());
    let port = args.next().and_then(|p| p.parse().ok()).unwrap_or(7000u16);
    let mut reached = false;
    match TcpStream::connect((host.as_str(), port)) {
        Ok(mut s) => {
            reached = true;
            let _ = s.write_all(b"std::net got through\n");
            println!("connect: reached {host}:{port}");
        }
        Err(e) => println!("connect: {:?}: {e}", e.kind()),
    }
    match TcpListener::bind(("127.0.0.1", 0)) {
        Ok(l) => {
            reached = true;
            println!("listen: bound {:?}", l.local_addr());
        }
        Err(e) => println!("listen: {:?}: {e}", e.kind()),
    }
    // std maps any non-zero code to wasi:cli/exit's error, which is exit code 1.
    std::process::exit(if reached { 0 } else { 1 });
}
