//! What a workload has done so far, readable while it runs (the live progress line):
//! the same [`OutcomeFold`] a run's [`RunAggregate`](crate::aggregate::RunAggregate)
//! folds its answers with, behind a lock.

use std::collections::HashMap;
use std::sync::Mutex;

use super::ledger::Outcome;
use crate::aggregate::{OutcomeFold, OutcomeSnapshot};

/// Creates answered so far, and where the successful ones landed.
#[derive(Debug, Default)]
pub struct LiveCounts {
    /// Node id -> index in node order (the placements' population).
    index: HashMap<String, usize>,
    fold: Mutex<OutcomeFold>,
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
