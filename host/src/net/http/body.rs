//! The bodies of outgoing requests: a response body as the guest reads
//! it (hyper's, with the wait between two pieces bounded, and the
//! request's place among those in flight held until it ends), and a body
//! of the guest's that fails, rather than ends, when the guest left it
//! unfinished.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Sleep};

use super::exchange::Exchange;
use super::{BoxError, HttpError};
use crate::audit::HttpEnd;
use crate::net::budget::Charge;
use crate::net::secrets::Redactor;
use moat_policy::setting::Setting;

/// The body of a response to an outgoing request.
pub struct ResponseBody {
    incoming: Incoming,
    between_bytes: Duration,
    /// The run's cap on `between_bytes`, for the error.
    setting: Setting,
    timer: Pin<Box<Sleep>>,
    /// The request's place under the run's bound on requests in flight,
    /// and (over HTTP/2) its stream's send buffer paid from the run's host
    /// memory, given back at the body's end (or when it is dropped).
    permit: Option<(OwnedSemaphorePermit, Option<Charge>)>,
    /// The request's record on the audit trail, written at the body's
    /// end (or, dropped before, as abandoned).
    exchange: Exchange,
    /// With secrets in the run: each value the server sends back becomes
    /// its placeholder before the guest sees it.
    redactor: Option<Redactor>,
    /// A frame that waits for the one sent ahead of it: trailers, for the
    /// bytes the redactor held back; a chunk, for those held from the one
    /// before.
    pending: Option<Frame<Bytes>>,
}

impl ResponseBody {
    pub(super) fn new(
        incoming: Incoming,
        between_bytes: Duration,
        setting: Setting,
        permit: OwnedSemaphorePermit,
        stream: Option<Charge>,
        exchange: Exchange,
        redactor: Option<Redactor>,
    ) -> ResponseBody {
        ResponseBody {
            incoming,
            between_bytes,
            setting,
            timer: Box::pin(tokio::time::sleep(between_bytes)),
            permit: Some((permit, stream)),
            exchange,
            redactor,
            pending: None,
        }
    }
}

impl Drop for ResponseBody {
    /// A body the guest dropped once nothing was left of it ended; one
    /// dropped before is abandoned (the exchange's own drop).
    fn drop(&mut self) {
        if self.is_end_stream() {
            self.exchange.end(HttpEnd::Complete, None);
        }
    }
}

impl ResponseBody {
    /// `frame` as the guest may see it: each secret's value replaced by its
    /// placeholder; `None` when all its bytes are held back for now.
    fn redacted(&mut self, frame: Frame<Bytes>) -> Option<Frame<Bytes>> {
        let Some(redactor) = &mut self.redactor else {
            return Some(frame);
        };
        match frame.into_data() {
            Ok(data) => match redactor.feed(data) {
                (first, then) if first.is_empty() => (!then.is_empty()).then(|| Frame::data(then)),
                (first, then) => {
                    if !then.is_empty() {
                        self.pending = Some(Frame::data(then));
                    }
                    Some(Frame::data(first))
                }
            },
            Err(frame) => match frame.into_trailers() {
                // Bytes held back go before the trailers.
                Ok(mut trailers) => {
                    redactor.secrets().redact_head(&mut trailers);
                    match redactor.finish() {
                        Some(rest) => {
                            self.pending = Some(Frame::trailers(trailers));
                            Some(Frame::data(rest))
                        }
                        None => Some(Frame::trailers(trailers)),
                    }
                }
                Err(frame) => Some(frame),
            },
        }
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let this = &mut *self;
        if let Some(pending) = this.pending.take() {
            return Poll::Ready(Some(Ok(pending)));
        }
        loop {
            match Pin::new(&mut this.incoming).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    let next = Instant::now() + this.between_bytes;
                    this.timer.as_mut().reset(next);
                    if let Some(data) = frame.data_ref() {
                        this.exchange.received(data.len());
                    }
                    match this.redacted(frame) {
                        Some(frame) => return Poll::Ready(Some(Ok(frame))),
                        None => continue,
                    }
                }
                // Bytes the redactor held back go before the end.
                Poll::Ready(None)
                    if let Some(rest) = this.redactor.as_mut().and_then(Redactor::finish) =>
                {
                    return Poll::Ready(Some(Ok(Frame::data(rest))));
                }
                other => return this.settle(other, cx),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
            && self.pending.is_none()
            && !self.redactor.as_ref().is_some_and(Redactor::holds)
    }

