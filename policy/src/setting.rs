//! The table of a run's settings: each setting once, with the name each
//! source gives it (`--max-sockets` on `moat run`'s command line,
//! `max-sockets` in a policy file, `MOAT_MAX_SOCKETS` in a container's
//! environment), the kind of value it takes and its help line.
//!
//! `moat run`'s flags and help, the policy file's keys, the shim's
//! variables and every message that names a setting come from this table;
//! [`crate::settings::Settings::set`] reads a value of each kind the same
//! way from every source. A new bound is a row here, a field of
//! [`crate::limits::Limits`] with its default and its arms in
//! `Limits::get` and `Limits::set`, and the place that enforces it.
//!
//! Every message that tells the user which setting to change takes the
//! name from here, as [`Spelling`] says the user writes it, so that a bound
//! reached under the containerd shim names the `MOAT_*` variable, not a
//! flag the shim has no use for. Refusals carry the [`Setting`] alone; the
//! edge that shows one renders it in its run's words ([`Worded`]). This
//! file imports nothing of moat's: the socket core, the bounds and the
//! settings all name settings through it.

/// How the person who grants writes a setting, so that a message names
/// the setting as that person writes it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Spelling {
    /// `moat run`'s flags: `--allow-net=HOST:PORT`, `--max-sockets=N`.
    Flags,
    /// A container's environment (the containerd shim):
    /// `MOAT_ALLOW_NET=HOST:PORT`, `MOAT_MAX_SOCKETS=N`.
    Environment,
    /// The embedding API: `Policy::allow_connect("HOST:PORT")`,
    /// `Limits::max_sockets`. The default: a [`crate::policy::Policy`]
    /// made in code is an embedder's, and its denials should name what
    /// the embedder's code writes, not a command line it does not have.
    #[default]
    Embedding,
}

/// One setting of a run: a grant, a deny list or a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Setting {
    /// Where the guest may connect.
    AllowNet,
    /// Where the guest may listen.
    AllowListen,
    /// Where the guest may not connect, whatever is granted.
    DenyNet,
    /// Where the guest may not listen, whatever is granted.
    DenyListen,
    /// A secret the guest holds a placeholder of, and where it may go.
    Secret,
    /// Observe mode: what the grants would refuse goes through, recorded.
    Observe,
    /// Sockets and listeners open at once.
    MaxSockets,
    /// Receives, accepts and lookups waiting at once.
    MaxWaitingCalls,
    /// The guest's linear memory.
    MaxMemory,
    /// The host memory the run's network state may hold.
    MaxHostMemory,
    /// The run's wall-clock time.
    Timeout,
    /// Name lookups in flight at once.
    MaxLookups,
    /// One name lookup's time.
    LookupTimeout,
    /// One TLS handshake's time.
    TlsHandshakeTimeout,
    /// Open connections per listener.
    MaxConnections,
    /// Open connections per listener from one peer.
    MaxConnectionsPerPeer,
    /// wasi:http requests in flight at once.
    MaxHttpRequests,
    /// An outgoing HTTP request's connect time.
    HttpConnectTimeout,
    /// An outgoing HTTP request's wait for the response's head.
    HttpFirstByteTimeout,
    /// An outgoing HTTP response body's longest pause.
    HttpBetweenBytesTimeout,
    /// An HTTP head's size (responses to the guest, requests to `moat serve`).
    MaxHttpHeaderSize,
    /// `moat serve`'s open client connections.
    MaxHttpConnections,
    /// `moat serve`'s wait for a request's head.
    HttpHeaderReadTimeout,
    /// `moat serve`'s request body size.
    MaxHttpBodySize,
    /// `moat serve`'s handlers running at once.
    MaxInstances,
    /// `moat serve`'s longest pause in a request body a handler waits on.
    HttpRequestBodyTimeout,
    /// `moat serve`'s longest wait for a client to take more of a response.
    HttpResponseSendTimeout,
    /// `moat serve`'s handlers running at once for one client address.
    MaxInstancesPerClient,
    /// `moat serve`'s connections open at once from one client address.
    MaxHttpConnectionsPerClient,
    /// `moat serve`'s requests of one client address waiting for its share.
    MaxWaitingPerClient,
    /// `moat serve`'s slowest request body a handler waits on, a second.
    MinHttpBodyRate,
    /// `moat serve`'s longest wait, once stopping, for requests in flight.
    ShutdownTimeout,
    /// Where the audit trail of every decision goes.
    Audit,
    /// The audit trail's largest size.
    MaxAuditSize,
    /// `moat serve`: the most of the audit trail one request's records take.
    MaxAuditPerRequest,
    /// `moat serve`: how fast one client address's requests may write the
    /// audit trail.
    MaxAuditRatePerClient,
}

