//! The parked retry model (E2B's no-backoff ResourceExhausted loop, paid per state
//! change) against stepping every retry tick: same placements, same retry counts.
//! `STAMPEDE_RETRY_MODEL_EVERY_SEED=1 cargo test --test sim retry_model` runs every
//! accounting mode over every seed instead of one seed per mode.

use stampede::placement::AccountingMode;
use stampede::profile::{parse, Profile, Source};
use stampede::sim::{simulate_setup, SimBudget, SimRun, SimSetup};

/// The profile, with the API's times inside and after a decision off: the parked model
/// prices a refused retry at the round trip and the backoff, and the equivalence with
/// stepping is stated for that model (a commit lag per retry is not parked).
fn profile(name: &str, yaml: &str) -> Profile {
    crate::support::api_times::off(
        parse(&Source::inline(name, yaml.to_string())).expect("test profile parses"),
    )
}

fn run(p: &Profile, step: bool, mode: AccountingMode, seed: u64) -> (SimRun, bool) {
    let mut setup = SimSetup::from_profile(p, mode).expect("setup");
    setup.step_retries = step;
    setup.seed = seed;
    let budget = SimBudget {
        max_events: 200_000_000,
        ..SimBudget::default()
    };
    let settles = mode == AccountingMode::Reported;
    let run = simulate_setup(&setup, "t".into(), Default::default(), &budget).expect("simulates");
    (run, settles)
}

/// Seeds a comparison may run (the profile's fleet stays; the placers' draws change).
const SEEDS: [u64; 3] = [1, 2, 3];

/// Set to run every accounting mode over every seed of [`SEEDS`] (three times the work).
const EVERY_SEED_ENV: &str = "STAMPEDE_RETRY_MODEL_EVERY_SEED";

/// The seeds `mode` (the `index`-th of [`AccountingMode::ALL`]) runs: by default one, a
/// different one per mode so that the four modes still cover every seed; all of
/// [`SEEDS`] when [`EVERY_SEED_ENV`] is set. Stepping every retry tick is the slow
/// reference (a debug build took 137 s on a loaded 2-core machine for the five
/// comparisons over the full cross).
fn seeds_for(index: usize) -> Vec<u64> {
    if std::env::var_os(EVERY_SEED_ENV).is_some() {
        SEEDS.to_vec()
    } else {
        vec![SEEDS[index % SEEDS.len()]]
    }
}

/// Parked and stepped agree on every figure that a retry could change, for every
/// accounting mode over its [`seeds_for`]; under `reported` (where a storm parks while only
/// the reachable nodes are full) parking processes `saving` times fewer events than
/// stepping, and never more in any mode. Returns
/// the parked runs, by mode then seed.
fn same(p: &Profile, saving: u64) -> Vec<(AccountingMode, Vec<SimRun>)> {
    AccountingMode::ALL
        .into_iter()
        .enumerate()
        .map(|(index, mode)| {
            let runs = seeds_for(index)
                .into_iter()
                .map(|seed| same_in(p, saving, mode, seed))
                .collect();
            (mode, runs)
        })
        .collect()
}

/// [`same`] for one accounting `mode` and `seed`.
fn same_in(p: &Profile, saving: u64, mode: AccountingMode, seed: u64) -> SimRun {
    let (fast, settles) = run(p, false, mode, seed);
    let (slow, _) = run(p, true, mode, seed);
    let (f, s) = (&fast.result, &slow.result);
    let at = format!("{} {mode} seed {seed}", p.name);
    let placed = |r: &stampede::report::RunResult| -> Vec<u64> {
        r.nodes.iter().map(|n| n.sandboxes).collect()
    };
    assert_eq!(placed(f), placed(s), "{at}: sandboxes per node");
    assert_eq!(f.statuses, s.statuses, "{at}: statuses");
    assert_eq!(f.retries, s.retries, "{at}: retries");
    assert_eq!(f.refusals, s.refusals, "{at}: refusals");
    assert_eq!(f.timeline, s.timeline, "{at}: timeline");
    assert_eq!(f.latency, s.latency, "{at}: latency");
    assert_eq!(fast.virtual_ns, slow.virtual_ns, "{at}: end time");
    assert!(f.refusals > 100, "{at}: a storm happened ({})", f.refusals);
    if settles {
        assert!(
            fast.events * saving < slow.events,
            "{at}: parking saves {saving}x the events ({} vs {})",
            fast.events,
            slow.events
        );
    } else {
        assert!(
            fast.events <= slow.events,
            "{at}: parking never costs events"
        );
    }
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
        7,
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
    let runs = same(
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
    for (mode, runs) in runs {
        for fast in runs {
            assert!(
                fast.result.statuses.get("503").copied().unwrap_or(0) > 0,
                "{mode}: {:?}",
                fast.result.statuses
            );
        }
    }
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
