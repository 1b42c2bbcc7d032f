//! The seeded latency distributions of the project: how long a node takes to create or
//! delete a sandbox (the node model), and how long a request spends in the API before its
//! placement decision (the placement core's API stage). One type, one sampler, one check.
#![deny(missing_docs)]

use std::time::Duration;

use rand_distr::{Distribution, Exp, LogNormal};
use serde::{Deserialize, Serialize};

/// A seeded latency distribution. YAML: `{dist: uniform, min: 0ms, max: 2ms}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "dist", rename_all = "lowercase", deny_unknown_fields)]
pub enum LatencyDist {
    /// Always `value`.
    Constant {
        /// The latency.
        #[serde(with = "humantime_serde")]
        #[schemars(with = "String")]
        value: Duration,
    },
    /// Uniform in `[min, max]`.
    Uniform {
        /// Lower bound.
        #[serde(with = "humantime_serde")]
        #[schemars(with = "String")]
        min: Duration,
        /// Upper bound.
        #[serde(with = "humantime_serde")]
        #[schemars(with = "String")]
        max: Duration,
    },
    /// Exponential with the given mean.
    Exponential {
        /// Mean latency.
        #[serde(with = "humantime_serde")]
        #[schemars(with = "String")]
        mean: Duration,
    },
    /// Log-normal with the given median and shape `sigma` (of the underlying normal).
    Lognormal {
        /// Median latency (`exp(mu)`).
        #[serde(with = "humantime_serde")]
        #[schemars(with = "String")]
        median: Duration,
        /// Standard deviation of the underlying normal.
        sigma: f64,
    },
    /// Piecewise linear between measured percentiles: a draw at a uniform percentile
    /// `u` in `[0, 100]` interpolates between the two points around it. YAML:
    /// `{dist: quantiles, points: [{p: 0, value: 1ms}, {p: 50, value: 2ms}, {p: 100,
    /// value: 90ms}]}`; the points run from `p: 0` to `p: 100` with values that never
    /// fall: a probe's percentiles taken as they were measured.
    Quantiles {
        /// The measured percentiles, in increasing `p`.
        points: Vec<Quantile>,
    },
}

/// One measured percentile of a [`LatencyDist::Quantiles`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Quantile {
    /// The percentile, in `[0, 100]`.
    pub p: f64,
    /// The latency at it.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "String")]
    pub value: Duration,
}

/// Most points a [`LatencyDist::Quantiles`] may have (a bound on a draw's search).
pub const MAX_QUANTILE_POINTS: usize = 1_000;

impl LatencyDist {
    /// Whether the parameters describe a real distribution.
    pub fn check(&self) -> Result<(), String> {
        match self {
            LatencyDist::Uniform { min, max } if min > max => Err("min must be <= max".into()),
            LatencyDist::Lognormal { sigma, .. } if !(*sigma >= 0.0 && sigma.is_finite()) => {
                Err("sigma must be a finite number >= 0".into())
            }
            LatencyDist::Quantiles { points } => check_points(points),
            _ => Ok(()),
        }
    }
}

impl LatencyDist {
    /// One latency drawn from the distribution with `rng`.
    ///
    /// Never panics: parameters that no distribution accepts (which
    /// [`LatencyDist::check`] reports) degrade to the central value.
    pub fn sample<R: rand::Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        match *self {
            LatencyDist::Constant { value } => value,
            LatencyDist::Uniform { min, max } => {
                if max <= min {
                    return min;
                }
                let span = (max - min).as_nanos().min(u128::from(u64::MAX)) as u64;
                min + Duration::from_nanos(rng.random_range(0..=span))
            }
            LatencyDist::Exponential { mean } => {
                let m = mean.as_secs_f64();
                if m <= 0.0 {
                    return Duration::ZERO;
                }
                match Exp::new(1.0 / m) {
                    Ok(d) => secs(d.sample(rng)),
                    Err(_) => mean,
                }
            }
            LatencyDist::Lognormal { median, sigma } => {
                let m = median.as_secs_f64();
                if m <= 0.0 {
                    return Duration::ZERO;
                }
                match LogNormal::new(m.ln(), sigma) {
                    Ok(d) => secs(d.sample(rng)),
                    Err(_) => median,
                }
            }
            LatencyDist::Quantiles { ref points } => interpolate(points, rng.random::<f64>()),
        }
    }

    /// The latency the distribution never exceeds, when it has one (`None` for the
    /// unbounded exponential and log-normal).
    pub fn max(&self) -> Option<Duration> {
        match self {
            LatencyDist::Constant { value } => Some(*value),
            LatencyDist::Uniform { min, max } => Some(*min.max(max)),
            LatencyDist::Exponential { .. } | LatencyDist::Lognormal { .. } => None,
            LatencyDist::Quantiles { points } => points.iter().map(|q| q.value).max(),
        }
    }

    /// The percentile `p` (in `[0, 100]`) of a [`LatencyDist::Quantiles`], `None` for
    /// the other shapes.
    pub fn quantile(&self, p: f64) -> Option<Duration> {
        match self {
            LatencyDist::Quantiles { points } => {
                Some(interpolate(points, (p / 100.0).clamp(0.0, 1.0)))
            }
            _ => None,
        }
    }

    /// Whether every draw is zero (a stage set this way is off and draws nothing).
    pub fn is_zero(&self) -> bool {
        self.max().is_some_and(|m| m.is_zero())
    }
}

