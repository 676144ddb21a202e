//! STARTTLS: upgrading a plaintext socket in place, client or server side.

use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use rustls::pki_types::ServerName;

use super::{ServerTls, handshake_client, handshake_server};
use crate::net::error::NetError;
use crate::net::limits::SocketSlot;
use crate::net::tasks::Tasks;
use crate::net::tcp::io::Io;
use crate::net::tcp::{TcpConn, Upgrade};

/// A socket taken back for a TLS handshake (from
/// [`crate::net::Net::begin_tls_client`] or
/// [`crate::net::Net::begin_tls_server`]). Await
/// [`handshake`](Self::handshake), then give the result to
/// [`TcpConn::complete_upgrade`].
pub struct UpgradeToTls {
    upgrade: Upgrade,
    already_read: Vec<u8>,
    tasks: Tasks,
    side: Side,
}

enum Side {
    Client {
        name: ServerName<'static>,
        config: Arc<ClientConfig>,
        limit: Duration,
    },
    Server(ServerTls),
}

/// A finished handshake, ready to go back into its socket.
pub struct Handshaken {
    io: Io,
    tasks: Tasks,
    slot: SocketSlot,
}

impl UpgradeToTls {
    pub(crate) fn client(
        conn: &mut TcpConn,
        name: ServerName<'static>,
        config: Arc<ClientConfig>,
        already_read: Vec<u8>,
        limit: Duration,
    ) -> Result<UpgradeToTls, NetError> {
        let side = Side::Client {
            name,
            config,
            limit,
        };
        UpgradeToTls::begin(conn, side, already_read)
    }

    pub(crate) fn server(
        conn: &mut TcpConn,
        tls: ServerTls,
        already_read: Vec<u8>,
    ) -> Result<UpgradeToTls, NetError> {
        UpgradeToTls::begin(conn, Side::Server(tls), already_read)
    }

    /// Takes `conn`'s socket for the upgrade (see [`TcpConn::begin_upgrade`]).
    fn begin(
        conn: &mut TcpConn,
        side: Side,
        already_read: Vec<u8>,
    ) -> Result<UpgradeToTls, NetError> {
        let tasks = conn.tasks()?;
        let upgrade = conn.begin_upgrade()?;
        Ok(UpgradeToTls {
            upgrade,
            already_read,
            tasks,
            side,
        })
    }

    /// Writes out what the guest wrote before the upgrade, then runs the
    /// handshake over the same connection, replaying `already_read` (bytes
    /// the guest had read past its protocol's go-ahead) ahead of the live
    /// socket.
    ///
    /// # Errors
    /// The TLS errors ([`NetError::CertificateUntrusted`], ...);
    /// [`NetError::TimedOut`] after the handshake timeout; the error that
    /// kept the queued bytes from being written.
    pub async fn handshake(self) -> Result<Handshaken, NetError> {
        let (stream, slot) = self.upgrade.into_parts().await?;
        let session = match self.side {
            Side::Client {
                name,
                config,
                limit,
            } => handshake_client(stream, self.already_read, name, config, limit).await?,
            Side::Server(tls) => handshake_server(&tls, stream, self.already_read).await?,
        };
        tracing::debug!(target: "moat::net", "tcp socket upgraded to tls");
        Ok(Handshaken {
            io: Io::tls(session),
            tasks: self.tasks,
            slot,
        })
    }
}

impl TcpConn {
    /// Ends an upgrade: with the handshake's session the socket is TLS from
    /// now on (fresh reader and writer); with its error the connection is
    /// gone and the socket reports [`NetError::Closed`].
    ///
    /// # Errors
    /// The handshake's error, passed through.
    pub fn complete_upgrade(
        &mut self,
        handshake: Result<Handshaken, NetError>,
    ) -> Result<(), NetError> {
        match handshake {
            Ok(Handshaken { io, tasks, slot }) => {
                self.finish_upgrade(io, tasks, slot);
                Ok(())
            }
            Err(e) => {
                self.fail_upgrade();
                Err(e)
            }
        }
    }
}
