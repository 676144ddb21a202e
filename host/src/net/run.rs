//! One run's shared network state ([`Run`]: its policy, limits, socket
//! slots, waiting calls, lookups, recorded names and host-memory budget),
//! and the checks every socket call passes before its first syscall: the
//! policy on the host as written, the run's limits, and the policy again on
//! every address a name resolved to.
//!
//! [`moat_policy::policy`] decides; this file is where the socket core asks it,
//! for all of TCP, listeners and UDP:
//!
//! 1. [`Run::admit`] parses the guest's host and checks the grant and the
//!    deny entries on it as written. Nothing has been resolved or opened.
//! 2. [`Run::addresses`] resolves a name (bounded lookups) and keeps only
//!    the addresses no deny entry matches, judged on the addresses that
//!    will be used: there is no second lookup that could answer
//!    differently. If none is left, the call fails with the first denial.
//!    A name-based listen never binds the unspecified address, whatever
//!    the name's answer says: only an entry that writes `0.0.0.0` or `::`
//!    grants every interface.
//! 3. [`Run::check_recorded`] holds deny entries that name names to the
//!    addresses the run's own lookups recorded for those names
//!    ([`ResolvedNames`]), for every address used, however it was written.
//! 4. [`Run::dual_stack_allowed`] decides whether a socket bound to `::`
//!    may take IPv4 too.
//!
//! Every decision these make is also handed to the run's audit trail
//! ([`crate::audit`]): a refusal where it is made, an allowed call by its
//! caller once it knows the address it used ([`Run::allowed`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

use super::budget::Budget;
use super::dns::{Lookups, ResolvedNames, Resolver, SystemResolver};
use super::error::NetError;
use super::limits::{Limits, SocketSlot, SocketSlots, WaitingCalls};
use super::own_listeners::OwnListeners;
use super::secrets::Secrets;
use super::traffic::Traffic;
use crate::audit::{Audit, Event, HttpLink, Operation, Outcome, Reason, Refusal};
use moat_policy::policy::{
    Capability, Denied, DenyReason, Host, LookupDenied, OwnListenerOnPort, Policy, Provenance,
    Source,
};
use moat_policy::setting::{Spelling, Worded as _};

/// The capability an operation needs.
pub(crate) fn capability_of(operation: Operation) -> Capability {
    match operation {
        Operation::Connect
        | Operation::UdpSend
        | Operation::HttpRequest
        | Operation::TlsUpgrade
        | Operation::Lookup => Capability::Connect,
        Operation::Listen
        | Operation::TcpBind
        | Operation::UdpBind
        | Operation::MulticastJoin
        | Operation::ServeBind => Capability::Listen,
    }
}

/// A call the policy allowed on the host as written: the host, and the
/// grant entry that allowed it.
#[derive(Debug, Clone)]
pub(crate) struct Admitted {
    pub(crate) host: Host,
    pub(crate) port: u16,
    pub(crate) operation: Operation,
    pub(crate) rule: Arc<Provenance>,
    /// A connect admitted as the program's own listener
    /// ([`OwnListeners`]): `rule` is that listener's listen grant, and the
    /// destination is checked again just before the syscall.
    pub(crate) own_listener: bool,
    /// The outgoing HTTP request the call is for, which its records name.
    pub(crate) http: Option<HttpLink>,
    /// Let through in observe mode: the refusal no grant spared it
    /// ([`Policy::lets_through`]); its records say would-deny.
    pub(crate) would_deny: Option<Arc<Denied>>,
}

/// The addresses a call may use, and (for the audit trail) what its name
/// resolved to and which of those deny entries refused.
#[derive(Debug, Default)]
pub(crate) struct Resolved {
    pub(crate) addrs: Vec<SocketAddr>,
    resolved: Vec<IpAddr>,
    refused: Vec<Refusal>,
}

impl Resolved {
    /// What the name resolved to, when the run keeps an audit trail
    /// (empty otherwise, and for an IP literal).
    pub(crate) fn resolved(&self) -> &[IpAddr] {
        &self.resolved
    }
}

