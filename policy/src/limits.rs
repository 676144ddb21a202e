//! The bounds of a run as plain data: [`Limits`], with each bound's
//! default and why that default, and the one reading and the one writing
//! of a bound by its [`Setting`] ([`Limits::get`], [`Limits::set`]).
//!
//! A new bound is its row in the settings table (`setting.rs`), its field
//! here with its default, its arm in each of `get` and `set`, and the line
//! of moat-host that enforces it. Every source (a flag, a policy file, a
//! container's environment, the embedding API) reaches the field through
//! these, and `moat run --help` and the audit trail read its default
//! through `get`.
//!
//! What a bound caps and how the host enforces it is said at each
//! default. The host's fixed caps, which no setting raises, are moat-host's
//! (`moat_host::limits`).

use std::fmt;
use std::time::Duration;

use crate::setting::{Kind, Setting};

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

/// Host memory a run's guest may make the host keep, all kinds together
/// (see [`Limits::max_host_memory`]): 64 MiB, the size of a guest's own
/// memory that the budget is meant to keep from being multiplied. A
/// program with a thousand connections whose peers stall holds its 64 KiB
/// send backlogs in it, and a handful of TLS configurations and DNS
/// answers are a few KiB each. An embedder or a server with more stalled
/// peers raises it (`--max-host-memory`).
pub const DEFAULT_MAX_HOST_MEMORY: usize = 64 << 20;

/// Name lookups a run has in flight at once; more wait for a turn (within
/// their timeout). Lookups are asynchronous (no thread each), so this bounds
/// the DNS traffic a guest can cause, not threads; 16 is more than a
/// browser's per-host connection limit needs.
pub const DEFAULT_MAX_LOOKUPS: u32 = 16;

/// How long one name lookup may take, waiting for a turn included. The
/// resolver's own retries (two, five seconds each, as glibc's defaults)
/// fit inside it.
pub const DEFAULT_LOOKUP_TIMEOUT: Duration = Duration::from_secs(15);

/// (address, name) pairs a run remembers from its wasi:sockets name
/// lookups, so that a connect to an address can be judged as a connect to
/// the name it came from (see moat-host's `AddressGate`). A pair
/// costs about 64 bytes, so 4096 is 256 KiB; a program that looks up a few
/// hundred names with a few addresses each stays under it. When full, the
/// answers closest to expiry are forgotten (their addresses are judged as
/// addresses).
pub const DEFAULT_MAX_RECORDED_ADDRESSES: usize = 4096;

/// How long one socket the guest closed, while its run goes on, may still
/// write out its queued bytes to a peer that does not read, before they are
/// dropped and the connection reset (the default of
/// [`Limits::close_linger`]). Linux's own FIN timeout for an orphaned
/// socket (60 s) would be too generous here: 30 s bounds what a peer that
/// never reads can hold. Until then the socket still counts against the
/// run's socket cap. It is longer than moat-host's `DEFAULT_LINGER` because nothing
/// waits for it: the guest has gone on, and only the socket's slot and
/// backlog are held.
pub const DEFAULT_CLOSE_LINGER: Duration = Duration::from_secs(30);

/// The run's cap on any TLS handshake, client or server, whatever the
/// guest asks for (the default of [`Limits::tls_handshake_timeout`],
/// `--tls-handshake-timeout`): a handshake holds a socket and session
/// state, and a peer that stalls one must not hold them for long. The same
/// ten seconds as moat-host's `DEFAULT_TLS_HANDSHAKE_TIMEOUT`, so that by default a
/// guest can ask for no longer than it gets without asking; an operator
/// raising the cap (a slow link) lets a guest's longer bound through and
/// leaves that default as it is.
pub const DEFAULT_MAX_TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

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

/// `moat serve`: the slowest a request body may come while its handler
/// waits for it, in bytes a second: 1 KiB. A body may make its handler wait
/// one second, and one more for each 1 KiB it brought; past that the client
/// gets 408 and the handler is stopped. A pause bound alone let a client
/// that sends a byte every 5 s hold an instance for minutes (four addresses
/// held all 16 instances for 37 s); now it holds one about a second. Any
/// client that is uploading at all (a phone on a bad link sends tens of
/// KiB a second) is far above it. `none` turns it off (a server whose
/// clients are known to send slower).
pub const DEFAULT_MIN_HTTP_BODY_RATE: u64 = 1 << 10;

