//! The bounds of a run: every constant that caps what a guest (or its
//! peers) can make the host hold or wait for, the [`Limits`] an embedder
//! sets, and the slots that count sockets against them.
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
use crate::setting::{Setting, Spelling};

// Sockets, waiting calls and host memory.

/// Sockets and listeners a run may hold at once, counting closed sockets
/// still writing out their last bytes. A client with a connection pool
/// holds tens; 1024 is also the usual soft limit on a process's open files.
/// A server expecting more concurrent clients raises it (`--max-sockets`);
/// each socket can hold up to 64 KiB of queued bytes in the host, so the
/// default bounds that at 64 MiB.
pub const DEFAULT_MAX_SOCKETS: u32 = 1024;

/// Calls a run may have waiting at once for something that may never come:
/// UDP receives, accepts, and name lookups. A waiting call holds no buffer,
/// only its own state in the host and in wasmtime, about 2 KiB; 4096 of
/// them is 8 MiB. A program waits on a few per socket it serves; only a
/// guest parking calls on purpose comes near this.
pub const DEFAULT_MAX_WAITING_CALLS: u32 = 4096;

/// UDP receives a wasi:sockets 0.3 program may have waiting at once.
/// wasmtime-wasi holds a 64 KiB buffer for each while it waits, so this
/// bounds those buffers at 16 MiB; a program waits on one receive per
/// socket it serves. A receive past it fails at once with
/// `other("... --max-waiting-calls ...")`; the waiting-call bound applies
/// too.
pub const MAX_WASI_UDP_RECEIVES: u32 = 256;

/// Host memory a run's guest may make the host keep, all kinds together
/// (see [`Limits::max_host_memory`]): 64 MiB, the size of a guest's own
/// memory that the budget is meant to keep from being multiplied. A
/// program with a thousand connections whose peers stall holds its 64 KiB
/// send backlogs in it, and a handful of TLS configurations and DNS
/// answers are a few KiB each. An embedder or a server with more stalled
/// peers raises it (`--max-host-memory`).
pub const DEFAULT_MAX_HOST_MEMORY: usize = 64 << 20;

// Name lookups, their answers, and the names recorded for stock programs.

/// Name lookups a run has in flight at once; more wait for a turn (within
/// their timeout). Lookups are asynchronous (no thread each), so this bounds
/// the DNS traffic a guest can cause, not threads; 16 is more than a
/// browser's per-host connection limit needs.
pub const DEFAULT_MAX_LOOKUPS: u32 = 16;

/// How long one name lookup may take, waiting for a turn included. The
/// resolver's own retries (two, five seconds each, as glibc's defaults)
/// fit inside it.
pub const DEFAULT_LOOKUP_TIMEOUT: Duration = Duration::from_secs(15);

/// Most names whose answers a run keeps. A name is at most 253 bytes and
/// an answer a few addresses, so a full cache of common answers is under
/// half a MiB; answers are paid from the run's host memory all the same
/// (a name can have thousands of addresses). A guest that talks to more
/// names than this at once has the earliest-expiring answers dropped (and
/// looked up again when next used).
pub const MAX_KEPT_ANSWERS: usize = 1024;

/// Most addresses of one answer the run keeps and uses, in the resolver's
/// order. A DNS answer over UDP (1,232 bytes with EDNS) holds about 75 A
/// records, and a name's record set rarely a dozen; a name with thousands
/// (possible over TCP) would make every lookup of it cost the host in
/// proportion (copied, recorded address by address), so the rest is cut.
pub const MAX_ANSWER_ADDRESSES: usize = 256;

/// The shortest time a recorded (address, name) pair is kept, whatever its
/// answer's DNS lifetime (TTL). Answers with a TTL of 0 to a few seconds
/// are common behind CDNs, and a program connects after its lookup
/// returns, not within the TTL: a minute covers a slow connect and its
/// retries.
pub const MIN_ANSWER_LIFETIME: Duration = Duration::from_secs(60);

/// How long a stock program's answer is recorded when the resolver does
/// not say (a custom [`Resolver`](super::Resolver) that gives no
/// lifetime): five minutes, a common TTL.
pub const DEFAULT_ANSWER_LIFETIME: Duration = Duration::from_secs(300);

/// The longest time an answer is kept or recorded. A day is the longest
/// TTL most resolvers honour (hickory caps at one day too).
pub const MAX_ANSWER_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// (address, name) pairs a run remembers from its wasi:sockets name
/// lookups, so that a connect to an address can be judged as a connect to
/// the name it came from (see [`AddressGate`](super::AddressGate)). A pair
/// costs about 64 bytes, so 4096 is 256 KiB; a program that looks up a few
/// hundred names with a few addresses each stays under it. When full, the
/// answers closest to expiry are forgotten (their addresses are judged as
/// addresses).
pub const DEFAULT_MAX_RECORDED_ADDRESSES: usize = 4096;

