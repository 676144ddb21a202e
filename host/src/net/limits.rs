//! The socket core's fixed caps, which no setting raises: what a guest's
//! call meets (public: `MAX_PEM_BYTES`, ...) and the host's own tuning
//! (crate-private); and the slots that count sockets against the run's
//! [`Limits`]. The bounds a setting sets, with their defaults, are
//! `moat_host::limits` (moat-policy's); `docs/inventory.md` names every
//! cap with what it bounds.
//!
//! A socket's `SocketSlot` lives as long as its file descriptor: in the
//! socket's core, which a drain task keeps alive after the guest dropped
//! the socket. So a socket closed with bytes still queued (lingering) counts
//! until it is really gone, and a guest cannot dodge the cap by dropping
//! sockets faster than their peers read.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::error::NetError;
use moat_policy::setting::Setting;

// The bounds a setting sets, and their defaults, are moat-policy's: plain
// data beside the settings table (public as `moat_host::limits`).
pub(crate) use moat_policy::limits::DEFAULT_CLOSE_LINGER;
pub use moat_policy::limits::Limits;

// Sockets, waiting calls and host memory.

/// UDP receives a wasi:sockets 0.3 program may have waiting at once.
/// wasmtime-wasi holds a 64 KiB buffer for each while it waits, so this
/// bounds those buffers at 16 MiB; a program waits on one receive per
/// socket it serves. A receive past it fails at once with
/// `other("... --max-waiting-calls ...")`; the waiting-call bound applies
/// too.
pub(crate) const MAX_WASI_UDP_RECEIVES: u32 = 256;

// Name lookups, their answers, and the names recorded for stock programs.

/// Most names whose answers a run keeps. A name is at most 253 bytes and
/// an answer a few addresses, so a full cache of common answers is under
/// half a MiB; answers are paid from the run's host memory all the same
/// (a name can have thousands of addresses). A guest that talks to more
/// names than this at once has the earliest-expiring answers dropped (and
/// looked up again when next used).
pub(crate) const MAX_KEPT_ANSWERS: usize = 1024;

/// Most addresses of one answer the run keeps and uses, in the resolver's
/// order. A DNS answer over UDP (1,232 bytes with EDNS) holds about 75 A
/// records, and a name's record set rarely a dozen; a name with thousands
/// (possible over TCP) would make every lookup of it cost the host in
/// proportion (copied, recorded address by address), so the rest is cut.
pub(crate) const MAX_ANSWER_ADDRESSES: usize = 256;

/// The shortest time a recorded (address, name) pair is kept, whatever its
/// answer's DNS lifetime (TTL). Answers with a TTL of 0 to a few seconds
/// are common behind CDNs, and a program connects after its lookup
/// returns, not within the TTL: a minute covers a slow connect and its
/// retries.
pub(crate) const MIN_ANSWER_LIFETIME: Duration = Duration::from_secs(60);

/// How long a stock program's answer is recorded when the resolver does
/// not say (a custom [`Resolver`](super::Resolver) that gives no
/// lifetime): five minutes, a common TTL.
pub(crate) const DEFAULT_ANSWER_LIFETIME: Duration = Duration::from_secs(300);

/// The longest time an answer is kept or recorded. A day is the longest
/// TTL most resolvers honour (hickory caps at one day too).
pub(crate) const MAX_ANSWER_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// Distinct denials a run reports through its
/// [`Notices`](super::Notices); later ones are logged on `moat::net` only.
/// A program retrying a denied connect in a loop must not flood the
/// terminal, and the first few name what to fix.
pub(crate) const MAX_NOTICES: usize = 32;

// TCP: sending, closing, accepting.

/// Most bytes a socket holds in the host when the kernel will not take a
/// write. One SDK read chunk (64 KiB), so a guest echoing what it reads
/// completes each write even into a full socket; a guest that writes more
/// waits for this much to drain, which bounds a stalled socket's cost at
/// 64 KiB (10,000 stalled sockets: 640 MiB) and nothing for an idle one:
/// the buffer is allocated when needed and freed once drained.
pub(crate) const SEND_BACKLOG_LIMIT: usize = 64 * 1024;

