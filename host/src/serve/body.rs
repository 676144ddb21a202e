//! A request body as the handler reads it: the client's, cut off past
//! the server's bound (with a flag so that the client is answered 413),
//! and ended when the client pauses longer than the server allows while
//! the handler waits (with a flag for 408, and the request's handler
//! stopped).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::Sleep;
use wasmtime_wasi_http::Error as WasiHttpError;

use super::watch::Watch;

/// A flag the body sets for the answer to read.
#[derive(Clone, Default)]
pub(crate) struct Flag(Arc<AtomicBool>);

impl Flag {
    pub(crate) fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Set when a body went past its bound.
pub(crate) type Exceeded = Flag;

/// Set when a client paused its body past the bound.
pub(crate) type Paused = Flag;

/// Set when a client's body came slower than `--min-http-body-rate`.
pub(crate) type Slow = Flag;

/// The wait a body may cost its handler before its rate counts: its first
/// second ([`moat_policy::limits::DEFAULT_MIN_HTTP_BODY_RATE`]).
const RATE_GRACE: Duration = Duration::from_secs(1);

/// The client's body, at most `max` bytes of it (the handler's read past
/// that fails with `HTTP-request-body-size`), with no pause longer than
/// `pause` while the handler waits for it (past it the read fails with
/// `connection-read-timeout`, and the request's handler is stopped). The
/// clock runs only while the handler waits: a handler that reads slowly,
/// or not at all, never makes its client look slow. Nor, counted on the
/// same clock, may the body come slower than `rate` bytes a second: all
/// its waits together may take [`RATE_GRACE`] and a second more for each
/// `rate` bytes it brought (past it the read fails as for a pause, with
/// `slow` set).
pub(crate) struct LimitedBody {
    incoming: Incoming,
    left: u64,
    max: u64,
    exceeded: Exceeded,
    pause: Duration,
    timer: Option<Pin<Box<Sleep>>>,
    paused: Paused,
    watch: Arc<Watch>,
    rate: u64,
    slow: Slow,
    /// The handler's waits so far, the one under way not included.
    waited: Duration,
    /// When the wait under way began.
    wait_began: Option<tokio::time::Instant>,
}

/// The bounds of a request body: its size, its longest pause and its
/// slowest rate (`--max-http-body-size`, `--http-request-body-timeout`,
/// `--min-http-body-rate`).
#[derive(Clone, Copy)]
pub(crate) struct BodyBounds {
    pub(crate) max: u64,
    pub(crate) pause: Duration,
    pub(crate) rate: u64,
}

/// What a body sets for the answer to read: which bound it went past.
#[derive(Clone, Default)]
pub(crate) struct BodyFlags {
    pub(crate) exceeded: Exceeded,
    pub(crate) paused: Paused,
    pub(crate) slow: Slow,
}

impl LimitedBody {
    pub(crate) fn new(
        incoming: Incoming,
        bounds: BodyBounds,
        flags: &BodyFlags,
        watch: Arc<Watch>,
    ) -> LimitedBody {
        LimitedBody {
            incoming,
            left: bounds.max,
            max: bounds.max,
            exceeded: flags.exceeded.clone(),
            pause: bounds.pause,
            timer: None,
            paused: flags.paused.clone(),
            watch,
            rate: bounds.rate,
            slow: flags.slow.clone(),
            waited: Duration::ZERO,
            wait_began: None,
        }
    }

    /// When the wait that began at `began` is past the pause bound, and
    /// when past the rate's (if that comes first).
    fn deadlines(
        &self,
        began: tokio::time::Instant,
    ) -> (tokio::time::Instant, Option<tokio::time::Instant>) {
        let pause_at = began + self.pause;
        let received = self.max - self.left;
        let rate_at = (self.rate > 0)
            .then(|| {
                let allowed =
                    RATE_GRACE + Duration::from_secs_f64(received as f64 / self.rate as f64);
                began + allowed.saturating_sub(self.waited)
            })
            .filter(|rate_at| *rate_at < pause_at);
        (pause_at, rate_at)
    }
}

impl Body for LimitedBody {
    type Data = Bytes;
    type Error = WasiHttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, WasiHttpError>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.incoming).poll_frame(cx);
        if polled.is_ready() {
            this.timer = None;
            if let Some(began) = this.wait_began.take() {
                this.waited += began.elapsed();
            }
        }
        match polled {
            Poll::Ready(Some(Ok(frame))) => {
                let len = frame.data_ref().map_or(0, |d| d.len() as u64);
                if len > this.left {
                    this.exceeded.set();
                    tracing::debug!(target: "moat::http", max = this.max, "request body past its bound");
                    return Poll::Ready(Some(Err(WasiHttpError::HttpRequestBodySize(Some(
                        this.max,
                    )))));
                }
                this.left -= len;
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(WasiHttpError::from(e)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                let began = *this
                    .wait_began
                    .get_or_insert_with(tokio::time::Instant::now);
                let (pause_at, rate_at) = this.deadlines(began);
                let timer = this.timer.get_or_insert_with(|| {
                    Box::pin(tokio::time::sleep_until(rate_at.unwrap_or(pause_at)))
                });
                if timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                if rate_at.is_some() {
                    tracing::debug!(target: "moat::http", rate = this.rate, "a client's request body came slower than the bound");
                    this.slow.set();
                } else {
                    tracing::debug!(target: "moat::http", pause = ?this.pause, "a client paused its request body past the bound");
                    this.paused.set();
                }
                this.watch.stop();
                Poll::Ready(Some(Err(WasiHttpError::ConnectionReadTimeout)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}

/// The error of a response body whose handler was stopped before it
/// ended it (see [`Unfinished`](crate::net::Unfinished), which the
/// handler's task arms when the handler ends in an error: a trap, or its
/// memory or time used up).
pub(crate) fn response_cut_short() -> WasiHttpError {
    WasiHttpError::InternalError(Some(
        "the handler was stopped before its response body ended".to_owned(),
    ))
}

/// A response body that says when it is over (read to its end, failed,
/// or dropped by hyper): a wasi:http 0.3 handler's store must go on
/// running until then, as its tasks write the body.
pub(crate) struct Watched<B> {
    inner: B,
    over: Option<tokio::sync::oneshot::Sender<()>>,
}

impl<B> Watched<B> {
    pub(crate) fn new(inner: B, over: tokio::sync::oneshot::Sender<()>) -> Watched<B> {
        Watched {
            inner,
            over: Some(over),
        }
    }
}

impl<B> Drop for Watched<B> {
    fn drop(&mut self) {
        if let Some(over) = self.over.take() {
            let _ = over.send(());
        }
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for Watched<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_))))
            && let Some(over) = self.over.take()
        {
            let _ = over.send(());
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
