//! `moat serve`: a wasi:http 0.2 `proxy` or 0.3 `service` component
//! answering HTTP/1.1 and HTTP/2 requests, each in a fresh instance, under
//! the run's grants and bounds.
//!
//! **Who grants what.** The address served on (`--addr`: an IP address
//! and port, `unix:PATH`, or `systemd` for the sockets systemd handed
//! over; see [`listen`]) is the operator's: moat listens there itself, and the guest needs no listen
//! grant for it. Everything the guest does while handling a request (its
//! own outgoing requests, sockets, name lookups) is under the usual grants
//! and deny lists, on one network shared by every request: one socket
//! count, one host-memory budget, one pool of kept-alive upstream
//! connections.
//!
//! **Isolation.** Every request gets a new instance of the component, made
//! from a pre-instantiated template ([`wasmtime::component::InstancePre`]:
//! linked and type-checked once, so a request pays only for the instance's
//! memory and tables). Nothing a handler leaves in its memory, globals or
//! tables is seen by the next request. The instance is dropped when its
//! response body has been sent.
//!
//! **Engine.** A 0.2 proxy that imports nothing but WASI 0.2 is served on
//! an engine without the component model's concurrency support, which
//! costs every call in and out of an instance some bookkeeping; anything
//! else on the engine with it ([`Guest::uses_concurrency`]). The grants,
//! bounds and isolation are the same on both.
//!
//! **Bounds.** Client connections at once (`--max-http-connections`; more
//! wait in the kernel's backlog); the time to send a request's head, which
//! is also how long a kept-alive connection may sit idle
//! (`--http-header-read-timeout`); the head's size (`--max-http-header-size`);
//! the request body (`--max-http-body-size`: 413, or a cut-off response if
//! the handler answered before reading past the bound); handler instances
//! at once (`--max-instances`: the server's guest memory is at most that
//! many times `--max-memory`); each request's memory (`--max-memory`, per
//! instance) and time (`--timeout`, per request, or
//! 60 s). A handler that traps, runs out of memory
//! or time gets its client a 500, and the server goes on.
//!
//! **Slow clients.** An instance is taken once a request's head is whole,
//! and a client cannot keep it: one client address holds at most
//! `--max-instances-per-client` instances at once (`--max-waiting-per-client`
//! more of its requests wait for its own, then 429; past those, 429 at
//! once, holding none of the server's places) and `--max-http-connections-per-client`
//! connections open; a pause in a request body the handler
//! waits on past `--http-request-body-timeout` ends the request (408, or
//! the response cut off if it had started); a response whose client has
//! not taken more of it for `--http-response-send-timeout` is cut off;
//! and a client that goes away stops its handler. Each of these stops
//! the handler and gives its instance back at once.
//!
//! **HTTP/2.** Over TLS when the client offers `h2` in ALPN, and over
//! plain TCP when it opens with HTTP/2's preface (prior knowledge, as
//! `curl --http2-prior-knowledge`; an `Upgrade: h2c` request is answered
//! in HTTP/1.1). Its own bounds: streams per connection
//! (100), flow-control windows (256 KiB), send
//! buffers (64 KiB), requests at once across the server
//! (`--max-http-connections`, as for HTTP/1.1 connections), and the idle
//! time (`--http-header-read-timeout`).
//!
//! **TLS.** With [`ServeOptions::tls`] (`--tls-cert`, `--tls-key`) the
//! server speaks HTTPS (rustls, ALPN `h2` and `http/1.1`); a client's
//! handshake is bounded by `--tls-handshake-timeout` (10 s by default).
//!
//! **Metrics.** With [`ServeOptions::metrics`] (`--metrics=ADDR`) the
//! server answers `GET /metrics` on that address of its own, in the
//! Prometheus text format (0.0.4), or OpenMetrics for a scraper that asks
//! for it in `Accept` (Prometheus does):
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `moat_http_requests_total` | counter | `method`, `status` |
//! | `moat_http_request_duration_seconds` (to the response's head) | histogram | |
//! | `moat_http_refused_total` (answered by moat, not the handler) | counter | `reason` |
//! | `moat_instances_busy`, `moat_instances_waiting`, `moat_instances_max` | gauge | |
//! | `moat_http_connections`, `moat_http_connections_max` | gauge | |
//! | `moat_decisions_total` (the network's, as the audit trail has them) | counter | `operation`, `outcome` |
//! | `moat_host_memory_bytes`, `moat_host_memory_budget_bytes` | gauge | |
//! | `moat_http_request_cpu_seconds`, `moat_http_request_memory_peak_bytes` (each request's handler instance) | histogram | |
//! | `process_*` (CPU, memory, start time, descriptors) | counter, gauge | |
//! | `moat_reloads_total` | counter | `result` (`ok`, `failed`) |
//! | `moat_build_info`, `moat_handler_info` (1, for the handler served now) | gauge | `version`; `file`, `sha256` |
//!
//! Every series is there from the start, at 0. The same address answers
//! `GET /healthz` (200) and `GET /readyz` (200; once stopping, the
//! address closes).
//!
//! No label is one a client or guest can multiply: `method` is one of the
//! nine methods of RFC 9110 and PATCH, or `other`; `status` is the class
//! (`2xx`), since a handler may answer any status from 100 to 999;
//! `reason` is `instances-busy` (503), `client-share` (429),
//! `body-too-large` (413), `body-timeout` (408) or `handler-failed` (500);
//! `operation` and `outcome` (`allowed`, `denied`) are those of the audit
//! trail. The scrape address is listened on and recorded like `--addr`;
//! it answers one request per connection, 64 at once (32 from one
//! address), each within 10 s ([`crate::limits`] has the caps).
//!
//! **Reloading.** [`Server::reloader`] gives a [`Reloader`] that puts a
//! new handler in the old one's place while the server serves (`moat
//! serve` does at SIGHUP, loading the new component on a thread of its
//! own while the old one answers): checked as [`Moat::bind_server`] checks
//! the first, then given to every request from then on; requests in flight
//! finish on theirs. A handler that needs the other engine (a 0.3 service
//! after a 0.2 proxy, or the other way round) is refused.
//!
//! **Stopping.** When the future given to [`Server::serve`] resolves
//! (SIGINT or SIGTERM for `moat serve`), the server stops accepting, lets
//! the requests in flight finish for up to `--shutdown-timeout`
//! ([`crate::limits::Limits::shutdown_timeout`], 10 s by default), then
//! returns; requests still running then are cut off, and stderr says how
//! many.

