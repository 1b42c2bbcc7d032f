//! Fault windows from a ledger and truth samples (pure; synthetic data on one clock).

use std::time::Duration;

use mock_node::api::FaultKind;
use stampede::chaos::{fault_windows_from_run, AppliedFault, PlannedFault};
use stampede::collect::{NodeSample, Sample, Truth};
use stampede::workload::{Ledger, LedgerEntry, Outcome};

fn applied(kind: FaultKind, nodes: &[&str], at: f64, healed: Option<f64>) -> AppliedFault {
    AppliedFault {
        planned: PlannedFault {
            step: 0,
            at: Duration::from_millis(at as u64),
            kind,
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            duration: healed.map(|h| Duration::from_millis((h - at) as u64)),
            through_api: false,
            command: None,
        },
        id: "1".into(),
        applied_at_ms: at,
        in_force_at_ms: Some(at),
        healed_at_ms: healed,
        error: None,
        calls_in_force: None,
        calls_before_heal: None,
    }
}

/// One request every 100 ms for 10 s; those sent in [3 s, 3.5 s) fail.
fn ledger(node_of: impl Fn(usize) -> Option<String>) -> Ledger {
    let mut l = Ledger::new();
    for i in 0..100 {
        let t = i as f64 * 100.0;
        let fail = (3_000.0..3_500.0).contains(&t);
        l.record(LedgerEntry {
            index: i,
            target: 0,
            intended_ms: t,
            sent_ms: t,
            latency_us: 5_000,
            outcome: if fail {
                Outcome::Status(500)
            } else {
                Outcome::Status(201)
            },
            sandbox_id: (!fail).then(|| format!("sbx-{i}")),
            node: if fail { None } else { node_of(i) },
            deleted: None,
        });
    }
    l
}

/// Samples every 500 ms of two nodes; `b` holds `b_count(t)` sandboxes at time t.
fn samples(b_count: impl Fn(f64) -> usize) -> Vec<Sample> {
    (0..=20)
        .map(|k| {
            let t = k as f64 * 500.0;
            let node = |id: &str, n: usize| NodeSample {
                id: id.into(),
                sandboxes: n as u64,
                allocated_vcpu: n as f64,
                ids: Some((0..n).map(|i| format!("{id}-{i}")).collect()),
                status: "healthy".into(),
                service_id: Some("x".into()),
                refused: None,
            };
            Sample {
                t_ms: t,
                truth: Truth {
                    nodes: vec![node("a", k * 3), node("b", b_count(t))],
                },
                believed: Vec::new(),
                allocated_after: Default::default(),
                calls: Vec::new(),
            }
        })
        .collect()
}

#[test]
fn a_killed_node_gets_nothing_then_work_again_after_the_heal() {
    // b grows by 2 per sample, stops at the kill (3 s), resumes 1 s after the heal (6 s).
    let b = |t: f64| {
        let grow = |u: f64| (u / 500.0) as usize * 2;
        if t <= 3_000.0 {
            grow(t)
        } else if t < 7_000.0 {
            grow(3_000.0)
        } else {
            grow(3_000.0) + grow(t - 6_500.0)
        }
    };
    let w = fault_windows_from_run(
        &[applied(FaultKind::Kill, &["b"], 3_000.0, Some(6_000.0))],
        &ledger(|_| None),
        &samples(b),
    );
    assert_eq!(w.len(), 1);
    let w = &w[0];
    assert_eq!(
        (w.kind.as_str(), w.nodes.clone()),
        ("kill", vec!["b".to_string()])
    );
    assert_eq!(w.attempted, 31, "sent in [3 s, 6 s]");
    assert_eq!((w.ok, w.failed), (26, 5));
    assert_eq!(w.placements_to_faulty, 0);
    // The last failure was sent at 3.4 s: the service chose then (its answer, 5 ms
    // later, is the node's; a hung node would delay it to the request deadline).
    assert_eq!(w.time_to_avoid_ms, Some(400.0));
    assert_eq!(w.time_to_reuse_ms, Some(1_000.0));
}