/// Distinct denials a run reports through its
/// [`Notices`](super::Notices); later ones are logged on `moat::net` only.
/// A program retrying a denied connect in a loop must not flood the
/// terminal, and the first few name what to fix.
pub const MAX_NOTICES: usize = 32;

// TCP: sending, closing, accepting.

/// Most bytes a socket holds in the host when the kernel will not take a
/// write. One SDK read chunk (64 KiB), so a guest echoing what it reads
/// completes each write even into a full socket; a guest that writes more
/// waits for this much to drain, which bounds a stalled socket's cost at
/// 64 KiB (10,000 stalled sockets: 640 MiB) and nothing for an idle one:
/// the buffer is allocated when needed and freed once drained.
pub const SEND_BACKLOG_LIMIT: usize = 64 * 1024;

/// How long one socket the guest closed, while its run goes on, may still
/// write out its queued bytes to a peer that does not read, before they are
/// dropped and the connection reset (the default of
/// [`Limits::close_linger`]). Linux's own FIN timeout for an orphaned
/// socket (60 s) would be too generous here: 30 s bounds what a peer that
/// never reads can hold. Until then the socket still counts against the
/// run's socket cap. It is longer than [`DEFAULT_LINGER`] because nothing
/// waits for it: the guest has gone on, and only the socket's slot and
/// backlog are held.
pub const DEFAULT_CLOSE_LINGER: Duration = Duration::from_secs(30);

/// How long a finished run waits for its sockets to write out the bytes
/// they still hold before closing them anyway (the default of
/// `MoatConfig::linger`, given to [`Net::finish`](super::Net::finish)). A
/// guest that wrote a reply and exited expects it delivered, as a
/// process's kernel buffer would be; a peer that stopped reading must not
/// hold the host forever. It is shorter than [`DEFAULT_CLOSE_LINGER`]
/// because here the host itself waits (the run does not return until its
/// sockets are closed); a socket still lingering from a close gets at most
/// this much more.
pub const DEFAULT_LINGER: Duration = Duration::from_secs(10);

/// Connections a listener has accepted that the guest has not taken yet.
/// Eight: enough to absorb a burst while the guest's accept loop turns
/// round; beyond it the accept task stops accepting and clients wait in the
/// kernel's backlog, so the guest's own loop is the backpressure.
pub const ACCEPT_QUEUE: usize = 8;

// TLS.

/// How long one TLS handshake may take when the guest names no bound of
/// its own (a client handshake always; a server's without
/// `handshake_timeout`): a client that opens a connection and never
/// finishes its handshake must not hold a slot (or, on connect, the guest)
/// for longer than this. Ten seconds is far beyond a handshake on any
/// working network (a few round trips). Never more than the run's cap
/// ([`Limits::tls_handshake_timeout`]).
pub const DEFAULT_TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The run's cap on any TLS handshake, client or server, whatever the
/// guest asks for (the default of [`Limits::tls_handshake_timeout`],
/// `--tls-handshake-timeout`): a handshake holds a socket and session
/// state, and a peer that stalls one must not hold them for long. The same
/// ten seconds as [`DEFAULT_TLS_HANDSHAKE_TIMEOUT`], so that by default a
/// guest can ask for no longer than it gets without asking; an operator
/// raising the cap (a slow link) lets a guest's longer bound through and
/// leaves that default as it is.
pub const DEFAULT_MAX_TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// TLS handshakes a listener runs at once. Each costs a socket and a few
/// KiB of session state; past this many, the listener stops accepting until
/// one finishes (or times out), so a flood of slow clients cannot grow it.
pub const MAX_HANDSHAKES: usize = 256;

/// The largest PEM input a guest may pass (a certificate chain, a key, a
/// set of roots), in bytes: 512 KiB, twice Mozilla's whole root bundle in
/// PEM (about 220 KB). Real chains and keys are a few KiB.
pub const MAX_PEM_BYTES: usize = 512 << 10;

/// Most bytes a guest may hand over as already read when it upgrades a
/// connection to TLS (what it read past the plain-text exchange, which
/// belongs to the TLS stream): 64 KiB, one read of the SDK's. A peer's
/// first TLS flight is a few KiB; more is not a handshake, and the host
/// would keep it until the guest reads it.
pub const MAX_ALREADY_READ: usize = 64 << 10;

