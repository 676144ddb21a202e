//! Test guest, not an example to copy: a wasi:http 0.3 service, i.e. a
//! component that exports `wasi:http/handler@0.3.0` (the `wasi:http/service`
//! world of WASI 0.3.0), written against the raw bindings of the `wasip3`
//! crate.
//!
//! ```text
//! moat serve --addr=127.0.0.1:8080 http-service-p3.wasm
//! curl http://127.0.0.1:8080/
//! curl --data-binary @file http://127.0.0.1:8080/echo
//! ```
//!
//! Routes (the query, if any, is ignored):
//!
//! - `GET /`: 200, `hello from a wasi:http 0.3 service\n`, as `text/plain`.
//! - `POST /echo`: 200, the request body sent back chunk by chunk as it
//!   arrives (each read is written out before the next one starts), then the
//!   request's trailers, if it had any, as the response's. A request body that
//!   fails (the host's trailers future resolves to an error) fails the
//!   response body with the same error code.
//! - `GET /count`: 200 and how many requests this instance has been handed,
//!   this one included, whatever their route (`1\n` when every request gets an
//!   instance of its own).
//! - `GET /trap`: the handler panics, so the instance traps.
//! - `GET /cancel-wrong-end`: makes a stream, starts a write on its writable
//!   end (which no one reads), then asks the canonical ABI to cancel a read
//!   on that writable end: the wrong end (GHSA-xrvr-8678-5wp8). The host
//!   must trap the instance, not act on it or panic.
//! - anything else: 404, `not found\n`.

use std::sync::atomic::{AtomicU64, Ordering};

use wasip3::exports::http::handler::Guest;
use wasip3::http::types::{ErrorCode, Fields, Method, Request, Response, StatusCode};
use wasip3::wit_bindgen::{self, StreamResult};
use wasip3::{wit_future, wit_stream};

wasip3::http::service::export!(Service);

/// Requests this instance has been handed, on any route.
static ANSWERED: AtomicU64 = AtomicU64::new(0);

/// The most `/echo` asks of the request body in one read.
const ECHO_CHUNK: usize = 16 * 1024;

const HELLO: &str = "hello from a wasi:http 0.3 service\n";

/// The wasm32-wasip2 target wants a `main`, which it exports as
/// `wasi:cli/run@0.2.0`; a host serving this component calls the
/// `wasi:http/handler@0.3.0` export instead.
fn main() {
    eprintln!("http-service-p3 is a wasi:http 0.3 service; serve it, don't run it");
    std::process::exit(2);
}

struct Service;

impl Guest for Service {
    async fn handle(request: Request) -> Result<Response, ErrorCode> {
        let answered = ANSWERED.fetch_add(1, Ordering::Relaxed) + 1;
        let method = request.get_method();
        let path_with_query = request.get_path_with_query().unwrap_or_default();
        let path = path_with_query
            .split_once('?')
            .map_or(path_with_query.as_str(), |(path, _)| path);
        match (method, path) {
            (Method::Get, "/") => plain(200, HELLO.into()),
            (Method::Post, "/echo") => echo(request),
            (Method::Get, "/count") => plain(200, format!("{answered}\n")),
            (Method::Get, "/trap") => panic!("http-service-p3: /trap asked for a trap"),
            (Method::Get, "/cancel-wrong-end") => cancel_wrong_end(),
            _ => plain(404, "not found\n".into()),
        }
    }
}

/// A `text/plain` response of `status` whose body is `text`, written by a
/// task of its own once the response has been handed back.
fn plain(status: StatusCode, text: String) -> Result<Response, ErrorCode> {
    let headers = fields(&[
        ("content-type", b"text/plain"),
        ("content-length", text.len().to_string().as_bytes()),
    ])?;
    let (mut body_tx, body_rx) = wit_stream::new();
    // Dropping the writer unwritten resolves the trailers future to its
    // default: no trailers, no error.
    let (_, trailers_rx) = wit_future::new(|| Ok(None));
    let (response, _sent) = Response::new(headers, Some(body_rx), trailers_rx);
    set_status(&response, status)?;
    wit_bindgen::spawn_local(async move {
        // What is left unwritten is what a client that went away missed:
        // nobody to tell.
        let _unsent = body_tx.write_all(text.into_bytes()).await;
    });
    Ok(response)
}