/// `moat serve`: the longest a response may wait for its client to take
/// more of it (TCP's window, or HTTP/2's, closed): 30 s, half the default
/// request time, long enough for any client that reads at all. Past it
/// the response is cut off (the HTTP/1.1 connection closed, the HTTP/2
/// stream reset) and its handler stopped, giving its instance back.
pub const DEFAULT_HTTP_RESPONSE_SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// `moat serve`: how long, once told to stop, it lets the requests in
/// flight finish: 10 s, the shortest grace a common process manager gives
/// before SIGKILL (Docker 10 s, Kubernetes 30 s, systemd 90 s), so that
/// the cut is moat's, said on stderr, and not the SIGKILL's. Raise it to
/// the manager's grace less a second or two for long requests.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

/// `moat serve`: handler instances one client address (an IPv4 address, an
/// IPv6 /64) holds at once: 4, a quarter of the default
/// [`DEFAULT_MAX_INSTANCES`], so that one client (slow bodies, unread
/// responses, a hundred HTTP/2 streams) leaves three quarters of the
/// server to the others. [`DEFAULT_MAX_WAITING_PER_CLIENT`] more of its
/// requests wait for its own instances, within their `--timeout`; past
/// those, a request gets 429 at once. A server behind a reverse
/// proxy sees one address and raises it.
pub const DEFAULT_MAX_INSTANCES_PER_CLIENT: u32 = 4;

/// `moat serve`: requests of one client address (an IPv4 address, an IPv6
/// /64) that wait for its share of instances: 128, so that a load tester's
/// 64 or 100 connections from one address, or a reverse proxy's burst,
/// wait their turn, while one address holds at most an eighth of the
/// server's default 1,024 places waiting (1,100 HTTP/2 streams from one
/// address each held a place for a whole `--timeout`, and every other
/// client got 503). Past it a request gets 429 at once.
pub const DEFAULT_MAX_WAITING_PER_CLIENT: u32 = 128;

/// `moat serve`: client connections one address (an IPv4 address, an IPv6
/// /64) holds open at once: 256, a quarter of the default
/// [`DEFAULT_MAX_HTTP_CONNECTIONS`], so that one client that opens
/// connections and sends nothing (1,030 of them took every place before)
/// leaves three quarters of the server's connections to the others; a
/// browser opens six. Its connections past it are closed as they are
/// accepted. A server behind a reverse proxy sees one address and raises
/// it.
pub const DEFAULT_MAX_HTTP_CONNECTIONS_PER_CLIENT: u32 = 256;

/// Linear memory a guest may grow to, all memories together, unless the
/// run sets another: 512 MiB. moat's examples run in under 4 MiB and a
/// guest holding thousands of connections in tens; wasmtime's own default
/// is the whole 4 GiB a 32-bit memory can address.
pub const DEFAULT_MAX_MEMORY: u64 = 512 << 20;

/// The most a run's trail writes unless the run sets another
/// (`--max-audit-size`): 1 GiB. Repeated denials and UDP sends are counted,
/// not copied, so a guest that floods one refused destination writes a
/// record a second; 1 GiB is then millions of distinct decisions, more
/// than any run makes, and far less than a disk. Past it the trail takes
/// nothing more and the run's network is refused, as for a trail that
/// cannot be written. (The records that close it, the cap's own and the
/// counts still pending, go after it: at most a few MiB more.)
pub const DEFAULT_MAX_AUDIT_SIZE: u64 = 1 << 30;

/// `moat serve`: the most bytes of audit trail the records of one request
/// (its handler's decisions, its outgoing requests' exchanges) may take:
/// 16 MiB, a sixty-fourth of [`DEFAULT_MAX_AUDIT_SIZE`], thousands of
/// records (each a few KiB at most, its texts cut). Past it that request's
/// audited operations are refused with "audit trail full for this
/// request", and the server's others go on; before, one handler request
/// filled the whole trail in 3 s and every later operation of the server
/// was refused.
pub const DEFAULT_MAX_AUDIT_PER_REQUEST: u64 = 16 << 20;