mod body;
mod conn;
mod cost;
mod failures;
mod handler;
mod http10;
pub mod listen;
mod metrics;
mod process_metrics;
mod refused;
pub(crate) mod reload;
mod request;
mod share;
mod watch;

pub use listen::Listening;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p3::bindings::ServicePre;

use crate::audit::{Event, Operation, Outcome};
use crate::engines::{INCOMING_HANDLER, SERVICE_HANDLER};
use crate::error::MoatError;
use crate::kit::MoatCtx;
use crate::moat::{Guest, Moat};
use crate::net::limits::DEFAULT_TLS_HANDSHAKE_TIMEOUT;
use crate::net::{MIN_HTTP_HEADER_SIZE, Net, TlsIdentity, TlsServerOptions};
use crate::options::RunOptions;
use listen::Listener;
use moat_policy::policy::{Host, Provenance, Source};
use moat_policy::setting::{Setting, Spelling, Worded};

/// Where `moat serve` listens unless told otherwise: loopback only, never
/// every interface unless the operator writes `0.0.0.0` or `[::]`.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8080";

/// How long one request may take when the run sets no `--timeout`: 60 s,
/// as an upstream's first byte (`--http-first-byte-timeout`).
/// A handler stuck in a loop or waiting forever must not hold a client,
/// an instance and its memory for longer.
pub(crate) const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// What a server serves and how.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Where to listen (`--addr`): an IP address and port, a Unix socket
    /// (`unix:PATH`), or every socket systemd handed over (`systemd`);
    /// see [`listen`].
    pub addr: String,
    /// More addresses to listen on as well (`--addr` given again), each
    /// the operator's grant as `addr` is; requests from all of them are
    /// served alike.
    pub also: Vec<String>,
    /// The handler's grants and bounds, environment and directories, as a
    /// run's; `timeout` is per request.
    pub run: RunOptions,
    /// Serve HTTPS with this certificate chain and key (`--tls-cert`,
    /// `--tls-key`); plain HTTP without.
    pub tls: Option<TlsIdentity>,
    /// Where to answer Prometheus scrapes (`--metrics`): written as
    /// `addr` is, the operator's grant as `addr` is; none without. What it
    /// reports is in the module's documentation, under Metrics.
    pub metrics: Option<String>,
    /// Take each request's id from its `x-request-id` header, or its
    /// `traceparent`'s trace id, when it has a well-formed one
    /// (`--trust-request-id`); otherwise (and by default) the server makes
    /// one. Only behind a proxy that sets them: a client would choose the
    /// ids in the server's failure lines and on its trail.
    pub trust_request_id: bool,
}

