//! Fault windows: what the workload and the faulty nodes went through while each fault
//! held. The one definition of every window figure, for real runs and simulations.
//!
//! Pure: it takes typed records on one clock (ms after the workload's start gate) and
//! never reads the network or a clock. A real run feeds it from its applied faults, its
//! ledger and its samples (`chaos::fault_windows`); the simulator feeds it the same
//! records, read from its own placement cores and requests (`sim::measure`).
//!
//! Placements to the faulty nodes come from the first source that has them:
//! 1. the placement services' per-node create counters (E2B's `createSuccesses`,
//!    `createFails` and `sandboxStartingCount`), read at the fault's edges and sampled;
//! 2. else the ledger's node, when the service names the node of each create;
//! 3. else the truth samples: sandboxes that appeared on a faulty node between two
//!    consecutive samples. Only intervals entirely inside the window count.

use crate::collect::NodeCalls;
use crate::report::FaultWindow;

/// One fault that was in force at some point, with what was read on its nodes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultRecord {
    /// Fault id (the admin API's, or the step index).
    pub id: String,
    /// Fault kind as reports name it.
    pub kind: String,
    /// The fault's nodes.
    pub nodes: Vec<String>,
    /// When the fault may have started to hold.
    pub applied_at_ms: f64,
    /// When it surely held; none: from `applied_at_ms`.
    pub in_force_at_ms: Option<f64>,
    /// When it was surely over; none: it never healed (the window runs to the last
    /// observation).
    pub healed_at_ms: Option<f64>,
    /// The services' counters on the fault's nodes, summed over services and nodes,
    /// read once it held and just before its heal; none when either read is missing.
    pub edges: Option<(NodeCalls, NodeCalls)>,
    /// The same counters sampled over the run, in time order; empty when not read.
    pub calls: Vec<CallSample>,
    /// Consecutive truth samples: sandboxes that appeared on the fault's nodes.
    pub growth: Vec<Growth>,
}

/// The services' counters on one fault's nodes at one sample.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CallSample {
    /// When the sample was read.
    pub t_ms: f64,
    /// Summed over services and the fault's nodes.
    pub calls: NodeCalls,
}

/// Sandboxes that appeared on one fault's nodes between two consecutive truth samples.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Growth {
    /// The earlier sample's time.
    pub from_ms: f64,
    /// The later sample's time.
    pub to_ms: f64,
    /// New sandboxes on the fault's nodes.
    pub landed: u64,
}

/// One create request as the client saw it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RequestRecord<'a> {
    /// When it was sent.
    pub sent_ms: f64,
    /// When it was answered.
    pub done_ms: f64,
    /// Its latency from the intended send, ms.
    pub latency_ms: f64,
    /// Answered 201.
    pub created: bool,
    /// Answered 504.
    pub timed_out: bool,
    /// The node the service named for it, if it did.
    pub node: Option<&'a str>,
}

