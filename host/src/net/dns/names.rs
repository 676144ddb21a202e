//! The run's record of which names its addresses came from.
//!
//! A program that uses wasi:sockets looks a name up, then connects to an
//! address. The policy judges names as written, so the host remembers, for
//! the answers' lifetime, that an address was "resolved from NAME"; a later
//! connect to that address is judged as a connect to NAME. The record is
//! bounded ([`Limits::max_recorded_addresses`](crate::net::Limits)): when it is
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

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::net::budget::{Budget, Charge};
use crate::net::limits::{MAX_ANSWER_LIFETIME, MIN_ANSWER_LIFETIME};
use moat_policy::policy::Host;

/// Host memory one recorded pair costs beyond its name's bytes: the entry,
/// its place in the address map and in the two expiry indexes.
const PAIR_OVERHEAD: usize = 160;

/// One recorded (address, name) pair's name: when its answer expires, and
/// whether a deny entry names it (so that it must not be forgotten early).
struct Recorded {
    name: Host,
    /// The pair's key in the expiry indexes.
    key: Key,
    pinned: bool,
}

/// A pair's place in the expiry indexes: its expiry, a sequence number
/// that tells apart pairs expiring at the same instant, and its address.
type Key = (Instant, u64, IpAddr);

/// One address's names, each with when its answer expires, and two
/// indexes by expiry (every pair; unpinned pairs) so that making room
/// costs O(log n), never a walk of the record.
pub(crate) struct ResolvedNames {
    by_address: HashMap<IpAddr, Vec<Recorded>>,
    by_expiry: BTreeSet<Key>,
    unpinned: BTreeSet<Key>,
    next: u64,
    max: usize,
    charge: Charge,
}

/// A name a deny entry names could not be recorded: the record is full of
/// such names, none expired, or the run's host memory is spent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordFull;

