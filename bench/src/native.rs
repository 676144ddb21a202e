//! The native baseline: the benchmark servers written with tokio on a
//! current-thread runtime (moat's own shape, minus wasm).

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::pattern::pattern;

/// `moat-bench serve-native MODE ADDR [ARGS]`.
pub fn serve(args: &[String]) -> anyhow::Result<()> {
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    let num = |i: usize| arg(i).parse::<u64>().unwrap_or(0);
    let mode = arg(0).to_owned();
    let (bytes, ms, sndbuf) = (num(2) as usize, num(3), num(4) as u32);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match mode.as_str() {
        "udp-echo" => return runtime.block_on(udp_echo(arg(1))),
        "udp-send" => {
            let to_name = (!arg(4).is_empty()).then(|| arg(4));
            return runtime.block_on(udp_send(arg(1), num(2), num(3) as usize, to_name));
        }
        "tls-echo" => return runtime.block_on(tls_echo(arg(1), arg(2), arg(3))),
        "http" => return runtime.block_on(http(arg(1), arg(2) == "wasi-http")),
        _ => {}
    }
    runtime.block_on(async move {
        let listener = TcpListener::bind(arg(1)).await.context("bind")?;
        println!("listening on {}", listener.local_addr()?);
        std::io::stdout().flush()?;
        let mut held = Vec::new();
        loop {
            let (conn, _) = listener.accept().await?;
            match mode.as_str() {
                "echo" => {
                    tokio::spawn(echo(conn));
                }
                "hold" => held.push(conn),
                "write-once" => {
                    tokio::spawn(write_once(conn, bytes));
                }
                "stream" => {
                    tokio::spawn(stream(conn, bytes));
                }
                "busy" => busy(conn, bytes, ms, sndbuf).await,
                other => anyhow::bail!("unknown mode {other}"),
            }
        }
    })
}

async fn echo(mut conn: TcpStream) {
    // Reserved, not filled: as echo-server does, so an idle connection's
    // buffer costs address space, not resident memory (c10k compares RSS).
    let mut buf = Vec::with_capacity(64 * 1024);
    loop {
        buf.clear();
        match conn.read_buf(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if conn.write_all(&buf).await.is_err() {
                    return;
                }
            }
        }
    }
    let _ = conn.shutdown().await;
}

async fn write_once(mut conn: TcpStream, bytes: usize) {
    let _ = conn.write_all(&pattern(bytes)).await;
    let _ = conn.shutdown().await;
}

async fn stream(mut conn: TcpStream, bytes: usize) {
    const CHUNK: usize = 64 * 1024;
    let chunk = pattern(CHUNK);
    let mut sent = 0;
    while sent < bytes {
        let n = CHUNK.min(bytes - sent);
        if conn.write_all(&chunk[..n]).await.is_err() {
            return;
        }
        sent += n;
    }
    let _ = conn.shutdown().await;
}

async fn busy(mut conn: TcpStream, bytes: usize, ms: u64, sndbuf: u32) {
    if sndbuf > 0 {
        let _ = socket2::SockRef::from(&conn).set_send_buffer_size(sndbuf as usize);
    }
    let _ = conn.write_all(&pattern(bytes)).await;
    // Compute on the runtime's thread, as the guest does on its store's.
    let start = Instant::now();
    let mut spins = 0u64;
    while start.elapsed() < Duration::from_millis(ms) {
        spins = std::hint::black_box(spins.wrapping_add(1));
    }
    let _ = conn.shutdown().await;
}

async fn udp_echo(addr: &str) -> anyhow::Result<()> {
    let socket = tokio::net::UdpSocket::bind(addr).await?;
    println!("listening on {}", socket.local_addr()?);
    std::io::stdout().flush()?;
    let mut buf = vec![0u8; 65_536];
    loop {
        let (n, from) = socket.recv_from(&mut buf).await?;
        socket.send_to(&buf[..n], from).await?;
    }
}