/// How long a finished run waits for its sockets to write out the bytes
/// they still hold before closing them anyway (the default of
/// `MoatConfig::linger`, given to [`Net::finish`](super::Net::finish)). A
/// guest that wrote a reply and exited expects it delivered, as a
/// process's kernel buffer would be; a peer that stopped reading must not
/// hold the host forever. It is shorter than [`DEFAULT_CLOSE_LINGER`]
/// because here the host itself waits (the run does not return until its
/// sockets are closed); a socket still lingering from a close gets at most
/// this much more.
pub(crate) const DEFAULT_LINGER: Duration = Duration::from_secs(10);

/// Connections a listener has accepted that the guest has not taken yet.
/// Eight: enough to absorb a burst while the guest's accept loop turns
/// round; beyond it the accept task stops accepting and clients wait in the
/// kernel's backlog, so the guest's own loop is the backpressure.
pub(crate) const ACCEPT_QUEUE: usize = 8;

// TLS.

/// How long one TLS handshake may take when the guest names no bound of
/// its own (a client handshake always; a server's without
/// `handshake_timeout`): a client that opens a connection and never
/// finishes its handshake must not hold a slot (or, on connect, the guest)
/// for longer than this. Ten seconds is far beyond a handshake on any
/// working network (a few round trips). Never more than the run's cap
/// ([`Limits::tls_handshake_timeout`]).
pub(crate) const DEFAULT_TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// TLS handshakes a listener runs at once. Each costs a socket and a few
/// KiB of session state; past this many, the listener stops accepting until
/// one finishes (or times out), so a flood of slow clients cannot grow it.
pub(crate) const MAX_HANDSHAKES: usize = 256;

/// The largest PEM input a guest may pass (a certificate chain, a key, a
/// set of roots), in bytes: 512 KiB, twice Mozilla's whole root bundle in
/// PEM (about 220 KB). Real chains and keys are a few KiB.
pub(crate) const MAX_PEM_BYTES: usize = 512 << 10;

/// Most bytes a guest may hand over as already read when it upgrades a
/// connection to TLS (what it read past the plain-text exchange, which
/// belongs to the TLS stream): 64 KiB, one read of the SDK's. A peer's
/// first TLS flight is a few KiB; more is not a handshake, and the host
/// would keep it until the guest reads it.
pub(crate) const MAX_ALREADY_READ: usize = 64 << 10;

/// Most certificates in a guest's certificate chain: a leaf and its
/// intermediates, rarely more than four; ten leaves room for cross-signed
/// paths.
pub(crate) const MAX_CHAIN_CERTIFICATES: usize = 10;

/// Most roots a guest may add for one connection or listener: Mozilla's
/// set is about 150; 512 holds any bundle a program ships.
pub(crate) const MAX_GUEST_ROOTS: usize = 512;

/// Most TLS configurations of one kind (client or server) a run holds at
/// once. A client uses one per distinct set of options (most programs:
/// one); a server one per certificate it serves. 1024 matches the default
/// socket cap, so one per listener fits; the host memory they cost is
/// bounded by the run's budget, this only bounds the bookkeeping.
pub(crate) const MAX_TLS_CONFIGS: usize = 1024;

// UDP.

/// Receive buffers a UDP socket keeps between receives: enough for a few
/// receives in flight at once without allocating; a burst of more takes
/// more, and the surplus is freed, not kept (4 × 64 KiB is the most an idle
/// socket holds).
pub(crate) const POOL_KEEP: usize = 4;

// HTTP (wasi:http guests, `moat serve`).

/// The run's socket count.
#[derive(Clone)]
pub(crate) struct SocketSlots {
    slots: Option<Arc<Semaphore>>,
    max: u32,
}

