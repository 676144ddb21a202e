//! Decisions counted by operation and outcome, trail or no trail: what
//! `moat serve --metrics` reports as `moat_decisions_total`.
//!
//! A count per (operation, outcome) pair, in a fixed table: 20 atomics
//! whatever the guest does, so no guest can make the counts grow.

use std::sync::atomic::{AtomicU64, Ordering};

use super::record::{Decided, Operation};

/// How many decisions of each operation were allowed, denied and let
/// through in observe mode.
#[derive(Debug, Default)]
pub struct DecisionCounts {
    /// A count for each of [`Decided::ALL`], for each of
    /// [`Operation::ALL`], in their orders.
    counts: [[AtomicU64; Decided::ALL.len()]; Operation::ALL.len()],
}

impl DecisionCounts {
    /// Counts one decision.
    pub(crate) fn count(&self, operation: Operation, decided: Decided) {
        self.counts[operation.index()][decided as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Decisions of `operation` decided so far.
    pub fn get(&self, operation: Operation, decided: Decided) -> u64 {
        self.counts[operation.index()][decided as usize].load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_operation_and_outcome_has_its_own_count() {
        let counts = DecisionCounts::default();
        counts.count(Operation::Connect, Decided::Allowed);
        counts.count(Operation::Connect, Decided::Allowed);
        counts.count(Operation::HttpRequest, Decided::Denied);
        counts.count(Operation::ServeBind, Decided::WouldDeny);
        assert_eq!(counts.get(Operation::Connect, Decided::Allowed), 2);
        assert_eq!(counts.get(Operation::Connect, Decided::Denied), 0);
        assert_eq!(counts.get(Operation::HttpRequest, Decided::Denied), 1);
        assert_eq!(counts.get(Operation::HttpRequest, Decided::Allowed), 0);
        assert_eq!(counts.get(Operation::ServeBind, Decided::WouldDeny), 1);
        assert_eq!(counts.get(Operation::ServeBind, Decided::Allowed), 0);
        let total: u64 = Operation::ALL
            .iter()
            .flat_map(|&op| Decided::ALL.map(|d| counts.get(op, d)))
            .sum();
        assert_eq!(total, 4);
        for (i, op) in Operation::ALL.iter().enumerate() {
            assert_eq!(op.index(), i, "{op:?} out of place in Operation::ALL");
        }
    }
}
