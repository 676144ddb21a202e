//! Decisions counted by operation and outcome, trail or no trail: what
//! `moat serve --metrics` reports as `moat_decisions_total`.
//!
//! A count per (operation, outcome) pair, in a fixed table: 20 atomics
//! whatever the guest does, so no guest can make the counts grow.

use std::sync::atomic::{AtomicU64, Ordering};

use super::record::Operation;

/// How many decisions of each operation were allowed and denied.
#[derive(Debug, Default)]
pub struct DecisionCounts {
    /// `[allowed, denied]` for each of [`Operation::ALL`], in its order.
    counts: [[AtomicU64; 2]; Operation::ALL.len()],
}

impl DecisionCounts {
    /// Counts one decision.
    pub(crate) fn count(&self, operation: Operation, allowed: bool) {
        self.counts[operation.index()][usize::from(!allowed)].fetch_add(1, Ordering::Relaxed);
    }

    /// Decisions of `operation` allowed (`true`) or denied (`false`) so far.
    pub fn get(&self, operation: Operation, allowed: bool) -> u64 {
        self.counts[operation.index()][usize::from(!allowed)].load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_operation_and_outcome_has_its_own_count() {
        let counts = DecisionCounts::default();
        counts.count(Operation::Connect, true);
        counts.count(Operation::Connect, true);
        counts.count(Operation::HttpRequest, false);
        counts.count(Operation::ServeBind, true);
        assert_eq!(counts.get(Operation::Connect, true), 2);
        assert_eq!(counts.get(Operation::Connect, false), 0);
        assert_eq!(counts.get(Operation::HttpRequest, false), 1);
        assert_eq!(counts.get(Operation::HttpRequest, true), 0);
        assert_eq!(counts.get(Operation::ServeBind, true), 1);
        let total: u64 = Operation::ALL
            .iter()
            .flat_map(|&op| [counts.get(op, true), counts.get(op, false)])
            .sum();
        assert_eq!(total, 4);
        for (i, op) in Operation::ALL.iter().enumerate() {
            assert_eq!(op.index(), i, "{op:?} out of place in Operation::ALL");
        }
    }
}
