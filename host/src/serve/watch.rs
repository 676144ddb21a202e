//! One request's watch: how its response is going to its client, and the
//! switch that stops its handler.
//!
//! A handler holds an instance (and its memory) until its response is
//! sent. A client that stops reading the response, pauses its request
//! body, or goes away must not keep it: each of those stops the handler
//! ([`Watch::stop`]), which drops its instance at once. Who throws the
//! switch:
//!
//! - the request body, when the client pauses longer than
//!   `--http-request-body-timeout` while the handler waits for it;
//! - the connection, when a piece of the response has waited longer than
//!   `--http-response-send-timeout` for the client to take it (hyper
//!   stops asking the body for more while it cannot write what it has);
//! - the response body, dropped before its end: the client reset the
//!   stream or closed the connection, or hyper will not send it.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How a response is going.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Progress {
    /// Nothing handed to hyper yet, or hyper asked for more and waits for
    /// the handler: the client is not the one waited on.
    Waiting,
    /// A piece was handed to hyper at this time, and hyper has not asked
    /// for the next since: it waits for the client to take what it has.
    Delivered(Instant),
    /// Ended (sent whole, or failed).
    Done,
}

/// One request's watch (see the module doc).
#[derive(Debug)]
pub(crate) struct Watch {
    stop: CancellationToken,
    progress: Mutex<Progress>,
    /// The request came over HTTP/2 (its stream can be reset alone).
    h2: bool,
}

impl Watch {
    pub(crate) fn new(h2: bool) -> Watch {
        Watch {
            stop: CancellationToken::new(),
            progress: Mutex::new(Progress::Waiting),
            h2,
        }
    }

    /// Whether the request came over HTTP/2.
    pub(crate) fn is_h2(&self) -> bool {
        self.h2
    }

    /// Stops the handler (once; later calls do nothing).
    pub(crate) fn stop(&self) {
        self.stop.cancel();
    }

    /// Resolves once the handler is to stop.
    pub(crate) fn stopped(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.stop.cancelled()
    }

    /// Whether the handler was stopped.
    pub(crate) fn is_stopped(&self) -> bool {
        self.stop.is_cancelled()
    }

    /// A token cancelled when the handler is to stop.
    pub(crate) fn token(&self) -> CancellationToken {
        self.stop.clone()
    }

    fn set(&self, progress: Progress) {
        *self.progress.lock().unwrap_or_else(PoisonError::into_inner) = progress;
    }

    /// hyper asked the response body for its next piece.
    pub(crate) fn asked(&self) {
        self.set(Progress::Waiting);
    }

    /// The response body handed hyper a piece.
    pub(crate) fn delivered(&self) {
        self.set(Progress::Delivered(Instant::now()));
    }

    /// The response body ended.
    pub(crate) fn done(&self) {
        self.set(Progress::Done);
    }

    /// Whether the response ended.
    pub(crate) fn is_done(&self) -> bool {
        *self.progress.lock().unwrap_or_else(PoisonError::into_inner) == Progress::Done
    }

    /// When the piece hyper holds will have waited `limit` for the client,
    /// if it holds one.
    pub(crate) fn stalls_at(&self, limit: Duration) -> Option<Instant> {
        match *self.progress.lock().unwrap_or_else(PoisonError::into_inner) {
            Progress::Delivered(at) => Some(at + limit),
            Progress::Waiting | Progress::Done => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn only_a_piece_the_client_has_not_taken_counts() {
        let watch = Watch::new(false);
        let limit = Duration::from_secs(30);
        assert_eq!(watch.stalls_at(limit), None, "waiting on the handler");
        watch.delivered();
        let at = watch.stalls_at(limit).expect("hyper holds a piece");
        assert_eq!(at, Instant::now() + limit);
        watch.asked();
        assert_eq!(watch.stalls_at(limit), None);
        watch.done();
        assert!(watch.is_done());
        assert!(!watch.stop.is_cancelled());
        watch.stop();
        watch.stopped().await;
    }
}