/// Why `error` refused a call, for the audit trail, a grant it needs in
/// `spelling`'s words.
fn reason_of(error: &NetError, spelling: Spelling) -> Reason {
    match error {
        NetError::Denied(denied) => match &denied.reason {
            DenyReason::NotGranted => Reason::NoGrant {
                needs: denied.needs(spelling).unwrap_or_default(),
            },
            DenyReason::DeniedBy {
                entry,
                source,
                address,
                carried,
            } => Reason::DenyEntry {
                rule: Provenance {
                    entry: entry.clone(),
                    source: Source::clone(source),
                },
                address: address.or(carried.map(IpAddr::V4)),
            },
        },
        NetError::SecretMisplaced(misplaced) => Reason::Secret {
            secret: misplaced.secret.clone(),
            place: misplaced.place.to_string(),
        },
        NetError::LimitReached(limit) => Reason::Limit {
            setting: limit.setting,
            reached: limit.reached.clone(),
        },
        _ => Reason::Invalid,
    }
}

/// What one run's sockets share: its policy, limits, socket slots, waiting
/// calls, lookups, the names its lookups recorded and its host memory;
/// with the checks every socket call passes as methods.
pub(crate) struct Run {
    pub(crate) policy: Policy,
    pub(crate) limits: Limits,
    pub(crate) slots: SocketSlots,
    pub(crate) waiting: WaitingCalls,
    pub(crate) lookups: Lookups,
    /// Which names the run's own lookups (wasi:sockets programs) resolved
    /// each address from.
    pub(crate) names: Mutex<ResolvedNames>,
    /// The run's host memory ([`Limits::max_host_memory`]).
    pub(crate) budget: Arc<Budget>,
    /// What the run's guest sent and received ([`Traffic`]), shared with
    /// its socket tasks.
    pub(crate) traffic: Arc<Traffic>,
    /// Where the run's decisions are recorded (off by default).
    pub(crate) audit: Audit,
    /// The run's listeners: a connect to one through loopback needs no
    /// grant.
    pub(crate) own_listeners: Arc<OwnListeners>,
    /// The secrets its HTTP requests may carry, and where.
    pub(crate) secrets: Secrets,
    /// Who is asked before a call no grant allows is refused.
    pub(crate) prompt: Option<super::prompt::Prompting>,
}

impl Run {
    pub(crate) fn new(policy: Policy, limits: Limits, resolver: Option<Arc<dyn Resolver>>) -> Run {
        let resolver = resolver.unwrap_or_else(|| Arc::new(SystemResolver::new()));
        let budget = Budget::new(limits.max_host_memory);
        Run {
            lookups: Lookups::new(
                resolver,
                limits.max_lookups,
                limits.lookup_timeout,
                Arc::clone(&budget),
            ),
            slots: SocketSlots::new(limits.max_sockets),
            waiting: WaitingCalls::new(limits.max_waiting_calls),
            names: Mutex::new(ResolvedNames::new(limits.max_recorded_addresses, &budget)),
            budget,
            traffic: Arc::default(),
            policy,
            limits,
            audit: Audit::off(),
            own_listeners: Arc::default(),
            secrets: Secrets::default(),
            prompt: None,
        }
    }

    /// The words the run's refusals are shown in: its front's (the
    /// policy's [`Spelling`]).
    pub(crate) fn words(&self) -> Spelling {
        self.policy.spelling()
    }

    /// Records a refusal of `operation` on `host`:`port`, and returns it.
    pub(crate) fn refused(
        &self,
        operation: Operation,
        host: &Host,
        port: Option<u16>,
        error: NetError,
    ) -> NetError {
        self.refused_after(operation, host, port, None, None, error)
    }

    /// [`refused`](Self::refused), for a call of the outgoing HTTP
    /// request `http`.
    pub(crate) fn refused_for(
        &self,
        operation: Operation,
        host: &Host,
        port: Option<u16>,
        http: Option<&HttpLink>,
        error: NetError,
    ) -> NetError {
        self.refused_after(operation, host, port, None, http, error)
    }

    /// Records a refusal of `operation` on a destination that could not be
    /// judged (it names no host, or not one moat can parse, or a scheme it
    /// does not send): the destination as `written`, the reason `invalid`.
    pub(crate) fn refused_unjudged(
        &self,
        operation: Operation,
        written: &str,
        http: Option<&HttpLink>,
        message: &str,
    ) {
        // The call is refused whether or not the trail takes the record.
        let _ = self.audit.record(|| {
            let mut event = Event::written(
                operation,
                written,
                None,
                Outcome::Denied {
                    reason: Reason::Invalid,
                    message: message.to_owned(),
                },
            );
            event.http = http.cloned();
            event
        });
    }

