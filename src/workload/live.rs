//! What a workload has done so far, readable while it runs (the live progress line).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use super::ledger::Outcome;
use crate::report::SkewStats;

/// Creates answered so far, and where the successful ones landed.
#[derive(Debug, Default)]
pub struct LiveCounts {
    done: AtomicU64,
    created: AtomicU64,
    errors: AtomicU64,
    /// Creates that landed per node id (when the answer named the node).
    placed: Mutex<HashMap<String, u64>>,
}

/// A copy of [`LiveCounts`] at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LiveSnapshot {
    /// Creates answered (any outcome).
    pub done: u64,
    /// Creates answered 201.
    pub created: u64,
    /// Creates that failed: neither a 201, nor a 429 (a limit), nor given up on a signal.
    pub errors: u64,
    /// Creates that landed per node, for the nodes `snapshot` was given, in that order.
    pub placed: Vec<u64>,
}

impl LiveCounts {
    /// One create answered with `outcome`, on `node` when the answer said.
    pub fn record(&self, outcome: &Outcome, node: Option<&str>) {
        self.done.fetch_add(1, Relaxed);
        if outcome.is_created() {
            self.created.fetch_add(1, Relaxed);
            if let Some(n) = node {
                let mut placed = self.placed.lock().unwrap_or_else(|e| e.into_inner());
                *placed.entry(n.to_string()).or_default() += 1;
            }
        } else if !outcome.is_limited() && !matches!(outcome, Outcome::Cancelled) {
            self.errors.fetch_add(1, Relaxed);
        }
    }

    /// The counts now; placements in the order of `nodes`.
    pub fn snapshot(&self, nodes: &[String]) -> LiveSnapshot {
        let placed = self.placed.lock().unwrap_or_else(|e| e.into_inner());
        LiveSnapshot {
            done: self.done.load(Relaxed),
            created: self.created.load(Relaxed),
            errors: self.errors.load(Relaxed),
            placed: nodes
                .iter()
                .map(|n| placed.get(n).copied().unwrap_or(0))
                .collect(),
        }
    }
}

impl LiveSnapshot {
    /// CV of the placements so far (`None` before the first one).
    pub fn placements_cv(&self) -> Option<f64> {
        (self.placed.iter().sum::<u64>() > 0).then(|| SkewStats::from_counts(&self.placed).cv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_are_counted_and_placements_follow_node_order() {
        let live = LiveCounts::default();
        live.record(&Outcome::Status(201), Some("b"));
        live.record(&Outcome::Status(201), Some("b"));
        live.record(&Outcome::Status(500), None);
        let nodes = vec!["a".to_string(), "b".to_string()];
        let s = live.snapshot(&nodes);
        assert_eq!((s.done, s.created, s.errors), (3, 2, 1));
        assert_eq!(s.placed, vec![0, 2]);
        assert!(s.placements_cv().is_some_and(|cv| cv > 0.9));
        assert_eq!(LiveCounts::default().snapshot(&nodes).placements_cv(), None);
    }
}
