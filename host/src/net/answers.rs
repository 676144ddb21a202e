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
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use super::names::MAX_ANSWER_LIFETIME;
use super::resolve::Answer;

/// Most names whose answers a run keeps. A name is at most 253 bytes and
/// an answer a few addresses, so a full cache is under half a MiB; a guest
/// that talks to more names than this at once has the earliest-expiring
/// answers dropped (and looked up again when next used).
pub const MAX_KEPT_ANSWERS: usize = 1024;

/// Answers by name, each with the instant it expires.
#[derive(Default)]
pub(crate) struct Answers {
    kept: Mutex<Kept>,
}

type Kept = HashMap<Box<str>, (Arc<[IpAddr]>, Instant)>;

impl Answers {
    /// The kept answer for `name`, if it has not expired.
    pub(crate) fn get(&self, name: &str) -> Option<Answer> {
        let now = Instant::now();
        let kept = self.lock();
        let (addresses, expires) = kept.get(name)?;
        (*expires > now).then(|| Answer {
            addresses: addresses.to_vec(),
            lifetime: Some(*expires - now),
        })
    }

    /// Keeps `answer` for `name` for its lifetime (at most
    /// [`MAX_ANSWER_LIFETIME`]); an answer without one is not kept.
    pub(crate) fn keep(&self, name: &str, answer: &Answer) {
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
        kept.insert(name.into(), (answer.addresses.as_slice().into(), expires));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn answer(last: u8, secs: u64) -> Answer {
        Answer {
            addresses: vec![IpAddr::from([192, 0, 2, last])],
            lifetime: Some(Duration::from_secs(secs)),
        }
    }

    #[test]
    fn an_answer_is_kept_for_its_lifetime_and_no_longer() {
        let answers = Answers::default();
        answers.keep("a.example", &answer(1, 60));
        let got = answers.get("a.example").expect("kept");
        assert_eq!(got.addresses, vec![IpAddr::from([192, 0, 2, 1])]);
        assert!(got.lifetime.is_some_and(|l| l <= Duration::from_secs(60)));
        // A zero lifetime or none at all is not kept.
        answers.keep("b.example", &answer(2, 0));
        answers.keep(
            "c.example",
            &Answer {
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