    /// [`refused`](Self::refused), after a lookup.
    fn refused_after(
        &self,
        operation: Operation,
        host: &Host,
        port: Option<u16>,
        resolved: Option<Resolved>,
        http: Option<&HttpLink>,
        error: NetError,
    ) -> NetError {
        // The call is refused whether or not the trail takes the record.
        let event = || {
            let mut event = Event::new(
                operation,
                host,
                port,
                Outcome::Denied {
                    reason: reason_of(&error, self.words()),
                    message: error.worded(self.words()).to_string(),
                },
            );
            if let Some(resolved) = resolved {
                event.resolved = resolved.resolved;
                event.refused = resolved.refused;
            }
            event.http = http.cloned();
            event
        };
        let _ = match (operation, port) {
            (Operation::UdpSend, Some(port)) => self.audit.udp_send(host, port, false, event),
            _ => self.audit.record(event),
        };
        error
    }

    /// Records that the admitted call went ahead: with what its name
    /// resolved to, and the address it used.
    ///
    /// # Errors
    /// [`NetError::AuditFailed`] if the trail cannot take the record:
    /// the caller drops what it made and fails the call.
    pub(crate) fn allowed(
        &self,
        admitted: &Admitted,
        resolved: Option<&Resolved>,
        used: Option<SocketAddr>,
    ) -> Result<(), NetError> {
        self.went_ahead(admitted, resolved, used, None)
            .map_err(NetError::from)
    }

    /// Records that the admitted call failed at the network (its name has
    /// no address, its peer refused): allowed, with the error. The call
    /// fails either way, so a trail that cannot take the record changes
    /// nothing.
    pub(crate) fn failed(
        &self,
        admitted: &Admitted,
        resolved: Option<&Resolved>,
        error: &NetError,
    ) {
        let _ = self.went_ahead(admitted, resolved, None, Some(error));
    }

    fn went_ahead(
        &self,
        admitted: &Admitted,
        resolved: Option<&Resolved>,
        used: Option<SocketAddr>,
        error: Option<&NetError>,
    ) -> Result<(), crate::audit::AuditError> {
        let event = || {
            let outcome = match &admitted.would_deny {
                None => Outcome::Allowed {
                    rule: Some(Arc::clone(&admitted.rule)),
                },
                Some(denied) => Outcome::WouldDeny {
                    needs: denied.needs(self.words()).unwrap_or_default(),
                    message: denied.worded(self.words()).to_string(),
                },
            };
            let mut event = Event::new(
                admitted.operation,
                &admitted.host,
                Some(admitted.port),
                outcome,
            );
            if let Some(resolved) = resolved {
                event.resolved.clone_from(&resolved.resolved);
                event.refused.clone_from(&resolved.refused);
            }
            event.address = used;
            event.own_listener = admitted.own_listener;
            event.http.clone_from(&admitted.http);
            event.error = error.map(|e| e.worded(self.words()).to_string());
            event
        };
        match admitted.operation {
            // Sends let through in observe mode are each recorded, not
            // folded into the allowed sends' counts.
            Operation::UdpSend if admitted.would_deny.is_none() => {
                self.audit
                    .udp_send(&admitted.host, admitted.port, true, event)
            }
            _ => self.audit.record(event),
        }
    }

    /// A socket slot for `admitted`, its refusal recorded.
    ///
    /// # Errors
    /// [`NetError::LimitReached`] at `--max-sockets`.
    pub(crate) fn slot_for(&self, admitted: &Admitted) -> Result<SocketSlot, NetError> {
        self.slots.try_take().map_err(|e| {
            self.refused_for(
                admitted.operation,
                &admitted.host,
                Some(admitted.port),
                admitted.http.as_ref(),
                e,
            )
        })
    }

    /// Parses `host` and checks it, as written, against the grant and deny
    /// entries of the capability `operation` needs.
    ///
    /// A destination (connect, send) that is the unspecified address
    /// (`0.0.0.0`, `::`) is refused as an invalid argument: Linux would
    /// take it for this machine, which is not what it says.
    ///
    /// # Errors
    /// [`NetError::InvalidArgument`] for a malformed host;
    /// [`NetError::Denied`].
    pub(crate) fn admit(
        &self,
        operation: Operation,
        host: &str,
        port: u16,
    ) -> Result<Admitted, NetError> {
        let target = Host::parse(host)?;
        self.admit_host(operation, target, port)
    }

    /// As [`admit`](Self::admit), for a host already parsed. A refusal is
    /// recorded on the audit trail.
    pub(crate) fn admit_host(
        &self,
        operation: Operation,
        target: Host,
        port: u16,
    ) -> Result<Admitted, NetError> {
        self.admit_host_for(operation, target, port, None)
    }

