//! A curl-like client on wstd's wasi:http 0.2 `Client`: the guest opens no
//! socket, the host makes the request (and checks it against the grants).
//!
//! ```text
//! moat run --allow-net=example.com:443 wstd-fetch.wasm https://example.com/
//! moat run --allow-net=127.0.0.1:8080 wstd-fetch.wasm --follow http://127.0.0.1:8080/old
//! echo '{"a":1}' | moat run --allow-net=127.0.0.1:8080 wstd-fetch.wasm \
//!     --method POST --data-stdin --header 'Content-Type: application/json' \
//!     http://127.0.0.1:8080/submit
//! ```
//!
//! Usage: `wstd-fetch [--method M] [--data-stdin] [--header 'Name: value']...
//! [--repeat N] [--follow] URL`
//!
//! - `status: <code>` goes to stderr for every response, then the body goes
//!   to stdout byte for byte, as it arrives.
//! - `--data-stdin` sends stdin as the request body, streamed a chunk at a
//!   time; with `--repeat` above 1 it is read in whole first, as it goes
//!   out more than once. A streamed body cannot follow a 307 or 308 (one
//!   that keeps the body): that redirect is an error, as in curl. wstd's
//!   `Client::send` hands over the response only once the request body is
//!   all sent, so a server that answers while it still reads (an echo)
//!   stalls this client once its answer fills the buffers in between:
//!   a few MB, depending on the sockets.
//! - `--repeat N` sends the same request N times, one after another, on one
//!   client (so the host can keep the connection alive); only the last body
//!   is written, and `fetched N` goes to stderr at the end.
//! - `--follow` follows up to 5 redirects (301, 302, 303, 307, 308 with a
//!   `Location`), printing `redirect: <absolute URL>` for each.
//!
//! Exit codes: 0 on success, 22 when the (last) status is 400 or more (as
//! `curl -f`), 1 on an error (`error: ...` on stderr, with the Debug form
//! of the wasi:http `error-code` when there is one), 2 on a usage error.

use url::Url;
use wstd::http::body::Bytes;
use wstd::http::body::util::Empty;
use wstd::http::{
    Body, BodyExt as _, Client, Error, ErrorCode, HeaderMap, HeaderName, HeaderValue, Method,
    Request, Response, StatusCode,
};
use wstd::io::{AsyncRead as _, AsyncWrite as _};

const USAGE: &str = "usage: wstd-fetch [--method M] [--data-stdin] [--header 'Name: value']... \
                     [--repeat N] [--follow] URL";

/// The most redirects `--follow` takes before giving up.
const MAX_REDIRECTS: usize = 5;

/// How much of stdin goes into one chunk of a streamed request body.
const STDIN_CHUNK: usize = 64 * 1024;

#[wstd::main]
async fn main() {
    let options = match Options::parse(std::env::args().skip(1)) {
        Ok(Parsed::Run(options)) => options,
        Ok(Parsed::Help) => {
            println!("{USAGE}");
            return;
        }
        Err(message) => {
            eprintln!("wstd-fetch: {message}\n{USAGE}");
            exit(2);
        }
    };
    match run(options).await {
        Ok(status) if status.as_u16() >= 400 => exit(22),
        Ok(_) => {}
        Err(err) => {
            eprintln!("error: {}", describe(&err));
            exit(1);
        }
    }
}

/// Ends the run with `code`. std's `ExitCode` cannot say 22: under WASI 0.2
/// its exit reports only success or failure (any other code becomes 1), so
/// this calls `wasi:cli/exit.exit-with-code` (WASI 0.2.12) itself.
fn exit(code: u8) -> ! {
    wasip2::cli::exit::exit_with_code(code);
    unreachable!("wasi:cli/exit returned")
}

/// The wasi:http error code when the error carries one (a refused request,
/// a failed connect, a timeout...), in its Debug form; else the whole chain
/// of messages.
fn describe(err: &Error) -> String {
    match err.downcast_ref::<ErrorCode>() {
        Some(code) => format!("{code:?}"),
        None => format!("{err:#}"),
    }
}

struct Options {
    method: Method,
    data_stdin: bool,
    headers: HeaderMap,
    repeat: u32,
    follow: bool,
    url: Url,
}

enum Parsed {
    Run(Options),
    Help,
}

