//! A wasi:http 0.2 `proxy` component on wstd: the host accepts the
//! connections and calls the handler once per request; the handler can make
//! outgoing requests of its own, under the grants.
//!
//! ```text
//! moat serve --addr=127.0.0.1:8080 wstd-serve.wasm
//! moat serve --addr=127.0.0.1:8080 --allow-net=example.com:443 wstd-serve.wasm
//! curl http://127.0.0.1:8080/
//! curl --data-binary @file http://127.0.0.1:8080/echo
//! curl 'http://127.0.0.1:8080/fetch?url=https%3A%2F%2Fexample.com%2F'
//! ```
//!
//! Routes:
//!
//! - `GET /`: 200, `hello from a wasi:http handler`.
//! - `POST /echo`: 200, the request body, streamed back as it comes in.
//! - `GET /fetch?url=<percent-encoded URL>`: fetches the URL and answers with
//!   its status and body (and `Content-Type`); 502 with the wasi:http error
//!   code (Debug form) when the fetch fails, 400 without a usable `url`.
//! - `GET /headers`: 200, the request's headers, `name: value` a line,
//!   sorted by name.
//! - anything else: 404.

use percent_encoding::percent_decode_str;
use wstd::http::body::Bytes;
use wstd::http::body::util::Empty;
use wstd::http::{
    Body, Client, Error, ErrorCode, HeaderValue, Method, Request, Response, StatusCode, Uri,
};

#[wstd::http_server]
async fn main(request: Request<Body>) -> Result<Response<Body>, Error> {
    let method = request.method().clone();
    match (method, request.uri().path()) {
        (Method::GET, "/") => Ok(text(StatusCode::OK, "hello from a wasi:http handler\n")),
        (Method::POST, "/echo") => Ok(echo(request)),
        (Method::GET, "/fetch") => Ok(fetch(&request).await),
        (Method::GET, "/headers") => Ok(headers(&request)),
        _ => Ok(text(StatusCode::NOT_FOUND, "not found\n")),
    }
}

fn text(status: StatusCode, body: impl Into<String>) -> Response<Body> {
    let mut response = Response::new(Body::from(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// The request's own body becomes the response's: wstd splices the
/// incoming stream into the outgoing one, host-side, so the guest holds none
/// of it, however long the body. (Should the client go away mid-body, the
/// failed write makes wstd's `http_server` glue panic: the instance traps.)
fn echo(request: Request<Body>) -> Response<Body> {
    Response::new(request.into_body())
}

async fn fetch(request: &Request<Body>) -> Response<Body> {
    let target = match fetch_target(request.uri()) {
        Ok(target) => target,
        Err(message) => return text(StatusCode::BAD_REQUEST, format!("{message}\n")),
    };
    // A body that writes nothing: wstd's `Body::empty()` still asks the
    // outgoing stream for room, and the host's HTTP client may have closed
    // that stream already (it sends no body with a GET), which would fail
    // the fetch with "connection reset".
    let no_body = Body::from_http_body(Empty::<Bytes>::new());
    let outgoing = match Request::get(target).body(no_body) {
        Ok(outgoing) => outgoing,
        Err(e) => return text(StatusCode::BAD_REQUEST, format!("{e}\n")),
    };
    match Client::new().send(outgoing).await {
        Ok(upstream) => {
            let status = upstream.status();
            let content_type = upstream.headers().get("content-type").cloned();
            // The upstream body is passed on as it arrives, not collected.
            let mut response = Response::new(upstream.into_body());
            *response.status_mut() = status;
            if let Some(content_type) = content_type {
                response.headers_mut().insert("content-type", content_type);
            }
            response
        }
        Err(err) => {
            let message = match err.downcast_ref::<ErrorCode>() {
                Some(code) => format!("{code:?}"),
                None => format!("{err:#}"),
            };
            text(StatusCode::BAD_GATEWAY, format!("{message}\n"))
        }
    }
}

/// The `url` query parameter, percent-decoded, as an absolute http(s) URI.
fn fetch_target(uri: &Uri) -> Result<Uri, String> {
    let encoded = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .find_map(|pair| pair.strip_prefix("url="))
        .ok_or("no url parameter")?;
    let decoded = percent_decode_str(encoded)
        .decode_utf8()
        .map_err(|_| "the url parameter is not UTF-8")?;
    let target: Uri = decoded
        .parse()
        .map_err(|e| format!("url {decoded:?}: {e}"))?;
    match (target.scheme_str(), target.authority()) {
        (Some("http" | "https"), Some(_)) => Ok(target),
        _ => Err(format!("url {decoded:?}: not an absolute http(s) URL")),
    }
}

fn headers(request: &Request<Body>) -> Response<Body> {
    let mut lines: Vec<(&str, String)> = request
        .headers()
        .iter()
        .map(|(name, value)| {
            (
                name.as_str(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    // Stable: the values of a repeated header keep their order.
    lines.sort_by(|a, b| a.0.cmp(b.0));
    let body: String = lines
        .iter()
        .map(|(name, value)| format!("{name}: {value}\n"))
        .collect();
    text(StatusCode::OK, body)
}