/// Text that names settings, written in the words of the front that set
/// them. A refusal or a bound carries the [`Setting`] it names and nothing
/// spelled; whoever shows the text (the guest's error, a notice, a record,
/// `moat serve`'s reply, the CLI's or the shim's log) holds the run's
/// [`Spelling`] and renders it with [`worded`](Worded::worded). A type's own
/// `Display` is its text in the embedding API's words, the front of code
/// that holds the value.
pub trait Worded {
    /// Writes the text, naming each setting as `spelling` writes it.
    ///
    /// # Errors
    /// Only the formatter's.
    fn write_worded(&self, spelling: Spelling, f: &mut std::fmt::Formatter<'_>)
    -> std::fmt::Result;

    /// The text in `spelling`'s words, to format.
    fn worded(&self, spelling: Spelling) -> InWords<'_, Self> {
        InWords {
            text: self,
            spelling,
        }
    }
}

/// A [`Worded`] text and the words to write it in; its `Display` writes it.
pub struct InWords<'a, T: ?Sized> {
    text: &'a T,
    spelling: Spelling,
}

impl<T: Worded + ?Sized> std::fmt::Display for InWords<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.text.write_worded(self.spelling, f)
    }
}

/// `Display` for a [`Worded`] type: its text in the embedding API's words.
/// (A macro because `Display` cannot be implemented for every `Worded`
/// type at once outside the standard library; moat-host's errors use it.)
#[doc(hidden)]
#[macro_export]
macro_rules! display_in_embedding_words {
    ($($ty:ty),+ $(,)?) => {$(
        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                $crate::setting::Worded::write_worded(
                    self,
                    $crate::setting::Spelling::Embedding,
                    f,
                )
            }
        }
    )+};
}

/// What kind of value a setting takes, and so how every source writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// An allowlist: comma-separated entries (`example.com:443,10.0.0.0/8`),
    /// `*` for everything, empty for nothing.
    Grant,
    /// A deny list: comma-separated entries or the words `private` and
    /// `metadata`; empty for nothing.
    Deny,
    /// A whole number, at least 1.
    Count,
    /// A size such as `64MiB` (B, KiB, MiB, GiB), at least 1 byte.
    Size,
    /// A duration such as `30s` (ms, s, m, h), longer than 0.
    Duration,
    /// A file's path, or `-` for standard error.
    File,
    /// A secret's binding (`NAME;from=...;to=...;header=...`), one a
    /// value; they add up.
    Secret,
    /// On or off: `true` or `false` (a flag alone is `true`).
    Switch,
}

impl Kind {
    /// How `moat run --help` names a value of this kind.
    pub const fn value_name(self) -> &'static str {
        match self {
            Kind::Grant | Kind::Deny => "LIST",
            Kind::Count => "N",
            Kind::Size => "SIZE",
            Kind::Duration => "DURATION",
            Kind::File => "FILE",
            Kind::Secret => "BINDING",
            Kind::Switch => "BOOL",
        }
    }
}

/// One row of the table: a setting's names, its kind and its help line.
struct Row {
    /// The policy file's key, and the flag without its `--`.
    key: &'static str,
    flag: &'static str,
    variable: &'static str,
    /// What sets it in the embedding API.
    option: &'static str,
    kind: Kind,
    help: &'static str,
}