/// On a "go" datagram, sends `count` datagrams of `size` bytes and a
/// "done" to its sender, or with `to_name` (`HOST:PORT`, a name), to that
/// name: resolved once per "go", then sent to its first IPv4 address, as a
/// native program resolves a name before it sends.
async fn udp_send(
    addr: &str,
    count: u64,
    size: usize,
    to_name: Option<&str>,
) -> anyhow::Result<()> {
    let socket = tokio::net::UdpSocket::bind(addr).await?;
    println!("listening on {}", socket.local_addr()?);
    std::io::stdout().flush()?;
    let payload = pattern(size);
    let mut buf = [0u8; 64];
    loop {
        let (_, from) = socket.recv_from(&mut buf).await?;
        let to = match to_name {
            Some(name) => tokio::net::lookup_host(name)
                .await?
                .find(std::net::SocketAddr::is_ipv4)
                .with_context(|| format!("{name} has no IPv4 address"))?,
            None => from,
        };
        for _ in 0..count {
            socket.send_to(&payload, to).await?;
        }
        socket.send_to(b"done", to).await?;
    }
}

async fn tls_echo(addr: &str, cert: &str, key: &str) -> anyhow::Result<()> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_file_iter(cert)?.collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(key)?;
    let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(chain, key)?;
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = TcpListener::bind(addr).await?;
    println!("listening on {}", listener.local_addr()?);
    std::io::stdout().flush()?;
    loop {
        let (conn, _) = listener.accept().await?;
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let Ok(mut tls) = acceptor.accept(conn).await else {
                return;
            };
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match tls.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if tls.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                }
            }
            let _ = tls.shutdown().await;
        });
    }
}

/// hyper 1 on tokio, the way a native Rust HTTP/1.1 server is written:
/// `GET /` answers the greeting hyper-serve answers, or with `wasi_http`,
/// the greeting and content type of wstd-serve (http_serve's component);
/// `GET /big` answers [`BIG_BODY`] bytes of the bench's pattern.
async fn http(addr: &str, wasi_http: bool) -> anyhow::Result<()> {
    use http_body_util::Full;
    use hyper::body::Bytes;

    let listener = TcpListener::bind(addr).await.context("bind")?;
    println!("listening on {}", listener.local_addr()?);
    std::io::stdout().flush()?;
    loop {
        let (conn, _) = listener.accept().await?;
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| async move {
                let big = request.uri().path() == "/big";
                // Read to its end, so that the connection stays kept alive
                // after a request with a body (http_fetch's POSTs).
                let _ = http_body_util::BodyExt::collect(request.into_body()).await;
                let response = if wasi_http {
                    // Chunked, as `moat serve` and wasmtime-wasi-http send
                    // wstd-serve's body: the same bytes on the wire.
                    let body = Unsized(Full::new(Bytes::from_static(
                        b"hello from a wasi:http handler\n",
                    )));
                    let mut response = hyper::Response::new(http_body_util::Either::Left(body));
                    response.headers_mut().insert(
                        hyper::header::CONTENT_TYPE,
                        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
                    );
                    response
                } else if big {
                    hyper::Response::new(http_body_util::Either::Right(Full::new(BIG.clone())))
                } else {
                    hyper::Response::new(http_body_util::Either::Right(Full::new(
                        Bytes::from_static(b"hello from a moat guest, on hyper\n"),
                    )))
                };
                Ok::<_, std::convert::Infallible>(response)
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(conn), service)
                .await;
        });
    }
}

/// Bytes of `GET /big`'s body: 1 MiB, as http_fetch's POSTs.
pub const BIG_BODY: usize = 1 << 20;

/// `GET /big`'s body, made once.
static BIG: std::sync::LazyLock<hyper::body::Bytes> =
    std::sync::LazyLock::new(|| crate::pattern::pattern(BIG_BODY).into());

/// A body that does not tell its length, so hyper sends it chunked.
struct Unsized(http_body_util::Full<hyper::body::Bytes>);

impl hyper::body::Body for Unsized {
    type Data = hyper::body::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.0).poll_frame(cx)
    }
}
