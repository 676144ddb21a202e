//! Outgoing HTTP requests (wasi:http guests), under the run's policy and
//! bounds, with connections kept alive and reused.
//!
//! A request passes these steps, in this order; each one that refuses it
//! ends it before the next, and nothing touches the network before step 4:
//!
//! 1. Its URI's authority, as written, is the destination: an empty or
//!    missing one is refused, and so is one with user information
//!    (`user@host`): the `Host` header (HTTP/1.1) and `:authority`
//!    (HTTP/2) are the host and port as judged (lower case, no trailing
//!    dot, the port as a number, the scheme's own left out), never the
//!    authority as written. The `Host` header is never what is judged: the
//!    connection goes where the URI says. A request refused here, before
//!    its host could be judged, is on the audit trail too, with the
//!    authority as written.
//! 2. The host and port (the URI's port, or the scheme's: 80, 443) are
//!    judged as written against the connect grant and the deny entries
//!    ([`Run::admit_host`]). No name has been looked up.
//! 3. The run's bound on requests in flight ([`Limits::max_http_requests`](crate::net::Limits::max_http_requests)).
//! 4. A kept-alive connection to the same scheme, host (as judged: case
//!    and a trailing dot do not count) and port, when one is idle
//!    ([`pool`]); otherwise a new one: a socket slot (the
//!    run's `--max-sockets` counts HTTP connections too), the name resolved
//!    once by the run's resolver with every address judged by the deny
//!    lists ([`Run::addresses`]), a TCP connect to an address that passed,
//!    and for `https` a TLS handshake with the run's roots (`--ca-file`),
//!    verified against the host as written, which is also the SNI; HTTP/2
//!    when the server offers it over ALPN, HTTP/1.1 otherwise.
//! 5. Time: the connect, the wait for the response's head and each wait
//!    between body bytes are bounded by the run's caps; a guest may ask for
//!    less, never more.
//!
//! A refused request's body is read to its end and dropped, so that a
//! guest writing it sees the refusal when it asks for the response, not a
//! broken stream. Bodies are streamed both ways; the host holds at most
//! hyper's buffers per connection ([`CONNECTION_BYTES`]), what an HTTP/2
//! connection's window lets its peer send before the guest reads
//! ([`H2_CONNECTION_WINDOW`]) and what each HTTP/2 stream queues of its
//! request body ([`H2_SEND_BUFFER`]), all paid from the run's host memory.

mod body;
mod error;
mod exchange;
mod pool;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Request, Response, Uri};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::either::Either;
use tokio_util::sync::CancellationToken;

use super::budget::Charge;
use super::error::NetError;
use super::io::TlsStream;
use super::limits::DEFAULT_TLS_HANDSHAKE_TIMEOUT;
use super::limits::SocketSlot;
use super::run::{Admitted, Run};
use super::secrets::{Destination, Guarded, Redactor, SecretMisplaced};
use super::tasks::Tasks;
use super::tcp::{self, ConnectOptions};
use super::tls::{self, TlsClientOptions, TlsContext};
use crate::audit::{HttpEnd, HttpLink, Operation};
use moat_policy::policy::Host;
use moat_policy::setting::{Setting, Worded as _};

pub(crate) use body::ChargedBody;
pub use body::{Abandoned, ResponseBody, Unfinished, request_cut_short};
pub(crate) use body::{Declared, request_longer_than_declared};
pub use error::{HttpError, HttpRequestOptions};
use exchange::{Exchange, Made};
use pool::{Key, Pool, Sender};

/// What one kept-alive connection costs the host at most, paid from the
/// run's host memory while it is open: hyper's read buffer (bounded by
/// [`Limits::max_http_header_size`](crate::net::Limits::max_http_header_size), added per connection) and its write
/// buffer (hyper queues up to 8 KiB of headers plus one body chunk, and
/// the guest's chunks are at most 64 KiB, the outgoing chunk size moat
/// gives wasmtime-wasi-http, each already paid by the body that holds it);
/// TLS's record buffers add 2 × 16 KiB. 64 KiB plus the header bound is
/// the sum, rounded up.
pub(crate) const CONNECTION_BYTES: usize = 64 << 10;

/// Bytes one HTTP/2 stream queues from its request body before it waits
/// for the peer's window: 64 KiB, HTTP/2's initial window; hyper's default
/// (1 MiB a stream) would let 64 requests in flight on one connection
/// hold the whole host-memory budget. Each request sent over HTTP/2 pays
/// it from the run's host memory until its response ends.
pub(crate) const H2_SEND_BUFFER: usize = 64 << 10;

