//! The run's record of which names its addresses came from.
//!
//! A program that uses wasi:sockets looks a name up, then connects to an
//! address. The policy judges names as written, so the host remembers, for
//! the answers' lifetime, that an address was "resolved from NAME"; a later
//! connect to that address is judged as a connect to NAME. The record is
//! bounded ([`Limits::max_recorded_addresses`](super::Limits)): when it is
//! full, expired answers go first, then the answers closest to expiry. An
//! address whose answer is gone is judged as an address again, so the bound
//! can only deny, never admit.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use crate::policy::Host;

/// The shortest time an answer is kept, whatever its DNS lifetime (TTL).
/// Answers with a TTL of 0 to a few seconds are common behind CDNs, and a
/// program connects after its lookup returns, not within the TTL: a
/// minute covers a slow connect and its retries.
pub const MIN_ANSWER_LIFETIME: Duration = Duration::from_secs(60);

/// How long an answer is kept when the resolver does not say (a custom
/// [`Resolver`](super::Resolver) that gives no lifetime): five minutes, a
/// common TTL.
pub const DEFAULT_ANSWER_LIFETIME: Duration = Duration::from_secs(300);

/// The longest time an answer is kept. A day is the longest TTL most
/// resolvers honour (hickory caps at one day too).
pub const MAX_ANSWER_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// One address's names, each with when its answer expires.
#[derive(Default)]
pub(crate) struct ResolvedNames {
    by_address: HashMap<IpAddr, Vec<(Host, Instant)>>,
    len: usize,
    max: usize,
}

impl ResolvedNames {
    /// An empty record of at most `max` (address, name) pairs.
    pub(crate) fn new(max: usize) -> ResolvedNames {
        ResolvedNames {
            max,
            ..ResolvedNames::default()
        }
    }

    /// Records that `name` resolved to `addresses`, for `lifetime` (kept
    /// within [`MIN_ANSWER_LIFETIME`] and [`MAX_ANSWER_LIFETIME`]). A pair
    /// recorded again gets the later expiry.
    pub(crate) fn record(&mut self, name: &Host, addresses: &[IpAddr], lifetime: Duration) {
        let now = Instant::now();
        let expires = now + lifetime.clamp(MIN_ANSWER_LIFETIME, MAX_ANSWER_LIFETIME);
        for &address in addresses {
            let known = self.by_address.get_mut(&address).and_then(|names| {
                names
                    .iter_mut()
                    .find(|(n, _)| n == name)
                    .map(|(_, until)| *until = (*until).max(expires))
            });
            if known.is_some() || self.max == 0 {
                continue;
            }
            if self.len >= self.max {
                self.make_room(now);
            }
            self.by_address
                .entry(address)
                .or_default()
                .push((name.clone(), expires));
            self.len += 1;
        }
    }

    /// The names `address` was resolved from whose answers have not
    /// expired.
    pub(crate) fn names(&self, address: IpAddr) -> impl Iterator<Item = &Host> {
        let now = Instant::now();
        self.by_address
            .get(&address)
            .into_iter()
            .flatten()
            .filter(move |(_, until)| *until > now)
            .map(|(name, _)| name)
    }

    /// How many (address, name) pairs are recorded.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Drops every expired pair; if none was, the pair closest to expiry.
    fn make_room(&mut self, now: Instant) {
        let before = self.len;
        self.retain(|until| until > now);
        if self.len < before {
            return;
        }
        let soonest = self
            .by_address
            .values()
            .flatten()
            .map(|(_, until)| *until)
            .min();
        if let Some(soonest) = soonest {
            tracing::debug!(target: "moat::net", max = self.max, "resolved-address record full: forgetting the answer closest to expiry");
            let mut dropped = false;
            self.retain(|until| {
                if !dropped && until == soonest {
                    dropped = true;
                    false
                } else {
                    true
                }
            });
        }
    }

    fn retain(&mut self, mut keep: impl FnMut(Instant) -> bool) {
        let mut len = 0;
        self.by_address.retain(|_, names| {
            names.retain(|(_, until)| keep(*until));
            len += names.len();
            !names.is_empty()
        });
        self.len = len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Host {
        Host::parse(s).unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_address_keeps_every_name_it_was_resolved_from() {
        let mut record = ResolvedNames::new(16);
        record.record(&name("a.test"), &[ip("10.0.0.1")], Duration::ZERO);
        record.record(
            &name("b.test"),
            &[ip("10.0.0.1"), ip("10.0.0.2")],
            Duration::ZERO,
        );
        record.record(&name("a.test"), &[ip("10.0.0.1")], Duration::from_secs(600));
        let names: Vec<_> = record.names(ip("10.0.0.1")).cloned().collect();
        assert_eq!(names, [name("a.test"), name("b.test")]);
        assert_eq!(record.names(ip("10.0.0.3")).count(), 0);
        assert_eq!(record.len(), 3);
    }

    #[test]
    fn a_full_record_forgets_the_answer_closest_to_expiry_and_stays_bounded() {
        let mut record = ResolvedNames::new(4);
        record.record(&name("short.test"), &[ip("10.0.0.1")], Duration::ZERO);
        for i in 2..=4 {
            let addr = IpAddr::from([10, 0, 0, i]);
            record.record(&name("long.test"), &[addr], Duration::from_secs(3600));
        }
        record.record(
            &name("new.test"),
            &[ip("10.0.0.9")],
            Duration::from_secs(3600),
        );
        assert_eq!(record.len(), 4);
        assert_eq!(
            record.names(ip("10.0.0.1")).count(),
            0,
            "the soonest answer went"
        );
        assert_eq!(record.names(ip("10.0.0.9")).count(), 1);
        for i in 0..10_000u32 {
            record.record(
                &name("flood.test"),
                &[IpAddr::from(i.to_be_bytes())],
                Duration::ZERO,
            );
        }
        assert_eq!(record.len(), 4);
    }

    #[test]
    fn a_record_of_size_zero_records_nothing() {
        let mut record = ResolvedNames::new(0);
        record.record(&name("a.test"), &[ip("10.0.0.1")], Duration::from_secs(60));
        assert_eq!(record.names(ip("10.0.0.1")).count(), 0);
    }
}
