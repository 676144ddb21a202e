//! What the trail records, and its JSON form (`docs/audit.schema.json`
//! describes it; a test validates every record the tests write).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use moat_policy::policy::{Host, Provenance, Source};
use moat_policy::setting::{Setting, Spelling};

/// The version of the records' form, the `schema` field of every record.
/// It changes when a field changes meaning or goes away; fields may be
/// added within a version. Version 2: the outgoing HTTP requests'
/// records (`request` on their decisions and connects, `http-exchange`).
/// Version 3: the `reload` and `request-share-full` records (`moat serve`
/// replaced its handler; one request's records took their share).
/// Version 4: the `client-rate-full` record (one client address's records
/// came faster than their rate). Version 5: the `reload-failed` record (a
/// reload that left the old handler serving).
pub const SCHEMA_VERSION: u32 = 5;

/// Which component a run runs: its file name and the SHA-256 of its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestIdentity {
    /// The file name, without its directory.
    pub file: String,
    /// The hex of the SHA-256 of the component's bytes.
    pub sha256: String,
}

/// A request a client of `moat serve` made: what ties the records its
/// handler caused, and the server's line if it failed, to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncomingRequest {
    /// The server's id for it: the server's random prefix and the
    /// request's number (`5f0c9a2e-17`).
    pub id: String,
    /// The client's address.
    pub peer: std::net::IpAddr,
    /// Its method.
    pub method: String,
    /// Its path, without the query (which may hold what the client would
    /// not have logged).
    pub path: String,
}

impl GuestIdentity {
    /// The identity of the component `bytes`, read from `file`.
    pub fn of(file: &std::path::Path, bytes: &[u8]) -> GuestIdentity {
        GuestIdentity::with_digest(
            file,
            Sha256::digest(bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
        )
    }

    /// The identity of the component read from `file` whose SHA-256, in
    /// hex, is `sha256` (taken by the caller from the bytes it loads).
    pub(crate) fn with_digest(file: &std::path::Path, sha256: String) -> GuestIdentity {
        GuestIdentity {
            file: file.file_name().map_or_else(
                || file.display().to_string(),
                |name| name.to_string_lossy().into_owned(),
            ),
            sha256,
        }
    }
}

/// What every record of one run carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    /// The run's id: 32 hex digits, random, new for each run.
    pub run: String,
    /// The component, if the embedder named it.
    pub guest: Option<GuestIdentity>,
    /// Under the containerd shim: the container's namespace and id.
    pub container: Option<(String, String)>,
    /// The run is in observe mode (`--observe`): every record says so.
    pub observe: bool,
}

impl Context {
    /// A new run of `guest`, with a fresh random id.
    pub fn new(guest: Option<GuestIdentity>) -> Context {
        let mut id = [0u8; 16];
        // An id that cannot be random (no entropy source) is still unique
        // enough within a host's logs: the time and the process.
        if getrandom::fill(&mut id).is_err() {
            let now = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos();
            id[..8].copy_from_slice(&(now as u64).to_be_bytes());
            id[8..12].copy_from_slice(&std::process::id().to_be_bytes());
        }
        Context {
            run: id.iter().map(|b| format!("{b:02x}")).collect(),
            guest,
            container: None,
            observe: false,
        }
    }

    /// This context, of a run in observe mode when `on`: every record
    /// then carries `"observe": true`.
    pub fn observing(mut self, on: bool) -> Context {
        self.observe = on;
        self
    }

    /// This context, for a container of `namespace` with `id`.
    pub fn in_container(mut self, namespace: impl Into<String>, id: impl Into<String>) -> Context {
        self.container = Some((namespace.into(), id.into()));
        self
    }
}

/// An operation the policy judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// A TCP connect (moat:net or wasi:sockets).
    Connect,
    /// A TCP listen (moat:net or wasi:sockets).
    Listen,
    /// A TCP socket bound to a fixed local port before its listen (a
    /// stock wasi:sockets program).
    TcpBind,
    /// A UDP socket bound to a local address.
    UdpBind,
    /// A UDP datagram sent, or a UDP socket's peer fixed.
    UdpSend,
    /// A multicast group joined.
    MulticastJoin,
    /// A name looked up by a program that looks names up itself (a stock
    /// wasi:sockets program).
    Lookup,
    /// TLS started on a connection (its connect was judged already).
    TlsUpgrade,
    /// An outgoing wasi:http request.
    HttpRequest,
    /// `moat serve`'s listening address, the operator's grant.
    ServeBind,
}

