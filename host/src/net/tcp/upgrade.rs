//! Upgrading a connection in place (STARTTLS), with nothing lost in either
//! direction.
//!
//! One verb, three steps, each its own type:
//!
//! 1. [`Net::upgrade_client`](crate::net::Net::upgrade_client) or
//!    [`Net::upgrade_server`](crate::net::Net::upgrade_server) checks the
//!    options, then takes the socket from its [`TcpConn`] (which is then
//!    [`Stage::Upgrading`](super::Stage)) and returns an [`Upgrade`].
//! 2. [`Upgrade::run`], outside the store, writes out what the guest wrote
//!    before, then runs the handshake on the same connection: an
//!    [`Upgraded`] transport, or the error.
//! 3. [`TcpConn::upgraded`] puts the outcome back: the connection is open
//!    again over TLS, or gone.
//!
//! Nothing is lost: the reader never reads ahead, so every byte the guest
//! has not read is still in the kernel (or in the `already_read` it hands
//! back, replayed ahead of the socket); and every byte the guest wrote is
//! written before the handshake starts.

use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use super::{Core, Stage, TcpConn, send};
use crate::net::error::NetError;
use crate::net::io::Io;
use crate::net::limits::{MAX_ALREADY_READ, SocketSlot};
use crate::net::tasks::Tasks;
use crate::net::tls::{ServerTls, handshake_client, handshake_server};
use moat_policy::setting::Setting;

/// A connection on its way to TLS: its reader and writer have ended (no
/// FIN), and the bytes the writer handed over are being written out. Await
/// [`run`](Self::run) and give its outcome to [`TcpConn::upgraded`].
///
/// Dropping it closes the connection (after its queued bytes).
pub struct Upgrade {
    core: Arc<Core>,
    /// The drain writing out the writer's backlog, if one runs.
    drain: Option<JoinHandle<()>>,
    /// Bytes the guest read past its protocol's go-ahead, replayed ahead of
    /// the socket.
    already_read: Vec<u8>,
    side: Side,
}

/// Which end of the handshake this side plays.
pub(crate) enum Side {
    Client {
        name: ServerName<'static>,
        config: Arc<ClientConfig>,
        limit: Duration,
        /// The run's setting that caps `limit`.
        cap: Setting,
    },
    Server(ServerTls),
}

/// A finished handshake: the connection's TLS transport, ready to go back
/// into its [`TcpConn`] with [`TcpConn::upgraded`].
pub struct Upgraded {
    io: Io,
    tasks: Tasks,
    slot: SocketSlot,
}

/// A socket taken out of its connection: what is left once the reader and
/// writer have ended and the backlog is written.
struct Detached {
    stream: TcpStream,
    tasks: Tasks,
    slot: SocketSlot,
}

impl TcpConn {
    /// Takes the socket for an upgrade to TLS (see the module docs).
    ///
    /// # Errors
    /// [`NetError::InvalidState`] if the connection is already TLS, already
    /// being upgraded, or sending has ended (shutdown); the error that
    /// ended sending, if it failed. The connection is left as it was.
    pub(crate) fn upgrade(
        &mut self,
        side: Side,
        already_read: Vec<u8>,
    ) -> Result<Upgrade, NetError> {
        if already_read.len() > MAX_ALREADY_READ {
            return Err(NetError::InvalidArgument(format!(
                "{} bytes already read before TLS; a TLS peer's first flight is at most {MAX_ALREADY_READ}",
                already_read.len()
            )));
        }
        let (core, drain) = self.detach()?;
        Ok(Upgrade {
            core,
            drain,
            already_read,
            side,
        })
    }

    /// Ends an upgrade: with its [`Upgraded`] transport the connection is
    /// open again, TLS from now on (fresh reader and writer); with its
    /// error the connection is gone and reports [`NetError::Closed`].
    ///
    /// # Errors
    /// The upgrade's error, passed through.
    pub fn upgraded(&mut self, outcome: Result<Upgraded, NetError>) -> Result<(), NetError> {
        match outcome {
            Ok(Upgraded { io, tasks, slot }) => {
                self.stage = Stage::Open(Core::new(io, tasks, slot));
                Ok(())
            }
            Err(e) => {
                self.stage = Stage::Gone;
                Err(e)
            }
        }
    }

