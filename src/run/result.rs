//! Folding one run's ledger and collector samples into a [`RunResult`] (pure).

use std::collections::BTreeMap;

use crate::collect::{Sample, Truth};
use crate::report::{
    AccountingError, LatencySummary, NodeFigures, RunResult, SendTiming, SkewOverTime, SkewStats,
    TimelinePoint,
};
use crate::workload::Ledger;

/// Everything a finished run measured, before it becomes a [`RunResult`].
#[derive(Debug)]
pub struct RunMeasurements<'a> {
    /// Run label (e.g. the accounting mode).
    pub label: String,
    /// Settings that distinguish this run.
    pub settings: BTreeMap<String, String>,
    /// The client ledger.
    pub ledger: &'a Ledger,
    /// Final per-node truth.
    pub final_truth: &'a Truth,
    /// Final belief per replica (node id -> believed vCPU).
    pub final_believed: &'a [BTreeMap<String, f64>],
    /// Samples taken during the run.
    pub samples: &'a [Sample],
    /// Whether the workload was a burst (spread) or paced (lateness).
    pub burst: bool,
    /// Retries and ResourceExhausted refusals the service counted, if known.
    pub retries: u64,
    /// ResourceExhausted answers the service received from nodes.
    pub refusals: u64,
    /// Wall time of the run in ms.
    pub wall_ms: f64,
}

/// Builds the report entry of one run.
pub fn build_run_result(m: RunMeasurements<'_>) -> RunResult {
    let ids: Vec<String> = m.final_truth.nodes.iter().map(|n| n.id.clone()).collect();
    let counts: Vec<u64> = m.final_truth.nodes.iter().map(|n| n.sandboxes).collect();
    let believed_of = |id: &str| -> Option<f64> {
        let vals: Vec<f64> = m
            .final_believed
            .iter()
            .filter_map(|b| b.get(id).copied())
            .collect();
        (!vals.is_empty()).then(|| vals.iter().sum::<f64>() / vals.len() as f64)
    };
    let nodes = m
        .final_truth
        .nodes
        .iter()
        .map(|n| NodeFigures {
            id: n.id.clone(),
            sandboxes: n.sandboxes,
            allocated_vcpu: n.allocated_vcpu,
            believed_vcpu: believed_of(&n.id),
        })
        .collect();
    let landed = landings(m.ledger, &ids);
    let placed_by = |t_ms: f64| -> Vec<u64> {
        let mut placed = vec![0; ids.len()];
        for &(_, k) in landed.iter().take_while(|(at, _)| *at <= t_ms) {
            placed[k] += 1;
        }
        placed
    };
    let timeline: Vec<TimelinePoint> = m
        .samples
        .iter()
        .map(|s| TimelinePoint {
            t_ms: s.t_ms,
            sandboxes: ids
                .iter()
                .map(|id| {
                    s.truth
                        .nodes
                        .iter()
                        .find(|n| &n.id == id)
                        .map_or(0, |n| n.sandboxes)
                })
                .collect(),
            accounting_error_vcpu: s.accounting_error().map(|(mean, _)| mean),
            placed: placed_by(s.t_ms),
        })
        .collect();
    let placements = placed_by(f64::INFINITY);
    let pairs = m.samples.iter().flat_map(|s| {
        s.believed.iter().flat_map(move |b| {
            s.truth
                .nodes
                .iter()
                .filter_map(move |n| b.get(&n.id).map(|v| (*v, n.allocated_vcpu)))
        })
    });
    let requests = m.ledger.entries.len() as u64;
    let ok = m.ledger.created() as u64;
    // A 429 is a limit and a cancelled create was given up on a signal: neither is a
    // placement failure.
    let limited = m.ledger.count(|o| o.is_limited()) as u64;
    let cancelled = m
        .ledger
        .count(|o| matches!(o, crate::workload::Outcome::Cancelled)) as u64;
    let failed = requests - ok - limited - cancelled;
    let send = if m.burst {
        SendTiming {
            burst_spread_ms: m.ledger.send_spread_ms(),
            ..SendTiming::default()
        }
    } else {
        let late = m.ledger.lateness_ms();
        SendTiming {
            burst_spread_ms: None,
            lateness_p50_ms: late.map(|l| l.0),
            lateness_p99_ms: late.map(|l| l.1),
            lateness_max_ms: late.map(|l| l.2),
            ..SendTiming::default()
        }
    };
    RunResult {
        label: m.label,
        settings: m.settings,
        nodes,
        skew: SkewStats::from_counts(&counts),
        skew_over_time: SkewOverTime::from_timeline(&timeline, &placements),
        retry_storm: None,
        accounting_error: AccountingError::from_pairs(pairs),
        latency: LatencySummary::from_histogram(&m.ledger.latency_us),
        statuses: m.ledger.statuses(),
        requests,
        ok,
        failed,
        error_rate: if requests == 0 {
            0.0
        } else {
            failed as f64 / requests as f64
        },
        retries: m.retries,
        refusals: m.refusals,
        send,
        timeline,
        faults: Vec::new(),
        checker: None,
        wall_ms: m.wall_ms,
        staging: None,
    }
}

/// `(answered at ms, node index)` of every create that landed on a node of `ids`, in
/// time order: when each placement happened, as the client saw it.
fn landings(ledger: &Ledger, ids: &[String]) -> Vec<(f64, usize)> {
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
    landed
}
