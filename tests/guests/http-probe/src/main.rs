//! Outgoing HTTP through wasi:http 0.2 (`outgoing-handler.handle`), called
//! through the raw bindings of the `wasip2` crate, so that each request
//! reaches the host exactly as built here. One thing per run:
//!
//! ```text
//! http-probe fetch URL                  GET; print "status: N", then the body as text
//! http-probe no-authority               GET http, path "/", the authority never set
//! http-probe empty-authority            GET http, path "/", the authority set to ""
//! http-probe authority AUTH [SCHEME]    GET SCHEME (http unless "https" or another name is
//!                                       given), path "/", the authority set to exactly AUTH;
//!                                       prints as fetch does
//! http-probe host-header URL HOSTVALUE  GET URL with a `host: HOSTVALUE` header when the
//!                                       fields take it ("header refused: ERR" and sent
//!                                       without it when not); prints as fetch does
//! http-probe post URL BYTES             POST a body of BYTES bytes (byte i is b'a' + i % 26),
//!                                       written in 64 KiB chunks; print "sent N" once the
//!                                       body is finished, then "status: N" and "received M"
//! http-probe post-then-trap URL BYTES
//!                                       POST a chunked body of BYTES bytes as post does,
//!                                       never finished: print "sent N", wait for the
//!                                       response's head, print "status: N", then trap
//! http-probe flood N URL                start N GETs at once, then await each; print "ok X",
//!                                       then "err ERR xCOUNT" for each distinct error, sorted
//! http-probe timeouts URL CONNECT_MS FIRST_BYTE_MS BETWEEN_MS
//!                                       GET with those request options ("-" leaves one
//!                                       unset; "option refused: connect|first-byte|
//!                                       between-bytes" when a setter refuses); print
//!                                       "status: N", read the body, print "received M"
//! http-probe sequential N URL           N GETs one after the other, each body read to its
//!                                       end; print "ok N"
//! http-probe headers URL                GET; print "status: N" and "header-bytes: M", the
//!                                       sum of the response headers' name and value lengths
//! http-probe fetch-all URL...           GET each URL in turn, in one run (so kept-alive
//!                                       connections may carry several); print "URL:
//!                                       status: N" or "URL: error: ERR" for each, and
//!                                       exit 0
//! http-probe hold-bodies N              make N POST requests to http://127.0.0.1:9/, fill
//!                                       each one's body as far as its stream takes without
//!                                       waiting, send none and keep them all; print "held K
//!                                       bodies, B bytes" and, when one was refused, "refused
//!                                       at K: WHAT" (WHAT: body, or the stream's error)
//! http-probe hold-fields N BYTES        make N fields of about BYTES bytes each (headers
//!                                       x-0, x-1, ... of 1 KiB values) and keep them all;
//!                                       print "held K fields, B bytes" and, at the first
//!                                       refusal, "refused at K: ERR"
//! http-probe hold-responses N URL       start N GETs of URL at once, wait for each
//!                                       response's head, read no body, keep them all;
//!                                       print "held K responses" and each distinct error
//!                                       as flood does
//! http-probe denied-paths N BYTES      GET http://192.0.2.1:P/aaa... for P = 1..=N, each
//!                                       path BYTES long (no grant covers them: each is
//!                                       refused); print "denied K", then wait for stdin's
//!                                       end (so that the host's memory can be read then)
//! http-probe send METHOD URL [h:NAME=VALUE]... [body:TEXT] [scan:HEX] [follow]
//!                                       METHOD to URL with those headers and that body
//!                                       (written in 7-byte pieces, so that a text spans
//!                                       pieces), each `${VAR}` in URL, header or body
//!                                       replaced by the environment's VAR; print "status: N",
//!                                       "header: NAME: VALUE" for each response header and
//!                                       "body: TEXT"; with scan:, also "in memory: yes|no",
//!                                       whether the guest's linear memory holds the bytes
//!                                       whose XOR with 0x55 is HEX (so the needle itself is
//!                                       never in memory; found, the run exits with 5);
//!                                       with follow, a 3xx response's
//!                                       Location is requested next with the same headers
//!                                       (once), as a client that follows redirects does
//! ```
//!
//! A request that fails prints `error: ERR` (the Debug form of wasi:http's
//! `error-code`, e.g. `error: ErrorCode::HttpRequestDenied`) and exits
//! with 1. A body stream that fails while being read prints `body error:
//! LastOperationFailed(ERR)`, ERR being the `error-code` that
//! `http-error-code` finds in the stream error (or its debug string when it
//! has none), and exits with 1. A body that cannot be written prints `body
//! write failed after N bytes: CAUSE` (CAUSE as for `body error`, or
//! `Closed`) and exits with 2. A request part that the request refuses
//! prints `refused by set-authority` (or `set-scheme`,
//! `set-path-with-query`, `set-method`) and exits with 3. Bad arguments exit
//! with 64.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;

