//! The gate for programs that name their peers by address: stock
//! wasi:sockets programs (std::net, mio, any language's socket library).
//!
//! Such a program looks a name up, then binds, connects or sends to an
//! address. The policy judges hosts as written, so the names must stay
//! names:
//!
//! 1. [`AddressGate::lookup`] refuses, before any DNS query, a name that no
//!    grant names ([`Policy::check_lookup`](moat_policy::policy::Policy::check_lookup)),
//!    and records the addresses a granted name resolved to, for the
//!    answer's lifetime (see [`super::dns`]).
//! 2. [`AddressGate::judge`] runs before each syscall that uses an
//!    address. A connect or send is admitted if the grant allows the
//!    address itself, or a name it was resolved from, on that port; a deny
//!    entry that matches the address wins either way, and so does one that
//!    matches any name the address was resolved from
//!    (`Run::check_recorded`): `--deny-net=tracker.example:8080` holds
//!    for the address tracker.example resolved to, whichever name the
//!    program looked up last. A bind or listen on the unspecified address
//!    is never admitted through a name. Binding and
//!    listening are judged the same way against the listen grant; a listen
//!    on a socket bound to port 0 is judged as port 0, as moat:net judges
//!    `listen(host, 0)`. Accepted
//!    connections and received datagrams pass (the listen grant covered
//!    them); so does a bind to port 0, the ephemeral local port every
//!    client socket has.
//!
//! Denials are logged on `moat::net` and reported through the run's
//! [`Notices`] (moat prints them on the guest's stderr), since a stock
//! program's own message only says "permission denied".

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::budget::Charge;
use super::dns::{Addresses, RecordFull};
use super::error::{LimitReached, NetError, TimedOut};
use super::limits::{DEFAULT_ANSWER_LIFETIME, MAX_NOTICES, MAX_WASI_UDP_RECEIVES, SocketSlot};
use super::own_listeners::OwnListener;
use super::run::{Admitted, Run, capability_of, unspecified_destination};
use super::traffic::Traffic;
use crate::audit::{AuditError, Event, Operation, Outcome, Reason};
use moat_policy::policy::{Capability, Denied, DenyReason, Host, LookupDenied, Provenance};
use moat_policy::setting::{Setting, Spelling, Worded};

/// What a program does with an address, as the gate judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressUse {
    /// Connect a TCP socket to it (connect grant).
    Connect,
    /// Send a datagram to it, or fix it as a UDP socket's peer (connect
    /// grant).
    Send,
    /// Bind a TCP socket to it as the local address (listen grant, unless
    /// the port is 0).
    Bind,
    /// Bind a UDP socket to it as the local address (listen grant, unless
    /// the port is 0).
    UdpBind,
    /// Listen on it, the local address of a bound TCP socket (listen
    /// grant).
    Listen,
    /// Accept a connection from it (always: the listen grant covered it).
    Accept,
    /// Receive a datagram from it (always: the bind covered it).
    Receive,
}

