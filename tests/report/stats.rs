//! SkewStats and LatencySummary against figures computed by hand.

use stampede::report::{AccountingError, Finding, LatencySummary, SkewStats};

fn close(a: f64, b: f64, eps: f64) -> bool {
    (a - b).abs() <= eps
}

/// The design's frozen-burst shape: 5 nodes, K=3, 500 requests -> 300/150/50/0/0.
/// By hand: mean 500/5 = 100; deviations 200, 50, -50, -100, -100; squares sum to
/// 65000; variance 13000; std sqrt(13000) = 114.0175425; CV 1.140175;
/// Jain = 500^2 / (5 * (300^2 + 150^2 + 50^2)) = 250000 / 575000 = 0.4347826.
#[test]
fn skew_of_the_frozen_burst_matches_hand_computation() {
    let s = SkewStats::from_counts(&[300, 150, 50, 0, 0]);
    assert_eq!(s.counts, vec![300, 150, 50, 0, 0]);
    assert!(close(s.mean, 100.0, 1e-12), "mean {}", s.mean);
    assert!(close(s.std_dev, 114.017_542_5, 1e-6), "std {}", s.std_dev);
    assert!(close(s.cv, 1.140_175_425, 1e-8), "cv {}", s.cv);
    assert!(close(s.jain, 0.434_782_608_7, 1e-9), "jain {}", s.jain);
    assert_eq!((s.min, s.max), (0, 300));
    assert!(close(s.max_over_mean, 3.0, 1e-12));
}

/// Two nodes 4 and 0: mean 2, std 2, CV 1, Jain 16 / (2 * 16) = 0.5 (= 1/n).
#[test]
fn all_on_one_of_two_nodes() {
    let s = SkewStats::from_counts(&[4, 0]);
    assert!(close(s.std_dev, 2.0, 1e-12));
    assert!(close(s.cv, 1.0, 1e-12));
    assert!(close(s.jain, 0.5, 1e-12));
    assert!(close(s.max_over_mean, 2.0, 1e-12));
}

#[test]
fn even_and_empty_spreads_are_perfectly_fair() {
    let even = SkewStats::from_counts(&[7, 7, 7, 7]);
    assert_eq!((even.cv, even.jain, even.max_over_mean), (0.0, 1.0, 1.0));
    let zeros = SkewStats::from_counts(&[0, 0, 0]);
    assert_eq!(
        (zeros.mean, zeros.cv, zeros.jain, zeros.max_over_mean),
        (0.0, 0.0, 1.0, 0.0)
    );
    let none = SkewStats::from_counts(&[]);
    assert!(none.counts.is_empty());
    assert_eq!(none.cv, 0.0);
}

/// Values 1..=1000 us recorded once each: hdrhistogram is exact below 2048 with 3
/// significant digits, so the percentiles are the order statistics.
#[test]
fn latency_summary_from_a_microsecond_histogram() {
    let mut h = hdrhistogram::Histogram::<u64>::new(3).expect("histogram");
    for us in 1..=1000u64 {
        h.record(us).expect("record");
    }
    let l = LatencySummary::from_histogram(&h);
    assert_eq!(l.count, 1000);
    assert!(close(l.p50_ms, 0.5, 1e-9), "p50 {}", l.p50_ms);
    assert!(close(l.p90_ms, 0.9, 1e-9), "p90 {}", l.p90_ms);
    assert!(close(l.p99_ms, 0.99, 1e-9), "p99 {}", l.p99_ms);
    assert!(close(l.p999_ms, 0.999, 1e-9), "p99.9 {}", l.p999_ms);
    assert!(close(l.max_ms, 1.0, 1e-9), "max {}", l.max_ms);
    assert!(close(l.mean_ms, 0.5005, 1e-6), "mean {}", l.mean_ms);
    let empty = hdrhistogram::Histogram::<u64>::new(3).expect("histogram");
    assert_eq!(
        LatencySummary::from_histogram(&empty),
        LatencySummary::default()
    );
}

/// |1-3| = 2, |5-5| = 0, |2-6| = 4: mean 2, max 4.
#[test]
fn accounting_error_is_mean_and_max_of_absolute_differences() {
    let a = AccountingError::from_pairs([(1.0, 3.0), (5.0, 5.0), (2.0, 6.0)]).expect("pairs");
    assert_eq!((a.mean_abs_vcpu, a.max_abs_vcpu, a.samples), (2.0, 4.0, 3));
    assert!(AccountingError::from_pairs([]).is_none());
}

#[test]
fn finding_keeps_the_count_and_the_first_twenty_sorted_ids() {
    let f = Finding::from_ids((0..25).rev().map(|i| format!("sb-{i:02}")));
    assert_eq!(f.count, 25);
    assert_eq!(f.ids.len(), 20);
    assert_eq!(f.ids.first().map(String::as_str), Some("sb-00"));
    assert_eq!(f.ids.last().map(String::as_str), Some("sb-19"));
}

proptest::proptest! {
    /// For any counts: CV >= 0, 1/n <= Jain <= 1, max/mean >= 1 when mean > 0, and an
    /// even spread has CV 0 and Jain 1.
    #[test]
    fn skew_invariants(counts in proptest::collection::vec(0u64..10_000, 1..64)) {
        let s = SkewStats::from_counts(&counts);
        let n = counts.len() as f64;
        proptest::prop_assert!(s.cv >= 0.0);
        proptest::prop_assert!(s.jain <= 1.0 + 1e-12 && s.jain >= 1.0 / n - 1e-12, "jain {}", s.jain);
        if s.mean > 0.0 {
            proptest::prop_assert!(s.max_over_mean >= 1.0 - 1e-12);
            // Jain and CV are two views of one spread: J = 1 / (1 + CV^2).
            proptest::prop_assert!((s.jain - 1.0 / (1.0 + s.cv * s.cv)).abs() < 1e-9);
        }
        let even = SkewStats::from_counts(&vec![counts[0]; counts.len()]);
        proptest::prop_assert!(even.cv == 0.0 && even.jain == 1.0);
    }
}