    fn size_hint(&self) -> SizeHint {
        // A redacted body is as long: a placeholder is as long as its
        // value.
        self.incoming.size_hint()
    }
}

impl ResponseBody {
    /// What the body says when the connection gave no frame: its end, an
    /// error, or a wait (bounded by the between-bytes timeout).
    fn settle(
        &mut self,
        polled: Poll<Option<Result<Frame<Bytes>, hyper::Error>>>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        let this = self;
        match polled {
            Poll::Ready(Some(Ok(frame))) => Poll::Ready(Some(Ok(frame))),
            Poll::Ready(Some(Err(e))) => {
                this.permit = None;
                let failed = HttpError::Protocol(e);
                this.exchange.end(HttpEnd::Failed, Some(&failed));
                Poll::Ready(Some(Err(failed)))
            }
            Poll::Ready(None) => {
                this.permit = None;
                this.exchange.end(HttpEnd::Complete, None);
                Poll::Ready(None)
            }
            Poll::Pending => match this.timer.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    this.permit = None;
                    let failed = HttpError::BetweenBytesTimeout {
                        after: this.between_bytes,
                        setting: this.setting,
                    };
                    this.exchange.end(HttpEnd::Failed, Some(&failed));
                    Poll::Ready(Some(Err(failed)))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

/// Set once a body's writer has left it: the guest is gone (its store
/// dropped) or was stopped. A body that ends after this may have been cut
/// short.
#[derive(Clone, Debug, Default)]
pub struct Abandoned(Arc<AtomicBool>);

impl Abandoned {
    /// The writer has left; call before its bodies' sending ends are
    /// dropped.
    pub fn set(&self) {
        self.0.store(true, Ordering::Release);
    }

    fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// A body whose end counts only while its writer has not left it.
/// wasmtime-wasi-http's bodies, 0.2 and 0.3, request and response alike,
/// end cleanly when the guest's store is dropped with the body unfinished
/// (a trap, `--timeout`, or a guest that exits mid-body), so a peer would
/// take a body cut short for a whole one. With this, the body fails
/// instead, with `cut`'s error: hyper sends no last chunk (HTTP/1.1) or
/// resets the stream (HTTP/2), and drops what it still had queued of the
/// body. A body the guest finished just before it left, whose end hyper
/// had not read yet, fails too: the peer is told of a failure that lost
/// nothing, never the other way round.
///
/// It also drops the guest's empty writes: wasmtime-wasi-http 50.0.1 turns
/// each zero-length write into a data frame of no bytes, which hyper's
/// HTTP/2 side queues without waiting for flow control (GHSA-f8mm-ggr3-89wh,
/// fixed in its 50.0.2, which this build cannot have yet): a guest writing
/// nothing in a loop grew the host's heap without bound. A frame of no
/// bytes says nothing, so none reaches hyper, in either direction.
pub struct Unfinished<B: Body> {
    inner: B,
    abandoned: Abandoned,
    cut: fn() -> B::Error,
}

impl<B: Body> Unfinished<B> {
    /// `inner`, failing with `cut()` at its end if `abandoned` was set by
    /// then.
    pub fn new(inner: B, abandoned: Abandoned, cut: fn() -> B::Error) -> Unfinished<B> {
        Unfinished {
            inner,
            abandoned,
            cut,
        }
    }
}

/// Empty frames [`Unfinished`] skips in one poll before it yields.
const EMPTY_FRAMES_AT_ONCE: usize = 64;

/// The error of a guest's request body that it left unfinished.
pub fn request_cut_short() -> BoxError {
    Box::new(HttpError::RequestBody(
        "the guest was gone before its request body ended".to_owned(),
    ))
}

impl<B: Body<Data = Bytes> + Unpin> Body for Unfinished<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        // A run of empty frames gives the task back now and then, as a
        // body that is never ready would.
        for _ in 0..EMPTY_FRAMES_AT_ONCE {
            return match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) if frame.data_ref().is_some_and(Bytes::is_empty) => {
                    continue;
                }
                Poll::Ready(None) if self.abandoned.get() => {
                    tracing::debug!(target: "moat::http", "a body's writer left it unfinished");
                    Poll::Ready(Some(Err((self.cut)())))
                }
                polled => polled,
            };
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        // wasmtime-wasi-http's streamed bodies never say they ended before
        // their end is polled (which is where the check above runs); an
        // empty body the guest never wrote does, and has nothing to lose.
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A guest's request body held to the length its `Content-Length`
/// declares: a data frame that would carry it past fails in its place.
/// hyper writes only the declared part of such a frame, a whole request to
/// the server, which would act on a body whose write the guest was told
/// failed; failed here, the request is cut off before its end instead.
/// (A body that ends short is wasmtime-wasi-http's to refuse, and is.)
pub struct Declared<B: Body> {
    inner: B,
    declared: u64,
    sent: u64,
    longer: fn(u64) -> B::Error,
}

impl<B: Body> Declared<B> {
    /// `inner`, failing with `longer(declared)` before a frame that would
    /// carry it past `declared` bytes.
    pub fn new(inner: B, declared: u64, longer: fn(u64) -> B::Error) -> Declared<B> {
        Declared {
            inner,
            declared,
            sent: 0,
            longer,
        }
    }
}

/// The error of a guest's request body longer than it declared.
pub fn request_longer_than_declared(declared: u64) -> BoxError {
    Box::new(HttpError::RequestBody(format!(
        "the guest's request body is longer than its Content-Length of {declared} bytes"
    )))
}

impl<B: Body<Data = Bytes> + Unpin> Body for Declared<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            let sent = self.sent.saturating_add(data.len() as u64);
            if sent > self.declared {
                tracing::debug!(target: "moat::http", declared = self.declared, "a request body longer than its Content-Length");
                return Poll::Ready(Some(Err((self.longer)(self.declared))));
            }
            self.sent = sent;
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

/// A body that holds a charge on the run's host memory for as long as it
/// lives: a wasi:http 0.2 outgoing body's buffer is paid until the body is
/// sent to its end or dropped, whoever holds it then (the guest's request,
/// the client's connection, a drain of a refused request).
pub(crate) struct ChargedBody<B> {
    inner: B,
    _charge: Charge,
}

impl<B> ChargedBody<B> {
    pub(crate) fn new(inner: B, charge: Charge) -> ChargedBody<B> {
        ChargedBody {
            inner,
            _charge: charge,
        }
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for ChargedBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt as _, StreamBody};

    /// A guest's zero-length writes never reach hyper as frames: a
    /// million of them, then one byte, come out as that one byte.
    #[tokio::test]
    async fn a_guests_empty_writes_are_not_frames() {
        let frames = std::iter::repeat_n(Bytes::new(), 1_000_000)
            .chain(std::iter::once(Bytes::from_static(b"x")))
            .map(|data| Ok::<_, BoxError>(Frame::data(data)));
        let body = StreamBody::new(futures::stream::iter(frames));
        let mut body = Unfinished::new(body, Abandoned::default(), request_cut_short);
        let mut seen = Vec::new();
        while let Some(frame) = body.frame().await {
            seen.push(frame.unwrap().into_data().unwrap());
        }
        assert_eq!(seen, vec![Bytes::from_static(b"x")]);
    }

    /// The frame that would carry a body past its declared length fails
    /// in its place; the frames before it, and a body within its length,
    /// pass whole.
    #[tokio::test]
    async fn a_body_longer_than_declared_fails_before_its_excess() {
        let frames = |parts: &[&'static [u8]]| {
            let parts: Vec<Result<Frame<Bytes>, BoxError>> = parts
                .iter()
                .map(|p| Ok(Frame::data(Bytes::from_static(p))))
                .collect();
            StreamBody::new(futures::stream::iter(parts))
        };
        let mut body = Declared::new(frames(&[b"abc", b"defg"]), 5, request_longer_than_declared);
        assert_eq!(
            body.frame().await.unwrap().unwrap().into_data().unwrap(),
            "abc"
        );
        let err = body.frame().await.unwrap().unwrap_err();
        assert!(
            err.to_string().contains("Content-Length of 5 bytes"),
            "{err}"
        );
        let mut body = Declared::new(frames(&[b"abc", b"de"]), 5, request_longer_than_declared);
        let mut seen = Vec::new();
        while let Some(frame) = body.frame().await {
            seen.extend_from_slice(&frame.unwrap().into_data().unwrap());
        }
        assert_eq!(seen, b"abcde");
    }
}