impl Options {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Parsed, String> {
        let mut method = Method::GET;
        let mut data_stdin = false;
        let mut headers = HeaderMap::new();
        let mut repeat = 1;
        let mut follow = false;
        let mut url = None;

        while let Some(arg) = args.next() {
            let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
            match arg.as_str() {
                "-h" | "--help" => return Ok(Parsed::Help),
                "--method" => {
                    let m = value("--method")?;
                    method = Method::from_bytes(m.as_bytes())
                        .map_err(|_| format!("{m:?} is not an HTTP method"))?;
                }
                "--data-stdin" => data_stdin = true,
                "--header" => {
                    let (name, value) = parse_header(&value("--header")?)?;
                    headers.append(name, value);
                }
                "--repeat" => {
                    let n = value("--repeat")?;
                    repeat = n
                        .parse()
                        .ok()
                        .filter(|&n: &u32| n > 0)
                        .ok_or(format!("--repeat {n:?}: not a count of 1 or more"))?;
                }
                "--follow" => follow = true,
                flag if flag.starts_with('-') && flag.len() > 1 => {
                    return Err(format!("unknown option {flag}"));
                }
                _ if url.is_some() => return Err(format!("a second URL: {arg}")),
                _ => url = Some(parse_url(&arg)?),
            }
        }
        let url = url.ok_or("no URL")?;
        Ok(Parsed::Run(Options {
            method,
            data_stdin,
            headers,
            repeat,
            follow,
            url,
        }))
    }
}

/// `Name: value`, the value trimmed of the blanks around it, as curl does.
fn parse_header(text: &str) -> Result<(HeaderName, HeaderValue), String> {
    let (name, value) = text
        .split_once(':')
        .ok_or(format!("--header {text:?}: not 'Name: value'"))?;
    let name = HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|_| format!("--header {text:?}: bad header name"))?;
    let value = HeaderValue::from_str(value.trim())
        .map_err(|_| format!("--header {text:?}: bad header value"))?;
    Ok((name, value))
}

fn parse_url(text: &str) -> Result<Url, String> {
    let url = Url::parse(text).map_err(|e| format!("{text}: {e}"))?;
    check_scheme(url)
}

fn check_scheme(mut url: Url) -> Result<Url, String> {
    match url.scheme() {
        // The fragment is the client's business: it is never sent.
        "http" | "https" => {
            url.set_fragment(None);
            Ok(url)
        }
        _ => Err(format!("{url}: not an http(s) URL")),
    }
}

/// Where a request body comes from.
enum Payload {
    None,
    /// Stdin, streamed: can be sent once. `None` once taken.
    Stream(Option<Body>),
    /// Stdin read in whole, to be sent more than once.
    Buffered(Bytes),
}

impl Payload {
    /// The body for the next request, or `None` when a streamed stdin has
    /// already gone out with an earlier request.
    fn take(&mut self) -> Option<Body> {
        match self {
            Payload::None => Some(no_body()),
            Payload::Stream(body) => body.take(),
            Payload::Buffered(bytes) => Some(Body::from(bytes.clone())),
        }
    }
}

/// Makes the requests, writes the last body to stdout, and gives the last
/// status.
async fn run(options: Options) -> Result<StatusCode, Error> {
    let client = Client::new();
    let mut payload = if !options.data_stdin {
        Payload::None
    } else if options.repeat > 1 {
        // Sent N times, so it is kept: stdin is read in whole, once.
        let mut data = Vec::new();
        wstd::io::stdin().read_to_end(&mut data).await?;
        Payload::Buffered(Bytes::from(data))
    } else {
        Payload::Stream(Some(stdin_body()))
    };

    let mut status = StatusCode::OK;
    for round in 1..=options.repeat {
        let last = round == options.repeat;
        status = fetch(&client, &options, &mut payload, last).await?;
    }
    if options.repeat > 1 {
        eprintln!("fetched {}", options.repeat);
    }
    Ok(status)
}