impl ServeOptions {
    /// Serving plain HTTP on `addr` under `run`.
    pub fn new(addr: impl Into<String>, run: RunOptions) -> ServeOptions {
        ServeOptions {
            addr: addr.into(),
            also: Vec::new(),
            run,
            tls: None,
            metrics: None,
            trust_request_id: false,
        }
    }

    /// Answering Prometheus scrapes (`GET /metrics`) on `addr` as well.
    pub fn metrics(mut self, addr: impl Into<String>) -> ServeOptions {
        self.metrics = Some(addr.into());
        self
    }

    /// Listening on `addr` as well.
    pub fn also(mut self, addr: impl Into<String>) -> ServeOptions {
        self.also.push(addr.into());
        self
    }

    /// Serving HTTPS with `identity` instead.
    pub fn tls(mut self, identity: TlsIdentity) -> ServeOptions {
        self.tls = Some(identity);
        self
    }
}

/// A bound server: listening, not yet answering.
pub struct Server<'m> {
    moat: &'m Moat,
    /// Each listener and the address it listens on, in the order given.
    listeners: Vec<(Listener, Listening)>,
    shared: Arc<request::Shared>,
    tls: Option<TlsAcceptor>,
    /// Where scrapes are answered (`--metrics`), and the address it got.
    metrics: Vec<(Listener, Listening)>,
}

impl Moat {
    /// Checks that `guest` is a wasi:http handler (0.2's
    /// `incoming-handler` or 0.3's `handler`), links it, and listens on
    /// `options.addr` and each of `options.also` (and `options.metrics`).
    /// Nothing is answered until [`Server::serve`].
    ///
    /// # Errors
    /// [`MoatError::NotAHandler`] for a component that exports neither;
    /// [`MoatError::Instantiate`] for one whose imports moat does not
    /// provide; [`MoatError::Bind`] for the first address that is none of
    /// the forms [`listen`] takes, or cannot be listened on (none is then
    /// listened on); [`MoatError::PreopenRefused`] and the other errors of
    /// building a run's context.
    pub async fn bind_server(
        &self,
        guest: &Guest,
        options: ServeOptions,
    ) -> Result<Server<'_>, MoatError> {
        let name = options.run.args.first().cloned().unwrap_or_default();
        let (engine, pre) = self.template(guest, &name)?;
        // Checked once here, as every request's store will be built.
        crate::moat::wasi_ctx(&options.run, &self.apart_from(guest))?;
        no_clash(&options)?;
        let mut listeners = Vec::with_capacity(1 + options.also.len());
        for written in std::iter::once(&options.addr).chain(&options.also) {
            for opened in listen::open(written).await? {
                listeners.push((opened, written));
            }
        }
        let mut scrapes = Vec::new();
        if let Some(written) = &options.metrics {
            for opened in listen::open(written).await? {
                scrapes.push((opened, written));
            }
        }
        let mut run = options.run;
        let metrics = options
            .metrics
            .as_ref()
            .map(|_| counted_metrics(guest, &mut run));
        let notices = crate::moat::notices(&run);
        let listeners = recorded(&run, listeners, ListenerFor::Requests)?;
        let scrapes = recorded(&run, scrapes, ListenerFor::Metrics)?;
        let builder = MoatCtx::configured(run.net.clone())
            .notices(notices)
            .linger(self.linger());
        let (net, notices, max_memory, _linger) = builder.into_net(self.ticker());
        let tls = options
            .tls
            .map(|identity| acceptor(&net, identity, &options.addr))
            .transpose()?;
        let mut shared = request::Shared::new(
            engine.clone(),
            pre,
            net,
            notices,
            max_memory,
            run,
            self.apart_from(guest),
        );
        shared.metrics = metrics;
        shared.trust_request_id = options.trust_request_id;
        let shared = Arc::new(shared);
        for (_, bound) in &listeners {
            tracing::debug!(target: "moat::http", %bound, "listening");
        }
        Ok(Server {
            moat: self,
            listeners,
            shared,
            tls,
            metrics: scrapes,
        })
    }
}

