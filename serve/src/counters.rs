//! The placement service's counters as typed values: what a run reads from its
//! replicas (in process through `TelemetryReader`, or as JSON from `stampede serve`'s
//! `GET /admin/counters`) instead of parsing the Prometheus text `/metrics` exposes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A snapshot of one placement instance's counters (or of several, added up with
/// [`add`](Self::add)). All counts are monotonic since the instance started, except
/// the storm bins, which count from the last storm origin (a run's workload gate).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceCounters {
    /// Create requests answered 201.
    pub creates_ok: u64,
    /// Create requests that failed after retries (500).
    pub creates_failed: u64,
    /// Create requests with no node to try (503).
    pub creates_unplaceable: u64,
    /// Create requests past their deadline (504).
    pub creates_timed_out: u64,
    /// Create RPCs refused with ResourceExhausted (each retried).
    pub refusals: u64,
    /// Create RPCs that failed otherwise (each excludes the node).
    pub attempt_failures: u64,
    /// Retries: every create RPC after the first of a request.
    pub retries: u64,
    /// ResourceExhausted refusals per whole second since the storm origin, per node id.
    pub refusals_per_second: Vec<BTreeMap<String, u64>>,
}

impl ServiceCounters {
    /// Adds `other`'s counts into these (the replicas of one run), second by second and
    /// node by node for the storm.
    pub fn add(&mut self, other: &ServiceCounters) {
        self.creates_ok += other.creates_ok;
        self.creates_failed += other.creates_failed;
        self.creates_unplaceable += other.creates_unplaceable;
        self.creates_timed_out += other.creates_timed_out;
        self.refusals += other.refusals;
        self.attempt_failures += other.attempt_failures;
        self.retries += other.retries;
        if self.refusals_per_second.len() < other.refusals_per_second.len() {
            self.refusals_per_second
                .resize_with(other.refusals_per_second.len(), BTreeMap::new);
        }
        for (acc, row) in self
            .refusals_per_second
            .iter_mut()
            .zip(&other.refusals_per_second)
        {
            for (node, c) in row {
                *acc.entry(node.clone()).or_default() += c;
            }
        }
    }

    /// The storm as one row per second, each with the count of every node of `nodes`
    /// in that order (a node not listed is left out).
    pub fn storm_rows(&self, nodes: &[String]) -> Vec<Vec<u64>> {
        self.refusals_per_second
            .iter()
            .map(|row| {
                nodes
                    .iter()
                    .map(|n| row.get(n).copied().unwrap_or(0))
                    .collect()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bins(rows: &[&[(&str, u64)]]) -> Vec<BTreeMap<String, u64>> {
        rows.iter()
            .map(|r| r.iter().map(|(n, c)| (n.to_string(), *c)).collect())
            .collect()
    }

    #[test]
    fn replicas_add_up_count_by_count_and_second_by_second() {
        let mut a = ServiceCounters {
            retries: 3,
            refusals: 2,
            refusals_per_second: bins(&[&[("a", 1)], &[("b", 1)]]),
            ..ServiceCounters::default()
        };
        let b = ServiceCounters {
            retries: 4,
            refusals: 5,
            refusals_per_second: bins(&[&[("a", 2)], &[], &[("a", 1), ("b", 2)]]),
            ..ServiceCounters::default()
        };
        a.add(&b);
        assert_eq!((a.retries, a.refusals), (7, 7));
        let nodes = vec!["a".to_string(), "b".to_string()];
        assert_eq!(
            a.storm_rows(&nodes),
            vec![vec![3, 0], vec![0, 1], vec![1, 2]]
        );
    }

    #[test]
    fn counters_travel_as_json() {
        let c = ServiceCounters {
            creates_ok: 9,
            refusals_per_second: bins(&[&[("n1", 4)]]),
            ..ServiceCounters::default()
        };
        let text = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<ServiceCounters>(&text).unwrap(), c);
    }
}