/// One request, and the redirects after it with `--follow`. The final body
/// goes to stdout when `write` is set, and is read and dropped otherwise.
async fn fetch(
    client: &Client,
    options: &Options,
    payload: &mut Payload,
    write: bool,
) -> Result<StatusCode, Error> {
    let mut url = options.url.clone();
    let mut method = options.method.clone();
    let mut headers = options.headers.clone();
    let mut with_body = options.data_stdin;
    let mut hops = 0;

    loop {
        let body = if with_body {
            payload.take().ok_or_else(|| {
                Error::msg(format!(
                    "{url}: the redirect asks to send the body again, \
                     and stdin was streamed: it cannot be sent twice"
                ))
            })?
        } else {
            no_body()
        };
        let mut request = Request::builder()
            .method(method.clone())
            .uri(url.as_str())
            .body(body)
            .map_err(|e| Error::msg(format!("{url}: {e}")))?;
        *request.headers_mut() = headers.clone();

        let response = client.send(request).await?;
        let status = response.status();
        eprintln!("status: {}", status.as_u16());

        let next = if options.follow {
            redirect_target(&url, &response)?
        } else {
            None
        };
        let Some(next) = next else {
            let body = response.into_body();
            if write {
                copy_to_stdout(body).await?;
            } else {
                drain(body).await?;
            }
            return Ok(status);
        };

        if hops == MAX_REDIRECTS {
            return Err(Error::msg(format!(
                "{url}: more than {MAX_REDIRECTS} redirects"
            )));
        }
        hops += 1;
        eprintln!("redirect: {next}");
        // Read out, so the host can reuse the connection.
        drain(response.into_body()).await?;

        // 303 always, and 301/302 after a POST, turn into a GET without a
        // body (as browsers and curl do); 307 and 308 keep both.
        let to_get = match status.as_u16() {
            303 => method != Method::HEAD,
            301 | 302 => method == Method::POST,
            _ => false,
        };
        if to_get {
            method = Method::GET;
            with_body = false;
            for name in ["content-length", "content-type"] {
                headers.remove(name);
            }
        }
        // Credentials stay with the host they were given for.
        if next.origin() != url.origin() {
            for name in ["authorization", "cookie"] {
                headers.remove(name);
            }
        }
        url = next;
    }
}

/// The absolute URL a redirect points to, or `None` when the response is
/// not one (or has no `Location`: then it is the final response).
fn redirect_target(base: &Url, response: &Response<Body>) -> Result<Option<Url>, Error> {
    if !matches!(response.status().as_u16(), 301 | 302 | 303 | 307 | 308) {
        return Ok(None);
    }
    let Some(location) = response.headers().get("location") else {
        return Ok(None);
    };
    let location = location
        .to_str()
        .map_err(|_| Error::msg(format!("{base}: a Location that is not text")))?;
    let next = base
        .join(location)
        .map_err(|e| Error::msg(format!("{base}: Location {location:?}: {e}")))?;
    check_scheme(next).map(Some).map_err(Error::msg)
}

/// A request without a body. Not `Body::empty()`: wstd writes that one to
/// the outgoing body stream (zero bytes, but it asks the stream first), and
/// for a GET the host's HTTP client may already have closed that stream, as
/// it sends no body for one; the write then fails the whole request with
/// "connection reset", whatever the response. This body writes nothing and
/// only finishes the stream.
fn no_body() -> Body {
    Body::from_http_body(Empty::<Bytes>::new())
}

/// Stdin as a request body, read and sent a chunk at a time: the guest never
/// holds more than one chunk of it. (The response is not read meanwhile:
/// wstd's `Client::send` returns it only after the last chunk.)
fn stdin_body() -> Body {
    let input = wstd::io::stdin().into_inner();
    let chunks = futures_lite::stream::unfold(Some(input), |input| async move {
        let input = input?;
        let mut chunk = vec![0; STDIN_CHUNK];
        match input.read(&mut chunk).await {
            Ok(0) => None,
            Ok(n) => {
                chunk.truncate(n);
                Some((Ok(Bytes::from(chunk)), Some(input)))
            }
            // The error ends the body (and fails the request); nothing is
            // read after it.
            Err(e) => Some((Err(e), None)),
        }
    });
    Body::from_try_stream(chunks)
}

/// Writes the body to stdout as its frames arrive.
async fn copy_to_stdout(body: Body) -> Result<(), Error> {
    let mut stdout = wstd::io::stdout();
    let mut body = body.into_boxed_body();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            stdout.write_all(&data).await?;
        }
    }
    stdout.flush().await?;
    Ok(())
}

/// Reads the body to its end and drops it.
async fn drain(body: Body) -> Result<(), Error> {
    let mut body = body.into_boxed_body();
    while let Some(frame) = body.frame().await {
        frame?;
    }
    Ok(())
}