/// Response body bytes one HTTP/2 stream may receive before the guest
/// reads them (its flow-control window): 256 KiB, four of HTTP/2's
/// initial windows, which keeps a download at a few MB/s over a 50 ms
/// round trip. hyper's default (2 MiB a stream, 5 MiB a connection) was
/// held, uncharged, by every response a guest left unread.
pub(crate) const H2_RECEIVE_WINDOW: u32 = 256 << 10;

/// Response body bytes one HTTP/2 connection may receive before the guest
/// reads them, all its streams together (the connection's window): 512
/// KiB, paid from the run's host memory for as long as the connection is
/// open ([`CONNECTION_BYTES`] and this). Unread data of many streams never
/// passes it: the peer may send no more until the guest reads.
pub(crate) const H2_CONNECTION_WINDOW: u32 = 512 << 10;

/// The smallest response-header bound hyper accepts (its minimum read
/// buffer); a smaller setting is raised to it.
pub(crate) const MIN_HTTP_HEADER_SIZE: usize = 8 << 10;

/// How long an idle kept-alive connection stays open for the next request
/// to the same authority: 30 s, longer than a program's pause between
/// requests to one service and shorter than most servers' own idle
/// timeouts (nginx 75 s, Apache 5 s is the one that closes first, and a
/// closed pooled connection is simply not reused). Until then it counts
/// against `--max-sockets`; a new connection that finds the run at its
/// socket cap closes the oldest idle one first.
pub(crate) const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Most kept-alive connections to one authority: 16, more than a program
/// keeps busy to one service at once (browsers use 6 per host). A
/// connection finished past it is closed, not kept.
pub(crate) const POOL_MAX_PER_AUTHORITY: usize = 16;

/// The error of a [`RequestBody`]: whatever the guest's side failed with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body of a request: the guest's, streamed.
pub type RequestBody = UnsyncBoxBody<Bytes, BoxError>;

type B = RequestBody;

/// What it takes to send a request again: its head, kept only for an
/// idempotent method with an empty body (so nothing of the guest's is
/// lost or sent twice).
struct Replay {
    method: http::Method,
    uri: http::Uri,
    version: http::Version,
    headers: http::HeaderMap,
}

impl Replay {
    fn of(request: &Request<B>) -> Option<Replay> {
        use http_body::Body as _;
        let idempotent = matches!(
            *request.method(),
            http::Method::GET
                | http::Method::HEAD
                | http::Method::OPTIONS
                | http::Method::TRACE
                | http::Method::PUT
                | http::Method::DELETE
        );
        let empty = request.body().is_end_stream() || request.body().size_hint().exact() == Some(0);
        (idempotent && empty).then(|| Replay {
            method: request.method().clone(),
            uri: request.uri().clone(),
            version: request.version(),
            headers: request.headers().clone(),
        })
    }

    fn request(self) -> Request<B> {
        let mut request = Request::new(B::default());
        *request.method_mut() = self.method;
        *request.uri_mut() = self.uri;
        *request.version_mut() = self.version;
        *request.headers_mut() = self.headers;
        request
    }
}

/// A run's HTTP client: its policy, bounds and kept-alive connections.
/// Cloning is cheap and shares all of it.
#[derive(Clone)]
pub struct HttpClient {
    inner: Arc<Inner>,
}

struct Inner {
    run: Arc<Run>,
    tls: Arc<TlsContext>,
    tasks: Tasks,
    /// Cancelled when the run ends: kept-alive connections, drains and
    /// the pool's sweep stop at once (nothing of theirs needs to linger:
    /// the guest that would read or write them is gone).
    closing: CancellationToken,
    in_flight: Arc<Semaphore>,
    pool: Pool<B>,
    /// The run's requests and connections so far, which number them on
    /// the audit trail.
    requests: AtomicU64,
    connections: AtomicU64,
}

/// What the peer reads as the host it is asked for (HTTP/1.1's `Host`,
/// which wasi:http sets from the authority and a guest may not, and
/// HTTP/2's `:authority`): the host and port as judged, never the
/// authority as written (`127.0.0.1:+28180`, `LOCALHOST.`), which a server
/// or a front proxy may read otherwise. The records keep what the guest
/// wrote.
fn as_judged(parts: &mut http::request::Parts, target: &Target) {
    let judged = target.authority();
    if let Ok(authority) = judged.parse::<Authority>() {
        let mut uri = parts.uri.clone().into_parts();
        uri.authority = Some(authority);
        if let Ok(uri) = Uri::from_parts(uri) {
            parts.uri = uri;
        }
    }
    if let Ok(value) = http::HeaderValue::from_str(&judged) {
        parts.headers.insert(http::header::HOST, value);
    }
}

