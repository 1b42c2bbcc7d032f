//! How creates ended, and where the successful ones landed: the part of the fold the
//! live progress view reads while a run goes on, and
//! [`RunAggregate`](crate::aggregate::RunAggregate) reads at its end.

use std::collections::BTreeMap;

use super::ledger::Outcome;
use crate::report::SkewStats;

/// Outcome counts and landings per node, folded one answer at a time.
#[derive(Debug, Clone, Default)]
pub struct OutcomeFold {
    answered: u64,
    created: u64,
    limited: u64,
    cancelled: u64,
    /// Answers that were an HTTP status, by code (most answers: no allocation).
    codes: BTreeMap<u16, u64>,
    /// The other answers, by [`Outcome::key`].
    other: BTreeMap<String, u64>,
    /// Creates that landed per node, in node order.
    placed: Vec<u64>,
}

/// A copy of the counts of an [`OutcomeFold`] at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OutcomeSnapshot {
    /// Creates answered (any outcome).
    pub done: u64,
    /// Creates answered 201.
    pub created: u64,
    /// Creates that failed: neither a 201, nor a 429 (a limit), nor given up on a signal.
    pub errors: u64,
    /// Creates that landed per node, in node order.
    pub placed: Vec<u64>,
}

impl OutcomeFold {
    /// A fold over `nodes` nodes.
    pub fn new(nodes: usize) -> Self {
        OutcomeFold {
            placed: vec![0; nodes],
            ..OutcomeFold::default()
        }
    }

    /// The same counts over `nodes` nodes, before any landing.
    pub fn with_nodes(mut self, nodes: usize) -> Self {
        self.placed = vec![0; nodes];
        self
    }

    /// One create answered with `outcome`.
    pub fn answered(&mut self, outcome: &Outcome) {
        self.answered += 1;
        match outcome {
            Outcome::Status(code) => *self.codes.entry(*code).or_default() += 1,
            other => *self.other.entry(other.key()).or_default() += 1,
        }
        if outcome.is_created() {
            self.created += 1;
        } else if outcome.is_limited() {
            self.limited += 1;
        } else if matches!(outcome, Outcome::Cancelled) {
            self.cancelled += 1;
        }
    }

    /// A sandbox landed on node `node` (an index in node order; others are ignored).
    pub fn landed(&mut self, node: usize) {
        if let Some(c) = self.placed.get_mut(node) {
            *c += 1;
        }
    }

    /// Creates answered.
    pub fn requests(&self) -> u64 {
        self.answered
    }

    /// Creates answered 201.
    pub fn created(&self) -> u64 {
        self.created
    }

    /// Placement failures: answers that were neither a 201, nor a 429 (a limit), nor
    /// given up on a signal.
    pub fn failed(&self) -> u64 {
        self.answered - self.created - self.limited - self.cancelled
    }

    /// Creates that landed per node so far, in node order.
    pub fn placed(&self) -> &[u64] {
        &self.placed
    }

    /// Count of answers by [`Outcome::key`].
    pub fn statuses(&self) -> BTreeMap<String, u64> {
        let codes = self.codes.iter().map(|(c, n)| (c.to_string(), *n));
        let other = self.other.iter().map(|(k, n)| (k.clone(), *n));
        codes.chain(other).collect()
    }

    /// The counts now.
    pub fn snapshot(&self) -> OutcomeSnapshot {
        OutcomeSnapshot {
            done: self.answered,
            created: self.created,
            errors: self.failed(),
            placed: self.placed.clone(),
        }
    }
}

impl OutcomeSnapshot {
    /// CV of the placements so far (`None` before the first one).
    pub fn placements_cv(&self) -> Option<f64> {
        (self.placed.iter().sum::<u64>() > 0).then(|| SkewStats::from_counts(&self.placed).cv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{Limit, LimitKind};

    #[test]
    fn limits_and_cancels_are_not_placement_failures() {
        let mut f = OutcomeFold::new(2);
        for o in [
            Outcome::Status(201),
            Outcome::Status(503),
            Outcome::Timeout,
            Outcome::Cancelled,
            Outcome::Limited(Limit {
                kind: LimitKind::Rate,
                retry_after_ms: None,
            }),
        ] {
            f.answered(&o);
        }
        f.landed(1);
        f.landed(7);
        assert_eq!((f.requests(), f.created(), f.failed()), (5, 1, 2));
        let keys: Vec<String> = f.statuses().into_keys().collect();
        assert_eq!(
            keys,
            ["201", "429_rate_limit", "503", "cancelled", "timeout"]
        );
        let s = f.snapshot();
        assert_eq!((s.done, s.created, s.errors), (5, 1, 2));
        assert_eq!(s.placed, vec![0, 1]);
        assert!(s.placements_cv().is_some_and(|cv| cv > 0.9));
        assert_eq!(OutcomeFold::new(2).snapshot().placements_cv(), None);
    }
}