/// Most certificates in a guest's certificate chain: a leaf and its
/// intermediates, rarely more than four; ten leaves room for cross-signed
/// paths.
pub const MAX_CHAIN_CERTIFICATES: usize = 10;

/// Most roots a guest may add for one connection or listener: Mozilla's
/// set is about 150; 512 holds any bundle a program ships.
pub const MAX_GUEST_ROOTS: usize = 512;

/// Most TLS configurations of one kind (client or server) a run holds at
/// once. A client uses one per distinct set of options (most programs:
/// one); a server one per certificate it serves. 1024 matches the default
/// socket cap, so one per listener fits; the host memory they cost is
/// bounded by the run's budget, this only bounds the bookkeeping.
pub const MAX_TLS_CONFIGS: usize = 1024;

// UDP.

/// Receive buffers a UDP socket keeps between receives: enough for a few
/// receives in flight at once without allocating; a burst of more takes
/// more, and the surplus is freed, not kept (4 × 64 KiB is the most an idle
/// socket holds).
pub const POOL_KEEP: usize = 4;

// HTTP (wasi:http guests, `moat serve`).

/// wasi:http requests a run has in flight at once, each from its send
/// until its response body ends or is dropped. Each holds a connection
/// (an HTTP/1 connection carries one request at a time), so the socket
/// cap bounds them too; this bounds the requests of a guest that starts
/// many and reads none. 256: far more than a client keeps busy at once
/// (browsers: 6 per host), a quarter of the socket cap.
pub const DEFAULT_MAX_HTTP_REQUESTS: u32 = 256;

/// The run's cap on an outgoing request's connect (lookup, TCP and TLS
/// together): 30 s, beyond any working network, short enough that a
/// black-holed address does not hold the request for the kernel's two
/// minutes of SYN retries.
pub const DEFAULT_HTTP_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The run's cap on the wait for a response's head after the request was
/// sent: 60 s, what nginx and most proxies give an upstream
/// (`proxy_read_timeout`); a slow API that computes longer raises it.
pub const DEFAULT_HTTP_FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(60);

/// The run's cap on a pause between two pieces of a response body: 60 s,
/// as the first byte's.
pub const DEFAULT_HTTP_BETWEEN_BYTES_TIMEOUT: Duration = Duration::from_secs(60);

/// The largest HTTP head, a response's to the guest and a request's to
/// `moat serve`: 64 KiB, four times what common servers accept
/// (nginx's default large buffers are 4 × 8 KiB; Node's is 16 KiB) and a
/// sixth of hyper's own default (~400 KB), which each connection would
/// hold.
pub const DEFAULT_MAX_HTTP_HEADER_SIZE: usize = 64 << 10;

/// `moat serve`: client connections open at once, and requests being
/// answered at once. 1024, the socket cap's default; past it new clients
/// wait in the kernel's backlog, and an HTTP/2 stream is answered 503.
pub const DEFAULT_MAX_HTTP_CONNECTIONS: u32 = 1024;

/// `moat serve`: how long a client may take to send a request's head,
/// counted from when the connection is ready for one, so it is also how
/// long a kept-alive connection may sit idle between requests. 10 s: a
/// real client sends a head in one round trip; a client that sends one
/// byte a second is cut off and gives its slot back.
pub const DEFAULT_HTTP_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// `moat serve`: the largest request body a client may send: 64 MiB. The
/// body is streamed to the handler, not held, so this bounds what a client
/// can make a handler read, not the host's memory; past it the client gets
/// 413 (at once when Content-Length says so).
pub const DEFAULT_MAX_HTTP_BODY_SIZE: u64 = 64 << 20;

/// `moat serve`: handler instances running at once. Each may grow to
/// `--max-memory`, so the guests of a server hold at most this many times
/// that (16 × the default 512 MiB: 8 GiB; a server of small handlers sets
/// `--max-memory=64MiB`, 1 GiB in all). 16 keeps two cores busy with room
/// for handlers that wait on upstreams; a request waits for an instance
/// within its `--timeout`, then gets 503.
pub const DEFAULT_MAX_INSTANCES: u32 = 16;

