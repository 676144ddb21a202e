//! Embedding moat: a Rust program that runs a guest under a policy it
//! builds in code, feeds it input and prints what the guest did.
//!
//! ```text
//! cargo build --release --target wasm32-wasip2 -p ncat
//! cargo run -p embed -- target/wasm32-wasip2/release/ncat.wasm
//! ```
//!
//! It starts a small echo service of its own, lets the `ncat` guest reach
//! that one address and nothing else, and runs it twice: once to the
//! allowed address, once to a port it was not granted.

use anyhow::Context;
use moat_host::policy::Policy;
use moat_host::{Captured, Config, Input, Moat, Output, RunOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

fn main() -> anyhow::Result<()> {
    let guest_path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/wasm32-wasip2/release/ncat.wasm".into());
    // moat keeps a guest and its sockets on one thread: a current-thread
    // runtime is the fast and simple choice.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(&guest_path))
}

async fn run(guest_path: &str) -> anyhow::Result<()> {
    let service = TcpListener::bind("127.0.0.1:0").await?;
    let port = service.local_addr()?.port();
    tokio::spawn(echo_uppercase(service));

    let moat = Moat::new(&Config::default())?;
    let guest = moat
        .load(guest_path)
        .context("build it first: cargo build --release --target wasm32-wasip2 -p ncat")?;

    // The policy, in code: this one address may be reached; nothing may
    // listen.
    let policy = Policy::new().allow_connect(&format!("127.0.0.1:{port}"))?;

    for target_port in [port, port + 1] {
        let stdout = Captured::new();
        let stderr = Captured::new();
        let options = RunOptions::new(policy.clone())
            .args(["ncat", "127.0.0.1", &target_port.to_string()])
            .stdin(Input::Bytes(b"hello from the embedder\n".to_vec()))
            .stdout(Output::Capture(stdout.clone()))
            .stderr(Output::Capture(stderr.clone()));
        let exit = moat.run(&guest, options).await?;
        println!(
            "ncat to 127.0.0.1:{target_port} exited with {}",
            exit.code()
        );
        print_lines("  stdout", &stdout.contents());
        print_lines("  stderr", &stderr.contents());
    }
    Ok(())
}

fn print_lines(label: &str, bytes: &[u8]) {
    for line in String::from_utf8_lossy(bytes).lines() {
        println!("{label} | {line}");
    }
}

/// The service the guest may reach: sends back what it gets, upper-cased.
async fn echo_uppercase(listener: TcpListener) {
    while let Ok((mut conn, _)) = listener.accept().await {
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            while let Ok(n @ 1..) = conn.read(&mut buf).await {
                buf[..n].make_ascii_uppercase();
                if conn.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
            let _ = conn.shutdown().await;
        });
    }
}
