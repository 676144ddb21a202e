//! The run's answers, kept for their lifetime: a guest that sends every
//! datagram to a host written as a name (or connects by name again and
//! again) has the name looked up once per answer lifetime, not once per
//! call.
//!
//! Only answers whose lifetime the resolver states are kept (the system
//! resolver gives the DNS TTL; a custom [`Resolver`](super::Resolver) that
//! gives none is asked every time). Failures are not kept. Every use of a
//! kept answer is judged by the policy again, exactly as a fresh one.

use std::collections::HashMap;
use std::net::IpAddr;
use std::ops::Deref;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::net::budget::{Budget, Charge};
use crate::net::error::NetError;
use crate::net::limits::{MAX_ANSWER_LIFETIME, MAX_KEPT_ANSWERS};

/// Host memory one answer costs beyond its addresses: its header, its
/// place in the cache and the name there.
const ANSWER_OVERHEAD: usize = 320;

/// One name's addresses, as the resolver gave them (in canonical form),
/// held once by the host however many lookups and streams read them, and
/// paid from the run's host memory while any does.
#[derive(Debug)]
pub struct Addresses {
    list: Box<[IpAddr]>,
    _charge: Option<Charge>,
}

impl Addresses {
    /// `list`, paid from `budget`.
    pub(crate) fn charged(list: Vec<IpAddr>, budget: &Arc<Budget>) -> Result<Addresses, NetError> {
        let bytes = ANSWER_OVERHEAD + list.len() * size_of::<IpAddr>();
        let charge = budget.charge(bytes, "a name lookup's answer")?;
        Ok(Addresses {
            list: list.into_boxed_slice(),
            _charge: Some(charge),
        })
    }

    /// One address (an IP literal looked up): nothing the guest can
    /// multiply, so nothing paid.
    pub(crate) fn literal(ip: IpAddr) -> Addresses {
        Addresses {
            list: Box::new([ip]),
            _charge: None,
        }
    }
}

impl Deref for Addresses {
    type Target = [IpAddr];

    fn deref(&self) -> &[IpAddr] {
        &self.list
    }
}

/// A name's answer as the run keeps it: the shared addresses, and how long
/// they are good for.
#[derive(Debug, Clone)]
pub(crate) struct Shared {
    pub(crate) addresses: Arc<Addresses>,
    pub(crate) lifetime: Option<Duration>,
}

/// Answers by name, each with the instant it expires.
#[derive(Default)]
pub(crate) struct Answers {
    kept: Mutex<Kept>,
}

type Kept = HashMap<Box<str>, (Arc<Addresses>, Instant)>;

impl Answers {
    /// The kept answer for `name`, if it has not expired.
    pub(crate) fn get(&self, name: &str) -> Option<Shared> {
        let now = Instant::now();
        let kept = self.lock();
        let (addresses, expires) = kept.get(name)?;
        (*expires > now).then(|| Shared {
            addresses: Arc::clone(addresses),
            lifetime: Some(*expires - now),
        })
    }

    /// Keeps `answer` for `name` for its lifetime (at most
    /// [`MAX_ANSWER_LIFETIME`]); an answer without one is not kept.
    pub(crate) fn keep(&self, name: &str, answer: &Shared) {
        let Some(lifetime) = answer.lifetime.filter(|l| !l.is_zero()) else {
            return;
        };
        let now = Instant::now();
        let expires = now + lifetime.min(MAX_ANSWER_LIFETIME);
        let mut kept = self.lock();
        if kept.len() >= MAX_KEPT_ANSWERS && !kept.contains_key(name) {
            kept.retain(|_, (_, expires)| *expires > now);
            if kept.len() >= MAX_KEPT_ANSWERS
                && let Some(soonest) = kept
                    .iter()
                    .min_by_key(|(_, (_, expires))| *expires)
                    .map(|(name, _)| name.clone())
            {
                kept.remove(&soonest);
            }
        }
        kept.insert(name.into(), (Arc::clone(&answer.addresses), expires));
    }

    /// Forgets every kept answer (the host memory they hold is wanted for
    /// a new one; answers a lookup still reads stay with it).
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(last: u8, secs: u64) -> Shared {
        Shared {
            addresses: Arc::new(Addresses::literal(IpAddr::from([192, 0, 2, last]))),
            lifetime: Some(Duration::from_secs(secs)),
        }
    }

    #[test]
    fn an_answer_is_kept_for_its_lifetime_and_no_longer() {
        let answers = Answers::default();
        answers.keep("a.example", &answer(1, 60));
        let got = answers.get("a.example").expect("kept");
        assert_eq!(**got.addresses, [IpAddr::from([192, 0, 2, 1])]);
        assert!(got.lifetime.is_some_and(|l| l <= Duration::from_secs(60)));
        // A zero lifetime or none at all is not kept.
        answers.keep("b.example", &answer(2, 0));
        answers.keep(
            "c.example",
            &Shared {
                lifetime: None,
                ..answer(3, 1)
            },
        );
        assert!(answers.get("b.example").is_none());
        assert!(answers.get("c.example").is_none());
    }

    #[test]
    fn the_cache_holds_at_most_its_bound_dropping_the_soonest_to_expire() {
        let answers = Answers::default();
        // The first name expires soonest; every other lives longer.
        answers.keep("first.example", &answer(0, 10));
        for i in 1..MAX_KEPT_ANSWERS + 10 {
            answers.keep(&format!("n{i}.example"), &answer(1, 3600));
        }
        assert_eq!(answers.lock().len(), MAX_KEPT_ANSWERS);
        assert!(answers.get("first.example").is_none());
        assert!(
            answers
                .get(&format!("n{}.example", MAX_KEPT_ANSWERS + 9))
                .is_some()
        );
    }
}