impl Operation {
    /// Every operation, in declaration order.
    pub const ALL: [Operation; 10] = [
        Operation::Connect,
        Operation::Listen,
        Operation::TcpBind,
        Operation::UdpBind,
        Operation::UdpSend,
        Operation::MulticastJoin,
        Operation::Lookup,
        Operation::TlsUpgrade,
        Operation::HttpRequest,
        Operation::ServeBind,
    ];

    /// Its place in [`Operation::ALL`].
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The operation's name in records: `connect`, `udp-send`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Connect => "connect",
            Operation::Listen => "listen",
            Operation::TcpBind => "tcp-bind",
            Operation::UdpBind => "udp-bind",
            Operation::UdpSend => "udp-send",
            Operation::MulticastJoin => "multicast-join",
            Operation::Lookup => "lookup",
            Operation::TlsUpgrade => "tls-upgrade",
            Operation::HttpRequest => "http-request",
            Operation::ServeBind => "serve-bind",
        }
    }
}

/// A resolved address a deny entry refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The address.
    pub address: IpAddr,
    /// The deny entry that refused it.
    pub rule: Provenance,
}

/// Why a call was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// No grant entry allows the host as written; `needs` is the setting
    /// that would (`--allow-net=example.com:443`).
    NoGrant {
        /// The setting, as the run's granter writes it.
        needs: String,
    },
    /// A deny entry matched the host as written, or (with `address`) an
    /// address the name resolved to or that the host carries.
    DenyEntry {
        /// The entry as written and where.
        rule: Provenance,
        /// The address it matched, when not the host itself.
        address: Option<IpAddr>,
    },
    /// A bound of the run was reached.
    Limit {
        /// The setting that raises it; `None` for a fixed cap of moat's.
        setting: Option<Setting>,
        /// What was reached, in words.
        reached: String,
    },
    /// The call could not be judged: the host or address is not one a
    /// call may name (the unspecified address as a destination, ...).
    Invalid,
    /// A secret's placeholder was where the secret may not go.
    Secret {
        /// The secret's name (never its value).
        secret: String,
        /// Where the placeholder was.
        place: String,
    },
}

/// What was decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Allowed, by `rule` (as written and where); `None` when no grant is
    /// involved (a TLS upgrade of a connection already judged).
    Allowed {
        /// The grant entry.
        rule: Option<Arc<Provenance>>,
    },
    /// Refused.
    Denied {
        /// Why.
        reason: Reason,
        /// The message the guest (or its stderr) got.
        message: String,
    },
    /// Let through in observe mode (`--observe`): no grant allows it, and
    /// no deny entry refuses it.
    WouldDeny {
        /// The setting that would allow it, as the run's granter writes
        /// it (`--allow-net=example.com:443`).
        needs: String,
        /// The refusal the guest would have had.
        message: String,
    },
}

/// An outcome as counted: allowed, denied, or let through in observe
/// mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decided {
    /// Allowed.
    Allowed,
    /// Refused.
    Denied,
    /// Let through in observe mode.
    WouldDeny,
}

impl Decided {
    /// Every outcome, in the order counts keep them.
    pub const ALL: [Decided; 3] = [Decided::Allowed, Decided::Denied, Decided::WouldDeny];

    /// Its label (`moat_decisions_total`'s `outcome`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Decided::Allowed => "allowed",
            Decided::Denied => "denied",
            Decided::WouldDeny => "would_deny",
        }
    }
}

/// One decision, as the socket core describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// What the guest asked for.
    pub operation: Operation,
    /// The host as the guest wrote it (normalised: IPv6 in brackets, a
    /// name in lower case); empty for a call refused before it had a host
    /// moat could judge (see `written`).
    pub host: String,
    /// For a call refused before it had a host moat could judge: the
    /// destination as the guest wrote it (an HTTP request's authority:
    /// `127.1`, `host:99999`, empty); `None` otherwise.
    pub written: Option<String>,
    /// The port; `None` for a lookup.
    pub port: Option<u16>,
    /// Every address the name resolved to (empty for an IP literal or a
    /// call refused before any lookup).
    pub resolved: Vec<IpAddr>,
    /// The resolved addresses deny entries refused, each with its entry.
    pub refused: Vec<Refusal>,
    /// The address used, when one was.
    pub address: Option<SocketAddr>,
    /// The decision.
    pub outcome: Outcome,
    /// For an allowed call: what the network then said, if it failed
    /// (the name has no address, the peer refused the connection).
    pub error: Option<String>,
    /// An allowed connect whose destination is the program's own loopback
    /// listener, admitted by that listener's listen grant (`rule`).
    pub own_listener: bool,
    /// The outgoing HTTP request the call is part of: the request's own
    /// decision, and the connect of a connection made for it.
    pub http: Option<HttpLink>,
}

