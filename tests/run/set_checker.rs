//! One rule decides whether a run keeps its client ledger for the set checker, for a
//! real run and a simulation alike: a `lost` check named only under `checks.per_mode`
//! runs the checker in both (the real run used to ignore `per_mode` here).

use crate::support::inline_run;

use std::time::Duration;

use inline_run::run_inline;
use stampede::aggregate::needs_set_checker;
use stampede::profile::{parse, Source};
use stampede::report::RunResult;
use stampede::sim::simulate_profile;

const PROFILE: &str = "name: per-mode-lost
seed: 9
cluster:
  nodes: 2
placement:
  embedded:
    accounting: optimistic
    best_of_k: {k: 2}
    sync_interval: 2s
workload:
  shape:
    burst: {count: 6}
  sandbox: {template: base, vcpu: 1, ram_mb: 256, timeout: 60s}
collect:
  interval: 250ms
checks:
  per_mode:
    optimistic:
      lost: {max: 0}
";

fn checked(r: &RunResult) -> (u64, u64) {
    let c = r.checker.as_ref().expect("the set checker ran");
    (c.lost.count, c.duplicated.count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_mode_lost_check_runs_the_set_checker_in_a_run_and_in_a_sim() {
    let profile = parse(&Source::inline("per-mode-lost", PROFILE)).expect("profile parses");
    assert!(profile.chaos.is_empty() && profile.checks.lost.is_none());
    assert!(needs_set_checker(&profile));

    let sim = simulate_profile(&profile).expect("simulates");
    let sim = sim.runs.first().expect("one simulated run");
    assert_eq!(sim.ok, 6, "{:?}", sim.statuses);
    assert_eq!(checked(sim), (0, 0));

    let (_dir, out) = run_inline("per-mode-lost", PROFILE, Duration::from_secs(60)).await;
    assert!(!out.report.incomplete, "{:?}", out.report.incomplete_reason);
    let real = out.report.runs.first().expect("one real run");
    assert_eq!(real.ok, 6, "{:?}", real.statuses);
    assert_eq!(checked(real), (0, 0));
}
