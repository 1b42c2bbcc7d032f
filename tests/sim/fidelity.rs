//! Fidelity of the simulator against numbers known in closed form or from E2B
//! (docs/design.md section 3).

use std::path::Path;
use std::time::Duration;

use stampede::placement::AccountingMode;
use stampede::profile::{load_and_validate, parse, PlacementSection, Profile, Source};
use stampede::sim::simulate;

/// A fully frozen burst: no sync during it (`reported`), `n` equal nodes with distinct
/// stale baselines (node-00 idlest), nothing refused node-side.
fn frozen_burst(n: usize, k: usize, count: usize, seed: u64, max_starting: u32) -> Profile {
    let overrides: String = (0..n)
        .map(|i| format!("    node-{i:02}: {{baseline_vcpu: {{min: {i}, max: {i}}}}}\n"))
        .collect();
    let yaml = format!(
        "name: frozen-burst
seed: {seed}
cluster:
  nodes: {n}
  node:
    cpu_count: 64
    overcommit: 0
    max_sandboxes: 0
    max_starting: {max_starting}
    create_latency: {{dist: uniform, min: 1ms, max: 5ms}}
  overrides:
{overrides}placement:
  embedded:
    accounting: reported
    best_of_k: {{k: {k}}}
    sync_interval: 20s
workload:
  shape:
    burst: {{count: {count}}}
"
    );
    parse(&Source::inline("frozen-burst.yaml", yaml)).expect("test profile parses")
}