/// An outgoing HTTP request as the guest wrote it: on its decision, on
/// the connect of a connection made for it, and on its
/// [`Body::HttpExchange`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// The request's number within the run, from 1.
    pub id: u64,
    /// The method (`GET`).
    pub method: String,
    /// The scheme as written (`http`, `https`; empty when none was).
    pub scheme: String,
    /// The authority as written (`example.com:8080`).
    pub authority: String,
    /// The path, without its query: a query often carries credentials
    /// (`?token=`), which the trail does not keep.
    pub path: String,
    /// Whether the target had a query.
    pub query: bool,
}

impl HttpRequest {
    /// About how many bytes it holds.
    pub fn size(&self) -> usize {
        64 + self.method.len() + self.scheme.len() + self.authority.len() + self.path.len()
    }
}

/// What ties a record to an outgoing HTTP request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpLink {
    /// The request.
    pub request: Arc<HttpRequest>,
    /// On a connect record: the number (within the run) of the connection
    /// made for the request, which its [`Body::HttpExchange`] names.
    pub connection: Option<u64>,
}

/// The connection an outgoing HTTP request went on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConnection {
    /// Its number within the run, as on the connect record made for it.
    pub id: u64,
    /// Whether it was kept alive from an earlier request.
    pub reused: bool,
    /// `HTTP/1.1` or `HTTP/2`.
    pub protocol: &'static str,
    /// What its name resolved to when it was made (empty for an IP
    /// literal).
    pub resolved: Vec<IpAddr>,
    /// The peer's address.
    pub address: SocketAddr,
}

/// How an outgoing HTTP request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpEnd {
    /// The response's body was read to its end.
    Complete,
    /// The request failed (`error` says how): no response, or its body
    /// broke off.
    Failed,
    /// The guest dropped the request or its response before the end.
    Abandoned,
}

impl HttpEnd {
    /// The name in records.
    pub fn as_str(self) -> &'static str {
        match self {
            HttpEnd::Complete => "complete",
            HttpEnd::Failed => "failed",
            HttpEnd::Abandoned => "abandoned",
        }
    }
}

/// One allowed outgoing HTTP request, recorded when it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpExchange {
    /// The request.
    pub request: Arc<HttpRequest>,
    /// The host as judged, and the port.
    pub host: String,
    /// The port.
    pub port: u16,
    /// The connection it went on; `None` if it never had one.
    pub connection: Option<HttpConnection>,
    /// The response's status, if one came.
    pub status: Option<u16>,
    /// How it ended.
    pub end: HttpEnd,
    /// What failed, for [`HttpEnd::Failed`].
    pub error: Option<String>,
    /// Bytes of the request's body sent.
    pub sent: u64,
    /// Bytes of the response's body received.
    pub received: u64,
}

/// The most bytes of one text a guest, a client or a peer chose (a path,
/// an authority, an error, the message that repeats them) that a record
/// keeps. Past it a text is cut (its first bytes, its length and a hash): a record stays a few KiB
/// whatever was asked, so that one request cannot fill the trail (which
/// refuses every later operation once full) or, through the counts of
/// repeated denials, the host's memory. 256 bytes hold any host name (at
/// most 253) and the paths of ordinary APIs whole.
pub(crate) const MAX_RECORDED_TEXT: usize = 256;

