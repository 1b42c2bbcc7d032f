//! The parked retry model (E2B's no-backoff ResourceExhausted loop, paid per state
//! change) against stepping every retry tick: same placements, same retry counts.

use stampede::placement::AccountingMode;
use stampede::profile::{parse, Profile, Source};
use stampede::sim::{simulate_setup, SimBudget, SimRun, SimSetup};

fn profile(name: &str, yaml: &str) -> Profile {
    parse(&Source::inline(name, yaml.to_string())).expect("test profile parses")
}

fn run(p: &Profile, step: bool, mode: AccountingMode) -> SimRun {
    let mut setup = SimSetup::from_profile(p, mode).expect("setup");
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
    same_in(p, saving, AccountingMode::Optimistic)
}

/// [`same`] under accounting `mode`.
fn same_in(p: &Profile, saving: u64, mode: AccountingMode) -> SimRun {
    let fast = run(p, false, mode);
    let slow = run(p, true, mode);
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
    rpc_round_trip: 100us
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

/// Under `reported` the scores stay put between syncs, so a K=2 draw on 4 nodes never
/// returns the lowest-ranked node: the storm parks once the three it can reach are
/// full, though the fourth has room (the herd of seed 000).
#[test]
fn reported_storm_parks_while_only_unreachable_nodes_have_room() {
    let fast = same_in(
        &profile(
            "herd.yaml",
            "name: herd
seed: 7
cluster:
  nodes: 4
  node:
    max_starting: 2
    create_latency: {dist: lognormal, median: 40ms, sigma: 0.5}
placement:
  embedded:
    rpc_round_trip: 100us
    best_of_k: {k: 2}
    sync_interval: 1s
    request_timeout: 3s
workload:
  shape:
    burst: {count: 60}
collect:
  interval: 100ms
",
        ),
        10,
        AccountingMode::Reported,
    );
    let placed: Vec<u64> = fast.result.nodes.iter().map(|n| n.sandboxes).collect();
    assert_eq!(placed.iter().sum::<u64>(), 60, "{placed:?}");
    assert!(
        placed.contains(&0),
        "the last-ranked node gets nothing before a sync: {placed:?}"
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
    rpc_round_trip: 100us
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
fn full_nodes_freed_by_deletes_and_evictions() {
    // max_sandboxes refusals freed by the workload's deletes and by the evictor's at the
    // 1 s timeout: both are events, since a node never drops a sandbox by itself.
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
    rpc_round_trip: 100us
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