/// A request's times, each the guest's choice capped by the run's bound.
struct Times {
    connect: Duration,
    first_byte: Duration,
    between_bytes: Duration,
}

impl Times {
    fn of(options: &HttpRequestOptions, limits: &super::Limits) -> Times {
        Times {
            connect: capped(options.connect_timeout, limits.http_connect_timeout),
            first_byte: capped(options.first_byte_timeout, limits.http_first_byte_timeout),
            between_bytes: capped(
                options.between_bytes_timeout,
                limits.http_between_bytes_timeout,
            ),
        }
    }
}

/// A request sent and its response's head come: the connection it went
/// on (`fresh` if made for it), and the HTTP/2 stream's charge.
struct Delivered {
    sender: Sender<B>,
    made: Arc<Made>,
    response: Response<hyper::body::Incoming>,
    fresh: bool,
    stream: Option<Charge>,
}

/// A connection made for one request: what asking for it needs.
struct Target {
    https: bool,
    host: Host,
    port: u16,
    key: Key,
    /// The policy's yes, for the audit trail.
    admitted: Admitted,
}

impl Target {
    /// The host and port as judged, the scheme's own port left out:
    /// `example.com`, `127.0.0.1:8080`, `[::1]:8443`.
    fn authority(&self) -> String {
        let default = if self.https { 443 } else { 80 };
        if self.port == default {
            self.host.to_string()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl HttpClient {
    pub(crate) fn new(run: Arc<Run>, tls: Arc<TlsContext>, tasks: Tasks) -> HttpClient {
        let in_flight = Arc::new(Semaphore::new(run.limits.max_http_requests.max(1) as usize));
        HttpClient {
            inner: Arc::new(Inner {
                run,
                tls,
                tasks,
                closing: CancellationToken::new(),
                in_flight,
                pool: Pool::new(),
                requests: AtomicU64::new(0),
                connections: AtomicU64::new(0),
            }),
        }
    }

    /// The run's host-memory budget, which the client's connections and
    /// the guest's wasi:http objects are paid from.
    pub(crate) fn budget(&self) -> &Arc<super::budget::Budget> {
        &self.inner.run.budget
    }

    /// The words the run's refusals are shown in.
    pub(crate) fn words(&self) -> moat_policy::setting::Spelling {
        self.inner.run.words()
    }

    /// Closes the kept-alive connections and stops every task of this
    /// client: the run is over.
    pub(crate) fn close(&self) {
        self.inner.closing.cancel();
    }

    /// Runs `task` on the run's tasks until it ends or the client closes.
    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let closing = self.inner.closing.clone();
        self.inner.tasks.spawn(async move {
            tokio::select! {
                () = closing.cancelled() => {}
                () = task => {}
            }
        });
    }

    /// Sends `request` and returns the response once its head arrived;
    /// the body streams after. See the module doc for what is checked.
    ///
    /// # Errors
    /// [`HttpError`]: a refusal before anything was sent, or what the
    /// network did.
    ///
    /// # Cancel safety
    /// Dropping the future drops the request; a connection being made is
    /// closed, a kept-alive one is closed too if the request was under way.
    pub async fn send(
        &self,
        request: Request<B>,
        options: HttpRequestOptions,
    ) -> Result<Response<ResponseBody>, HttpError> {
        let (mut parts, body) = request.into_parts();
        let noted = match self.note(&parts) {
            Ok(noted) => noted,
            Err(e) => {
                self.drain(body);
                return Err(e);
            }
        };
        let link = noted.as_ref().map(|(link, _)| link);
        let (target, permit) = match self.admit(&mut parts, link) {
            Ok(ok) => ok,
            Err(refused) => {
                self.drain(body);
                return Err(refused);
            }
        };
        as_judged(&mut parts, &target);
        let mut exchange = Exchange::new(
            Arc::clone(&self.inner.run),
            noted.map(|(link, charge)| (link.request, charge)),
            &target.host,
            target.port,
        );
        let body = exchange.counting(self.guarded(body, &target));
        let times = Times::of(&options, &self.inner.run.limits);
        let request = Request::from_parts(parts, body);
        let delivered = match self.deliver(request, &target, &times, &mut exchange).await {
            Ok(delivered) => delivered,
            Err(e) => {
                exchange.end(HttpEnd::Failed, Some(&e));
                return Err(e);
            }
        };
        Ok(self.respond(delivered, target, &times, permit, exchange))
    }

    /// The request's body as it goes out: with secrets in the run, a
    /// placeholder in it is refused as one in the head is, with its
    /// record, and the request is cut off there.
    fn guarded(&self, body: B, target: &Target) -> B {
        let secrets = &self.inner.run.secrets;
        if secrets.is_empty() {
            return body;
        }
        let run = Arc::clone(&self.inner.run);
        let (host, port) = (target.host.clone(), target.port);
        let http = target.admitted.http.clone();
        let report = move |misplaced: &SecretMisplaced| {
            let refused = NetError::SecretMisplaced(Box::new(misplaced.clone()));
            run.refused_for(
                Operation::HttpRequest,
                &host,
                Some(port),
                http.as_ref(),
                refused,
            );
        };
        B::new(Guarded::new(body, secrets.clone(), report))
    }

    /// The response the guest gets once its head arrived: secrets' values
    /// redacted from its head and body, its connection handed back to the
    /// pool, its body bounded by the between-bytes timeout and holding the
    /// request's permit until it ends.
    fn respond(
        &self,
        delivered: Delivered,
        target: Target,
        times: &Times,
        permit: OwnedSemaphorePermit,
        mut exchange: Exchange,
    ) -> Response<ResponseBody> {
        let Delivered {
            sender,
            made,
            mut response,
            fresh,
            stream,
        } = delivered;
        exchange.status(response.status().as_u16());
        let secrets = &self.inner.run.secrets;
        secrets.redact_head(response.headers_mut());
        // The connection is busy until this body ends; the pool hands it
        // out again only once hyper says it is ready.
        self.inner.pool.put(
            target.key,
            sender,
            made,
            &self.inner.tasks,
            &self.inner.closing,
            fresh,
        );
        tracing::debug!(
            target: "moat::http",
            host = %target.host, port = target.port, https = target.https,
            status = response.status().as_u16(),
            "response"
        );
        response.map(|incoming| {
            ResponseBody::new(
                incoming,
                times.between_bytes,
                Setting::HttpBetweenBytesTimeout,
                permit,
                stream,
                exchange,
                (!secrets.is_empty()).then(|| Redactor::new(secrets.clone())),
            )
        })
    }

    /// With an audit trail, the request's facts for its records: a copy of
    /// its method, authority and path, held until it ends and paid from
    /// the run's host memory. `None` without a trail.
    fn note(&self, parts: &http::request::Parts) -> Result<Option<(HttpLink, Charge)>, HttpError> {
        if !self.inner.run.audit.is_on() {
            return Ok(None);
        }
        let id = self.inner.requests.fetch_add(1, Ordering::Relaxed) + 1;
        let request = exchange::request_of(parts, id);
        let charge = self
            .inner
            .run
            .budget
            .charge(request.size(), "an HTTP request's audit record")
            .map_err(HttpError::from_net)?;
        Ok(Some((
            HttpLink {
                request: Arc::new(request),
                connection: None,
            },
            charge,
        )))
    }

    /// Sends `request` to `target` and waits for its response's head: on
    /// a kept-alive connection if one is free, else on a new one.
    ///
    /// A kept-alive connection the server closed while it sat idle (its
    /// own idle timeout may be shorter than the pool's) fails the request
    /// before a byte of it is sent; hyper then gives the request back, and
    /// it goes on a new connection. If the close crossed the request on the
    /// wire instead (sent, no byte of an answer), only a request that may
    /// be repeated goes again, once: an idempotent method with no body (RFC
    /// 9110, 9.2.2). Any other request that was sent is never sent twice.
    ///
    /// One piece: the loop owns the request from one attempt to the next
    /// (hyper gives it back when a send fails), and each arm decides
    /// whether it goes again.
    async fn deliver(
        &self,
        mut request: Request<B>,
        target: &Target,
        times: &Times,
        exchange: &mut Exchange,
    ) -> Result<Delivered, HttpError> {
        let uri = request.uri().clone();
        let host_header = request.headers().get(http::header::HOST).cloned();
        let mut again = Replay::of(&request);
        let mut reused = self.inner.pool.checkout(&target.key);
        let mut stream = None;
        loop {
            let (mut sender, made, was_pooled) = match reused.take() {
                Some((sender, made)) => (sender, made, true),
                None => match tokio::time::timeout(times.connect, self.connect(target)).await {
                    Ok(Ok((sender, made))) => (sender, made, false),
                    Ok(Err(e)) => {
                        self.drain(request.into_body());
                        return Err(e);
                    }
                    Err(_) => {
                        self.drain(request.into_body());
                        return Err(HttpError::ConnectTimeout {
                            after: times.connect,
                            setting: Setting::HttpConnectTimeout,
                        });
                    }
                },
            };
            exchange.on(&made, was_pooled);
            if let Err(e) = self.fit(
                &sender,
                &mut request,
                &uri,
                host_header.as_ref(),
                &mut stream,
            ) {
                self.drain(request.into_body());
                return Err(e);
            }
            let sent = match &mut sender {
                Sender::H1(s) => {
                    tokio::time::timeout(times.first_byte, s.try_send_request(request)).await
                }
                Sender::H2(s) => {
                    tokio::time::timeout(times.first_byte, s.try_send_request(request)).await
                }
            };
            match sent {
                Err(_) => {
                    return Err(HttpError::FirstByteTimeout {
                        after: times.first_byte,
                        setting: Setting::HttpFirstByteTimeout,
                    });
                }
                Ok(Ok(response)) => {
                    return Ok(Delivered {
                        sender,
                        made,
                        response,
                        fresh: !was_pooled,
                        stream,
                    });
                }
                Ok(Err(mut failed)) => match failed.take_message() {
                    Some(unsent) if was_pooled => {
                        tracing::debug!(
                            target: "moat::http",
                            error = %failed.error(),
                            "a kept-alive connection was closed: sending on a new one"
                        );
                        request = unsent;
                    }
                    None if was_pooled => match again.take() {
                        Some(replay) => {
                            tracing::debug!(
                                target: "moat::http",
                                error = %failed.error(),
                                "a kept-alive connection closed under an idempotent request: sending it again on a new one"
                            );
                            request = replay.request();
                        }
                        None => return Err(self.hyper_error(failed.into_error())),
                    },
                    _ => return Err(self.hyper_error(failed.into_error())),
                },
            }
        }
    }

    /// Fits `request` to the connection `sender` is on. HTTP/1.1's request
    /// line carries the path only (origin form: the authority chose the
    /// connection and is the Host header wasi:http sets); HTTP/2 takes the
    /// scheme and authority as pseudo-headers from the URI itself, and
    /// each stream may queue [`H2_SEND_BUFFER`] of its body, paid once into
    /// `stream` from the run's host memory.
    fn fit(
        &self,
        sender: &Sender<B>,
        request: &mut Request<B>,
        uri: &Uri,
        host: Option<&http::HeaderValue>,
        stream: &mut Option<Charge>,
    ) -> Result<(), HttpError> {
        match sender {
            Sender::H1(_) => {
                *request.uri_mut() = origin_form(uri);
                if let Some(host) = host {
                    request
                        .headers_mut()
                        .insert(http::header::HOST, host.clone());
                }
            }
            Sender::H2(_) => {
                *request.uri_mut() = uri.clone();
                request.headers_mut().remove(http::header::HOST);
                if stream.is_none() {
                    *stream = Some(
                        self.inner
                            .run
                            .budget
                            .charge(H2_SEND_BUFFER, "an HTTP/2 request")
                            .map_err(HttpError::from_net)?,
                    );
                }
            }
        }
        Ok(())
    }

    /// Step 1 alone, for a binding that sees the authority before the
    /// request is built (wasi:http 0.2's `outgoing-request`): a request
    /// that names no host, or an empty one, is refused, and the refusal
    /// recorded.
    ///
    /// # Errors
    /// [`HttpError::NoAuthority`].
    pub fn check_authority(&self, authority: Option<&str>) -> Result<(), HttpError> {
        match authority {
            None => Err(self.refused_unjudged("", None, HttpError::NoAuthority("no"))),
            Some("") => Err(self.refused_unjudged("", None, HttpError::NoAuthority("an empty"))),
            Some(_) => Ok(()),
        }
    }

    /// Records a request refused before its host could be judged (no
    /// authority, another scheme, a host or port that is not one), with
    /// the authority as written; returns the refusal.
    fn refused_unjudged(
        &self,
        written: &str,
        http: Option<&HttpLink>,
        error: HttpError,
    ) -> HttpError {
        tracing::debug!(target: "moat::http", authority = written, %error, "refused");
        self.inner.run.refused_unjudged(
            Operation::HttpRequest,
            written,
            http,
            &error.worded(self.inner.run.words()).to_string(),
        );
        error
    }

    /// Steps 1 to 3 of the module doc: the authority as written, the
    /// policy, the run's secrets placed in the head ([`Secrets::place`]),
    /// the bound on requests in flight.
    fn admit(
        &self,
        head: &mut http::request::Parts,
        http: Option<&HttpLink>,
    ) -> Result<(Target, OwnedSemaphorePermit), HttpError> {
        let (https, host, port) = self.as_written(&head.uri, http)?;
        let run = &self.inner.run;
        let admitted = run
            .admit_host_for(Operation::HttpRequest, host, port, http)
            .map_err(|e| match e {
                NetError::Denied(denied) => HttpError::Denied(denied),
                other => HttpError::BadAuthority {
                    authority: head
                        .uri
                        .authority()
                        .map_or("", Authority::as_str)
                        .to_owned(),
                    reason: other.to_string(),
                },
            })?;
        self.place_secrets(head, https, &admitted, port, http)?;
        let permit = self.in_flight(&admitted, port, http)?;
        // The request is recorded as it goes; the connection it goes on,
        // when a new one is made, has its own record (a connect).
        run.allowed(&admitted, None, None)
            .map_err(HttpError::from_net)?;
        let key = Key::new(https, &admitted.host, port);
        Ok((
            Target {
                https,
                host: admitted.host.clone(),
                port,
                key,
                admitted,
            },
            permit,
        ))
    }

    /// Step 1: the scheme (https or http), the host and the port as the
    /// request's URI writes them; a refusal is recorded with the authority
    /// as written.
    fn as_written(
        &self,
        uri: &Uri,
        http: Option<&HttpLink>,
    ) -> Result<(bool, Host, u16), HttpError> {
        let written = uri.authority().map_or("", Authority::as_str);
        let authority = match uri.authority() {
            None => return Err(self.refused_unjudged("", http, HttpError::NoAuthority("no"))),
            Some(a) if a.as_str().is_empty() || a.host().is_empty() => {
                let refused = HttpError::NoAuthority("an empty");
                return Err(self.refused_unjudged(written, http, refused));
            }
            Some(a) => a,
        };
        let https = match uri.scheme() {
            Some(s) if *s == Scheme::HTTPS => true,
            Some(s) if *s == Scheme::HTTP => false,
            Some(other) => {
                let refused = HttpError::Scheme(other.as_str().to_owned());
                return Err(self.refused_unjudged(written, http, refused));
            }
            None => {
                let refused = HttpError::Scheme("(none)".to_owned());
                return Err(self.refused_unjudged(written, http, refused));
            }
        };
        let (host, port) =
            host_and_port(authority, https).map_err(|e| self.refused_unjudged(written, http, e))?;
        Ok((https, host, port))
    }

    /// Step 2's end: the run's secrets put in the head where their
    /// bindings allow ([`Secrets::place`]); a placeholder anywhere else is
    /// refused and recorded.
    fn place_secrets(
        &self,
        head: &mut http::request::Parts,
        https: bool,
        admitted: &Admitted,
        port: u16,
        http: Option<&HttpLink>,
    ) -> Result<(), HttpError> {
        let run = &self.inner.run;
        let to = Destination {
            https,
            host: &admitted.host,
            port,
        };
        match run.secrets.place(head, &to) {
            Ok(placed) => {
                if !placed.is_empty() {
                    tracing::debug!(target: "moat::http", secrets = ?placed, "secrets put in");
                }
                Ok(())
            }
            Err(misplaced) => {
                let refused = NetError::SecretMisplaced(Box::new(misplaced));
                let refused = run.refused_for(
                    Operation::HttpRequest,
                    &admitted.host,
                    Some(port),
                    http,
                    refused,
                );
                Err(HttpError::from_net(refused))
            }
        }
    }

    /// Step 3: a place among the run's requests in flight
    /// ([`Setting::MaxHttpRequests`]), or the refusal, recorded.
    fn in_flight(
        &self,
        admitted: &Admitted,
        port: u16,
        http: Option<&HttpLink>,
    ) -> Result<OwnedSemaphorePermit, HttpError> {
        let run = &self.inner.run;
        Arc::clone(&self.inner.in_flight)
            .try_acquire_owned()
            .map_err(|_| {
                let max = run.limits.max_http_requests;
                tracing::debug!(target: "moat::http", max, "requests-in-flight limit reached");
                let refused = NetError::limit(
                    format!("the run has {max} HTTP requests in flight already"),
                    Setting::MaxHttpRequests,
                );
                run.refused_for(
                    Operation::HttpRequest,
                    &admitted.host,
                    Some(port),
                    http,
                    refused.clone(),
                );
                HttpError::from_net(refused)
            })
    }

    /// Step 4 for a new connection: a socket slot, the addresses that
    /// pass the deny lists, TCP, TLS, hyper's handshake; the connection's
    /// driver runs on the run's tasks, holding the slot and its memory.
    async fn connect(&self, target: &Target) -> Result<(Sender<B>, Arc<Made>), HttpError> {
        let run = &self.inner.run;
        let header_bound = run.limits.max_http_header_size.max(MIN_HTTP_HEADER_SIZE);
        let charge: Charge = run
            .budget
            .charge(CONNECTION_BYTES + header_bound, "an HTTP connection")
            .map_err(HttpError::from_net)?;
        let options = ConnectOptions {
            nodelay: true,
            ..ConnectOptions::default()
        };
        let id = self.inner.connections.fetch_add(1, Ordering::Relaxed) + 1;
        let connection = Admitted {
            operation: Operation::Connect,
            http: target.admitted.http.as_ref().map(|link| HttpLink {
                request: Arc::clone(&link.request),
                connection: Some(id),
            }),
            ..target.admitted.clone()
        };
        let connected = match tcp::connect_resolved(run, &connection, &options).await {
            // Idle kept-alive connections give way to a new one when the
            // run's sockets are all taken (and only then: host memory or
            // a failed audit trail is not eased by closing one).
            Err(e)
                if e.limit_setting() == Some(Setting::MaxSockets)
                    && self.inner.pool.close_oldest_idle() =>
            {
                tokio::task::yield_now().await;
                tcp::connect_resolved(run, &connection, &options).await
            }
            other => other,
        };
        let (stream, _, slot, resolved) =
            connected.map_err(|e| HttpError::from_connect(e, target))?;
        let addr = stream
            .peer_addr()
            .map_err(|e| HttpError::from_connect(e.into(), target))?;
        let io = if target.https {
            Either::Right(self.secure(stream, target).await?)
        } else {
            Either::Left(stream)
        };
        let h2 = match &io {
            Either::Right(tls) => tls.get_ref().1.alpn_protocol() == Some(b"h2"),
            Either::Left(_) => false,
        };
        tracing::debug!(
            target: "moat::http",
            host = %target.host, port = target.port, %addr, https = target.https,
            protocol = if h2 { "h2" } else { "http/1.1" },
            "connected"
        );
        let sender = self
            .handshake(io, h2, header_bound, charge, slot, addr)
            .await?;
        let made = Made {
            id,
            protocol: if h2 { "HTTP/2" } else { "HTTP/1.1" },
            resolved,
            address: addr,
        };
        Ok((sender, Arc::new(made)))
    }

    /// TLS over `stream` to `target`, offering HTTP/2 and HTTP/1.1.
    async fn secure(
        &self,
        stream: tokio::net::TcpStream,
        target: &Target,
    ) -> Result<TlsStream, HttpError> {
        let run = &self.inner.run;
        let config = self
            .inner
            .tls
            .client_config(
                &TlsClientOptions {
                    alpn: vec![b"h2".to_vec(), b"http/1.1".to_vec()],
                    ..TlsClientOptions::default()
                },
                &run.budget,
            )
            .map_err(HttpError::Tls)?;
        let name = tls::server_name(&target.host).map_err(HttpError::Tls)?;
        let limit = DEFAULT_TLS_HANDSHAKE_TIMEOUT.min(run.limits.tls_handshake_timeout);
        let cap = Setting::TlsHandshakeTimeout;
        tls::handshake_client(stream, Vec::new(), name, config, limit, cap)
            .await
            .map_err(HttpError::Tls)
    }

    /// hyper's handshake on `io`, HTTP/2 if `h2`; the connection's driver
    /// then runs on the run's tasks, holding `slot` and `charge` (grown by
    /// what an HTTP/2 window lets the peer send before the guest reads).
    async fn handshake(
        &self,
        io: Either<tokio::net::TcpStream, TlsStream>,
        h2: bool,
        header_bound: usize,
        mut charge: Charge,
        slot: SocketSlot,
        addr: SocketAddr,
    ) -> Result<Sender<B>, HttpError> {
        if h2 {
            charge
                .grow(H2_CONNECTION_WINDOW as usize, "an HTTP/2 connection")
                .map_err(HttpError::from_net)?;
            let (sender, conn) = http2::Builder::new(TokioExecutor::new())
                .max_header_list_size(u32::try_from(header_bound).unwrap_or(u32::MAX))
                .initial_stream_window_size(H2_RECEIVE_WINDOW)
                .initial_connection_window_size(H2_CONNECTION_WINDOW)
                .max_send_buf_size(H2_SEND_BUFFER)
                .handshake(TokioIo::new(io))
                .await
                .map_err(|e| self.hyper_error(e))?;
            self.drive(conn, slot, charge, addr);
            Ok(Sender::H2(sender))
        } else {
            let (sender, conn) = http1::Builder::new()
                .max_header_size(header_bound)
                .max_buf_size(header_bound)
                .handshake(TokioIo::new(io))
                .await
                .map_err(|e| self.hyper_error(e))?;
            self.drive(conn, slot, charge, addr);
            Ok(Sender::H1(sender))
        }
    }

    /// Runs a connection's I/O on the run's tasks, holding its socket
    /// slot and its host memory until the socket is closed.
    fn drive<C>(&self, conn: C, slot: SocketSlot, charge: Charge, addr: SocketAddr)
    where
        C: Future<Output = Result<(), hyper::Error>> + Send + 'static,
    {
        self.spawn(async move {
            let _slot = slot;
            let _charge = charge;
            if let Err(e) = conn.await {
                tracing::debug!(target: "moat::http", %addr, error = %e, "connection ended");
            }
        });
    }

    /// Reads a refused request's body to its end on the run's tasks, so
    /// that the guest's writes to it succeed and it hears the refusal from
    /// the response.
    fn drain(&self, body: B) {
        self.spawn(async move {
            let mut body = body;
            while let Some(frame) = body.frame().await {
                if frame.is_err() {
                    break;
                }
            }
        });
    }

    fn hyper_error(&self, e: hyper::Error) -> HttpError {
        if e.is_parse_too_large() {
            let run = &self.inner.run;
            HttpError::HeaderTooLarge {
                limit: run.limits.max_http_header_size.max(MIN_HTTP_HEADER_SIZE),
                setting: Setting::MaxHttpHeaderSize,
            }
        } else if e.is_user() {
            HttpError::RequestBody(e.to_string())
        } else {
            HttpError::Protocol(e)
        }
    }
}

/// The time a request gets: the guest's if it asked for less than the
/// run's cap, the cap otherwise.
fn capped(asked: Option<Duration>, cap: Duration) -> Duration {
    asked.map_or(cap, |asked| asked.min(cap))
}

/// The host as written and the port: the URI's, or the scheme's.
fn host_and_port(authority: &Authority, https: bool) -> Result<(Host, u16), HttpError> {
    let bad = |reason: String| HttpError::BadAuthority {
        authority: authority.to_string(),
        reason,
    };
    // The `Host` header (or `:authority`) is the authority as written, and
    // must name what was judged and nothing else: user information
    // (`user@host`), which RFC 9110 (4.2.4) forbids senders to write and
    // a server or proxy may read as part of the host, is refused.
    if authority.as_str().contains('@') {
        return Err(bad(
            "it carries user information (the part before `@`), which an HTTP request may \
             not send; give credentials in an Authorization header"
                .to_owned(),
        ));
    }
    // `Authority::host` keeps an IPv6 literal's brackets.
    let written = authority.host();
    let bare = written
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(written);
    let host = Host::parse(bare).map_err(|e| bad(e.to_string()))?;
    let port = match authority.port() {
        None => {
            if https {
                443
            } else {
                80
            }
        }
        Some(port) => port
            .as_str()
            .parse::<u16>()
            .map_err(|_| bad(format!("port {port} is not a port")))?,
    };
    if port == 0 {
        return Err(bad("port 0 cannot be connected to".to_owned()));
    }
    Ok((host, port))
}

/// The request target of a request sent to its origin server: its path
/// and query (`/` when it has none).
fn origin_form(uri: &Uri) -> Uri {
    let path = uri
        .path_and_query()
        .cloned()
        .unwrap_or_else(|| PathAndQuery::from_static("/"));
    Uri::from(path)
}

#[cfg(test)]
mod tests;
