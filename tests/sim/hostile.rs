//! Hostile input to `stampede sim`: an event budget and a memory estimate
//! instead of endless or runaway runs, sweeps through the same validation as profiles,
//! messages printed once and naming their file, and no skew check passing on nothing.
//! Every simulation here runs on a worker thread with a time bound.

use std::path::PathBuf;
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use stampede::placement::AccountingMode;
use stampede::profile::RunSettings;
use stampede::profile::{parse, Bound, Checks, Profile, Source};
use stampede::report::{evaluate, Report, RunResult, SkewStats};
use stampede::sim::{
    run_sim_cli, run_sweep_within, simulate, simulate_profile_within, SimArgs, SimBudget, SimError,
    SweepAxis,
};

fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => v,
        Err(_) => panic!("took longer than {limit:?}"),
    }
}

/// The profile, with the API's times inside and after a decision off (the budgets and
/// estimates here are stated without them).
fn profile(yaml: &str) -> Profile {
    crate::support::api_times::off(
        parse(&Source::inline("sim.yaml", yaml)).expect("test profile parses"),
    )
}

fn budget(max_events: u64) -> SimBudget {
    SimBudget {
        max_events,
        ..SimBudget::default()
    }
}

/// Two nodes that hold one sandbox each, and a burst of 50: 48 creates are refused
/// and retried every millisecond (a fast API, below the measured default) until their
/// 70 s deadline, 70,000 retries each.
const SATURATED: &str = "name: saturated
cluster:
  nodes: 2
  node: {max_sandboxes: 1, max_starting: 1}
placement:
  embedded: {accounting: optimistic, best_of_k: {k: 2}, rpc_round_trip: 1ms}
workload:
  shape: {burst: {count: 50}}
";

/// A saturated cluster (every create refused, retried every round trip until the 70 s
/// deadline) ran for about 70 million events with no end in sight. The simulator now
/// parks E2B's no-backoff retries until a node's state can change, so the run
/// ends within the budget, every refused create answered 503 at its deadline with its
/// retries counted; a budget that is too small still stops it with a clear error.
#[test]
fn saturated_cluster_ends_and_a_small_budget_still_stops_it() {
    let p = profile(SATURATED);
    let report = within(Duration::from_secs(60), move || {
        simulate_profile_within(&p, &budget(1_000_000)).expect("ends within the budget")
    });
    let run = &report.runs[0];
    assert_eq!(run.statuses.get("503"), Some(&48), "{:?}", run.statuses);
    // 48 requests refused once per round trip (1 ms here) for 70 s: 70,000 each,
    // less a margin for the first attempt and the deadline's edge.
    assert!(run.retries >= 48 * 60_000, "retries {}", run.retries);
    let p = profile(SATURATED);
    let err = within(Duration::from_secs(60), move || {
        simulate_profile_within(&p, &budget(250)).unwrap_err()
    });
    let SimError::EventBudget {
        max_events, open, ..
    } = &err
    else {
        panic!("expected the event budget, got {err}");
    };
    assert_eq!(*max_events, 250);
    assert!(*open > 0);
    let msg = err.to_string();
    assert!(msg.contains("--max-events 250"), "{msg}");
    // Parked storms settle their retries in bulk, so 250 events hold few retries and the
    // "looks saturated" hint (retries over a quarter of the budget) need not show; the
    // open requests are always named.
    assert!(msg.contains("48 requests still open"), "{msg}");
}

