//! A real run's records fed into the one [`RunAggregate`] a simulation feeds too: the
//! client ledger (every answer, and the node when the service named it), the truth
//! samples, the final truth and beliefs, and the service's typed counters.

use std::collections::BTreeMap;

use crate::aggregate::{RunAggregate, RunShape, ServiceCounters, SettledCreates};
use crate::collect::{Sample, Truth};
use crate::workload::Ledger;

/// Everything a finished run measured.
#[derive(Debug)]
pub(super) struct RunRecords<'a> {
    /// The client ledger.
    pub ledger: &'a Ledger,
    /// Its settled creates, when it was bounded (its entries are then empty).
    pub settled: Option<SettledCreates>,
    /// Samples taken during the run (the final read last), timed from the gate.
    pub samples: &'a [Sample],
    /// Final per-node truth: its nodes are the result's, in its order.
    pub final_truth: &'a Truth,
    /// Final belief per replica (node id -> believed vCPU).
    pub final_believed: &'a [BTreeMap<String, f64>],
    /// How the workload sent.
    pub shape: RunShape,
    /// The placement replicas' counters at the end, added up (none against an external
    /// API).
    pub counters: &'a ServiceCounters,
}

/// The sends and answers of every entry of `ledger`, folded over the nodes `ids`, and
/// every landing on one of them, answered at ms, in time order.
fn from_entries(
    ledger: &Ledger,
    ids: &[String],
    shape: RunShape,
) -> (RunAggregate, Vec<(f64, usize)>) {
    let index: BTreeMap<&str, usize> = ids
        .iter()
        .enumerate()
        .map(|(k, id)| (id.as_str(), k))
        .collect();
    let mut landed: Vec<(f64, usize)> = ledger
        .entries
        .iter()
        .filter(|e| e.outcome.is_created())
        .filter_map(|e| {
            let k = *index.get(e.node.as_deref()?)?;
            Some((e.intended_ms + e.latency_us as f64 / 1000.0, k))
        })
        .collect();
    landed.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut agg = RunAggregate::new(ids.to_vec(), shape);
    for e in &ledger.entries {
        let late_us = ((e.sent_ms - e.intended_ms).max(0.0) * 1000.0).round() as u64;
        agg.sent(e.sent_ms, late_us);
        agg.answered(&e.outcome, e.intended_ms, e.latency_us);
    }
    (agg, landed)
}

/// The run's aggregate, records fed in time order (a create that landed by a sample's
/// time counts in that sample's placements).
pub(super) fn aggregate(r: RunRecords<'_>) -> RunAggregate {
    let ids: Vec<String> = r.final_truth.nodes.iter().map(|n| n.id.clone()).collect();
    // When each placement happened, as the client saw it: (answered at ms, node).
    let (mut agg, landed) = match r.settled {
        Some(settled) => settled.into_aggregate(ids.clone()),
        None => from_entries(r.ledger, &ids, r.shape),
    };
    let mut landings = landed.into_iter().peekable();
    for s in r.samples {
        while let Some((_, k)) = landings.next_if(|(at, _)| *at <= s.t_ms) {
            agg.landed(k);
        }
        let sandboxes = ids
            .iter()
            .map(|id| {
                s.truth
                    .nodes
                    .iter()
                    .find(|n| &n.id == id)
                    .map_or(0, |n| n.sandboxes)
            })
            .collect();
        agg.sample(s.t_ms, sandboxes, s.accounting_errors());
    }
    for (_, k) in landings {
        agg.landed(k);
    }
    for n in &r.final_truth.nodes {
        let believed = r
            .final_believed
            .iter()
            .filter_map(|b| b.get(&n.id).copied());
        agg.final_node(&n.id, n.sandboxes, n.allocated_vcpu, believed);
    }
    agg.service(r.counters);
    agg
}

