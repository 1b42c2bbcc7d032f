//! Fault windows: what the workload and the nodes went through while each fault held.
//!
//! Pure: computed after the run from the applied faults, the ledger and the truth
//! samples, all on one clock (ms after the workload's start gate; the sampler must be
//! started with the gate as its `start`).
//!
//! Placements to the faulty nodes come from the ledger's `node` when the service names
//! the node (`X-Stampede-Node`), otherwise from the truth samples: the ids that appear
//! on a faulty node between two consecutive samples (or its count's growth when the
//! source lists no ids). Sample-based figures have the sampling interval's resolution:
//! only intervals that lie entirely inside the window count as placements during it.

use std::collections::BTreeSet;

use crate::collect::{NodeCalls, NodeSample, Sample};
use crate::report::FaultWindow;
use crate::workload::{Ledger, LedgerEntry, Outcome};

use super::edge_calls::EdgeCalls;
use super::schedule::AppliedFault;

/// One window per applied fault, in the order given; faults never applied are skipped.
///
/// - `attempted` / `ok` / `failed`: creates in flight at some point of `[applied,
///   healed]` (sent before its end, answered after its start; an unhealed fault's window
///   runs to the last observation) and their outcome.
/// - With the services' counters read at the fault's edges ([`AppliedFault::
///   calls_in_force`]), `placements_to_faulty` / `failed_on_faulty` are the create RPCs
///   answered between the two reads, exactly; otherwise they come from the sampler.
/// - `placements_to_faulty`: sandboxes placed on the fault's nodes during the window.
/// - `time_to_avoid_ms`: from the fault until the last sign that the service still chose
///   a faulty node (a placement on it, or a create that failed, during the window); 0
///   when there was none; none when placements went on until the window's last sampled
///   interval (the service never stopped) or the window has no samples and no ledger
///   node names.
/// - `timed_out` (and its latency range): creates of the window answered 504.
/// - `time_to_reuse_ms`: from the heal until a healed node first received a sandbox;
///   none when it never did (or the fault never healed). For `restart`, from the restart.
pub fn fault_windows(
    applied: &[AppliedFault],
    ledger: &Ledger,
    samples: &[Sample],
) -> Vec<FaultWindow> {
    let by_ledger = ledger.entries.iter().any(|e| e.node.is_some());
    let last_seen = ledger
        .entries
        .iter()
        .map(done_ms)
        .chain(samples.iter().map(|s| s.t_ms))
        .fold(0.0, f64::max);
    applied
        .iter()
        .filter(|a| a.was_applied())
        .map(|a| {
            let start = a.applied_at_ms;
            // Placements seen on the faulty nodes count from when the fault surely held:
            // a create that landed while the `POST` was on its way is not the fault's.
            let held = a.in_force_at_ms.unwrap_or(start);
            let end = a.healed_at_ms.unwrap_or(last_seen.max(start));
            let faulty: BTreeSet<&str> = a.planned.nodes.iter().map(String::as_str).collect();
            // In flight at some point of the window: a create sent just before the fault
            // and answered after it went through the fault too.
            let sent: Vec<&LedgerEntry> = ledger
                .entries
                .iter()
                .filter(|e| e.sent_ms <= end && done_ms(e) >= start)
                .collect();
            let ok = sent.iter().filter(|e| e.outcome.is_created()).count() as u64;
            // When the service last sent a create that then failed (its choice, not the
            // answer, which a hung node delays to the request deadline).
            let last_failure = sent
                .iter()
                .filter(|e| !e.outcome.is_created())
                .map(|e| e.sent_ms.max(start))
                .fold(None, |m, t| max_opt(m, Some(t)));
            let edges = a.calls_in_force.zip(a.calls_before_heal);
            let service = service_calls(samples, &faulty, start, end, a.healed_at_ms, edges);
            let (placements, avoid, reuse) = match &service {
                Some(c) => (c.attempts, c.avoid, c.reuse),
                None if by_ledger => ledger_placements(ledger, &faulty, held, end, a.healed_at_ms),
                None => sampled_placements(samples, &faulty, held, end, a.healed_at_ms),
            };
            let time_to_avoid_ms = match avoid {
                Avoid::Never => None,
                Avoid::Unknown => last_failure.map(|t| (t - start).max(0.0)),
                Avoid::LastAt(t) => {
                    Some((max_opt(t, last_failure).unwrap_or(start) - start).max(0.0))
                }
            };
            let mut window = FaultWindow {
                id: a.id.clone(),
                kind: a.planned.name().to_string(),
                nodes: a.planned.nodes.clone(),
                applied_at_ms: start,
                healed_at_ms: a.healed_at_ms,
                attempted: sent.len() as u64,
                ok,
                failed: sent.len() as u64 - ok,
                placements_to_faulty: placements,
                failed_on_faulty: service.as_ref().map(|c| c.failed),
                in_flight_at_fault: edges.map(|(at, _)| at.starting),
                time_to_avoid_ms,
                time_to_reuse_ms: reuse,
                ..FaultWindow::default()
            };
            for e in sent.iter().filter(|e| e.outcome == Outcome::Status(504)) {
                window.note_timed_out(e.latency_us as f64 / 1000.0);
            }
            window
        })
        .collect()
}

