//! Frozen metrics (no sync during the burst): `reported` scoring reproduces the closed
//! form of docs/design.md section 3, the node of stale rank r gets C(n-r, K-1)/C(n, K) of the
//! placements; `optimistic` and `reconciled` spread the same burst evenly.

use crate::{
    AccountingMode, CreateOutcome, Decision, NodeMetrics, NodeStatus, PlacementAttempt,
    PlacementConfig, PlacementCore, SyncSnapshot,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const NODES: usize = 10;
const K: usize = 3;
const PLACEMENTS: usize = 2_000;
const SEED: u64 = 20_260_130;

/// Counts per node, node i having the i-th lowest stale baseline (rank i + 1).
fn burst(mode: AccountingMode) -> Vec<u64> {
    let mut core = PlacementCore::new(PlacementConfig {
        k: K,
        mode,
        ..PlacementConfig::default()
    });
    // Equal capacity, distinct stale baselines; listed in a shuffled order so that the
    // rank is not the insertion index.
    let order = [7usize, 2, 9, 0, 5, 3, 8, 1, 6, 4];
    for &rank in &order {
        let id = format!("rank-{rank:02}");
        core.add_node(id.clone());
        core.apply_sync(
            &id,
            SyncSnapshot {
                status: NodeStatus::Ready,
                metrics: NodeMetrics {
                    cpu_allocated: 3 * rank as u32,
                    cpu_count: 192,
                    ..NodeMetrics::default()
                },
                sandboxes: Some(Vec::new()),
                listed_now: None,
            },
        );
    }
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let mut counts = vec![0u64; NODES];
    for i in 0..PLACEMENTS {
        let mut att = PlacementAttempt::new(format!("sbx-{i}"), 1);
        let node = att.next(&mut core, &mut rng).expect("a node is chosen");
        let Decision::Placed(node2) = att.report(&mut core, CreateOutcome::Created) else {
            panic!("create reported ok must place");
        };
        assert_eq!(node, node2);
        let rank: usize = node["rank-".len()..].parse().unwrap();
        counts[rank] += 1;
    }
    assert!(core.nodes().all(|n| n.in_flight() == 0));
    counts
}

fn binom(n: usize, k: usize) -> f64 {
    if k > n {
        return 0.0;
    }
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

fn cv(counts: &[u64]) -> f64 {
    let n = counts.len() as f64;
    let mean = counts.iter().sum::<u64>() as f64 / n;
    let var = counts
        .iter()
        .map(|&c| (c as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    var.sqrt() / mean
}

/// ln Γ(x) (Lanczos, g = 7).
fn ln_gamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    let x = x - 1.0;
    let t = x + 7.5;
    let s = C[1..]
        .iter()
        .enumerate()
        .fold(C[0], |acc, (i, c)| acc + c / (x + i as f64 + 1.0));
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + s.ln()
}

/// Upper regularized incomplete gamma Q(a, x): the chi-square survival function is
/// Q(df / 2, stat / 2).
fn gamma_q(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 1.0;
    }
    let ln_front = a * x.ln() - x - ln_gamma(a);
    if x < a + 1.0 {
        let (mut sum, mut term, mut ap) = (1.0 / a, 1.0 / a, a);
        for _ in 0..500 {
            ap += 1.0;
            term *= x / ap;
            sum += term;
            if term.abs() < sum.abs() * 1e-15 {
                break;
            }
        }
        1.0 - sum * ln_front.exp()
    } else {
        // Lentz's continued fraction.
        let tiny = 1e-300;
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / tiny;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..500 {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            d = if d.abs() < tiny { tiny } else { d };
            c = b + an / c;
            c = if c.abs() < tiny { tiny } else { c };
            d = 1.0 / d;
            let del = d * c;
            h *= del;
            if (del - 1.0).abs() < 1e-15 {
                break;
            }
        }
        ln_front.exp() * h
    }
}

#[test]
fn gamma_q_matches_known_chi_square_quantiles() {
    // chi2(df=7) upper 0.001 quantile is 24.322; chi2(df=1) upper 0.05 is 3.841.
    assert!((gamma_q(3.5, 24.322 / 2.0) - 0.001).abs() < 2e-5);
    assert!((gamma_q(0.5, 3.841 / 2.0) - 0.05).abs() < 2e-4);
}

#[test]
fn reported_mode_matches_the_closed_form_per_rank() {
    let counts = burst(AccountingMode::Reported);
    let total = binom(NODES, K);
    let expected: Vec<f64> = (1..=NODES)
        .map(|r| PLACEMENTS as f64 * binom(NODES - r, K - 1) / total)
        .collect();
    // Ranks that can never win (expected 0) must get nothing.
    for (r, (&e, &o)) in expected.iter().zip(&counts).enumerate() {
        if e == 0.0 {
            assert_eq!(o, 0, "rank {} can never win a triple but got {o}", r + 1);
        }
    }
    // Merge tail ranks with expected count < 5 into the group before them.
    let mut groups: Vec<(f64, f64)> = Vec::new();
    let mut carry = (0.0, 0.0);
    for r in (0..NODES).rev() {
        carry.0 += expected[r];
        carry.1 += counts[r] as f64;
        if carry.0 >= 5.0 {
            groups.push(carry);
            carry = (0.0, 0.0);
        }
    }
    if let Some(last) = groups.last_mut() {
        last.0 += carry.0;
        last.1 += carry.1;
    }
    let stat: f64 = groups.iter().map(|(e, o)| (o - e).powi(2) / e).sum();
    let df = groups.len() - 1;
    let p = gamma_q(df as f64 / 2.0, stat / 2.0);
    eprintln!("reported counts per rank {counts:?}, chi2 = {stat:.2}, df = {df}, p = {p:.4}");
    assert!(p > 0.001, "per-rank shares reject the closed form: p = {p}");
    let c = cv(&counts);
    assert!(
        (c - 1.0).abs() < 0.1,
        "CV {c} should be near the closed form's 1.00"
    );
}

#[test]
fn optimistic_and_reconciled_spread_the_burst() {
    for mode in [AccountingMode::Optimistic, AccountingMode::Reconciled] {
        let counts = burst(mode);
        let c = cv(&counts);
        eprintln!("{mode}: counts {counts:?}, CV {c:.4}");
        assert!(c < 0.1, "{mode}: CV {c} >= 0.1 ({counts:?})");
    }
}

#[test]
fn in_flight_only_does_not_help_when_creates_end_at_once() {
    // Creates end before the next decision, so in-flight accounting sees nothing.
    assert_eq!(
        burst(AccountingMode::InFlight),
        burst(AccountingMode::Reported)
    );
}
