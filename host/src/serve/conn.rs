//! One client connection: HTTP/1.1 or HTTP/2 (by the client's first
//! bytes, or TLS's ALPN), under the server's bounds, closed when idle.
//!
//! HTTP/2 carries many requests on one connection, so the bounds that
//! HTTP/1.1 gets from one request per connection are set here instead:
//! requests at once across the server ([`Requests`]), streams per
//! connection ([`H2_MAX_STREAMS`]), and what a connection buffers either
//! way ([`H2_WINDOW`], [`H2_SEND_BUFFER`]).
//!
//! A response its client does not take is cut off once a piece of it has
//! waited `--http-response-send-timeout` ([`super::watch`]): over
//! HTTP/1.1 the connection is closed, over HTTP/2 the request's stream
//! alone is reset (each stream runs as a task of the connection's own,
//! which the request's watch can end); either way its handler is
//! stopped.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use http_body::{Body, Frame, SizeHint};

use hyper::Request;
use hyper::body::Incoming;
use hyper::rt::Executor;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_util::either::Either;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::http10::Http10;
use super::listen::Stream;
use super::request::Shared;
use super::share::Requests;
use super::watch::Watch;

/// Streams one HTTP/2 client may have open at once: 100, the least RFC
/// 9113 (section 6.5.2) asks a server to allow, and what browsers expect
/// to multiplex a page over one connection. The server-wide bound on
/// requests at once (`--max-http-connections`) holds whatever this
/// allows.
pub(crate) const H2_MAX_STREAMS: u32 = 100;

/// HTTP/2 flow-control window, per stream and per connection: 256 KiB of
/// request body a client may send before the handler reads it. The
/// protocol's default (64 KiB) holds a fast upload to one window per
/// round trip; 256 KiB keeps a LAN upload at wire speed while a
/// connection still buffers at most this much of what its client sent.
pub(crate) const H2_WINDOW: u32 = 256 << 10;

/// HTTP/2 response bytes one stream may queue for a client that is slow
/// to read: 64 KiB, so a client with many open streams holds at most this
/// much per request of the server's memory; a handler writing more waits
/// (hyper's default is 400 KiB).
pub(crate) const H2_SEND_BUFFER: usize = 64 << 10;

/// Runs hyper's tasks for HTTP/2 streams on the server's task tracker, so
/// that a stopping server waits for them as for connections; each stream's
/// task ends when its request's watch stops it (the stream is then reset).
/// hyper makes a stream's task right after it called the service for the
/// stream's request, on the same task, so the watch the service left in
/// `next` is that stream's.
#[derive(Clone)]
struct Tracked {
    tracker: TaskTracker,
    next: Arc<Mutex<Option<tokio_util::sync::CancellationToken>>>,
}

impl<F> Executor<F> for Tracked
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        let stop = self
            .next
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match stop {
            Some(stop) => {
                self.tracker.spawn(async move {
                    tokio::select! {
                        _ = future => {}
                        () = stop.cancelled() => {
                            tracing::debug!(target: "moat::http", "resetting a stream whose handler was stopped");
                        }
                    }
                });
            }
            None => {
                self.tracker.spawn(future);
            }
        }
    }
}

/// When a connection last had no handler running, how many it has, and
/// their requests' watches: an HTTP/2 connection with none for the idle
/// time is closed (HTTP/1.1's idle bound is hyper's header-read timeout,
/// which HTTP/2 lacks).
#[derive(Clone)]
struct Activity(Arc<Mutex<ActivityState>>);

struct ActivityState {
    busy: u32,
    since: Instant,
    watches: Vec<Weak<Watch>>,
}

