//! Outgoing HTTP through wasi:http 0.3 (`client.send`), called through the
//! raw bindings of the `wasip3` crate, from a wasi:cli 0.3 command. One
//! thing per run:
//!
//! ```text
//! http-p3 fetch URL        GET; print "status: N", then the body as text
//! http-p3 post URL BYTES   POST a body of BYTES bytes (byte i is b'a' + i % 26), written
//!                          in 64 KiB chunks while the request is sent; print "sent N"
//!                          once the whole body is written and the response has come,
//!                          then "status: N" and "received M" (the response body's length)
//! http-p3 post-then-trap URL BYTES
//!                          POST BYTES bytes as post does, the trailers never written (so
//!                          the body is never finished): print "sent N" once the body is
//!                          written and the response's head has come, "status: N", then trap
//! http-p3 send METHOD URL [h:NAME=VALUE]... [body:TEXT] [scan:HEX]
//!                          as http-probe's send: `${VAR}` replaced from the environment,
//!                          the body in 7-byte pieces; print "status: N", "header: NAME:
//!                          VALUE" for each response header, "body: TEXT" and, with scan:,
//!                          "in memory: yes|no"
//! ```
//!
//! A request that fails (from `send`, or from the response body's trailers
//! future, where a failure while reading the body shows up) prints `error:
//! ERR`, the Debug form of wasi:http's `error-code` (e.g. `error:
//! ErrorCode::HttpRequestDenied`), and exits with 1. A body the host stops
//! reading prints `body write failed after N bytes: Dropped` and exits with
//! 2 (unless `send` failed: then its error is printed as above). Bad
//! arguments exit with 64.

use std::io::Write;

use wasip3::http::client;
use wasip3::http::types::{ErrorCode, Fields, Method, Request, Response, Scheme, Trailers};
use wasip3::wit_bindgen::{StreamResult, StreamWriter};

wasip3::cli::command::export!(HttpP3);

/// The size of each piece of a posted body, and of each read.
const CHUNK: usize = 64 * 1024;

/// The wasm32-wasip2 target wants a `main`, which it exports as
/// `wasi:cli/run@0.2.0`; hosts that run 0.3 commands (moat does) call the
/// async `run` below instead.
fn main() {
    eprintln!("http-p3 runs as a wasi:cli/run@0.3.0 command only");
    std::process::exit(2);
}

struct HttpP3;

impl wasip3::exports::cli::run::Guest for HttpP3 {
    async fn run() -> Result<(), ()> {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let arg = |i: usize| args.get(i).map(String::as_str);
        let result = match (arg(0).unwrap_or(""), arg(1), arg(2)) {
            ("fetch", Some(url), _) => fetch(url).await,
            ("post", Some(url), Some(bytes)) => match bytes.parse() {
                Ok(bytes) => post(url, bytes).await,
                Err(_) => Err(Failure::Usage(format!("{bytes:?} is not a number"))),
            },
            ("post-then-trap", Some(url), Some(bytes)) => match bytes.parse() {
                Ok(bytes) => post_then_trap(url, bytes).await,
                Err(_) => Err(Failure::Usage(format!("{bytes:?} is not a number"))),
            },
            ("send", Some(method), Some(url)) => send_with(method, url, &args[3..]).await,
            (mode, _, _) => Err(Failure::Usage(format!(
                "unknown mode {mode:?} or missing arguments"
            ))),
        };
        match result {
            Ok(()) => Ok(()),
            Err(failure) => exit(failure.report()),
        }
    }
}

/// Ends the run with `code`, which `run`'s `result` cannot carry.
fn exit(code: u8) -> ! {
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    wasip3::cli::exit::exit_with_code(code);
    unreachable!("wasi:cli/exit returned")
}

/// Why a mode stopped early.
enum Failure {
    /// wasi:http refused or failed the request.
    Http(ErrorCode),
    /// The host dropped the request body's stream after `sent` bytes.
    BodyWrite { sent: u64 },
    /// A setter of the request refused its value.
    Refused(&'static str),
    /// The arguments make no sense.
    Usage(String),
}

impl Failure {
    /// Prints the failure and gives the exit code it ends the run with.
    fn report(self) -> u8 {
        match self {
            Failure::Http(code) => {
                println!("error: {code:?}");
                1
            }
            Failure::BodyWrite { sent } => {
                println!("body write failed after {sent} bytes: Dropped");
                2
            }
            Failure::Refused(setter) => {
                println!("refused by {setter}");
                3
            }
            Failure::Usage(why) => {
                eprintln!("http-p3: {why}");
                64
            }
        }
    }
}

impl From<ErrorCode> for Failure {
    fn from(code: ErrorCode) -> Failure {
        Failure::Http(code)
    }
}

/// A request for `url` (`scheme://authority/path?query`, split without
/// judging it: that is the host's job), with the body `contents`, no
/// trailers, and default options.
fn request(
    url: &str,
    method: Method,
    contents: Option<wasip3::wit_bindgen::StreamReader<u8>>,
) -> Result<Request, Failure> {
    // Dropped unwritten, the trailers' writer sends its default: none.
    let (_no_trailers, trailers) =
        wasip3::wit_future::new::<Result<Option<Trailers>, ErrorCode>>(|| Ok(None));
    request_with(url, method, contents, trailers)
}

/// As [`request`], with the body's trailers future given.
fn request_with(
    url: &str,
    method: Method,
    contents: Option<wasip3::wit_bindgen::StreamReader<u8>>,
    trailers: wasip3::wit_bindgen::FutureReader<Result<Option<Trailers>, ErrorCode>>,
) -> Result<Request, Failure> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| Failure::Usage(format!("{url:?} is not a URL")))?;
    let (authority, path) = match rest.find(['/', '?']) {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let path_with_query = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("/{path}")
    };
    let scheme = match scheme {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => Scheme::Other(other.to_owned()),
    };
    request_from(
        Fields::new(),
        scheme,
        authority,
        &path_with_query,
        method,
        contents,
        trailers,
    )
}

