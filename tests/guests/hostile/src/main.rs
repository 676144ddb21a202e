//! Test guest: one subcommand per way a hostile guest tries to make the
//! host hold more than it should. Each prints what it saw on stdout, and
//! reports a limit it met as a line, not as an error, so the test can read
//! how far it got.

mod advisory;

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use moat_sdk::time::{sleep, timeout};
use moat_sdk::{ConnectOptions, Error, TcpListener, TcpStream, UdpSocket};

#[moat_sdk::main]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| -> Result<&str, Error> {
        args.get(i)
            .map(String::as_str)
            .ok_or_else(|| Error::InvalidArgument(format!("hostile: argument {i} missing")))
    };
    let num = |i: usize| -> Result<u64, Error> {
        arg(i)?
            .parse()
            .map_err(|_| Error::InvalidArgument(format!("hostile: argument {i} is not a number")))
    };
    match arg(0)? {
        "park-udp" => park_udp(num(1)?).await?,
        "empty-writes" => advisory::empty_writes_to(num(1)?, arg(2)?, arg(3).unwrap_or_default()),
        "udp-elsewhere" => advisory::udp_elsewhere(num(1)? as u16, num(2)? as u16),
        "content-length" => advisory::content_length(num(1)? as u16, num(2)?, num(3)?),
        "hold-sockets" => hold_sockets(arg(1)?, num(2)? as u16, num(3)?).await?,
        "drop-unsent" => {
            drop_unsent(arg(1)?, num(2)? as u16, num(3)?, num(4)? as usize).await?;
            if args.get(5).is_some_and(|a| a == "hold") {
                // Stay alive until the test connects to the printed port.
                let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
                println!("waiting on {}", listener.local_addr()?);
                let _ = listener.accept().await?;
            }
        }
        "grow-memory" => grow_memory(num(1)?),
        "denied-connects" => {
            // Asks for N connects no grant allows, then waits for stdin to
            // close so that the test can read the host's peak memory.
            let (host, port) = (arg(2)?, num(3)? as u16);
            let mut refused = 0u64;
            for _ in 0..num(1)? {
                if let Err(Error::Denied(_)) = TcpStream::connect((host, port)).await {
                    refused += 1;
                }
            }
            println!("refused {refused}");
            wait_for_stdin();
        }
        "fill-trail" => {
            // Asks for N connects to HOST:1, HOST:2, ... that no grant
            // allows (each a denial of its own), then for one that is
            // granted; prints how many were refused, then what became of
            // the granted one.
            let host = arg(2)?;
            let mut refused = 0u64;
            for port in 0..num(1)? {
                let port = (port % 65_535 + 1) as u16;
                if let Err(Error::Denied(_)) = TcpStream::connect((host, port)).await {
                    refused += 1;
                }
            }
            println!("refused {refused}");
            match TcpStream::connect((arg(3)?, num(4)? as u16)).await {
                Ok(_) => println!("connected"),
                Err(e) => println!("trail refused: {e}"),
            }
        }
        "udp-flood" => {
            // Sends N datagrams to one destination, then waits as above.
            let socket = UdpSocket::bind(("127.0.0.1", 0)).await?;
            let (host, port) = (arg(2)?, num(3)? as u16);
            let mut sent = 0u64;
            for _ in 0..num(1)? {
                if socket.send_to(b"x", (host, port)).await.is_ok() {
                    sent += 1;
                }
            }
            println!("sent {sent}");
            wait_for_stdin();
        }
        "spin" => {
            println!("spinning");
            let mut x = 0u64;
            loop {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        "wait-forever" => {
            println!("waiting");
            sleep(Duration::from_secs(24 * 3600)).await;
        }
        "connect-timeout" => {
            let options = ConnectOptions {
                timeout: Some(Duration::from_millis(num(3)?)),
                ..ConnectOptions::default()
            };
            match TcpStream::connect_with((arg(1)?, num(2)? as u16), &options).await {
                Ok(_) => println!("connected"),
                Err(e) => println!("connect: {e}"),
            }
        }
        "connect-abandon" => {
            // Stop waiting for a connect (its future dropped), then stay
            // alive until the test connects to the printed port.
            let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
            let waited = timeout(
                Duration::from_millis(num(3)?),
                TcpStream::connect((arg(1)?, num(2)? as u16)),
            )
            .await;
            println!(
                "abandoned ({}); waiting on {}",
                if waited.is_err() {
                    "timed out"
                } else {
                    "finished"
                },
                listener.local_addr()?
            );
            let _ = listener.accept().await?;
        }
        other => {
            return Err(Error::InvalidArgument(format!(
                "hostile: unknown command {other}"
            )));
        }
    }
    Ok(())
}

/// Parks `n` receives on one socket, then waits for a datagram on a second
/// one (the test's "stop"), closes the first and reports how each ended.
async fn park_udp(n: u64) -> Result<(), Error> {
    let parked_on = Rc::new(UdpSocket::bind(("127.0.0.1", 0)).await?);
    let control = Rc::new(UdpSocket::bind(("127.0.0.1", 0)).await?);
    // Waiting for "stop" first: it must not be refused for the parked ones.
    let stop = {
        let control = Rc::clone(&control);
        moat_sdk::spawn(async move { control.recv().await.map(|_| ()) })
    };
    sleep(Duration::from_millis(10)).await;
    let refused = Rc::new(Cell::new(0u64));
    let first_refusal = Rc::new(Cell::new(None::<String>));
    let mut tasks = Vec::new();
    for _ in 0..n {
        let socket = Rc::clone(&parked_on);
        let refused = Rc::clone(&refused);
        let first = Rc::clone(&first_refusal);
        tasks.push(moat_sdk::spawn(async move {
            match socket.recv().await {
                Ok(_) => 1u64,
                Err(Error::Closed(_)) => 0,
                Err(e) => {
                    refused.set(refused.get() + 1);
                    if first.take().is_none() {
                        first.set(Some(e.to_string()));
                    }
                    0
                }
            }
        }));
    }
    // Let every task reach its receive before reporting.
    sleep(Duration::from_millis(50)).await;
    println!(
        "parked {n} on {}; control {}",
        parked_on.local_addr()?,
        control.local_addr()?
    );
    stop.await??;
    parked_on.close();
    let mut received = 0;
    for task in tasks {
        received += task.await?;
    }
    println!(
        "received {received}, refused {} ({})",
        refused.get(),
        first_refusal.take().unwrap_or_default()
    );
    Ok(())
}

/// Connects up to `n` times, keeping every connection, and reports how
/// many it got and why it stopped.
async fn hold_sockets(host: &str, port: u16, n: u64) -> Result<(), Error> {
    let mut held = Vec::new();
    let mut stopped = String::from("none");
    for _ in 0..n {
        match TcpStream::connect((host, port)).await {
            Ok(stream) => held.push(stream),
            Err(e) => {
                stopped = e.to_string();
                break;
            }
        }
    }
    println!("held {}; stopped by: {stopped}", held.len());
    Ok(())
}

/// Connects, writes `bytes` (as much as the host takes in 200 ms) and drops
/// the connection, `n` times, against a peer that does not read.
async fn drop_unsent(host: &str, port: u16, n: u64, bytes: usize) -> Result<(), Error> {
    let payload = vec![b'x'; bytes];
    let mut dropped = 0;
    let mut stopped = String::from("none");
    for _ in 0..n {
        match TcpStream::connect((host, port)).await {
            Ok(mut stream) => {
                let _ = timeout(Duration::from_millis(200), stream.write_all(&payload)).await;
                drop(stream);
                dropped += 1;
            }
            Err(e) => {
                stopped = e.to_string();
                break;
            }
        }
    }
    println!("dropped {dropped}; stopped by: {stopped}");
    Ok(())
}

/// Grows the heap 1 MiB at a time, touching every page, up to `mib` MiB.
fn grow_memory(mib: u64) {
    let mut blocks: Vec<Vec<u8>> = Vec::new();
    for i in 1..=mib {
        blocks.push(vec![1u8; 1 << 20]);
        if i % 16 == 0 {
            println!("grew to {i} MiB");
        }
    }
    println!("grew to {mib} MiB: no limit met");
}

/// Reads stdin to its end: the test closes it once it has looked at the
/// host.
fn wait_for_stdin() {
    use std::io::Read as _;
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}
