//! Binding a UDP socket, after the policy said yes, with its options.

use std::net::SocketAddr;
use std::sync::Arc;

use socket2::{Domain, Protocol, Socket, Type};

use super::UdpSocket;
use crate::audit::Operation;
use crate::net::error::NetError;
use crate::net::run::Run;

/// Options set at the bind, and only there: SO_REUSEPORT and SO_REUSEADDR
/// mean nothing after it, and the rest is configuration decided once.
///
/// On Linux a UDP socket with SO_REUSEADDR or SO_REUSEPORT may bind a port
/// another socket with the same flag holds, and then takes the unicast
/// datagrams meant for it (all of them, measured: the newer or more
/// specific socket wins). So a socket with either flag binds only a port
/// that no socket holds at that moment (`claim_unshared`): the flags let
/// later sockets (whose owners chose to share) join it, never let the
/// guest join a port someone else holds. Two sockets of one guest cannot
/// share a port either.
/// The address family decides which option carries `ttl`,
/// `multicast_ttl` and `multicast_loopback`: set on the wrong family they
/// would silently do nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BindOptions {
    /// SO_REUSEADDR.
    pub reuse_address: bool,
    /// SO_REUSEPORT.
    pub reuse_port: bool,
    /// IP_TTL (IPv4) or IPV6_UNICAST_HOPS (IPv6).
    pub ttl: Option<u8>,
    /// IP_MULTICAST_TTL (IPv4) or IPV6_MULTICAST_HOPS (IPv6).
    pub multicast_ttl: Option<u8>,
    /// IP_MULTICAST_LOOP (IPv4) or IPV6_MULTICAST_LOOP (IPv6).
    pub multicast_loopback: Option<bool>,
    /// SO_BROADCAST; an error on IPv6, which has no broadcast.
    pub broadcast: bool,
}

/// Checks the listen grant, then binds. See [`crate::net::Net::bind_udp`].
pub(crate) async fn bind(
    run: &Arc<Run>,
    host: &str,
    port: u16,
    options: &BindOptions,
) -> Result<UdpSocket, NetError> {
    let admitted = run.admit(Operation::UdpBind, host, port)?;
    let slot = run.slot_for(&admitted)?;
    let mut last = None;
    let resolved = run.addresses(&admitted).await?;
    for &addr in &resolved.addrs {
        match bind_one(addr, run.dual_stack_allowed(addr), options) {
            Ok(socket) => {
                let socket = tokio::net::UdpSocket::from_std(socket.into())?;
                let local = socket.local_addr().ok();
                run.allowed(&admitted, Some(&resolved), local)?;
                tracing::debug!(target: "moat::net", ?local, "udp socket bound");
                return Ok(UdpSocket::new(socket, Arc::clone(run), slot));
            }
            Err(e) => last = Some(e),
        }
    }
    let target = &admitted.host;
    let failed =
        last.unwrap_or_else(|| NetError::NameNotResolved(format!("{target}: no addresses")));
    run.failed(&admitted, Some(&resolved), &failed);
    Err(failed)
}

fn bind_one(addr: SocketAddr, dual_stack: bool, options: &BindOptions) -> Result<Socket, NetError> {
    let v6 = addr.is_ipv6();
    if v6 && options.broadcast {
        return Err(NetError::InvalidArgument(
            "IPv6 has no broadcast: broadcast cannot be set on an IPv6 socket".into(),
        ));
    }
    let addr = if options.reuse_address || options.reuse_port {
        claim_unshared(addr, dual_stack)?
    } else {
        addr
    };
    let socket = udp_socket(addr, dual_stack)?;
    if options.reuse_address {
        socket.set_reuse_address(true)?;
    }
    if options.reuse_port {
        socket.set_reuse_port(true)?;
    }
    if let Some(ttl) = options.ttl {
        if v6 {
            socket.set_unicast_hops_v6(ttl.into())?;
        } else {
            socket.set_ttl_v4(ttl.into())?;
        }
    }
    if let Some(ttl) = options.multicast_ttl {
        if v6 {
            socket.set_multicast_hops_v6(ttl.into())?;
        } else {
            socket.set_multicast_ttl_v4(ttl.into())?;
        }
    }
    if let Some(on) = options.multicast_loopback {
        if v6 {
            socket.set_multicast_loop_v6(on)?;
        } else {
            socket.set_multicast_loop_v4(on)?;
        }
    }
    if options.broadcast {
        socket.set_broadcast(true)?;
    }
    socket.bind(&addr.into())?;
    Ok(socket)
}

/// A nonblocking UDP socket for `addr`'s family.
fn udp_socket(addr: SocketAddr, dual_stack: bool) -> Result<Socket, NetError> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_nonblocking(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(!dual_stack)?;
    }
    Ok(socket)
}

/// `addr` (port 0: a free port chosen now) if no socket holds its port
/// there: a socket without either reuse flag can bind it, which the
/// kernel refuses while any socket (flags or not, on this address, a
/// wildcard or a more specific one) holds it. The probe closes before the
/// real bind; a socket another process binds with the flags in between
/// joined a port that was taken, by its own choice.
///
/// # Errors
/// [`NetError::AddressInUse`] (logged with why) if the port is held.
fn claim_unshared(addr: SocketAddr, dual_stack: bool) -> Result<SocketAddr, NetError> {
    let probe = udp_socket(addr, dual_stack)?;
    match probe.bind(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            tracing::debug!(target: "moat::net", %addr, "reuse flags refused: the port is held, and sharing it would take another socket's datagrams");
            return Err(NetError::AddressInUse);
        }
        Err(e) => return Err(e.into()),
    }
    let claimed = probe
        .local_addr()?
        .as_socket()
        .ok_or_else(|| NetError::InvalidArgument(format!("{addr}: not an IP socket")))?;
    Ok(claimed)
}
