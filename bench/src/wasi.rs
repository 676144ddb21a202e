//! The yardstick: a std::net guest on wasmtime-wasi's own p2 sockets, set
//! up the way `wasmtime run -S inherit-network` runs one (synchronous
//! bindings over wasmtime-wasi's shared tokio runtime).

use anyhow::Context;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

struct State {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// `moat-bench serve-wasi GUEST ARGS...`.
pub fn serve(args: &[String]) -> anyhow::Result<()> {
    let (guest, guest_args) = args.split_first().context("serve-wasi: no guest")?;
    run_guest(Engine::default(), guest, guest_args)
}

/// `moat-bench run-wasi [--cache-dir DIR] GUEST`: what `wasmtime run GUEST`
/// does (compile, with or without its cache, instantiate, call
/// `wasi:cli/run`), for `cold_start`'s column. A guest that exits (moat's
/// hello does: its synchronous entry point only says to use `moat run`)
/// has still been compiled and run, which is what is measured.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let mut config = wasmtime::Config::new();
    let guest = match args {
        [flag, dir, guest] if flag == "--cache-dir" => {
            let mut cache = wasmtime::CacheConfig::new();
            cache.with_directory(dir);
            config.cache(Some(wasmtime::Cache::new(cache)?));
            guest
        }
        [guest] => guest,
        _ => anyhow::bail!("usage: run-wasi [--cache-dir DIR] GUEST"),
    };
    match run_guest(Engine::new(&config)?, guest, &[]) {
        Err(e) if e.downcast_ref::<wasmtime_wasi::I32Exit>().is_some() => Ok(()),
        done => done,
    }
}

fn run_guest(engine: Engine, guest: &str, guest_args: &[String]) -> anyhow::Result<()> {
    let component = Component::from_file(&engine, guest)?;
    let mut linker = Linker::<State>::new(&engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
    let mut argv = vec![guest.to_owned()];
    argv.extend(guest_args.iter().cloned());
    let wasi = WasiCtxBuilder::new()
        .inherit_stdio()
        .args(&argv)
        .inherit_network()
        .allow_tcp(true)
        .allow_udp(true)
        .allow_ip_name_lookup(true)
        .build();
    let mut store = Store::new(
        &engine,
        State {
            wasi,
            table: ResourceTable::new(),
        },
    );
    let command =
        wasmtime_wasi::p2::bindings::sync::Command::instantiate(&mut store, &component, &linker)?;
    let _ = command.wasi_cli_run().call_run(&mut store)?;
    Ok(())
}

/// A store's state for wasi:http: WASI p2 and wasmtime-wasi-http's context,
/// its default hooks (the default `send_request`: a new connection for
/// every request) and no store limits, as wasmtime's CLI sets them.
struct HttpState {
    wasi: WasiCtx,
    http: wasmtime_wasi_http::WasiHttpCtx,
    table: ResourceTable,
    limits: wasmtime::StoreLimits,
}

impl WasiView for HttpState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl wasmtime_wasi_http::WasiHttpView for HttpState {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        wasmtime_wasi_http::WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: wasmtime_wasi_http::default_hooks(),
        }
    }
}

impl HttpState {
    /// A store for one instance, its limiter set as wasmtime's CLI sets it.
    fn store(engine: &Engine, wasi: WasiCtxBuilder) -> Store<HttpState> {
        let mut wasi = wasi;
        // What wasmtime's CLI sets when no --timeout is given.
        wasi.allow_blocking_current_thread(true);
        let mut store = Store::new(
            engine,
            HttpState {
                wasi: wasi.build(),
                http: wasmtime_wasi_http::WasiHttpCtx::new(),
                table: ResourceTable::new(),
                limits: wasmtime::StoreLimits::default(),
            },
        );
        store.limiter(|state| &mut state.limits);
        store
    }
}

