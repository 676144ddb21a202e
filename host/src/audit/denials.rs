//! Denials repeated exactly (the same operation, destination, port and
//! message) counted per second after their first, so that a guest that
//! retries a refused call in a loop writes a record a second, not a record
//! a call. The first denial is a whole decision record; the ones after it,
//! within the run, are [`Body::DenialCounts`] records that repeat it with a
//! count.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use super::record::{Body, Event, Outcome};

/// Most distinct denials counted at once. A guest that is refused in more
/// ways than this has every count written out and starts over: its next
/// denial of each kind is a whole record again. A counted denial keeps a
/// digest and its first record with every text cut
/// ([`super::MAX_RECORDED_TEXT`]), at most about 3 KiB, so 4096 of them hold
/// at most about 12 MiB for the trail's life (a server's, under `moat
/// serve`), whatever the requests that made them carried.
pub(crate) const MAX_COUNTED_DENIALS: usize = 4096;

/// What makes two denials the same: what was asked, of which destination
/// (as written), and the message the guest got (which names the reason and
/// the rule), as the SHA-256 of those (cut as the record keeps them, which
/// leaves long texts distinct by their hash).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key([u8; 32]);

impl Key {
    fn of(event: &Event) -> Option<Key> {
        use sha2::{Digest, Sha256};
        let Outcome::Denied { message, .. } = &event.outcome else {
            return None;
        };
        let mut digest = Sha256::new();
        // Each text with its length before it, so that no two lists of
        // texts run together into the same bytes.
        let mut text = |t: &str| {
            digest.update((t.len() as u64).to_le_bytes());
            digest.update(t.as_bytes());
        };
        text(event.operation.as_str());
        text(&event.host);
        text(event.written.as_deref().unwrap_or("\u{0}none"));
        text(&event.port.map_or_else(String::new, |p| p.to_string()));
        text(message);
        Some(Key(digest.finalize().into()))
    }
}

struct Count {
    /// The denial's first record, which the counts repeat.
    first: Event,
    second: u64,
    count: u64,
}

/// The counts of the denials after each one's first.
#[derive(Default)]
pub(super) struct DenialCounts {
    counts: HashMap<Key, Count>,
    /// The last second in which past counts were written out.
    swept: u64,
}

fn second_of(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

fn counts_body(count: &Count) -> Body {
    Body::DenialCounts {
        first: Box::new(count.first.clone()),
        second: SystemTime::UNIX_EPOCH + Duration::from_secs(count.second),
        count: count.count,
    }
}

impl DenialCounts {
    /// Counts `event` at `now` if it is a denial seen before: `None` when
    /// it is to be written whole (not a denial, or the first of its kind);
    /// else the counts of past seconds to write out first.
    pub(super) fn count(&mut self, event: &Event, now: SystemTime) -> Option<Vec<Body>> {
        let key = Key::of(event)?;
        let second = second_of(now);
        let mut out = self.sweep_at(second);
        if let Some(count) = self.counts.get_mut(&key) {
            if count.second < second {
                count.second = second;
            }
            count.count += 1;
            return Some(out);
        }
        if self.counts.len() >= MAX_COUNTED_DENIALS {
            out.extend(self.drain_all());
        }
        self.counts.insert(
            key,
            Count {
                first: event.clone(),
                second,
                count: 0,
            },
        );
        // The first of its kind is written whole, after what is due.
        if out.is_empty() {
            None
        } else {
            out.push(Body::Decision(event.clone()));
            Some(out)
        }
    }

    /// The counts of seconds before `now`'s, written out once a second.
    pub(super) fn sweep(&mut self, now: SystemTime) -> Vec<Body> {
        self.sweep_at(second_of(now))
    }

    fn sweep_at(&mut self, second: u64) -> Vec<Body> {
        let mut out = Vec::new();
        if second > self.swept {
            self.swept = second;
            for count in self.counts.values_mut() {
                if count.second < second && count.count > 0 {
                    out.push(counts_body(count));
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

    /// Every count not yet written out; the denials are forgotten.
    pub(super) fn drain_all(&mut self) -> Vec<Body> {
        self.counts
            .drain()
            .filter(|(_, count)| count.count > 0)
            .map(|(_, count)| counts_body(&count))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{Operation, Reason};
    use moat_policy::policy::Host;

    fn denial(port: u16) -> Event {
        Event::new(
            Operation::Connect,
            &Host::parse("10.0.0.1").unwrap(),
            Some(port),
            Outcome::Denied {
                reason: Reason::NoGrant {
                    needs: format!("--allow-net=10.0.0.1:{port}"),
                },
                message: format!("connect to 10.0.0.1:{port} denied"),
            },
        )
    }

    fn total(bodies: &[Body]) -> u64 {
        bodies
            .iter()
            .map(|body| match body {
                Body::DenialCounts { count, .. } => *count,
                _ => 0,
            })
            .sum()
    }

    #[test]
    fn a_denial_is_recorded_once_then_counted_per_second_and_nothing_is_lost() {
        let mut counts = DenialCounts::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        assert!(counts.count(&denial(9), t0).is_none(), "the first is whole");
        let mut written = Vec::new();
        for _ in 0..49_999 {
            written.extend(counts.count(&denial(9), t0).expect("counted"));
        }
        assert!(written.is_empty());
        // Another port is another denial.
        assert!(counts.count(&denial(10), t0).is_none());
        // A second later the past second's count is written out.
        written.extend(
            counts
                .count(&denial(9), t0 + Duration::from_secs(1))
                .unwrap(),
        );
        assert_eq!(written.len(), 1);
        let Body::DenialCounts {
            count,
            second,
            first,
        } = &written[0]
        else {
            panic!("{written:?}")
        };
        assert_eq!((*count, *second), (49_999, t0));
        assert_eq!(first.port, Some(9));
        written.extend(counts.drain_all());
        assert_eq!(total(&written), 50_000, "every denial after the first");
    }

    #[test]
    fn past_the_cap_counts_are_written_out_and_denials_start_over() {
        let mut counts = DenialCounts::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(5);
        let mut written = 0;
        for port in 1..=(MAX_COUNTED_DENIALS as u16 + 1) {
            // The first of each is whole; past the cap, it comes after
            // every count so far.
            match counts.count(&denial(port), t0) {
                None => assert!(port as usize <= MAX_COUNTED_DENIALS),
                Some(out) => {
                    assert!(port as usize > MAX_COUNTED_DENIALS);
                    assert!(matches!(out.last(), Some(Body::Decision(_))));
                    written += total(&out);
                }
            }
            written += total(&counts.count(&denial(port), t0).unwrap());
        }
        assert!(counts.counts.len() <= MAX_COUNTED_DENIALS);
        assert_eq!(
            written + total(&counts.drain_all()),
            MAX_COUNTED_DENIALS as u64 + 1
        );
    }
}
