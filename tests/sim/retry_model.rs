//! The parked retry model (E2B's no-backoff ResourceExhausted loop, paid per state
//! change) against stepping every retry tick: same placements, same retry counts.

use stampede::placement::AccountingMode;
use stampede::profile::{parse, Profile, Source};
use stampede::sim::{simulate_setup, SimBudget, SimRun, SimSetup};

fn profile(name: &str, yaml: &str) -> Profile {
    parse(&Source::inline(name, yaml.to_string())).expect("test profile parses")
}

fn run(p: &Profile, step: bool) -> SimRun {
    let mut setup = SimSetup::from_profile(p, AccountingMode::Optimistic).expect("setup");
    setup.step_retries = step;
    let budget = SimBudget {
        max_events: 200_000_000,
        ..SimBudget::default()
    };
    simulate_setup(&setup, "t".into(), Default::default(), &budget).expect("simulates")
}

/// Both modes agree on every figure that a retry could change, and parking processes
/// `saving` times fewer events than stepping; returns the parked run.
fn same(p: &Profile, saving: u64) -> SimRun {
    let fast = run(p, false);
    let slow = run(p, true);
    let (f, s) = (&fast.result, &slow.result);
    let placed = |r: &stampede::report::RunResult| -> Vec<u64> {
        r.nodes.iter().map(|n| n.sandboxes).collect()
    };
    assert_eq!(placed(f), placed(s), "{}: sandboxes per node", p.name);
    assert_eq!(f.statuses, s.statuses, "{}: statuses", p.name);
    assert_eq!(f.retries, s.retries, "{}: retries", p.name);
    assert_eq!(f.refusals, s.refusals, "{}: refusals", p.name);
    assert_eq!(f.timeline, s.timeline, "{}: timeline", p.name);
    assert_eq!(f.latency, s.latency, "{}: latency", p.name);
    assert_eq!(fast.virtual_ns, slow.virtual_ns, "{}: end time", p.name);
    assert!(
        f.refusals > 1000,
        "{}: a storm happened ({})",
        p.name,
        f.refusals
    );
    assert!(
        fast.events * saving < slow.events,
        "{}: parking saves {saving}x the events ({} vs {})",
        p.name,
        fast.events,
        slow.events
    );
    fast
}

#[test]
fn burst_against_max_starting() {
    same(
        &profile(
            "burst.yaml",
            "name: burst
seed: 3
cluster:
  nodes: 3
  node:
    max_starting: 2
    create_latency: {dist: lognormal, median: 40ms, sigma: 0.5}
placement:
  embedded:
    sync_interval: 200ms
    request_timeout: 2s
workload:
  shape:
    burst: {count: 60}
collect:
  interval: 100ms
",
        ),
        10,
    );
}

#[test]
/// Only refusals until the deadline: E2B answers 503 `sandbox_capacity_unavailable`
/// (`packages/api/internal/orchestrator/placement_errors.go`).
fn deadline_ends_a_storm_with_503s() {
    let fast = same(
        &profile(
            "deadline.yaml",
            "name: deadline
seed: 5
cluster:
  nodes: 3
  node:
    max_starting: 1
    create_latency: {dist: constant, value: 400ms}
placement:
  embedded:
    request_timeout: 1s
workload:
  shape:
    burst: {count: 40}
",
        ),
        10,
    );
    assert!(
        fast.result.statuses.get("503").copied().unwrap_or(0) > 0,
        "{:?}",
        fast.result.statuses
    );
}

#[test]
fn full_nodes_expire_lifetimes_and_deletes() {
    // max_sandboxes refusals freed by deletes (events) and by expiries (no event).
    same(
        &profile(
            "churn.yaml",
            "name: churn
seed: 11
cluster:
  nodes: 3
  node:
    max_sandboxes: 4
    max_starting: 0
    create_latency: {dist: uniform, min: 1ms, max: 9ms}
placement:
  embedded:
    accounting: optimistic
    sync_interval: 300ms
    request_timeout: 3s
workload:
  shape:
    rate: {per_second: 40, duration: 3s}
  sandbox: {timeout: 1s}
  lifetime: {dist: uniform, min: 300ms, max: 1500ms}
collect:
  interval: 250ms
",
        ),
        10,
    );
}

#[test]
fn exhaust_fault_and_backoff() {
    same(
        &profile(
            "exhaust.yaml",
            "name: exhaust
seed: 2
cluster:
  nodes: 3
  node:
    max_starting: 1
    create_latency: {dist: exponential, mean: 20ms}
placement:
  embedded:
    sync_interval: 500ms
    request_timeout: 3s
    retry_backoff: 150us
    rpc_round_trip: 70us
workload:
  shape:
    burst: {count: 50}
chaos:
  - at: 10ms
    fault: exhaust
    nodes: [node-00, node-01]
    duration: 400ms
",
        ),
        1,
    );
}
