//! wasi:http: http_serve, a wasi:http proxy component answering keep-alive
//! `GET /` (`moat serve` beside wasmtime-wasi-http's own `ProxyHandler` and
//! native hyper), and http_fetch, a guest's sequential keep-alive GETs
//! (moat's client beside wasmtime-wasi-http's default `send_request` and a
//! native hyper client).

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::measure;
use crate::report::{Better, MetricBuilder, Workload};
use crate::servers::{Guest, Kind, Mode, Server};

use super::{Run, add_percentiles, client, median, start_all};

/// What wstd-serve (and native hyper, in `Mode::WasiHttp`) answer to `GET /`.
pub(crate) const GREETING: &[u8] = b"hello from a wasi:http handler\n";

/// What the native hyper server of http_fetch (`Mode::Http`) answers.
const FETCHED: &[u8] = b"hello from a moat guest, on hyper\n";

const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n";

/// Client connections of http_serve's second half.
const CONNECTIONS: usize = 64;

/// One keep-alive client connection: the stream and what was read past the
/// last response.
pub(crate) struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

impl Conn {
    pub(crate) async fn open(addr: SocketAddr) -> anyhow::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            buf: Vec::with_capacity(4096),
        })
    }

    async fn fill(&mut self) -> anyhow::Result<()> {
        if self.stream.read_buf(&mut self.buf).await? == 0 {
            bail!("the server closed the connection mid-response");
        }
        Ok(())
    }

    /// Where the line starting at `from` ends (its `\r\n`).
    async fn line_end(&mut self, from: usize) -> anyhow::Result<usize> {
        loop {
            if let Some(i) = find(&self.buf[from..], b"\r\n") {
                return Ok(from + i);
            }
            self.fill().await?;
        }
    }

    /// Sends `GET /` and reads the response, a 200 framed by
    /// Content-Length or chunked; its body.
    pub(crate) async fn get(&mut self) -> anyhow::Result<Vec<u8>> {
        self.stream.write_all(REQUEST).await?;
        let head_end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i;
            }
            self.fill().await?;
        };
        let (length, chunked) = {
            let head = std::str::from_utf8(&self.buf[..head_end])?;
            if !head.starts_with("HTTP/1.1 200") {
                bail!("not a 200: {head}");
            }
            let mut length = None;
            let mut chunked = false;
            for (name, value) in head.split("\r\n").skip(1).filter_map(|l| l.split_once(':')) {
                if name.eq_ignore_ascii_case("content-length") {
                    length = Some(value.trim().parse::<usize>()?);
                } else if name.eq_ignore_ascii_case("transfer-encoding") {
                    chunked = value.to_ascii_lowercase().contains("chunked");
                }
            }
            (length, chunked)
        };
        let mut at = head_end + 4;
        let body = match (length, chunked) {
            (Some(n), false) => {
                while self.buf.len() < at + n {
                    self.fill().await?;
                }
                at += n;
                self.buf[at - n..at].to_vec()
            }
            (_, true) => {
                let mut body = Vec::new();
                loop {
                    let end = self.line_end(at).await?;
                    let size = std::str::from_utf8(&self.buf[at..end])?;
                    let size = size.split(';').next().unwrap_or_default().trim();
                    let size = usize::from_str_radix(size, 16)
                        .with_context(|| format!("chunk size {size:?}"))?;
                    at = end + 2;
                    if size == 0 {
                        // Trailers, up to an empty line.
                        loop {
                            let end = self.line_end(at).await?;
                            let empty = end == at;
                            at = end + 2;
                            if empty {
                                break;
                            }
                        }
                        break body;
                    }
                    while self.buf.len() < at + size + 2 {
                        self.fill().await?;
                    }
                    body.extend_from_slice(&self.buf[at..at + size]);
                    at += size + 2;
                }
            }
            (None, false) => bail!("a response with neither Content-Length nor chunked"),
        };
        self.buf.drain(..at);
        Ok(body)
    }
}

/// `requests` timed `GET /` on one connection after `warm_up` untimed
/// ones, client pinned to CPU 0 beside the server: each request's time
/// (µs) and requests/s over the timed run.
fn one_connection(
    server: &Server,
    requests: usize,
    warm_up: usize,
) -> anyhow::Result<(Vec<f64>, f64)> {
    client(true, async {
        let mut conn = Conn::open(server.addr).await?;
        for _ in 0..warm_up {
            conn.get().await?;
        }
        let mut times = Vec::with_capacity(requests);
        let start = Instant::now();
        for _ in 0..requests {
            let t = Instant::now();
            conn.get().await?;
            times.push(t.elapsed().as_secs_f64() * 1e6);
        }
        let elapsed = start.elapsed().as_secs_f64();
        Ok((times, requests as f64 / elapsed))
    })
}