/// The points of a [`LatencyDist::Quantiles`] describe a distribution.
fn check_points(points: &[Quantile]) -> Result<(), String> {
    if points.len() < 2 || points.len() > MAX_QUANTILE_POINTS {
        return Err(format!(
            "points must have 2 to {MAX_QUANTILE_POINTS} entries, from p 0 to p 100"
        ));
    }
    if points.first().is_some_and(|q| q.p != 0.0) || points.last().is_some_and(|q| q.p != 100.0) {
        return Err("points must start at p 0 and end at p 100".into());
    }
    for w in points.windows(2) {
        if w[0].p.partial_cmp(&w[1].p) != Some(std::cmp::Ordering::Less) {
            return Err("points' p must increase strictly".into());
        }
        if w[1].value < w[0].value {
            return Err("points' values must not fall as p grows".into());
        }
    }
    Ok(())
}

/// The latency at fraction `u` in `[0, 1)` of the way through `points` (percentiles),
/// linear between the two points around it; degenerate points give their middle value.
fn interpolate(points: &[Quantile], u: f64) -> Duration {
    let p = u * 100.0;
    let Some(i) = points.iter().position(|q| q.p >= p) else {
        return points.last().map_or(Duration::ZERO, |q| q.value);
    };
    let hi = &points[i];
    let Some(lo) = i.checked_sub(1).and_then(|j| points.get(j)) else {
        return hi.value;
    };
    let span = hi.p - lo.p;
    if span.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) || hi.value <= lo.value {
        return lo.value;
    }
    let f = ((p - lo.p) / span).clamp(0.0, 1.0);
    lo.value + (hi.value - lo.value).mul_f64(f)
}

/// Seconds to a `Duration`, clamped to a day so a heavy tail cannot overflow.
fn secs(s: f64) -> Duration {
    if s.is_finite() && s > 0.0 {
        Duration::from_secs_f64(s.min(86_400.0))
    } else {
        Duration::ZERO
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn uniform_stays_in_bounds_and_is_seeded() {
        let d = LatencyDist::Uniform {
            min: ms(2),
            max: ms(5),
        };
        let mut a = ChaCha8Rng::seed_from_u64(7);
        let mut b = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..1000 {
            let x = d.sample(&mut a);
            assert!(x >= ms(2) && x <= ms(5));
            assert_eq!(x, d.sample(&mut b));
        }
    }

    #[test]
    fn exponential_and_lognormal_centre_where_asked() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let e = LatencyDist::Exponential { mean: ms(10) };
        let mean: f64 = (0..20_000)
            .map(|_| e.sample(&mut rng).as_secs_f64())
            .sum::<f64>()
            / 20_000.0;
        assert!((mean - 0.010).abs() < 0.001, "mean {mean}");
        let l = LatencyDist::Lognormal {
            median: ms(10),
            sigma: 0.5,
        };
        let mut xs: Vec<Duration> = (0..20_001).map(|_| l.sample(&mut rng)).collect();
        xs.sort();
        let med = xs[10_000].as_secs_f64();
        assert!((med - 0.010).abs() < 0.001, "median {med}");
    }

    fn points(ps: &[(f64, u64)]) -> LatencyDist {
        LatencyDist::Quantiles {
            points: ps
                .iter()
                .map(|&(p, v)| Quantile { p, value: ms(v) })
                .collect(),
        }
    }

    #[test]
    fn quantiles_give_back_their_percentiles() {
        let d = points(&[(0.0, 1), (50.0, 2), (95.0, 60), (100.0, 150)]);
        assert!(d.check().is_ok());
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut xs: Vec<Duration> = (0..40_000).map(|_| d.sample(&mut rng)).collect();
        xs.sort();
        let at = |q: f64| xs[((xs.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
        assert!((at(0.5) - 2.0).abs() < 0.5, "p50 {}", at(0.5));
        assert!((at(0.95) - 60.0).abs() < 6.0, "p95 {}", at(0.95));
        assert!(xs[0] >= ms(1) && *xs.last().unwrap() <= ms(150));
        assert_eq!(d.max(), Some(ms(150)));
        assert!(!d.is_zero());
        assert!(points(&[(0.0, 0), (100.0, 0)]).is_zero());
    }

    #[test]
    fn quantiles_out_of_shape_are_refused() {
        assert!(points(&[(0.0, 1)]).check().is_err());
        assert!(points(&[(5.0, 1), (100.0, 2)]).check().is_err());
        assert!(points(&[(0.0, 1), (90.0, 2)]).check().is_err());
        assert!(points(&[(0.0, 3), (100.0, 2)]).check().is_err());
        assert!(points(&[(0.0, 1), (0.0, 1), (100.0, 2)]).check().is_err());
        // Sampling a refused shape still never panics.
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for d in [points(&[(0.0, 3), (100.0, 2)]), points(&[(50.0, 1)])] {
            let _ = d.sample(&mut rng);
        }
        assert_eq!(
            LatencyDist::Quantiles { points: vec![] }.sample(&mut rng),
            Duration::ZERO
        );
    }

    #[test]
    fn degenerate_parameters_do_not_panic() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let bad = LatencyDist::Lognormal {
            median: ms(1),
            sigma: f64::NAN,
        };
        assert_eq!(bad.sample(&mut rng), ms(1));
        let inv = LatencyDist::Uniform {
            min: ms(5),
            max: ms(1),
        };
        assert_eq!(inv.sample(&mut rng), ms(5));
    }
}
