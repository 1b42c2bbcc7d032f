//! Chaos drills in simulation: the shipped drills run with the same fault plan values,
//! the set checker runs on the simulated ledger, and faults leave visible traces.

use std::path::Path;
use std::time::Duration;

use stampede::profile::load_and_validate;
use stampede::report::RunResult;
use stampede::sim::simulate_profile;

fn drill(name: &str) -> stampede::report::Report {
    let p = load_and_validate(Path::new(&format!("profiles/{name}.yaml"))).expect("profile");
    simulate_profile(&p).expect("simulates")
}

fn summary(r: &RunResult) -> String {
    format!(
        "{}: ok {}/{} statuses {:?} retries {} refusals {} cv {:.3} checker {:?} faults {:?}",
        r.label,
        r.ok,
        r.requests,
        r.statuses,
        r.retries,
        r.refusals,
        r.skew.cv,
        r.checker.as_ref().map(|c| (
            c.lost.count,
            c.duplicated.count,
            c.lost_to_node_restart.count
        )),
        r.faults
            .iter()
            .map(|f| (
                f.kind.clone(),
                f.nodes.clone(),
                f.placements_to_faulty,
                f.failed
            ))
            .collect::<Vec<_>>()
    )
}

#[test]
fn shipped_drills_lose_and_duplicate_nothing_in_simulation() {
    for name in [
        "chaos-flaky",
        "chaos-hang",
        "chaos-node-kill",
        "chaos-restart",
        "chaos-stale-heartbeat",
    ] {
        let report = drill(name);
        for run in &report.runs {
            println!("{name} {}", summary(run));
            let c = run.checker.as_ref().expect("drills run the set checker");
            assert_eq!(c.lost.count, 0, "{name}: {:?}", c.lost.ids);
            assert_eq!(c.duplicated.count, 0, "{name}: {:?}", c.duplicated.ids);
            assert_eq!(run.faults.len(), 1, "{name}");
        }
    }
}

#[test]
fn a_killed_node_fails_creates_until_the_next_sync_marks_it_unhealthy() {
    let mut p = load_and_validate(Path::new("profiles/chaos-node-kill.yaml")).unwrap();
    // Between two syncs (every 2 s): the kill is unseen until the sync at 10 s.
    p.chaos[0].at = Duration::from_millis(8_700);
    let report = simulate_profile(&p).unwrap();
    let run = &report.runs[0];
    let w = &run.faults[0];
    assert_eq!(w.kind, "kill");
    assert_eq!(w.nodes.len(), 2);
    // 1.3 s at 20 creates/s before the sync: some land on the dead nodes, fail with
    // UNAVAILABLE and are retried elsewhere; none after the sync.
    assert!(w.placements_to_faulty > 0, "{}", summary(run));
    assert!(w.placements_to_faulty <= 26, "{}", summary(run));
    assert!(run.retries >= w.placements_to_faulty, "{}", summary(run));
    assert_eq!(run.failed, 0, "{}", summary(run));
    assert_eq!(run.checker.as_ref().unwrap().lost.count, 0);
    assert_eq!(w.failed_on_faulty, Some(w.placements_to_faulty));
    let avoid = w.time_to_avoid_ms.unwrap();
    assert!(avoid > 0.0 && avoid <= 1_300.0, "avoided after {avoid} ms");
    // Healed at 18.7 s, ready again at the 20 s sync.
    let reuse = w.time_to_reuse_ms.expect("healed nodes get work again");
    assert!(
        (1_300.0..2_000.0).contains(&reuse),
        "reused after {reuse} ms"
    );
}

#[test]
fn a_restart_loses_sandboxes_to_the_node_restart_only() {
    let report = drill("chaos-restart");
    let c = report.runs[0].checker.as_ref().unwrap();
    assert!(
        c.lost_to_node_restart.count > 0,
        "{}",
        summary(&report.runs[0])
    );
    assert_eq!(c.lost.count, 0);
}

#[test]
fn frozen_metrics_herd_reported_but_not_reconciled() {
    let report = drill("chaos-stale-heartbeat");
    let cv = |label: &str| report.run(label).unwrap().skew.cv;
    assert!(cv("reported") >= 0.6, "reported {}", cv("reported"));
    assert!(cv("reconciled") <= 0.2, "reconciled {}", cv("reconciled"));
    assert!(report.passed, "{:?}", report.checks);
}