#[test]
fn placements_that_go_on_during_the_window_are_counted_and_never_avoided() {
    let b = |t: f64| (t / 500.0) as usize; // one new sandbox per sample, always
    let w = &fault_windows_from_run(
        &[applied(
            FaultKind::Slow {
                latency: std::time::Duration::from_millis(200),
            },
            &["b"],
            2_000.0,
            Some(5_000.0),
        )],
        &ledger(|_| None),
        &samples(b),
    )[0];
    // Intervals entirely inside [2 s, 5 s]: 6 of them, one sandbox each.
    assert_eq!(w.placements_to_faulty, 6);
    assert_eq!(w.time_to_avoid_ms, None, "still placing at the end");
    assert_eq!(w.time_to_reuse_ms, Some(500.0));
}

#[test]
fn the_ledger_node_is_used_when_the_service_names_it() {
    // Requests alternate a/b, except that b gets nothing in [3 s, 4.5 s).
    let node_of = |i: usize| {
        let t = i as f64 * 100.0;
        let b = i % 2 == 1 && !(3_000.0..4_500.0).contains(&t);
        Some(if b { "b" } else { "a" }.to_string())
    };
    let w = &fault_windows_from_run(
        &[applied(
            FaultKind::Errors {
                probability: 1.0,
                code: mock_node::api::FailureCode::Unavailable,
            },
            &["b"],
            2_000.0,
            Some(5_000.0),
        )],
        &ledger(node_of),
        &samples(|_| 0),
    )[0];
    // b got 201s at 2.1..2.9 s (5) and 4.5..4.9 s (3) and 5.0 s is even -> a.
    assert_eq!(w.placements_to_faulty, 8);
    assert_eq!(w.time_to_avoid_ms, Some(4_900.0 + 5.0 - 2_000.0));
    assert_eq!(w.time_to_reuse_ms, Some(100.0 + 5.0));
}

#[test]
fn unapplied_faults_have_no_window_and_unhealed_ones_run_to_the_end() {
    let mut failed = applied(FaultKind::Kill, &["b"], 1_000.0, None);
    failed.id.clear();
    failed.error = Some("POST: connection refused".into());
    let open = applied(FaultKind::Exhaust, &["a"], 8_000.0, None);
    let w = fault_windows_from_run(&[failed, open], &ledger(|_| None), &samples(|_| 0));
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].kind, "exhaust");
    assert_eq!(w[0].healed_at_ms, None);
    assert_eq!(w[0].attempted, 20, "8.0 s .. 9.9 s");
    assert_eq!(w[0].time_to_reuse_ms, None);
}

/// A create held by a hung node until the deadline is a choice made when it was sent:
/// the time to avoid counts to the send, not to the 504 70 s later.
#[test]
fn a_held_create_counts_when_it_was_sent_not_when_it_timed_out() {
    let mut l = Ledger::new();
    for i in 0..100 {
        let t = i as f64 * 100.0;
        let held = (3_000.0..3_500.0).contains(&t);
        l.record(LedgerEntry {
            index: i,
            target: 0,
            intended_ms: t,
            sent_ms: t,
            latency_us: if held { 70_000_000 } else { 5_000 },
            outcome: Outcome::Status(if held { 504 } else { 201 }),
            sandbox_id: (!held).then(|| format!("sbx-{i}")),
            node: None,
            deleted: None,
        });
    }
    let w = fault_windows_from_run(
        &[applied(FaultKind::Hang, &["b"], 3_000.0, None)],
        &l,
        &samples(|_| 0),
    );
    let w = &w[0];
    assert_eq!((w.failed, w.timed_out), (5, 5), "{w:?}");
    assert_eq!(w.timed_out_min_ms, Some(70_000.0));
    assert_eq!(w.timed_out_max_ms, Some(70_000.0));
    // Sent at 3.4 s, answered at 73.4 s.
    assert_eq!(w.time_to_avoid_ms, Some(400.0));
}