/// The estimate is checked before anything runs and names the figure to lower.
#[test]
fn estimates_over_budget_are_refused_before_running() {
    // 100,000 nodes synced every millisecond for a minute: 6e9 node reads.
    let p = profile(
        "name: syncs
cluster: {nodes: 100000}
placement:
  embedded: {accounting: optimistic, sync_interval: 1ms}
workload:
  shape: {rate: {per_second: 10, duration: 60s}}
",
    );
    let err = within(Duration::from_secs(30), move || {
        simulate_profile_within(&p, &SimBudget::default()).unwrap_err()
    });
    let msg = err.to_string();
    assert!(matches!(err, SimError::OverBudget { .. }), "{msg}");
    assert!(msg.contains("--max-events"), "{msg}");
    assert!(
        msg.contains("node syncs (placement.embedded.sync_interval"),
        "{msg}"
    );
    // Memory: 1,000 replicas of a 1,000-node fleet keep a million node views.
    let p = profile(
        "name: views
cluster: {nodes: 1000}
placement:
  embedded: {accounting: optimistic, replicas: 1000, sync_interval: 1h}
workload:
  shape: {burst: {count: 10}}
",
    );
    let small = SimBudget {
        max_memory_bytes: 100 << 20,
        ..SimBudget::default()
    };
    let err = within(Duration::from_secs(30), move || {
        simulate_profile_within(&p, &small).unwrap_err()
    });
    let msg = err.to_string();
    assert!(msg.contains("--max-memory-mb 100"), "{msg}");
    assert!(msg.contains("replica views"), "{msg}");
}

/// A rate profile whose requests wait behind one slow worker: when the first create
/// finishes, 20,000 queued requests are past their deadline and each started one
/// answered at once started the next, in a recursion as deep as the backlog that
/// overflowed the stack.
#[test]
fn a_deep_backlog_past_its_deadline_does_not_overflow_the_stack() {
    let p = profile(
        "name: backlog
cluster:
  nodes: 3
  node: {max_starting: 0, create_latency: {dist: constant, value: 2s}}
placement:
  embedded: {accounting: optimistic, request_timeout: 1s}
workload:
  shape: {rate: {per_second: 10000, duration: 2s}}
  max_in_flight: 1
",
    );
    let run = within(Duration::from_secs(60), move || {
        simulate(&p, AccountingMode::Optimistic).expect("simulates")
    });
    assert_eq!(run.requests, 20_000);
    // A 2 s create never fits the 1 s deadline, which bounds the RPC too (E2B has no
    // other bound on a create, `packages/api/main.go`).
    assert_eq!(run.ok, 0, "{:?}", run.statuses);
    assert!(
        run.statuses.get("504").copied().unwrap_or(0) > 10_000,
        "{:?}",
        run.statuses
    );
}

/// `sync_interval: 1ns` and `collect.interval: 1ns` validated and ran without end; the
/// simulator refuses what validation refuses, even through the library.
#[test]
fn the_simulator_refuses_what_validation_refuses() {
    for bad in [
        "placement:\n  embedded: {accounting: optimistic, sync_interval: 1ns}\n",
        "collect: {interval: 1ns}\n",
        "workload:\n  shape: {burst: {count: 5}}\n  lifetime: {dist: constant, value: 500000years}\n",
        "cluster: {nodes: 4000000000}\n",
    ] {
        let mut text = format!("name: refused\n{bad}");
        if !bad.starts_with("workload") {
            text.push_str("workload:\n  shape: {burst: {count: 5}}\n");
        }
        let p = profile(&text);
        let err = within(Duration::from_secs(10), move || {
            simulate(&p, AccountingMode::Optimistic).unwrap_err()
        });
        assert!(matches!(err, SimError::Profile(_)), "{bad}: {err}");
    }
}

fn nightly() -> Profile {
    stampede::profile::load_and_validate("profiles/nightly.yaml".as_ref()).unwrap()
}

