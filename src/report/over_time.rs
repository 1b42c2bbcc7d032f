//! Skew over time, the retry storm and latency over time: figures that mean something
//! when sandboxes come and go (the final counts of a run with lifetimes are all zero),
//! when E2B's no-backoff ResourceExhausted loop hammers full nodes, and when a fault
//! slows creates down for a while.

use serde::{Deserialize, Serialize};

use super::model::TimelinePoint;
use super::stats::SkewStats;

/// Skew of where creates landed and of what ran, over the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SkewOverTime {
    /// Creates that landed (201) per node over the whole run, and their spread: the
    /// herd figure of a burst (`placements.cv`, check `placements_cv`).
    pub placements: SkewStats,
    /// Time-weighted mean, over the steady window, of the CV of running sandboxes per
    /// node (check `running_cv_mean`).
    pub running_cv_mean: f64,
    /// Largest CV of running sandboxes per node at a sample of the steady window
    /// (check `running_cv_peak`).
    pub running_cv_peak: f64,
    /// Start of the steady window, ms: the first sample with at least half the run's
    /// peak of running sandboxes.
    pub steady_from_ms: f64,
    /// End of the steady window, ms: the last such sample.
    pub steady_to_ms: f64,
    /// Samples in the steady window.
    pub steady_samples: u64,
}

impl SkewOverTime {
    /// The figures of `timeline` (running sandboxes per node at each sample) and
    /// `placements` (creates that landed per node); `None` without a sample.
    pub fn from_timeline(timeline: &[TimelinePoint], placements: &[u64]) -> Option<Self> {
        let totals: Vec<u64> = timeline.iter().map(|p| p.sandboxes.iter().sum()).collect();
        let peak = totals.iter().copied().max()?;
        // Half the peak, rounded up, and at least one sandbox: an empty fleet has no skew.
        let floor = peak.div_ceil(2).max(1);
        let steady: Vec<usize> = (0..timeline.len())
            .filter(|&i| totals[i] >= floor)
            .collect();
        let placements = SkewStats::from_counts(placements);
        let (Some(&first), Some(&last)) = (steady.first(), steady.last()) else {
            return Some(SkewOverTime {
                placements,
                ..SkewOverTime::default()
            });
        };
        let cv = |i: usize| SkewStats::from_counts(&timeline[i].sandboxes).cv;
        let mut peak_cv: f64 = 0.0;
        let (mut weighted, mut span) = (0.0, 0.0);
        for &i in &steady {
            let c = cv(i);
            peak_cv = peak_cv.max(c);
            // Left-point rule: a sample holds until the next one (within the window).
            if i < last {
                let dt = timeline[i + 1].t_ms - timeline[i].t_ms;
                if dt > 0.0 {
                    weighted += c * dt;
                    span += dt;
                }
            }
        }
        let mean = if span > 0.0 {
            weighted / span
        } else {
            cv(first)
        };
        Some(SkewOverTime {
            placements,
            running_cv_mean: mean,
            running_cv_peak: peak_cv,
            steady_from_ms: timeline[first].t_ms,
            steady_to_ms: timeline[last].t_ms,
            steady_samples: steady.len() as u64,
        })
    }
}

/// ResourceExhausted retries per second of the run, in total and per node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RetryStorm {
    /// Retries in each second of the run (index = second since the start).
    pub per_second: Vec<u64>,
    /// Largest entry of `per_second` (check `retries_per_s_peak`).
    pub peak_per_second: u64,
    /// The second it happened in.
    pub peak_second: u64,
    /// Per node (in node order): its largest retries in one second.
    pub node_peak_per_second: Vec<u64>,
    /// Per node: retries over the whole run.
    pub node_total: Vec<u64>,
}