use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, FutureIncomingResponse, IncomingBody, IncomingResponse, Method,
    OutgoingBody, OutgoingRequest, RequestOptions, Scheme, http_error_code,
};
use wasip2::io::streams::{InputStream, OutputStream, StreamError};

/// The size of each piece of a posted body, and of each read.
const CHUNK: u64 = 64 * 1024;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str);
    let result = match (arg(0).unwrap_or(""), arg(1), arg(2)) {
        ("fetch", Some(url), _) => fetch(url),
        ("no-authority", _, _) => no_authority(),
        ("empty-authority", _, _) => authority("", arg(1)),
        ("authority", Some(auth), scheme) => authority(auth, scheme),
        ("host-header", Some(url), Some(value)) => host_header(url, value),
        ("post", Some(url), Some(bytes)) => number(bytes).and_then(|n| post(url, n)),
        ("post-then-trap", Some(url), Some(bytes)) => {
            number(bytes).and_then(|n| post_then_trap(url, n))
        }
        ("flood", Some(n), Some(url)) => number(n).and_then(|n| flood(n, url)),
        ("timeouts", Some(url), Some(connect)) => timeouts(url, connect, arg(3), arg(4)),
        ("sequential", Some(n), Some(url)) => number(n).and_then(|n| sequential(n, url)),
        ("headers", Some(url), _) => headers(url),
        ("fetch-all", Some(_), _) => fetch_all(&args[1..]),
        ("send", Some(method), Some(url)) => send_with(method, url, &args[3..]),
        ("hold-bodies", Some(n), _) => number(n).and_then(hold_bodies),
        ("hold-fields", Some(n), Some(bytes)) => {
            number(n).and_then(|n| number(bytes).and_then(|b| hold_fields(n, b)))
        }
        ("hold-responses", Some(n), Some(url)) => number(n).and_then(|n| hold_responses(n, url)),
        ("denied-paths", Some(n), Some(bytes)) => {
            number(n).and_then(|n| number(bytes).and_then(|b| denied_paths(n, b)))
        }
        (mode, _, _) => Err(Failure::Usage(format!(
            "unknown mode {mode:?} or missing arguments"
        ))),
    };
    if let Err(failure) = result {
        exit(failure.report());
    }
}

/// Ends the run with `code`: std's own exit reports only success or
/// failure, wasi:cli 0.2.12's `exit-with-code` carries the number.
fn exit(code: u8) -> ! {
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    wasip2::cli::exit::exit_with_code(code);
    unreachable!("wasi:cli/exit returned")
}

