//! The socket core: policy-checked TCP, UDP, TLS, name lookups and HTTP
//! on tokio, with no wasmtime in sight.
//!
//! [`Net`] is one run's network: its [`Policy`], its bounds and the host
//! tasks its sockets spawn, made once from a [`NetConfig`]. Everything here is plain tokio, so it is tested with plain
//! tokio; the WIT glue (`host/src/bindings`, private) is a thin layer over it.
//!
//! - `tcp`: a connected socket, its reader and its writer.
//! - `listen`: a listener and its accept task.
//! - `udp`: datagram sockets (no task, no queue but the kernel's).
//! - `tls`: TLS configurations, trust and handshakes, over the transport
//!   TCP and TLS share (`io`).
//! - `dns`: name lookups, the answers kept, and the names recorded for
//!   stock programs.
//! - `address_gate`: the policy for programs that name peers by address
//!   (wasi:sockets).
//! - `limits`: the host's fixed caps, the bounds a setting sets ([`Limits`],
//!   moat-policy's, re-exported here), and the slots that count sockets.
//! - `config`: [`NetConfig`], what a network is made from.
//! - `http`: the wasi:http client ([`HttpClient`]): its pool, its checks
//!   and its bodies.
//! - `error`: [`NetError`], the WIT `error-code` as a Rust enum.
//!
//! A run's shared state and the checks every call passes are in `run`
//! (private), the listeners a connect may reach without a grant (the
//! program's own) in `own_listeners`; the host tasks in `tasks`; the host-memory budget in
//! `budget`; what the guest sent and received in `traffic`; the checks of socket option values in `options`.

mod address_gate;
#[cfg(test)]
mod audit_tests;
pub(crate) mod budget;
mod config;
mod dns;
mod error;
mod http;
mod io;
pub mod limits;
mod listen;
mod options;
pub(crate) mod own_listeners;
pub mod prompt;
mod run;
pub mod secrets;
mod tasks;
mod tcp;
mod tls;
mod traffic;
mod udp;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub use address_gate::{AddressGate, AddressUse, LookupError, Notices};
pub use config::NetConfig;
pub use dns::{Addresses, Answer, AnswerLookup, Lookup, Resolver, SystemResolver};
pub(crate) use error::host_port;
pub use error::{LimitReached, NetError, TimedOut};
pub use http::{
    Abandoned, BoxError, HttpClient, HttpError, HttpRequestOptions, RequestBody, ResponseBody,
    Unfinished, request_cut_short,
};
pub(crate) use http::{ChargedBody, Declared, MIN_HTTP_HEADER_SIZE, request_longer_than_declared};
pub use limits::Limits;
pub use listen::{AcceptQueue, ListenOptions, TcpListener};
pub use secrets::{Secret, SecretMisplaced, Secrets};
pub use tasks::PendingWrites;
pub use tcp::{ConnectOptions, Keepalive, Reader, SideEnd, TcpConn, Upgrade, Upgraded, Writer};
pub use tls::{TlsClientOptions, TlsContext, TlsIdentity, TlsServerOptions, TlsTrust};
pub use traffic::{Direction, Opened, Traffic, Transport};
pub use udp::{BindOptions, Datagram, MulticastInterface, UdpSocket};

use tokio_rustls::TlsAcceptor;

use crate::audit::{self, Audit, Operation};
use moat_policy::policy::Policy;
use moat_policy::setting::Setting;
use run::Run;
use tasks::Tasks;

/// The network of one guest run: what it may do, what it may hold, and the
/// tasks it spawned.
///
/// Cloning is cheap and shares all of it.
#[derive(Clone)]
pub struct Net {
    run: Arc<Run>,
    tasks: Tasks,
    tls: Arc<TlsContext>,
    /// Made on first use, after the builder methods below set the run up.
    http: Arc<OnceLock<HttpClient>>,
}

impl Net {
    /// A network governed by `policy`, every bound at its default, with
    /// its own [`PendingWrites`] gauge.
    pub fn new(policy: Policy) -> Net {
        Net::build(NetConfig::new(policy), PendingWrites::new())
    }

    /// The network `config` describes, made once; it counts its sockets
    /// with queued bytes on `pending` (a host shares one gauge between
    /// runs).
    pub fn build(config: NetConfig, pending: Arc<PendingWrites>) -> Net {
        let NetConfig {
            policy,
            limits,
            resolver,
            tls_trust,
            audit,
            secrets,
            prompt,
            traffic,
        } = config;
        let tasks = Tasks::counting_into(pending, traffic.unwrap_or_default());
        tasks.set_close_linger(limits.close_linger);
        audit.cap(limits.max_audit_size, policy.spelling());
        let mut run = Run::new(policy, limits, resolver);
        run.traffic = Arc::clone(tasks.traffic());
        run.audit = audit;
        run.secrets = secrets;
        run.prompt = prompt.map(prompt::Prompting::new);
        let run = Arc::new(run);
        tasks.set_budget(Arc::clone(&run.budget));
        Net {
            run,
            tasks,
            tls: Arc::new(tls_trust.map(TlsContext::new).unwrap_or_default()),
            http: Arc::default(),
        }
    }

