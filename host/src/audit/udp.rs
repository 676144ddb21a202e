//! UDP sends counted per destination per second, so that a flood of
//! datagrams to one place is a record per second, not a record per
//! datagram.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use super::record::Body;
use moat_policy::policy::Host;

/// Most destinations counted at once. A guest that sends to more
/// destinations than this has every count written out and starts over:
/// its next send to each destination is a whole record again. 4096
/// destinations are a few hundred KiB of host memory.
pub(crate) const MAX_COUNTED_UDP_DESTINATIONS: usize = 4096;

/// One destination's count for the current second.
struct Count {
    second: u64,
    count: u64,
}

/// The counts of the sends after each destination's first.
#[derive(Default)]
pub(super) struct UdpCounts {
    counts: HashMap<(Host, u16, bool), Count>,
    /// The last second in which stale counts were written out.
    swept: u64,
}

fn second_of(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

fn counts_body(host: &Host, port: u16, allowed: bool, count: &Count) -> Body {
    Body::UdpSendCounts {
        host: host.to_string(),
        port,
        allowed,
        second: SystemTime::UNIX_EPOCH + Duration::from_secs(count.second),
        count: count.count,
    }
}

impl UdpCounts {
    /// Counts a send at `now`: whether it is the destination's first
    /// (which gets a whole record), and the counts of past seconds to
    /// write out first (once a second, every destination's).
    pub(super) fn count(
        &mut self,
        host: &Host,
        port: u16,
        allowed: bool,
        now: SystemTime,
    ) -> (bool, Vec<Body>) {
        let second = second_of(now);
        let mut out = self.sweep_at(second);
        let key = (host.clone(), port, allowed);
        if let Some(count) = self.counts.get_mut(&key) {
            if count.second < second {
                count.second = second;
            }
            count.count += 1;
            return (false, out);
        }
        if self.counts.len() >= MAX_COUNTED_UDP_DESTINATIONS {
            out.extend(self.drain_all());
        }
        self.counts.insert(key, Count { second, count: 0 });
        (true, out)
    }

    /// The counts of seconds before `now`'s, written out once a second.
    pub(super) fn sweep(&mut self, now: SystemTime) -> Vec<Body> {
        self.sweep_at(second_of(now))
    }

    fn sweep_at(&mut self, second: u64) -> Vec<Body> {
        let mut out = Vec::new();
        if second > self.swept {
            self.swept = second;
            for ((host, port, allowed), count) in &mut self.counts {
                if count.second < second && count.count > 0 {
                    out.push(counts_body(host, *port, *allowed, count));
                    count.count = 0;
                }
            }
        }
        out
    }

    /// Whether any count is waiting to be written out.
    pub(super) fn pending(&self) -> bool {
        self.counts.values().any(|count| count.count > 0)
    }

    /// Every count not yet written out; the destinations are forgotten.
    pub(super) fn drain_all(&mut self) -> Vec<Body> {
        self.counts
            .drain()
            .filter(|(_, count)| count.count > 0)
            .map(|((host, port, allowed), count)| counts_body(&host, port, allowed, &count))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_destination_is_recorded_once_then_counted_per_second() {
        let mut counts = UdpCounts::default();
        let host = Host::parse("127.0.0.1").unwrap();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let (first, out) = counts.count(&host, 9, true, t0);
        assert!(first && out.is_empty());
        for _ in 0..999 {
            let (first, out) = counts.count(&host, 9, true, t0);
            assert!(!first && out.is_empty());
        }
        let (first, out) = counts.count(&host, 9, true, t0 + Duration::from_secs(1));
        assert!(!first);
        assert_eq!(out.len(), 1);
        let Body::UdpSendCounts { count, second, .. } = &out[0] else {
            panic!("{out:?}")
        };
        assert_eq!((*count, *second), (999, t0));
        let rest = counts.drain_all();
        assert_eq!(rest.len(), 1);
        let Body::UdpSendCounts { count, .. } = &rest[0] else {
            panic!("{rest:?}")
        };
        assert_eq!(*count, 1);
    }

    #[test]
    fn past_the_cap_counts_are_written_out_and_destinations_start_over() {
        let mut counts = UdpCounts::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(5);
        let mut written = 0;
        for port in 1..=(MAX_COUNTED_UDP_DESTINATIONS as u16 + 1) {
            let host = Host::parse("10.0.0.1").unwrap();
            let (first, out) = counts.count(&host, port, false, t0);
            assert!(first);
            written += out.len();
            let (first, out) = counts.count(&host, port, false, t0);
            assert!(!first);
            written += out.len();
        }
        assert!(counts.counts.len() <= MAX_COUNTED_UDP_DESTINATIONS);
        assert_eq!(
            written + counts.drain_all().len(),
            MAX_COUNTED_UDP_DESTINATIONS + 1
        );
    }
}
