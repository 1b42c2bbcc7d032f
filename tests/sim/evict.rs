//! The simulator drives E2B's evictor (`packages/api/internal/orchestrator/evictor/evict.go`):
//! a sandbox is killed through Delete at its end time, which removes its optimistic
//! vCPU at once instead of at the next sync.

use stampede::placement::AccountingMode;
use stampede::profile::{parse, Source};
use stampede::sim::{simulate_setup, SimBudget, SimSetup};

const PROFILE: &str = "name: evict
cluster:
  nodes: 4
  node: {cpu_count: 64, create_latency: {dist: constant, value: 2ms}}
placement:
  embedded:
    accounting: optimistic
    sync_interval: 1h
workload:
  shape:
    rate: {per_second: 10, duration: 20s}
  sandbox: {template: base, vcpu: 1, ram_mb: 512, timeout: 2s}
collect:
  interval: 500ms
";

/// With no sync during the run (1 h period) only the evictor can tell the optimistic
/// belief that the 2 s sandboxes ended: about 20 run at a time, 200 are created, and
/// the belief follows the ~20, not the 200.
#[test]
fn the_optimistic_belief_follows_expiries_without_a_sync() {
    let p = parse(&Source::inline("evict.yaml", PROFILE.to_string())).expect("parses");
    let setup = SimSetup::from_profile(&p, AccountingMode::Optimistic).expect("setup");
    let run = simulate_setup(
        &setup,
        "t".into(),
        Default::default(),
        &SimBudget::default(),
    )
    .expect("simulates");
    let r = &run.result;
    assert_eq!(r.ok, 200, "{:?}", r.statuses);
    let err = r
        .accounting_error
        .expect("the timeline measures the belief");
    println!("accounting error: {err:?}");
    // Per node: ~5 live sandboxes; without eviction the belief grows to ~50.
    assert!(err.max_abs_vcpu <= 2.0, "{err:?}");
}