/// `moat serve`: how fast the records of one client address's requests (an
/// IPv4 address, an IPv6 /64) may fill the audit trail, in bytes a second,
/// once they took a first [`DEFAULT_MAX_AUDIT_PER_REQUEST`]: 256 KiB. One
/// address then needs more than an hour to fill the default 1 GiB trail
/// (before, ~5,900 requests whose records repeat a long path did it), while
/// a client making a hundred requests a second, each with a decision and an
/// exchange record (about 1.5 KB), stays under it. Past it that client's
/// audited operations are refused and the server's others go on; `none`
/// turns it off (a server behind a reverse proxy sees one address).
pub const DEFAULT_MAX_AUDIT_RATE_PER_CLIENT: u64 = 256 << 10;

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
    /// together ([`DEFAULT_MAX_HOST_MEMORY`]; see moat-host's `net/budget.rs`).
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
    /// `moat serve`'s connections one client address holds open at once
    /// ([`DEFAULT_MAX_HTTP_CONNECTIONS_PER_CLIENT`]).
    pub max_http_connections_per_client: u32,
    /// `moat serve`'s requests of one client address waiting for its share
    /// ([`DEFAULT_MAX_WAITING_PER_CLIENT`]).
    pub max_waiting_per_client: u32,
    /// `moat serve`'s slowest request body, in bytes a second
    /// ([`DEFAULT_MIN_HTTP_BODY_RATE`]; 0, written `none`: no minimum).
    pub min_http_body_rate: u64,
    /// `moat serve`'s longest wait, once stopping, for the requests in
    /// flight ([`DEFAULT_SHUTDOWN_TIMEOUT`]).
    pub shutdown_timeout: Duration,
    /// The guest's linear memories together ([`DEFAULT_MAX_MEMORY`]).
    pub max_memory: u64,
    /// The run's wall-clock time (`None`, the default: no limit; `moat
    /// serve` gives each request 60 s).
    pub timeout: Option<Duration>,
    /// The audit trail's largest size, in bytes ([`DEFAULT_MAX_AUDIT_SIZE`]).
    pub max_audit_size: u64,
    /// `moat serve`: the trail one request's records may take
    /// ([`DEFAULT_MAX_AUDIT_PER_REQUEST`]).
    pub max_audit_per_request: u64,
    /// `moat serve`: how fast one client address's records may fill the
    /// trail, in bytes a second ([`DEFAULT_MAX_AUDIT_RATE_PER_CLIENT`]; 0,
    /// written `none`: no bound).
    pub max_audit_rate_per_client: u64,
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
            max_http_connections_per_client: DEFAULT_MAX_HTTP_CONNECTIONS_PER_CLIENT,
            max_waiting_per_client: DEFAULT_MAX_WAITING_PER_CLIENT,
            min_http_body_rate: DEFAULT_MIN_HTTP_BODY_RATE,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            max_memory: DEFAULT_MAX_MEMORY,
            timeout: None,
            max_audit_size: DEFAULT_MAX_AUDIT_SIZE,
            max_audit_per_request: DEFAULT_MAX_AUDIT_PER_REQUEST,
            max_audit_rate_per_client: DEFAULT_MAX_AUDIT_RATE_PER_CLIENT,
        }
    }
}

/// One bound's value, of the kind its setting takes ([`Kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// A count (`max-sockets`).
    Count(u32),
    /// A size in bytes (`max-memory`).
    Size(u64),
    /// A time (`timeout`).
    Duration(Duration),
    /// No bound: what an embedder may choose for some (`max_sockets:
    /// None`) and what `timeout` is by default. No source of settings can
    /// write it.
    Unbounded,
}

impl fmt::Display for Bound {
    /// As `moat run --help` prints a default and the audit trail records
    /// it: `1024`, `512MiB`, `15s`, `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Bound::Count(n) => write!(f, "{n}"),
            Bound::Size(bytes) => {
                for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
                    if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
                        return write!(f, "{}{unit}", bytes >> shift);
                    }
                }
                write!(f, "{bytes}B")
            }
            Bound::Duration(d) => {
                let ms = d.as_millis();
                for (unit, per) in [("h", 3_600_000), ("m", 60_000), ("s", 1000)] {
                    if ms >= per && ms.is_multiple_of(per) {
                        return write!(f, "{}{unit}", ms / per);
                    }
                }
                write!(f, "{ms}ms")
            }
            Bound::Unbounded => f.write_str("none"),
        }
    }
}

/// A size as the host holds it: bytes past the address space saturate.
fn bytes(size: u64) -> usize {
    usize::try_from(size).unwrap_or(usize::MAX)
}