/// Why a mode stopped early.
enum Failure {
    /// wasi:http refused or failed the request.
    Http(ErrorCode),
    /// The response body's stream failed while being read.
    BodyRead(StreamFailure),
    /// The request body's stream failed after `sent` bytes.
    BodyWrite { sent: u64, cause: StreamFailure },
    /// A setter of the outgoing request refused its value.
    Refused(&'static str),
    /// Something the bindings promise cannot happen did.
    Guest(&'static str),
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
            Failure::BodyRead(cause) => {
                println!("body error: {cause:?}");
                1
            }
            Failure::BodyWrite { sent, cause } => {
                println!("body write failed after {sent} bytes: {cause:?}");
                2
            }
            Failure::Refused(setter) => {
                println!("refused by {setter}");
                3
            }
            Failure::Guest(what) => {
                println!("error: {what}");
                1
            }
            Failure::Usage(why) => {
                eprintln!("http-probe: {why}");
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

/// A wasi:io stream error, with the `error-code` found in it, if any.
enum StreamFailure {
    Closed,
    Http(ErrorCode),
    Other(String),
}

impl From<StreamError> for StreamFailure {
    fn from(error: StreamError) -> StreamFailure {
        match error {
            StreamError::Closed => StreamFailure::Closed,
            StreamError::LastOperationFailed(e) => match http_error_code(&e) {
                Some(code) => StreamFailure::Http(code),
                None => StreamFailure::Other(e.to_debug_string()),
            },
        }
    }
}

impl fmt::Debug for StreamFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamFailure::Closed => write!(f, "Closed"),
            StreamFailure::Http(code) => write!(f, "LastOperationFailed({code:?})"),
            // Debug, so that a multi-line message stays on one line.
            StreamFailure::Other(text) => write!(f, "LastOperationFailed({text:?})"),
        }
    }
}

fn number(text: &str) -> Result<u64, Failure> {
    text.parse()
        .map_err(|_| Failure::Usage(format!("{text:?} is not a number")))
}

/// The parts of an `http://authority/path?query` URL, split without
/// judging them: that is the host's job.
struct Target {
    scheme: Scheme,
    authority: String,
    path_with_query: String,
}

fn parse_url(url: &str) -> Result<Target, Failure> {
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
    Ok(Target {
        scheme: scheme_named(scheme),
        authority: authority.to_owned(),
        path_with_query,
    })
}

fn scheme_named(name: &str) -> Scheme {
    match name {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => Scheme::Other(other.to_owned()),
    }
}

/// A request for `target`, with `headers` (which become immutable).
fn request(target: &Target, method: Method, headers: Fields) -> Result<OutgoingRequest, Failure> {
    let request = OutgoingRequest::new(headers);
    if !matches!(method, Method::Get) {
        request
            .set_method(&method)
            .map_err(|()| Failure::Refused("set-method"))?;
    }
    request
        .set_scheme(Some(&target.scheme))
        .map_err(|()| Failure::Refused("set-scheme"))?;
    request
        .set_authority(Some(&target.authority))
        .map_err(|()| Failure::Refused("set-authority"))?;
    request
        .set_path_with_query(Some(&target.path_with_query))
        .map_err(|()| Failure::Refused("set-path-with-query"))?;
    Ok(request)
}

fn get(url: &str) -> Result<OutgoingRequest, Failure> {
    request(&parse_url(url)?, Method::Get, Fields::new())
}

/// Waits for a response that `outgoing-handler.handle` started.
fn wait(future: &FutureIncomingResponse) -> Result<IncomingResponse, Failure> {
    loop {
        match future.get() {
            Some(Ok(response)) => return Ok(response?),
            Some(Err(())) => return Err(Failure::Guest("the response was already taken")),
            None => future.subscribe().block(),
        }
    }
}

fn send(
    request: OutgoingRequest,
    options: Option<RequestOptions>,
) -> Result<IncomingResponse, Failure> {
    let future = outgoing_handler::handle(request, options)?;
    wait(&future)
}

/// Reads the response's body to its end, handing each piece to `each`,
/// then waits for its trailers (where a late failure shows up).
fn read_body(response: &IncomingResponse, mut each: impl FnMut(&[u8])) -> Result<(), Failure> {
    let body = response
        .consume()
        .map_err(|()| Failure::Guest("the response body was already taken"))?;
    let stream: InputStream = body
        .stream()
        .map_err(|()| Failure::Guest("the body stream was already taken"))?;
    loop {
        match stream.blocking_read(CHUNK) {
            Ok(piece) => each(&piece),
            Err(StreamError::Closed) => break,
            Err(e) => return Err(Failure::BodyRead(e.into())),
        }
    }
    drop(stream);
    let trailers = IncomingBody::finish(body);
    loop {
        match trailers.get() {
            Some(Ok(Ok(_))) => return Ok(()),
            Some(Ok(Err(code))) => return Err(Failure::Http(code)),
            Some(Err(())) => return Err(Failure::Guest("the trailers were already taken")),
            None => trailers.subscribe().block(),
        }
    }
}

/// Prints the status, then the body as text (with a newline after it when
/// it has none of its own).
fn print_response(response: &IncomingResponse) -> Result<(), Failure> {
    println!("status: {}", response.status());
    let mut body = Vec::new();
    read_body(response, |piece| body.extend_from_slice(piece))?;
    let text = String::from_utf8_lossy(&body);
    if text.is_empty() || text.ends_with('\n') {
        print!("{text}");
    } else {
        println!("{text}");
    }
    Ok(())
}

fn body_length(response: &IncomingResponse) -> Result<u64, Failure> {
    let mut length = 0;
    read_body(response, |piece| length += piece.len() as u64)?;
    Ok(length)
}

fn fetch(url: &str) -> Result<(), Failure> {
    print_response(&send(get(url)?, None)?)
}

fn no_authority() -> Result<(), Failure> {
    let request = OutgoingRequest::new(Fields::new());
    request
        .set_scheme(Some(&Scheme::Http))
        .map_err(|()| Failure::Refused("set-scheme"))?;
    request
        .set_path_with_query(Some("/"))
        .map_err(|()| Failure::Refused("set-path-with-query"))?;
    print_response(&send(request, None)?)
}

fn authority(authority: &str, scheme: Option<&str>) -> Result<(), Failure> {
    let target = Target {
        scheme: scheme_named(scheme.unwrap_or("http")),
        authority: authority.to_owned(),
        path_with_query: "/".to_owned(),
    };
    print_response(&send(request(&target, Method::Get, Fields::new())?, None)?)
}

fn host_header(url: &str, value: &str) -> Result<(), Failure> {
    let headers = Fields::new();
    if let Err(e) = headers.append("host", value.as_bytes()) {
        println!("header refused: {e:?}");
    }
    let request = request(&parse_url(url)?, Method::Get, headers)?;
    print_response(&send(request, None)?)
}

fn post(url: &str, bytes: u64) -> Result<(), Failure> {
    let request = request(&parse_url(url)?, Method::Post, Fields::new())?;
    let body = request
        .body()
        .map_err(|()| Failure::Guest("the request body was already taken"))?;
    // Handed over before the body is written: the host reads the body
    // while it sends the request, so a big one never waits on a full pipe.
    let future = outgoing_handler::handle(request, None)?;
    let stream = body
        .write()
        .map_err(|()| Failure::Guest("the body stream was already taken"))?;
    write_body(&stream, bytes)?;
    drop(stream);
    OutgoingBody::finish(body, None)?;
    println!("sent {bytes}");
    let response = wait(&future)?;
    println!("status: {}", response.status());
    println!("received {}", body_length(&response)?);
    Ok(())
}

/// A guest that dies in the middle of an upload: the body is handed over
/// but never finished, and the guest traps once the server has answered.
/// The server must see the upload cut off, never a whole (shorter) body.
fn post_then_trap(url: &str, bytes: u64) -> Result<(), Failure> {
    let request = request(&parse_url(url)?, Method::Post, Fields::new())?;
    let body = request
        .body()
        .map_err(|()| Failure::Guest("the request body was already taken"))?;
    let future = outgoing_handler::handle(request, None)?;
    let stream = body
        .write()
        .map_err(|()| Failure::Guest("the body stream was already taken"))?;
    write_body(&stream, bytes)?;
    println!("sent {bytes}");
    let response = wait(&future)?;
    println!("status: {}", response.status());
    let _ = std::io::stdout().flush();
    // The body and its stream are still open: the trap ends the guest
    // with its upload unfinished.
    std::process::abort()
}

/// Writes `total` bytes of the a-to-z pattern, 64 KiB at a time, each
/// piece as fast as the stream's `check-write` lets it in.
fn write_body(stream: &OutputStream, total: u64) -> Result<(), Failure> {
    let mut sent = 0u64;
    let failed = |sent: u64| {
        move |e: StreamError| Failure::BodyWrite {
            sent,
            cause: e.into(),
        }
    };
    while sent < total {
        let len = CHUNK.min(total - sent);
        let chunk: Vec<u8> = (sent..sent + len).map(|i| b'a' + (i % 26) as u8).collect();
        let mut rest = &chunk[..];
        while !rest.is_empty() {
            let permit = stream.check_write().map_err(failed(sent))?;
            if permit == 0 {
                stream.subscribe().block();
                continue;
            }
            let (now, later) = rest.split_at(rest.len().min(permit as usize));
            stream.write(now).map_err(failed(sent))?;
            sent += now.len() as u64;
            rest = later;
        }
        stream.flush().map_err(failed(sent))?;
    }
    stream.blocking_flush().map_err(failed(sent))?;
    Ok(())
}

fn flood(n: u64, url: &str) -> Result<(), Failure> {
    let target = parse_url(url)?;
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut started = Vec::new();
    for _ in 0..n {
        let request = request(&target, Method::Get, Fields::new())?;
        match outgoing_handler::handle(request, None) {
            Ok(future) => started.push(future),
            Err(code) => *errors.entry(format!("{code:?}")).or_default() += 1,
        }
    }
    let mut ok = 0u64;
    for future in &started {
        match wait(future) {
            Ok(_response) => ok += 1,
            Err(Failure::Http(code)) => *errors.entry(format!("{code:?}")).or_default() += 1,
            Err(other) => return Err(other),
        }
    }
    println!("ok {ok}");
    for (error, count) in errors {
        println!("err {error} x{count}");
    }
    Ok(())
}

fn timeouts(
    url: &str,
    connect: &str,
    first_byte: Option<&str>,
    between_bytes: Option<&str>,
) -> Result<(), Failure> {
    let millis = |text: Option<&str>| -> Result<Option<u64>, Failure> {
        match text {
            None => Err(Failure::Usage("timeouts wants three durations".into())),
            Some("-") => Ok(None),
            Some(text) => Ok(Some(number(text)?.saturating_mul(1_000_000))),
        }
    };
    let (connect, first_byte, between_bytes) = (
        millis(Some(connect))?,
        millis(first_byte)?,
        millis(between_bytes)?,
    );
    let options = RequestOptions::new();
    if connect.is_some() && options.set_connect_timeout(connect).is_err() {
        println!("option refused: connect");
    }
    if first_byte.is_some() && options.set_first_byte_timeout(first_byte).is_err() {
        println!("option refused: first-byte");
    }
    if between_bytes.is_some() && options.set_between_bytes_timeout(between_bytes).is_err() {
        println!("option refused: between-bytes");
    }
    let response = send(get(url)?, Some(options))?;
    println!("status: {}", response.status());
    println!("received {}", body_length(&response)?);
    Ok(())
}

/// Requests the host refuses, each to another port (so that each denial is
/// the first of its kind) with a path of `bytes` bytes.
fn denied_paths(n: u64, bytes: u64) -> Result<(), Failure> {
    let path = format!("/{}", "a".repeat(bytes.saturating_sub(1) as usize));
    let mut denied = 0;
    for port in 1..=n {
        let target = Target {
            scheme: Scheme::Http,
            authority: format!("192.0.2.1:{port}"),
            path_with_query: path.clone(),
        };
        if let Err(Failure::Http(ErrorCode::HttpRequestDenied)) =
            send(request(&target, Method::Get, Fields::new())?, None)
        {
            denied += 1;
        }
    }
    println!("denied {denied}");
    let _ = std::io::stdout().flush();
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
    Ok(())
}

fn sequential(n: u64, url: &str) -> Result<(), Failure> {
    let target = parse_url(url)?;
    for _ in 0..n {
        let response = send(request(&target, Method::Get, Fields::new())?, None)?;
        body_length(&response)?;
    }
    println!("ok {n}");
    Ok(())
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
/// `needle_x` (hex). Compared byte by byte through the XOR, so that the
/// needle is never built in memory.
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
fn send_with(method: &str, url: &str, rest: &[String]) -> Result<(), Failure> {
    let mut headers = Vec::new();
    let mut body = None;
    let mut scan = None;
    let mut follow = false;
    for arg in rest {
        if let Some(header) = arg.strip_prefix("h:") {
            let (name, value) = header
                .split_once('=')
                .ok_or_else(|| Failure::Usage(format!("{arg:?}: h:NAME=VALUE")))?;
            headers.push((expanded(name), expanded(value)));
        } else if let Some(text) = arg.strip_prefix("body:") {
            body = Some(expanded(text));
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
        let response = send_once(method, &url, &headers, body.as_deref())?;
        let location = response
            .headers()
            .get("location")
            .first()
            .map(|l| String::from_utf8_lossy(l).into_owned());
        match location {
            Some(next) if follow && (300..400).contains(&response.status()) => {
                println!("redirected: {}", response.status());
                follow = false;
                url = next;
            }
            _ => break response,
        }
    };
    println!("status: {}", response.status());
    for (name, value) in response.headers().entries() {
        println!("header: {name}: {}", String::from_utf8_lossy(&value));
    }
    let mut text = Vec::new();
    read_body(&response, |piece| text.extend_from_slice(piece))?;
    println!("body: {}", String::from_utf8_lossy(&text));
    if let Some(hex) = scan {
        let found = in_memory(&hex)?;
        println!("in memory: {}", if found { "yes" } else { "no" });
        if found {
            exit(5);
        }
    }
    Ok(())
}

/// One request of `send`, its body written in 7-byte pieces.
fn send_once(
    method: &str,
    url: &str,
    headers: &[(String, String)],
    body: Option<&str>,
) -> Result<IncomingResponse, Failure> {
    let fields = Fields::new();
    for (name, value) in headers {
        fields
            .append(name, value.as_bytes())
            .map_err(|_| Failure::Refused("fields.append"))?;
    }
    let method = match method {
        "GET" => Method::Get,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        other => Method::Other(expanded(other)),
    };
    let request = request(&parse_url(url)?, method, fields)?;
    let outgoing = request
        .body()
        .map_err(|()| Failure::Guest("the request body was already taken"))?;
    let future = outgoing_handler::handle(request, None)?;
    let stream = outgoing
        .write()
        .map_err(|()| Failure::Guest("the body stream was already taken"))?;
    let mut sent = 0u64;
    for piece in body.unwrap_or("").as_bytes().chunks(7) {
        stream
            .blocking_write_and_flush(piece)
            .map_err(|e| Failure::BodyWrite {
                sent,
                cause: e.into(),
            })?;
        sent += piece.len() as u64;
    }
    drop(stream);
    // A body the host refused fails here or in the response.
    let finished = OutgoingBody::finish(outgoing, None);
    let response = wait(&future)?;
    finished?;
    Ok(response)
}

fn headers(url: &str) -> Result<(), Failure> {
    let response = send(get(url)?, None)?;
    let bytes: usize = response
        .headers()
        .entries()
        .iter()
        .map(|(name, value)| name.len() + value.len())
        .sum();
    println!("status: {}", response.status());
    println!("header-bytes: {bytes}");
    Ok(())
}

/// Many requests that are never sent, each holding a body filled as far
/// as its stream takes without waiting: what the host holds for them is
/// all the guest's doing, and nothing is judged (nothing is sent).
fn hold_bodies(n: u64) -> Result<(), Failure> {
    let target = parse_url("http://127.0.0.1:9/")?;
    let mut held = Vec::new();
    let mut bytes = 0u64;
    let mut refused = None;
    let chunk = vec![b'x'; CHUNK as usize];
    for i in 0..n {
        let request = request(&target, Method::Post, Fields::new())?;
        let Ok(body) = request.body() else {
            refused = Some((i, "body".to_owned()));
            break;
        };
        let stream = body
            .write()
            .map_err(|()| Failure::Guest("the body stream was already taken"))?;
        loop {
            match stream.check_write() {
                Ok(0) => break,
                Ok(permit) => {
                    let len = (permit as usize).min(chunk.len());
                    if let Err(e) = stream.write(&chunk[..len]) {
                        refused = Some((i, format!("{:?}", StreamFailure::from(e))));
                        break;
                    }
                    bytes += len as u64;
                }
                Err(e) => {
                    refused = Some((i, format!("{:?}", StreamFailure::from(e))));
                    break;
                }
            }
        }
        // The stream first: a body is dropped only after its stream.
        held.push((stream, body, request));
        if refused.is_some() {
            break;
        }
    }
    println!("held {} bodies, {bytes} bytes", held.len());
    if let Some((at, what)) = refused {
        println!("refused at {at}: {what}");
    }
    Ok(())
}

/// Many fields, each filled with headers of 1 KiB values up to about
/// `bytes`, all kept.
fn hold_fields(n: u64, bytes: u64) -> Result<(), Failure> {
    let value = vec![b'v'; 1024];
    let mut held = Vec::new();
    let mut total = 0u64;
    for i in 0..n {
        let fields = Fields::new();
        let mut filled = 0u64;
        let mut j = 0u64;
        while filled < bytes {
            let name = format!("x-{j}");
            if let Err(e) = fields.append(&name, &value) {
                println!("held {} fields, {total} bytes", held.len());
                println!("refused at {i}: {e:?}");
                return Ok(());
            }
            filled += (name.len() + value.len()) as u64;
            j += 1;
        }
        total += filled;
        held.push(fields);
    }
    println!("held {} fields, {total} bytes", held.len());
    Ok(())
}

/// Many responses whose bodies are never read, all kept.
fn hold_responses(n: u64, url: &str) -> Result<(), Failure> {
    let target = parse_url(url)?;
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut started = Vec::new();
    for _ in 0..n {
        let request = request(&target, Method::Get, Fields::new())?;
        match outgoing_handler::handle(request, None) {
            Ok(future) => started.push(future),
            Err(code) => *errors.entry(format!("{code:?}")).or_default() += 1,
        }
    }
    let mut held = Vec::new();
    for future in &started {
        match wait(future) {
            Ok(response) => held.push(response),
            Err(Failure::Http(code)) => *errors.entry(format!("{code:?}")).or_default() += 1,
            Err(other) => return Err(other),
        }
    }
    println!("held {} responses", held.len());
    for (error, count) in errors {
        println!("err {error} x{count}");
    }
    Ok(())
}

fn fetch_all(urls: &[String]) -> Result<(), Failure> {
    for url in urls {
        match send(get(url)?, None).and_then(|response| {
            let status = response.status();
            body_length(&response)?;
            Ok(status)
        }) {
            Ok(status) => println!("{url}: status: {status}"),
            Err(Failure::Http(code)) => println!("{url}: error: {code:?}"),
            Err(other) => return Err(other),
        }
    }
    Ok(())
}