    /// As [`admit_host`](Self::admit_host), for a call of the outgoing
    /// HTTP request `http`, which its records name.
    pub(crate) fn admit_host_for(
        &self,
        operation: Operation,
        target: Host,
        port: u16,
        http: Option<&HttpLink>,
    ) -> Result<Admitted, NetError> {
        let capability = capability_of(operation);
        if capability == Capability::Connect
            && let Some(ip) = target.as_ip().filter(IpAddr::is_unspecified)
        {
            return Err(self.refused_for(
                operation,
                &target,
                Some(port),
                http,
                unspecified_destination(ip),
            ));
        }
        let (rule, own_listener, would_deny) = match self.judge(operation, &target, port) {
            Ok((rule, own_listener)) => (rule, own_listener, None),
            Err(denied) => match self.after_denial(operation, denied) {
                Ok((rule, would_deny)) => (rule, false, would_deny),
                Err(denied) => {
                    tracing::debug!(target: "moat::net", %denied, "denied");
                    return Err(self.refused_for(
                        operation,
                        &target,
                        Some(port),
                        http,
                        denied.into(),
                    ));
                }
            },
        };
        Ok(Admitted {
            host: target,
            port,
            operation,
            rule,
            own_listener,
            http: http.cloned(),
            would_deny,
        })
    }

    /// The policy's judgement of `target` as written (and, for an
    /// address, of the address against the deny lists): the grant entry
    /// that allows it, or the refusal. A connect the grants refuse to an
    /// address the program itself listens on is admitted as its own
    /// listener (`true`); one that merely names its port is refused with
    /// a message saying how to reach it.
    fn judge(
        &self,
        operation: Operation,
        target: &Host,
        port: u16,
    ) -> Result<(Arc<Provenance>, bool), Denied> {
        let capability = capability_of(operation);
        let judged = self
            .policy
            .decide(capability, target, port)
            .and_then(|allowed| {
                match target.as_ip() {
                    Some(ip) => self.check_recorded(capability, ip, port),
                    None => Ok(()),
                }
                .map(|()| allowed.rule)
            });
        let denied = match judged {
            Ok(rule) => return Ok((rule, false)),
            Err(denied) => denied,
        };
        if operation == Operation::Connect
            && let Some(ip) = target.as_ip()
            && let Some(rule) = self.own_listener(SocketAddr::new(ip, port))
        {
            return Ok((rule, true));
        }
        Err(match operation {
            Operation::Connect => self.naming_own_listener(denied),
            _ => denied,
        })
    }

    /// What may still let a call the policy refused through: the person
    /// at the terminal (`--prompt`), for want of a grant only, or observe
    /// mode, which lets through what no explicit deny entry refused and
    /// keeps the refusal for the records (would-deny).
    fn after_denial(
        &self,
        operation: Operation,
        denied: Denied,
    ) -> Result<(Arc<Provenance>, Option<Arc<Denied>>), Denied> {
        if self.asked(capability_of(operation), &denied) {
            return Ok((answered(), None));
        }
        if self.policy.lets_through(&denied) {
            tracing::debug!(target: "moat::net", %denied, "would be denied: observe mode");
            return Ok((observed(), Some(Arc::new(denied))));
        }
        Err(denied)
    }

    /// Whether the person at the terminal (`--prompt`) allows the call
    /// `denied` refused for want of a grant (to its host as judged and
    /// port); never asked about one a deny entry refused, nor without a
    /// prompter.
    pub(crate) fn asked(&self, capability: Capability, denied: &Denied) -> bool {
        let Some(prompting) = &self.prompt else {
            return false;
        };
        denied.reason == DenyReason::NotGranted
            && prompting.allows(super::prompt::Question {
                capability,
                host: denied.host.clone(),
                port: Some(denied.port),
                needs: denied.needs(self.words()).unwrap_or_default(),
            })
    }

    /// Whether the person at the terminal (`--prompt`) allows the lookup
    /// `denied` refused because no grant names its name.
    pub(crate) fn asked_lookup(&self, denied: &LookupDenied) -> bool {
        let Some(prompting) = &self.prompt else {
            return false;
        };
        denied.reason == DenyReason::NotGranted
            && prompting.allows(super::prompt::Question {
                capability: Capability::Connect,
                host: denied.name.clone(),
                port: None,
                needs: denied.needs(self.words()).unwrap_or_default(),
            })
    }

