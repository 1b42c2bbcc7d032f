//! [`Spread`]: one figure over several runs (seeds, trials, phases): its mean, both
//! standard deviations, median and range.

use serde::Serialize;

/// Mean, standard deviations, median, min and max of a series (all zero when empty).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Spread {
    /// Values.
    pub n: usize,
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation (n - 1), as for a few runs standing for many (an A/B's
    /// bound); 0 for one value. Written as `sd`.
    #[serde(rename = "sd")]
    pub sample_sd: f64,
    /// Population standard deviation (n), as for the very seeds simulated (a sweep).
    #[serde(skip)]
    pub population_sd: f64,
    /// Least value.
    pub min: f64,
    /// Greatest value.
    pub max: f64,
    /// Middle value (the mean of the two middle ones for an even count).
    pub median: f64,
}

impl Spread {
    /// The spread of `xs`.
    pub fn of(xs: &[f64]) -> Spread {
        let n = xs.len();
        if n == 0 {
            return Spread::default();
        }
        let mean = xs.iter().sum::<f64>() / n as f64;
        let squares = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>();
        Spread {
            n,
            mean,
            sample_sd: if n > 1 {
                (squares / (n - 1) as f64).sqrt()
            } else {
                0.0
            },
            population_sd: (squares / n as f64).sqrt(),
            min: xs.iter().copied().fold(f64::INFINITY, f64::min),
            max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            median: median(xs),
        }
    }
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len().is_multiple_of(2) {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_the_middle_value_or_the_mean_of_the_two_middle_ones() {
        assert_eq!(Spread::of(&[9.0, 1.0, 4.0]).median, 4.0);
        assert_eq!(Spread::of(&[9.0, 1.0, 4.0, 2.0]).median, 3.0);
        assert_eq!(Spread::of(&[100.0, 1.0, 2.0]).mean, 103.0 / 3.0);
    }

    #[test]
    fn spread_of_one_value_has_no_deviation() {
        let s = Spread::of(&[0.3]);
        assert_eq!(
            (s.n, s.mean, s.sample_sd, s.population_sd, s.min, s.max),
            (1, 0.3, 0.0, 0.0, 0.3, 0.3)
        );
        assert_eq!(Spread::of(&[]), Spread::default());
    }

    #[test]
    fn sample_and_population_deviations_differ_by_the_divisor() {
        // Squares about the mean 5: 9 + 1 + 1 + 9 = 20.
        let s = Spread::of(&[2.0, 4.0, 6.0, 8.0]);
        assert!((s.population_sd - (20.0f64 / 4.0).sqrt()).abs() < 1e-12);
        assert!((s.sample_sd - (20.0f64 / 3.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn it_is_written_with_the_sample_deviation_as_sd() {
        let v = serde_json::to_value(Spread::of(&[1.0, 3.0])).unwrap();
        assert_eq!(v["sd"], serde_json::json!(2.0f64.sqrt()));
        assert!(v.get("population_sd").is_none() && v.get("sample_sd").is_none());
    }
}