/// `each` requests on every connection of `conns`, all at once on this
/// thread's runtime; the connections back, with every request's time (µs).
async fn on_all(conns: Vec<Conn>, each: usize) -> anyhow::Result<(Vec<Conn>, Vec<f64>)> {
    let mut tasks = tokio::task::JoinSet::new();
    for mut conn in conns {
        tasks.spawn(async move {
            let mut times = Vec::with_capacity(each);
            for _ in 0..each {
                let t = Instant::now();
                conn.get().await?;
                times.push(t.elapsed().as_secs_f64() * 1e6);
            }
            anyhow::Ok((conn, times))
        });
    }
    let mut conns = Vec::new();
    let mut times = Vec::new();
    while let Some(done) = tasks.join_next().await {
        let (conn, t) = done??;
        conns.push(conn);
        times.extend(t);
    }
    Ok((conns, times))
}

/// [`CONNECTIONS`] keep-alive connections making `each` timed requests
/// apiece, all at once, after `warm_up` untimed ones apiece; the client
/// on CPU 1 (the server has CPU 0 to itself). Every request's time (µs),
/// requests/s over the timed run, and the server's CPU per request (µs).
fn many_connections(
    server: &Server,
    each: usize,
    warm_up: usize,
) -> anyhow::Result<(Vec<f64>, f64, f64)> {
    let cpu = (measure::num_cpus() > 1).then_some(1);
    measure::pin_current_thread(cpu)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        let mut conns = Vec::with_capacity(CONNECTIONS);
        for _ in 0..CONNECTIONS {
            conns.push(Conn::open(server.addr).await?);
        }
        let (conns, _) = on_all(conns, warm_up).await?;
        let cpu0 = server.cpu_ns();
        let start = Instant::now();
        let (conns, times) = on_all(conns, each).await?;
        let elapsed = start.elapsed().as_secs_f64();
        let cpu = server.cpu_ns() - cpu0;
        drop(conns);
        let requests = (CONNECTIONS * each) as f64;
        Ok((times, requests / elapsed, cpu as f64 / requests / 1e3))
    });
    drop(runtime);
    measure::pin_current_thread(None)?;
    result
}

/// Keep-alive `GET /` against the same wasi:http component under `moat
/// serve` and under wasmtime-wasi-http's `ProxyHandler`, and native hyper
/// answering the same body: one connection, then 64 at once.
pub fn http_serve(run: &Run) -> anyhow::Result<Workload> {
    let requests = run.scale(10_000, 2_000);
    let each = run.scale(300, 60);
    // With --baseline, the baseline build's moat serve and wasmtime serve
    // too, in the same rounds.
    let servers = start_all(run, run.setup.kinds(), Mode::WasiHttp, true)?;
    // The same bytes from all three, before anything is timed.
    for (kind, server) in &servers {
        let body = client(true, async {
            let mut conn = Conn::open(server.addr).await?;
            conn.get().await
        })?;
        if body != GREETING {
            bail!(
                "the {} server answered {:?}",
                kind.label(),
                String::from_utf8_lossy(&body)
            );
        }
    }
    let mut rps1 = MetricBuilder::new("requests/s, 1 connection", "req/s", Better::Higher);
    let mut p50_1 = MetricBuilder::new("request p50, 1 connection", "µs", Better::Lower);
    let mut p99_1 = MetricBuilder::new("request p99, 1 connection", "µs", Better::Lower);
    let mut rps64 = MetricBuilder::new("requests/s, 64 connections", "req/s", Better::Higher);
    let mut p50_64 = MetricBuilder::new("request p50, 64 connections", "µs", Better::Lower);
    let mut p99_64 = MetricBuilder::new("request p99, 64 connections", "µs", Better::Lower);
    let mut cpu64 = MetricBuilder::new(
        "server CPU per request, 64 connections",
        "µs",
        Better::Lower,
    );
    for _ in 0..run.rounds {
        for (kind, server) in &servers {
            let (mut times, rps) = one_connection(server, requests, requests / 10)?;
            rps1.add(*kind, rps);
            add_percentiles(&mut p50_1, &mut p99_1, *kind, &mut times);
        }
        for (kind, server) in &servers {
            let (mut times, rps, cpu) = many_connections(server, each, each / 10)?;
            rps64.add(*kind, rps);
            cpu64.add(*kind, cpu);
            add_percentiles(&mut p50_64, &mut p99_64, *kind, &mut times);
        }
    }
    let metrics = vec![
        rps1.build(),
        p50_1.build(),
        p99_1.build(),
        rps64.build(),
        p50_64.build(),
        p99_64.build(),
        cpu64.build(),
    ];
    let over_wasmtime =
        |i: usize| median(&metrics[i], Kind::Moat) / median(&metrics[i], Kind::WasmtimeWasi);
    let (rps_1, p99_1, rps_64, p99_64) = (
        over_wasmtime(0),
        over_wasmtime(2),
        over_wasmtime(3),
        over_wasmtime(5),
    );
    let met = rps_1 >= 1.2 && rps_64 >= 1.2 && p99_1 <= 1.0 && p99_64 <= 1.0;
    Ok(Workload {
        name: "http_serve".into(),
        what: format!(
            "keep-alive GET / answered by the wstd-serve component under `moat serve` (moat column: a fresh instance per request) and under wasmtime-wasi-http 50's ProxyHandler set up as `wasmtime serve` sets it up (wasmtime-wasi column: pooling allocator, a WASIp2 instance used for one request), and by native hyper with the same body and content type; {requests} requests on 1 connection (client and server pinned to CPU 0), then {CONNECTIONS} connections × {each} requests at once (server on CPU 0, client on CPU 1); requests/s over the timed requests, after a tenth as many untimed"
        ),
        goal: "moat serve at least 1.2x wasmtime serve's requests/s with p99 no worse".into(),
        met: Some(met),
        verdict: format!(
            "moat / wasmtime serve: requests/s {rps_1:.2}× (1 connection), {rps_64:.2}× ({CONNECTIONS}); p99 {p99_1:.2}×, {p99_64:.2}×"
        ),
        metrics,
    })
}