/// Feeds the refusals the nodes counted (the samples' `refused`, this run's share)
/// into `agg`: per node, the growth between samples binned at the later sample's
/// second, and the final sample's sum as the run's total. Nothing when the final
/// sample lacks a node's count (the source does not count refusals).
pub(super) fn node_refusals(agg: &mut RunAggregate, samples: &[Sample]) {
    let Some(last) = samples.last() else {
        return;
    };
    let Some(total) = last
        .truth
        .nodes
        .iter()
        .map(|n| n.refused)
        .sum::<Option<u64>>()
    else {
        return;
    };
    let ids: Vec<&str> = last.truth.nodes.iter().map(|n| n.id.as_str()).collect();
    let mut seen = vec![0u64; ids.len()];
    for s in samples {
        let second = (s.t_ms.max(0.0) / 1000.0) as usize;
        for n in &s.truth.nodes {
            let (Some(k), Some(r)) = (ids.iter().position(|id| *id == n.id), n.refused) else {
                continue;
            };
            if r > seen[k] {
                agg.refused(k, second, r - seen[k]);
                seen[k] = r;
            }
        }
    }
    agg.node_refusals(total);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::NodeSample;
    use crate::workload::{LedgerEntry, Outcome};

    fn node(id: &str, sandboxes: u64, vcpu: f64) -> NodeSample {
        NodeSample {
            id: id.to_string(),
            sandboxes,
            allocated_vcpu: vcpu,
            ids: None,
            status: "ready".to_string(),
            service_id: None,
            refused: None,
        }
    }

    fn created(index: usize, answered_ms: f64, on: &str) -> LedgerEntry {
        LedgerEntry {
            index,
            target: 0,
            intended_ms: 0.0,
            sent_ms: 0.5,
            latency_us: (answered_ms * 1000.0) as u64,
            outcome: Outcome::Status(201),
            sandbox_id: Some(format!("s{index}")),
            node: Some(on.to_string()),
            deleted: None,
        }
    }

    #[test]
    fn a_landing_answered_by_a_samples_time_counts_in_it_and_unknown_nodes_do_not() {
        let mut ledger = Ledger::new();
        ledger.record(created(0, 10.0, "b"));
        ledger.record(created(1, 20.0, "a"));
        ledger.record(created(2, 5.0, "gone"));
        let truth = |a, b| Truth {
            nodes: vec![node("a", a, a as f64), node("b", b, b as f64)],
        };
        let believed: Vec<BTreeMap<String, f64>> =
            vec![[("a".to_string(), 1.5), ("b".to_string(), 1.0)].into()];
        let samples = vec![
            Sample {
                t_ms: 10.0,
                truth: truth(0, 1),
                believed: believed.clone(),
                allocated_after: BTreeMap::new(),
                calls: Vec::new(),
            },
            Sample {
                t_ms: 30.0,
                truth: truth(1, 1),
                believed: believed.clone(),
                allocated_after: BTreeMap::new(),
                calls: Vec::new(),
            },
        ];
        let counters = ServiceCounters {
            retries: 2,
            ..ServiceCounters::default()
        };
        let r = aggregate(RunRecords {
            settled: None,
            ledger: &ledger,
            samples: &samples,
            final_truth: &samples[1].truth,
            final_believed: &believed,
            shape: RunShape::Paced,
            counters: &counters,
        })
        .finish("run".into(), crate::profile::RunSettings::default(), 0.0);
        assert_eq!(r.timeline[0].placed, vec![0, 1]);
        assert_eq!(r.timeline[1].placed, vec![1, 1]);
        assert_eq!(r.timeline[0].sandboxes, vec![0, 1]);
        assert_eq!(r.timeline[0].accounting_error_vcpu, Some(0.75));
        assert_eq!((r.requests, r.ok, r.retries), (3, 3, 2));
        assert_eq!(r.nodes[0].believed_vcpu, Some(1.5));
        assert_eq!(r.send.lateness_max_ms, Some(0.5));
    }
}