/// `text` as a record keeps it: whole up to [`MAX_RECORDED_TEXT`] bytes;
/// past it, its first bytes up to that, then `...[cut: N bytes, sha256
/// H]` with its length and the first 16 hex digits of its SHA-256, so
/// that two long texts still tell apart and a reader who holds the whole
/// text can match it.
pub(crate) fn cut(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= MAX_RECORDED_TEXT {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut end = MAX_RECORDED_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let digest = Sha256::digest(text.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    std::borrow::Cow::Owned(format!(
        "{}...[cut: {} bytes, sha256 {hex}]",
        &text[..end],
        text.len()
    ))
}

/// Cuts `text` in place ([`cut`]).
fn cut_in_place(text: &mut String) {
    if let std::borrow::Cow::Owned(short) = cut(text) {
        *text = short;
    }
}

impl HttpRequest {
    /// The request with each text cut to 256 bytes and a hash.
    #[must_use]
    pub fn cut(mut self) -> HttpRequest {
        cut_in_place(&mut self.method);
        cut_in_place(&mut self.scheme);
        cut_in_place(&mut self.authority);
        cut_in_place(&mut self.path);
        self
    }
}

impl HttpExchange {
    /// The exchange with each text cut (as [`MAX_RECORDED_TEXT`] says); its request is cut
    /// where it is made.
    pub(crate) fn cut(mut self) -> HttpExchange {
        cut_in_place(&mut self.host);
        if let Some(error) = &mut self.error {
            cut_in_place(error);
        }
        self
    }
}

impl Event {
    /// The event with every text a guest or a peer chose cut (as
    /// [`MAX_RECORDED_TEXT`] says):
    /// what a record, and the count of a repeated denial, keep of it.
    pub(crate) fn cut(mut self) -> Event {
        cut_in_place(&mut self.host);
        for text in self.written.iter_mut().chain(self.error.iter_mut()) {
            cut_in_place(text);
        }
        match &mut self.outcome {
            Outcome::Denied { reason, message } => {
                cut_in_place(message);
                match reason {
                    Reason::NoGrant { needs } => cut_in_place(needs),
                    Reason::Limit { reached, .. } => cut_in_place(reached),
                    // The place may name a header the guest chose.
                    Reason::Secret { place, .. } => cut_in_place(place),
                    Reason::DenyEntry { .. } | Reason::Invalid => {}
                }
            }
            Outcome::WouldDeny { needs, message } => {
                cut_in_place(needs);
                cut_in_place(message);
            }
            Outcome::Allowed { .. } => {}
        }
        if let Some(link) = &mut self.http
            && link.request.size() > 4 * MAX_RECORDED_TEXT + 64
        {
            link.request = Arc::new((*link.request).clone().cut());
        }
        self
    }

    /// An event for `operation` on `host`:`port` with nothing resolved yet.
    pub fn new(operation: Operation, host: &Host, port: Option<u16>, outcome: Outcome) -> Event {
        Event {
            operation,
            host: host.to_string(),
            written: None,
            port,
            resolved: Vec::new(),
            refused: Vec::new(),
            address: None,
            outcome,
            error: None,
            own_listener: false,
            http: None,
        }
    }

    /// An event for `operation` on a destination that is not a host moat
    /// can judge, as `written` (an HTTP request's authority: empty, `127.1`,
    /// a port that is not one).
    pub fn written(
        operation: Operation,
        written: &str,
        port: Option<u16>,
        outcome: Outcome,
    ) -> Event {
        Event {
            operation,
            host: String::new(),
            written: Some(written.to_owned()),
            port,
            resolved: Vec::new(),
            refused: Vec::new(),
            address: None,
            outcome,
            error: None,
            own_listener: false,
            http: None,
        }
    }

    /// Whether the call was allowed.
    pub fn allowed(&self) -> bool {
        matches!(self.outcome, Outcome::Allowed { .. })
    }

    /// The outcome as counted.
    pub fn decided(&self) -> Decided {
        match self.outcome {
            Outcome::Allowed { .. } => Decided::Allowed,
            Outcome::Denied { .. } => Decided::Denied,
            Outcome::WouldDeny { .. } => Decided::WouldDeny,
        }
    }
}

/// One setting of the run, for the first record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingRecord {
    /// The setting's key (`allow-net`, `max-sockets`).
    pub setting: &'static str,
    /// Its value as written, or its default.
    pub value: String,
    /// Where it was written; `None` for a default.
    pub source: Option<Source>,
}

/// What a record says.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(
    clippy::large_enum_variant,
    reason = "nearly every record is a decision: boxing it would add an allocation to each"
)]
pub enum Body {
    /// The run's settings, the first record of every run.
    Settings(Vec<SettingRecord>),
    /// One decision.
    Decision(Event),
    /// The UDP sends to one destination within one second after its first
    /// send, which has a [`Body::Decision`] of its own.
    UdpSendCounts {
        /// The destination as written.
        host: String,
        /// Its port.
        port: u16,
        /// Whether these sends were allowed.
        allowed: bool,
        /// The second counted (its start).
        second: SystemTime,
        /// Sends in that second.
        count: u64,
    },
    /// A denial repeated within one second after its first (which has a
    /// [`Body::Decision`] of its own): the first's record, and how many
    /// more there were.
    DenialCounts {
        /// The first denial of this kind, as recorded.
        first: Box<Event>,
        /// The second counted (its start).
        second: SystemTime,
        /// Denials in that second like the first.
        count: u64,
    },
    /// An allowed outgoing HTTP request, once it ended.
    HttpExchange(Box<HttpExchange>),
    /// `moat serve` replaced its handler: the record's guest is the new
    /// one; `previous` the one it replaced.
    Reload {
        /// The guest served until then.
        previous: Option<GuestIdentity>,
    },
    /// `moat serve` tried to replace its handler and could not: the
    /// record's guest is the one still served.
    ReloadFailed {
        /// The file it loaded, without its directory.
        file: String,
        /// Why, in a line.
        error: String,
    },
    /// One request's records reached their share of the trail (`moat
    /// serve`'s `--max-audit-per-request`): nothing more of that request is
    /// recorded, and its audited operations are refused from here on; the
    /// server's other requests go on.
    ShareFull {
        /// The share, in bytes.
        limit: u64,
    },
    /// One client address's requests wrote records faster than their rate
    /// (`moat serve`'s `--max-audit-rate-per-client`): nothing more of that
    /// client is recorded, and its audited operations are refused, until
    /// its rate allows more; the server's other clients go on.
    ClientRateFull {
        /// The rate, in bytes a second.
        rate: u64,
    },
    /// The trail reached its size cap: nothing more is recorded, so the
    /// run's network is refused from here on.
    Full {
        /// The cap, in bytes.
        limit: u64,
    },
}

