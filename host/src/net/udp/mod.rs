//! UDP sockets: no task, and no queue but the kernel's.
//!
//! A TCP stream delivers bytes whether or not anyone is asking, so
//! something has to be reading. A datagram socket already has that buffer,
//! the kernel's receive queue, and a second queue in front of it would only
//! add a place for datagrams to be dropped where the program cannot see it.
//! So there is no task and no channel: the socket is shared, each receive
//! waits for the socket to be readable and then reads, and concurrent
//! receives race for the next datagram, which is correct. Nothing here
//! bounds the queue but the kernel: a guest that stops receiving has
//! datagrams dropped by the OS, as any UDP program does.
//!
//! A waiting receive holds no buffer: it borrows one from the socket's pool
//! only for the read itself, which does not wait. So however many receives
//! a guest parks, the host holds at most
//! [`POOL_KEEP`](crate::net::limits::POOL_KEEP) buffers per socket
//! between reads.
//!
//! The one piece of machinery is closing. A parked receive holds the socket
//! itself, so dropping the owner's handle cannot end it; `close` sets a flag
//! and rings a bell ([`Notify`]), and a receive registers for the bell before
//! it reads the flag. A close landing between the two is seen by one or the
//! other, never by neither: a receive on a socket nobody sends to ends when
//! the socket closes.

mod bind;
mod pool;

use std::net::{IpAddr, SocketAddr};
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

use super::error::NetError;
use super::limits::SocketSlot;
use super::run::{Admitted, Resolved, Run};
use super::traffic::Direction;
use crate::audit::Operation;
use moat_policy::policy::Host;

/// Where a datagram goes, as judged: the address, and the decision for
/// the audit trail.
struct Destination {
    addr: SocketAddr,
    admitted: Admitted,
    resolved: Option<Resolved>,
}

pub use bind::BindOptions;
pub(crate) use bind::bind;

/// The largest UDP payload IPv4 can carry: 65,535 − 20 (IP header) − 8
/// (UDP header).
pub(crate) const MAX_DATAGRAM_V4: usize = 65_507;

/// The largest datagram any UDP socket can send: IPv6's 65,535-byte
/// payload less the UDP header. A longer one is refused before its
/// destination is judged, so no call holds more.
pub(crate) const MAX_DATAGRAM: usize = 65_527;

/// A datagram received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    /// The payload (an exact-size copy: the receive buffer goes back to
    /// the pool).
    pub data: Vec<u8>,
    /// Who sent it.
    pub from: SocketAddr,
    /// It did not fit in the receive buffer (`RECEIVE_BUFFER`): the rest is gone.
    pub truncated: bool,
}

/// The interface a multicast membership is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MulticastInterface {
    /// The system's choice.
    Any,
    /// An IPv4 interface, by one of its addresses.
    Address(IpAddr),
    /// An IPv6 interface, by index.
    Index(u32),
}

/// A bound UDP socket. Cloning gives another handle to the same socket;
/// [`close`](Self::close) closes it for every handle.
#[derive(Clone)]
pub struct UdpSocket {
    shared: Arc<Shared>,
}

struct Shared {
    socket: tokio::net::UdpSocket,
    local: SocketAddr,
    run: Arc<Run>,
    _slot: SocketSlot,
    closed: AtomicBool,
    close_bell: Notify,
    pool: pool::Pool,
}

impl UdpSocket {
    fn new(socket: tokio::net::UdpSocket, run: Arc<Run>, slot: SocketSlot) -> UdpSocket {
        let local = socket
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let pool = pool::Pool::new(Arc::clone(&run.budget));
        UdpSocket {
            shared: Arc::new(Shared {
                socket,
                local,
                run,
                _slot: slot,
                closed: AtomicBool::new(false),
                close_bell: Notify::new(),
                pool,
            }),
        }
    }

    /// The bound address.
    ///
    /// # Errors
    /// [`NetError::Closed`] after [`close`](Self::close).
    pub fn local_addr(&self) -> Result<SocketAddr, NetError> {
        self.check_open()?;
        Ok(self.shared.local)
    }