/// Refuses two listeners on one address, which would otherwise fail at
/// the second's bind with "Address already in use", naming neither flag.
fn no_clash(options: &ServeOptions) -> Result<(), MoatError> {
    let given: Vec<&String> = std::iter::once(&options.addr)
        .chain(&options.also)
        .collect();
    for (i, written) in given.iter().enumerate() {
        if let Some(first) = listen::clash(written, given[..i].iter().copied()) {
            return Err(clashing(
                written,
                format!("the same address as --addr={first}"),
            ));
        }
    }
    if let Some(metrics) = &options.metrics
        && let Some(served) = listen::clash(metrics, given.iter().copied())
    {
        return Err(clashing(
            metrics,
            format!(
                "--metrics is the same address as --addr={served}: give the metrics an \
                 address of their own"
            ),
        ));
    }
    Ok(())
}

/// The server's metrics, counting `run`'s decisions: one count for the
/// metrics and the run's figures, which the run's audit counts into.
fn counted_metrics(guest: &Guest, run: &mut RunOptions) -> Arc<metrics::Metrics> {
    let mut metrics = metrics::Metrics::new(guest.identity.clone());
    if let Some(figures) = &run.figures {
        metrics.decisions = Arc::clone(figures.decisions());
    }
    let metrics = Arc::new(metrics);
    run.net.audit = run
        .net
        .audit
        .clone()
        .counting(Arc::clone(&metrics.decisions));
    metrics
}

impl Moat {
    /// `guest`'s handler, linked and type-checked, and the engine it runs
    /// on.
    ///
    /// # Errors
    /// [`MoatError::NotAHandler`] for a component that exports neither
    /// handler (named `name`); [`MoatError::Instantiate`] for one whose
    /// imports moat does not provide.
    fn template(
        &self,
        guest: &Guest,
        name: &str,
    ) -> Result<(wasmtime::Engine, handler::Handler), MoatError> {
        let exports = guest.exports();
        let p3 = exports.iter().any(|e| e.starts_with(SERVICE_HANDLER));
        if !p3 && !exports.iter().any(|e| e.starts_with(INCOMING_HANDLER)) {
            return Err(MoatError::NotAHandler {
                path: name.into(),
                reason: format!(
                    "it exports neither wasi:http/incoming-handler@0.2 nor \
                     wasi:http/handler@0.3 (it exports: {}); run a command with moat run",
                    if exports.is_empty() {
                        "nothing".to_owned()
                    } else {
                        exports.join(", ")
                    }
                ),
            });
        }
        let (engine, linker) = self.linked(guest)?;
        let linked = linker
            .instantiate_pre(&guest.component)
            .map_err(MoatError::Instantiate)?;
        let pre = if p3 {
            ServicePre::new(linked).map(handler::Handler::P3)
        } else {
            ProxyPre::new(linked).map(handler::Handler::P2)
        }
        .map_err(MoatError::Instantiate)?;
        Ok((engine.clone(), pre))
    }
}

/// Puts a new handler in a running server's place: new requests go to it,
/// requests in flight finish on the one they started on. From
/// [`Server::reloader`]; `moat serve` uses it at SIGHUP.
pub struct Reloader<'m> {
    moat: &'m Moat,
    shared: Arc<request::Shared>,
}

