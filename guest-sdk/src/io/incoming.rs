//! A cancel-safe reader over a host `stream<u8>` and the report of its end.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use wit_bindgen::{StreamRead, StreamReader, StreamResult};

use super::Report;

/// Bytes a read asks the host for when the caller gives no size: one 64 KiB
/// chunk, the size the host's own direct reads are tuned for.
pub(crate) const READ_CHUNK: usize = 64 * 1024;

/// The reading end of a byte stream from the host, with the [`Report`] that
/// tells how it ended (`Ok` at end of stream, or an error of type `E`).
///
/// Reads are cancel-safe: a read that is dropped while the host is filling
/// it gives its bytes back here (they come first on the next read), so
/// racing a read against a timer loses nothing.
///
/// Until the stream is opened it is one null pointer: an idle socket that
/// was never read costs the guest nothing more.
pub(crate) struct Incoming<E: 'static>(Option<Box<State<E>>>);

struct State<E: 'static> {
    stream: Option<StreamReader<u8>>,
    outcome: Option<Report<E>>,
    rescued: Rescued,
    /// `Some` once the stream has ended: how it ended.
    ended: Option<Result<(), E>>,
}

/// Bytes taken back from a cancelled read, handed out from a cursor.
#[derive(Default)]
struct Rescued {
    bytes: Vec<u8>,
    at: usize,
}

impl<E: Clone + 'static> Incoming<E> {
    /// A reader that will open its stream on the first read.
    pub(crate) fn new() -> Incoming<E> {
        Incoming(None)
    }

    /// Whether the stream has been opened.
    pub(crate) fn is_open(&self) -> bool {
        self.0.is_some()
    }

    /// Bytes taken back from cancelled reads and not read since: the next
    /// bytes of the stream. Leaves the reader empty (unopened), for a
    /// socket whose transport changes under it (STARTTLS).
    pub(crate) fn take_unread(&mut self) -> Vec<u8> {
        match self.0.take() {
            Some(state) => state.rescued.bytes[state.rescued.at..].to_vec(),
            None => Vec::new(),
        }
    }

    /// Puts `bytes` back in front of the stream: the next read returns
    /// them first. For readers that took more than they consumed.
    pub(crate) fn unread(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if let Some(state) = self.0.as_deref_mut() {
            let rescued = &mut state.rescued;
            let mut front = Vec::with_capacity(bytes.len() + rescued.bytes.len() - rescued.at);
            front.extend_from_slice(bytes);
            front.extend_from_slice(&rescued.bytes[rescued.at..]);
            *rescued = Rescued {
                bytes: front,
                at: 0,
            };
        }
    }

    /// Opens the stream with what the host returned.
    pub(crate) fn open(&mut self, stream: StreamReader<u8>, outcome: Report<E>) {
        self.0 = Some(Box::new(State {
            stream: Some(stream),
            outcome: Some(outcome),
            rescued: Rescued::default(),
            ended: None,
        }));
    }

    /// Opens the reader already ended with `error` (the host refused the
    /// stream): every read reports it.
    pub(crate) fn fail(&mut self, error: E) {
        self.0 = Some(Box::new(State {
            stream: None,
            outcome: None,
            rescued: Rescued::default(),
            ended: Some(Err(error)),
        }));
    }

    /// Reads into `buf`: the number of bytes, 0 at end of stream.
    pub(crate) async fn read(&mut self, buf: &mut [u8]) -> Result<usize, E> {
        if buf.is_empty() {
            return Ok(0);
        }
        if let Some(n) = self.0.as_mut().and_then(|s| s.rescued.take_into(buf)) {
            return Ok(n);
        }
        let mut chunk = Vec::with_capacity(buf.len().min(READ_CHUNK));
        let n = self.read_buf(&mut chunk).await?;
        buf[..n].copy_from_slice(&chunk[..n]);
        Ok(n)
    }

    /// Appends to `buf`, into its spare capacity (reserving [`READ_CHUNK`]
    /// if it has none), with no copy: the host writes straight into it.
    pub(crate) async fn read_buf(&mut self, buf: &mut Vec<u8>) -> Result<usize, E> {
        let Some(state) = self.0.as_deref_mut() else {
            return Ok(0);
        };
        if let Some(n) = state.rescued.take_into_vec(buf) {
            return Ok(n);
        }
        if buf.capacity() == buf.len() {
            buf.reserve(READ_CHUNK);
        }
        loop {
            if let Some(end) = &state.ended {
                return end.clone().map(|()| 0);
            }
            let Some(stream) = state.stream.as_mut() else {
                return Ok(0);
            };
            let start = buf.len();
            let result = {
                let op = std::pin::pin!(stream.read(std::mem::take(buf)));
                Guarded {
                    op: Some(op),
                    out: &mut *buf,
                    start,
                    rescued: &mut state.rescued,
                }
                .await
            };
            match result {
                StreamResult::Complete(0) | StreamResult::Cancelled => continue,
                StreamResult::Complete(n) => return Ok(n),
                StreamResult::Dropped => {
                    let n = buf.len() - start;
                    state.stream = None;
                    let end = match state.outcome.take() {
                        Some(outcome) => outcome.end().await,
                        None => Ok(()),
                    };
                    state.ended = Some(end.clone());
                    // Bytes that came with the end are still data.
                    return if n > 0 { Ok(n) } else { end.map(|()| 0) };
                }
            }
        }
    }
}

