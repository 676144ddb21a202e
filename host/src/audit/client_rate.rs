//! Each client address's rate of records on `moat serve`'s trail
//! (`--max-audit-rate-per-client`): a bucket of `burst` bytes (a request's
//! share, `--max-audit-per-request`) that refills at `rate` bytes a second,
//! and that every record of the address's requests is paid from as well as
//! from its request's share. One address's requests, however many, then
//! fill the trail no faster than the rate; the server's others go on.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// Addresses kept before the map is swept of those whose bucket is full
/// and unused (such an entry is the same as none).
const SWEEP_AT: usize = 1024;

/// One client address's bucket.
pub(crate) struct ClientRate {
    rate: u64,
    burst: u64,
    level: Mutex<Level>,
    /// Whether the trail was told the address is past its rate, since its
    /// last record that passed.
    told: AtomicBool,
}

/// What a bucket holds, as of when.
struct Level {
    bytes: f64,
    at: Instant,
}

impl ClientRate {
    fn new(rate: u64, burst: u64) -> ClientRate {
        ClientRate {
            rate,
            burst,
            level: Mutex::new(Level {
                bytes: burst as f64,
                at: Instant::now(),
            }),
            told: AtomicBool::new(false),
        }
    }

    /// The rate, in bytes a second.
    pub(crate) fn rate(&self) -> u64 {
        self.rate
    }

    /// Takes `size` bytes, or refuses while the bucket holds fewer.
    pub(crate) fn take(&self, size: u64) -> bool {
        let mut level = self.refilled();
        let size = size as f64;
        if level.bytes < size {
            return false;
        }
        level.bytes -= size;
        drop(level);
        self.told.store(false, Ordering::Release);
        true
    }

    /// Whether this refusal is the first since a record passed: the one
    /// the trail is told of.
    pub(crate) fn first_refusal(&self) -> bool {
        !self.told.swap(true, Ordering::AcqRel)
    }

    fn refilled(&self) -> std::sync::MutexGuard<'_, Level> {
        let mut level = self.level.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let gained = now.duration_since(level.at).as_secs_f64() * self.rate as f64;
        level.bytes = (level.bytes + gained).min(self.burst as f64);
        level.at = now;
        level
    }

    fn is_full(&self) -> bool {
        self.refilled().bytes >= self.burst as f64
    }
}

/// The buckets of every address whose records came lately.
pub(crate) struct ClientRates {
    rate: u64,
    burst: u64,
    held: Mutex<Held>,
}

struct Held {
    buckets: HashMap<IpAddr, Arc<ClientRate>>,
    /// The map's size past which it is swept next.
    sweep_at: usize,
}

impl ClientRates {
    /// Buckets of `burst` bytes refilling at `rate` bytes a second.
    pub(crate) fn new(rate: u64, burst: u64) -> Arc<ClientRates> {
        Arc::new(ClientRates {
            rate,
            burst,
            held: Mutex::new(Held {
                buckets: HashMap::new(),
                sweep_at: SWEEP_AT,
            }),
        })
    }

    /// The bucket of `client` (an address as shares group them).
    pub(crate) fn of(&self, client: IpAddr) -> Arc<ClientRate> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if held.buckets.len() >= held.sweep_at {
            // Full and held by no request: the same as a new one. Swept
            // when the map doubled since, so each address costs its sweep
            // once.
            held.buckets
                .retain(|_, bucket| Arc::strong_count(bucket) > 1 || !bucket.is_full());
            held.sweep_at = (held.buckets.len() * 2).max(SWEEP_AT);
        }
        let (rate, burst) = (self.rate, self.burst);
        Arc::clone(
            held.buckets
                .entry(client)
                .or_insert_with(|| Arc::new(ClientRate::new(rate, burst))),
        )
    }

    /// Addresses held (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .buckets
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates(rate: u64, burst: u64) -> Arc<ClientRates> {
        ClientRates::new(rate, burst)
    }

    #[test]
    fn a_bucket_gives_its_burst_then_refuses_and_tells_once() {
        let rates = rates(1, 1000);
        let bucket = rates.of("192.0.2.1".parse().unwrap());
        assert!(bucket.take(600));
        assert!(bucket.take(400));
        assert!(!bucket.take(10), "spent");
        assert!(bucket.first_refusal());
        assert!(!bucket.first_refusal(), "told once");
        // A second later, a byte came back.
        bucket.level.lock().unwrap().at -= std::time::Duration::from_secs(1);
        assert!(bucket.take(1));
        assert!(!bucket.take(1));
        assert!(bucket.first_refusal(), "a record passed since: told again");
        // Another address has its own.
        assert!(rates.of("192.0.2.2".parse().unwrap()).take(1000));
    }

    #[test]
    fn full_buckets_no_request_holds_are_swept() {
        let rates = rates(1, 1000);
        let kept = rates.of("192.0.2.1".parse().unwrap());
        assert!(kept.take(1));
        for n in 0..SWEEP_AT as u32 + 10 {
            drop(rates.of(IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + n))));
        }
        assert!(rates.len() < SWEEP_AT, "{} held", rates.len());
        assert!(
            Arc::ptr_eq(&kept, &rates.of("192.0.2.1".parse().unwrap())),
            "a spent bucket stays"
        );
    }
}
