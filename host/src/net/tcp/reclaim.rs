//! Taking a socket back from its reader and writer, with nothing lost.

use std::sync::Arc;

use tokio::net::TcpStream;

use super::{TcpConn, send};
use crate::net::error::NetError;

impl TcpConn {
    /// Takes the socket back for a protocol upgrade (STARTTLS): the reader
    /// and writer end (their streams finish as if the socket had closed, but
    /// no FIN is sent), the bytes the writer already handed over are written
    /// out, and the tokio stream is returned, positioned exactly where the
    /// guest left it.
    ///
    /// Nothing is lost in either direction: the reader never reads ahead,
    /// so every byte the guest has not read is still in the kernel and will
    /// be the first read from the returned stream; and every byte the guest
    /// wrote is on its way before this returns.
    ///
    /// # Errors
    /// [`NetError::InvalidState`] if sending already ended (shutdown); the
    /// error that kept the queued bytes from being written. The socket is
    /// closed on error.
    ///
    /// # Cancel safety
    /// Not cancel-safe: if dropped before it resolves, the socket is closed
    /// (after its queued bytes).
    pub async fn reclaim(self) -> Result<TcpStream, NetError> {
        let drain = {
            let mut state = self.core.state();
            send::begin_reclaim(&mut state)?
        };
        self.core.end_streams();
        if let Some(drain) = drain {
            // The drain ends once the backlog is written (or fails).
            let _ = drain.await;
        }
        send::reclaimed_outcome(&self.core.state())?;
        let TcpConn { closer, core } = self;
        closer.disarm();
        // The reader and writer hold the core weakly and the drain is over:
        // this is the last strong reference.
        let core = Arc::try_unwrap(core).map_err(|_| {
            NetError::InvalidState("the socket is still in use by a host task".into())
        })?;
        tracing::debug!(target: "moat::net", local = ?core.stream.local_addr().ok(), "tcp socket reclaimed");
        Ok(core.stream)
    }
}
