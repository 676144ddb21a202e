//! An HTTP/1.1 server on hyper 1, running on moat-sdk's sockets.
//!
//! ```text
//! moat run --allow-listen=127.0.0.1:8080 hyper-serve.wasm 127.0.0.1:8080
//! curl http://127.0.0.1:8080/
//! curl --data-binary @file http://127.0.0.1:8080/echo
//! ```
//!
//! Routes, as `http-server` has them: `GET /` (a greeting), `GET /health`
//! (`ok`), `POST /echo` (the body back, up to 1 MiB), `GET /whoami` (the
//! client's address). Keep-alive and pipelining are hyper's. It prints
//! `listening on HOST:PORT` once ready.
//!
//! hyper needs nothing more than the `hyper` feature of moat-sdk, which
//! gives `TcpStream` hyper's `rt::Read` and `rt::Write` (HTTP/1 needs no
//! executor), and `moat_sdk::hyper::Timer`, hyper's timer on moat's clock.
//! The server sets that timer and a header-read timeout of
//! [`HEADER_READ_TIMEOUT`]: without a timer, hyper's header-read timeout
//! is off, and a client that sends half a request header and then nothing
//! holds its connection for good. With it, hyper closes a connection whose
//! request header is not all there that long after it began waiting for
//! it; that includes a keep-alive connection left idle between requests.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use moat_sdk::{Error, TcpListener};

/// How long a client has to send a whole request header, counted from when
/// the server starts waiting for one (after the connection opens, or after
/// the previous response on a keep-alive connection). 10 s is a third of
/// hyper's own default (30 s): ample for a real client, even on a slow
/// link, as a header is usually one packet; short enough that clients
/// sending headers a byte at a time cannot pile up connections, each with
/// a task and its buffers, for long.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest request body `POST /echo` takes: bigger ones get 413, so one
/// client cannot make the server buffer without bound.
const MAX_BODY: usize = 1 << 20;

#[moat_sdk::main]
async fn main() -> Result<(), Error> {
    let addr = std::env::args()
        .nth(1)
        .ok_or_else(|| Error::InvalidArgument("usage: hyper-serve HOST:PORT".into()))?;
    let listener = TcpListener::bind(addr.as_str()).await?;
    println!("listening on {}", listener.local_addr()?);
    loop {
        let (conn, peer) = listener.accept().await?;
        moat_sdk::spawn(async move {
            let service = service_fn(move |request| handle(request, peer));
            let served = http1::Builder::new()
                .timer(moat_sdk::hyper::Timer)
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(conn, service)
                .await;
            if let Err(e) = served {
                eprintln!("hyper-serve: {peer}: {e}");
            }
        });
    }
}

async fn handle(
    request: Request<Incoming>,
    peer: SocketAddr,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let response = match (request.method(), request.uri().path()) {
        (&Method::GET, "/") => text(StatusCode::OK, "hello from a moat guest, on hyper\n"),
        (&Method::GET, "/health") => text(StatusCode::OK, "ok\n"),
        (&Method::GET, "/whoami") => text(StatusCode::OK, format!("{peer}\n")),
        (&Method::POST, "/echo") => {
            match Limited::new(request.into_body(), MAX_BODY).collect().await {
                Ok(body) => Response::new(Full::new(body.to_bytes())),
                Err(_) => text(StatusCode::PAYLOAD_TOO_LARGE, "body too large\n"),
            }
        }
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    };
    Ok(response)
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response
}
