//! A writer over a host `stream<u8>` and the report of its end.

use wit_bindgen::StreamWriter;

use super::Report;

/// The writing end of a byte stream to the host, with the [`Report`] that
/// tells how sending ended (`Ok` once everything was delivered, or an error
/// `E`).
///
/// Until the stream is opened it is one null pointer.
pub(crate) struct Outgoing<E: 'static>(Option<Box<State<E>>>);

struct State<E: 'static> {
    stream: Option<StreamWriter<u8>>,
    outcome: Option<Report<E>>,
    /// `Some` once sending has ended: how it ended.
    ended: Option<Result<(), E>>,
}

/// Why a write did not go through.
pub(crate) enum WriteError<E> {
    /// The host ended the stream with this error.
    Failed(E),
    /// The stream had already ended (shut down, or ended without error).
    Ended,
}

impl<E: Clone + 'static> Outgoing<E> {
    /// A writer that will open its stream on the first write.
    pub(crate) fn new() -> Outgoing<E> {
        Outgoing(None)
    }

    /// Whether the stream is open (or has ended).
    pub(crate) fn is_open(&self) -> bool {
        self.0.is_some()
    }

    /// Opens the stream with what the host returned.
    pub(crate) fn open(&mut self, stream: StreamWriter<u8>, outcome: Report<E>) {
        self.0 = Some(Box::new(State {
            stream: Some(stream),
            outcome: Some(outcome),
            ended: None,
        }));
    }

    /// Writes all of `data`, handing the buffer to the host without a copy;
    /// returns it emptied (capacity kept) for reuse.
    pub(crate) async fn write_all(&mut self, data: Vec<u8>) -> Result<Vec<u8>, WriteError<E>> {
        let Some(state) = self.0.as_deref_mut() else {
            return Err(WriteError::Ended);
        };
        let Some(stream) = state.stream.as_mut() else {
            return Err(state.ended_error());
        };
        let mut rest = stream.write_all(data).await;
        if rest.is_empty() {
            return Ok(rest);
        }
        // The host dropped the stream: its outcome says why.
        state.stream = None;
        let end = match state.outcome.take() {
            Some(outcome) => outcome.end().await,
            None => Ok(()),
        };
        state.ended = Some(end);
        rest.clear();
        Err(state.ended_error())
    }

    /// Ends the stream and waits for the host to deliver what it holds
    /// (for a stream whose end is a [`Report::Future`]; a socket's writer
    /// ends its stream with [`end_stream`](Self::end_stream) and asks the
    /// socket to shut down).
    pub(crate) async fn close(&mut self) -> Result<(), E> {
        let Some(state) = self.0.as_deref_mut() else {
            return Ok(());
        };
        if let Some(end) = &state.ended {
            return end.clone();
        }
        drop(state.stream.take());
        let end = match state.outcome.take() {
            Some(outcome) => outcome.end().await,
            None => Ok(()),
        };
        state.ended = Some(end.clone());
        end
    }

    /// Ends the stream without waiting: `Some` with how sending ended if
    /// it already had.
    pub(crate) fn end_stream(&mut self) -> Option<Result<(), E>> {
        let state = self.0.as_deref_mut()?;
        drop(state.stream.take());
        state.outcome = None;
        state.ended.clone()
    }

    /// Forgets the stream (the host has ended it), for a socket whose
    /// transport changes under it (STARTTLS).
    pub(crate) fn reset(&mut self) {
        self.0 = None;
    }

    /// Records that sending ended outside this writer (a shutdown call).
    pub(crate) fn mark_ended(&mut self, end: Result<(), E>) {
        self.0 = Some(Box::new(State {
            stream: None,
            outcome: None,
            ended: Some(end),
        }));
    }
}

impl<E: Clone + 'static> State<E> {
    fn ended_error(&self) -> WriteError<E> {
        match &self.ended {
            Some(Err(e)) => WriteError::Failed(e.clone()),
            _ => WriteError::Ended,
        }
    }
}