/// Splits `[--cache-dir DIR] REST...` and gives the engine's config with
/// that cache (the harness's own directory: the bench never reads or
/// writes `~/.cache/wasmtime`).
fn config_with_cache(args: &[String]) -> anyhow::Result<(wasmtime::Config, &[String])> {
    let mut config = wasmtime::Config::new();
    let rest = match args {
        [flag, dir, rest @ ..] if flag == "--cache-dir" => {
            let mut cache = wasmtime::CacheConfig::new();
            cache.with_directory(dir);
            config.cache(Some(wasmtime::Cache::new(cache)?));
            rest
        }
        rest => rest,
    };
    Ok((config, rest))
}

/// Whether this machine gives a process the address space wasmtime's
/// `serve` wants before it picks the pooling allocator by default: one
/// memory reserving 2^42 bytes.
fn pooling_by_default() -> bool {
    let mut config = wasmtime::Config::new();
    config.wasm_memory64(true).memory_reservation(1 << 42);
    let Ok(engine) = Engine::new(&config) else {
        return false;
    };
    let mut store = Store::new(&engine, ());
    // In wasm pages of 64 KiB: 2^42 bytes.
    let ty = wasmtime::MemoryType::new64(0, Some(1 << 26));
    wasmtime::Memory::new(&mut store, ty).is_ok()
}

/// `moat-bench serve-wasi-http [--cache-dir DIR] ADDR COMPONENT`: a
/// wasi:http proxy component served by wasmtime-wasi-http's own
/// [`ProxyHandler`](wasmtime_wasi_http::handler::ProxyHandler), set up
/// with the defaults of `wasmtime serve -Scli` (wasmtime 50): the pooling
/// allocator when the machine allows it; a WASIp2 component gets a fresh
/// instance for each request (reuse count 1, one request at a time per
/// instance), a WASIp3 one is reused for up to 128 requests, 16 at once;
/// idle instances kept 1 s; no request timeout; at most 1,000 connections
/// and 1,000 requests at once; a listen backlog of 100, `SO_REUSEADDR`,
/// `TCP_NODELAY`; hyper's HTTP/1.1 with keep-alive on a multi-threaded
/// tokio runtime. Prints `listening on ADDR` once bound.
pub fn serve_http(args: &[String]) -> anyhow::Result<()> {
    let (mut config, rest) = config_with_cache(args)?;
    let [addr, component] = rest else {
        anyhow::bail!("usage: serve-wasi-http [--cache-dir DIR] ADDR COMPONENT");
    };
    if pooling_by_default() {
        config.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(
            wasmtime::PoolingAllocationConfig::default(),
        ));
    }
    let engine = Engine::new(&config)?;
    let component = Component::from_file(&engine, component)
        .map_err(anyhow::Error::from)
        .with_context(|| format!("cannot load {component}"))?;
    let mut linker = Linker::<HttpState>::new(&engine);
    // As `wasmtime serve -Scli` links it: all of WASI, p2 and p3, and
    // wasi:http. (Without -Scli it links the proxy world's interfaces
    // only, and a Rust component such as wstd-serve, which imports
    // wasi:cli/environment and wasi:cli/exit, does not instantiate.)
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi::p3::add_to_linker(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p3::add_to_linker(&mut linker)?;
    let pre = linker.instantiate_pre(&component)?;
    let addr: std::net::SocketAddr = addr.parse().context("ADDR: an IP address and port")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_time()
        .enable_io()
        .build()?;
    runtime.block_on(http_serve::serve(engine, pre, addr))
}

mod http_serve {
    //! The pieces of [`super::serve_http`]: wasmtime-wasi-http's
    //! `HandlerState`, `WorkerState` and `WorkerExpiration`, and the accept
    //! loop.

    use std::convert::Infallible;
    use std::io::Write;
    use std::net::SocketAddr;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::task::{Context, Poll};
    use std::time::{Duration, Instant};

