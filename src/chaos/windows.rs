//! The real run's feed into the fault windows ([`crate::aggregate::fault_windows`]).
//!
//! Pure: after the run, it turns the applied faults, the ledger and the truth samples
//! (all on one clock, ms after the workload's start gate; the sampler must be started
//! with the gate as its `start`) into the window records.

use std::collections::BTreeSet;

use crate::aggregate::{self, CallSample, FaultRecord, Growth, RequestRecord};
use crate::collect::{NodeCalls, Sample, SampleHistory, WindowSample};
use crate::report::FaultWindow;
use crate::workload::Ledger;

use super::edge_calls::EdgeCalls;
use super::schedule::AppliedFault;

/// One window per applied fault, in the order given; faults never applied are skipped.
/// What each figure means is [`aggregate::fault_windows`]'s.
pub fn fault_windows_from_run(
    applied: &[AppliedFault],
    ledger: &Ledger,
    samples: &[Sample],
) -> Vec<FaultWindow> {
    fault_windows_of(applied, ledger, SampleHistory::of(samples).windows())
}

/// [`fault_windows_from_run`] from the samples' per-sample record
/// ([`SampleHistory::with_windows`]), as a run keeps it.
pub fn fault_windows_of(
    applied: &[AppliedFault],
    ledger: &Ledger,
    samples: &[WindowSample],
) -> Vec<FaultWindow> {
    let requests: Vec<RequestRecord<'_>> = ledger.requests();
    let last_seen = requests
        .iter()
        .map(|r| r.done_ms)
        .chain(samples.iter().map(|s| s.t_ms))
        .fold(0.0, f64::max);
    let faults: Vec<FaultRecord> = applied
        .iter()
        .filter(|a| a.was_applied())
        .map(|a| record(a, samples))
        .collect();
    aggregate::fault_windows(&faults, &requests, last_seen)
}

fn record(a: &AppliedFault, samples: &[WindowSample]) -> FaultRecord {
    let faulty: BTreeSet<&str> = a.planned.nodes.iter().map(String::as_str).collect();
    let edges = a.calls_in_force.zip(a.calls_before_heal);
    FaultRecord {
        id: a.id.clone(),
        kind: a.planned.name().to_string(),
        nodes: a.planned.nodes.clone(),
        applied_at_ms: a.applied_at_ms,
        in_force_at_ms: a.in_force_at_ms,
        healed_at_ms: a.healed_at_ms,
        edges: edges.map(|(at, before)| (node_calls(at), node_calls(before))),
        calls: samples
            .iter()
            .filter(|s| !s.calls.is_empty())
            .map(|s| CallSample {
                t_ms: s.t_ms,
                calls: calls_at(s, &faulty),
            })
            .collect(),
        growth: samples
            .windows(2)
            .map(|w| Growth {
                from_ms: w[0].t_ms,
                to_ms: w[1].t_ms,
                landed: faulty.iter().filter_map(|id| w[1].landed.get(*id)).sum(),
            })
            .collect(),
    }
}

fn node_calls(e: EdgeCalls) -> NodeCalls {
    NodeCalls {
        ok: e.ok,
        failed: e.failed,
        starting: e.starting,
    }
}

/// Create RPCs every replica had sent to the faulty nodes by sample `s`.
fn calls_at(s: &WindowSample, faulty: &BTreeSet<&str>) -> NodeCalls {
    let mut total = NodeCalls::default();
    for replica in &s.calls {
        for (node, c) in replica {
            if faulty.contains(node.as_str()) {
                total.ok += c.ok;
                total.failed += c.failed;
                total.starting += c.starting;
            }
        }
    }
    total
}