/// `moat serve`: the longest pause in a request body while its handler
/// waits for more: 10 s, as for the head ([`DEFAULT_HTTP_HEADER_READ_TIMEOUT`]).
/// The clock runs only while the handler waits, so a handler that reads
/// slowly, or stops reading, never makes its client look slow. Past it the
/// client gets 408 (or, if the response has started, the response is cut
/// off) and the handler is stopped, giving its instance back.
pub const DEFAULT_HTTP_REQUEST_BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// `moat serve`: the longest a response may wait for its client to take
/// more of it (TCP's window, or HTTP/2's, closed): 30 s, half the default
/// request time, long enough for any client that reads at all. Past it
/// the response is cut off (the HTTP/1.1 connection closed, the HTTP/2
/// stream reset) and its handler stopped, giving its instance back.
pub const DEFAULT_HTTP_RESPONSE_SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// `moat serve`: handler instances one client address (an IPv4 address, an
/// IPv6 /64) holds at once: 4, a quarter of the default
/// [`DEFAULT_MAX_INSTANCES`], so that one client (slow bodies, unread
/// responses, a hundred HTTP/2 streams) leaves three quarters of the
/// server to the others. Its further requests wait for its own instances,
/// within their `--timeout`, then get 429. A server behind a reverse
/// proxy sees one address and raises it.
pub const DEFAULT_MAX_INSTANCES_PER_CLIENT: u32 = 4;

/// The bounds of one run. The defaults are what a normal program never
/// meets and a hostile one does; `None` means unbounded (the embedder's
/// choice, never a default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Open sockets and listeners ([`DEFAULT_MAX_SOCKETS`]). A listener
    /// counts twice while it waits for a connection: itself, and the place
    /// it holds for the connection it is about to accept (so that accepting
    /// never goes past the cap).
    pub max_sockets: Option<u32>,
    /// UDP receives, accepts and lookups waiting at once
    /// ([`DEFAULT_MAX_WAITING_CALLS`]).
    pub max_waiting_calls: u32,
    /// Name lookups in flight ([`DEFAULT_MAX_LOOKUPS`]).
    pub max_lookups: u32,
    /// One lookup's time ([`DEFAULT_LOOKUP_TIMEOUT`]).
    pub lookup_timeout: Duration,
    /// Cap on any TLS handshake's time ([`DEFAULT_MAX_TLS_HANDSHAKE_TIMEOUT`]).
    pub tls_handshake_timeout: Duration,
    /// Connections one listener has open at once, for listeners whose
    /// guest sets no cap of its own (`None`: only the socket cap).
    pub max_connections: Option<u32>,
    /// Connections one listener has open at once from one peer, for
    /// listeners whose guest sets no cap of its own. A peer is an IPv4
    /// address or an IPv6 /64 (`peer_of`): one IPv6 client is usually
    /// given a whole /64, so counting each /128 would give it 2^64 shares.
    pub max_connections_per_peer: Option<u32>,
    /// How long a socket the guest closed may go on writing out its queued
    /// bytes before they are dropped and the connection reset
    /// ([`DEFAULT_CLOSE_LINGER`]).
    pub close_linger: Duration,
    /// (address, name) pairs remembered from wasi:sockets name lookups
    /// ([`DEFAULT_MAX_RECORDED_ADDRESSES`]).
    pub max_recorded_addresses: usize,
    /// Host memory the run's guest may make the host keep, every kind
    /// together ([`DEFAULT_MAX_HOST_MEMORY`]; see `net/budget.rs`).
    pub max_host_memory: Option<usize>,
    /// wasi:http requests in flight ([`DEFAULT_MAX_HTTP_REQUESTS`]).
    pub max_http_requests: u32,
    /// Cap on an outgoing request's connect ([`DEFAULT_HTTP_CONNECT_TIMEOUT`]).
    pub http_connect_timeout: Duration,
    /// Cap on the wait for a response's head
    /// ([`DEFAULT_HTTP_FIRST_BYTE_TIMEOUT`]).
    pub http_first_byte_timeout: Duration,
    /// Cap on a pause in a response body
    /// ([`DEFAULT_HTTP_BETWEEN_BYTES_TIMEOUT`]).
    pub http_between_bytes_timeout: Duration,
    /// Largest HTTP head ([`DEFAULT_MAX_HTTP_HEADER_SIZE`]; at least
    /// 8 KiB, hyper's smallest buffer).
    pub max_http_header_size: usize,
    /// `moat serve`'s open connections, and its requests being answered
    /// at once ([`DEFAULT_MAX_HTTP_CONNECTIONS`]; HTTP/2 carries many on
    /// one connection).
    pub max_http_connections: u32,
    /// `moat serve`'s wait for a request's head
    /// ([`DEFAULT_HTTP_HEADER_READ_TIMEOUT`]).
    pub http_header_read_timeout: Duration,
    /// `moat serve`'s largest request body ([`DEFAULT_MAX_HTTP_BODY_SIZE`]).
    pub max_http_body_size: u64,
    /// `moat serve`'s instances at once ([`DEFAULT_MAX_INSTANCES`]).
    pub max_instances: u32,
    /// `moat serve`'s longest pause in a request body a handler waits on
    /// ([`DEFAULT_HTTP_REQUEST_BODY_TIMEOUT`]).
    pub http_request_body_timeout: Duration,
    /// `moat serve`'s longest wait for a client to take more of a response
    /// ([`DEFAULT_HTTP_RESPONSE_SEND_TIMEOUT`]).
    pub http_response_send_timeout: Duration,
    /// `moat serve`'s instances one client address holds at once
    /// ([`DEFAULT_MAX_INSTANCES_PER_CLIENT`]).
    pub max_instances_per_client: u32,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_sockets: Some(DEFAULT_MAX_SOCKETS),
            max_waiting_calls: DEFAULT_MAX_WAITING_CALLS,
            max_lookups: DEFAULT_MAX_LOOKUPS,
            lookup_timeout: DEFAULT_LOOKUP_TIMEOUT,
            tls_handshake_timeout: DEFAULT_MAX_TLS_HANDSHAKE_TIMEOUT,
            max_connections: None,
            max_connections_per_peer: None,
            close_linger: DEFAULT_CLOSE_LINGER,
            max_recorded_addresses: DEFAULT_MAX_RECORDED_ADDRESSES,
            max_host_memory: Some(DEFAULT_MAX_HOST_MEMORY),
            max_http_requests: DEFAULT_MAX_HTTP_REQUESTS,
            http_connect_timeout: DEFAULT_HTTP_CONNECT_TIMEOUT,
            http_first_byte_timeout: DEFAULT_HTTP_FIRST_BYTE_TIMEOUT,
            http_between_bytes_timeout: DEFAULT_HTTP_BETWEEN_BYTES_TIMEOUT,
            max_http_header_size: DEFAULT_MAX_HTTP_HEADER_SIZE,
            max_http_connections: DEFAULT_MAX_HTTP_CONNECTIONS,
            http_header_read_timeout: DEFAULT_HTTP_HEADER_READ_TIMEOUT,
            max_http_body_size: DEFAULT_MAX_HTTP_BODY_SIZE,
            max_instances: DEFAULT_MAX_INSTANCES,
            http_request_body_timeout: DEFAULT_HTTP_REQUEST_BODY_TIMEOUT,
            http_response_send_timeout: DEFAULT_HTTP_RESPONSE_SEND_TIMEOUT,
            max_instances_per_client: DEFAULT_MAX_INSTANCES_PER_CLIENT,
        }
    }
}

