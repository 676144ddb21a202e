//! The socket core: policy-checked TCP on tokio, with no wasmtime in sight.
//!
//! [`Net`] is one run's network: its [`Policy`] and the host tasks its
//! sockets spawn. Everything here is plain tokio, so it is tested with plain
//! tokio; the WIT glue in [`crate::bindings`] is a thin layer over it.
//!
//! - [`tcp`]: a connected socket, its reader and its writer.
//! - [`listen`]: a listener and its accept task.
//! - [`udp`]: datagram sockets (no task, no queue but the kernel's).
//! - [`error`]: [`NetError`], the WIT `error-code` as a Rust enum.

pub mod error;
pub mod listen;
mod resolve;
mod tasks;
pub mod tcp;
pub mod udp;

use std::sync::Arc;
use std::time::Duration;

pub use error::NetError;
pub use listen::{AcceptQueue, ListenOptions, TcpListener};
pub use tasks::PendingWrites;
pub use tcp::{ConnectOptions, Keepalive, Outcome, Reader, TcpConn, Writer};
pub use udp::{BindOptions, Datagram, MulticastInterface, UdpSocket};

use crate::policy::Policy;
use tasks::Tasks;

/// The network of one guest run: what it may do, and the tasks it spawned.
///
/// Cloning is cheap and shares both.
#[derive(Clone)]
pub struct Net {
    policy: Arc<Policy>,
    tasks: Tasks,
}

impl Net {
    /// A network governed by `policy`, with its own [`PendingWrites`] gauge.
    pub fn new(policy: Policy) -> Net {
        Net::with_pending_writes(policy, PendingWrites::new())
    }

    /// A network governed by `policy` that counts its sockets with queued
    /// bytes on `pending` (the host shares one gauge between runs).
    pub fn with_pending_writes(policy: Policy, pending: Arc<PendingWrites>) -> Net {
        Net {
            policy: Arc::new(policy),
            tasks: Tasks::new(pending),
        }
    }

    /// The policy every call is checked against.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Opens a TCP connection to `host`:`port`, `host` as the guest wrote it.
    ///
    /// The policy is checked first: a denied call resolves no name and makes
    /// no socket.
    ///
    /// # Errors
    /// [`NetError::Denied`]; [`NetError::InvalidArgument`] for a host that
    /// is not a name or canonical IP literal, port 0 or a bad option; the
    /// resolver's and the connection's errors.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the attempt and closes its socket.
    pub async fn connect(
        &self,
        host: &str,
        port: u16,
        options: &ConnectOptions,
    ) -> Result<TcpConn, NetError> {
        tcp::connect(&self.policy, &self.tasks, host, port, options).await
    }

    /// Listens on `host`:`port` (port 0: any free port).
    ///
    /// The policy is checked first: a denied call makes no socket and claims
    /// no port.
    ///
    /// # Errors
    /// [`NetError::Denied`]; [`NetError::InvalidArgument`]; the resolver's
    /// and the operating system's errors ([`NetError::AddressInUse`], ...).
    ///
    /// # Cancel safety
    /// Dropping the future before it resolves leaves nothing listening.
    pub async fn listen(
        &self,
        host: &str,
        port: u16,
        options: &ListenOptions,
    ) -> Result<TcpListener, NetError> {
        listen::listen(&self.policy, &self.tasks, host, port, options).await
    }

    /// Binds a UDP socket to `host`:`port` (port 0: any free port).
    ///
    /// Checked against the listen grant (an ephemeral port is still a
    /// port); every send is then checked against the connect grant.
    ///
    /// # Errors
    /// [`NetError::Denied`]; [`NetError::InvalidArgument`] (broadcast on
    /// IPv6, a malformed host); the resolver's and the OS's errors.
    pub async fn bind_udp(
        &self,
        host: &str,
        port: u16,
        options: &BindOptions,
    ) -> Result<UdpSocket, NetError> {
        udp::bind(&self.policy, host, port, options).await
    }

    /// Ends the run's network: waits up to `linger` for sockets to write
    /// out the bytes they still hold, then stops every remaining host task
    /// and waits until their sockets are closed.
    ///
    /// Call it after the guest's store (and so every socket it owned) is
    /// dropped.
    pub async fn finish(&self, linger: Duration) {
        self.tasks.finish(linger).await;
    }
}