impl Body {
    /// About how many bytes the body holds, for the bound on the queue:
    /// a fixed part and its strings and lists.
    pub fn size(&self) -> usize {
        const FIXED: usize = 256;
        match self {
            Body::Settings(settings) => {
                FIXED + settings.iter().map(|s| 96 + s.value.len()).sum::<usize>()
            }
            Body::Decision(event) => event_size(event),
            Body::UdpSendCounts { host, .. } => FIXED + host.len(),
            Body::DenialCounts { first, .. } => FIXED + event_size(first),
            Body::HttpExchange(exchange) => {
                FIXED
                    + exchange.request.size()
                    + exchange.host.len()
                    + exchange.error.as_ref().map_or(0, String::len)
                    + exchange
                        .connection
                        .as_ref()
                        .map_or(0, |c| c.resolved.len() * size_of::<IpAddr>())
            }
            Body::Reload { previous } => {
                FIXED
                    + previous
                        .as_ref()
                        .map_or(0, |g| g.file.len() + g.sha256.len())
            }
            Body::ReloadFailed { file, error } => FIXED + file.len() + error.len(),
            Body::ShareFull { .. } | Body::ClientRateFull { .. } | Body::Full { .. } => FIXED,
        }
    }
}

/// A component's identity as records write it, or null.
fn guest_json(guest: Option<&GuestIdentity>) -> Value {
    match guest {
        Some(g) => json!({ "file": g.file, "sha256": g.sha256 }),
        None => Value::Null,
    }
}

/// Which of the trail's caps was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FullKind {
    /// A request's share ([`Setting::MaxAuditPerRequest`]).
    Share,
    /// A client address's rate ([`Setting::MaxAuditRatePerClient`]).
    ClientRate,
    /// The trail's size ([`Setting::MaxAuditSize`]).
    Trail,
}

impl FullKind {
    /// The record's `kind`.
    fn kind(self) -> &'static str {
        match self {
            FullKind::Share => "request-share-full",
            FullKind::ClientRate => "client-rate-full",
            FullKind::Trail => "trail-full",
        }
    }
}