    /// The gate for this network's address-named sockets (wasi:sockets),
    /// sharing its policy, limits, socket count and lookups; denials are
    /// reported to `notices`.
    pub fn address_gate(&self, notices: Notices) -> AddressGate {
        AddressGate::new(Arc::clone(&self.run), notices)
    }

    /// The run's audit trail (off unless [`NetConfig::audit`] set one).
    pub fn audit(&self) -> &Audit {
        &self.run.audit
    }

    /// What this network's guest sent and received so far.
    pub fn traffic(&self) -> &Arc<Traffic> {
        &self.run.traffic
    }

    /// The limits every socket of this network counts against.
    pub fn limits(&self) -> &Limits {
        &self.run.limits
    }

    /// Host memory this network's guest makes the host keep now, in bytes
    /// (what [`Limits::max_host_memory`] bounds).
    pub fn host_memory_used(&self) -> usize {
        self.run.budget.used()
    }

    /// The setting that caps every TLS handshake of the run.
    fn handshake_cap(&self) -> Setting {
        Setting::TlsHandshakeTimeout
    }

    /// The policy every call is checked against.
    pub fn policy(&self) -> &Policy {
        &self.run.policy
    }

    /// The words the run's refusals are shown in (its policy's
    /// [`Spelling`](moat_policy::setting::Spelling)): the edges that show
    /// one (the guest's error, a notice, a record, a reply) render it so.
    pub(crate) fn words(&self) -> moat_policy::setting::Spelling {
        self.run.words()
    }

    /// The run's host-memory budget.
    pub(crate) fn budget(&self) -> &Arc<budget::Budget> {
        &self.run.budget
    }

    /// The run's HTTP client (wasi:http guests): its requests are judged
    /// as this network's connects are, count against its sockets and host
    /// memory, and keep their connections alive in one pool per client.
    /// See [`HttpClient::send`]. Every clone of this network shares one
    /// client (and so one pool).
    pub fn http_client(&self) -> HttpClient {
        self.http
            .get_or_init(|| {
                HttpClient::new(
                    Arc::clone(&self.run),
                    Arc::clone(&self.tls),
                    self.tasks.clone(),
                )
            })
            .clone()
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
        let (stream, _, slot) = tcp::connect_stream(&self.run, host, port, options).await?;
        Ok(TcpConn::new(stream, self.tasks.clone(), slot))
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
        let admitted = self.run.admit(Operation::Listen, host, port)?;
        listen::listen(&self.run, &self.tasks, &admitted, options, None).await
    }

    /// Opens a TLS connection to `host`:`port`: the TCP connect (checked
    /// against the policy as [`connect`](Self::connect) is), then the
    /// handshake, before the socket is returned; a guest never sees a
    /// half-open TLS socket. The certificate is verified against `host` as
    /// written (SNI too; an IP literal sends no SNI and is checked against
    /// the certificate's IP addresses). `options.timeout` bounds connect and
    /// handshake together (the handshake alone is bounded by 10 s
    /// otherwise).
    ///
    /// # Errors
    /// [`connect`](Self::connect)'s, and [`NetError::CertificateUntrusted`],
    /// [`NetError::CertificateNameMismatch`], [`NetError::CertificateExpired`],
    /// [`NetError::TlsHandshake`]; [`NetError::InvalidArgument`] for unusable
    /// extra roots or client certificate.
    pub async fn connect_tls(
        &self,
        host: &str,
        port: u16,
        options: &ConnectOptions,
        tls: &TlsClientOptions,
    ) -> Result<TcpConn, NetError> {
        let attempt = async {
            // The policy first: a denied connect builds no configuration.
            if port == 0 {
                return Err(NetError::InvalidArgument(
                    "port 0 cannot be connected to".into(),
                ));
            }
            let admitted = self.run.admit(Operation::Connect, host, port)?;
            let config = self.tls.client_config(tls, &self.run.budget)?;
            let (stream, target, slot) = tcp::connect_admitted(
                &self.run,
                &admitted,
                &ConnectOptions {
                    timeout: None,
                    ..options.clone()
                },
            )
            .await?;
            let name = tls::server_name(&target)?;
            let session = tls::handshake_client(
                stream,
                Vec::new(),
                name,
                config,
                limits::DEFAULT_TLS_HANDSHAKE_TIMEOUT.min(self.run.limits.tls_handshake_timeout),
                self.handshake_cap(),
            )
            .await?;
            Ok(TcpConn::with_io(
                io::Io::tls(session),
                self.tasks.clone(),
                slot,
            ))
        };
        match options.timeout {
            Some(limit) => tokio::time::timeout(limit, attempt).await.map_err(|_| {
                NetError::timed_out(
                    format!(
                        "TLS connect to {} took longer than {limit:?}, the connect's own \
                         timeout (its `timeout` option)",
                        error::host_port(host, port)
                    ),
                    None,
                )
            })?,
            None => attempt.await,
        }
    }