    use http_body_util::{BodyExt, Full};
    use hyper::body::Bytes;
    use tokio::sync::Semaphore;
    use wasmtime::component::{InstancePre, TaskGroupId};
    use wasmtime::{Engine, Store, StoreContextMut};
    use wasmtime_wasi::WasiCtxBuilder;
    use wasmtime_wasi_http::handler::{
        HandlerState, Instance, ProxyHandler, ProxyPre, ShouldAccept, WorkerExpiration,
        WorkerState, WorkerStatus,
    };
    use wasmtime_wasi_http::{WasiBody, WasiHttpView};

    use super::HttpState;

    /// `wasmtime serve`'s defaults.
    const P2_REUSE: usize = 1;
    const P3_REUSE: usize = 128;
    const P3_AT_ONCE: usize = 16;
    const IDLE_INSTANCE: Duration = Duration::from_secs(1);
    const MAX_CONNECTIONS: usize = 1000;
    const MAX_REQUESTS: usize = 1000;
    const BACKLOG: u32 = 100;

    /// What every worker is made from.
    struct Serving {
        engine: Engine,
        pre: ProxyPre<HttpState>,
        reuse: usize,
        at_once: usize,
        instances: AtomicU64,
        requests: Semaphore,
    }

    impl HandlerState for Serving {
        type StoreData = HttpState;
        type WorkerExpiration = Expiry;
        type WorkerState = Worker;

        async fn instantiate(&self) -> wasmtime::Result<Instance<HttpState, Expiry, Worker>> {
            let id = self.instances.fetch_add(1, Ordering::Relaxed);
            let mut wasi = WasiCtxBuilder::new();
            // `wasmtime serve` tells each instance its number, and prefixes
            // its output lines with it; the component here writes nothing.
            wasi.env("INSTANCE_ID", id.to_string())
                .inherit_stdout()
                .inherit_stderr();
            let mut store = HttpState::store(&self.engine, wasi);
            let proxy = self.pre.instantiate_async(&mut store).await?;
            Ok(Instance {
                store,
                proxy,
                view: HttpState::http,
                expiration: Expiry {
                    sleep: Box::pin(tokio::time::sleep(Duration::MAX)),
                },
                state: Worker {
                    reuse: self.reuse,
                    at_once: self.at_once,
                },
            })
        }
    }

    /// When a worker's instance is dropped: idle for [`IDLE_INSTANCE`]
    /// (there is no request timeout, as without `wasmtime serve
    /// --wasm timeout`).
    struct Expiry {
        sleep: Pin<Box<tokio::time::Sleep>>,
    }

    impl WorkerExpiration for Expiry {
        fn poll(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            status: WorkerStatus,
            since: Instant,
        ) -> Poll<()> {
            if status != WorkerStatus::Idle {
                return Poll::Pending;
            }
            let deadline = tokio::time::Instant::from_std(since + IDLE_INSTANCE);
            if self.sleep.deadline() != deadline {
                self.sleep.as_mut().reset(deadline);
            }
            self.sleep.as_mut().poll(cx)
        }
    }

    /// How many requests one instance takes.
    struct Worker {
        reuse: usize,
        at_once: usize,
    }

    impl WorkerState for Worker {
        type StoreData = HttpState;
        type RequestData = ();

        fn should_accept_request(&self, at_once: usize, total: usize) -> ShouldAccept {
            if total >= self.reuse {
                ShouldAccept::Never
            } else if at_once >= self.at_once {
                ShouldAccept::No
            } else {
                ShouldAccept::Yes
            }
        }

        fn on_request_start(
            &self,
            _store: StoreContextMut<'_, HttpState>,
            _data: (),
            _group: TaskGroupId,
        ) -> Pin<Box<dyn Future<Output = ()> + Send + Sync + 'static>> {
            // No request timeout: a deadline that never comes.
            Box::pin(tokio::time::sleep(Duration::MAX))
        }