/// One fetch run's command: `repeat` GETs of `url` by `kind`'s client,
/// pinned to CPU 0 (beside the server); POSTs of its stdin instead when
/// `stdin` is given (moat's clients only).
fn fetch_command(run: &Run, kind: Kind, url: &str, port: u16, repeat: usize) -> Command {
    fetch_command_of(run, kind, url, port, repeat, None)
}

/// [`fetch_command`], with stdin POSTed when it is given.
fn fetch_command_of(
    run: &Run,
    kind: Kind,
    url: &str,
    port: u16,
    repeat: usize,
    stdin: Option<std::fs::File>,
) -> Command {
    let setup = &run.setup;
    let mut command = Command::new("taskset");
    command.args(["-c", "0"]);
    crate::measure::without_backtraces(&mut command);
    match kind {
        Kind::Native => {
            command.arg(&setup.exe).arg("fetch-native");
        }
        Kind::WasmtimeWasi => {
            command
                .arg(&setup.exe)
                .arg("run-wasi-http")
                .arg("--cache-dir")
                .arg(setup.wasmtime_cache())
                .arg(setup.guest(kind, Guest::WstdFetch));
        }
        _ => {
            command
                .arg(setup.moat_binary(kind))
                .arg("run")
                .arg(format!("--cache-dir={}", setup.cache_for(kind).display()))
                .arg(format!("--allow-net=127.0.0.1:{port}"))
                .args(setup.audit_flag(kind))
                .args(setup.secret_flag(kind))
                .env(crate::servers::SECRET_VAR, crate::servers::SECRET_VALUE)
                .arg(setup.guest(kind, Guest::WstdFetch));
        }
    }
    command.args(["--repeat", &repeat.to_string()]);
    if let Some(stdin) = stdin {
        command
            .args(["--method", "POST", "--data-stdin"])
            .stdin(stdin);
    }
    command.arg(url);
    command
}

/// Runs `command` to its end; its wall time from spawn to exit, checked:
/// it succeeded, wrote the body, and (when it made more than one request)
/// said `fetched N`.
fn time_fetch(mut command: Command, repeat: usize) -> anyhow::Result<Duration> {
    command.stdin(Stdio::null());
    time_fetch_from(command, repeat, FETCHED)
}