/// Every setting, in [`Setting::ALL`]'s order. The unit tests check that
/// each row's flag and variable are its key's. Defaults are not here: they
/// are [`crate::limits::Limits::default`]'s, which `moat run --help`
/// prints.
const ROWS: [Row; Setting::ALL.len()] = [
    Row {
        key: "allow-net",
        flag: "--allow-net",
        variable: "MOAT_ALLOW_NET",
        option: "Policy::allow_connect",
        kind: Kind::Grant,
        help: "Allow connecting to these hosts (comma-separated HOST[:PORT] entries; \
               no value: any host). Example: --allow-net=example.com:443,10.0.0.0/8",
    },
    Row {
        key: "allow-listen",
        flag: "--allow-listen",
        variable: "MOAT_ALLOW_LISTEN",
        option: "Policy::allow_listen",
        kind: Kind::Grant,
        help: "Allow listening on these addresses (comma-separated HOST[:PORT] entries; \
               no value: anywhere). Example: --allow-listen=127.0.0.1:8000-8100",
    },
    Row {
        key: "deny-net",
        flag: "--deny-net",
        variable: "MOAT_DENY_NET",
        option: "Policy::deny_connect",
        kind: Kind::Deny,
        help: "Refuse connecting to these, whatever --allow-net allows: entries as in \
               allowlists, or the words private and metadata; judged on the host as \
               written and on every address a name resolves to. Example: \
               --deny-net=private,metadata",
    },
    Row {
        key: "deny-listen",
        flag: "--deny-listen",
        variable: "MOAT_DENY_LISTEN",
        option: "Policy::deny_listen",
        kind: Kind::Deny,
        help: "Refuse listening on these, whatever --allow-listen allows. Example: \
               --deny-listen=0.0.0.0,::",
    },
    Row {
        key: "secret",
        flag: "--secret",
        variable: "MOAT_SECRET",
        option: "RunOptions::secret",
        kind: Kind::Secret,
        help: "Give the guest a placeholder for a secret that moat puts into one header of \
               the https requests to one destination, and refuses anywhere else: \
               NAME;from=env:VAR|file:PATH;to=https://HOST[:PORT][/PREFIX];header=H[;form=F]. \
               Example: --secret='API_KEY;from=env:API_KEY;to=https://api.example.com/v1/;\
               header=authorization;form=Bearer {}'",
    },
    Row {
        key: "observe",
        flag: "--observe",
        variable: "MOAT_OBSERVE",
        option: "Policy::observing",
        kind: Kind::Switch,
        help: "Observe mode, for drafting grants: what no grant allows goes through and is \
               recorded as would-deny with the grant that would allow it (deny entries still \
               hold). Never for enforcing; see moat grants suggest",
    },
    Row {
        key: "max-sockets",
        flag: "--max-sockets",
        variable: "MOAT_MAX_SOCKETS",
        option: "Limits::max_sockets",
        kind: Kind::Count,
        help: "Most sockets and listeners open at once, closed sockets still sending included",
    },
    Row {
        key: "max-waiting-calls",
        flag: "--max-waiting-calls",
        variable: "MOAT_MAX_WAITING_CALLS",
        option: "Limits::max_waiting_calls",
        kind: Kind::Count,
        help: "Most UDP receives, accepts and name lookups waiting at once",
    },
    Row {
        key: "max-memory",
        flag: "--max-memory",
        variable: "MOAT_MAX_MEMORY",
        option: "RunOptions::max_memory",
        kind: Kind::Size,
        help: "Most linear memory the guest may grow to, e.g. 64MiB",
    },
    Row {
        key: "max-host-memory",
        flag: "--max-host-memory",
        variable: "MOAT_MAX_HOST_MEMORY",
        option: "Limits::max_host_memory",
        kind: Kind::Size,
        help: "Most host memory the guest may make moat keep (DNS answers, TLS \
               configurations, send backlogs, the record of resolved names), e.g. 256MiB",
    },
    Row {
        key: "timeout",
        flag: "--timeout",
        variable: "MOAT_TIMEOUT",
        option: "RunOptions::timeout",
        kind: Kind::Duration,
        help: "Stop the guest after this long, e.g. 30s, 5m",
    },
    Row {
        key: "max-lookups",
        flag: "--max-lookups",
        variable: "MOAT_MAX_LOOKUPS",
        option: "Limits::max_lookups",
        kind: Kind::Count,
        help: "Most name lookups in flight at once",
    },
    Row {
        key: "lookup-timeout",
        flag: "--lookup-timeout",
        variable: "MOAT_LOOKUP_TIMEOUT",
        option: "Limits::lookup_timeout",
        kind: Kind::Duration,
        help: "Longest one name lookup may take",
    },
    Row {
        key: "tls-handshake-timeout",
        flag: "--tls-handshake-timeout",
        variable: "MOAT_TLS_HANDSHAKE_TIMEOUT",
        option: "Limits::tls_handshake_timeout",
        kind: Kind::Duration,
        help: "Longest any TLS handshake may take, whatever the guest asks",
    },
    Row {
        key: "max-connections",
        flag: "--max-connections",
        variable: "MOAT_MAX_CONNECTIONS",
        option: "Limits::max_connections",
        kind: Kind::Count,
        help: "Most connections one listener has open at once, for listeners whose \
               guest sets no cap",
    },
    Row {
        key: "max-connections-per-peer",
        flag: "--max-connections-per-peer",
        variable: "MOAT_MAX_CONNECTIONS_PER_PEER",
        option: "Limits::max_connections_per_peer",
        kind: Kind::Count,
        help: "Most connections one listener has open from one peer address, for \
               listeners whose guest sets no cap",
    },
    Row {
        key: "max-http-requests",
        flag: "--max-http-requests",
        variable: "MOAT_MAX_HTTP_REQUESTS",
        option: "Limits::max_http_requests",
        kind: Kind::Count,
        help: "Most wasi:http requests the guest has in flight at once (each until its \
               response body ends)",
    },
    Row {
        key: "http-connect-timeout",
        flag: "--http-connect-timeout",
        variable: "MOAT_HTTP_CONNECT_TIMEOUT",
        option: "Limits::http_connect_timeout",
        kind: Kind::Duration,
        help: "Longest an outgoing HTTP request may take to connect (lookup and TLS \
               included), whatever the guest asks",
    },
    Row {
        key: "http-first-byte-timeout",
        flag: "--http-first-byte-timeout",
        variable: "MOAT_HTTP_FIRST_BYTE_TIMEOUT",
        option: "Limits::http_first_byte_timeout",
        kind: Kind::Duration,
        help: "Longest an outgoing HTTP request may wait for its response, whatever the \
               guest asks",
    },
    Row {
        key: "http-between-bytes-timeout",
        flag: "--http-between-bytes-timeout",
        variable: "MOAT_HTTP_BETWEEN_BYTES_TIMEOUT",
        option: "Limits::http_between_bytes_timeout",
        kind: Kind::Duration,
        help: "Longest an outgoing HTTP response body may pause, whatever the guest asks",
    },
    Row {
        key: "max-http-header-size",
        flag: "--max-http-header-size",
        variable: "MOAT_MAX_HTTP_HEADER_SIZE",
        option: "Limits::max_http_header_size",
        kind: Kind::Size,
        help: "Largest HTTP head: of a response the guest receives, and of a request \
               moat serve accepts (at least 8KiB)",
    },
    Row {
        key: "max-http-connections",
        flag: "--max-http-connections",
        variable: "MOAT_MAX_HTTP_CONNECTIONS",
        option: "Limits::max_http_connections",
        kind: Kind::Count,
        help: "moat serve: most client connections open at once (more wait to be accepted), \
               and most requests being answered at once (HTTP/2 streams past it get 503)",
    },
    Row {
        key: "http-header-read-timeout",
        flag: "--http-header-read-timeout",
        variable: "MOAT_HTTP_HEADER_READ_TIMEOUT",
        option: "Limits::http_header_read_timeout",
        kind: Kind::Duration,
        help: "moat serve: longest a client may take to send a request's head, and \
               to start the next one on a kept-alive connection",
    },
    Row {
        key: "max-http-body-size",
        flag: "--max-http-body-size",
        variable: "MOAT_MAX_HTTP_BODY_SIZE",
        option: "Limits::max_http_body_size",
        kind: Kind::Size,
        help: "moat serve: largest request body (past it the client gets 413)",
    },
    Row {
        key: "max-instances",
        flag: "--max-instances",
        variable: "MOAT_MAX_INSTANCES",
        option: "Limits::max_instances",
        kind: Kind::Count,
        help: "moat serve: most handler instances running at once, each with up to \
               --max-memory (more requests wait for one, within --timeout)",
    },
    Row {
        key: "http-request-body-timeout",
        flag: "--http-request-body-timeout",
        variable: "MOAT_HTTP_REQUEST_BODY_TIMEOUT",
        option: "Limits::http_request_body_timeout",
        kind: Kind::Duration,
        help: "moat serve: longest a client may pause in a request body while its handler \
               waits for more (then 408, or the response cut off)",
    },
    Row {
        key: "http-response-send-timeout",
        flag: "--http-response-send-timeout",
        variable: "MOAT_HTTP_RESPONSE_SEND_TIMEOUT",
        option: "Limits::http_response_send_timeout",
        kind: Kind::Duration,
        help: "moat serve: longest a response may wait for its client to take more of it \
               (then it is cut off and its handler stopped)",
    },
    Row {
        key: "max-instances-per-client",
        flag: "--max-instances-per-client",
        variable: "MOAT_MAX_INSTANCES_PER_CLIENT",
        option: "Limits::max_instances_per_client",
        kind: Kind::Count,
        help: "moat serve: most handler instances one client address (an IPv6 /64) holds \
               at once (--max-waiting-per-client more of its requests wait, within \
               --timeout; past those, 429 at once); behind a proxy every client is the \
               proxy's address",
    },
    Row {
        key: "max-http-connections-per-client",
        flag: "--max-http-connections-per-client",
        variable: "MOAT_MAX_HTTP_CONNECTIONS_PER_CLIENT",
        option: "Limits::max_http_connections_per_client",
        kind: Kind::Count,
        help: "moat serve: most client connections one address (an IPv6 /64) holds open \
               at once (more are closed as they come); behind a proxy every client is the \
               proxy's address",
    },
    Row {
        key: "max-waiting-per-client",
        flag: "--max-waiting-per-client",
        variable: "MOAT_MAX_WAITING_PER_CLIENT",
        option: "Limits::max_waiting_per_client",
        kind: Kind::Count,
        help: "moat serve: most requests of one client address (an IPv6 /64) waiting for \
               its share of instances (more get 429 at once)",
    },
    Row {
        key: "min-http-body-rate",
        flag: "--min-http-body-rate",
        variable: "MOAT_MIN_HTTP_BODY_RATE",
        option: "Limits::min_http_body_rate",
        kind: Kind::Size,
        help: "moat serve: slowest a request body may come while its handler waits, in \
               bytes a second after its first second (slower: 408, the handler stopped; none: \
               no minimum)",
    },
    Row {
        key: "shutdown-timeout",
        flag: "--shutdown-timeout",
        variable: "MOAT_SHUTDOWN_TIMEOUT",
        option: "Limits::shutdown_timeout",
        kind: Kind::Duration,
        help: "moat serve: longest it lets the requests in flight finish once told to stop \
               (SIGTERM, SIGINT); those still running then are cut off, and stderr says how \
               many",
    },
    Row {
        key: "audit",
        flag: "--audit",
        variable: "MOAT_AUDIT",
        option: "RunOptions::audit",
        kind: Kind::File,
        help: "Write a JSON Lines record of every network decision, allowed and denied, \
               with the rule that decided it, to FILE (appended; - for standard error)",
    },
    Row {
        key: "max-audit-size",
        flag: "--max-audit-size",
        variable: "MOAT_MAX_AUDIT_SIZE",
        option: "Limits::max_audit_size",
        kind: Kind::Size,
        help: "Most the audit trail may write for one run (repeated denials are counted, not \
               copied); past it the run's network is refused, as when the trail cannot be \
               written",
    },
    Row {
        key: "max-audit-per-request",
        flag: "--max-audit-per-request",
        variable: "MOAT_MAX_AUDIT_PER_REQUEST",
        option: "Limits::max_audit_per_request",
        kind: Kind::Size,
        help: "moat serve: most bytes of audit trail the records of one request may take \
               (past it that request's audited operations are refused, the server's not)",
    },
    Row {
        key: "max-audit-rate-per-client",
        flag: "--max-audit-rate-per-client",
        variable: "MOAT_MAX_AUDIT_RATE_PER_CLIENT",
        option: "Limits::max_audit_rate_per_client",
        kind: Kind::Size,
        help: "moat serve: fastest the records of one client address's requests (an IPv6 \
               /64) may fill the audit trail, in bytes a second after a first \
               --max-audit-per-request (past it that client's audited operations are \
               refused, the server's not; none: no bound)",
    },
];