/// The run's socket count.
#[derive(Clone)]
pub(crate) struct SocketSlots {
    slots: Option<Arc<Semaphore>>,
    max: u32,
    /// The setting a refusal names (`--max-sockets`, `MOAT_MAX_SOCKETS`).
    setting: &'static str,
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
    /// Slots for `max` sockets; a refusal names the setting as `spelling`
    /// writes it.
    pub(crate) fn new(max: Option<u32>, spelling: Spelling) -> SocketSlots {
        SocketSlots {
            slots: max.map(|n| Arc::new(Semaphore::new(n as usize))),
            max: max.unwrap_or(u32::MAX),
            setting: Setting::MaxSockets.named(spelling),
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
                Err(NetError::LimitReached(format!(
                    "the run holds {} sockets and listeners (closed sockets still sending count too); raise it with {}",
                    self.max, self.setting
                )))
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
    /// The setting a refusal names.
    setting: &'static str,
}

impl WaitingCalls {
    /// Places for `max` waiting calls; a refusal names the setting as
    /// `spelling` writes it.
    pub(crate) fn new(max: u32, spelling: Spelling) -> WaitingCalls {
        WaitingCalls {
            turns: Arc::new(Semaphore::new(max.max(1) as usize)),
            max,
            setting: Setting::MaxWaitingCalls.named(spelling),
        }
    }

    /// A place for one more waiting call, or [`NetError::LimitReached`].
    pub(crate) fn enter(&self, what: &str) -> Result<OwnedSemaphorePermit, NetError> {
        Arc::clone(&self.turns).try_acquire_owned().map_err(|_| {
            tracing::debug!(target: "moat::net", max = self.max, what, "waiting-call limit reached");
            NetError::LimitReached(format!(
                "the run has {} receives, accepts and lookups waiting already; raise it with {}",
                self.max, self.setting
            ))
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
        let slots = SocketSlots::new(Some(2), Spelling::Flags);
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