    /// Closes the socket: receives waiting now or later fail with
    /// [`NetError::Closed`]. The descriptor is released once the last
    /// receive has woken.
    pub fn close(&self) {
        if !self.shared.closed.swap(true, Ordering::AcqRel) {
            self.shared.close_bell.notify_waiters();
            tracing::debug!(target: "moat::net", local = %self.shared.local, "udp socket closed");
        }
    }

    fn check_open(&self) -> Result<(), NetError> {
        if self.shared.closed.load(Ordering::Acquire) {
            Err(NetError::Closed)
        } else {
            Ok(())
        }
    }

    /// Waits for the next datagram.
    ///
    /// # Errors
    /// [`NetError::Closed`] once the socket is closed; what the OS reports.
    ///
    /// # Cancel safety
    /// Cancel-safe: a datagram leaves the kernel's queue only when it is
    /// returned; a waiting receive holds no buffer.
    pub async fn receive(&self) -> Result<Datagram, NetError> {
        self.receive_one().await
    }

    /// Waits for the first datagram, then takes up to `max - 1` more that
    /// are already queued.
    ///
    /// # Errors
    /// [`NetError::InvalidArgument`] for `max` 0; as [`receive`](Self::receive).
    ///
    /// # Cancel safety
    /// Cancel-safe while waiting for the first datagram; once it has
    /// arrived the rest is taken without waiting.
    pub async fn receive_many(&self, max: usize) -> Result<Vec<Datagram>, NetError> {
        if max == 0 {
            return Err(NetError::InvalidArgument(
                "receive-many needs max of at least 1".into(),
            ));
        }
        let first = self.receive_one().await?;
        let mut all = Vec::with_capacity(max.min(64));
        all.push(first);
        let mut buf = self.shared.pool.take()?;
        while all.len() < max {
            match self.shared.socket.try_recv_from(&mut buf) {
                Ok((n, from)) => all.push(datagram(&buf, n, from)),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(all)
    }

    async fn receive_one(&self) -> Result<Datagram, NetError> {
        let _waiting = self.shared.run.waiting.enter("udp receive")?;
        // Register for the close bell before looking at the flag.
        let mut closing = pin!(self.shared.close_bell.notified());
        closing.as_mut().enable();
        self.check_open()?;
        loop {
            tokio::select! {
                biased;
                () = closing.as_mut() => return Err(NetError::Closed),
                ready = self.shared.socket.readable() => ready?,
            }
            // Readable: the read does not wait, so the buffer is on loan
            // only for it.
            let mut buf = self.shared.pool.take()?;
            match self.shared.socket.try_recv_from(&mut buf) {
                Ok((n, from)) => {
                    self.shared.run.traffic.datagram(Direction::Received, n);
                    return Ok(datagram(&buf, n, from));
                }
                // Another receive took the datagram: wait again.
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Sends one datagram to `host`:`port`, `host` as the guest wrote it.
    ///
    /// # Errors
    /// [`NetError::Denied`] (nothing is sent); [`NetError::InvalidArgument`];
    /// resolution and OS errors; [`NetError::Closed`].
    pub async fn send(&self, data: &[u8], host: &str, port: u16) -> Result<(), NetError> {
        let _held = self.hold(std::iter::once(data))?;
        let to = self.destination(host, port).await?;
        self.send_to(data, &to).await
    }

    /// Pays for datagrams the host keeps while their destinations are
    /// judged and looked up, after checking that each could be sent at
    /// all: a guest cannot park more than the run's host memory in calls
    /// that wait.
    ///
    /// # Errors
    /// [`NetError::DatagramTooLarge`] for one past [`MAX_DATAGRAM`];
    /// [`NetError::LimitReached`] past the run's host memory.
    fn hold<'a>(
        &self,
        datagrams: impl Iterator<Item = &'a [u8]> + Clone,
    ) -> Result<crate::net::budget::Charge, NetError> {
        if datagrams.clone().any(|d| d.len() > MAX_DATAGRAM) {
            return Err(NetError::DatagramTooLarge);
        }
        let bytes = datagrams.map(<[u8]>::len).sum();
        self.shared
            .run
            .budget
            .charge(bytes, "datagrams waiting to be sent")
    }

    /// Sends one datagram to `to`, judged by the policy as the IP literal
    /// it is (an IPv4 address on an IPv6 socket is sent to as mapped).
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub async fn send_to_addr(&self, data: &[u8], to: SocketAddr) -> Result<(), NetError> {
        self.check_open()?;
        if to.port() == 0 {
            return Err(NetError::InvalidArgument("port 0 cannot be sent to".into()));
        }
        let admitted =
            self.shared
                .run
                .admit_host(Operation::UdpSend, Host::ip(to.ip()), to.port())?;
        let addr = match admitted.host.as_ip() {
            Some(ip) => self.for_family(SocketAddr::new(ip, to.port()))?,
            None => return Err(NetError::InvalidArgument("not an address".into())),
        };
        let to = Destination {
            addr,
            admitted,
            resolved: None,
        };
        self.send_to(data, &to).await
    }

    /// Sends a batch in order, after checking every destination: if one is
    /// denied, none is sent. Returns how many were sent and, if one failed,
    /// its error (the rest were not sent).
    ///
    /// # Errors
    /// [`NetError::Denied`] or a resolution error for any destination, with
    /// nothing sent.
    pub async fn send_many(
        &self,
        datagrams: &[(Vec<u8>, String, u16)],
    ) -> Result<(usize, Option<NetError>), NetError> {
        let _held = self.hold(datagrams.iter().map(|(data, _, _)| data.as_slice()))?;
        let mut targets = Vec::with_capacity(datagrams.len());
        for (_, host, port) in datagrams {
            targets.push(self.destination(host, *port).await?);
        }
        for (sent, ((data, _, _), to)) in datagrams.iter().zip(targets).enumerate() {
            if let Err(e) = self.send_to(data, &to).await {
                return Ok((sent, Some(e)));
            }
        }
        Ok((datagrams.len(), None))
    }

    /// Records the send on the audit trail (counted per destination per
    /// second after the first), then sends `data` to `to`.
    async fn send_to(&self, data: &[u8], to: &Destination) -> Result<(), NetError> {
        self.check_open()?;
        self.shared
            .run
            .allowed(&to.admitted, to.resolved.as_ref(), Some(to.addr))?;
        match self.shared.socket.send_to(data, to.addr).await {
            Ok(n) => {
                self.shared.run.traffic.datagram(Direction::Sent, n);
                Ok(())
            }
            Err(e) if is_too_long(&e) => Err(NetError::InvalidArgument(format!(
                "a datagram of {} bytes is longer than the protocol allows",
                data.len()
            ))),
            Err(e) => Err(e.into()),
        }
    }

    /// Checks `host`:`port` against the connect grant, then resolves it to
    /// an address of this socket's family.
    async fn destination(&self, host: &str, port: u16) -> Result<Destination, NetError> {
        self.check_open()?;
        let target = Host::parse(host)?;
        if port == 0 {
            return Err(NetError::InvalidArgument("port 0 cannot be sent to".into()));
        }
        let run = &self.shared.run;
        let admitted = run.admit_host(Operation::UdpSend, target, port)?;
        let resolved = match admitted.host {
            // The common case needs no allocation.
            Host::Ip(ip) => {
                return Ok(Destination {
                    addr: self.for_family(SocketAddr::new(ip, port))?,
                    admitted,
                    resolved: None,
                });
            }
            Host::Name(_) => run.addresses(&admitted).await?,
        };
        let addr = resolved
            .addrs
            .iter()
            .find_map(|addr| self.for_family(*addr).ok())
            .ok_or_else(|| {
                NetError::InvalidArgument(format!(
                    "{} has no {} address for this socket",
                    admitted.host,
                    if self.shared.local.is_ipv6() {
                        "IPv6"
                    } else {
                        "IPv4"
                    }
                ))
            })?;
        Ok(Destination {
            addr,
            admitted,
            resolved: Some(resolved),
        })
    }

    /// `addr` as this socket can send to it: an IPv6 socket reaches IPv4
    /// through mapped addresses; an IPv4 socket cannot reach IPv6.
    fn for_family(&self, addr: SocketAddr) -> Result<SocketAddr, NetError> {
        match (addr, self.shared.local.is_ipv6()) {
            (SocketAddr::V4(_), false) | (SocketAddr::V6(_), true) => Ok(addr),
            (SocketAddr::V4(a), true) => {
                Ok(SocketAddr::new(a.ip().to_ipv6_mapped().into(), a.port()))
            }
            (SocketAddr::V6(_), false) => Err(NetError::InvalidArgument(format!(
                "{addr} is IPv6 and this socket is IPv4"
            ))),
        }
    }

    /// Joins multicast `group` on `interface`. Joining makes the socket
    /// reachable by whoever sends to the group, so it needs the listen
    /// grant for the group address on the socket's port.
    ///
    /// # Errors
    /// [`NetError::Denied`] without that grant; [`NetError::InvalidArgument`]
    /// for a group or interface of the wrong family, or a group that is not
    /// multicast; OS errors.
    pub fn join_multicast(
        &self,
        group: IpAddr,
        interface: MulticastInterface,
    ) -> Result<(), NetError> {
        self.check_open()?;
        if !group.is_multicast() {
            return self.membership(group, interface, true);
        }
        let run = &self.shared.run;
        let admitted = run.admit_host(
            Operation::MulticastJoin,
            Host::ip(group),
            self.shared.local.port(),
        )?;
        run.allowed(
            &admitted,
            None,
            Some(SocketAddr::new(group, self.shared.local.port())),
        )?;
        self.membership(group, interface, true)
    }

    /// Leaves multicast `group` on `interface`.
    ///
    /// # Errors
    /// As [`join_multicast`](Self::join_multicast).
    pub fn leave_multicast(
        &self,
        group: IpAddr,
        interface: MulticastInterface,
    ) -> Result<(), NetError> {
        self.membership(group, interface, false)
    }

    fn membership(
        &self,
        group: IpAddr,
        interface: MulticastInterface,
        join: bool,
    ) -> Result<(), NetError> {
        self.check_open()?;
        if !group.is_multicast() {
            return Err(NetError::InvalidArgument(format!(
                "{group} is not a multicast address"
            )));
        }
        let socket = &self.shared.socket;
        let result = match (group, interface, self.shared.local.is_ipv6()) {
            (IpAddr::V4(group), MulticastInterface::Any, false) => {
                let any = std::net::Ipv4Addr::UNSPECIFIED;
                if join {
                    socket.join_multicast_v4(group, any)
                } else {
                    socket.leave_multicast_v4(group, any)
                }
            }
            (IpAddr::V4(group), MulticastInterface::Address(IpAddr::V4(on)), false) => {
                if join {
                    socket.join_multicast_v4(group, on)
                } else {
                    socket.leave_multicast_v4(group, on)
                }
            }
            (IpAddr::V6(group), MulticastInterface::Any, true) => {
                if join {
                    socket.join_multicast_v6(&group, 0)
                } else {
                    socket.leave_multicast_v6(&group, 0)
                }
            }
            (IpAddr::V6(group), MulticastInterface::Index(index), true) => {
                if join {
                    socket.join_multicast_v6(&group, index)
                } else {
                    socket.leave_multicast_v6(&group, index)
                }
            }
            (group, interface, v6) => {
                return Err(NetError::InvalidArgument(format!(
                    "group {group} with interface {interface:?} does not fit an {} socket (IPv4 groups take an interface address, IPv6 groups an interface index)",
                    if v6 { "IPv6" } else { "IPv4" }
                )));
            }
        };
        Ok(result?)
    }
}

fn datagram(buf: &[u8], n: usize, from: SocketAddr) -> Datagram {
    Datagram {
        data: buf[..n].to_vec(),
        from,
        truncated: n == buf.len(),
    }
}

/// EMSGSIZE: the datagram is longer than the protocol (or path) allows.
fn is_too_long(e: &std::io::Error) -> bool {
    /// Linux's EMSGSIZE (a stable ABI number).
    const EMSGSIZE: i32 = 90;
    e.raw_os_error() == Some(EMSGSIZE)
}

#[cfg(test)]
mod tests;
