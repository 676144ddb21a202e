//! Every request in an instance no earlier request touched: a handler
//! plants a secret, and the next request, in the same pool slot, looks for
//! it and finds nothing. One handler of each kind people serve: Rust (it
//! scans all of its linear memory: statics, heap, shadow stack), Python
//! (componentize-py) and JavaScript (componentize-js), which look where
//! their language keeps state (globals, modules, closures, the heap).
//!
//! `--max-instances=1` gives the server one instance at a time, so both
//! requests take the same slot: wasmtime's pool hands a component the
//! slot it last used (its memory image already in place).
//!
//! Each is run three ways:
//!
//! - the same instance called twice, through wasmtime-wasi-http directly
//!   (what a host reusing instances does): the probe must find the secret,
//!   or it proves nothing (JavaScript: planted and probed in one request,
//!   as StarlingMonkey answers one request per instance);
//! - `moat serve`: plant, then probe: clean;
//! - `moat serve`, with the planting instance's memory pushed out to swap
//!   (`process_madvise(MADV_PAGEOUT)` on every private writable mapping of
//!   the server) while it still holds the secret: a page in swap is not
//!   resident, and a reset that looked only at resident pages would leave
//!   it for the next instance. Needs swap (`.ci/run` makes a swap file).

use std::path::Path;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::bindings::http::types::Scheme;
use wasmtime_wasi_http::{
    RequestOptions, WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView,
};

use super::*;

/// The handlers: name, path to the component, or `None` when the foreign
/// toolchains are missing outside CI.
fn handlers() -> Vec<(&'static str, String)> {
    let mut all = vec![("rust", guests::ISOLATION.to_owned())];
    if let Some(dir) = crate::foreign::built() {
        for (name, file) in [
            ("python", "py-isolation.wasm"),
            ("javascript", "js-isolation.wasm"),
        ] {
            all.push((name, dir.join(file).display().to_string()));
        }
    }
    all
}

/// A host that reuses one instance: the store of wasmtime-wasi-http's own
/// documentation.
struct Reuser {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    hooks: NoClient,
}

type IoFuture = Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>;

/// wasi:http's hooks with no client: the planting request this host sends
/// makes no outgoing request.
struct NoClient;

impl WasiHttpHooks for NoClient {
    fn send_request(
        &mut self,
        _request: hyper::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _done: IoFuture,
    ) -> Box<
        dyn Future<
                Output = Result<(hyper::Response<WasiBody>, IoFuture), wasmtime_wasi_http::Error>,
            > + Send,
    > {
        Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) })
    }
}

impl WasiView for Reuser {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for Reuser {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.hooks,
        }
    }
}

/// Each of `requests`, in order, to one instance of `component`: `GET
/// path`, or `POST path` with the body when it is not empty; the bodies of
/// the answers.
async fn same_instance(component: &Path, requests: &[(String, Vec<u8>)]) -> Vec<String> {
    let engine = Engine::default();
    let name = component.display().to_string();
    let component = Component::from_file(&engine, component).expect("the handler compiles");
    let mut linker = Linker::new(&engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).unwrap();
    let pre = ProxyPre::new(linker.instantiate_pre(&component).unwrap()).unwrap();
    let mut store = Store::new(
        &engine,
        Reuser {
            wasi: WasiCtx::builder().build(),
            http: WasiHttpCtx::new(),
            table: ResourceTable::new(),
            hooks: NoClient,
        },
    );
    let proxy = pre.instantiate_async(&mut store).await.unwrap();
    let mut bodies = Vec::new();
    for (path, body) in requests {
        let method = if body.is_empty() { "GET" } else { "POST" };
        let request = hyper::Request::builder()
            .method(method)
            .uri(format!("http://isolation{path}"))
            .body(Full::new(Bytes::from(body.clone())))
            .unwrap();
        let view = store.data_mut();
        let request = view
            .http()
            .new_incoming_request(Scheme::Http, request)
            .unwrap();
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let outparam = view.http().new_response_outparam(sender).unwrap();
        // The handler writes its body as the reader takes it: both at once.
        let call = proxy
            .wasi_http_incoming_handler()
            .call_handle(&mut store, request, outparam);
        let read = async {
            let response = receiver.await.unwrap().unwrap();
            response.into_body().collect().await.unwrap().to_bytes()
        };
        let (called, body) = within(&format!("{name} answering {path}"), async {
            tokio::join!(call, read)
        })
        .await;
        called.unwrap();
        bodies.push(String::from_utf8_lossy(&body).into_owned());
    }
    bodies
}