impl RetryStorm {
    /// From per-second rows of per-node retry counts (rows may be empty: no retry that
    /// second); `nodes` is the node count. `None` when there was no retry at all.
    pub fn from_bins(bins: &[Vec<u64>], nodes: usize) -> Option<Self> {
        let mut storm = RetryStorm {
            per_second: Vec::with_capacity(bins.len()),
            node_peak_per_second: vec![0; nodes],
            node_total: vec![0; nodes],
            ..RetryStorm::default()
        };
        for (s, row) in bins.iter().enumerate() {
            let total: u64 = row.iter().sum();
            storm.per_second.push(total);
            if total > storm.peak_per_second {
                storm.peak_per_second = total;
                storm.peak_second = s as u64;
            }
            for (k, &c) in row.iter().enumerate().take(nodes) {
                storm.node_peak_per_second[k] = storm.node_peak_per_second[k].max(c);
                storm.node_total[k] += c;
            }
        }
        (storm.peak_per_second > 0).then_some(storm)
    }
}

/// Create latency over the run: p50 and p99 of the creates meant to leave in each time
/// bin (binned by intended send time, the origin of their latency, so that a create
/// sent into a fault window counts in that window).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencyOverTime {
    /// Width of a bin, ms: one second, doubled as often as it takes to keep a long run
    /// within [`LatencyOverTime::MAX_BINS`] bins.
    pub bin_ms: f64,
    /// The bins that hold at least one answered create, in time order.
    pub bins: Vec<LatencyBin>,
}

impl LatencyOverTime {
    /// Most bins a run keeps (ten minutes of one-second bins).
    pub const MAX_BINS: usize = 600;
}

/// Create latency of the creates meant to leave in one bin of [`LatencyOverTime`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencyBin {
    /// Start of the bin, ms since the workload started.
    pub from_ms: f64,
    /// Creates answered (any outcome) whose intended send time is in the bin.
    pub count: u64,
    /// Their median latency, ms (within 1%).
    pub p50_ms: f64,
    /// Their 99th percentile latency, ms (within 1%).
    pub p99_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(t_ms: f64, sandboxes: &[u64]) -> TimelinePoint {
        TimelinePoint {
            t_ms,
            sandboxes: sandboxes.to_vec(),
            ..TimelinePoint::default()
        }
    }

    #[test]
    fn steady_window_is_the_plateau_and_the_mean_is_time_weighted() {
        let t = [
            point(0.0, &[0, 0]),
            point(1000.0, &[1, 0]), // total 1 < 2: ramp, outside
            point(2000.0, &[2, 2]), // cv 0, holds 1 s
            point(3000.0, &[3, 1]), // cv 0.5, holds 3 s
            point(6000.0, &[2, 2]), // last in window
            point(7000.0, &[0, 0]),
        ];
        let s = SkewOverTime::from_timeline(&t, &[10, 30]).expect("samples");
        assert_eq!((s.steady_from_ms, s.steady_to_ms), (2000.0, 6000.0));
        assert_eq!(s.steady_samples, 3);
        assert!((s.running_cv_mean - 0.5 * 3.0 / 4.0).abs() < 1e-12);
        assert!((s.running_cv_peak - 0.5).abs() < 1e-12);
        assert!((s.placements.cv - 0.5).abs() < 1e-12);
    }

    #[test]
    fn empty_fleet_has_no_window() {
        let s = SkewOverTime::from_timeline(&[point(0.0, &[0, 0])], &[0, 0]).expect("a sample");
        assert_eq!(s.steady_samples, 0);
        assert!(SkewOverTime::from_timeline(&[], &[]).is_none());
    }

    #[test]
    fn storm_peaks() {
        let s = RetryStorm::from_bins(&[vec![1, 2], vec![], vec![5, 0]], 2).expect("retries");
        assert_eq!(s.per_second, vec![3, 0, 5]);
        assert_eq!((s.peak_per_second, s.peak_second), (5, 2));
        assert_eq!(s.node_peak_per_second, vec![5, 2]);
        assert_eq!(s.node_total, vec![6, 2]);
        assert!(RetryStorm::from_bins(&[vec![0, 0]], 2).is_none());
    }
}
