//! The goose test-plan shape in simulation: a closed model of users.

use stampede::placement::AccountingMode;
use stampede::profile::{parse, Source};
use stampede::sim::{plan_users, simulate, CLIENT_ROUND_TRIP};

#[test]
fn plan_users_ramp_up_hold_and_ramp_down_last_in_first_out() {
    let s = |x: f64| (x * 1e9) as u64;
    let spans = plan_users("5,1s;5,2s;0,1s").unwrap();
    let want: Vec<(u64, u64)> = (0..5)
        .map(|k| (s(0.2 * k as f64), s(4.0 - 0.2 * k as f64)))
        .collect();
    assert_eq!(spans, want);
    assert!(plan_users("0,1s").is_err());
    assert!(plan_users("x,1s").is_err());
}

#[test]
fn each_plan_user_sends_back_to_back_while_active() {
    let yaml = "name: plan
seed: 3
cluster:
  nodes: 4
  node: {overcommit: 0, max_sandboxes: 0, max_starting: 0,
         create_latency: {dist: constant, value: 1ms}}
placement:
  embedded: {accounting: optimistic, api_stage: {time: {dist: constant, value: 0ms}}}
workload:
  shape:
    plan: {steps: \"5,1s;5,2s;0,1s\"}
";
    let p = crate::support::api_times::off(parse(&Source::inline("plan.yaml", yaml)).unwrap());
    let run = simulate(&p, AccountingMode::Optimistic).unwrap();
    // Users are active 4.0 + 3.6 + 3.2 + 2.8 + 2.4 = 16 s in all; one create cycle is
    // the 1 ms create plus one client round trip (the API stage and times are off here).
    let cycle = 0.001 + CLIENT_ROUND_TRIP as f64 * 1e-9;
    let expected = 16.0 / cycle;
    let got = run.requests as f64;
    assert!(
        (got - expected).abs() / expected < 0.02,
        "{got} vs {expected}"
    );
    assert_eq!(run.ok, run.requests);
    assert!(run.skew.cv < 0.1, "{:?}", run.skew.counts);
}