    /// Listens for TLS connections: as [`listen`](Self::listen), and every
    /// accepted connection is handed out after its handshake. The
    /// certificate and key are parsed here, before the port is claimed.
    ///
    /// # Errors
    /// [`listen`](Self::listen)'s; [`NetError::InvalidArgument`] for an
    /// unusable certificate, key or client roots (no port claimed).
    pub async fn listen_tls(
        &self,
        host: &str,
        port: u16,
        options: &ListenOptions,
        tls: &TlsServerOptions,
    ) -> Result<TcpListener, NetError> {
        // The policy first: a denied listen builds no configuration.
        let admitted = self.run.admit(Operation::Listen, host, port)?;
        let config = self.tls.server_config(tls, &self.run.budget)?;
        let server = tls::ServerTls::new(
            config,
            tls,
            self.run.limits.tls_handshake_timeout,
            self.handshake_cap(),
        );
        listen::listen(&self.run, &self.tasks, &admitted, options, Some(server)).await
    }

    /// A TLS acceptor for a server of the host's own (`moat serve
    /// --tls-cert`), from `options`; built and paid for as a guest's
    /// listener's configuration is.
    ///
    /// # Errors
    /// [`NetError::InvalidArgument`] for an unusable certificate or key.
    pub fn tls_acceptor(&self, options: &TlsServerOptions) -> Result<TlsAcceptor, NetError> {
        let config = self.tls.server_config(options, &self.run.budget)?;
        Ok(TlsAcceptor::from(config))
    }

    /// Starts a client-side STARTTLS upgrade of `conn`, verifying the server
    /// as `server_name` (see [`tcp::Upgrade`]). Options are checked first:
    /// if they are unusable the socket is left as it was.
    ///
    /// # Errors
    /// [`NetError::InvalidArgument`] for a bad name or options;
    /// [`NetError::InvalidState`] if `conn` is already TLS or has ended sending.
    pub fn upgrade_client(
        &self,
        conn: &mut TcpConn,
        server_name: &str,
        already_read: Vec<u8>,
        tls: &TlsClientOptions,
    ) -> Result<Upgrade, NetError> {
        let host = moat_policy::policy::Host::parse(server_name)?;
        let name = tls::server_name(&host)?;
        let config = self.tls.client_config(tls, &self.run.budget)?;
        let port = conn.peer_addr()?.port();
        self.record_upgrade(conn, host, port)?;
        let limit =
            limits::DEFAULT_TLS_HANDSHAKE_TIMEOUT.min(self.run.limits.tls_handshake_timeout);
        let side = tcp::upgrade::Side::Client {
            name,
            config,
            limit,
            cap: self.handshake_cap(),
        };
        conn.upgrade(side, already_read)
    }

    /// Starts a server-side STARTTLS upgrade of `conn`. The certificate and
    /// key are checked first: if they are unusable the socket is left as
    /// it was.
    ///
    /// # Errors
    /// As [`upgrade_client`](Self::upgrade_client).
    pub fn upgrade_server(
        &self,
        conn: &mut TcpConn,
        already_read: Vec<u8>,
        tls: &TlsServerOptions,
    ) -> Result<Upgrade, NetError> {
        let config = self.tls.server_config(tls, &self.run.budget)?;
        let server = tls::ServerTls::new(
            config,
            tls,
            self.run.limits.tls_handshake_timeout,
            self.handshake_cap(),
        );
        let local = conn.local_addr()?;
        self.record_upgrade(
            conn,
            moat_policy::policy::Host::ip(local.ip()),
            local.port(),
        )?;
        conn.upgrade(tcp::upgrade::Side::Server(server), already_read)
    }

    /// Records a STARTTLS upgrade of `conn` on the audit trail: `host` and
    /// `port` are the server's name as the guest wrote it and the port it
    /// connected to (a client), or this side's address and port (a
    /// server); the address is the peer's. No grant is asked: the
    /// connection's connect or listen was judged.
    fn record_upgrade(
        &self,
        conn: &TcpConn,
        host: moat_policy::policy::Host,
        port: u16,
    ) -> Result<(), NetError> {
        let peer = conn.peer_addr().ok();
        self.run
            .audit
            .record(|| {
                let mut event = audit::Event::new(
                    Operation::TlsUpgrade,
                    &host,
                    Some(port),
                    audit::Outcome::Allowed { rule: None },
                );
                event.address = peer;
                event
            })
            .map_err(NetError::from)
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
        udp::bind(&self.run, host, port, options).await
    }

    /// Ends the run's network: waits up to `linger` for sockets to write
    /// out the bytes they still hold, then stops every remaining host task
    /// and waits until their sockets are closed.
    ///
    /// Call it after the guest's store (and so every socket it owned) is
    /// dropped.
    pub async fn finish(&self, linger: Duration) {
        if let Some(http) = self.http.get() {
            http.close();
        }
        self.tasks.finish(linger).await;
    }
}
