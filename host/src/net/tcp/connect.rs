//! Reaching out: `connect`, after the policy said yes.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use socket2::{SockRef, TcpKeepalive};
use tokio::net::{TcpSocket, TcpStream};

use super::Keepalive;
use crate::audit::Operation;
use crate::net::error::NetError;
use crate::net::limits::SocketSlot;
use crate::net::options::buffer_size;
use crate::net::run::{Admitted, Run};
use crate::net::traffic::Opened;
use moat_policy::policy::{Capability, Host};

/// Options for [`crate::net::Net::connect`]. The default is what the
/// operating system does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectOptions {
    /// Give up after this long with [`NetError::TimedOut`]; covers name
    /// resolution and every address tried. Without it, the lookup has its
    /// own bound ([`crate::net::Limits::lookup_timeout`]) and each attempt
    /// the operating system's.
    pub timeout: Option<Duration>,
    /// Set TCP_NODELAY from the start.
    pub nodelay: bool,
    /// Enable keep-alive probing from the start.
    pub keepalive: Option<Keepalive>,
    /// SO_SNDBUF in bytes.
    pub send_buffer_size: Option<u64>,
    /// SO_RCVBUF in bytes.
    pub receive_buffer_size: Option<u64>,
}

/// Checks the policy, takes a socket slot, then resolves and connects;
/// returns the stream, the host as judged and its slot. See
/// [`crate::net::Net::connect`].
///
/// Dropping the future (or its timeout firing) drops the socket being
/// connected, which closes it: no attempt outlives its caller.
pub(crate) async fn connect_stream(
    run: &Run,
    host: &str,
    port: u16,
    options: &ConnectOptions,
) -> Result<(TcpStream, Host, SocketSlot), NetError> {
    let target = Host::parse(host)?;
    if port == 0 {
        return Err(NetError::InvalidArgument(
            "port 0 cannot be connected to".into(),
        ));
    }
    let admitted = run.admit_host(Operation::Connect, target, port)?;
    connect_admitted(run, &admitted, options).await
}

/// [`connect_stream`] after the policy said yes to the host as written: a
/// socket slot, the name's addresses that pass the deny lists, and the
/// first of them that connects; recorded on the audit trail with the
/// address used. The same cancel safety.
pub(crate) async fn connect_admitted(
    run: &Run,
    admitted: &Admitted,
    options: &ConnectOptions,
) -> Result<(TcpStream, Host, SocketSlot), NetError> {
    let (stream, host, slot, _) = connect_resolved(run, admitted, options).await?;
    Ok((stream, host, slot))
}

/// [`connect_admitted`], also giving what the name resolved to (as
/// [`Resolved::resolved`](crate::net::run::Resolved::resolved) keeps it: only when the run has an audit trail).
pub(crate) async fn connect_resolved(
    run: &Run,
    admitted: &Admitted,
    options: &ConnectOptions,
) -> Result<(TcpStream, Host, SocketSlot, Vec<IpAddr>), NetError> {
    // Validate before any syscall, so a bad option fails the same way
    // whatever the network does.
    let send_buffer = options.send_buffer_size.map(buffer_size).transpose()?;
    let receive_buffer = options.receive_buffer_size.map(buffer_size).transpose()?;
    let slot = run.slot_for(admitted)?;
    let target = &admitted.host;
    let mut resolved = None;
    let attempt = async {
        let addrs = &resolved.insert(run.addresses(admitted).await?).addrs;
        let mut last = None;
        for &addr in addrs {
            if admitted.own_listener && run.own_listeners.rule_for(addr).is_none() {
                // Admitted as the program's own listener, which closed
                // since: judged again, as the syscall is next.
                let denied = run
                    .policy
                    .decide(Capability::Connect, &admitted.host, admitted.port)
                    .err();
                if let Some(denied) = denied {
                    return Err(run.refused_for(
                        admitted.operation,
                        &admitted.host,
                        Some(admitted.port),
                        admitted.http.as_ref(),
                        denied.into(),
                    ));
                }
            }
            match connect_one(addr, options, send_buffer, receive_buffer).await {
                Ok(stream) => return Ok((stream, addr)),
                Err(e) => {
                    tracing::debug!(target: "moat::net", %addr, error = %e, "connect attempt failed");
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| NetError::NameNotResolved(format!("{target}: no addresses"))))
    };
    let attempted = match options.timeout {
        Some(limit) => tokio::time::timeout(limit, attempt)
            .await
            .unwrap_or_else(|_| {
                Err(NetError::timed_out(
                    format!(
                        "connect to {target}:{} took longer than {limit:?}, the connect's \
                         own timeout (its `timeout` option)",
                        admitted.port
                    ),
                    None,
                ))
            }),
        None => attempt.await,
    };
    let (stream, used) = match attempted {
        Ok(connected) => connected,
        Err(e) => {
            // A refusal, or a lookup that failed, was recorded where it
            // happened; a connect that failed is recorded here.
            if resolved.is_some() && !matches!(e, NetError::Denied(_)) {
                run.failed(admitted, resolved.as_ref(), &e);
            }
            return Err(e);
        }
    };
    run.allowed(admitted, resolved.as_ref(), Some(used))?;
    run.traffic.connection(Opened::Connected);
    tracing::debug!(
        target: "moat::net",
        host = %target, port = admitted.port, peer = %used, local = ?stream.local_addr().ok(),
        "connected"
    );
    let resolved = resolved.map(|r| r.resolved().to_vec()).unwrap_or_default();
    Ok((stream, target.clone(), slot, resolved))
}

async fn connect_one(
    addr: SocketAddr,
    options: &ConnectOptions,
    send_buffer: Option<u32>,
    receive_buffer: Option<u32>,
) -> Result<TcpStream, NetError> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    if let Some(size) = send_buffer {
        socket.set_send_buffer_size(size)?;
    }
    if let Some(size) = receive_buffer {
        socket.set_recv_buffer_size(size)?;
    }
    let stream = socket.connect(addr).await?;
    if options.nodelay {
        stream.set_nodelay(true)?;
    }
    if options.keepalive.is_some() {
        apply_keepalive(&stream, options.keepalive)?;
    }
    Ok(stream)
}

/// Applies keep-alive settings (`None` disables probing).
pub(super) fn apply_keepalive(
    stream: &TcpStream,
    config: Option<Keepalive>,
) -> Result<(), NetError> {
    let socket = SockRef::from(stream);
    let Some(config) = config else {
        return Ok(socket.set_keepalive(false)?);
    };
    let nonzero = |what: &str, d: Option<Duration>| match d {
        Some(d) if d.is_zero() => Err(NetError::InvalidArgument(format!(
            "keepalive {what} must be more than zero"
        ))),
        _ => Ok(d),
    };
    let mut keepalive = TcpKeepalive::new();
    if let Some(idle) = nonzero("idle", config.idle)? {
        keepalive = keepalive.with_time(idle);
    }
    if let Some(interval) = nonzero("interval", config.interval)? {
        keepalive = keepalive.with_interval(interval);
    }
    if let Some(retries) = config.retries {
        if retries == 0 {
            return Err(NetError::InvalidArgument(
                "keepalive retries must be more than zero".into(),
            ));
        }
        keepalive = keepalive.with_retries(retries);
    }
    Ok(socket.set_tcp_keepalive(&keepalive)?)
}