impl Limits {
    /// The value of `setting`'s bound; `None` for a setting that is no
    /// bound (a grant, a deny list, the audit trail's destination).
    pub fn get(&self, setting: Setting) -> Option<Bound> {
        let count = |n: Option<u32>| n.map_or(Bound::Unbounded, Bound::Count);
        let size = |n: usize| Bound::Size(n as u64);
        Some(match setting {
            Setting::AllowNet
            | Setting::AllowListen
            | Setting::DenyNet
            | Setting::DenyListen
            | Setting::Secret
            | Setting::Observe
            | Setting::Audit => return None,
            Setting::MaxSockets => count(self.max_sockets),
            Setting::MaxWaitingCalls => Bound::Count(self.max_waiting_calls),
            Setting::MaxMemory => Bound::Size(self.max_memory),
            Setting::MaxHostMemory => self.max_host_memory.map_or(Bound::Unbounded, size),
            Setting::Timeout => self.timeout.map_or(Bound::Unbounded, Bound::Duration),
            Setting::MaxLookups => Bound::Count(self.max_lookups),
            Setting::LookupTimeout => Bound::Duration(self.lookup_timeout),
            Setting::TlsHandshakeTimeout => Bound::Duration(self.tls_handshake_timeout),
            Setting::MaxConnections => count(self.max_connections),
            Setting::MaxConnectionsPerPeer => count(self.max_connections_per_peer),
            Setting::MaxHttpRequests => Bound::Count(self.max_http_requests),
            Setting::HttpConnectTimeout => Bound::Duration(self.http_connect_timeout),
            Setting::HttpFirstByteTimeout => Bound::Duration(self.http_first_byte_timeout),
            Setting::HttpBetweenBytesTimeout => Bound::Duration(self.http_between_bytes_timeout),
            Setting::MaxHttpHeaderSize => size(self.max_http_header_size),
            Setting::MaxHttpConnections => Bound::Count(self.max_http_connections),
            Setting::HttpHeaderReadTimeout => Bound::Duration(self.http_header_read_timeout),
            Setting::MaxHttpBodySize => Bound::Size(self.max_http_body_size),
            Setting::MaxInstances => Bound::Count(self.max_instances),
            Setting::HttpRequestBodyTimeout => Bound::Duration(self.http_request_body_timeout),
            Setting::HttpResponseSendTimeout => Bound::Duration(self.http_response_send_timeout),
            Setting::MaxInstancesPerClient => Bound::Count(self.max_instances_per_client),
            Setting::MaxHttpConnectionsPerClient => {
                Bound::Count(self.max_http_connections_per_client)
            }
            Setting::MaxWaitingPerClient => Bound::Count(self.max_waiting_per_client),
            Setting::MinHttpBodyRate => match self.min_http_body_rate {
                0 => Bound::Unbounded,
                rate => Bound::Size(rate),
            },
            Setting::ShutdownTimeout => Bound::Duration(self.shutdown_timeout),
            Setting::MaxAuditSize => Bound::Size(self.max_audit_size),
            Setting::MaxAuditPerRequest => Bound::Size(self.max_audit_per_request),
            Setting::MaxAuditRatePerClient => match self.max_audit_rate_per_client {
                0 => Bound::Unbounded,
                rate => Bound::Size(rate),
            },
        })
    }

