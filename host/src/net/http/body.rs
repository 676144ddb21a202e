//! A response body as the guest reads it: hyper's, with the wait between
//! two pieces bounded, and the request's place among those in flight held
//! until it ends.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Sleep};

use super::HttpError;
use crate::net::budget::Charge;

/// The body of a response to an outgoing request.
pub struct ResponseBody {
    incoming: Incoming,
    between_bytes: Duration,
    timer: Pin<Box<Sleep>>,
    /// The request's place under the run's bound on requests in flight,
    /// and (over HTTP/2) its stream's send buffer paid from the run's host
    /// memory, given back at the body's end (or when it is dropped).
    permit: Option<(OwnedSemaphorePermit, Option<Charge>)>,
}

impl ResponseBody {
    pub(super) fn new(
        incoming: Incoming,
        between_bytes: Duration,
        permit: OwnedSemaphorePermit,
        stream: Option<Charge>,
    ) -> ResponseBody {
        ResponseBody {
            incoming,
            between_bytes,
            timer: Box::pin(tokio::time::sleep(between_bytes)),
            permit: Some((permit, stream)),
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
        match Pin::new(&mut this.incoming).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let next = Instant::now() + this.between_bytes;
                this.timer.as_mut().reset(next);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.permit = None;
                Poll::Ready(Some(Err(HttpError::Protocol(e))))
            }
            Poll::Ready(None) => {
                this.permit = None;
                Poll::Ready(None)
            }
            Poll::Pending => match this.timer.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    this.permit = None;
                    Poll::Ready(Some(Err(HttpError::BetweenBytesTimeout(
                        this.between_bytes,
                    ))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}