impl Activity {
    fn new() -> Activity {
        Activity(Arc::new(Mutex::new(ActivityState {
            busy: 0,
            since: Instant::now(),
            watches: Vec::new(),
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ActivityState> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn update(&self, f: impl FnOnce(&mut u32)) {
        let mut state = self.lock();
        f(&mut state.busy);
        state.since = Instant::now();
    }

    fn begin(&self, watch: &Arc<Watch>) -> Busy {
        self.update(|n| *n += 1);
        let mut state = self.lock();
        state.watches.retain(|w| w.strong_count() > 0);
        state.watches.push(Arc::downgrade(watch));
        Busy(self.clone())
    }

    /// Resolves with the watch of a response whose client has not taken
    /// the piece hyper holds for `limit`.
    async fn stalled(&self, limit: Duration) -> Arc<Watch> {
        loop {
            let now = Instant::now();
            let earliest = {
                let mut state = self.lock();
                state.watches.retain(|w| w.strong_count() > 0);
                state
                    .watches
                    .iter()
                    .filter_map(Weak::upgrade)
                    .filter_map(|w| w.stalls_at(limit).map(|at| (at, w)))
                    .min_by_key(|(at, _)| *at)
            };
            match earliest {
                Some((at, watch)) if at <= now => return watch,
                // Looked at again when it would stall, or a second from
                // now for pieces handed over in the meantime.
                Some((at, _)) => {
                    tokio::time::sleep_until(at.min(now + Duration::from_secs(1))).await
                }
                None => tokio::time::sleep(Duration::from_secs(1).min(limit)).await,
            }
        }
    }

    /// Resolves once no handler has run on the connection for `idle`.
    async fn idle_for(&self, idle: Duration) {
        loop {
            let (busy, since) = {
                let state = self.lock();
                (state.busy, state.since)
            };
            if busy == 0 && since.elapsed() >= idle {
                return;
            }
            let wake = if busy == 0 {
                since + idle
            } else {
                Instant::now() + idle
            };
            tokio::time::sleep_until(wake).await;
        }
    }
}

/// One handler running on a connection, until dropped.
struct Busy(Activity);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.update(|n| *n = n.saturating_sub(1));
    }
}

/// A response body that holds its request's places (on the connection,
/// and among the server's requests at once) until it is sent or dropped:
/// a handler's request is in flight until its body ends, not just until
/// its head is ready. It tells the request's watch how the response goes,
/// and stops the handler when dropped before its end.
struct Holding<B> {
    body: B,
    watch: Arc<Watch>,
    _busy: Busy,
    _permit: Option<OwnedSemaphorePermit>,
}

impl<B> Drop for Holding<B> {
    fn drop(&mut self) {
        if !self.watch.is_done() {
            self.watch.stop();
        }
    }
}

/// Stops a request's handler if its service future is dropped before it
/// answered (the client went away while the handler ran).
struct StopUnlessAnswered(Option<Arc<Watch>>);

impl StopUnlessAnswered {
    fn answered(&mut self) {
        self.0 = None;
    }
}

impl Drop for StopUnlessAnswered {
    fn drop(&mut self) {
        if let Some(watch) = self.0.take() {
            watch.stop();
        }
    }
}

impl<B: Body + Unpin> Body for Holding<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        self.watch.asked();
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(_))) => self.watch.delivered(),
            Poll::Ready(None | Some(Err(_))) => self.watch.done(),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// What every connection is served with.
pub(super) struct Serving {
    pub(super) shared: Arc<Shared>,
    pub(super) requests: Requests,
    pub(super) tracker: TaskTracker,
    pub(super) stopping: CancellationToken,
    pub(super) header_bound: usize,
    pub(super) idle: Duration,
    pub(super) send_timeout: Duration,
    pub(super) tls: bool,
}

impl Serving {
    /// A client's connection, just accepted: its TLS handshake if the
    /// server takes TLS (a client that stalls it gives its place back
    /// after `handshake_limit`), then its requests.
    pub(super) async fn accepted(
        &self,
        stream: Stream,
        tls: Option<TlsAcceptor>,
        peer: IpAddr,
        handshake_limit: Duration,
    ) {
        let io = match tls {
            None => Either::Left(stream),
            Some(acceptor) => {
                match tokio::time::timeout(handshake_limit, acceptor.accept(stream)).await {
                    Ok(Ok(tls)) => Either::Right(tls),
                    Ok(Err(e)) => {
                        tracing::debug!(target: "moat::http", %peer, error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(target: "moat::http", %peer, "TLS handshake timed out");
                        return;
                    }
                }
            }
        };
        if let Err(e) = self.connection(io, peer).await {
            tracing::debug!(target: "moat::http", %peer, error = %e, "client connection ended");
        }
    }

    /// hyper's server for one connection, HTTP/1.1 and HTTP/2 alike, with
    /// the server's bounds on a request's head, HTTP/2's streams and
    /// windows; `next` hands each HTTP/2 stream's task its stop.
    fn builder(&self, next: Arc<Mutex<Option<CancellationToken>>>) -> auto::Builder<Tracked> {
        let mut builder = auto::Builder::new(Tracked {
            tracker: self.tracker.clone(),
            next,
        });
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(self.idle)
            .max_buf_size(self.header_bound)
            .keep_alive(true);
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(H2_MAX_STREAMS)
            .max_header_list_size(u32::try_from(self.header_bound).unwrap_or(u32::MAX))
            .initial_stream_window_size(H2_WINDOW)
            .initial_connection_window_size(H2_WINDOW)
            .max_send_buf_size(H2_SEND_BUFFER);
        builder
    }

    /// Serves one client on `io` until it closes, errs, idles past the
    /// bound, or the server stops (then the requests in flight finish).
    pub(super) async fn connection<I>(
        &self,
        io: I,
        peer: IpAddr,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>>
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let activity = Activity::new();
        let shared = Arc::clone(&self.shared);
        let requests = self.requests.clone();
        let tls = self.tls;
        let seen = activity.clone();
        let next_stream = Arc::new(Mutex::new(None));
        let for_streams = Arc::clone(&next_stream);
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let shared = Arc::clone(&shared);
            let requests = requests.clone();
            let h2 = request.version() == hyper::Version::HTTP_2;
            let http10 = Http10::of(&request);
            let watch = Arc::new(Watch::new(h2));
            let busy = seen.begin(&watch);
            if h2 {
                // The stream's task, which hyper makes next, ends when the
                // watch stops it.
                *for_streams.lock().unwrap_or_else(PoisonError::into_inner) = Some(watch.token());
            }
            let mut unanswered = StopUnlessAnswered(Some(Arc::clone(&watch)));
            async move {
                // The request's place among the server's, taken once its
                // address's share let it in: a client past its share
                // holds none of the server's.
                let mut permit = None;
                let mut response = shared
                    .handle(request, tls, peer, &watch, &requests, &mut permit)
                    .await;
                unanswered.answered();
                if let Some(http10) = http10 {
                    http10.answer(&mut response);
                }
                Ok::<_, std::convert::Infallible>(response.map(|body| Holding {
                    body,
                    watch,
                    _busy: busy,
                    _permit: permit,
                }))
            }
        });
        let builder = self.builder(next_stream);
        let conn = builder.serve_connection(TokioIo::new(io), service);
        let mut conn = std::pin::pin!(conn);
        let mut closing = false;
        let idle = self.idle;
        loop {
            tokio::select! {
                ended = conn.as_mut() => return ended,
                stalled = activity.stalled(self.send_timeout) => {
                    tracing::debug!(target: "moat::http", %peer, "a client did not take its response: cutting it off");
                    stalled.done();
                    stalled.stop();
                    // HTTP/1.1 has nothing else on the connection: it goes.
                    // An HTTP/2 stream's task ends with the watch.
                    if !stalled.is_h2() {
                        return Ok(());
                    }
                }
                () = self.stopping.cancelled(), if !closing => {
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                }
                () = activity.idle_for(idle), if !closing => {
                    tracing::debug!(target: "moat::http", "closing an idle connection");
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                }
                // HTTP/2's graceful close waits for the client to answer a
                // PING; one that never does is dropped an idle time later.
                () = activity.idle_for(idle + idle), if closing => {
                    tracing::debug!(target: "moat::http", "dropping a connection that did not close");
                    return Ok(());
                }
            }
        }
    }
}
