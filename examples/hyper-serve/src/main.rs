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
//! gives `TcpStream` hyper's `rt::Read` and `rt::Write`: HTTP/1 needs no
//! executor and no timer.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use moat_sdk::{Error, TcpListener};

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
            if let Err(e) = http1::Builder::new().serve_connection(conn, service).await {
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
