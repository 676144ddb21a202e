//! The run's host-memory budget: one account that every host byte a guest
//! can make the host keep is paid from, beside the caps on each kind of
//! resource.
//!
//! The per-resource caps bound counts (sockets, lookups, recorded pairs);
//! the budget bounds what those counts can be multiplied by. What draws
//! from it, each for as long as the host keeps it:
//!
//! - name lookup answers, once per answer however many wasi:sockets
//!   lookup streams read it (they share it);
//! - the record of resolved names, per (address, name) pair;
//! - TLS configurations the guest's options made (client configurations
//!   with extra roots or a client identity, server certificates and keys),
//!   per configuration, shared by every socket built from the same bytes;
//! - send backlogs: the bytes a socket accepted while the kernel was full.
//!
//! Past the budget the call fails with `limit-reached` naming
//! `--max-host-memory`; a write that finds no room does not fail, it waits
//! for the kernel to take bytes directly (nothing is accepted that is not
//! paid for, and nothing accepted is lost).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::error::NetError;
use moat_policy::setting::Setting;

/// One run's account of host memory.
#[derive(Debug)]
pub(crate) struct Budget {
    used: AtomicUsize,
    max: usize,
}

/// Bytes paid from a [`Budget`], given back when dropped.
#[derive(Debug)]
pub(crate) struct Charge {
    budget: Arc<Budget>,
    bytes: usize,
}

impl Budget {
    /// A budget of `max` bytes (`None`: unbounded, counted all the same).
    /// A refusal names [`Setting::MaxHostMemory`].
    pub(crate) fn new(max: Option<usize>) -> Arc<Budget> {
        Arc::new(Budget {
            used: AtomicUsize::new(0),
            max: max.unwrap_or(usize::MAX),
        })
    }

    /// Bytes paid and not yet given back.
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Pays `bytes` for `what`, or fails with [`NetError::LimitReached`]
    /// naming the budget (nothing paid).
    pub(crate) fn charge(self: &Arc<Self>, bytes: usize, what: &str) -> Result<Charge, NetError> {
        self.take(bytes, what)?;
        Ok(Charge {
            budget: Arc::clone(self),
            bytes,
        })
    }

    fn take(&self, bytes: usize, what: &str) -> Result<(), NetError> {
        let mut used = self.used.load(Ordering::Relaxed);
        while let Some(total) = used.checked_add(bytes).filter(|&total| total <= self.max) {
            match self
                .used
                .compare_exchange_weak(used, total, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Ok(()),
                Err(now) => used = now,
            }
        }
        tracing::debug!(target: "moat::net", used, bytes, max = self.max, what, "host memory budget reached");
        Err(NetError::limit(
            format!(
                "{what} needs {bytes} bytes of host memory, and the run holds {used} of its {} \
                 already",
                self.max
            ),
            Setting::MaxHostMemory,
        ))
    }
}

impl Charge {
    /// Pays `bytes` more into this charge.
    ///
    /// # Errors
    /// As [`Budget::charge`]; this charge is unchanged.
    pub(crate) fn grow(&mut self, bytes: usize, what: &str) -> Result<(), NetError> {
        self.budget.take(bytes, what)?;
        self.bytes += bytes;
        Ok(())
    }

    /// Gives back up to `bytes` of this charge.
    pub(crate) fn shrink(&mut self, bytes: usize) {
        let bytes = bytes.min(self.bytes);
        self.bytes -= bytes;
        self.budget.used.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Bytes paid into this charge.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes the budget has left.
    pub(crate) fn room(&self) -> usize {
        self.budget.max.saturating_sub(self.budget.used())
    }

    /// An empty charge on `budget`, to grow.
    pub(crate) fn empty(budget: &Arc<Budget>) -> Charge {
        Charge {
            budget: Arc::clone(budget),
            bytes: 0,
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_refuses_what_would_pass_it_and_takes_back_what_is_dropped() {
        use moat_policy::setting::{Spelling, Worded};
        let budget = Budget::new(Some(100));
        let a = budget.charge(60, "a test").unwrap();
        let err = budget.charge(41, "a lookup answer").unwrap_err();
        assert!(
            err.limit_setting() == Some(Setting::MaxHostMemory)
                && err.to_string().contains("a lookup answer")
                && err
                    .worded(Spelling::Environment)
                    .to_string()
                    .contains("raise it with MOAT_MAX_HOST_MEMORY"),
            "{err}"
        );
        let mut b = budget.charge(40, "a test").unwrap();
        assert_eq!(budget.used(), 100);
        b.shrink(30);
        assert!(b.grow(31, "a test").is_err());
        b.grow(30, "a test").unwrap();
        drop(a);
        drop(b);
        assert_eq!(budget.used(), 0);
        assert!(budget.charge(usize::MAX, "a test").is_err());
    }
}
