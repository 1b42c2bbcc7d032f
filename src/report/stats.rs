//! Figures computed from raw measurements: skew of per-node counts, latency summary.

use serde::{Deserialize, Serialize};

/// How evenly sandboxes are spread over nodes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SkewStats {
    /// Sandboxes per node, in node order.
    pub counts: Vec<u64>,
    /// Mean count.
    pub mean: f64,
    /// Population standard deviation.
    pub std_dev: f64,
    /// Coefficient of variation, std_dev / mean (0 when the mean is 0): E2B's figure.
    pub cv: f64,
    /// Smallest count.
    pub min: u64,
    /// Largest count.
    pub max: u64,
    /// max / mean (0 when the mean is 0).
    pub max_over_mean: f64,
    /// Jain's fairness index (sum x)^2 / (n * sum x^2): 1 = perfectly even, 1/n = all
    /// on one node (1 when every count is 0).
    pub jain: f64,
}

impl SkewStats {
    /// Statistics of `counts` (all zero for an empty slice).
    pub fn from_counts(counts: &[u64]) -> Self {
        if counts.is_empty() {
            return SkewStats::default();
        }
        let n = counts.len() as f64;
        let xs: Vec<f64> = counts.iter().map(|&c| c as f64).collect();
        let sum: f64 = xs.iter().sum();
        let mean = sum / n;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        let std_dev = var.sqrt();
        let sum_sq: f64 = xs.iter().map(|x| x * x).sum();
        let max = counts.iter().copied().max().unwrap_or(0);
        SkewStats {
            counts: counts.to_vec(),
            mean,
            std_dev,
            cv: if mean > 0.0 { std_dev / mean } else { 0.0 },
            min: counts.iter().copied().min().unwrap_or(0),
            max,
            max_over_mean: if mean > 0.0 { max as f64 / mean } else { 0.0 },
            jain: if sum_sq > 0.0 {
                sum * sum / (n * sum_sq)
            } else {
                1.0
            },
        }
    }
}

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencySummary {
    /// Samples recorded.
    pub count: u64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// 99.9th percentile.
    pub p999_ms: f64,
    /// Largest.
    pub max_ms: f64,
    /// Mean.
    pub mean_ms: f64,
}

impl LatencySummary {
    /// Summary of a histogram recorded in microseconds (all zero when empty).
    pub fn from_histogram(h: &hdrhistogram::Histogram<u64>) -> Self {
        if h.is_empty() {
            return LatencySummary::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        LatencySummary {
            count: h.len(),
            p50_ms: ms(h.value_at_quantile(0.50)),
            p90_ms: ms(h.value_at_quantile(0.90)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            p999_ms: ms(h.value_at_quantile(0.999)),
            max_ms: ms(h.max()),
            mean_ms: h.mean() / 1000.0,
        }
    }
}
