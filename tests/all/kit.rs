//! The embedding kit (`moat_host::kit`): guests on a wasmtime engine,
//! linker and store of the embedder's own, in the kit's three steps, held
//! to the same grants as under `moat run`: a stock wasi:sockets program,
//! an SDK guest (whose `wasi:cli/run@0.3.0` the kit calls) and a wasi:http
//! client.

use std::sync::{Arc, Mutex};

use moat_host::kit::{self, MoatCtx, MoatCtxView, MoatView, RunError};
use moat_host::net::{Limits, Notices};
use moat_host::policy::Policy;
use wasmtime::Store;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::support::{connections, echo_server, guests, watched_port, within};

/// An embedder's store data: WASI, moat's context, one table.
struct Embedder {
    wasi: WasiCtx,
    moat: MoatCtx,
    table: ResourceTable,
}

impl WasiView for Embedder {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl MoatView for Embedder {
    fn moat(&mut self) -> MoatCtxView<'_> {
        MoatCtxView {
            ctx: &mut self.moat,
            table: &mut self.table,
        }
    }
}

/// What one run on the embedder's linker gave.
struct Ran {
    exit: Result<i32, RunError>,
    stdout: String,
    stderr: String,
    notices: Vec<String>,
}

/// Runs `guest` with `args` under `policy` and `limits`, in the kit's
/// calls (`engine`, `add_to_linker`, the builder, `run_to_end`), on a
/// linker and store of the test's own.
async fn run_on_own_linker(guest: &str, policy: Policy, limits: Limits, args: &[&str]) -> Ran {
    let (engine, ticker) = kit::engine().unwrap();
    let mut linker = Linker::<Embedder>::new(&engine);
    kit::add_to_linker(&mut linker).unwrap();
    let component = Component::from_file(&engine, guest).unwrap();

    let told = Arc::new(Mutex::new(Vec::new()));
    let notices = Arc::clone(&told);
    let stdout = MemoryOutputPipe::new(1 << 20);
    let stderr = MemoryOutputPipe::new(1 << 20);
    let mut wasi = WasiCtxBuilder::new();
    wasi.arg(guest)
        .args(args)
        .stdout(stdout.clone())
        .stderr(stderr.clone());
    let moat = MoatCtx::builder(policy)
        .limits(limits)
        .notices(Notices::new(move |line| {
            notices.lock().unwrap().push(line.to_owned());
        }))
        .build(&ticker, &mut wasi);
    let store = Store::new(
        &engine,
        Embedder {
            wasi: wasi.build(),
            moat,
            table: ResourceTable::new(),
        },
    );
    let exit = kit::run_to_end(store, &component, &linker).await;
    let notices = told.lock().unwrap().clone();
    Ran {
        exit,
        stdout: String::from_utf8_lossy(&stdout.contents()).into_owned(),
        stderr: String::from_utf8_lossy(&stderr.contents()).into_owned(),
        notices,
    }
}

#[tokio::test]
async fn a_stock_program_on_an_embedders_linker_gets_the_same_grants() {
    let (port, served) = echo_server().await;
    let p = port.to_string();
    let policy = Policy::new()
        .allow_connect(&format!("127.0.0.1:{port}"))
        .unwrap();
    let ran = run_on_own_linker(
        guests::STD_NET,
        policy,
        Limits::default(),
        &["tcp-client", "127.0.0.1", &p, "embedded"],
    )
    .await;
    assert_eq!(ran.exit.unwrap(), 0, "{}", ran.stdout);
    assert!(ran.stdout.contains("reply: embedded"), "{}", ran.stdout);
    assert!(ran.notices.is_empty(), "{:?}", ran.notices);
    assert_eq!(within("echo server", served).await.unwrap(), b"embedded");

    let (listener, port) = watched_port();
    let p = port.to_string();
    let ran = run_on_own_linker(
        guests::STD_NET,
        Policy::new(),
        Limits::default(),
        &["tcp-client", "127.0.0.1", &p, "x"],
    )
    .await;
    assert_eq!(ran.exit.unwrap(), 1, "{}", ran.stdout);
    assert!(
        ran.stdout.contains("error: PermissionDenied"),
        "{}",
        ran.stdout
    );
    assert_eq!(
        ran.notices,
        [format!(
            "connect to 127.0.0.1:{port} denied: needs Policy::allow_connect(\"127.0.0.1:{port}\")"
        )]
    );
    assert_eq!(connections(&listener), 0);
}