impl Setting {
    /// Every setting, in the order `moat run --help` lists their flags.
    pub const ALL: [Setting; 36] = [
        Setting::AllowNet,
        Setting::AllowListen,
        Setting::DenyNet,
        Setting::DenyListen,
        Setting::Secret,
        Setting::Observe,
        Setting::MaxSockets,
        Setting::MaxWaitingCalls,
        Setting::MaxMemory,
        Setting::MaxHostMemory,
        Setting::Timeout,
        Setting::MaxLookups,
        Setting::LookupTimeout,
        Setting::TlsHandshakeTimeout,
        Setting::MaxConnections,
        Setting::MaxConnectionsPerPeer,
        Setting::MaxHttpRequests,
        Setting::HttpConnectTimeout,
        Setting::HttpFirstByteTimeout,
        Setting::HttpBetweenBytesTimeout,
        Setting::MaxHttpHeaderSize,
        Setting::MaxHttpConnections,
        Setting::HttpHeaderReadTimeout,
        Setting::MaxHttpBodySize,
        Setting::MaxInstances,
        Setting::HttpRequestBodyTimeout,
        Setting::HttpResponseSendTimeout,
        Setting::MaxInstancesPerClient,
        Setting::MaxHttpConnectionsPerClient,
        Setting::MaxWaitingPerClient,
        Setting::MinHttpBodyRate,
        Setting::ShutdownTimeout,
        Setting::Audit,
        Setting::MaxAuditSize,
        Setting::MaxAuditPerRequest,
        Setting::MaxAuditRatePerClient,
    ];

