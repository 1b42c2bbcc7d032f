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
}

impl LatencyDist {
    /// Whether the parameters describe a real distribution.
    pub fn check(&self) -> Result<(), String> {
        match self {
            LatencyDist::Uniform { min, max } if min > max => Err("min must be <= max".into()),
            LatencyDist::Lognormal { sigma, .. } if !(*sigma >= 0.0 && sigma.is_finite()) => {
                Err("sigma must be a finite number >= 0".into())
            }
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
        }
    }
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
