//! How a host stream tells the guest the way it ended.

use std::rc::Rc;

use wit_bindgen::FutureReader;

use crate::bindings::moat::net::tcp::TcpSocket;

/// Where a host stream's end is reported: how it ended, `Ok` at its end or
/// an error of type `E`.
pub(crate) enum Report<E: 'static> {
    /// A future the host resolves with the end (wasi:cli's streams).
    Future(FutureReader<Result<(), E>>),
    /// Asked of the socket once the stream has ended: one synchronous call
    /// (moat:net's `receive-outcome` or `send-outcome`), no future beside
    /// every stream. `None` from the socket means the stream ended without
    /// an outcome of its own (the socket is closing): an end, not an error.
    Ask(Rc<TcpSocket>, fn(&TcpSocket) -> Option<Result<(), E>>),
}

impl<E: 'static> Report<E> {
    /// How the stream ended; call it once the host has ended the stream.
    pub(crate) async fn end(self) -> Result<(), E> {
        match self {
            Report::Future(outcome) => outcome.await,
            Report::Ask(socket, ask) => ask(&socket).unwrap_or(Ok(())),
        }
    }
}