/// One socket's place in its run's count (and in its listener's), given
/// back when dropped. Every socket holds one, idle ones included: 24 bytes,
/// the listener's part boxed since most sockets have none.
#[derive(Default)]
pub(crate) struct SocketSlot {
    _run: Option<OwnedSemaphorePermit>,
    listener: Option<Box<ListenerPlace>>,
}

/// An accepted connection's place under its listener's caps.
#[derive(Default)]
struct ListenerPlace {
    _total: Option<OwnedSemaphorePermit>,
    _peer: Option<PeerGuard>,
}

impl SocketSlot {
    fn listener_place(&mut self) -> &mut ListenerPlace {
        self.listener.get_or_insert_with(Box::default)
    }
}

impl SocketSlots {
    /// Slots for `max` sockets; a refusal names [`Setting::MaxSockets`].
    pub(crate) fn new(max: Option<u32>) -> SocketSlots {
        SocketSlots {
            slots: max.map(|n| Arc::new(Semaphore::new(n as usize))),
            max: max.unwrap_or(u32::MAX),
        }
    }

    /// A slot now, or [`NetError::LimitReached`].
    pub(crate) fn try_take(&self) -> Result<SocketSlot, NetError> {
        let Some(slots) = &self.slots else {
            return Ok(SocketSlot::default());
        };
        match Arc::clone(slots).try_acquire_owned() {
            Ok(permit) => Ok(SocketSlot {
                _run: Some(permit),
                ..SocketSlot::default()
            }),
            Err(_) => {
                tracing::debug!(target: "moat::net", max = self.max, "socket limit reached");
                Err(NetError::limit(
                    format!(
                        "the run holds {} sockets and listeners (closed sockets still sending count too)",
                        self.max
                    ),
                    Setting::MaxSockets,
                ))
            }
        }
    }

    /// Whether a slot is free now.
    pub(crate) fn has_room(&self) -> bool {
        self.slots
            .as_ref()
            .is_none_or(|s| s.available_permits() > 0)
    }

    /// A slot, waiting for one if the run holds its maximum (an accept
    /// loop waits here, and clients wait in the kernel's backlog).
    pub(crate) async fn take(&self) -> SocketSlot {
        let Some(slots) = &self.slots else {
            return SocketSlot::default();
        };
        if slots.available_permits() == 0 {
            tracing::debug!(target: "moat::net", max = self.max, "socket limit reached: accepting waits");
        }
        SocketSlot {
            _run: Arc::clone(slots).acquire_owned().await.ok(),
            ..SocketSlot::default()
        }
    }
}

/// The peer a connection from `ip` counts against: an IPv4 address (an
/// IPv4-mapped IPv6 address is its IPv4 address), or an IPv6 address's /64,
/// the smallest prefix a network gives one host or subscriber (RFC 6177,
/// SLAAC).
pub(crate) fn peer_of(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !u128::from(u64::MAX))),
        v4 => v4,
    }
}

/// Open connections per peer (`peer_of`), shared by a listener's
/// connections.
type PeerCounts = Arc<Mutex<HashMap<IpAddr, u32>>>;

/// The run's count of calls waiting (receives, accepts, lookups).
#[derive(Clone)]
pub(crate) struct WaitingCalls {
    turns: Arc<Semaphore>,
    max: u32,
}

impl WaitingCalls {
    /// Places for `max` waiting calls; a refusal names
    /// [`Setting::MaxWaitingCalls`].
    pub(crate) fn new(max: u32) -> WaitingCalls {
        WaitingCalls {
            turns: Arc::new(Semaphore::new(max.max(1) as usize)),
            max,
        }
    }

    /// A place for one more waiting call, or [`NetError::LimitReached`].
    pub(crate) fn enter(&self, what: &str) -> Result<OwnedSemaphorePermit, NetError> {
        Arc::clone(&self.turns).try_acquire_owned().map_err(|_| {
            tracing::debug!(target: "moat::net", max = self.max, what, "waiting-call limit reached");
            NetError::limit(
                format!(
                    "the run has {} receives, accepts and lookups waiting already",
                    self.max
                ),
                Setting::MaxWaitingCalls,
            )
        })
    }
}