impl Reloader<'_> {
    /// Checks `guest` as [`Moat::bind_server`] checks the first handler
    /// (it must be a wasi:http handler whose imports moat serves, on the
    /// engine the server runs), then serves it to every request from now
    /// on. On an error the server goes on with the handler it had.
    ///
    /// # Errors
    /// [`MoatError::NotAHandler`], [`MoatError::Instantiate`] (named
    /// `name`); [`MoatError::ReloadEngine`] for a handler that needs the
    /// other engine.
    pub fn reload(&self, guest: &Guest, name: &str) -> Result<(), MoatError> {
        let replaced = self.replace(guest, name);
        if let Some(metrics) = &self.shared.metrics {
            metrics.reloaded(replaced.is_ok(), guest.identity.clone());
        }
        if let Err(e) = &replaced {
            self.record_failure(name, e);
        }
        replaced
    }

    /// Counts and records a reload whose component at `name` did not load
    /// (`why`), as [`Self::reload`] does its own failures:
    /// `moat_reloads_total{result="failed"}` and a `reload-failed` record.
    pub fn load_failed(&self, name: &str, why: &MoatError) {
        tracing::debug!(target: "moat::http", error = %why, "a reload's load failed");
        if let Some(metrics) = &self.shared.metrics {
            metrics.reloaded(false, None);
        }
        self.record_failure(name, why);
    }

    fn record_failure(&self, name: &str, why: &MoatError) {
        let file = std::path::Path::new(name)
            .file_name()
            .map_or_else(|| name.to_owned(), |f| f.to_string_lossy().into_owned());
        let error = why.worded(self.shared.net().words()).to_string();
        if let Err(e) = self.shared.net().audit().reload_failed(&file, &error) {
            tracing::debug!(target: "moat::http", error = %e, "the failed reload is not on the trail");
        }
    }

    fn replace(&self, guest: &Guest, name: &str) -> Result<(), MoatError> {
        let (engine, pre) = self.moat.template(guest, name)?;
        if !wasmtime::Engine::same(&engine, &self.shared.engine) {
            return Err(MoatError::ReloadEngine {
                path: name.into(),
                needs_concurrency: guest.uses_concurrency(),
            });
        }
        self.shared.replace(pre);
        tracing::debug!(target: "moat::http", component = name, "the handler is replaced");
        if let Some(identity) = &guest.identity
            && let Err(e) = self.shared.net().audit().reloaded(identity.clone())
        {
            // The trail is full or failed: every audited operation is
            // refused already, and says so.
            tracing::debug!(target: "moat::http", error = %e, "the reload is not on the trail");
        }
        Ok(())
    }
}

/// The next connection from any of `listeners`, the client's address
/// (see [`listen`]) and where it came in; each accept starts from the
/// listener after `next`'s, so that a busy one does not starve the
/// others.
async fn accept_any<'l>(
    listeners: &'l [(Listener, Listening)],
    next: &mut usize,
) -> (std::io::Result<(listen::Stream, IpAddr)>, &'l Listening) {
    std::future::poll_fn(|cx| {
        let count = listeners.len();
        for i in 0..count {
            let at = (*next + i) % count;
            let (listener, bound) = &listeners[at];
            if let std::task::Poll::Ready(accepted) = listener.poll_accept(cx) {
                *next = (at + 1) % count;
                return std::task::Poll::Ready((accepted, bound));
            }
        }
        std::task::Poll::Pending
    })
    .await
}

impl<'m> Server<'m> {
    /// A handle that replaces the handler while the server serves.
    pub fn reloader(&self) -> Reloader<'m> {
        Reloader {
            moat: self.moat,
            shared: Arc::clone(&self.shared),
        }
    }
}

