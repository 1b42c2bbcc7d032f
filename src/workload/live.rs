//! What a workload has done so far, readable while it runs (the live progress line):
//! the same [`OutcomeFold`] a run's [`RunAggregate`](crate::aggregate::RunAggregate)
//! folds its answers with, behind a lock.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use super::ledger::Outcome;
use super::outcomes::{OutcomeFold, OutcomeSnapshot};

/// Creates answered so far, and where the successful ones landed.
#[derive(Debug, Default)]
pub struct LiveCounts {
    /// Node id -> index in node order (the placements' population).
    index: HashMap<String, usize>,
    fold: Mutex<OutcomeFold>,
    tail: Mutex<Tail>,
}

/// The sandboxes whose lifetime (or lifecycle) the workload still waits for once its
/// creates are done: how many, and when the last scheduled delete is due.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tail {
    /// Deletes or lifecycles scheduled and not finished.
    pub pending: u64,
    /// When the last scheduled delete is due (none for lifecycles only).
    pub last_due: Option<Instant>,
}

impl LiveCounts {
    /// Counts over the nodes `nodes`, in that order (a landing on another node is not
    /// counted in the placements).
    pub fn new(nodes: &[String]) -> Self {
        LiveCounts {
            index: nodes
                .iter()
                .enumerate()
                .map(|(k, id)| (id.clone(), k))
                .collect(),
            fold: Mutex::new(OutcomeFold::new(nodes.len())),
            tail: Mutex::new(Tail::default()),
        }
    }

    /// One create answered with `outcome`, on `node` when the answer said.
    pub fn record(&self, outcome: &Outcome, node: Option<&str>) {
        let mut fold = self.fold.lock().unwrap_or_else(|e| e.into_inner());
        fold.answered(outcome);
        if outcome.is_created() {
            if let Some(&k) = node.and_then(|n| self.index.get(n)) {
                fold.landed(k);
            }
        }
    }

    /// A sandbox's delete (or lifecycle) was scheduled, due at `due` when known.
    pub fn lifetime_scheduled(&self, due: Option<Instant>) {
        let mut t = self.tail.lock().unwrap_or_else(|e| e.into_inner());
        t.pending += 1;
        t.last_due = t.last_due.max(due);
    }

    /// A scheduled delete (or lifecycle) finished.
    pub fn lifetime_ended(&self) {
        let mut t = self.tail.lock().unwrap_or_else(|e| e.into_inner());
        t.pending = t.pending.saturating_sub(1);
    }

    /// The deletes still awaited.
    pub fn tail(&self) -> Tail {
        *self.tail.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The counts now.
    pub fn snapshot(&self) -> OutcomeSnapshot {
        self.fold
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_are_counted_and_placements_follow_node_order() {
        let nodes = vec!["a".to_string(), "b".to_string()];
        let live = LiveCounts::new(&nodes);
        live.record(&Outcome::Status(201), Some("b"));
        live.record(&Outcome::Status(201), Some("b"));
        live.record(&Outcome::Status(201), Some("elsewhere"));
        live.record(&Outcome::Status(500), None);
        let s = live.snapshot();
        assert_eq!((s.done, s.created, s.errors), (4, 3, 1));
        assert_eq!(s.placed, vec![0, 2]);
        assert!(s.placements_cv().is_some_and(|cv| cv > 0.9));
        assert_eq!(LiveCounts::new(&nodes).snapshot().placements_cv(), None);
    }
}