/// A listener's caps on its open connections: in all, and per peer address.
#[derive(Clone)]
pub(crate) struct ConnectionCaps {
    total: Option<Arc<Semaphore>>,
    per_peer: Option<(u32, PeerCounts)>,
}

/// One connection counted against its peer address.
pub(crate) struct PeerGuard {
    peer: IpAddr,
    counts: PeerCounts,
}

impl Drop for PeerGuard {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = counts.get_mut(&self.peer) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.peer);
            }
        }
    }
}

impl ConnectionCaps {
    pub(crate) fn new(total: Option<u32>, per_peer: Option<u32>) -> ConnectionCaps {
        ConnectionCaps {
            total: total.map(|n| Arc::new(Semaphore::new(n as usize))),
            per_peer: per_peer.map(|n| (n, Arc::default())),
        }
    }

    /// Waits for room under the listener's total cap, then adds it to
    /// `slot`.
    pub(crate) async fn reserve(&self, slot: &mut SocketSlot) {
        if let Some(total) = &self.total {
            slot.listener_place()._total = Arc::clone(total).acquire_owned().await.ok();
        }
    }

    /// Counts a connection from `peer`, or refuses it when that peer
    /// already has its share open.
    pub(crate) fn admit(&self, slot: &mut SocketSlot, peer: IpAddr) -> bool {
        let Some((max, counts)) = &self.per_peer else {
            return true;
        };
        let peer = peer_of(peer);
        let mut map = counts.lock().unwrap_or_else(PoisonError::into_inner);
        let n = map.entry(peer).or_insert(0);
        if *n >= *max {
            return false;
        }
        *n += 1;
        slot.listener_place()._peer = Some(PeerGuard {
            peer,
            counts: Arc::clone(counts),
        });
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_given_back_when_dropped() {
        let slots = SocketSlots::new(Some(2));
        let a = slots.try_take().unwrap();
        let _b = slots.try_take().unwrap();
        assert!(matches!(slots.try_take(), Err(NetError::LimitReached(_))));
        drop(a);
        assert!(slots.try_take().is_ok());
    }

    #[test]
    fn a_peer_gets_its_share_and_no_more() {
        let caps = ConnectionCaps::new(None, Some(2));
        let one: IpAddr = "10.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        let mut slots: Vec<SocketSlot> = (0..3).map(|_| SocketSlot::default()).collect();
        assert!(caps.admit(&mut slots[0], one));
        // The same peer in mapped form is the same peer.
        assert!(caps.admit(&mut slots[1], "::ffff:10.0.0.1".parse().unwrap()));
        let mut refused = SocketSlot::default();
        assert!(!caps.admit(&mut refused, one));
        assert!(caps.admit(&mut slots[2], other));
        slots.remove(0);
        let mut again = SocketSlot::default();
        assert!(caps.admit(&mut again, one));
    }

    #[test]
    fn an_ipv6_peer_is_its_slash_64() {
        let caps = ConnectionCaps::new(None, Some(2));
        let mut slots: Vec<SocketSlot> = (0..2).map(|_| SocketSlot::default()).collect();
        assert!(caps.admit(&mut slots[0], "2001:db8:1:2::1".parse().unwrap()));
        assert!(caps.admit(
            &mut slots[1],
            "2001:db8:1:2:ffff:ffff:ffff:ffff".parse().unwrap()
        ));
        let mut refused = SocketSlot::default();
        assert!(
            !caps.admit(&mut refused, "2001:db8:1:2:1234::99".parse().unwrap()),
            "another address of the same /64 is the same peer"
        );
        assert!(caps.admit(&mut refused, "2001:db8:1:3::1".parse().unwrap()));
        assert_eq!(
            peer_of("::ffff:10.0.0.1".parse().unwrap()),
            "10.0.0.1".parse::<IpAddr>().unwrap()
        );
    }
}
