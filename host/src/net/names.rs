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
//!
//! The record also binds deny entries that name names
//! (`--deny-net=tracker.example:8080`): an address resolved from such a
//! name is refused where the entry refuses the name. Forgetting such a
//! pair could admit, so a *pinned* pair (its name named by a deny entry) is
//! dropped only when it expires; a pinned pair that finds the record full
//! of pinned pairs is refused ([`RecordFull`]), and the lookup with it.

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

/// One recorded (address, name) pair's name: when its answer expires, and
/// whether a deny entry names it (so that it must not be forgotten early).
struct Recorded {
    name: Host,
    until: Instant,
    pinned: bool,
}

/// One address's names, each with when its answer expires.
#[derive(Default)]
pub(crate) struct ResolvedNames {
    by_address: HashMap<IpAddr, Vec<Recorded>>,
    len: usize,
    max: usize,
}

/// A name a deny entry names could not be recorded: the record is full of
/// such names, none expired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordFull;

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
    /// recorded again gets the later expiry. `pinned` marks a name a deny
    /// entry names.
    ///
    /// # Errors
    /// [`RecordFull`] if `pinned` and a pair could not be recorded: the
    /// caller must not use the answer.
    pub(crate) fn record(
        &mut self,
        name: &Host,
        addresses: &[IpAddr],
        lifetime: Duration,
        pinned: bool,
    ) -> Result<(), RecordFull> {
        let now = Instant::now();
        let expires = now + lifetime.clamp(MIN_ANSWER_LIFETIME, MAX_ANSWER_LIFETIME);
        for &address in addresses {
            let known = self.by_address.get_mut(&address).and_then(|names| {
                names
                    .iter_mut()
                    .find(|r| r.name == *name)
                    .map(|r| r.until = r.until.max(expires))
            });
            if known.is_some() {
                continue;
            }
            if self.len >= self.max && !self.make_room(now) {
                // Unpinned: its address is judged as an address, which
                // can only deny. Pinned: the deny entry could not hold.
                if pinned {
                    return Err(RecordFull);
                }
                continue;
            }
            self.by_address.entry(address).or_default().push(Recorded {
                name: name.clone(),
                until: expires,
                pinned,
            });
            self.len += 1;
        }
        Ok(())
    }

    /// The names `address` was resolved from whose answers have not
    /// expired.
    pub(crate) fn names(&self, address: IpAddr) -> impl Iterator<Item = &Host> {
        let now = Instant::now();
        self.by_address
            .get(&address)
            .into_iter()
            .flatten()
            .filter(move |r| r.until > now)
            .map(|r| &r.name)
    }

    /// How many (address, name) pairs are recorded.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Drops every expired pair; if none was, the unpinned pair closest
    /// to expiry. Whether there is room now.
    fn make_room(&mut self, now: Instant) -> bool {
        let before = self.len;
        self.retain(|r| r.until > now);
        if self.len < before {
            return true;
        }
        let soonest = self
            .by_address
            .values()
            .flatten()
            .filter(|r| !r.pinned)
            .map(|r| r.until)
            .min();
        let Some(soonest) = soonest else {
            tracing::debug!(target: "moat::net", max = self.max, "resolved-address record full of names deny entries name");
            return false;
        };
        tracing::debug!(target: "moat::net", max = self.max, "resolved-address record full: forgetting the answer closest to expiry");
        let mut dropped = false;
        self.retain(|r| {
            if !dropped && !r.pinned && r.until == soonest {
                dropped = true;
                false
            } else {
                true
            }
        });
        true
    }

    fn retain(&mut self, mut keep: impl FnMut(&Recorded) -> bool) {
        let mut len = 0;
        self.by_address.retain(|_, names| {
            names.retain(&mut keep);
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
        record
            .record(&name("a.test"), &[ip("10.0.0.1")], Duration::ZERO, false)
            .unwrap();
        record
            .record(
                &name("b.test"),
                &[ip("10.0.0.1"), ip("10.0.0.2")],
                Duration::ZERO,
                false,
            )
            .unwrap();
        record
            .record(
                &name("a.test"),
                &[ip("10.0.0.1")],
                Duration::from_secs(600),
                false,
            )
            .unwrap();
        let names: Vec<_> = record.names(ip("10.0.0.1")).cloned().collect();
        assert_eq!(names, [name("a.test"), name("b.test")]);
        assert_eq!(record.names(ip("10.0.0.3")).count(), 0);
        assert_eq!(record.len(), 3);
    }

    /// Records an unpinned answer.
    fn record(record: &mut ResolvedNames, n: &str, addresses: &[IpAddr], lifetime: Duration) {
        record
            .record(&name(n), addresses, lifetime, false)
            .expect("an unpinned pair is never refused");
    }

    #[test]
    fn a_full_record_forgets_the_answer_closest_to_expiry_and_stays_bounded() {
        let mut names = ResolvedNames::new(4);
        record(&mut names, "short.test", &[ip("10.0.0.1")], Duration::ZERO);
        for i in 2..=4 {
            let addr = IpAddr::from([10, 0, 0, i]);
            record(&mut names, "long.test", &[addr], Duration::from_secs(3600));
        }
        record(
            &mut names,
            "new.test",
            &[ip("10.0.0.9")],
            Duration::from_secs(3600),
        );
        assert_eq!(names.len(), 4);
        assert_eq!(
            names.names(ip("10.0.0.1")).count(),
            0,
            "the soonest answer went"
        );
        assert_eq!(names.names(ip("10.0.0.9")).count(), 1);
        for i in 0..10_000u32 {
            let addr = IpAddr::from(i.to_be_bytes());
            record(&mut names, "flood.test", &[addr], Duration::ZERO);
        }
        assert_eq!(names.len(), 4);
    }

    #[test]
    fn a_pinned_pair_outlives_a_flood_and_a_full_record_refuses_the_next_pinned_one() {
        let mut names = ResolvedNames::new(3);
        let tracker = name("tracker.test");
        names
            .record(&tracker, &[ip("10.0.0.7")], Duration::ZERO, true)
            .unwrap();
        for i in 0..1_000u32 {
            let addr = IpAddr::from((0x0b00_0000 + i).to_be_bytes());
            record(&mut names, "flood.test", &[addr], Duration::from_secs(3600));
        }
        assert_eq!(names.len(), 3);
        assert_eq!(
            names.names(ip("10.0.0.7")).collect::<Vec<_>>(),
            [&tracker],
            "the flood did not push the pinned pair out"
        );
        for i in 1..=2u8 {
            names
                .record(
                    &tracker,
                    &[IpAddr::from([10, 0, 1, i])],
                    Duration::ZERO,
                    true,
                )
                .unwrap();
        }
        assert_eq!(
            names.record(&tracker, &[ip("10.0.2.1")], Duration::ZERO, true),
            Err(RecordFull)
        );
        // An unpinned answer is simply not recorded: its address is
        // judged as an address.
        record(&mut names, "other.test", &[ip("10.0.3.1")], Duration::ZERO);
        assert_eq!(names.names(ip("10.0.3.1")).count(), 0);
        assert_eq!(names.len(), 3);
    }

    #[test]
    fn a_record_of_size_zero_records_nothing() {
        let mut names = ResolvedNames::new(0);
        record(
            &mut names,
            "a.test",
            &[ip("10.0.0.1")],
            Duration::from_secs(60),
        );
        assert_eq!(names.names(ip("10.0.0.1")).count(), 0);
        assert_eq!(
            names.record(&name("b.test"), &[ip("10.0.0.2")], Duration::ZERO, true),
            Err(RecordFull)
        );
    }
}