/// [`time_fetch`] with the stdin `command` was given, checking that it
/// wrote `expected`.
fn time_fetch_from(
    mut command: Command,
    repeat: usize,
    expected: &[u8],
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let out = command.output().context("cannot run the fetch")?;
    let wall = start.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("{command:?} failed ({}): {stderr}", out.status);
    }
    if out.stdout != expected {
        bail!(
            "{command:?} wrote {} bytes, not the {} expected: {:?}",
            out.stdout.len(),
            expected.len(),
            String::from_utf8_lossy(&out.stdout[..out.stdout.len().min(200)])
        );
    }
    if repeat > 1 && !stderr.contains(&format!("fetched {repeat}")) {
        bail!("{command:?} did not say `fetched {repeat}`: {stderr}");
    }
    Ok(wall)
}

/// Sequential keep-alive GETs to a local native hyper server from the
/// wstd-fetch guest (on moat's client, and on wasmtime-wasi-http's default
/// `send_request`) and from a native hyper client: requests/s, with process
/// start, compiled-code load and the first request taken out.
pub fn http_fetch(run: &Run) -> anyhow::Result<Workload> {
    let repeat = run.scale(5_000, 500);
    // The startup runs per round; their median is subtracted.
    const STARTS: usize = 3;
    let server = Server::start(&run.setup, Kind::Native, Mode::Http, true)?;
    let port = server.addr.port();
    let url = format!("http://{}/", server.addr);
    let mut kinds = vec![
        Kind::Native,
        Kind::Moat,
        Kind::MoatAudited,
        Kind::MoatSecret,
    ];
    if run.setup.baseline.is_some() {
        kinds.push(Kind::MoatBaseline);
    }
    kinds.push(Kind::WasmtimeWasi);
    // Each client once, untimed: it works, and its compiled code is cached.
    for &kind in &kinds {
        time_fetch(fetch_command(run, kind, &url, port, 2), 2)
            .with_context(|| format!("the {} client", kind.label()))?;
    }
    let mut rps = MetricBuilder::new(
        &format!("sequential keep-alive GETs, {repeat} in one run"),
        "req/s",
        Better::Higher,
    );
    let mut start_ms = MetricBuilder::new("a run with one GET (subtracted)", "ms", Better::Lower);
    for _ in 0..run.rounds {
        for &kind in &kinds {
            let mut starts = (0..STARTS)
                .map(|_| time_fetch(fetch_command(run, kind, &url, port, 1), 1))
                .collect::<anyhow::Result<Vec<_>>>()?;
            starts.sort();
            let one = starts[STARTS / 2];
            let all = time_fetch(fetch_command(run, kind, &url, port, repeat), repeat)?;
            let Some(rest) = all.checked_sub(one).filter(|d| !d.is_zero()) else {
                bail!(
                    "the {} client took {all:?} for {repeat} GETs and {one:?} for one",
                    kind.label()
                );
            };
            rps.add(kind, (repeat - 1) as f64 / rest.as_secs_f64());
            start_ms.add(kind, one.as_secs_f64() * 1e3);
        }
    }
    let [posted, got] = bodies(run, &url, port)?;
    drop(server);
    let metrics = vec![rps.build(), start_ms.build(), posted, got];
    let over_wasmtime = median(&metrics[0], Kind::Moat) / median(&metrics[0], Kind::WasmtimeWasi);
    Ok(Workload {
        name: "http_fetch".into(),
        what: format!(
            "wstd-fetch --repeat {repeat} (sequential GETs on one wstd Client) to a native hyper server: under `moat run` (moat's client: kept-alive pool) and under wasmtime-wasi p2 + wasmtime-wasi-http p2 with the default send_request (wasmtime-wasi column: a new connection per request); native is a hyper client on one kept-alive connection, printing the same lines; every process pinned to CPU 0; requests/s = ({repeat} - 1) / (wall time of the run of {repeat} - median wall time of {STARTS} runs of 1)"
        ),
        goal: "outgoing requests with keep-alive at least 2x wasmtime's default client".into(),
        met: Some(over_wasmtime >= 2.0),
        verdict: format!("moat / wasmtime's default client: {over_wasmtime:.2}× requests/s"),
        metrics,
    })
}

