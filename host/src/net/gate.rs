//! The gate every socket call passes before its first syscall: the policy
//! on the host as written, the run's limits, and the policy again on every
//! address a name resolved to.
//!
//! [`crate::policy`] decides; this file is where the socket core asks it,
//! for all of TCP, listeners and UDP:
//!
//! 1. [`Gate::admit`] parses the guest's host and checks the grant and the
//!    deny entries on it as written. Nothing has been resolved or opened.
//! 2. [`Gate::addresses`] resolves a name (bounded lookups) and keeps only
//!    the addresses no deny entry matches, judged on the addresses that
//!    will be used: there is no second lookup that could answer
//!    differently. If none is left, the call fails with the first denial.
//! 3. [`Gate::dual_stack_allowed`] decides whether a socket bound to `::`
//!    may take IPv4 too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use super::error::NetError;
use super::limits::{Limits, SocketSlots, WaitingCalls};
use super::resolve::{Lookups, Resolver, SystemResolver};
use crate::policy::{Capability, Host, Policy};

/// A run's policy, limits and lookups.
pub(crate) struct Gate {
    pub(crate) policy: Policy,
    pub(crate) limits: Limits,
    pub(crate) slots: SocketSlots,
    pub(crate) waiting: WaitingCalls,
    pub(crate) lookups: Lookups,
}

impl Gate {
    pub(crate) fn new(policy: Policy, limits: Limits, resolver: Option<Arc<dyn Resolver>>) -> Gate {
        let resolver = resolver.unwrap_or_else(|| Arc::new(SystemResolver::new()));
        Gate {
            lookups: Lookups::new(resolver, limits.max_lookups, limits.lookup_timeout),
            slots: SocketSlots::new(limits.max_sockets),
            waiting: WaitingCalls::new(limits.max_waiting_calls),
            policy,
            limits,
        }
    }

    /// This gate with other limits or another resolver (a fresh socket
    /// count: call before any socket exists).
    pub(crate) fn rebuilt(
        &self,
        limits: Option<Limits>,
        resolver: Option<Arc<dyn Resolver>>,
    ) -> Gate {
        Gate::new(
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
            return Err(unspecified(ip));
        }
        if let Err(denied) = self.policy.check(capability, &target, port) {
            tracing::debug!(target: "moat::net", %denied, "denied");
            return Err(denied.into());
        }
        Ok(target)
    }

    /// The addresses to use for `target`:`port`, which [`admit`](Self::admit)
    /// accepted: the name's addresses that no deny entry matches (and, for a
    /// destination, that are not unspecified), in the resolver's order.
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
            if capability == Capability::Connect && addr.ip().is_unspecified() {
                tracing::debug!(target: "moat::net", host = %target, %addr, "skipping an unspecified address");
                first_refusal.get_or_insert_with(|| unspecified(addr.ip()));
                continue;
            }
            match self
                .policy
                .check_resolved(capability, target, port, addr.ip())
            {
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

impl Gate {
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

fn unspecified(ip: IpAddr) -> NetError {
    NetError::InvalidArgument(format!(
        "{} is the unspecified address, not a destination (for this machine write {})",
        Host::ip(ip),
        if ip.is_ipv4() { "127.0.0.1" } else { "::1" }
    ))
}