/// `--sweep k=100` on 10 nodes and `--sweep create_latency=5ms-1ms` ran although the
/// same values are refused in a profile.
#[test]
fn sweep_values_go_through_profile_validation() {
    for (axis, field) in [
        (
            "k=3,100",
            "placement.embedded.best_of_k.k: must be <= the number of nodes (10)",
        ),
        (
            "create_latency=5ms-1ms",
            "cluster.node.create_latency: min must be <= max",
        ),
        ("sync_interval=1ns", "placement.embedded.sync_interval"),
        ("nodes=1000000", "cluster.nodes"),
        ("r=0", "placement.embedded.best_of_k.r"),
        ("replicas=4294967295", "placement.embedded.replicas"),
    ] {
        let axes: Vec<SweepAxis> = vec![axis.parse().unwrap()];
        let p = nightly();
        let err = within(Duration::from_secs(30), move || {
            run_sweep_within(&p, &axes, 1, &SimBudget::default()).unwrap_err()
        });
        let msg = err.to_string();
        assert!(msg.contains("--sweep accounting="), "{axis}: {msg}");
        assert!(msg.contains(field), "{axis}: {msg}");
    }
    // Too many runs is refused before the combinations are built.
    let axes: Vec<SweepAxis> = vec!["k=1,2,3".parse().unwrap()];
    let p = nightly();
    let err = run_sweep_within(&p, &axes, u32::MAX, &SimBudget::default()).unwrap_err();
    assert!(err.to_string().contains("more than 10000 runs"), "{err}");
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "stampede-hostile-sim-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `sim` printed every validation error twice (once per wrapping error in anyhow's
/// chain).
#[test]
fn sim_prints_each_validation_error_once() {
    let dir = temp_dir("once");
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "name: bad\nplacement:\n  embedded: {best_of_k: {k: 0}}\nworkload:\n  shape: {burst: {count: 1}}\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .arg("sim")
        .arg(&bad)
        .arg("--report-dir")
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr
            .matches("placement.embedded.best_of_k.k: must be >= 1")
            .count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("bad.yaml:3:"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `sim --report-dir` pointing at a file said "File exists (os error
/// 17)" without the path.
#[test]
fn a_report_directory_that_is_a_file_is_named() {
    let dir = temp_dir("file");
    let file = dir.join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let args = SimArgs {
        profile: "profiles/nightly.yaml".into(),
        report_dir: file.clone(),
        ..SimArgs::default()
    };
    let err = within(Duration::from_secs(120), move || {
        run_sim_cli(args).unwrap_err()
    });
    let msg = err.to_string();
    assert!(msg.contains(&file.display().to_string()), "{msg}");
    assert!(msg.contains("is a file"), "{msg}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// With every sandbox gone at the end (here: deleted after 1 s), CV 0 and Jain 1
/// passed the nightly guard; a skew check on an empty fleet fails.
#[test]
fn skew_checks_fail_when_no_sandbox_is_left() {
    let text = std::fs::read_to_string("profiles/nightly.yaml")
        .unwrap()
        .replace(
            "lifetime: {dist: uniform, min: 10s, max: 20s}",
            "lifetime: {dist: constant, value: 1s}",
        )
        .replace(
            "checks:\n",
            "checks:\n  cv: {max: 0.15}\n  max_over_mean: {max: 1.4}\n",
        );
    let p = profile(&text);
    let report = within(Duration::from_secs(120), move || {
        simulate_profile_within(&p, &SimBudget::default()).unwrap()
    });
    assert!(!report.passed);
    let skew_checks = report
        .checks
        .iter()
        .filter(|c| c.check == "cv" || c.check == "max_over_mean")
        .count();
    assert_eq!(skew_checks, 2, "two skew checks in the one mode");
    for c in report
        .checks
        .iter()
        .filter(|c| c.check == "cv" || c.check == "max_over_mean")
    {
        assert!(!c.passed, "{c:?}");
        assert!(c.message.contains("empty fleet"), "{}", c.message);
    }
    // The same on a hand-made report: every bound fails, none passes on nothing.
    let run = RunResult {
        label: "optimistic".into(),
        settings: RunSettings {
            accounting: Some(AccountingMode::Optimistic),
            ..RunSettings::default()
        },
        skew: SkewStats::from_counts(&[0, 0, 0]),
        requests: 10,
        ok: 10,
        ..RunResult::default()
    };
    let mut report = Report::new("x", "", 0, "1970-01-01T00:00:00Z");
    report.runs.push(run);
    let any = Some(Bound {
        min: Some(0.0),
        max: Some(1e9),
    });
    let checks = Checks {
        cv: any,
        max_over_mean: any,
        jain: Some(Bound {
            min: Some(0.0),
            max: Some(1.0),
        }),
        ..Checks::default()
    };
    let out = evaluate(&checks, &report);
    assert_eq!(out.len(), 3);
    assert!(out.iter().all(|c| !c.passed), "{out:?}");
}
