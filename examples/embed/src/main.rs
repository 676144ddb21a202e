//! Embedding moat: a Rust program that runs guests under a policy it
//! builds in code, feeds them input and prints what they did. Two ways:
//!
//! 1. [`Moat::run`]: moat's engine, linker and store, everything set up.
//! 2. A wasmtime engine, linker and store of the program's own, with
//!    moat's kit ([`moat_host::kit`]): a context built for the store
//!    ([`MoatCtx::builder`]), a view trait ([`MoatView`]) and
//!    [`kit::add_to_linker`], as wasmtime-wasi's three steps; the kit also
//!    sets the store up ([`kit::prepare`]: the memory limiter, the epoch
//!    yields that let a computing guest's writes drain) and finishes the
//!    run (the closing linger).
//!
//! ```text
//! cargo build --release --target wasm32-wasip2 -p ncat -p std-fetch
//! cargo run -p embed -- target/wasm32-wasip2/release/ncat.wasm target/wasm32-wasip2/release/std-fetch.wasm
//! ```
//!
//! It starts two small services of its own (one answers in upper case, one
//! speaks just enough HTTP/1.0), lets each guest reach one of them and
//! nothing else, and runs each twice: once to the allowed address, once to
//! a port it was not granted. The second guest is a plain std::net
//! program, run the second way.

use anyhow::Context;
use moat_host::kit::{self, MoatCtx, MoatCtxView, MoatView};
use moat_host::net::Notices;
use moat_host::policy::Policy;
use moat_host::{Captured, Input, Moat, MoatConfig, Output, RunOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use wasmtime::Store;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

fn main() -> anyhow::Result<()> {
    let guest_path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/wasm32-wasip2/release/ncat.wasm".into());
    let stock_path = std::env::args()
        .nth(2)
        .unwrap_or_else(|| "target/wasm32-wasip2/release/std-fetch.wasm".into());
    // moat keeps a guest and its sockets on one thread: a current-thread
    // runtime is the fast and simple choice.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let service = TcpListener::bind("127.0.0.1:0").await?;
        let port = service.local_addr()?.port();
        tokio::spawn(echo_uppercase(service));
        println!("1. Moat::run, an SDK guest:");
        run(&guest_path, port).await?;
        let web = TcpListener::bind("127.0.0.1:0").await?;
        let web_port = web.local_addr()?.port();
        tokio::spawn(http_hello(web));
        println!("2. An engine and linker of our own, a std::net guest:");
        run_own_linker(&stock_path, web_port).await
    })
}

async fn run(guest_path: &str, port: u16) -> anyhow::Result<()> {
    let moat = Moat::new(&MoatConfig::default())?;
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

/// The data of a store of our own: WASI, and moat's context beside it.
struct Host {
    wasi: WasiCtx,
    moat: MoatCtx,
    table: ResourceTable,
}

impl WasiView for Host {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl MoatView for Host {
    fn moat(&mut self) -> MoatCtxView<'_> {
        MoatCtxView {
            ctx: &mut self.moat,
            table: &mut self.table,
        }
    }
}

async fn run_own_linker(stock_path: &str, port: u16) -> anyhow::Result<()> {
    // The ticker ticks the epoch while some socket of these runs has bytes
    // queued.
    let (engine, ticker) = kit::engine()?;
    let mut linker = Linker::<Host>::new(&engine);
    kit::add_to_linker(&mut linker)?;
    let component = Component::from_file(&engine, stock_path).map_err(|e| {
        anyhow::Error::from(e)
            .context("build it first: cargo build --release --target wasm32-wasip2 -p std-fetch")
    })?;

    // Names are judged as written: the grant names localhost, and the
    // guest's lookup of localhost is what lets it reach 127.0.0.1.
    let policy = Policy::new().allow_connect(&format!("localhost:{port}"))?;
    for target_port in [port, port + 1] {
        let stdout = MemoryOutputPipe::new(1 << 20);
        let mut wasi = WasiCtxBuilder::new();
        wasi.args(&["std-fetch", &format!("localhost:{target_port}"), "/hello"])
            .stdout(stdout.clone());
        let moat = MoatCtx::builder(policy.clone())
            .notices(Notices::new(|line| println!("  notice | {line}")))
            .build(&ticker, &mut wasi);
        let host = Host {
            wasi: wasi.build(),
            moat,
            table: ResourceTable::new(),
        };
        // Sockets the guest closed with bytes queued get to send them
        // before this returns.
        let ran = kit::run_to_end(Store::new(&engine, host), &component, &linker).await?;
        println!(
            "std-fetch to localhost:{target_port} {}",
            if ran == 0 { "succeeded" } else { "failed" }
        );
        print_lines("  stdout", &stdout.contents());
    }
    Ok(())
}

/// The service std-fetch may reach: one HTTP/1.0 answer per connection.
async fn http_hello(listener: TcpListener) {
    while let Ok((mut conn, _)) = listener.accept().await {
        tokio::spawn(async move {
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.ends_with(b"\r\n\r\n") {
                match conn.read(&mut buf).await {
                    Ok(n @ 1..) => request.extend_from_slice(&buf[..n]),
                    _ => return,
                }
            }
            let body = "hello from the embedder's service\n";
            let response = format!(
                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = conn.write_all(response.as_bytes()).await;
        });
    }
}