    const fn row(self) -> &'static Row {
        &ROWS[self as usize]
    }

    /// The key in a policy file: `max-sockets`.
    pub const fn key(self) -> &'static str {
        self.row().key
    }

    /// `moat run`'s flag: `--max-sockets`.
    pub const fn flag(self) -> &'static str {
        self.row().flag
    }

    /// The variable of a container's environment under the containerd
    /// shim: `MOAT_MAX_SOCKETS`.
    pub const fn variable(self) -> &'static str {
        self.row().variable
    }

    /// The kind of value it takes.
    pub const fn kind(self) -> Kind {
        self.row().kind
    }

    /// Its one help line (`moat run --help`).
    pub const fn help(self) -> &'static str {
        self.row().help
    }

    /// What sets it in the embedding API: `Limits::max_sockets`,
    /// `Policy::allow_connect`.
    pub const fn option(self) -> &'static str {
        self.row().option
    }

    /// The setting's name as `spelling` writes it.
    pub const fn named(self, spelling: Spelling) -> &'static str {
        match spelling {
            Spelling::Flags => self.flag(),
            Spelling::Environment => self.variable(),
            Spelling::Embedding => self.option(),
        }
    }

    /// The setting with `value`, as `spelling` writes it:
    /// `--allow-net=example.com:443`, `MOAT_ALLOW_NET=example.com:443`,
    /// `Policy::allow_connect("example.com:443")`.
    pub fn written(self, spelling: Spelling, value: &str) -> String {
        match spelling {
            Spelling::Embedding => format!("{}({value:?})", self.option()),
            Spelling::Flags | Spelling::Environment => {
                format!("{}={value}", self.named(spelling))
            }
        }
    }

    /// The setting a policy file's `key` is.
    pub fn from_key(key: &str) -> Option<Setting> {
        Setting::ALL.into_iter().find(|s| s.key() == key)
    }
}

