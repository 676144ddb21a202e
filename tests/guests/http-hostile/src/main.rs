//! Test guest, not an example to copy: a wasi:http 0.2 `proxy` handler
//! that misbehaves on purpose, one way per route, so that the host's tests
//! can check that `moat serve` bounds each of them (and that the next
//! request is still served).
//!
//! ```text
//! moat serve --addr=127.0.0.1:8080 http-hostile.wasm
//! curl http://127.0.0.1:8080/spin
//! ```
//!
//! Routes (GET):
//!
//! - `/trap`: the handler panics, so the instance traps.
//! - `/spin`: computes forever and never yields.
//! - `/grow`: allocates 1 MiB chunks, writing every byte, and keeps them all,
//!   until the host's memory bound stops it.
//! - `/slow`: 200 and its headers at once, then `tick\n` every 100 ms,
//!   forever. When the client goes away the next write fails, and wstd's
//!   `http_server` glue panics on that: the instance traps then.
//! - `/big?bytes=N`: 200 with `Content-Length: N` and N bytes, byte i being
//!   `b'a' + i % 26`, written in 64 KiB chunks (400 without a count).
//! - `/ok`: 200, `ok\n`.
//! - `/uri`: 200 and the request's URI as the handler sees it (scheme,
//!   authority, path), then a newline.
//! - `/count`: 200 and how many requests this instance has answered, this
//!   one included (`1\n` when every request gets an instance of its own).
//! - `/upload-then-trap?port=P&bytes=N`: POSTs a chunked body of N bytes
//!   (byte i being `b'a' + i % 26`) to `http://127.0.0.1:P/upload`, never
//!   finishing it, waits for the upstream's response head, then panics:
//!   the upstream must see the upload cut off, not ended.
//! - `/deny-flood?n=N&len=L[&from=P]`: makes N outgoing GETs, each to
//!   another port of 192.0.2.1 from P (1 unless given; no grant covers
//!   them: each is refused) with a path L bytes
//!   long, one after the other, and answers 200 `denied K\n`, or `denied
//!   K, then ERR\n` when a request fails otherwise (it stops there).
//! - `/fetch-flood?port=P&n=N&len=L`: makes N outgoing GETs to
//!   `127.0.0.1:P` with a path L bytes long, one after the other, reading
//!   each response's body to its end, and answers 200 `fetched K\n`, or
//!   `fetched K, then ERR\n` when one fails (it stops there).
//! - `POST /consume`: reads the whole request body, then answers 200
//!   `read N\n`; a body the host cuts off answers 500 with the error.
//! - anything else: 404.

use std::convert::Infallible;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use wstd::http::body::Bytes;
use wstd::http::{Body, Error, HeaderValue, Method, Request, Response, StatusCode, Uri};
use wstd::time::{Duration, Timer};

const MIB: usize = 1 << 20;

/// Requests this instance has answered at `/count`.
static ANSWERED: AtomicU64 = AtomicU64::new(0);
const BIG_CHUNK: u64 = 64 * 1024;

#[wstd::http_server]
async fn main(mut request: Request<Body>) -> Result<Response<Body>, Error> {
    if request.method() == Method::POST && request.uri().path() == "/consume" {
        return Ok(match request.body_mut().contents().await {
            Ok(body) => Response::new(Body::from(format!("read {}\n", body.len()))),
            Err(e) => {
                let mut response = Response::new(Body::from(format!("{e:?}\n")));
                *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
                response
            }
        });
    }
    if request.method() != Method::GET {
        return Ok(plain(StatusCode::NOT_FOUND, "not found\n"));
    }
    Ok(match request.uri().path() {
        "/trap" => panic!("http-hostile: /trap asked for a trap"),
        "/spin" => spin(),
        "/grow" => grow(),
        "/slow" => slow(),
        "/big" => big(request.uri()),
        "/ok" => plain(StatusCode::OK, "ok\n"),
        "/uri" => Response::new(Body::from(format!("{}\n", request.uri()))),
        "/upload-then-trap" => upload_then_trap(request.uri()),
        "/deny-flood" => deny_flood(request.uri()),
        "/fetch-flood" => fetch_flood(request.uri()),
        "/count" => {
            let n = ANSWERED.fetch_add(1, Ordering::Relaxed) + 1;
            Response::new(Body::from(format!("{n}\n")))
        }
        _ => plain(StatusCode::NOT_FOUND, "not found\n"),
    })
}

/// The number `key=N` of `uri`'s query, if there is one.
fn query(uri: &Uri, key: &str) -> Option<u64> {
    uri.query()
        .unwrap_or_default()
        .split('&')
        .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))
        .and_then(|n| n.parse::<u64>().ok())
}

/// A GET of `http://AUTHORITY/PATH` through raw wasi:http 0.2 calls,
/// waited for: the response's head, or the error.
fn http_get(
    authority: &str,
    path: &str,
) -> Result<wasip2::http::types::IncomingResponse, wasip2::http::types::ErrorCode> {
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{Fields, OutgoingRequest, Scheme};
    let request = OutgoingRequest::new(Fields::new());
    let set = request.set_scheme(Some(&Scheme::Http)).is_ok()
        && request.set_authority(Some(authority)).is_ok()
        && request.set_path_with_query(Some(path)).is_ok();
    assert!(set, "the request refused a part");
    let future = outgoing_handler::handle(request, None)?;
    loop {
        match future.get() {
            Some(Ok(outcome)) => return outcome,
            Some(Err(())) => panic!("the response was taken twice"),
            None => future.subscribe().block(),
        }
    }
}