fn binomial(n: usize, k: usize) -> f64 {
    if k > n {
        return 0.0;
    }
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

/// Share of the node of stale rank r (1 = idlest): C(n-r, K-1) / C(n, K).
fn closed_form_shares(n: usize, k: usize) -> Vec<f64> {
    (1..=n)
        .map(|r| binomial(n - r, k - 1) / binomial(n, k))
        .collect()
}

fn cv(xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    var.sqrt() / mean
}

#[test]
fn frozen_burst_cv_matches_the_closed_form_for_k_2_3_5() {
    for (k, design) in [(2, 0.64), (3, 1.00), (5, 1.58)] {
        let exact = cv(&closed_form_shares(10, k));
        assert!((exact - design).abs() < 0.01, "K={k}: closed form {exact}");
        let seeds = 8;
        let mean_cv = (0..seeds)
            .map(|s| {
                let p = frozen_burst(10, k, 2000, 100 + s, 0);
                let run = simulate(&p, AccountingMode::Reported).expect("simulates");
                assert_eq!(run.ok, 2000, "K={k}: nothing may be refused");
                run.skew.cv
            })
            .sum::<f64>()
            / seeds as f64;
        assert!(
            (mean_cv - exact).abs() < 0.05,
            "K={k}: simulated CV {mean_cv:.3}, closed form {exact:.3}"
        );
    }
}

#[test]
fn frozen_burst_shares_follow_stale_rank() {
    let shares = closed_form_shares(10, 3);
    let run = simulate(&frozen_burst(10, 3, 4000, 7, 0), AccountingMode::Reported).unwrap();
    for (r, (&c, s)) in run.skew.counts.iter().zip(&shares).enumerate() {
        let expected = s * 4000.0;
        // 4 standard deviations of a binomial count.
        let tol = 4.0 * (4000.0 * s * (1.0 - s)).sqrt() + 1.0;
        assert!(
            (c as f64 - expected).abs() <= tol,
            "rank {}: {c} sandboxes, closed form {expected:.0}",
            r + 1
        );
    }
}

#[test]
fn seed_000_five_nodes_k3_burst_500_is_300_150_50_0_0() {
    let run = simulate(&frozen_burst(5, 3, 500, 0, 0), AccountingMode::Reported).unwrap();
    let c = &run.skew.counts;
    for (got, want) in c.iter().zip([300.0, 150.0, 50.0]) {
        assert!((*got as f64 - want).abs() <= 45.0, "{c:?}");
    }
    assert_eq!(
        &c[3..],
        &[0, 0],
        "ranks 4 and 5 can never win a best of 3: {c:?}"
    );
}

/// The burst with each refused Create costing `round_trip` before its retry, and
/// nothing else between a refusal and the retry's create (the API's times off).
fn with_round_trip(p: Profile, round_trip: Duration) -> Profile {
    let mut p = crate::support::api_times::off(p);
    match &mut p.placement {
        PlacementSection::Embedded(e) => e.rpc_round_trip = round_trip,
        PlacementSection::External(_) => unreachable!("an embedded test profile"),
    }
    p
}

/// Node-side `max_starting` (ResourceExhausted, retried without exclusion) moves the three
/// stale-idlest nodes toward even but cannot reach ranks 4 and 5: a best of 3 among 5
/// never picks them. So it does not explain the 59..145 spread of seed 000 on its own.
/// How far toward even depends on the retry period: a slot a node frees waits for the
/// next retry that draws the node, and rank 3 is drawn least. At 1 ms the three are even
/// within 20%; at E2B's measured round trip (the default) they stay apart, though less
/// than without the limit.
#[test]
fn node_side_max_starting_evens_the_top_three_but_never_reaches_ranks_4_and_5() {
    let frozen = simulate(&frozen_burst(5, 3, 500, 0, 0), AccountingMode::Reported).unwrap();
    let fast = with_round_trip(frozen_burst(5, 3, 500, 0, 3), Duration::from_millis(1));
    let fast = simulate(&fast, AccountingMode::Reported).unwrap();
    let measured = simulate(&frozen_burst(5, 3, 500, 0, 3), AccountingMode::Reported).unwrap();
    for limited in [&fast, &measured] {
        assert_eq!(limited.ok, 500);
        assert!(limited.refusals > 0, "max_starting 3 must refuse creates");
        let c = &limited.skew.counts;
        assert_eq!(&c[3..], &[0, 0], "{c:?}");
        assert!(limited.skew.cv < frozen.skew.cv, "{c:?}");
    }
    let c = &fast.skew.counts;
    for &top in &c[..3] {
        assert!(
            (top as f64 - 500.0 / 3.0).abs() < 500.0 / 3.0 * 0.2,
            "{c:?}"
        );
    }
    assert!(
        measured.skew.cv > fast.skew.cv,
        "{:?} against {c:?}",
        measured.skew.counts
    );
}

fn pr2201() -> Profile {
    load_and_validate(Path::new("profiles/e2b-pr2201.yaml")).expect("shipped profile")
}

#[test]
fn e2b_pr2201_optimistic_and_reconciled_are_even_and_reported_herds() {
    let p = pr2201();
    let reported = simulate(&p, AccountingMode::Reported).unwrap().skew.cv;
    for mode in [AccountingMode::Optimistic, AccountingMode::Reconciled] {
        let run = simulate(&p, mode).unwrap();
        assert_eq!(run.ok, 500, "{mode}");
        assert!(run.skew.cv <= 0.1, "{mode}: CV {}", run.skew.cv);
        assert!(
            reported > 5.0 * run.skew.cv,
            "reported {reported} vs {mode}"
        );
    }
}

/// The simulated nightly records its syncs (first 7 s in, then every 20 s) within its
/// timeline, for the report's charts to mark.
#[test]
fn a_simulated_run_records_when_its_syncs_ran() {
    let profile = load_and_validate(Path::new("profiles/nightly.yaml")).expect("valid");
    let report = stampede::sim::simulate_profile(&profile).expect("simulates");
    let run = &report.runs[0];
    let end = run.timeline.last().expect("samples").t_ms;
    let syncs = run
        .sync_at_ms
        .as_ref()
        .expect("the simulator knows its syncs");
    let expected: Vec<f64> = (0..)
        .map(|k| 7000.0 + 20_000.0 * k as f64)
        .take_while(|t| *t <= end)
        .collect();
    assert!(expected.len() >= 3, "{end}");
    assert_eq!(syncs, &expected);
}