        fn drop(&self, store: Store<HttpState>, result: wasmtime::Result<()>) {
            if let Err(e) = result {
                eprintln!("serve-wasi-http: worker failed: {e:?}");
            }
            drop(store);
        }
    }

    pub(super) async fn serve(
        engine: Engine,
        pre: InstancePre<HttpState>,
        addr: SocketAddr,
    ) -> anyhow::Result<()> {
        let (pre, reuse, at_once) =
            match wasmtime_wasi_http::p3::bindings::ServicePre::new(pre.clone()) {
                Ok(p3) => (ProxyPre::P3(p3), P3_REUSE, P3_AT_ONCE),
                Err(_) => (
                    ProxyPre::P2(wasmtime_wasi_http::p2::bindings::ProxyPre::new(pre)?),
                    P2_REUSE,
                    1,
                ),
            };
        let socket = match addr {
            SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
            SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
        };
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        let listener = socket.listen(BACKLOG)?;
        println!("listening on {}", listener.local_addr()?);
        std::io::stdout().flush()?;
        let handler = ProxyHandler::new(Serving {
            engine,
            pre,
            reuse,
            at_once,
            instances: AtomicU64::new(0),
            requests: Semaphore::new(MAX_REQUESTS),
        });
        let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        loop {
            let permit = Arc::clone(&connections).acquire_owned().await?;
            let (stream, _) = listener.accept().await?;
            stream.set_nodelay(true)?;
            let handler = handler.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let handler = handler.clone();
                    async move { Ok::<_, Infallible>(answer(&handler, request).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .keep_alive(true)
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
                drop(permit);
            });
        }
    }

    async fn answer(
        handler: &ProxyHandler<Serving>,
        request: hyper::Request<hyper::body::Incoming>,
    ) -> hyper::Response<WasiBody> {
        let handled = async {
            let _permit = handler.state().requests.acquire().await?;
            let request = request.map(|body| body.map_err(Into::into).boxed_unsync());
            handler.handle((), request).await
        };
        match handled.await {
            Ok(response) => response,
            Err(e) => {
                eprintln!("serve-wasi-http: {e:?}");
                let body = Full::new(Bytes::from_static(b"500 Internal Server Error\n"))
                    .map_err(|never| match never {})
                    .boxed_unsync();
                let mut response = hyper::Response::new(body);
                *response.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
                response
            }
        }
    }
}

/// `moat-bench run-wasi-http [--cache-dir DIR] COMPONENT ARGS...`: what
/// `wasmtime run -S http COMPONENT ARGS...` does with a WASIp2 command:
/// wasmtime-wasi's p2 and wasmtime-wasi-http's p2 linked with their
/// default hooks (the default `send_request`: every outgoing request
/// connects anew), stdio inherited, `wasi:cli/run` called on a
/// multi-threaded tokio runtime. Exits with the guest's exit code.
pub fn run_http(args: &[String]) -> anyhow::Result<()> {
    let (config, rest) = config_with_cache(args)?;
    let Some((guest, guest_args)) = rest.split_first() else {
        anyhow::bail!("usage: run-wasi-http [--cache-dir DIR] COMPONENT ARGS...");
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_time()
        .enable_io()
        .build()?;
    let ran = runtime.block_on(async {
        let engine = Engine::new(&config)?;
        let component = Component::from_file(&engine, guest)?;
        let mut linker = Linker::<HttpState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
        let mut argv = vec![guest.to_owned()];
        argv.extend(guest_args.iter().cloned());
        let mut wasi = WasiCtxBuilder::new();
        wasi.inherit_stdio().args(&argv);
        let mut store = HttpState::store(&engine, wasi);
        let command = wasmtime_wasi::p2::bindings::Command::instantiate_async(
            &mut store, &component, &linker,
        )
        .await?;
        command.wasi_cli_run().call_run(&mut store).await
    });
    match ran {
        Ok(Ok(())) => Ok(()),
        Ok(Err(())) => std::process::exit(1),
        Err(e) => match e.downcast_ref::<wasmtime_wasi::I32Exit>() {
            Some(exit) => std::process::exit(exit.0),
            None => Err(e.into()),
        },
    }
}
