//! Taking a socket back from its reader and writer, with nothing lost: for
//! STARTTLS, which wraps the same connection in TLS and puts it back.

use std::sync::Arc;

use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use super::io::Io;
use super::{Core, TcpConn, send};
use crate::net::error::NetError;
use crate::net::limits::SocketSlot;
use crate::net::tasks::Tasks;

/// A socket on its way to TLS: its reader and writer have ended (no FIN),
/// and the bytes the writer handed over are being written out. See
/// [`TcpConn::begin_upgrade`].
pub struct Upgrade {
    core: Arc<Core>,
    drain: Option<JoinHandle<()>>,
}

impl TcpConn {
    /// Takes the socket back for a protocol upgrade (STARTTLS): the reader
    /// and writer end (their streams finish as if the socket had closed,
    /// but no FIN is sent) and the socket waits, without its core, until
    /// [`finish_upgrade`](Self::finish_upgrade) gives it a new one. Await
    /// [`Upgrade::into_stream`] for the TCP stream.
    ///
    /// Nothing is lost in either direction: the reader never reads ahead,
    /// so every byte the guest has not read is still in the kernel; and
    /// every byte the guest wrote is written before the stream is handed
    /// over.
    ///
    /// # Errors
    /// [`NetError::InvalidState`] if the socket is already TLS, already
    /// being upgraded, or sending has ended (shutdown); the error that
    /// ended sending, if it failed. The socket is left as it was.
    pub fn begin_upgrade(&mut self) -> Result<Upgrade, NetError> {
        let core = self.core()?;
        if matches!(core.io, Io::Tls(_)) {
            return Err(NetError::InvalidState("the socket is already TLS".into()));
        }
        let drain = send::begin_reclaim(&mut core.state())?;
        core.end_streams();
        let core = self.core.take().ok_or(NetError::Closed)?;
        self.upgrading = true;
        // The socket now waits for its new core; dropping it meanwhile
        // drops the upgrade's stream, which closes the connection.
        std::mem::replace(&mut self.closer, super::Closer(None)).disarm();
        Ok(Upgrade { core, drain })
    }

    /// Gives a socket whose upgrade has finished its new transport (the TLS
    /// session), with fresh reader and writer state.
    pub(crate) fn finish_upgrade(&mut self, io: Io, tasks: Tasks, slot: SocketSlot) {
        self.install(io, tasks, slot);
    }

    /// Marks an upgrade that failed: the connection is gone, and every
    /// later call on the socket fails with [`NetError::Closed`].
    pub(crate) fn fail_upgrade(&mut self) {
        self.upgrading = false;
    }

    /// The run's tasks, for a socket built on this one's connection.
    pub(crate) fn tasks(&self) -> Result<Tasks, NetError> {
        Ok(self.core()?.tasks.clone())
    }

    /// Takes the socket back for good: as [`begin_upgrade`](Self::begin_upgrade),
    /// then returns the tokio stream, positioned exactly where the guest
    /// left it.
    ///
    /// # Errors
    /// As [`begin_upgrade`](Self::begin_upgrade) and [`Upgrade::into_stream`].
    ///
    /// # Cancel safety
    /// Not cancel-safe: if dropped before it resolves, the connection is
    /// closed (after its queued bytes).
    pub async fn reclaim(mut self) -> Result<TcpStream, NetError> {
        self.begin_upgrade()?.into_stream().await
    }
}

impl Upgrade {
    /// Waits until the writer's queued bytes are written, then returns the
    /// TCP stream.
    ///
    /// # Errors
    /// The error that kept the queued bytes from being written.
    ///
    /// # Cancel safety
    /// Not cancel-safe: dropped before it resolves, the connection closes.
    pub async fn into_stream(self) -> Result<TcpStream, NetError> {
        self.into_parts().await.map(|(stream, _)| stream)
    }

    /// As [`into_stream`](Self::into_stream), with the socket's place in
    /// the run's count, for the socket the stream goes back into.
    pub(crate) async fn into_parts(self) -> Result<(TcpStream, SocketSlot), NetError> {
        let Upgrade { core, drain } = self;
        if let Some(drain) = drain {
            // The drain ends once the backlog is written (or fails).
            let _ = drain.await;
        }
        send::reclaimed_outcome(&core.state())?;
        // The reader and writer hold the core weakly and the drain is over:
        // this is the last strong reference.
        let core = Arc::try_unwrap(core).map_err(|_| {
            NetError::InvalidState("the socket is still in use by a host task".into())
        })?;
        match core.io {
            Io::Plain(stream) => {
                tracing::debug!(target: "moat::net", local = ?stream.local_addr().ok(), "tcp socket taken back");
                Ok((stream, core.slot))
            }
            Io::Tls(_) => Err(NetError::InvalidState("the socket is already TLS".into())),
        }
    }
}