/// What the guest and the trail are told when the cap `kind` of `bound`
/// bytes (a second, for a rate) is reached, naming its setting in
/// `spelling`'s words.
pub(crate) fn full_text(kind: FullKind, bound: u64, spelling: Spelling) -> String {
    match kind {
        FullKind::Share => format!(
            "audit trail full for this request: its records reached their share of {bound} \
             bytes, and no more of its network operations are allowed (raise it with {})",
            Setting::MaxAuditPerRequest.named(spelling)
        ),
        FullKind::ClientRate => format!(
            "audit trail full for this client: its requests' records came faster than {bound} \
             bytes a second, and no more of its network operations are allowed for now (raise \
             it with {})",
            Setting::MaxAuditRatePerClient.named(spelling)
        ),
        FullKind::Trail => format!(
            "audit trail full: it reached its size cap of {bound} bytes, and no network \
             operation is allowed past it (raise it with {})",
            Setting::MaxAuditSize.named(spelling)
        ),
    }
}

/// The fields of a record that says a cap was reached: the cap and what
/// operations are refused with from then on.
fn cap_json(record: &mut Map<String, Value>, kind: FullKind, bound: u64, spelling: Spelling) {
    record.insert("kind".into(), json!(kind.kind()));
    record.insert("limit".into(), json!(bound));
    record.insert("message".into(), json!(full_text(kind, bound, spelling)));
}

/// About how many bytes a decision record holds (see [`Body::size`]).
fn event_size(event: &Event) -> usize {
    const FIXED: usize = 256;
    FIXED
        + event.host.len()
        + event.written.as_ref().map_or(0, String::len)
        + event.resolved.len() * size_of::<IpAddr>()
        + event
            .refused
            .iter()
            .map(|r| 96 + r.rule.entry.len())
            .sum::<usize>()
        + match &event.outcome {
            Outcome::Denied { message, .. } => 128 + message.len(),
            Outcome::WouldDeny { needs, message } => 128 + needs.len() + message.len(),
            Outcome::Allowed { .. } => 0,
        }
        + event.error.as_ref().map_or(0, String::len)
        + event.http.as_ref().map_or(0, |link| link.request.size())
}

/// One record of the trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    /// When the decision was made.
    pub time: SystemTime,
    /// The run.
    pub context: Arc<Context>,
    /// Under `moat serve`: the client's request whose handler made the
    /// record, if one did.
    pub incoming: Option<Arc<IncomingRequest>>,
    /// What it says.
    pub body: Body,
    /// The words its text names settings in: those of the front the run's
    /// settings came from (`--max-sockets`, `MOAT_MAX_SOCKETS`,
    /// `Limits::max_sockets`).
    pub wording: Spelling,
}

/// `time` in RFC 3339, UTC, to the microsecond (a clock set before 1970
/// reads as 1970).
fn rfc3339(time: SystemTime) -> String {
    humantime::format_rfc3339_micros(time.max(SystemTime::UNIX_EPOCH)).to_string()
}

fn source_json(source: Option<&Source>) -> Value {
    match source {
        None => json!({ "kind": "default" }),
        Some(Source::Flag { flag }) => json!({ "kind": "flag", "flag": flag }),
        Some(Source::PolicyFile { path, line }) => {
            json!({ "kind": "policy-file", "path": path.display().to_string(), "line": line })
        }
        Some(Source::Environment { variable }) => {
            json!({ "kind": "environment", "variable": variable })
        }
        Some(Source::ImagePolicy { digest, line }) => {
            json!({ "kind": "image-policy", "digest": digest, "line": line })
        }
        Some(Source::Embedding) => json!({ "kind": "embedding" }),
    }
}

fn rule_json(rule: &Provenance) -> Value {
    json!({ "entry": rule.entry, "source": source_json(Some(&rule.source)) })
}

fn address_json(addr: IpAddr) -> Value {
    Value::String(addr.to_canonical().to_string())
}