/// When the service last chose a faulty node during the window.
#[derive(Clone, Copy)]
enum Avoid {
    /// At this time (or `start` when never): it stopped after.
    LastAt(Option<f64>),
    /// Still choosing at the window's last observation.
    Never,
    /// Nothing observed during the window.
    Unknown,
}

fn max_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// When the client got its answer, ms after the gate.
fn done_ms(e: &LedgerEntry) -> f64 {
    e.intended_ms + e.latency_us as f64 / 1000.0
}

fn ledger_placements(
    ledger: &Ledger,
    faulty: &BTreeSet<&str>,
    start: f64,
    end: f64,
    healed: Option<f64>,
) -> (u64, Avoid, Option<f64>) {
    let on_faulty = |e: &&LedgerEntry| {
        e.outcome.is_created() && e.node.as_deref().is_some_and(|n| faulty.contains(n))
    };
    let during: Vec<&LedgerEntry> = ledger
        .entries
        .iter()
        .filter(|e| e.sent_ms >= start && e.sent_ms <= end)
        .filter(on_faulty)
        .collect();
    let last = during
        .iter()
        .map(|e| done_ms(e))
        .fold(None, |m, t| max_opt(m, Some(t)));
    let reuse = healed.and_then(|h| {
        ledger
            .entries
            .iter()
            .filter(|e| e.sent_ms >= h)
            .filter(on_faulty)
            .map(|e| done_ms(e) - h)
            .fold(None, |m: Option<f64>, t| Some(m.map_or(t, |m| m.min(t))))
    });
    (
        during.len() as u64,
        Avoid::LastAt(last),
        reuse.map(|t| t.max(0.0)),
    )
}

fn node<'a>(s: &'a Sample, id: &str) -> Option<&'a NodeSample> {
    s.truth.nodes.iter().find(|n| n.id == id)
}

/// Sandboxes that appeared on `id` between two samples.
fn growth(prev: &Sample, cur: &Sample, id: &str) -> u64 {
    let (Some(p), Some(c)) = (node(prev, id), node(cur, id)) else {
        return 0;
    };
    match (&p.ids, &c.ids) {
        (Some(pi), Some(ci)) => {
            let before: BTreeSet<&String> = pi.iter().collect();
            ci.iter().filter(|i| !before.contains(i)).count() as u64
        }
        _ => c.sandboxes.saturating_sub(p.sandboxes),
    }
}