impl Rescued {
    fn take_into(&mut self, buf: &mut [u8]) -> Option<usize> {
        let left = &self.bytes[self.at..];
        if left.is_empty() {
            return None;
        }
        let n = left.len().min(buf.len());
        buf[..n].copy_from_slice(&left[..n]);
        self.advance(n);
        Some(n)
    }

    fn take_into_vec(&mut self, buf: &mut Vec<u8>) -> Option<usize> {
        let left = &self.bytes[self.at..];
        if left.is_empty() {
            return None;
        }
        let room = buf.capacity() - buf.len();
        let n = if room == 0 {
            left.len()
        } else {
            left.len().min(room)
        };
        buf.extend_from_slice(&left[..n]);
        self.advance(n);
        Some(n)
    }

    fn advance(&mut self, n: usize) {
        self.at += n;
        if self.at == self.bytes.len() {
            // Free it: rescued bytes are rare, and an idle stream holds nothing.
            *self = Rescued::default();
        }
    }

    fn put(&mut self, bytes: &[u8]) {
        self.bytes.drain(..self.at);
        self.at = 0;
        self.bytes.extend_from_slice(bytes);
    }
}

/// A read in flight. If dropped before it completes, it cancels the read
/// and keeps whatever the host had already delivered (a guard, so this
/// holds on every path that drops it).
struct Guarded<'a, 'op> {
    /// The read, pinned in its caller's frame; `None` once it completed.
    op: Option<Pin<&'op mut StreamRead<'a, u8>>>,
    /// Where the buffer goes back to.
    out: &'a mut Vec<u8>,
    /// Its length before the read.
    start: usize,
    rescued: &'a mut Rescued,
}

impl Future for Guarded<'_, '_> {
    type Output = StreamResult;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<StreamResult> {
        let this = self.get_mut();
        let Some(op) = this.op.as_mut() else {
            return Poll::Ready(StreamResult::Cancelled);
        };
        let (result, buf) = ready!(op.as_mut().poll(cx));
        this.op = None;
        *this.out = buf;
        Poll::Ready(result)
    }
}

impl Drop for Guarded<'_, '_> {
    fn drop(&mut self) {
        if let Some(mut op) = self.op.take() {
            // The host may have completed the read just before we cancel:
            // those bytes are not lost, they wait for the next read.
            let (_result, mut buf) = op.as_mut().cancel();
            if buf.len() > self.start {
                self.rescued.put(&buf[self.start..]);
                buf.truncate(self.start);
            }
            *self.out = buf;
        }
    }
}
