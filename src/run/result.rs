//! A real run's records fed into the one [`RunAggregate`] a simulation feeds too: the
//! client ledger (every answer), the run's timeline (truth samples and the placements
//! binned between them), the final truth and beliefs, and the service's typed counters.

use std::collections::BTreeMap;

use crate::aggregate::{RunAggregate, RunShape, RunTimeline, ServiceCounters, SettledCreates};
use crate::collect::Truth;
use crate::workload::Ledger;

/// Everything a finished run measured.
#[derive(Debug)]
pub(super) struct RunRecords<'a> {
    /// The client ledger.
    pub ledger: &'a Ledger,
    /// Its settled creates, when it was bounded (its entries are then empty).
    pub settled: Option<SettledCreates>,
    /// The truth samples (the final read last) and placements of the run.
    pub timeline: &'a RunTimeline,
    /// How far the gate is behind the timeline's clock, ms.
    pub offset_ms: f64,
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

/// The sends and answers of every entry of `ledger`, folded over the nodes `ids`.
fn from_entries(ledger: &Ledger, ids: &[String], shape: RunShape) -> RunAggregate {
    let mut agg = RunAggregate::new(ids.to_vec(), shape);
    for e in &ledger.entries {
        agg.create(e);
    }
    agg
}

/// The run's aggregate, records fed in time order (a create that landed by a sample's
/// time counts in that sample's placements).
pub(super) fn aggregate(r: RunRecords<'_>) -> RunAggregate {
    let ids: Vec<String> = r.final_truth.nodes.iter().map(|n| n.id.clone()).collect();
    let mut agg = match r.settled {
        Some(settled) => settled.into_aggregate(ids.clone()),
        None => from_entries(r.ledger, &ids, r.shape),
    };
    r.timeline.feed(&mut agg, &ids, r.offset_ms);
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use super::*;
    use crate::collect::{NodeSample, Sample, SampleSink};
    use crate::workload::{LedgerEntry, Outcome, PlacementFeed};

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

    /// The workload's answers and the sampler's samples reach one timeline on one clock
    /// (the sampler's start; the gate opened 100 ms after it), in whatever order.
    #[test]
    fn a_landing_answered_by_a_samples_time_counts_in_it_and_unknown_nodes_do_not() {
        let start = Instant::now();
        let gate = start + Duration::from_millis(100);
        let timeline = Arc::new(Mutex::new(RunTimeline::new()));
        let feed = PlacementFeed {
            timeline: timeline.clone(),
            origin: start,
        };
        let mut sink = SampleSink::new(timeline.clone(), None, None);
        let mut ledger = Ledger::new();
        let truth = |a, b| Truth {
            nodes: vec![node("a", a, a as f64), node("b", b, b as f64)],
        };
        let believed: Vec<BTreeMap<String, f64>> =
            vec![[("a".to_string(), 1.5), ("b".to_string(), 1.0)].into()];
        let sample = |t_ms, truth| Sample {
            t_ms,
            truth,
            believed: believed.clone(),
            allocated_after: BTreeMap::new(),
            calls: Vec::new(),
        };
        for e in [created(0, 10.0, "b"), created(2, 5.0, "gone")] {
            feed.answered(gate, &e);
            ledger.record(e);
        }
        sink.take(sample(110.0, truth(0, 1)));
        // Answered before the first sample, reported after it.
        let late = created(1, 20.0, "a");
        let last = sink.take_final(sample(130.0, truth(1, 1)));
        feed.answered(gate, &late);
        ledger.record(late);
        let counters = ServiceCounters {
            retries: 2,
            ..ServiceCounters::default()
        };
        let timeline = timeline.lock().expect("timeline");
        let r = aggregate(RunRecords {
            settled: None,
            ledger: &ledger,
            timeline: &timeline,
            offset_ms: 100.0,
            final_truth: &last.truth,
            final_believed: &believed,
            shape: RunShape::Paced,
            counters: &counters,
        })
        .finish("run".into(), crate::profile::RunSettings::default(), 0.0);
        assert_eq!(r.timeline[0].t_ms, 10.0);
        assert_eq!(r.timeline[0].placed, vec![0, 1]);
        assert_eq!(r.timeline[1].placed, vec![1, 1]);
        assert_eq!(r.timeline[0].sandboxes, vec![0, 1]);
        assert_eq!(r.timeline[0].accounting_error_vcpu, Some(0.75));
        assert_eq!((r.requests, r.ok, r.retries), (3, 3, 2));
        assert_eq!(r.nodes[0].believed_vcpu, Some(1.5));
        assert_eq!(r.send.lateness_max_ms, Some(0.5));
    }
}