impl AuditRecord {
    /// The record as JSON, in the form `docs/audit.schema.json` gives.
    ///
    /// One piece (as `decision_json`): a line for each field, in the
    /// schema's order, so that the two are read side by side.
    pub fn to_json(&self) -> Value {
        let mut record = Map::new();
        record.insert("schema".into(), json!(SCHEMA_VERSION));
        record.insert("time".into(), json!(rfc3339(self.time)));
        record.insert("run".into(), json!(self.context.run));
        record.insert("guest".into(), guest_json(self.context.guest.as_ref()));
        if let Some((namespace, id)) = &self.context.container {
            record.insert(
                "container".into(),
                json!({ "namespace": namespace, "id": id }),
            );
        }
        if self.context.observe {
            record.insert("observe".into(), json!(true));
        }
        if let Some(incoming) = &self.incoming {
            record.insert(
                "incoming".into(),
                json!({
                    "id": incoming.id,
                    "peer": incoming.peer.to_canonical().to_string(),
                    "method": incoming.method,
                    "path": incoming.path,
                }),
            );
        }
        match &self.body {
            Body::Settings(settings) => {
                record.insert("kind".into(), json!("settings"));
                let list = settings
                    .iter()
                    .map(|s| {
                        json!({
                            "setting": s.setting,
                            "value": s.value,
                            "source": source_json(s.source.as_ref()),
                        })
                    })
                    .collect();
                record.insert("settings".into(), Value::Array(list));
            }
            Body::Decision(event) => {
                record.insert("kind".into(), json!("decision"));
                decision_json(&mut record, event, self.wording);
            }
            Body::UdpSendCounts {
                host,
                port,
                allowed,
                second,
                count,
            } => {
                record.insert("kind".into(), json!("udp-send-counts"));
                record.insert("operation".into(), json!(Operation::UdpSend.as_str()));
                record.insert("host".into(), json!(host));
                record.insert("port".into(), json!(port));
                record.insert(
                    "decision".into(),
                    json!(if *allowed { "allowed" } else { "denied" }),
                );
                record.insert("second".into(), json!(rfc3339(*second)));
                record.insert("count".into(), json!(count));
            }
            Body::DenialCounts {
                first,
                second,
                count,
            } => {
                record.insert("kind".into(), json!("denial-counts"));
                decision_json(&mut record, first, self.wording);
                record.insert("second".into(), json!(rfc3339(*second)));
                record.insert("count".into(), json!(count));
            }
            Body::HttpExchange(exchange) => {
                record.insert("kind".into(), json!("http-exchange"));
                exchange_json(&mut record, exchange);
            }
            Body::Reload { previous } => {
                record.insert("kind".into(), json!("reload"));
                record.insert("previous".into(), guest_json(previous.as_ref()));
            }
            Body::ReloadFailed { file, error } => {
                record.insert("kind".into(), json!("reload-failed"));
                record.insert("file".into(), json!(file));
                record.insert("error".into(), json!(error));
            }
            Body::ShareFull { limit } => {
                cap_json(&mut record, FullKind::Share, *limit, self.wording);
            }
            Body::ClientRateFull { rate } => {
                cap_json(&mut record, FullKind::ClientRate, *rate, self.wording);
            }
            Body::Full { limit } => cap_json(&mut record, FullKind::Trail, *limit, self.wording),
        }
        Value::Object(record)
    }
}

fn request_json(request: &HttpRequest) -> Value {
    json!({
        "id": request.id,
        "method": request.method,
        "scheme": request.scheme,
        "authority": request.authority,
        "path": request.path,
        "query": request.query,
    })
}

fn exchange_json(record: &mut Map<String, Value>, exchange: &HttpExchange) {
    record.insert("request".into(), request_json(&exchange.request));
    record.insert("host".into(), json!(exchange.host));
    record.insert("port".into(), json!(exchange.port));
    let connection = exchange.connection.as_ref();
    record.insert("connection".into(), json!(connection.map(|c| c.id)));
    record.insert("reused".into(), json!(connection.map(|c| c.reused)));
    record.insert("protocol".into(), json!(connection.map(|c| c.protocol)));
    record.insert(
        "resolved".into(),
        Value::Array(
            connection
                .map(|c| c.resolved.iter().copied().map(address_json).collect())
                .unwrap_or_default(),
        ),
    );
    record.insert(
        "address".into(),
        match connection {
            Some(c) => json!(socket_address(c.address)),
            None => Value::Null,
        },
    );
    record.insert("status".into(), json!(exchange.status));
    record.insert("end".into(), json!(exchange.end.as_str()));
    record.insert("error".into(), json!(exchange.error));
    record.insert("sent".into(), json!(exchange.sent));
    record.insert("received".into(), json!(exchange.received));
}

