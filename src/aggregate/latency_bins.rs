//! [`LatencyBins`]: create latency folded into time bins, the source of a run's
//! [`LatencyOverTime`].

use hdrhistogram::Histogram;

use crate::report::{LatencyBin, LatencyOverTime};

/// A histogram per time bin, by intended send time. A bin keeps two significant
/// digits (1%, a chart's precision: about 13 KB a bin, where the run's own
/// three-digit histogram takes about 190 KB); past [`LatencyOverTime::MAX_BINS`]
/// bins, neighbours merge and the width doubles, so a run of any length holds at most
/// that many.
#[derive(Debug)]
pub struct LatencyBins {
    bin_ms: f64,
    bins: Vec<Option<Histogram<u32>>>,
}

impl Default for LatencyBins {
    fn default() -> Self {
        LatencyBins {
            bin_ms: 1000.0,
            bins: Vec::new(),
        }
    }
}

fn histogram() -> Histogram<u32> {
    // 1 us .. 1 h, as the run's own histogram, at two significant digits.
    Histogram::new_with_bounds(1, 3_600_000_000, 2).expect("constant histogram bounds are valid")
}

impl LatencyBins {
    /// A create meant to leave at `intended_ms` was answered `latency_us` after it.
    pub fn record(&mut self, intended_ms: f64, latency_us: u64) {
        let mut bin = (intended_ms.max(0.0) / self.bin_ms) as usize;
        while bin >= LatencyOverTime::MAX_BINS {
            self.coarsen();
            bin /= 2;
        }
        if self.bins.len() <= bin {
            self.bins.resize_with(bin + 1, || None);
        }
        self.bins[bin]
            .get_or_insert_with(histogram)
            .saturating_record(latency_us.max(1));
    }

    /// Twice the width: bins 2i and 2i+1 become bin i.
    fn coarsen(&mut self) {
        let old = std::mem::take(&mut self.bins);
        let mut pairs = old.into_iter();
        while let Some(a) = pairs.next() {
            let b = pairs.next().flatten();
            self.bins.push(match (a, b) {
                (Some(mut a), Some(b)) => {
                    a.add(&b).expect("bins share their bounds");
                    Some(a)
                }
                (a, b) => a.or(b),
            });
        }
        self.bin_ms *= 2.0;
    }

    /// The figures; `None` when no create was answered.
    pub fn finish(&self) -> Option<LatencyOverTime> {
        let ms = |us: u64| us as f64 / 1000.0;
        let bins: Vec<LatencyBin> = self
            .bins
            .iter()
            .enumerate()
            .filter_map(|(i, h)| {
                let h = h.as_ref()?;
                Some(LatencyBin {
                    from_ms: i as f64 * self.bin_ms,
                    count: h.len(),
                    p50_ms: ms(h.value_at_quantile(0.50)),
                    p99_ms: ms(h.value_at_quantile(0.99)),
                })
            })
            .collect();
        (!bins.is_empty()).then_some(LatencyOverTime {
            bin_ms: self.bin_ms,
            bins,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_bin_by_intended_second_and_empty_seconds_are_left_out() {
        let mut b = LatencyBins::default();
        assert!(b.finish().is_none());
        for us in 1..=100 {
            b.record(200.0, us * 1000);
        }
        b.record(2500.0, 7000);
        let t = b.finish().expect("answers");
        assert_eq!(t.bin_ms, 1000.0);
        assert_eq!(t.bins.len(), 2);
        let (first, last) = (t.bins[0], t.bins[1]);
        assert_eq!((first.from_ms, first.count), (0.0, 100));
        assert!((first.p50_ms - 50.0).abs() <= 0.5, "{first:?}");
        assert!((first.p99_ms - 99.0).abs() <= 1.0, "{first:?}");
        assert_eq!((last.from_ms, last.count), (2000.0, 1));
        assert!((last.p50_ms - 7.0).abs() <= 0.07, "{last:?}");
    }

    #[test]
    fn a_long_run_doubles_the_bin_width_and_keeps_every_answer() {
        let mut b = LatencyBins::default();
        let seconds = LatencyOverTime::MAX_BINS * 3;
        for s in 0..seconds {
            b.record(s as f64 * 1000.0 + 10.0, 1000);
        }
        let t = b.finish().expect("answers");
        assert_eq!(t.bin_ms, 4000.0);
        assert!(t.bins.len() <= LatencyOverTime::MAX_BINS);
        assert_eq!(t.bins.iter().map(|b| b.count).sum::<u64>(), seconds as u64);
        assert_eq!(t.bins[1].from_ms, 4000.0);
        assert_eq!(t.bins[1].count, 4);
    }
}
