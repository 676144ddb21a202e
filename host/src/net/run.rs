//! One run's shared network state ([`Run`]: its policy, limits, socket
//! slots, waiting calls, lookups, recorded names and host-memory budget),
//! and the checks every socket call passes before its first syscall: the
//! policy on the host as written, the run's limits, and the policy again on
//! every address a name resolved to.
//!
//! [`crate::policy`] decides; this file is where the socket core asks it,
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

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

use super::budget::Budget;
use super::dns::{Lookups, ResolvedNames, Resolver, SystemResolver};
use super::error::NetError;
use super::limits::{Limits, SocketSlots, WaitingCalls};
use crate::policy::{Capability, Denied, Host, Policy};

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
}

impl Run {
    pub(crate) fn new(policy: Policy, limits: Limits, resolver: Option<Arc<dyn Resolver>>) -> Run {
        let resolver = resolver.unwrap_or_else(|| Arc::new(SystemResolver::new()));
        let spelling = policy.spelling();
        let budget = Budget::spelled(limits.max_host_memory, spelling);
        Run {
            lookups: Lookups::new(
                resolver,
                limits.max_lookups,
                limits.lookup_timeout,
                Arc::clone(&budget),
            ),
            slots: SocketSlots::new(limits.max_sockets, spelling),
            waiting: WaitingCalls::new(limits.max_waiting_calls, spelling),
            names: Mutex::new(ResolvedNames::new(limits.max_recorded_addresses, &budget)),
            budget,
            policy,
            limits,
        }
    }

    /// This run's state with other limits or another resolver (a fresh
    /// socket count: call before any socket exists).
    pub(crate) fn rebuilt(
        &self,
        limits: Option<Limits>,
        resolver: Option<Arc<dyn Resolver>>,
    ) -> Run {
        Run::new(
            self.policy.clone(),
            limits.unwrap_or_else(|| self.limits.clone()),
            Some(resolver.unwrap_or_else(|| self.lookups.resolver())),
        )
    }

    /// Parses `host` and checks it, as written, against `capability`'s
    /// grant and deny entries.
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
        capability: Capability,
        host: &str,
        port: u16,
    ) -> Result<Host, NetError> {
        let target = Host::parse(host)?;
        self.admit_host(capability, target, port)
    }

    /// As [`admit`](Self::admit), for a host already parsed.
    pub(crate) fn admit_host(
        &self,
        capability: Capability,
        target: Host,
        port: u16,
    ) -> Result<Host, NetError> {
        if capability == Capability::Connect
            && let Some(ip) = target.as_ip().filter(IpAddr::is_unspecified)
        {
            return Err(unspecified_destination(ip));
        }
        if let Err(denied) = self.policy.check(capability, &target, port) {
            tracing::debug!(target: "moat::net", %denied, "denied");
            return Err(denied.into());
        }
        if let Some(ip) = target.as_ip()
            && let Err(denied) = self.check_recorded(capability, ip, port)
        {
            tracing::debug!(target: "moat::net", %denied, "denied");
            return Err(denied.into());
        }
        Ok(target)
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

    /// The addresses to use for `target`:`port`, which [`admit`](Self::admit)
    /// accepted: the name's addresses that no deny entry matches and that
    /// are not unspecified (a destination cannot be "this machine", and a
    /// listen on a name never binds every interface), in the resolver's
    /// order.
    ///
    /// # Errors
    /// The lookup's errors; [`NetError::Denied`] naming the first deny
    /// entry that matched, if every address was denied.
    pub(crate) async fn addresses(
        &self,
        capability: Capability,
        target: &Host,
        port: u16,
    ) -> Result<Vec<SocketAddr>, NetError> {
        let addrs = match target {
            Host::Ip(_) => self.lookups.resolve(target, port).await?,
            Host::Name(_) => {
                let _waiting = self.waiting.enter("lookup")?;
                self.lookups.resolve(target, port).await?
            }
        };
        if matches!(target, Host::Ip(_)) {
            // Judged as written by `admit`: the address is the host.
            return Ok(addrs);
        }
        let mut first_refusal = None;
        let mut kept = Vec::with_capacity(addrs.len());
        for addr in addrs {
            if addr.ip().is_unspecified() {
                tracing::debug!(target: "moat::net", host = %target, %addr, "skipping an unspecified address");
                first_refusal.get_or_insert_with(|| match capability {
                    Capability::Connect => unspecified_destination(addr.ip()),
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
                    first_refusal.get_or_insert(NetError::from(denied));
                }
            }
        }
        match (kept.is_empty(), first_refusal) {
            (true, Some(refusal)) => Err(refusal),
            _ => Ok(kept),
        }
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

/// The refusal of the unspecified address (`0.0.0.0`, `::`) as a
/// destination (a connect, a send), however the guest reached it: written
/// as an IP literal, given as a socket address, or as a name's answer.
/// Linux would take it for this machine, which is not what it says.
pub(crate) fn unspecified_destination(ip: IpAddr) -> NetError {
    NetError::InvalidArgument(format!(
        "{} is the unspecified address, not a destination (for this machine write {})",
        Host::ip(ip),
        if ip.is_ipv4() { "127.0.0.1" } else { "::1" }
    ))
}
