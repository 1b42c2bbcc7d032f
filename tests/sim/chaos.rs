//! Chaos drills in simulation: the shipped drills run with the same fault plan values,
//! the set audit runs on the simulated ledger, and faults leave visible traces.

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
        "{}: ok {}/{} statuses {:?} retries {} refusals {} cv {:.3} set_audit {:?} faults {:?}",
        r.label,
        r.ok,
        r.requests,
        r.statuses,
        r.retries,
        r.refusals,
        r.skew.cv,
        r.set_audit.as_ref().map(|c| (
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
        "chaos-slow-create",
        "chaos-stale-heartbeat",
    ] {
        let report = drill(name);
        for run in &report.runs {
            println!("{name} {}", summary(run));
            let c = run.set_audit.as_ref().expect("drills run the set audit");
            assert_eq!(c.lost.count, 0, "{name}: {:?}", c.lost.ids);
            assert_eq!(c.duplicated.count, 0, "{name}: {:?}", c.duplicated.ids);
            assert_eq!(run.faults.len(), 1, "{name}");
        }
    }
}

/// E2B derives `connecting` from the gRPC channel
/// (`packages/api/internal/orchestrator/nodemanager/status.go`): a killed node's
/// connection is lost at the kill, the first create sent there fails to reconnect
/// (TransientFailure) and is retried elsewhere, and the node gets nothing more, long
/// before the next sync. Under the old rule (avoided only from the sync) 1.3 s of
/// creates landed on the dead nodes.
#[test]
fn a_killed_node_is_avoided_from_its_channel_state_before_the_next_sync() {
    // The channel-state rule alone: with the API's commit lag on, choices read before
    // the kill also commit to the dead nodes after it (each fails and is retried).
    let mut p = crate::support::api_times::off(
        load_and_validate(Path::new("profiles/chaos-node-kill.yaml")).unwrap(),
    );
    // Between two syncs (every 2 s): the next sync is at 10 s, 1.3 s after the kill.
    p.chaos[0].at = Duration::from_millis(8_700);
    let report = simulate_profile(&p).unwrap();
    let run = &report.runs[0];
    let w = &run.faults[0];
    assert_eq!(w.kind, "kill");
    assert_eq!(w.nodes.len(), 2);
    // At most one create per dead node (one replica) finds the connection gone.
    assert!(w.placements_to_faulty <= 2, "{}", summary(run));
    assert_eq!(w.failed_on_faulty.unwrap_or(0), w.placements_to_faulty);
    assert!(run.retries >= w.placements_to_faulty, "{}", summary(run));
    assert_eq!(run.failed, 0, "{}", summary(run));
    assert_eq!(run.set_audit.as_ref().unwrap().lost.count, 0);
    let avoid = w.time_to_avoid_ms.unwrap();
    assert!(avoid < 1_300.0, "avoided after {avoid} ms");
    // Healed at 18.7 s; the reconnect and the ready status come with the 20 s sync.
    let reuse = w.time_to_reuse_ms.expect("healed nodes get work again");
    assert!(
        (1_300.0..2_000.0).contains(&reuse),
        "reused after {reuse} ms"
    );
}

/// The shipped hang drill under E2B's rules (no per-RPC deadline,
/// `packages/api/main.go`): every create the hung node held ends at the request
/// deadline, 504, and the node is avoided once a sync cycle ran out of time (20 s,
/// `packages/api/internal/orchestrator/cache.go`), not before.
#[test]
fn creates_held_by_a_hung_node_end_at_the_request_deadline() {
    let report = drill("chaos-hang");
    let run = &report.runs[0];
    let w = &run.faults[0];
    assert_eq!(w.kind, "hang");
    assert!(w.timed_out > 0, "{}", summary(run));
    assert_eq!(w.timed_out, w.placements_to_faulty, "{}", summary(run));
    assert_eq!(run.statuses.get("504").copied(), Some(w.timed_out));
    let deadline = 70_000.0;
    assert!(w.timed_out_min_ms.unwrap() >= deadline, "{w:?}");
    assert!(w.timed_out_max_ms.unwrap() < deadline + 100.0, "{w:?}");
    let avoid = w.time_to_avoid_ms.unwrap();
    assert!(
        (18_000.0..=24_000.0).contains(&avoid),
        "avoided after {avoid} ms"
    );
}

#[test]
fn a_restart_loses_sandboxes_to_the_node_restart_only() {
    let report = drill("chaos-restart");
    let c = report.runs[0].set_audit.as_ref().unwrap();
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

/// The simulator measures a window as a real run does (`aggregate::fault_windows`): the
/// placement services' counters read at the fault's edges (so the creates in flight at
/// the fault and the failed RPCs are known, 0 included) and at every sample (so a
/// healed node's reuse is seen at a sample, not at the landing's exact instant).
#[test]
fn simulated_windows_come_from_the_counters_a_real_run_reads() {
    let p = load_and_validate(Path::new("profiles/chaos-node-kill.yaml")).unwrap();
    let interval = p.collect.interval.as_secs_f64() * 1000.0;
    let report = simulate_profile(&p).unwrap();
    let run = &report.runs[0];
    let w = &run.faults[0];
    assert!(w.in_flight_at_fault.is_some(), "{w:?}");
    assert!(w.failed_on_faulty.is_some(), "{w:?}");
    let healed = w.healed_at_ms.expect("the kill heals");
    let reuse = w.time_to_reuse_ms.expect("healed nodes get work again");
    let seen_at = (healed + reuse) / interval;
    assert!(
        (seen_at - seen_at.round()).abs() < 1e-6,
        "reuse seen at {} ms, not a sample time (every {interval} ms)",
        healed + reuse
    );
}

/// The slow-create drill: creates sent to the slow node outlast its own 60 s Create
/// deadline and fail there (INTERNAL), so each is retried on another node and answered
/// 201 about 60 s late, before the 70 s request deadline; the slow node gets nothing
/// while it is slow. Without the node's deadline they would wait out the 65 s delay and
/// land on the slow node.
#[test]
fn creates_past_the_node_deadline_are_retried_elsewhere_in_the_slow_create_drill() {
    let report = drill("chaos-slow-create");
    let run = &report.runs[0];
    println!("{}", summary(run));
    assert_eq!(run.ok, run.requests, "every create ends 201");
    assert!(run.retries > 0, "the timed-out creates were retried");
    assert!(run.latency.max_ms >= 60_000.0, "{:?}", run.latency);
    assert!(run.latency.max_ms < 70_000.0, "{:?}", run.latency);
    let fault = &run.faults[0];
    assert_eq!(fault.placements_to_faulty, 0, "{fault:?}");
}