impl ResolvedNames {
    /// An empty record of at most `max` (address, name) pairs, paid from
    /// `budget`.
    pub(crate) fn new(max: usize, budget: &Arc<Budget>) -> ResolvedNames {
        ResolvedNames {
            by_address: HashMap::new(),
            by_expiry: BTreeSet::new(),
            unpinned: BTreeSet::new(),
            next: 0,
            max,
            charge: Charge::empty(budget),
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
        let cost = PAIR_OVERHEAD + name.to_string().len();
        for &address in addresses {
            if self.extend(address, name, expires, pinned) {
                continue;
            }
            let room = (self.len() < self.max || self.make_room(now))
                && self
                    .charge
                    .grow(cost, "the record of resolved names")
                    .is_ok();
            if !room {
                // Unpinned: its address is judged as an address, which
                // can only deny. Pinned: the deny entry could not hold.
                if pinned {
                    return Err(RecordFull);
                }
                continue;
            }
            let key = (expires, self.next, address);
            self.next += 1;
            self.by_expiry.insert(key);
            if !pinned {
                self.unpinned.insert(key);
            }
            self.by_address.entry(address).or_default().push(Recorded {
                name: name.clone(),
                key,
                pinned,
            });
        }
        Ok(())
    }

    /// Gives the pair (`address`, `name`), if recorded, the later of its
    /// expiry and `expires` (and pins it if `pinned`). Whether it was.
    fn extend(&mut self, address: IpAddr, name: &Host, expires: Instant, pinned: bool) -> bool {
        let Some(recorded) = self
            .by_address
            .get_mut(&address)
            .and_then(|names| names.iter_mut().find(|r| r.name == *name))
        else {
            return false;
        };
        let old = recorded.key;
        let new = (old.0.max(expires), old.1, address);
        let was_pinned = recorded.pinned;
        recorded.key = new;
        recorded.pinned |= pinned;
        self.by_expiry.remove(&old);
        self.by_expiry.insert(new);
        self.unpinned.remove(&old);
        if !(was_pinned || pinned) {
            self.unpinned.insert(new);
        }
        true
    }

    /// The names `address` was resolved from whose answers have not
    /// expired.
    pub(crate) fn names(&self, address: IpAddr) -> impl Iterator<Item = &Host> {
        let now = Instant::now();
        self.by_address
            .get(&address)
            .into_iter()
            .flatten()
            .filter(move |r| r.key.0 > now)
            .map(|r| &r.name)
    }

    /// How many (address, name) pairs are recorded.
    pub(crate) fn len(&self) -> usize {
        self.by_expiry.len()
    }

    /// Drops the expired pair closest to expiry, or if none has expired,
    /// the unpinned pair closest to expiry. Whether there is room now.
    fn make_room(&mut self, now: Instant) -> bool {
        let victim = match self.by_expiry.first() {
            Some(&key) if key.0 <= now => key,
            _ => match self.unpinned.first() {
                Some(&key) => {
                    tracing::debug!(target: "moat::net", max = self.max, "resolved-address record full: forgetting the answer closest to expiry");
                    key
                }
                None => {
                    tracing::debug!(target: "moat::net", max = self.max, "resolved-address record full of names deny entries name");
                    return false;
                }
            },
        };
        self.forget(victim);
        true
    }

    /// Removes the pair at `key` from the map and both indexes.
    fn forget(&mut self, key: Key) {
        self.by_expiry.remove(&key);
        self.unpinned.remove(&key);
        let address = key.2;
        let Some(names) = self.by_address.get_mut(&address) else {
            return;
        };
        if let Some(i) = names.iter().position(|r| r.key == key) {
            let gone = names.swap_remove(i);
            self.charge
                .shrink(PAIR_OVERHEAD + gone.name.to_string().len());
        }
        if names.is_empty() {
            self.by_address.remove(&address);
        }
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
        let mut record = ResolvedNames::new(16, &Budget::new(None));
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
        let mut names = ResolvedNames::new(4, &Budget::new(None));
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
        let mut names = ResolvedNames::new(3, &Budget::new(None));
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
        let mut names = ResolvedNames::new(0, &Budget::new(None));
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

    #[test]
    fn a_full_record_makes_room_one_pair_at_a_time_and_keeps_its_indexes_whole() {
        let mut names = ResolvedNames::new(64, &Budget::new(None));
        // Past the bound every new pair evicts exactly one old one: the
        // soonest to expire, expired or not.
        for i in 0..10_000u32 {
            let addr = IpAddr::from((0x0a00_0000 + i).to_be_bytes());
            let lifetime = Duration::from_secs(60 + u64::from(i % 7) * 60);
            record(&mut names, "flood.test", &[addr], lifetime);
            assert!(names.len() <= 64);
        }
        assert_eq!(names.len(), 64);
        assert_eq!(names.by_expiry.len(), names.unpinned.len());
        let mapped: usize = names.by_address.values().map(Vec::len).sum();
        assert_eq!(mapped, 64, "the map and the indexes agree");
        // Recording a known pair again moves it, never duplicates it.
        let last = IpAddr::from((0x0a00_0000u32 + 9_999).to_be_bytes());
        record(&mut names, "flood.test", &[last], Duration::from_secs(3600));
        assert_eq!(names.len(), 64);
        assert_eq!(names.by_expiry.last().map(|k| k.2), Some(last));
    }

    #[test]
    fn the_record_is_paid_from_the_budget_and_gives_it_back() {
        let budget = Budget::new(Some(3 * (PAIR_OVERHEAD + "a.test".len())));
        let mut names = ResolvedNames::new(100, &budget);
        let addrs: Vec<IpAddr> = (1..=5).map(|i| IpAddr::from([10, 0, 0, i])).collect();
        record(&mut names, "a.test", &addrs, Duration::ZERO);
        assert_eq!(names.len(), 3, "what the budget could pay for");
        assert_eq!(
            names.record(&name("a.test"), &[ip("10.0.9.9")], Duration::ZERO, true),
            Err(RecordFull),
            "a pinned pair the budget cannot pay for is refused"
        );
        drop(names);
        assert_eq!(budget.used(), 0);
    }
}