#[tokio::test]
async fn a_probe_finds_the_secret_an_instance_used_twice_still_holds() {
    for (kind, component) in handlers() {
        // StarlingMonkey answers one request per instance (a second call
        // never returns): its probe is shown to see a planting made in the
        // same request.
        let paths = match kind {
            "javascript" => vec![("/both/41".to_owned(), Vec::new())],
            _ => vec![
                ("/plant/41".to_owned(), Vec::new()),
                ("/probe/41".to_owned(), Vec::new()),
            ],
        };
        let answers = same_instance(Path::new(&component), &paths).await;
        let probed = answers.last().expect("an answer");
        assert!(probed.starts_with("found "), "{kind}: {probed}");
        if paths.len() == 2 {
            assert_eq!(answers[0], "planted\n", "{kind}");
        }
    }
}

/// `moat serve --max-instances=1` of `component`, with `flags`, sharing the
/// foreign tests' compile cache so that no test here compiles a 13-18 MB
/// component again.
async fn serve_one_at_a_time(component: &str, flags: &[&str]) -> Serve {
    let mut all = vec!["--max-instances=1"];
    all.extend_from_slice(flags);
    Serve::start_cached(component, &all, &crate::support::cache_flag()).await
}

#[tokio::test]
async fn the_next_request_finds_nothing_of_the_last_in_its_slot() {
    for (kind, component) in handlers() {
        let serve = serve_one_at_a_time(&component, &[]).await;
        let planted = get(serve.addr, "/plant/42").await;
        assert_eq!(
            (planted.status, planted.text()),
            (200, "planted\n".to_owned()),
            "{kind}"
        );
        let probed = get(serve.addr, "/probe/42").await;
        assert_eq!(
            (probed.status, probed.text()),
            (200, "clean\n".to_owned()),
            "{kind}: {}",
            serve.stderr()
        );
    }
}

/// Bytes of `pid` in swap (`VmSwap` of /proc/PID/status).
fn swapped(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmSwap:"))
        .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Whether this machine has swap to push pages to (`/proc/swaps` lists a
/// device or file).
fn have_swap() -> bool {
    std::fs::read_to_string("/proc/swaps").is_ok_and(|swaps| swaps.lines().count() > 1)
}

/// Asks the kernel to push every private writable mapping of `pid` out to
/// swap (`process_madvise(MADV_PAGEOUT)`).
fn page_out(pid: u32) {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("its maps");
    let ranges: Vec<libc::iovec> = maps
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let range = fields.next()?;
            let perms = fields.next()?;
            if perms != "rw-p" {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            Some(libc::iovec {
                iov_base: start as *mut libc::c_void,
                iov_len: end - start,
            })
        })
        .collect();
    let pid = rustix::process::Pid::from_raw(pid as i32).expect("a pid");
    let pidfd =
        rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).expect("pidfd_open");
    for chunk in ranges.chunks(512) {
        // SAFETY: the iovecs are read by the kernel only, as addresses in
        // the other process; `chunk` is a live slice of initialized iovecs
        // of the length given; the pidfd is open for the call's duration.
        // process_madvise reports ranges it could not act on (a mapping
        // gone since /proc was read) as an error, which is ignored: the
        // test checks VmSwap afterwards.
        unsafe {
            libc::syscall(
                libc::SYS_process_madvise,
                std::os::fd::AsRawFd::as_raw_fd(&pidfd),
                chunk.as_ptr(),
                chunk.len(),
                libc::MADV_PAGEOUT,
                0,
            );
        }
    }
}