/// Answers with the request body, streamed: a task copies each chunk from
/// the request's body stream into the response's as soon as it is read.
fn echo(request: Request) -> Result<Response, ErrorCode> {
    let headers = fields(&[("content-type", b"application/octet-stream")])?;
    // The guest's verdict on the request body, given back to the host once
    // the copy is over.
    let (verdict_tx, verdict_rx) = wit_future::new(|| Ok(()));
    let (mut request_body, request_trailers) = Request::consume_body(request, verdict_rx);
    let (mut response_body, response_body_rx) = wit_stream::new();
    let (response_trailers, response_trailers_rx) = wit_future::new(|| Ok(None));
    let (response, sent) = Response::new(headers, Some(response_body_rx), response_trailers_rx);
    set_status(&response, 200)?;

    wit_bindgen::spawn_local(async move {
        let mut buf = Vec::with_capacity(ECHO_CHUNK);
        loop {
            let (status, chunk) = request_body.read(buf).await;
            match status {
                StreamResult::Complete(_) if chunk.is_empty() => buf = chunk,
                StreamResult::Complete(_) => {
                    let unsent = response_body.write_all(chunk).await;
                    if !unsent.is_empty() {
                        // The response body's reader is gone (the client
                        // hung up): stop reading, say why.
                        drop(request_body);
                        let _ = verdict_tx
                            .write(Err(internal("echo: the response body was dropped")))
                            .await;
                        return;
                    }
                    buf = unsent;
                    buf.reserve(ECHO_CHUNK);
                }
                StreamResult::Dropped => break,
                StreamResult::Cancelled => unreachable!("this read is never cancelled"),
            }
        }
        drop(request_body);
        // The body is over: end the response's, then hand on the request's
        // trailers (or the error that cut its body short) as the response's.
        drop(response_body);
        let trailers = request_trailers.await;
        let verdict = match &trailers {
            Ok(_) => Ok(()),
            Err(e) => Err(e.clone()),
        };
        let _ = response_trailers.write(trailers).await;
        let _ = verdict_tx.write(verdict).await;
        // Keep the task until the host has sent the response, or failed to.
        let _ = sent.await;
    });
    Ok(response)
}

fn fields(entries: &[(&str, &[u8])]) -> Result<Fields, ErrorCode> {
    let entries: Vec<(String, Vec<u8>)> = entries
        .iter()
        .map(|(name, value)| ((*name).to_owned(), value.to_vec()))
        .collect();
    Fields::from_list(&entries).map_err(|e| internal(&format!("headers: {e:?}")))
}

fn set_status(response: &Response, status: StatusCode) -> Result<(), ErrorCode> {
    response
        .set_status_code(status)
        .map_err(|()| internal(&format!("status code {status} refused")))
}

fn internal(message: &str) -> ErrorCode {
    ErrorCode::InternalError(Some(message.to_owned()))
}

/// `/cancel-wrong-end`: a cancel of a read, on a stream's writable end
/// with a write pending, through the raw intrinsics wit-bindgen binds for
/// `stream<u8>` (its own code never makes this call). Returns only if the
/// host lets the call through.
fn cancel_wrong_end() -> Result<Response, ErrorCode> {
    let intrinsics = <u8 as wit_stream::StreamPayload>::VTABLE;
    let buffer = [0u8; 4];
    // SAFETY: `new` takes nothing and gives two handles of this instance;
    // `start_write` is given one of them and a buffer that outlives the
    // pending write (the cancel that follows ends it, or the trap ends the
    // instance); `cancel_read` takes a handle, which the host checks.
    let returned = unsafe {
        let ends = (intrinsics.new)();
        let writable = (ends >> 32) as u32;
        let _ = (intrinsics.start_write)(writable, buffer.as_ptr(), buffer.len());
        (intrinsics.cancel_read)(writable)
    };
    plain(200, format!("the host let it through: {returned}\n"))
}