/// The request with these parts, `headers` among them.
fn request_from(
    headers: Fields,
    scheme: Scheme,
    authority: &str,
    path_with_query: &str,
    method: Method,
    contents: Option<wasip3::wit_bindgen::StreamReader<u8>>,
    trailers: wasip3::wit_bindgen::FutureReader<Result<Option<Trailers>, ErrorCode>>,
) -> Result<Request, Failure> {
    let (request, _transmitted) = Request::new(headers, contents, trailers, None);
    request
        .set_method(&method)
        .map_err(|()| Failure::Refused("set-method"))?;
    request
        .set_scheme(Some(&scheme))
        .map_err(|()| Failure::Refused("set-scheme"))?;
    request
        .set_authority(Some(authority))
        .map_err(|()| Failure::Refused("set-authority"))?;
    request
        .set_path_with_query(Some(path_with_query))
        .map_err(|()| Failure::Refused("set-path-with-query"))?;
    Ok(request)
}

/// Reads the response's body to its end, then its trailers' future, where
/// a failure while the host read the body shows up.
async fn read_body(response: Response) -> Result<Vec<u8>, Failure> {
    let (_no_error, handled) = wasip3::wit_future::new::<Result<(), ErrorCode>>(|| Ok(()));
    let (mut contents, trailers) = Response::consume_body(response, handled);
    let mut body = Vec::new();
    loop {
        let (status, piece) = contents.read(Vec::with_capacity(CHUNK)).await;
        body.extend_from_slice(&piece);
        if matches!(status, StreamResult::Dropped) {
            break;
        }
    }
    drop(contents);
    trailers.await?;
    Ok(body)
}

async fn fetch(url: &str) -> Result<(), Failure> {
    let response = client::send(request(url, Method::Get, None)?).await?;
    println!("status: {}", response.get_status_code());
    let body = read_body(response).await?;
    let text = String::from_utf8_lossy(&body);
    if text.is_empty() || text.ends_with('\n') {
        print!("{text}");
    } else {
        println!("{text}");
    }
    Ok(())
}

async fn post(url: &str, bytes: u64) -> Result<(), Failure> {
    let (writer, contents) = wasip3::wit_stream::new::<u8>();
    let request = request(url, Method::Post, Some(contents))?;
    // The body is written while `send` runs: the host reads it as it sends.
    let (written, response) = futures::join!(write_body(writer, bytes), client::send(request));
    let response = response?;
    written?;
    println!("sent {bytes}");
    println!("status: {}", response.get_status_code());
    let body = read_body(response).await?;
    println!("received {}", body.len());
    Ok(())
}

/// A guest that dies in the middle of an upload: its bytes are written,
/// but the trailers that would finish the body never are, and the guest
/// traps once the server has answered.
async fn post_then_trap(url: &str, bytes: u64) -> Result<(), Failure> {
    let (writer, contents) = wasip3::wit_stream::new::<u8>();
    let (unfinished, trailers) =
        wasip3::wit_future::new::<Result<Option<Trailers>, ErrorCode>>(|| Ok(None));
    let request = request_with(url, Method::Post, Some(contents), trailers)?;
    let (written, response) = futures::join!(write_body(writer, bytes), client::send(request));
    let response = response?;
    written?;
    println!("sent {bytes}");
    println!("status: {}", response.get_status_code());
    let _ = std::io::stdout().flush();
    // The trailers' writer is still held: the trap ends the guest with
    // its body unfinished.
    std::hint::black_box(&unfinished);
    std::process::abort()
}

/// Each `${VAR}` in `text` replaced by the environment's VAR.
fn expanded(text: &str) -> String {
    let mut out = text.to_owned();
    for (name, value) in std::env::vars() {
        out = out.replace(&format!("${{{name}}}"), &value);
    }
    out
}