/// One window per fault record, in the order given. `last_seen_ms`: the run's last
/// observation, where the window of a fault that never healed ends.
///
/// - `attempted` / `ok` / `failed`: creates in flight at some point of `[applied,
///   end]` (sent before its end, answered after its start) and their outcome.
/// - `placements_to_faulty`: with counters at both edges, the create RPCs to the
///   fault's nodes answered between the two reads; with sampled counters only, those
///   answered between the samples at or before the window's start and end; else creates
///   the ledger names on a faulty node, sent while the fault surely held; else
///   sandboxes that appeared on those nodes in sampled intervals inside the window.
/// - `failed_on_faulty`: of those RPCs, the failed ones; known only from counters.
/// - `in_flight_at_fault`: creates on their way to the fault's nodes at the first edge.
/// - `time_to_avoid_ms`: from the fault until the last sign that the service still
///   chose a faulty node: the last sampled interval in which creates were sent to one
///   (or, from the ledger, the last create answered there; from truth, the last interval
///   a sandbox appeared there), or a create of the window that failed, sent then. 0 when
///   there was none; none when the service was still choosing at the window's end (an
///   unhealed fault) or nothing was observed.
/// - `time_to_reuse_ms`: from the heal until a healed node first received a sandbox
///   (the first sampled interval with a successful create there, else the ledger, else
///   the truth); none when it never did or the fault never healed.
/// - `timed_out` and its latency range: creates of the window answered 504.
pub fn fault_windows(
    faults: &[FaultRecord],
    requests: &[RequestRecord<'_>],
    last_seen_ms: f64,
) -> Vec<FaultWindow> {
    let by_ledger = requests.iter().any(|r| r.node.is_some());
    faults
        .iter()
        .map(|f| window(f, requests, by_ledger, last_seen_ms))
        .collect()
}

fn window(
    f: &FaultRecord,
    requests: &[RequestRecord<'_>],
    by_ledger: bool,
    last_seen_ms: f64,
) -> FaultWindow {
    let start = f.applied_at_ms;
    // Placements seen on the faulty nodes count from when the fault surely held: a
    // create that landed while the fault was on its way is not the fault's.
    let held = f.in_force_at_ms.unwrap_or(start);
    let end = f.healed_at_ms.unwrap_or(last_seen_ms.max(start));
    // In flight at some point of the window: a create sent just before the fault and
    // answered after it went through the fault too.
    let during: Vec<&RequestRecord<'_>> = requests
        .iter()
        .filter(|r| r.sent_ms <= end && r.done_ms >= start)
        .collect();
    let ok = during.iter().filter(|r| r.created).count() as u64;
    // When the service last sent a create that then failed (its choice, not the answer,
    // which a hung node delays to the request deadline).
    let last_failure = during
        .iter()
        .filter(|r| !r.created)
        .map(|r| r.sent_ms.max(start))
        .fold(None, |m, t| max_opt(m, Some(t)));
    let service = service_calls(f, start, end);
    let (placements, avoid, reuse) = match &service {
        Some(c) => (c.attempts, c.avoid, c.reuse),
        None if by_ledger => ledger_placements(requests, &f.nodes, held, end, f.healed_at_ms),
        None => sampled_placements(&f.growth, held, end, f.healed_at_ms),
    };
    let time_to_avoid_ms = match avoid {
        Avoid::Never => None,
        Avoid::Unknown => last_failure.map(|t| (t - start).max(0.0)),
        Avoid::LastAt(t) => Some((max_opt(t, last_failure).unwrap_or(start) - start).max(0.0)),
    };
    let mut w = FaultWindow {
        id: f.id.clone(),
        kind: f.kind.clone(),
        nodes: f.nodes.clone(),
        applied_at_ms: start,
        healed_at_ms: f.healed_at_ms,
        attempted: during.len() as u64,
        ok,
        failed: during.len() as u64 - ok,
        placements_to_faulty: placements,
        failed_on_faulty: service.as_ref().map(|c| c.failed),
        in_flight_at_fault: f.edges.map(|(at, _)| at.starting),
        time_to_avoid_ms,
        time_to_reuse_ms: reuse,
        ..FaultWindow::default()
    };
    for r in during.iter().filter(|r| r.timed_out) {
        w.note_timed_out(r.latency_ms);
    }
    w
}

/// When the service last chose a faulty node during the window.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Avoid {
    /// At this time (or never): it stopped after.
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

fn min_opt(a: Option<f64>, t: f64) -> Option<f64> {
    Some(a.map_or(t, |m| m.min(t)))
}

fn ledger_placements(
    requests: &[RequestRecord<'_>],
    faulty: &[String],
    start: f64,
    end: f64,
    healed: Option<f64>,
) -> (u64, Avoid, Option<f64>) {
    let on_faulty =
        |r: &&RequestRecord<'_>| r.created && r.node.is_some_and(|n| faulty.iter().any(|f| f == n));
    let during: Vec<&RequestRecord<'_>> = requests
        .iter()
        .filter(|r| r.sent_ms >= start && r.sent_ms <= end)
        .filter(on_faulty)
        .collect();
    let last = during
        .iter()
        .map(|r| r.done_ms)
        .fold(None, |m, t| max_opt(m, Some(t)));
    let reuse = healed.and_then(|h| {
        requests
            .iter()
            .filter(|r| r.sent_ms >= h)
            .filter(on_faulty)
            .map(|r| r.done_ms - h)
            .fold(None, min_opt)
    });
    (
        during.len() as u64,
        Avoid::LastAt(last),
        reuse.map(|t| t.max(0.0)),
    )
}

fn sampled_placements(
    growth: &[Growth],
    start: f64,
    end: f64,
    healed: Option<f64>,
) -> (u64, Avoid, Option<f64>) {
    let inside: Vec<&Growth> = growth
        .iter()
        .filter(|g| g.from_ms >= start && g.to_ms <= end)
        .collect();
    let placements = inside.iter().map(|g| g.landed).sum();
    let avoid = match inside.last() {
        None => Avoid::Unknown,
        Some(g) if g.landed > 0 => Avoid::Never,
        Some(_) => Avoid::LastAt(inside.iter().rev().find(|g| g.landed > 0).map(|g| g.to_ms)),
    };
    let reuse = healed.and_then(|h| {
        growth
            .iter()
            .filter(|g| g.to_ms > h)
            .find(|g| g.landed > 0)
            .map(|g| (g.to_ms - h).max(0.0))
    });
    (placements, avoid, reuse)
}

/// What the placement services' own per-node create counters say about one window.
struct ServiceCalls {
    attempts: u64,
    failed: u64,
    avoid: Avoid,
    reuse: Option<f64>,
}

/// Window figures from the services' counters; `None` when they were never read.
fn service_calls(f: &FaultRecord, start: f64, end: f64) -> Option<ServiceCalls> {
    if f.calls.is_empty() && f.edges.is_none() {
        return None;
    }
    let with = &f.calls;
    let at_or_before = |t: f64| {
        with.iter()
            .rev()
            .find(|s| s.t_ms <= t)
            .or_else(|| with.first())
            .map(|s| s.calls)
            .unwrap_or_default()
    };
    let (attempts, failed) = match f.edges {
        Some((at, before_heal)) => (
            answered(&before_heal).saturating_sub(answered(&at)),
            before_heal.failed.saturating_sub(at.failed),
        ),
        None => {
            let (c0, c1) = (at_or_before(start), at_or_before(end));
            (
                answered(&c1).saturating_sub(answered(&c0)),
                c1.failed.saturating_sub(c0.failed),
            )
        }
    };
    // The last sampled interval inside the window in which the faulty nodes got calls.
    let mut last = None;
    let mut still_at_end = false;
    for pair in with.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if b.t_ms <= start || b.t_ms > end {
            continue;
        }
        // Sent, not answered: a create a hung node holds is a choice made when sent.
        let grew = b.calls.sent() > a.calls.sent();
        if grew {
            last = Some(b.t_ms);
        }
        still_at_end = grew;
    }
    let avoid = if still_at_end && f.healed_at_ms.is_none() {
        Avoid::Never
    } else {
        Avoid::LastAt(last)
    };
    let reuse = f.healed_at_ms.and_then(|h| {
        with.windows(2)
            .find(|p| p[1].t_ms > h && p[1].calls.ok > p[0].calls.ok)
            .map(|p| (p[1].t_ms - h).max(0.0))
    });
    Some(ServiceCalls {
        attempts,
        failed,
        avoid,
        reuse,
    })
}

/// Creates answered, either way.
fn answered(c: &NodeCalls) -> u64 {
    c.ok + c.failed
}