/// A secret planted beside 32 MiB of memory grown and never touched. Three
/// plantings, so that the third reset is one between two protections: the
/// kernel's scan of unprotected entries then reports most of the memory
/// (ranges no page table covers), and the reset looks for the written
/// pages within what it reported rather than resetting all of it. The
/// probe after the third must find nothing, twice over.
#[tokio::test]
async fn a_secret_beside_memory_never_touched_is_reset() {
    let serve = serve_one_at_a_time(guests::ISOLATION, &[]).await;
    for round in 0..2u64 {
        let seeds = [300, 301, 302].map(|seed| seed + 10 * round);
        for seed in seeds {
            let planted = get(serve.addr, &format!("/plant-sparse/{seed}")).await;
            assert_eq!(
                planted.status,
                200,
                "{}\n{}",
                planted.text(),
                serve.stderr()
            );
        }
        let answer = get(serve.addr, &format!("/probe/{}", seeds[2])).await;
        assert_eq!(
            answer.text(),
            "clean\n",
            "round {round}: {}",
            serve.stderr()
        );
    }
}

#[tokio::test]
async fn a_slot_whose_pages_were_in_swap_is_reset_all_the_same() {
    if support::skip_unless(
        "isolation after a page-out",
        (!have_swap()).then(|| "this machine has no swap".to_owned()),
    ) {
        return;
    }
    for (kind, component) in handlers() {
        // The upstream the planting handler waits on: the test pages the
        // server out while the handler holds its secret, then answers.
        let upstream = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = upstream.local_addr().unwrap().port();
        let grant = format!("--allow-net=127.0.0.1:{port}");
        let serve = serve_one_at_a_time(&component, &[&grant]).await;
        let pid = serve.child.id().expect("moat serve runs");
        let addr = serve.addr;
        // Two plantings of another secret first, so that the slot's pages
        // are write-protected and have a reference as large as a planting:
        // the reset after the planting below is then one between
        // protections, by the scan of unprotected entries, where the kernel
        // reads each entry's protection bit, a swapped-out page's too.
        for _ in 0..2 {
            let planted = get(addr, "/plant/44").await;
            assert_eq!(planted.status, 200, "{kind}: {}", serve.stderr());
        }
        let planting = tokio::spawn(async move { get(addr, &format!("/plant/43/{port}")).await });

        let (stream, _) = within("the handler calling the upstream", upstream.accept())
            .await
            .unwrap();
        let mut stream = BufReader::new(stream);
        read_head(&mut stream).await.expect("the handler's request");
        let before = swapped(pid);
        page_out(pid);
        let after = swapped(pid);
        assert!(
            after >= before + (1 << 20),
            "{kind}: paging out moat serve moved {} bytes to swap",
            after.saturating_sub(before)
        );
        stream
            .get_mut()
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
            .await
            .unwrap();

        let planted = within("the planting request", planting).await.unwrap();
        assert_eq!(
            (planted.status, planted.text()),
            (200, "planted\n".to_owned()),
            "{kind}: {}",
            serve.stderr()
        );
        let probed = get(serve.addr, "/probe/43").await;
        assert_eq!(
            (probed.status, probed.text()),
            (200, "clean\n".to_owned()),
            "{kind}: {}",
            serve.stderr()
        );
    }
}

/// Word `i` of the secret of `seed`, as the isolation guest derives it
/// (splitmix64).
fn secret_word(seed: u64, i: usize) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i as u64 + 1));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The secret of `seed` repeated over `len` bytes, as the bytes of the
/// guest's words (wasm is little-endian).
fn secret_bytes(seed: u64, len: usize) -> Vec<u8> {
    (0..8)
        .flat_map(|i| secret_word(seed, i).to_le_bytes())
        .cycle()
        .take(len)
        .collect()
}

/// An upstream on 127.0.0.1 that answers `GET /SEED` with the secret of
/// SEED (64 KiB of it): what the guest's `/fetch` reads into memory.
async fn secret_upstream() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut stream = BufReader::new(stream);
                let Ok(head) = read_head(&mut stream).await else {
                    return;
                };
                let seed = head
                    .split_whitespace()
                    .nth(1)
                    .and_then(|path| path.trim_start_matches('/').parse().ok())
                    .unwrap_or(0);
                let body = secret_bytes(seed, 64 << 10);
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let stream = stream.get_mut();
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(&body).await;
            });
        }
    });
    port
}