    /// `denied`, a connect refused for want of a grant, naming the run's
    /// own listener it was most likely meant for (on its port, through
    /// loopback or the listener's address), if there is one: its message
    /// then says how to reach it without a grant, not which port to grant
    /// (the system may have picked the port, anew each run).
    pub(crate) fn naming_own_listener(&self, mut denied: Denied) -> Denied {
        if matches!(denied.reason, DenyReason::NotGranted)
            && let Some(ip) = denied.host.as_ip()
            && let Some(on) = self.own_listeners.meant(SocketAddr::new(ip, denied.port))
        {
            denied.own_listener = Some(Box::new(OwnListenerOnPort {
                local: on.local,
                open: on.open,
            }));
        }
        denied
    }

    /// The listen grant of the run's own listener at `destination`, if the
    /// run holds one there: a connect to it is the program talking to
    /// itself ([`OwnListeners`]).
    pub(crate) fn own_listener(&self, destination: SocketAddr) -> Option<Arc<Provenance>> {
        let rule = self.own_listeners.rule_for(destination)?;
        tracing::debug!(target: "moat::net", %destination, "admitted: the program's own listener");
        Some(rule)
    }

    /// Checks `ip`:`port` against the deny entries of `capability` that
    /// name a name the run's lookups recorded `ip` as resolved from
    /// ([`Policy::check_recorded`]). Costs nothing unless a deny entry
    /// names names.
    ///
    /// # Errors
    /// The first such denial.
    #[inline]
    pub(crate) fn check_recorded(
        &self,
        capability: Capability,
        ip: IpAddr,
        port: u16,
    ) -> Result<(), Denied> {
        if !self.policy.denied(capability).has_names() {
            return Ok(());
        }
        self.check_recorded_names(capability, ip, port)
    }

    fn check_recorded_names(
        &self,
        capability: Capability,
        ip: IpAddr,
        port: u16,
    ) -> Result<(), Denied> {
        let names = self.names.lock().unwrap_or_else(PoisonError::into_inner);
        names
            .names(ip)
            .try_for_each(|name| self.policy.check_recorded(capability, name, port, ip))
    }

    /// The addresses to use for the call [`admit`](Self::admit) accepted:
    /// the name's addresses that no deny entry matches and that are not
    /// unspecified (a destination cannot be "this machine", and a listen on
    /// a name never binds every interface), in the resolver's order.
    ///
    /// # Errors
    /// The lookup's errors; [`NetError::Denied`] naming the first deny
    /// entry that matched and every address refused, if every address was
    /// denied. Either is recorded on the audit trail.
    ///
    /// One piece: the lookup, the judging of every address it gave and the
    /// record of what was refused are the one path from a name to an
    /// address; no part of it may be called without the rest.
    pub(crate) async fn addresses(&self, admitted: &Admitted) -> Result<Resolved, NetError> {
        let Admitted {
            host: target,
            port,
            operation,
            ..
        } = admitted;
        let (port, capability) = (*port, capability_of(*operation));
        let looked_up = match target {
            Host::Ip(_) => self.lookups.resolve(target, port).await,
            Host::Name(_) => match self.waiting.enter("lookup") {
                Ok(_waiting) => self.lookups.resolve(target, port).await,
                Err(e) => Err(e),
            },
        };
        let addrs = looked_up.inspect_err(|e| match e {
            // A bound of the run refused the lookup.
            NetError::LimitReached(_) => {
                self.refused_after(
                    *operation,
                    target,
                    Some(port),
                    None,
                    admitted.http.as_ref(),
                    e.clone(),
                );
            }
            // The policy allowed it; the name has no address.
            _ => self.failed(admitted, None, e),
        })?;
        if matches!(target, Host::Ip(_)) {
            // Judged as written by `admit`: the address is the host.
            return Ok(Resolved {
                addrs,
                ..Resolved::default()
            });
        }
        let audited = self.audit.is_on();
        let mut resolved = Resolved {
            resolved: if audited {
                addrs.iter().map(SocketAddr::ip).collect()
            } else {
                Vec::new()
            },
            ..Resolved::default()
        };
        let mut first_refusal: Option<NetError> = None;
        let mut denied_addresses = Vec::new();
        let mut kept = Vec::with_capacity(addrs.len());
        for addr in addrs {
            if addr.ip().is_unspecified() {
                tracing::debug!(target: "moat::net", host = %target, %addr, "skipping an unspecified address");
                first_refusal.get_or_insert_with(|| match capability {
                    Capability::Connect => unspecified_answer(target, addr.ip()),
                    Capability::Listen => unspecified_listen(target, addr.ip()),
                });
                continue;
            }
            let judged = self
                .policy
                .check_resolved(capability, target, port, addr.ip())
                .and_then(|()| self.check_recorded(capability, addr.ip(), port));
            match judged {
                Ok(()) => kept.push(addr),
                Err(denied) => {
                    tracing::debug!(target: "moat::net", %denied, "resolved address denied");
                    if let DenyReason::DeniedBy { entry, source, .. } = &denied.reason {
                        if audited {
                            resolved.refused.push(Refusal {
                                address: addr.ip(),
                                rule: Provenance {
                                    entry: entry.clone(),
                                    source: Source::clone(source),
                                },
                            });
                        }
                        denied_addresses.push(addr.ip());
                    }
                    first_refusal.get_or_insert(NetError::from(denied));
                }
            }
        }
        resolved.addrs = kept;
        match (resolved.addrs.is_empty(), first_refusal) {
            (true, Some(refusal)) => {
                let refusal = name_every_address(refusal, &denied_addresses);
                Err(self.refused_after(
                    *operation,
                    target,
                    Some(port),
                    Some(resolved),
                    admitted.http.as_ref(),
                    refusal,
                ))
            }
            _ => Ok(resolved),
        }
    }
}