fn sampled_placements(
    samples: &[Sample],
    faulty: &BTreeSet<&str>,
    start: f64,
    end: f64,
    healed: Option<f64>,
) -> (u64, Avoid, Option<f64>) {
    let grew = |w: &[Sample]| {
        faulty
            .iter()
            .map(|id| growth(&w[0], &w[1], id))
            .sum::<u64>()
    };
    let inside: Vec<(f64, u64)> = samples
        .windows(2)
        .filter(|w| w[0].t_ms >= start && w[1].t_ms <= end)
        .map(|w| (w[1].t_ms, grew(w)))
        .collect();
    let placements = inside.iter().map(|(_, g)| g).sum();
    let avoid = match inside.last() {
        None => Avoid::Unknown,
        Some((_, g)) if *g > 0 => Avoid::Never,
        Some(_) => Avoid::LastAt(inside.iter().rev().find(|(_, g)| *g > 0).map(|(t, _)| *t)),
    };
    let reuse = healed.and_then(|h| {
        samples
            .windows(2)
            .filter(|w| w[1].t_ms > h)
            .find(|w| grew(w) > 0)
            .map(|w| (w[1].t_ms - h).max(0.0))
    });
    (placements, avoid, reuse)
}

/// What the placement service's own per-node create counters say about one window.
struct ServiceCalls {
    attempts: u64,
    failed: u64,
    avoid: Avoid,
    reuse: Option<f64>,
}

/// Create RPCs every replica had sent to the faulty nodes by sample `s`.
fn calls_at(s: &Sample, faulty: &BTreeSet<&str>) -> NodeCalls {
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

/// Window figures from the services' `createSuccesses`/`createFails` per node (sampled,
/// so times have the sampling interval's resolution); `None` when no sample has them.
fn service_calls(
    samples: &[Sample],
    faulty: &BTreeSet<&str>,
    start: f64,
    end: f64,
    healed: Option<f64>,
    edges: Option<(EdgeCalls, EdgeCalls)>,
) -> Option<ServiceCalls> {
    if samples.iter().all(|s| s.calls.is_empty()) && edges.is_none() {
        return None;
    }
    let with: Vec<(f64, NodeCalls)> = samples
        .iter()
        .filter(|s| !s.calls.is_empty())
        .map(|s| (s.t_ms, calls_at(s, faulty)))
        .collect();
    let at_or_before = |t: f64| {
        with.iter()
            .rev()
            .find(|(ts, _)| *ts <= t)
            .or_else(|| with.first())
            .map(|(_, c)| *c)
            .unwrap_or_default()
    };
    let (attempts, failed) = match edges {
        Some((at, before_heal)) => (
            before_heal.answered().saturating_sub(at.answered()),
            before_heal.failed.saturating_sub(at.failed),
        ),
        None => {
            let (c0, c1) = (at_or_before(start), at_or_before(end));
            (
                (c1.ok + c1.failed).saturating_sub(c0.ok + c0.failed),
                c1.failed.saturating_sub(c0.failed),
            )
        }
    };
    // The last sampled interval inside the window in which the faulty nodes got calls.
    let mut last = None;
    let mut still_at_end = false;
    for pair in with.windows(2) {
        let ((_, a), (tb, b)) = (pair[0], pair[1]);
        if tb <= start || tb > end {
            continue;
        }
        // Sent, not answered: a create a hung node holds is a choice made when sent.
        let grew = b.sent() > a.sent();
        if grew {
            last = Some(tb);
        }
        still_at_end = grew;
    }
    let avoid = if still_at_end && healed.is_none() {
        Avoid::Never
    } else {
        Avoid::LastAt(last)
    };
    let reuse = healed.and_then(|h| {
        with.windows(2)
            .find(|p| p[1].0 > h && p[1].1.ok > p[0].1.ok)
            .map(|p| (p[1].0 - h).max(0.0))
    });
    Some(ServiceCalls {
        attempts,
        failed,
        avoid,
        reuse,
    })
}