/// Outgoing requests the host refuses, through raw wasi:http 0.2 calls:
/// each a first denial of its kind, with a record of its own.
fn deny_flood(uri: &Uri) -> Response<Body> {
    use wasip2::http::types::ErrorCode;
    let query = |key: &str| query(uri, key);
    let (Some(n), Some(len)) = (query("n"), query("len")) else {
        return plain(StatusCode::BAD_REQUEST, "usage: /deny-flood?n=N&len=L\n");
    };
    let path = format!("/{}", "a".repeat(len.saturating_sub(1) as usize));
    let from = query("from").unwrap_or(1);
    let mut denied = 0;
    for port in from..from + n {
        match http_get(&format!("192.0.2.1:{port}"), &path).map(drop) {
            Err(ErrorCode::HttpRequestDenied) => denied += 1,
            other => {
                return Response::new(Body::from(format!("denied {denied}, then {other:?}\n")));
            }
        }
    }
    Response::new(Body::from(format!("denied {denied}\n")))
}

/// Outgoing requests the host allows, through raw wasi:http 0.2 calls,
/// each response's body read to its end.
fn fetch_flood(uri: &Uri) -> Response<Body> {
    use wasip2::io::streams::StreamError;
    let query = |key: &str| query(uri, key);
    let (Some(port), Some(n), Some(len)) = (query("port"), query("n"), query("len")) else {
        return plain(
            StatusCode::BAD_REQUEST,
            "usage: /fetch-flood?port=P&n=N&len=L\n",
        );
    };
    let path = format!("/{}", "b".repeat(len.saturating_sub(1) as usize));
    let mut fetched = 0;
    for _ in 0..n {
        let response = match http_get(&format!("127.0.0.1:{port}"), &path) {
            Ok(response) => response,
            Err(code) => {
                return Response::new(Body::from(format!("fetched {fetched}, then {code:?}\n")));
            }
        };
        let body = response.consume().expect("the body, once");
        let stream = body.stream().expect("the stream, once");
        loop {
            match stream.blocking_read(64 * 1024) {
                Ok(_) => {}
                Err(StreamError::Closed) => break,
                Err(StreamError::LastOperationFailed(e)) => {
                    return Response::new(Body::from(format!(
                        "fetched {fetched}, then {}\n",
                        e.to_debug_string()
                    )));
                }
            }
        }
        drop(stream);
        drop(body);
        drop(response);
        fetched += 1;
    }
    Response::new(Body::from(format!("fetched {fetched}\n")))
}

/// An upload the handler dies in the middle of, through raw wasi:http 0.2
/// calls (so that nothing between could finish the body for it).
fn upload_then_trap(uri: &Uri) -> ! {
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{Fields, Method as RawMethod, OutgoingRequest, Scheme};
    let query = |key: &str| query(uri, key);
    let (Some(port), Some(bytes)) = (query("port"), query("bytes")) else {
        panic!("usage: /upload-then-trap?port=P&bytes=N");
    };
    let request = OutgoingRequest::new(Fields::new());
    let set = request.set_method(&RawMethod::Post).is_ok()
        && request.set_scheme(Some(&Scheme::Http)).is_ok()
        && request
            .set_authority(Some(&format!("127.0.0.1:{port}")))
            .is_ok()
        && request.set_path_with_query(Some("/upload")).is_ok();
    assert!(set, "the request refused a part");
    let body = request.body().expect("the body is there");
    let future = outgoing_handler::handle(request, None).expect("the request is sent");
    let stream = body.write().expect("the body's stream is there");
    let mut sent = 0u64;
    while sent < bytes {
        let permit = stream.check_write().expect("the body takes bytes");
        if permit == 0 {
            stream.subscribe().block();
            continue;
        }
        let end = bytes.min(sent + permit.min(BIG_CHUNK));
        let chunk: Vec<u8> = (sent..end).map(|i| b'a' + (i % 26) as u8).collect();
        stream.write(&chunk).expect("the body takes bytes");
        sent = end;
    }
    stream.blocking_flush().expect("the body is flushed");
    loop {
        match future.get() {
            Some(_) => break,
            None => future.subscribe().block(),
        }
    }
    // The body and its stream are still open.
    panic!("http-hostile: the upload is left unfinished on purpose");
}

fn plain(status: StatusCode, body: &'static str) -> Response<Body> {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response
}

/// Busy forever: no await, no host call, only arithmetic the optimizer
/// must keep.
fn spin() -> ! {
    let mut x: u64 = 1;
    loop {
        x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

/// Memory without end: every chunk is written whole (so its pages are
/// real) and kept, until an allocation fails and the instance traps.
fn grow() -> ! {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        hoard.push(vec![0xa5; MIB]);
        black_box(&mut hoard);
    }
}

/// The head at once, then a tick every 100 ms that never ends.
fn slow() -> Response<Body> {
    let ticks = futures_lite::stream::unfold(true, |first| async move {
        if !first {
            Timer::after(Duration::from_millis(100)).wait().await;
        }
        Some((Ok::<_, Infallible>(Bytes::from_static(b"tick\n")), false))
    });
    Response::new(Body::from_try_stream(ticks))
}

/// `bytes=N` from the query, streamed in chunks, never held whole.
fn big(uri: &Uri) -> Response<Body> {
    let Some(size) = query(uri, "bytes") else {
        return plain(StatusCode::BAD_REQUEST, "usage: /big?bytes=N\n");
    };
    let chunks = futures_lite::stream::unfold(0u64, move |offset| async move {
        if offset >= size {
            return None;
        }
        let end = size.min(offset + BIG_CHUNK);
        let chunk: Vec<u8> = (offset..end).map(|i| b'a' + (i % 26) as u8).collect();
        Some((Ok::<_, Infallible>(Bytes::from(chunk)), end))
    });
    let mut response = Response::new(Body::from_try_stream(chunks));
    response
        .headers_mut()
        .insert("content-length", HeaderValue::from(size));
    response
}
