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

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(applied: f64, healed: Option<f64>) -> FaultRecord {
        FaultRecord {
            id: "1".into(),
            kind: "kill".into(),
            nodes: vec!["b".into()],
            applied_at_ms: applied,
            in_force_at_ms: Some(applied),
            healed_at_ms: healed,
            ..FaultRecord::default()
        }
    }

    fn req(sent: f64, done: f64, created: bool, node: Option<&str>) -> RequestRecord<'_> {
        RequestRecord {
            sent_ms: sent,
            done_ms: done,
            latency_ms: done - sent,
            created,
            timed_out: false,
            node,
        }
    }

    fn calls(ok: u64, failed: u64, starting: u64) -> NodeCalls {
        NodeCalls {
            ok,
            failed,
            starting,
        }
    }

    /// Counters sampled every 100 ms from 0 to 1000: `at(t)` each time.
    fn sampled(at: impl Fn(f64) -> NodeCalls) -> Vec<CallSample> {
        (0..=10)
            .map(|k| {
                let t = k as f64 * 100.0;
                CallSample {
                    t_ms: t,
                    calls: at(t),
                }
            })
            .collect()
    }

    fn one(f: FaultRecord, requests: &[RequestRecord<'_>], last: f64) -> FaultWindow {
        fault_windows(&[f], requests, last).remove(0)
    }

    #[test]
    fn a_create_in_flight_at_any_point_of_the_window_counts() {
        let mut timed_out = req(150.0, 450.0, false, None);
        timed_out.timed_out = true;
        let requests = [
            req(50.0, 99.0, true, None),  // answered before the fault
            req(90.0, 110.0, true, None), // sent before, answered during: counts
            req(200.0, 210.0, false, None),
            timed_out,
            req(300.0, 310.0, true, None),
            req(401.0, 410.0, true, None), // sent after the heal
        ];
        let w = one(fault(100.0, Some(400.0)), &requests, 1000.0);
        assert_eq!((w.attempted, w.ok, w.failed), (4, 2, 2));
        assert_eq!(w.timed_out, 1);
        assert_eq!(w.timed_out_min_ms, Some(300.0));
        assert_eq!(w.timed_out_max_ms, Some(300.0));
        // An unhealed fault's window runs to the last observation.
        let w = one(fault(100.0, None), &requests, 1000.0);
        assert_eq!(w.attempted, 5);
        assert_eq!(w.healed_at_ms, None);
    }

    #[test]
    fn counters_at_the_edges_give_the_rpcs_answered_between_them() {
        let mut f = fault(100.0, Some(400.0));
        f.edges = Some((calls(10, 2, 3), calls(14, 7, 0)));
        // Sampled counters disagree on purpose: the edges win for the counts.
        f.calls = sampled(|_| calls(0, 0, 0));
        let w = one(f, &[], 1000.0);
        assert_eq!(w.placements_to_faulty, 9);
        assert_eq!(w.failed_on_faulty, Some(5));
        assert_eq!(w.in_flight_at_fault, Some(3));
    }

    #[test]
    fn sampled_counters_alone_bracket_the_window_by_samples() {
        let mut f = fault(150.0, Some(450.0));
        // One answered create per 100 ms, every third failed.
        f.calls = sampled(|t| {
            let n = (t / 100.0) as u64;
            calls(n - n / 3, n / 3, 0)
        });
        let w = one(f, &[], 1000.0);
        // Samples at or before the edges: 100 (1 answered) and 400 (4 answered, 1 failed).
        assert_eq!(w.placements_to_faulty, 3);
        assert_eq!(w.failed_on_faulty, Some(1));
        assert_eq!(w.in_flight_at_fault, None);
    }

    #[test]
    fn avoidance_is_the_last_sampled_interval_the_service_sent_to_the_node() {
        let mut f = fault(100.0, Some(800.0));
        // Creates sent to the node until 300, none after.
        f.calls = sampled(|t| calls(0, 0, (t.min(300.0) / 100.0) as u64));
        f.edges = Some((calls(0, 0, 1), calls(0, 0, 3)));
        assert_eq!(one(f.clone(), &[], 1000.0).time_to_avoid_ms, Some(200.0));
        // A failed create of the window sent later is a later sign.
        let late = [req(550.0, 560.0, false, None)];
        assert_eq!(one(f.clone(), &late, 1000.0).time_to_avoid_ms, Some(450.0));
        // Never chosen during the window: 0.
        f.calls = sampled(|_| calls(0, 0, 0));
        assert_eq!(one(f.clone(), &[], 1000.0).time_to_avoid_ms, Some(0.0));
        // Still chosen at the end of a fault that never healed: none.
        f.healed_at_ms = None;
        f.calls = sampled(|t| calls(0, 0, (t / 100.0) as u64));
        assert_eq!(one(f, &[], 1000.0).time_to_avoid_ms, None);
    }

    #[test]
    fn reuse_is_the_first_sampled_interval_with_a_success_after_the_heal() {
        let mut f = fault(100.0, Some(450.0));
        f.calls = sampled(|t| calls(u64::from(t >= 700.0), 0, 0));
        assert_eq!(one(f.clone(), &[], 1000.0).time_to_reuse_ms, Some(250.0));
        f.calls = sampled(|_| calls(0, 0, 0));
        assert_eq!(one(f.clone(), &[], 1000.0).time_to_reuse_ms, None);
        f.healed_at_ms = None;
        f.calls = sampled(|t| calls(t as u64, 0, 0));
        assert_eq!(one(f, &[], 1000.0).time_to_reuse_ms, None);
    }

    #[test]
    fn without_counters_the_ledger_names_the_placements() {
        let requests = [
            req(120.0, 130.0, true, Some("b")),
            req(200.0, 260.0, true, Some("b")),
            req(220.0, 230.0, true, Some("a")),
            req(250.0, 255.0, false, Some("b")), // failed: not a placement
            req(500.0, 520.0, true, Some("b")),  // after the heal
        ];
        let w = one(fault(100.0, Some(400.0)), &requests, 1000.0);
        assert_eq!(w.placements_to_faulty, 2);
        assert_eq!(w.failed_on_faulty, None);
        assert_eq!(w.in_flight_at_fault, None);
        // The last placement answered at 260; the failure was sent at 250.
        assert_eq!(w.time_to_avoid_ms, Some(160.0));
        assert_eq!(w.time_to_reuse_ms, Some(120.0));
        // Counters, once there, come first: the ledger's nodes are not read.
        let mut f = fault(100.0, Some(400.0));
        f.edges = Some((calls(0, 0, 0), calls(0, 0, 0)));
        assert_eq!(one(f, &requests, 1000.0).placements_to_faulty, 0);
    }

    #[test]
    fn without_counters_or_ledger_nodes_the_truth_samples_count() {
        let mut f = fault(100.0, Some(700.0));
        let landed = |from: f64| match from as u64 {
            0 | 200 | 800 => 1,
            _ => 0,
        };
        f.growth = (0..10)
            .map(|k| {
                let from = k as f64 * 100.0;
                Growth {
                    from_ms: from,
                    to_ms: from + 100.0,
                    landed: landed(from),
                }
            })
            .collect();
        // Only intervals entirely inside [100, 700]: the one from 200.
        let w = one(f.clone(), &[req(1.0, 2.0, true, None)], 1000.0);
        assert_eq!(w.placements_to_faulty, 1);
        assert_eq!(w.time_to_avoid_ms, Some(200.0));
        assert_eq!(w.time_to_reuse_ms, Some(200.0));
        assert_eq!(w.failed_on_faulty, None);
        // Still landing in the window's last interval of an unhealed fault: none.
        f.healed_at_ms = None;
        f.growth[9].landed = 1;
        assert_eq!(one(f.clone(), &[], 1000.0).time_to_avoid_ms, None);
        // No sample inside the window: only a failure of the window says anything.
        f.growth.clear();
        assert_eq!(one(f.clone(), &[], 1000.0).time_to_avoid_ms, None);
        let failed = [req(300.0, 900.0, false, None)];
        assert_eq!(one(f, &failed, 1000.0).time_to_avoid_ms, Some(200.0));
    }

    #[test]
    fn one_window_per_record_in_order() {
        let mut second = fault(500.0, None);
        second.id = "2".into();
        let w = fault_windows(&[fault(100.0, Some(200.0)), second], &[], 1000.0);
        let ids: Vec<&str> = w.iter().map(|w| w.id.as_str()).collect();
        assert_eq!(ids, ["1", "2"]);
    }
}