impl Server<'_> {
    /// The first IP address and port it listens on (the port the system
    /// chose for port 0); `None` if it listens on Unix sockets only.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addrs().first().copied()
    }

    /// Every IP address and port it listens on, in the order given.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|(_, bound)| match bound {
                Listening::Tcp(addr) => Some(*addr),
                Listening::Unix(_) => None,
            })
            .collect()
    }

    /// Everything it listens on for requests (IP addresses and Unix
    /// sockets), in the order given.
    pub fn bound(&self) -> Vec<Listening> {
        self.listeners.iter().map(|(_, b)| b.clone()).collect()
    }

    /// How each request's instance is reset when it ends; `None` when the
    /// process could not reserve the instance pool and makes each
    /// instance's memory afresh.
    pub fn memory_reset(&self) -> Option<crate::MemoryReset> {
        self.shared
            .engine
            .pooling_allocator_metrics()
            .map(|_| crate::MemoryReset::available())
    }

    /// Where it answers Prometheus scrapes ([`ServeOptions::metrics`]);
    /// empty without.
    pub fn metrics_bound(&self) -> Vec<Listening> {
        self.metrics.iter().map(|(_, b)| b.clone()).collect()
    }

    /// Answers requests until `stop` resolves, then stops accepting, lets
    /// the requests in flight finish (up to the run's `shutdown_timeout`),
    /// closes the network and returns.
    ///
    /// # Errors
    /// [`MoatError::Thread`] if the request-time ticker cannot start.
    pub async fn serve(self, stop: impl Future<Output = ()>) -> Result<(), MoatError> {
        let Server {
            moat,
            listeners,
            shared,
            tls,
            metrics: scrapes,
        } = self;
        let mut next = 0;
        let handshake_limit =
            DEFAULT_TLS_HANDSHAKE_TIMEOUT.min(shared.net().limits().tls_handshake_timeout);
        let limits = shared.net().limits().clone();
        let _ticker = request::TimeTicker::start(shared.engine.clone())?;
        let connections = Arc::new(Semaphore::new(limits.max_http_connections.max(1) as usize));
        let per_client = share::Connections::new(limits.max_http_connections_per_client);
        let stopping = CancellationToken::new();
        let tracker = TaskTracker::new();
        if !scrapes.is_empty() {
            shared.serve_scrapes(scrapes, &limits, stopping.clone());
        }
        let serving = Arc::new(conn::Serving {
            shared: Arc::clone(&shared),
            requests: share::Requests::new(&limits),
            tracker: tracker.clone(),
            stopping: stopping.clone(),
            header_bound: limits.max_http_header_size.max(MIN_HTTP_HEADER_SIZE),
            idle: limits.http_header_read_timeout,
            send_timeout: limits.http_response_send_timeout,
            tls: tls.is_some(),
        });
        let mut stop = std::pin::pin!(stop);
        loop {
            let permit = tokio::select! {
                () = &mut stop => break,
                permit = Arc::clone(&connections).acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => break,
                },
            };
            let (accepted, addr) = tokio::select! {
                () = &mut stop => break,
                accepted = accept_any(&listeners, &mut next) => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // A client that went away before the accept, or the
                    // process at its descriptor limit: the next accept
                    // may succeed; pause so a persistent error does not
                    // spin.
                    tracing::debug!(target: "moat::http", %addr, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            // Closed at once when its address holds its share open.
            let Some(counted) = per_client.open(peer) else {
                tracing::debug!(target: "moat::http", %peer, max = limits.max_http_connections_per_client, "a connection past its address's share, closed");
                continue;
            };
            let serving = Arc::clone(&serving);
            let tls = tls.clone();
            let open = shared.metrics.as_ref().map(|m| m.connection());
            tracker.spawn(async move {
                // Its places are given back when it ends.
                let _held = (permit, counted, open);
                serving.accepted(stream, tls, peer, handshake_limit).await;
            });
        }
        drop(listeners);
        wind_down(moat, &shared, &tracker, &stopping, &limits).await;
        Ok(())
    }
}

/// A server's end, once it accepts no more: the connections are told to
/// stop, the requests in flight get up to the run's `shutdown_timeout` to
/// finish (said on stderr if some are cut off), and the network closes.
async fn wind_down(
    moat: &Moat,
    shared: &request::Shared,
    tracker: &TaskTracker,
    stopping: &CancellationToken,
    limits: &crate::limits::Limits,
) {
    tracing::debug!(target: "moat::http", in_flight = tracker.len(), "stopping");
    stopping.cancel();
    tracker.close();
    if tokio::time::timeout(limits.shutdown_timeout, tracker.wait())
        .await
        .is_err()
    {
        // The connections' tasks are dropped with the runtime; their
        // handlers' instances with them.
        let running = shared.instances_busy(limits);
        eprintln!(
            "moat: {} ({:?}) passed with {running} request{} still running: cut off",
            Setting::ShutdownTimeout.named(shared.net().words()),
            limits.shutdown_timeout,
            if running == 1 { "" } else { "s" },
        );
    }
    shared.net().finish(moat.linger()).await;
}

/// A future that resolves at SIGINT or SIGTERM (what a terminal's Ctrl-C,
/// systemd and the kubelet send to stop a server), saying so on stderr;
/// never, if the process cannot listen for them (then only SIGKILL stops
/// it, and a warning says so). For [`Server::serve`]'s `stop`.
///
/// The signals are taken over when this is called, not when the future is
/// first polled: called before the server says it is serving, a signal
/// that comes at once stops it gracefully instead of killing the process.
/// Call it inside the tokio runtime.
pub fn stop_signal() -> impl Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let signals = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    );
    async move {
        let (Ok(mut interrupt), Ok(mut terminate)) = signals else {
            tracing::warn!(
                "cannot listen for SIGINT and SIGTERM: the server stops only when killed"
            );
            return std::future::pending().await;
        };
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        eprintln!("moat: stopping: finishing the requests in flight");
    }
}