/// A denial of a name all of whose addresses were refused, naming every
/// one of them (`(it resolved to 10.0.0.5, 192.168.1.9)`), not only the
/// first.
fn name_every_address(refusal: NetError, denied: &[IpAddr]) -> NetError {
    match refusal {
        NetError::Denied(mut d) if denied.len() > 1 => {
            d.also_resolved_to = denied[1..].into();
            NetError::Denied(d)
        }
        other => other,
    }
}

impl Run {
    /// Whether a socket bound to `addr` may also take IPv4 (dual stack). On
    /// Linux a socket on `::` takes IPv4 on every interface too, as if
    /// bound to `0.0.0.0` as well; so it does only when the listen grant
    /// allows `0.0.0.0` on that port too, and is IPv6-only otherwise.
    pub(crate) fn dual_stack_allowed(&self, addr: SocketAddr) -> bool {
        let any_v4 = Host::ip(Ipv4Addr::UNSPECIFIED.into());
        addr.ip() != IpAddr::V6(Ipv6Addr::UNSPECIFIED)
            || self
                .policy
                .check(Capability::Listen, &any_v4, addr.port())
                .is_ok()
    }
}

/// A name's answer that would make a listen bind every interface.
fn unspecified_listen(name: &Host, ip: IpAddr) -> NetError {
    NetError::InvalidArgument(format!(
        "{name} resolved to {}, the unspecified address: a listen on a name binds only \
         the addresses it names (to listen on every interface, write {} and grant it)",
        Host::ip(ip),
        if ip.is_ipv4() { "0.0.0.0" } else { "::" }
    ))
}

/// A name's answer that is the unspecified address, as a destination: the
/// guest wrote the name, so the message names it.
fn unspecified_answer(name: &Host, ip: IpAddr) -> NetError {
    NetError::InvalidArgument(format!(
        "{name} resolved to {}, the unspecified address, which is not a destination",
        Host::ip(ip)
    ))
}

/// The refusal of the unspecified address (`0.0.0.0`, `::`) as a
/// destination (a connect, a send) the guest wrote as an IP literal or
/// gave as a socket address.
/// Linux would take it for this machine, which is not what it says.
pub(crate) fn unspecified_destination(ip: IpAddr) -> NetError {
    NetError::InvalidArgument(format!(
        "{} is the unspecified address, not a destination (for this machine write {})",
        Host::ip(ip),
        if ip.is_ipv4() { "127.0.0.1" } else { "::1" }
    ))
}

/// The rule an admission let through in observe mode carries: none
/// allowed it, and its records say would-deny instead of naming one.
pub(crate) fn observed() -> Arc<Provenance> {
    Arc::new(Provenance {
        entry: String::new(),
        source: moat_policy::policy::Source::Embedding,
    })
}

/// The rule a call the person at the terminal allowed carries
/// (`moat run --prompt`).
pub(crate) fn answered() -> Arc<Provenance> {
    Arc::new(Provenance {
        entry: "allowed at the prompt".to_owned(),
        source: Source::Flag {
            flag: "--prompt".to_owned(),
        },
    })
}