    /// Takes the plaintext socket out for good: the reader and writer end
    /// (no FIN), the bytes the writer handed over are written, and the
    /// tokio stream comes back positioned exactly where the guest left it.
    ///
    /// # Errors
    /// [`NetError::InvalidState`] if the connection is TLS, being upgraded,
    /// or has ended sending; the error that ended sending, if it failed, or
    /// that kept the queued bytes from being written.
    ///
    /// # Cancel safety
    /// Not cancel-safe: if dropped before it resolves, the connection is
    /// closed (after its queued bytes).
    pub async fn into_stream(mut self) -> Result<TcpStream, NetError> {
        let (core, drain) = self.detach()?;
        Ok(settle(core, drain).await?.stream)
    }

    /// Ends the reader and writer (without a FIN) and takes the core out,
    /// leaving the connection [`Stage::Upgrading`].
    fn detach(&mut self) -> Result<(Arc<Core>, Option<JoinHandle<()>>), NetError> {
        let core = self.core()?;
        if matches!(core.io, Io::Tls(_)) {
            return Err(NetError::InvalidState("the socket is already TLS".into()));
        }
        let drain = send::stop_for_upgrade(&mut core.state())?;
        core.end_streams();
        match std::mem::replace(&mut self.stage, Stage::Upgrading) {
            Stage::Open(core) => Ok((core, drain)),
            // `core()` above saw it open.
            other => {
                self.stage = other;
                Err(NetError::Closed)
            }
        }
    }
}

impl Upgrade {
    /// Writes out what the guest wrote before the upgrade, then runs the
    /// handshake over the same connection, replaying the bytes the guest
    /// had already read ahead of the live socket.
    ///
    /// # Errors
    /// The TLS errors ([`NetError::CertificateUntrusted`], ...);
    /// [`NetError::TimedOut`] after the handshake timeout; the error that
    /// kept the queued bytes from being written.
    ///
    /// # Cancel safety
    /// Not cancel-safe: dropped before it resolves, the connection closes.
    pub async fn run(self) -> Result<Upgraded, NetError> {
        let Upgrade {
            core,
            drain,
            already_read,
            side,
        } = self;
        let Detached {
            stream,
            tasks,
            slot,
        } = settle(core, drain).await?;
        let session = match side {
            Side::Client {
                name,
                config,
                limit,
                cap,
            } => handshake_client(stream, already_read, name, config, limit, cap).await?,
            Side::Server(tls) => handshake_server(&tls, stream, already_read).await?,
        };
        tracing::debug!(target: "moat::net", "tcp socket upgraded to tls");
        Ok(Upgraded {
            io: Io::tls(session),
            tasks,
            slot,
        })
    }
}

/// Waits for the drain to write the backlog out, then takes the socket out
/// of its core.
async fn settle(core: Arc<Core>, drain: Option<JoinHandle<()>>) -> Result<Detached, NetError> {
    if let Some(drain) = drain {
        // The drain ends once the backlog is written (or fails).
        let _ = drain.await;
    }
    send::upgrade_outcome(&core.state())?;
    // The reader and writer hold the core weakly and the drain is over:
    // this is the last strong reference.
    let core = Arc::try_unwrap(core)
        .map_err(|_| NetError::InvalidState("the socket is still in use by a host task".into()))?;
    match core.io {
        Io::Plain(stream) => {
            tracing::debug!(target: "moat::net", local = ?stream.local_addr().ok(), "tcp socket taken out for an upgrade");
            Ok(Detached {
                stream,
                tasks: core.tasks,
                slot: core.slot,
            })
        }
        Io::Tls(_) => Err(NetError::InvalidState("the socket is already TLS".into())),
    }
}