/// Every setting's key, in [`Setting::ALL`]'s order.
pub(crate) const KEYS: [&str; Setting::ALL.len()] = {
    let mut keys = [""; Setting::ALL.len()];
    let mut i = 0;
    while i < keys.len() {
        keys[i] = Setting::ALL[i].key();
        i += 1;
    }
    keys
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_is_its_key_as_each_source_writes_it() {
        for (i, setting) in Setting::ALL.into_iter().enumerate() {
            assert_eq!(setting as usize, i, "{setting:?} is out of ALL's order");
            let key = setting.key();
            assert_eq!(setting.flag(), format!("--{key}"));
            assert_eq!(
                setting.variable(),
                format!("MOAT_{}", key.to_uppercase().replace('-', "_"))
            );
            assert_eq!(Setting::from_key(key), Some(setting));
        }
        assert_eq!(Setting::from_key("max_sockets"), None);
    }

    #[test]
    fn a_setting_is_named_as_its_source_writes_it() {
        assert_eq!(Setting::MaxSockets.named(Spelling::Flags), "--max-sockets");
        assert_eq!(
            Setting::MaxMemory.named(Spelling::Environment),
            "MOAT_MAX_MEMORY"
        );
        assert_eq!(
            Setting::MaxSockets.named(Spelling::Embedding),
            "Limits::max_sockets"
        );
        assert_eq!(
            Setting::AllowNet.written(Spelling::Embedding, "a.example:1"),
            "Policy::allow_connect(\"a.example:1\")"
        );
        assert_eq!(
            Setting::DenyNet.written(Spelling::Flags, "private"),
            "--deny-net=private"
        );
    }
}