/// Each way the Rust guest can put a secret in a page: its name, and the
/// planting's request (the seed filled in).
const WAYS: [(&str, &str); 6] = [
    ("a static, the heap and the stack", "GET /plant/{seed}"),
    ("a request body the host wrote", "POST /plant-body/{seed}"),
    ("a response body the host wrote", "GET /fetch/{seed}/{port}"),
    (
        "memory grown past its initial size",
        "GET /plant-grow/{seed}",
    ),
    ("memory.copy and memory.fill", "GET /plant-bulk/{seed}"),
    ("a request that trapped", "GET /plant-trap/{seed}"),
];

/// Plants a secret each way, a seed of its own for each (`first`,
/// `first + 1`, ...), and probes for that seed after each: the probes'
/// answers, by way. `serve` gives one instance at a time; `port` is
/// [`secret_upstream`]'s.
async fn probe_after_each_way(serve: &Serve, first: u64, port: u16) -> Vec<(&'static str, String)> {
    let mut probed = Vec::new();
    for ((way, request), seed) in WAYS.into_iter().zip(first..) {
        let (method, path) = request.split_once(' ').expect("METHOD PATH");
        let path = path
            .replace("{seed}", &seed.to_string())
            .replace("{port}", &port.to_string());
        let planted = match method {
            "POST" => post(serve.addr, &path, secret_bytes(seed, 64 << 10)).await,
            _ => get(serve.addr, &path).await,
        };
        let trapped = way == "a request that trapped";
        assert_eq!(
            planted.status,
            if trapped { 500 } else { 200 },
            "{way}: {}\n{}",
            planted.text(),
            serve.stderr()
        );
        let answer = get(serve.addr, &format!("/probe/{seed}")).await;
        assert_eq!(answer.status, 200, "{way}: {}", serve.stderr());
        probed.push((way, answer.text()));
    }
    probed
}

/// Probes every way twice over in one server: the first time a slot is
/// reset, every page its instance wrote is restored (nothing is known yet
/// of which pages it wrote); from then on, with write tracking, only the
/// pages found written since are, so a page the tracking missed would show
/// in the second round.
#[tokio::test]
async fn no_way_of_writing_a_page_leaves_it_for_the_next_request() {
    let port = secret_upstream().await;
    let grant = format!("--allow-net=127.0.0.1:{port}");
    let serve = serve_one_at_a_time(guests::ISOLATION, &[&grant]).await;
    let fresh = get(serve.addr, "/stack").await.text();
    for round in 0..2 {
        for (way, probed) in probe_after_each_way(&serve, 100, port).await {
            assert_eq!(
                probed,
                "clean\n",
                "round {round}, {way}: {}",
                serve.stderr()
            );
        }
        // The trap left the stack pointer (a wasm global) moved down into
        // its frame; a fresh instance has it where it always starts.
        assert_eq!(
            get(serve.addr, "/stack").await.text(),
            fresh,
            "round {round}"
        );
    }
}

/// Each planting of the Rust guest that a reused instance can be given
/// (no outgoing request: the reusing host has no client; no trap: a
/// trapped instance cannot be entered again), then its probe, to one
/// instance: each probe finds its secret, so each can fail. Those two are
/// shown by their own requests: `/fetch` answers `fetched` only after
/// reading the upstream's whole body, and a trap is a 500.
#[tokio::test]
async fn each_probe_finds_its_secret_in_an_instance_used_again() {
    let reusable: Vec<(&str, &str)> = WAYS
        .into_iter()
        .filter(|(_, request)| !request.contains("/fetch/") && !request.contains("/plant-trap/"))
        .collect();
    let mut requests = Vec::new();
    for ((_, request), seed) in reusable.iter().zip(300..) {
        let (method, path) = request.split_once(' ').expect("METHOD PATH");
        let body = match method {
            "POST" => secret_bytes(seed, 64 << 10),
            _ => Vec::new(),
        };
        requests.push((path.replace("{seed}", &seed.to_string()), body));
        requests.push((format!("/probe/{seed}"), Vec::new()));
    }
    let answers = same_instance(Path::new(guests::ISOLATION), &requests).await;
    for ((way, _), answer) in reusable.iter().zip(answers.chunks(2)) {
        assert!(
            answer[1].starts_with("found "),
            "{way}: planted {:?}, probed {:?}",
            answer[0],
            answer[1]
        );
    }
}