/// A socket address as records write it (an IPv4-mapped IPv6 address as
/// IPv4).
fn socket_address(addr: SocketAddr) -> String {
    SocketAddr::new(addr.ip().to_canonical(), addr.port()).to_string()
}

/// A decision's fields, into `record`; one piece, as [`AuditRecord::to_json`].
fn decision_json(record: &mut Map<String, Value>, event: &Event, wording: Spelling) {
    record.insert("operation".into(), json!(event.operation.as_str()));
    if let Some(link) = &event.http {
        record.insert("request".into(), request_json(&link.request));
        if let Some(connection) = link.connection {
            record.insert("connection".into(), json!(connection));
        }
    }
    match &event.written {
        None => record.insert("host".into(), json!(event.host)),
        Some(written) => {
            record.insert("written".into(), json!(written));
            record.insert("host".into(), Value::Null)
        }
    };
    record.insert("port".into(), json!(event.port));
    record.insert(
        "resolved".into(),
        Value::Array(event.resolved.iter().copied().map(address_json).collect()),
    );
    record.insert(
        "refused".into(),
        Value::Array(
            event
                .refused
                .iter()
                .map(|r| {
                    json!({
                        "address": address_json(r.address),
                        "rule": rule_json(&r.rule),
                    })
                })
                .collect(),
        ),
    );
    record.insert(
        "address".into(),
        match event.address {
            Some(addr) => json!(socket_address(addr)),
            None => Value::Null,
        },
    );
    match &event.outcome {
        Outcome::Allowed { rule } => {
            record.insert("decision".into(), json!("allowed"));
            record.insert(
                "rule".into(),
                rule.as_deref().map_or(Value::Null, rule_json),
            );
            record.insert("error".into(), json!(event.error));
            if event.own_listener {
                record.insert("own_listener".into(), json!(true));
            }
        }
        Outcome::WouldDeny { needs, message } => {
            record.insert("decision".into(), json!("would-deny"));
            record.insert("rule".into(), Value::Null);
            record.insert(
                "reason".into(),
                json!({ "kind": "no-grant", "needs": needs }),
            );
            record.insert("message".into(), json!(message));
            record.insert("error".into(), json!(event.error));
        }
        Outcome::Denied { reason, message } => {
            record.insert("decision".into(), json!("denied"));
            let (rule, reason) = match reason {
                Reason::NoGrant { needs } => {
                    (Value::Null, json!({ "kind": "no-grant", "needs": needs }))
                }
                Reason::DenyEntry { rule, address } => (
                    rule_json(rule),
                    json!({
                        "kind": if address.is_some() { "address-denied" } else { "deny-entry" },
                        "address": address.map(address_json),
                    }),
                ),
                Reason::Limit { setting, reached } => {
                    // A fixed cap has no setting: the record says what was
                    // reached instead.
                    let setting =
                        setting.map_or_else(|| reached.clone(), |s| s.named(wording).to_owned());
                    (Value::Null, json!({ "kind": "limit", "setting": setting }))
                }
                Reason::Invalid => (Value::Null, json!({ "kind": "invalid" })),
                Reason::Secret { secret, place } => (
                    Value::Null,
                    json!({ "kind": "secret", "secret": secret, "place": place }),
                ),
            };
            record.insert("rule".into(), rule);
            record.insert("reason".into(), reason);
            record.insert("message".into(), json!(message));
        }
    }
}

#[cfg(test)]
mod cut_tests {
    use super::*;

    #[test]
    fn a_long_text_is_cut_at_a_character_with_its_length_and_hash() {
        assert_eq!(cut("/short"), "/short");
        let exact = "x".repeat(MAX_RECORDED_TEXT);
        assert_eq!(cut(&exact), exact.as_str());
        // A two-byte character across the bound is left out whole.
        let long = format!("{}é{}", "a".repeat(MAX_RECORDED_TEXT - 1), "z".repeat(999));
        let short = cut(&long);
        assert!(
            short.starts_with(&format!(
                "{}...[cut: {} bytes, sha256 ",
                "a".repeat(255),
                long.len()
            )),
            "{short}"
        );
        let other = format!("{}é{}", "a".repeat(MAX_RECORDED_TEXT - 1), "y".repeat(999));
        assert_ne!(cut(&other), short, "two long texts stay apart");
    }
}