/// What a secret in the run costs a body's bytes: under `moat run` with
/// and without `--secret` (bound to another host, so no request carries
/// it), wstd-fetch POSTs a 1 MiB body `repeat` times on one kept-alive
/// connection, then GETs a 1 MiB response `repeat` times; every byte of
/// each is searched as it streams (for the placeholder going out, for the
/// value coming back). MB/s of body, with a run of one subtracted as in
/// http_fetch.
fn bodies(run: &Run, url: &str, port: u16) -> anyhow::Result<[crate::report::Metric; 2]> {
    const BYTES: usize = crate::native::BIG_BODY;
    let repeat = run.scale(200, 20);
    const STARTS: usize = 3;
    let pattern = crate::pattern::pattern(BYTES);
    let body = std::env::temp_dir().join(format!("moat-bench-post-{}", std::process::id()));
    std::fs::write(&body, &pattern)?;
    let big = format!("{}big", url);
    let post = |kind: Kind, n: usize| -> anyhow::Result<Duration> {
        let stdin = std::fs::File::open(&body)?;
        time_fetch_from(
            fetch_command_of(run, kind, url, port, n, Some(stdin)),
            n,
            FETCHED,
        )
    };
    let get = |kind: Kind, n: usize| -> anyhow::Result<Duration> {
        let mut command = fetch_command_of(run, kind, &big, port, n, None);
        command.stdin(Stdio::null());
        time_fetch_from(command, n, &pattern)
    };
    let kinds = [Kind::Moat, Kind::MoatSecret];
    let mut metrics = Vec::new();
    for (what, fetch) in [
        (
            "sequential keep-alive POSTs of 1 MiB",
            &post as &dyn Fn(Kind, usize) -> anyhow::Result<Duration>,
        ),
        ("sequential keep-alive GETs of a 1 MiB response", &get),
    ] {
        let mut mbps = MetricBuilder::new(
            &format!("{what}, {repeat} in one run"),
            "MB/s",
            Better::Higher,
        );
        for &kind in &kinds {
            fetch(kind, 2).with_context(|| format!("the {} client: {what}", kind.label()))?;
        }
        for _ in 0..run.rounds {
            for &kind in &kinds {
                let mut starts = (0..STARTS)
                    .map(|_| fetch(kind, 1))
                    .collect::<anyhow::Result<Vec<_>>>()?;
                starts.sort();
                let rest = fetch(kind, repeat)?.saturating_sub(starts[STARTS / 2]);
                if rest.is_zero() {
                    bail!(
                        "the {} client's {repeat} runs took no time: {what}",
                        kind.label()
                    );
                }
                mbps.add(
                    kind,
                    ((repeat - 1) * BYTES) as f64 / rest.as_secs_f64() / 1e6,
                );
            }
        }
        metrics.push(mbps.build());
    }
    let _ = std::fs::remove_file(&body);
    let [posted, got]: [crate::report::Metric; 2] = metrics
        .try_into()
        .map_err(|_| anyhow::anyhow!("two metrics"))?;
    Ok([posted, got])
}

/// `moat-bench fetch-native [--repeat N] URL`: wstd-fetch's `--repeat` as a
/// native program, for http_fetch: N sequential GETs of an `http://` URL
/// on one kept-alive hyper connection, `status: CODE` on stderr for each,
/// the last body on stdout, `fetched N` on stderr at the end when N > 1.
pub fn fetch_native(args: &[String]) -> anyhow::Result<()> {
    use http_body_util::{BodyExt, Empty};
    use hyper::body::Bytes;
    use std::io::Write;

    let (repeat, url) = match args {
        [flag, n, url] if flag == "--repeat" => (n.parse::<usize>()?, url),
        [url] => (1, url),
        _ => bail!("usage: fetch-native [--repeat N] URL"),
    };
    let uri: hyper::Uri = url.parse().with_context(|| format!("{url}: not a URL"))?;
    if uri.scheme_str() != Some("http") {
        bail!("{url}: fetch-native sends http only");
    }
    let authority = uri.authority().context("a URL without a host")?.clone();
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let last = runtime.block_on(async {
        let host = authority.host();
        let port = authority.port_u16().unwrap_or(80);
        let stream = TcpStream::connect((host, port)).await?;
        stream.set_nodelay(true)?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let mut last = Bytes::new();
        for _ in 0..repeat {
            sender.ready().await?;
            let request = hyper::Request::get(path.as_str())
                .header(hyper::header::HOST, authority.as_str())
                .body(Empty::<Bytes>::new())?;
            let response = sender.send_request(request).await?;
            eprintln!("status: {}", response.status().as_u16());
            last = response.into_body().collect().await?.to_bytes();
        }
        anyhow::Ok(last)
    })?;
    let mut stdout = std::io::stdout();
    stdout.write_all(&last)?;
    stdout.flush()?;
    if repeat > 1 {
        eprintln!("fetched {repeat}");
    }
    Ok(())
}