impl request::Shared {
    fn net(&self) -> &Net {
        &self.net
    }

    /// Handler instances in use: the requests not yet answered in full.
    fn instances_busy(&self, limits: &crate::limits::Limits) -> usize {
        (limits.max_instances.max(1) as usize).saturating_sub(self.instances.available_permits())
    }

    /// Answers Prometheus's scrapes on `scrapes` until `stopping`, if the
    /// server keeps figures.
    fn serve_scrapes(
        &self,
        scrapes: Vec<(Listener, Listening)>,
        limits: &crate::limits::Limits,
        stopping: CancellationToken,
    ) {
        let Some(metrics) = &self.metrics else {
            return;
        };
        let registry = metrics.registry(metrics::Now {
            instances: Arc::clone(&self.instances),
            max_instances: limits.max_instances.max(1) as usize,
            max_connections: limits.max_http_connections.max(1) as usize,
            net: self.net().clone(),
            decisions: Arc::clone(&metrics.decisions),
            pool: self.engine.pooling_allocator_metrics(),
        });
        tokio::spawn(metrics::serve_scrapes(scrapes, registry, stopping));
    }
}

/// The listeners `opened`, each recorded on the run's trail with the
/// address as written, for `purpose`.
fn recorded(
    run: &RunOptions,
    opened: Vec<((Listener, Listening), &String)>,
    purpose: ListenerFor,
) -> Result<Vec<(Listener, Listening)>, MoatError> {
    opened
        .into_iter()
        .map(|((listener, bound), written)| {
            record_serve_bind(run, written, &bound, purpose)?;
            Ok((listener, bound))
        })
        .collect()
}

/// A listener refused before it was opened, for `why`.
fn clashing(written: &str, why: String) -> MoatError {
    MoatError::Bind {
        addr: written.to_owned(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, why),
    }
}

/// The TLS acceptor of a server with `identity`, offering HTTP/2 and
/// HTTP/1.1; a refusal names the first address (`addr`).
fn acceptor(net: &Net, identity: TlsIdentity, addr: &str) -> Result<TlsAcceptor, MoatError> {
    net.tls_acceptor(&TlsServerOptions {
        identity,
        alpn: vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        client_roots_pem: None,
        handshake_timeout: None,
    })
    .map_err(|e| MoatError::Bind {
        addr: addr.to_owned(),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("--tls-cert/--tls-key: {e}"),
        ),
    })
}

/// What a `moat serve` listener is for.
#[derive(Clone, Copy)]
enum ListenerFor {
    /// Requests for the handler (`--addr`).
    Requests,
    /// Prometheus scrapes (`--metrics`).
    Metrics,
}

/// Records a `moat serve` listening address on the run's audit trail: the
/// operator's grant, `--addr` (`MOAT_HTTP_ADDR` under the shim) or
/// `--metrics`, as written, and the address bound.
fn record_serve_bind(
    run: &RunOptions,
    written: &str,
    bound: &Listening,
    purpose: ListenerFor,
) -> Result<(), MoatError> {
    // The shim sets no metrics address: only a flag names one.
    let (flag, variable) = match purpose {
        ListenerFor::Requests => ("--addr", Some("MOAT_HTTP_ADDR")),
        ListenerFor::Metrics => ("--metrics", None),
    };
    let source = match (run.net.policy.spelling(), variable) {
        (Spelling::Environment, Some(variable)) => Source::Environment {
            variable: variable.to_owned(),
        },
        (Spelling::Embedding, _) => Source::Embedding,
        _ => Source::Flag {
            flag: flag.to_owned(),
        },
    };
    run.net
        .audit
        .record(|| {
            let outcome = Outcome::Allowed {
                rule: Some(Arc::new(Provenance {
                    entry: written.to_owned(),
                    source,
                })),
            };
            match bound {
                Listening::Tcp(addr) => {
                    let mut event = Event::new(
                        Operation::ServeBind,
                        &Host::ip(addr.ip()),
                        Some(addr.port()),
                        outcome,
                    );
                    event.address = Some(*addr);
                    event
                }
                // No host and no port: the socket's path, as `written`.
                Listening::Unix(_) => {
                    Event::written(Operation::ServeBind, &bound.to_string(), None, outcome)
                }
            }
        })
        .map_err(|e| MoatError::Bind {
            addr: written.to_owned(),
            source: std::io::Error::other(e),
        })
}