/// Whether linear memory holds the bytes whose XOR with 0x55 is
/// `needle_x` (hex), compared through the XOR so that the needle is never
/// built in memory.
fn in_memory(needle_x: &str) -> Result<bool, Failure> {
    let needle: Vec<u8> = (0..needle_x.len() / 2)
        .map(|i| u8::from_str_radix(&needle_x[2 * i..2 * i + 2], 16))
        .collect::<Result<_, _>>()
        .map_err(|_| Failure::Usage(format!("{needle_x:?} is not hex")))?;
    let Some((&first, _)) = needle.split_first() else {
        return Ok(false);
    };
    let size = core::arch::wasm32::memory_size(0) * 65536;
    // SAFETY: every address below the memory's size is in bounds in
    // wasm32 (address 0 included: wasm has no unmapped page), and the
    // bytes are only read, volatile, one at a time.
    let at = |addr: usize| unsafe { core::ptr::read_volatile(addr as *const u8) };
    for start in 0..size.saturating_sub(needle.len()) {
        if at(start) ^ 0x55 == first && (1..needle.len()).all(|i| at(start + i) ^ 0x55 == needle[i])
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `send`: one request as the arguments build it (see the module doc).
async fn send_with(method: &str, url: &str, rest: &[String]) -> Result<(), Failure> {
    let mut headers = Vec::new();
    let mut body = String::new();
    let mut scan = None;
    let mut follow = false;
    for arg in rest {
        if let Some(header) = arg.strip_prefix("h:") {
            let (name, value) = header
                .split_once('=')
                .ok_or_else(|| Failure::Usage(format!("{arg:?}: h:NAME=VALUE")))?;
            headers.push((expanded(name), expanded(value)));
        } else if let Some(text) = arg.strip_prefix("body:") {
            body = expanded(text);
        } else if let Some(hex) = arg.strip_prefix("scan:") {
            scan = Some(hex.to_owned());
        } else if arg == "follow" {
            follow = true;
        } else {
            return Err(Failure::Usage(format!(
                "{arg:?}: h:, body:, scan: or follow"
            )));
        }
    }
    let mut url = expanded(url);
    let response = loop {
        let response = send_once(method, &url, &headers, &body).await?;
        let location = response
            .get_headers()
            .get("location")
            .first()
            .map(|l| String::from_utf8_lossy(l).into_owned());
        match location {
            Some(next) if follow && (300..400).contains(&response.get_status_code()) => {
                println!("redirected: {}", response.get_status_code());
                follow = false;
                url = next;
            }
            _ => break response,
        }
    };
    println!("status: {}", response.get_status_code());
    for (name, value) in response.get_headers().copy_all() {
        println!("header: {name}: {}", String::from_utf8_lossy(&value));
    }
    let text = read_body(response).await?;
    println!("body: {}", String::from_utf8_lossy(&text));
    if let Some(hex) = scan {
        let found = in_memory(&hex)?;
        println!("in memory: {}", if found { "yes" } else { "no" });
    }
    Ok(())
}

/// One request of `send`: its body written in 7-byte pieces while it is
/// sent.
async fn send_once(
    method: &str,
    url: &str,
    headers: &[(String, String)],
    body: &str,
) -> Result<Response, Failure> {
    let fields = Fields::new();
    for (name, value) in headers {
        fields
            .append(name, value.as_bytes())
            .map_err(|_| Failure::Refused("fields.append"))?;
    }
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| Failure::Usage(format!("{url:?} is not a URL")))?;
    let (authority, path) = match rest.find(['/', '?']) {
        Some(at) => rest.split_at(at),
        None => (rest, "/"),
    };
    let scheme = match scheme {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => Scheme::Other(other.to_owned()),
    };
    let method = match method {
        "GET" => Method::Get,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        other => Method::Other(expanded(other)),
    };
    let (mut writer, contents) = wasip3::wit_stream::new::<u8>();
    let (_no_trailers, trailers) =
        wasip3::wit_future::new::<Result<Option<Trailers>, ErrorCode>>(|| Ok(None));
    let request = request_from(
        fields,
        scheme,
        authority,
        path,
        method,
        Some(contents),
        trailers,
    )?;
    let pieces: Vec<Vec<u8>> = body.as_bytes().chunks(7).map(<[u8]>::to_vec).collect();
    let write = async move {
        for piece in pieces {
            if !writer.write_all(piece).await.is_empty() {
                break;
            }
        }
    };
    let ((), response) = futures::join!(write, client::send(request));
    Ok(response?)
}

/// Writes `total` bytes of the a-to-z pattern, 64 KiB at a time, then
/// drops the writer, which ends the body.
async fn write_body(mut writer: StreamWriter<u8>, total: u64) -> Result<(), Failure> {
    let mut sent = 0u64;
    while sent < total {
        let len = (CHUNK as u64).min(total - sent);
        let chunk: Vec<u8> = (sent..sent + len).map(|i| b'a' + (i % 26) as u8).collect();
        let rest = writer.write_all(chunk).await;
        sent += len - rest.len() as u64;
        if !rest.is_empty() {
            return Err(Failure::BodyWrite { sent });
        }
    }
    Ok(())
}