/// Why a name lookup failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// The policy refused the name before any query.
    #[error("{0}")]
    Denied(#[source] LookupDenied),
    /// The name is not a host name.
    #[error("{0} is not a host name")]
    InvalidName(String),
    /// The resolver has no address for it, or failed.
    #[error("{0}")]
    NotResolved(String),
    /// The lookup took longer than the run's lookup timeout (which it
    /// names, typed).
    #[error("{0}")]
    TimedOut(#[source] Box<TimedOut>),
    /// A bound of the run: its calls waiting, its host memory.
    #[error("{0}")]
    LimitReached(#[source] Box<LimitReached>),
    /// The audit trail could not take the record of the lookup.
    #[error("the audit trail failed: {0}")]
    AuditFailed(Box<AuditError>),
}

impl Worded for LookupError {
    /// The cases that name a setting or a grant in `spelling`'s words;
    /// every other case as its `Display`.
    fn write_worded(
        &self,
        spelling: Spelling,
        f: &mut std::fmt::Formatter<'_>,
    ) -> std::fmt::Result {
        match self {
            LookupError::Denied(denied) => denied.write_worded(spelling, f),
            LookupError::TimedOut(timed_out) => timed_out.write_worded(spelling, f),
            LookupError::LimitReached(limit) => limit.write_worded(spelling, f),
            LookupError::AuditFailed(e) => {
                write!(f, "the audit trail failed: {}", e.worded(spelling))
            }
            other => std::fmt::Display::fmt(other, f),
        }
    }
}

impl From<NetError> for LookupError {
    fn from(err: NetError) -> LookupError {
        match err {
            NetError::TimedOut(timed_out) => LookupError::TimedOut(timed_out),
            NetError::LimitReached(limit) => LookupError::LimitReached(limit),
            NetError::AuditFailed(why) => LookupError::AuditFailed(why),
            other => LookupError::NotResolved(other.to_string()),
        }
    }
}

/// What receives a notice line.
type NoticeSink = Arc<dyn Fn(&str) + Send + Sync>;

/// Where a run's denial messages go: a line each (`moat: guest: connect to
/// 10.0.0.5:5432 denied: needs --allow-net=10.0.0.5:5432`), each distinct
/// one once, at most `MAX_NOTICES` of them.
#[derive(Clone, Default)]
pub struct Notices {
    sink: Option<NoticeSink>,
    shown: Arc<Mutex<HashSet<String>>>,
}

impl Notices {
    /// Notices that call `sink` with each line (no newline).
    pub fn new(sink: impl Fn(&str) + Send + Sync + 'static) -> Notices {
        Notices {
            sink: Some(Arc::new(sink)),
            shown: Arc::default(),
        }
    }

    /// Notices logged with `tracing` (target `moat::notice`, debug
    /// level): a guest can make them on demand, so they are not warnings.
    pub fn tracing() -> Notices {
        Notices::new(|line| tracing::debug!(target: "moat::notice", "{line}"))
    }

    pub(crate) fn tell(&self, message: String) {
        let Some(sink) = &self.sink else { return };
        let mut shown = self.shown.lock().unwrap_or_else(PoisonError::into_inner);
        if shown.len() >= MAX_NOTICES || shown.contains(&message) {
            return;
        }
        sink(&message);
        shown.insert(message);
        if shown.len() == MAX_NOTICES {
            sink("further denials are not shown (see the moat::net log at debug)");
        }
    }
}

/// One run's gate for address-named sockets; it shares the run's policy,
/// limits, socket count and lookups with its [`Net`](super::Net).
pub struct AddressGate {
    run: Arc<Run>,
    notices: Notices,
    udp_receives: Arc<Semaphore>,
    /// Local addresses a TCP bind was allowed to at the prompt
    /// (`--prompt`), whose listen was not judged yet: the listen is the
    /// same socket's, answered for at its bind. One entry an address, and
    /// each new one a person's answer.
    bound_at_prompt: Mutex<HashSet<SocketAddr>>,
}

impl AddressGate {
    pub(crate) fn new(run: Arc<Run>, notices: Notices) -> AddressGate {
        AddressGate {
            udp_receives: Arc::new(Semaphore::new(MAX_WASI_UDP_RECEIVES as usize)),
            run,
            notices,
            bound_at_prompt: Mutex::new(HashSet::new()),
        }
    }

    /// Judges one use of `addr`, before the syscall.
    ///
    /// # Errors
    /// [`NetError::Denied`]; [`NetError::InvalidArgument`] for a
    /// destination that is the unspecified address.
    pub fn judge(&self, addr: SocketAddr, use_: AddressUse) -> Result<(), NetError> {
        let operation = match use_ {
            AddressUse::Accept => {
                tracing::debug!(target: "moat::net", peer = %addr, "accepted");
                return Ok(());
            }
            AddressUse::Receive => return Ok(()),
            AddressUse::Bind | AddressUse::UdpBind if addr.port() == 0 => return Ok(()),
            AddressUse::Bind => Operation::TcpBind,
            AddressUse::UdpBind => Operation::UdpBind,
            AddressUse::Listen => Operation::Listen,
            AddressUse::Connect => Operation::Connect,
            AddressUse::Send => Operation::UdpSend,
        };
        let capability = capability_of(operation);
        let ip = addr.ip().to_canonical();
        if capability == Capability::Connect && ip.is_unspecified() {
            tracing::debug!(target: "moat::net", %addr, "refused: the unspecified address is not a destination");
            let refusal = unspecified_destination(ip);
            return Err(self
                .run
                .refused(operation, &Host::ip(ip), Some(addr.port()), refusal));
        }
        let mut denied = match self.judge_host(capability, ip, addr.port()) {
            Ok(rule) => return self.allowed(operation, addr, ip, rule, false),
            Err(denied) => denied,
        };
        if operation == Operation::Connect {
            if let Some(rule) = self.run.own_listener(addr) {
                return self.allowed(operation, addr, ip, rule, true);
            }
            denied = self.run.naming_own_listener(denied);
        }
        if use_ == AddressUse::Listen
            && !denied.by_deny_entry()
            && self
                .bound_at_prompt
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&addr)
        {
            return self.allowed(operation, addr, ip, super::run::answered(), false);
        }
        if use_ == AddressUse::Listen && addr.port() != 0 && !denied.by_deny_entry() {
            // A listen sees the port the socket got; one bound to a fixed
            // port had that port judged at its bind, against the same
            // grant. So this is a socket bound to port 0 (any free port),
            // judged as port 0, as moat:net judges `listen(host, 0)`.
            match self.judge_host(capability, ip, 0) {
                Ok(rule) => return self.allowed(operation, addr, ip, rule, false),
                Err(as_port_0) => denied = as_port_0,
            }
        }
        if self.run.asked(capability, &denied) {
            if use_ == AddressUse::Bind {
                self.bound_at_prompt
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(addr);
            }
            return self.allowed(operation, addr, ip, super::run::answered(), false);
        }
        if self.run.policy.lets_through(&denied) {
            return self.let_through(operation, addr, denied);
        }
        tracing::debug!(target: "moat::net", %denied, ?use_, "denied");
        self.notices
            .tell(denied.worded(self.run.words()).to_string());
        let host = denied.host.clone();
        let port = denied.port;
        Err(self
            .run
            .refused(operation, &host, Some(port), denied.into()))
    }

    /// Registers a socket of the program's now listening on `local` among
    /// the run's own listeners, under the listen grant that allows it;
    /// dropping the result unregisters it.
    pub(crate) fn own_listener(&self, local: SocketAddr) -> Option<OwnListener> {
        let ip = local.ip().to_canonical();
        let rule = self
            .judge_host(Capability::Listen, ip, local.port())
            .or_else(|_| self.judge_host(Capability::Listen, ip, 0))
            .ok()?;
        self.run.own_listeners.register(local, rule)
    }

    /// Records an allowed use of `addr` on the audit trail (with
    /// `own_listener`: a connect to the program's own listener, `rule` its
    /// listen grant).
    fn allowed(
        &self,
        operation: Operation,
        addr: SocketAddr,
        ip: IpAddr,
        rule: Arc<Provenance>,
        own_listener: bool,
    ) -> Result<(), NetError> {
        tracing::debug!(target: "moat::net", %addr, operation = operation.as_str(), %rule, own_listener, "allowed");
        if !self.run.audit.takes_decisions() {
            return Ok(());
        }
        let admitted = Admitted {
            host: Host::ip(ip),
            port: addr.port(),
            operation,
            rule,
            own_listener,
            http: None,
            would_deny: None,
        };
        self.run.allowed(&admitted, None, Some(addr))
    }

    /// Lets `addr` through in observe mode, recording it as would-deny
    /// with the grant `denied` names.
    fn let_through(
        &self,
        operation: Operation,
        addr: SocketAddr,
        denied: Denied,
    ) -> Result<(), NetError> {
        tracing::debug!(target: "moat::net", %denied, %addr, "would be denied: observe mode");
        let admitted = Admitted {
            host: denied.host.clone(),
            port: denied.port,
            operation,
            rule: super::run::observed(),
            own_listener: false,
            http: None,
            would_deny: Some(Arc::new(denied)),
        };
        self.run.allowed(&admitted, None, Some(addr))
    }

    /// The grant entry that allows `ip`:`port`, as the address or as a
    /// name it was resolved from; or the denial.
    fn judge_host(
        &self,
        capability: Capability,
        ip: IpAddr,
        port: u16,
    ) -> Result<Arc<Provenance>, Denied> {
        let policy = &self.run.policy;
        let denied = match policy.decide(capability, &Host::ip(ip), port) {
            // A deny entry for a name this address was resolved from holds
            // even where the address itself is granted.
            Ok(allowed) => {
                return self
                    .run
                    .check_recorded(capability, ip, port)
                    .map(|()| allowed.rule);
            }
            Err(denied) => denied,
        };
        if denied.by_deny_entry() {
            // A deny entry matched the address itself: no name can lift it.
            return Err(denied);
        }
        if capability == Capability::Listen && ip.is_unspecified() {
            // Every interface: only an entry for the address itself grants
            // it, never a name whose answer says 0.0.0.0 or `::`.
            return Err(denied);
        }
        self.run.check_recorded(capability, ip, port)?;
        let names = self
            .run
            .names
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut resolved_from = None;
        for name in names.names(ip) {
            let allowed = policy
                .decide(capability, name, port)
                .ok()
                .filter(|_| policy.check_resolved(capability, name, port, ip).is_ok());
            if let Some(allowed) = allowed {
                tracing::debug!(target: "moat::net", %ip, port, %name, "admitted as the name it was resolved from");
                return Ok(allowed.rule);
            }
            resolved_from.get_or_insert_with(|| name.clone());
        }
        // The program wrote a name: the denial names it, and the flag for it.
        Err(match resolved_from {
            Some(name) => Denied {
                host: name,
                ..denied
            },
            None => denied,
        })
    }

    /// Looks `name` up for the program: an IP literal is returned as is
    /// (and judged when used); a name no grant names is refused before any
    /// query; a granted name's addresses (canonical) are recorded as
    /// resolved from it. The addresses are the run's one copy of the
    /// answer (see [`Addresses`]), shared with every other reader.
    ///
    /// # Errors
    /// [`LookupError`].
    pub async fn lookup(&self, name: &str) -> Result<Arc<Addresses>, LookupError> {
        let host =
            Host::parse(name).map_err(|e| LookupError::InvalidName(format!("{name:?}: {e}")))?;
        let dns_name = match &host {
            Host::Ip(ip) => return Ok(Arc::new(Addresses::literal(*ip))),
            Host::Name(dns_name) => dns_name.clone(),
        };
        // In observe mode a name no grant names is looked up anyway, and
        // its record says would-deny; a deny entry still refuses it.
        let mut would_deny = None;
        if let Err(denied) = self.run.policy.check_lookup(&host) {
            if self.run.asked_lookup(&denied) {
                tracing::debug!(target: "moat::net", name = %host, "lookup allowed at the prompt");
            } else if self.run.policy.observes() && denied.reason == DenyReason::NotGranted {
                tracing::debug!(target: "moat::net", %denied, "lookup would be denied: observe mode");
                would_deny = Some(denied);
            } else {
                tracing::debug!(target: "moat::net", %denied, "lookup denied");
                self.notices
                    .tell(denied.worded(self.run.words()).to_string());
                // Refused whether or not the trail takes the record.
                let _ = self.record_lookup(&host, Err(&denied));
                return Err(LookupError::Denied(denied));
            }
        }
        let _waiting = self.run.waiting.enter("lookup")?;
        let answer = match self.run.lookups.answer(&dns_name).await {
            Ok(answer) => answer,
            Err(e) => {
                // Allowed; the name has no address (or a bound refused it).
                let _ = self.run.audit.record(|| {
                    let mut event = Event::new(
                        Operation::Lookup,
                        &host,
                        None,
                        Outcome::Allowed { rule: None },
                    );
                    event.error = Some(e.worded(self.run.words()).to_string());
                    event
                });
                return Err(e.into());
            }
        };
        self.record_lookup(&host, Ok((&answer.addresses, would_deny.as_ref())))
            .map_err(|e| LookupError::AuditFailed(Box::new(e)))?;
        let lifetime = answer.lifetime.unwrap_or(DEFAULT_ANSWER_LIFETIME);
        let pinned = self.run.policy.denies_by_name(&host);
        tracing::debug!(target: "moat::net", name = %host, addresses = ?answer.addresses, ?lifetime, pinned, "resolved and recorded");
        self.run
            .names
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record(&host, &answer.addresses, lifetime, pinned)
            .map_err(|RecordFull| {
                let max = self.run.limits.max_recorded_addresses;
                let setting = Setting::MaxHostMemory;
                tracing::debug!(target: "moat::net", name = %host, max, "record full: lookup refused");
                LookupError::LimitReached(Box::new(LimitReached {
                    reached: format!(
                        "the run's record of resolved addresses holds {max} pairs for names \
                         that deny entries name, none expired, or the run's host memory is spent"
                    ),
                    setting: Some(setting),
                }))
            })?;
        Ok(answer.addresses)
    }

    /// Records a lookup on the audit trail: the addresses it gave, or its
    /// refusal.
    fn record_lookup(
        &self,
        host: &Host,
        outcome: Result<(&Addresses, Option<&LookupDenied>), &LookupDenied>,
    ) -> Result<(), crate::audit::AuditError> {
        self.run.audit.record(|| {
            let (decided, resolved) = match outcome {
                Ok((addresses, Some(would_deny))) => (
                    Outcome::WouldDeny {
                        needs: would_deny.needs(self.run.words()).unwrap_or_default(),
                        message: would_deny.worded(self.run.words()).to_string(),
                    },
                    addresses.iter().map(|a| a.to_canonical()).collect(),
                ),
                Ok((addresses, None)) => (
                    Outcome::Allowed { rule: None },
                    addresses.iter().map(|a| a.to_canonical()).collect(),
                ),
                Err(denied) => (
                    Outcome::Denied {
                        reason: match denied.deny_entry(&self.run.policy) {
                            None => Reason::NoGrant {
                                needs: denied.needs(self.run.words()).unwrap_or_default(),
                            },
                            Some(entry) => Reason::DenyEntry {
                                rule: entry.provenance(),
                                address: None,
                            },
                        },
                        message: denied.worded(self.run.words()).to_string(),
                    },
                    Vec::new(),
                ),
            };
            let mut event = Event::new(Operation::Lookup, host, None, decided);
            event.resolved = resolved;
            event
        })
    }

    /// Pays `bytes` for `what` from the run's host memory.
    pub(crate) fn charge(&self, bytes: usize, what: &str) -> Result<Charge, NetError> {
        self.run.budget.charge(bytes, what)
    }

    /// A place in the run's socket count, shared with moat:net sockets.
    pub(crate) fn socket_slot(&self) -> Result<SocketSlot, NetError> {
        self.run.slots.try_take()
    }

    /// What the run's guest sent and received, which its wasi:sockets
    /// count into.
    pub(crate) fn traffic(&self) -> &Arc<Traffic> {
        &self.run.traffic
    }

    /// The words the run's refusals are shown in.
    pub(crate) fn words(&self) -> Spelling {
        self.run.words()
    }

    /// Whether the run's socket count has a place free now.
    pub(crate) fn has_socket_room(&self) -> bool {
        self.run.slots.has_room()
    }

    /// A place for one waiting UDP receive: one of the run's waiting calls
    /// and one of its [`MAX_WASI_UDP_RECEIVES`] receive buffers.
    pub(crate) fn udp_receive_turn(&self) -> Result<UdpReceiveTurn, NetError> {
        let waiting = self.run.waiting.enter("UDP receive")?;
        let buffer = Arc::clone(&self.udp_receives)
            .try_acquire_owned()
            .map_err(|_| {
                tracing::debug!(target: "moat::net", max = MAX_WASI_UDP_RECEIVES, "wasi UDP receive limit reached");
                NetError::fixed_limit(format!(
                    "the run has {MAX_WASI_UDP_RECEIVES} UDP receives waiting already (each holds a 64 KiB buffer)"
                ))
            })?;
        let memory = self
            .run
            .budget
            .charge(WASI_UDP_RECEIVE_BUFFER, "a wasi UDP receive's buffer")?;
        Ok(UdpReceiveTurn {
            _waiting: waiting,
            _buffer: buffer,
            _memory: memory,
        })
    }
}

/// What wasmtime-wasi allocates for each wasi 0.3 UDP receive while it
/// waits: 64 KiB, the largest datagram.
const WASI_UDP_RECEIVE_BUFFER: usize = 64 << 10;

/// A UDP receive's place under the run's bounds, given back when dropped.
pub(crate) struct UdpReceiveTurn {
    _waiting: OwnedSemaphorePermit,
    _buffer: OwnedSemaphorePermit,
    /// The buffer wasmtime-wasi holds while the receive waits, paid from
    /// the run's host memory.
    _memory: Charge,
}

#[cfg(test)]
mod tests {
    use super::*;
    use moat_policy::setting::Spelling;

    fn gate_for(policy: moat_policy::policy::Policy) -> AddressGate {
        AddressGate::new(
            Arc::new(Run::new(policy, crate::net::Limits::default(), None)),
            Notices::default(),
        )
    }

    #[test]
    fn notices_tell_each_distinct_line_once_and_stop_after_the_cap() {
        let told = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&told);
        let notices = Notices::new(move |line| sink.lock().unwrap().push(line.to_owned()));
        for round in 0..3 {
            for i in 0..MAX_NOTICES + 8 {
                notices.tell(format!("denial {i}"));
            }
            let told = told.lock().unwrap();
            assert_eq!(told.len(), MAX_NOTICES + 1, "round {round}");
        }
        let told = told.lock().unwrap();
        assert_eq!(told[0], "denial 0");
        assert_eq!(told[MAX_NOTICES - 1], format!("denial {}", MAX_NOTICES - 1));
        assert!(told[MAX_NOTICES].starts_with("further denials are not shown"));
    }

    #[test]
    fn a_denial_of_a_recorded_address_names_the_name() {
        let policy = moat_policy::policy::Policy::new()
            .spelled(Spelling::Flags)
            .allow_connect("api.test:443")
            .unwrap();
        let gate = gate_for(policy);
        let ip: IpAddr = "10.1.2.3".parse().unwrap();
        let name = Host::parse("api.test").unwrap();
        let connect = |port| gate.judge(SocketAddr::new(ip, port), AddressUse::Connect);
        assert!(
            matches!(connect(443), Err(NetError::Denied(_))),
            "not looked up yet"
        );
        gate.run
            .names
            .lock()
            .unwrap()
            .record(&name, &[ip], std::time::Duration::from_secs(60), false)
            .unwrap();
        assert!(connect(443).is_ok());
        match connect(80) {
            Err(NetError::Denied(denied)) => assert_eq!(
                denied.worded(Spelling::Flags).to_string(),
                "connect to api.test:80 denied: needs --allow-net=api.test:80"
            ),
            other => panic!("{other:?}"),
        }
        // A listener on a port-0 bind is judged as port 0.
        let listen = moat_policy::policy::Policy::new()
            .spelled(Spelling::Flags)
            .allow_listen("127.0.0.1:0,127.0.0.1:8080")
            .unwrap();
        let listens = gate_for(listen);
        let local = |port| SocketAddr::new("127.0.0.1".parse().unwrap(), port);
        assert!(listens.judge(local(37141), AddressUse::Listen).is_ok());
        assert!(listens.judge(local(8080), AddressUse::Bind).is_ok());
        assert!(listens.judge(local(8081), AddressUse::Bind).is_err());
        let only_8080 = moat_policy::policy::Policy::new()
            .spelled(Spelling::Flags)
            .allow_listen("127.0.0.1:8080")
            .unwrap();
        let only_8080 = gate_for(only_8080);
        match only_8080.judge(local(37141), AddressUse::Listen) {
            Err(NetError::Denied(denied)) => assert_eq!(
                denied.worded(Spelling::Flags).to_string(),
                "listen on 127.0.0.1:0 denied: needs --allow-listen=127.0.0.1:0"
            ),
            other => panic!("{other:?}"),
        }

        // Accepts, receives and ephemeral binds pass; a fixed bind does not.
        let any = SocketAddr::new(ip, 0);
        assert!(gate.judge(any, AddressUse::Accept).is_ok());
        assert!(gate.judge(any, AddressUse::Receive).is_ok());
        assert!(gate.judge(any, AddressUse::Bind).is_ok());
        assert!(
            gate.judge(SocketAddr::new(ip, 53), AddressUse::Bind)
                .is_err()
        );
        let unspecified = SocketAddr::new("0.0.0.0".parse().unwrap(), 443);
        assert!(matches!(
            gate.judge(unspecified, AddressUse::Connect),
            Err(NetError::InvalidArgument(_))
        ));
    }

    fn record(gate: &AddressGate, name: &str, ip: IpAddr) {
        let name = Host::parse(name).unwrap();
        let pinned = gate.run.policy.denies_by_name(&name);
        gate.run
            .names
            .lock()
            .unwrap()
            .record(&name, &[ip], std::time::Duration::from_secs(60), pinned)
            .unwrap();
    }

    #[test]
    fn a_deny_entry_for_a_name_holds_for_its_address_whatever_admits_it() {
        let ip: IpAddr = "10.0.0.7".parse().unwrap();
        let to = |port| SocketAddr::new(ip, port);
        for policy in [
            moat_policy::policy::Policy::allow_all().spelled(Spelling::Flags),
            moat_policy::policy::Policy::new()
                .spelled(Spelling::Flags)
                .allow_connect("*.lan.test")
                .unwrap(),
        ] {
            let gate = gate_for(policy.deny_connect("tracker.lan.test:8080").unwrap());
            record(&gate, "cdn.lan.test", ip);
            record(&gate, "tracker.lan.test", ip);
            match gate.judge(to(8080), AddressUse::Connect) {
                Err(NetError::Denied(denied)) => assert_eq!(
                    denied.worded(Spelling::Flags).to_string(),
                    "connect to tracker.lan.test:8080 denied by --deny-net=tracker.lan.test:8080 \
                     (it resolved to 10.0.0.7)"
                ),
                other => panic!("{other:?}"),
            }
            assert!(gate.judge(to(8081), AddressUse::Connect).is_ok());
            // A flood of other answers does not push the denied name out.
            for i in 0..(crate::net::Limits::default().max_recorded_addresses as u32 + 10) {
                let other = IpAddr::from((0x0b00_0000 + i).to_be_bytes());
                record(&gate, "flood.lan.test", other);
            }
            assert!(gate.judge(to(8080), AddressUse::Connect).is_err());
        }
    }

    #[test]
    fn a_name_whose_answer_is_unspecified_never_grants_every_interface() {
        let policy = moat_policy::policy::Policy::new()
            .spelled(Spelling::Flags)
            .allow_listen("zero.lan.test:28080")
            .unwrap();
        let gate = gate_for(policy);
        for any in ["0.0.0.0", "::"] {
            let any: IpAddr = any.parse().unwrap();
            record(&gate, "zero.lan.test", any);
            for use_ in [AddressUse::Bind, AddressUse::Listen] {
                assert!(
                    matches!(
                        gate.judge(SocketAddr::new(any, 28080), use_),
                        Err(NetError::Denied(_))
                    ),
                    "{any} {use_:?}"
                );
            }
        }
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        record(&gate, "zero.lan.test", lo);
        assert!(
            gate.judge(SocketAddr::new(lo, 28080), AddressUse::Bind)
                .is_ok()
        );
    }
}