    /// Sets `setting`'s bound to `bound`.
    ///
    /// # Errors
    /// [`NotABound`] when `setting` is no bound, or `bound` is not of the
    /// kind it takes ([`Setting::kind`]; [`Bound::Unbounded`] only where
    /// the field can be unbounded); nothing is changed.
    pub fn set(&mut self, setting: Setting, bound: Bound) -> Result<(), NotABound> {
        let refused = NotABound { setting, bound };
        let fits = matches!(
            (setting.kind(), bound),
            (Kind::Count, Bound::Count(_) | Bound::Unbounded)
                | (Kind::Size, Bound::Size(_) | Bound::Unbounded)
                | (Kind::Duration, Bound::Duration(_) | Bound::Unbounded)
        );
        if !fits {
            return Err(refused);
        }
        let (count, size, duration) = match bound {
            Bound::Count(n) => (Some(n), None, None),
            Bound::Size(n) => (None, Some(n), None),
            Bound::Duration(d) => (None, None, Some(d)),
            Bound::Unbounded => (None, None, None),
        };
        // A field that cannot be unbounded refuses `Unbounded`.
        fn need<T>(value: Option<T>, refused: NotABound) -> Result<T, NotABound> {
            value.ok_or(refused)
        }
        match setting {
            Setting::AllowNet
            | Setting::AllowListen
            | Setting::DenyNet
            | Setting::DenyListen
            | Setting::Secret
            | Setting::Observe
            | Setting::Audit => return Err(refused),
            Setting::MaxSockets => self.max_sockets = count,
            Setting::MaxWaitingCalls => self.max_waiting_calls = need(count, refused)?,
            Setting::MaxMemory => self.max_memory = need(size, refused)?,
            Setting::MaxHostMemory => self.max_host_memory = size.map(bytes),
            Setting::Timeout => self.timeout = duration,
            Setting::MaxLookups => self.max_lookups = need(count, refused)?,
            Setting::LookupTimeout => self.lookup_timeout = need(duration, refused)?,
            Setting::TlsHandshakeTimeout => self.tls_handshake_timeout = need(duration, refused)?,
            Setting::MaxConnections => self.max_connections = count,
            Setting::MaxConnectionsPerPeer => self.max_connections_per_peer = count,
            Setting::MaxHttpRequests => self.max_http_requests = need(count, refused)?,
            Setting::HttpConnectTimeout => self.http_connect_timeout = need(duration, refused)?,
            Setting::HttpFirstByteTimeout => {
                self.http_first_byte_timeout = need(duration, refused)?
            }
            Setting::HttpBetweenBytesTimeout => {
                self.http_between_bytes_timeout = need(duration, refused)?
            }
            Setting::MaxHttpHeaderSize => self.max_http_header_size = bytes(need(size, refused)?),
            Setting::MaxHttpConnections => self.max_http_connections = need(count, refused)?,
            Setting::HttpHeaderReadTimeout => {
                self.http_header_read_timeout = need(duration, refused)?
            }
            Setting::MaxHttpBodySize => self.max_http_body_size = need(size, refused)?,
            Setting::MaxInstances => self.max_instances = need(count, refused)?,
            Setting::HttpRequestBodyTimeout => {
                self.http_request_body_timeout = need(duration, refused)?
            }
            Setting::HttpResponseSendTimeout => {
                self.http_response_send_timeout = need(duration, refused)?
            }
            Setting::MaxInstancesPerClient => self.max_instances_per_client = need(count, refused)?,
            Setting::MaxHttpConnectionsPerClient => {
                self.max_http_connections_per_client = need(count, refused)?;
            }
            Setting::MaxWaitingPerClient => self.max_waiting_per_client = need(count, refused)?,
            // `none`: no minimum rate (the pause bound alone).
            Setting::MinHttpBodyRate => self.min_http_body_rate = size.unwrap_or(0),
            Setting::ShutdownTimeout => self.shutdown_timeout = need(duration, refused)?,
            Setting::MaxAuditSize => self.max_audit_size = need(size, refused)?,
            Setting::MaxAuditPerRequest => self.max_audit_per_request = need(size, refused)?,
            // `none`: no bound on a client's rate (its requests' shares
            // alone).
            Setting::MaxAuditRatePerClient => self.max_audit_rate_per_client = size.unwrap_or(0),
        }
        Ok(())
    }
}

/// A bound that [`Limits::set`] cannot take: the setting is no bound, or
/// the value is not of its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{} cannot be set to {bound:?}", setting.key())]
pub struct NotABound {
    /// The setting.
    pub setting: Setting,
    /// The value refused.
    pub bound: Bound,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every bound reads back what was set, and every setting that is no
    /// bound is refused: `get` and `set` cover the same settings.
    #[test]
    fn every_bound_reads_back_what_was_set() {
        for setting in Setting::ALL {
            let mut limits = Limits::default();
            let bound = match setting.kind() {
                Kind::Count => Bound::Count(7),
                Kind::Size => Bound::Size(7 << 20),
                Kind::Duration => Bound::Duration(Duration::from_secs(7)),
                Kind::Grant | Kind::Deny | Kind::File | Kind::Secret | Kind::Switch => {
                    assert!(limits.set(setting, Bound::Count(7)).is_err(), "{setting:?}");
                    assert_eq!(limits.get(setting), None, "{setting:?}");
                    continue;
                }
            };
            assert_ne!(
                limits.get(setting),
                Some(bound),
                "{setting:?}: not the default"
            );
            limits.set(setting, bound).unwrap();
            assert_eq!(limits.get(setting), Some(bound), "{setting:?}");
            let mut other = Limits::default();
            assert!(other.set(setting, Bound::Count(0)).is_err() || setting.kind() == Kind::Count);
            other.set(setting, bound).unwrap();
            assert_eq!(other, limits, "{setting:?}: set changes that field alone");
        }
    }

    #[test]
    fn a_default_prints_as_help_shows_it() {
        let limits = Limits::default();
        assert_eq!(limits.get(Setting::MaxSockets).unwrap().to_string(), "1024");
        assert_eq!(
            limits.get(Setting::MaxMemory).unwrap().to_string(),
            "512MiB"
        );
        assert_eq!(
            limits.get(Setting::LookupTimeout).unwrap().to_string(),
            "15s"
        );
        assert_eq!(limits.get(Setting::Timeout).unwrap().to_string(), "none");
        assert_eq!(
            limits.get(Setting::MaxAuditSize).unwrap().to_string(),
            "1GiB"
        );
        assert_eq!(Bound::Size(1536).to_string(), "1536B");
        assert_eq!(
            Bound::Duration(Duration::from_millis(1500)).to_string(),
            "1500ms"
        );
    }
}