/// An SDK guest exports `wasi:cli/run@0.3.0`: the kit calls it, moat:net
/// works, and its denial is the policy's.
#[tokio::test]
async fn an_sdk_guest_runs_on_an_embedders_linker_under_the_same_grants() {
    let (listener, port) = watched_port();
    let p = port.to_string();
    let policy = Policy::new()
        .allow_connect(&format!("127.0.0.1:{port}"))
        .unwrap();
    let ran = run_on_own_linker(
        guests::PROBE,
        policy,
        Limits::default(),
        &["connect", "127.0.0.1", &p],
    )
    .await;
    assert_eq!(ran.exit.unwrap(), 0, "{}", ran.stdout);
    assert!(
        ran.stdout
            .contains(&format!("connected to 127.0.0.1:{port}")),
        "{}",
        ran.stdout
    );
    assert_eq!(connections(&listener), 1);

    let ran = run_on_own_linker(
        guests::PROBE,
        Policy::new(),
        Limits::default(),
        &["connect", "127.0.0.1", &p],
    )
    .await;
    assert_eq!(ran.exit.unwrap(), 1, "main returned the denial");
    assert!(
        ran.stderr.contains(&format!(
            "connect to 127.0.0.1:{port} denied: needs Policy::allow_connect(\"127.0.0.1:{port}\")"
        )),
        "{}",
        ran.stderr
    );
    assert_eq!(connections(&listener), 0, "no connection was made");
}

/// The kit's store carries the run's bounds: a guest past its socket cap
/// is refused with `limit-reached`, and the host goes on.
#[tokio::test]
async fn the_kit_holds_a_guest_to_its_socket_cap() {
    let (_listener, port) = watched_port();
    let p = port.to_string();
    let policy = Policy::new()
        .allow_listen("127.0.0.1")
        .unwrap()
        .allow_connect(&format!("127.0.0.1:{port}"))
        .unwrap();
    // The probe's "exit" listens and connects: two sockets, one allowed.
    let limits = Limits {
        max_sockets: Some(1),
        ..Limits::default()
    };
    let ran = run_on_own_linker(
        guests::PROBE,
        policy,
        limits,
        &["exit", "127.0.0.1", &p, "0", "7"],
    )
    .await;
    assert_eq!(ran.exit.unwrap(), 1, "{}", ran.stdout);
    assert!(!ran.stdout.contains("holding"), "{}", ran.stdout);
    assert!(
        ran.stderr.contains("limit reached") && ran.stderr.contains("Limits::max_sockets"),
        "{}",
        ran.stderr
    );
}

#[tokio::test]
async fn a_wasi_http_client_on_an_embedders_linker_gets_the_same_grants() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = server.local_addr().unwrap().port();
    let serving = tokio::spawn(async move {
        let (mut stream, _) = server.accept().await.unwrap();
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut byte = [0u8; 1];
            if stream.read(&mut byte).await.unwrap() == 0 {
                break;
            }
            head.push(byte[0]);
        }
        stream
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nembedded\n")
            .await
            .unwrap();
    });
    let url = format!("http://127.0.0.1:{port}/");
    let policy = Policy::new()
        .allow_connect(&format!("127.0.0.1:{port}"))
        .unwrap();
    let ran = run_on_own_linker(
        guests::HTTP_PROBE,
        policy,
        Limits::default(),
        &["fetch", &url],
    )
    .await;
    assert_eq!(ran.exit.unwrap(), 0, "{}{}", ran.stdout, ran.stderr);
    assert_eq!(ran.stdout, "status: 200\nembedded\n");
    within("the server", serving).await.unwrap();

    let ran = run_on_own_linker(
        guests::HTTP_PROBE,
        Policy::new(),
        Limits::default(),
        &["fetch", &url],
    )
    .await;
    assert_eq!(ran.stdout, "error: ErrorCode::HttpRequestDenied\n");
    assert_eq!(
        ran.notices,
        [format!(
            "HTTP request: connect to 127.0.0.1:{port} denied: needs \
             Policy::allow_connect(\"127.0.0.1:{port}\")"
        )]
    );
}
