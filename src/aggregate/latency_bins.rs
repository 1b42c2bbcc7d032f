//! [`LatencyBins`]: create latency folded into time bins, the source of a run's
//! [`LatencyOverTime`].

use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;

use crate::report::{LatencyBin, LatencyOverTime};

/// A histogram per time bin, by intended send time. A bin keeps two significant
/// digits (1%, a chart's precision: about 13 KB a bin, where the run's own
/// three-digit histogram takes about 190 KB); past [`LatencyOverTime::MAX_BINS`]
/// bins, neighbours merge and the width doubles, so a run of any length holds at most
/// that many.
///
/// A bin older than the newest intended time recorded by its pack delay is packed
/// (HdrHistogram's V2 encoding, lossless: about a hundred bytes for a second of
/// creates), so a run holds a few open bins, not 600 of 13 KB; a late answer into a
/// packed bin unpacks it. The delay starts at [`MIN_PACK_AFTER_MS`] and grows to twice
/// the longest lag seen (how far behind the newest intended time a record came, as a
/// run with lifetimes records a create when its delete is answered), up to
/// [`PACK_AFTER_MS`].
#[derive(Debug)]
pub struct LatencyBins {
    bin_ms: f64,
    bins: Vec<Bin>,
    /// The newest intended time recorded, ms.
    newest_ms: f64,
    /// Bins before this one are packed (or empty), but for `reopened`.
    packed_below: usize,
    /// Packed bins a late answer opened again, to pack at the next sweep.
    reopened: Vec<usize>,
    /// How far behind the newest intended time a bin is packed, ms.
    pack_after_ms: f64,
}

/// The longest a bin stays open after its end (by intended times recorded since): past
/// a create's deadline, so that answers rarely land in a packed bin (an assumption: 2
/// minutes, twice the longest default request deadline).
pub const PACK_AFTER_MS: f64 = 120_000.0;

/// The shortest: records come at most this far behind the newest in a run whose answers
/// come within a few seconds (an assumption: 10 s, several times a loaded run's p99).
pub const MIN_PACK_AFTER_MS: f64 = 10_000.0;

#[derive(Debug, Default)]
enum Bin {
    #[default]
    Empty,
    Open(Histogram<u32>),
    Packed(Vec<u8>),
}

impl Bin {
    fn open(&mut self) -> &mut Histogram<u32> {
        if !matches!(self, Bin::Open(_)) {
            let h = match std::mem::take(self) {
                Bin::Packed(bytes) => unpack(&bytes),
                _ => histogram(),
            };
            *self = Bin::Open(h);
        }
        match self {
            Bin::Open(h) => h,
            _ => unreachable!("opened above"),
        }
    }

    fn pack(&mut self) {
        if let Bin::Open(h) = self {
            let mut bytes = Vec::new();
            V2Serializer::new()
                .serialize(h, &mut bytes)
                .expect("a histogram serializes into memory");
            bytes.shrink_to_fit();
            *self = Bin::Packed(bytes);
        }
    }

    fn histogram(&self) -> Option<std::borrow::Cow<'_, Histogram<u32>>> {
        match self {
            Bin::Empty => None,
            Bin::Open(h) => Some(std::borrow::Cow::Borrowed(h)),
            Bin::Packed(bytes) => Some(std::borrow::Cow::Owned(unpack(bytes))),
        }
    }
}

fn unpack(bytes: &[u8]) -> Histogram<u32> {
    Deserializer::new()
        .deserialize(&mut &bytes[..])
        .expect("a packed bin reads back")
}

impl Default for LatencyBins {
    fn default() -> Self {
        LatencyBins {
            bin_ms: 1000.0,
            bins: Vec::new(),
            newest_ms: 0.0,
            packed_below: 0,
            reopened: Vec::new(),
            pack_after_ms: MIN_PACK_AFTER_MS,
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
            self.bins.resize_with(bin + 1, Bin::default);
        }
        if bin < self.packed_below && !matches!(self.bins[bin], Bin::Open(_)) {
            self.reopened.push(bin);
        }
        self.bins[bin].open().saturating_record(latency_us.max(1));
        let lag = self.newest_ms - intended_ms;
        if 2.0 * lag > self.pack_after_ms {
            self.pack_after_ms = (2.0 * lag).min(PACK_AFTER_MS);
        }
        if intended_ms > self.newest_ms {
            self.newest_ms = intended_ms;
            self.pack_old();
        }
    }

    /// Packs the bins that ended the pack delay before the newest intended time.
    fn pack_old(&mut self) {
        let old = ((self.newest_ms - self.pack_after_ms).max(0.0) / self.bin_ms) as usize;
        let old = old.min(self.bins.len());
        for b in self.bins[self.packed_below.min(old)..old].iter_mut() {
            b.pack();
        }
        self.packed_below = self.packed_below.max(old);
        for k in std::mem::take(&mut self.reopened) {
            if let Some(b) = self.bins.get_mut(k) {
                b.pack();
            }
        }
    }

    /// Twice the width: bins 2i and 2i+1 become bin i.
    fn coarsen(&mut self) {
        let old = std::mem::take(&mut self.bins);
        let mut pairs = old.into_iter();
        while let Some(mut a) = pairs.next() {
            let mut b = pairs.next().unwrap_or_default();
            let packed = matches!(a, Bin::Packed(_)) || matches!(b, Bin::Packed(_));
            let mut merged = match (&a, &b) {
                (Bin::Empty, Bin::Empty) => Bin::Empty,
                (_, Bin::Empty) => a,
                (Bin::Empty, _) => b,
                _ => {
                    let other = b.open().clone();
                    a.open().add(&other).expect("bins share their bounds");
                    a
                }
            };
            if packed {
                merged.pack();
            }
            self.bins.push(merged);
        }
        self.bin_ms *= 2.0;
        self.packed_below /= 2;
        for k in &mut self.reopened {
            *k /= 2;
        }
    }

    /// The figures; `None` when no create was answered.
    pub fn finish(&self) -> Option<LatencyOverTime> {
        let ms = |us: u64| us as f64 / 1000.0;
        let bins: Vec<LatencyBin> = self
            .bins
            .iter()
            .enumerate()
            .filter_map(|(i, b)| {
                let h = b.histogram()?;
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
    fn packed_bins_give_the_figures_of_open_ones_and_take_late_answers() {
        let mut bins = LatencyBins::default();
        let seconds = 400;
        let mut reference: Vec<Histogram<u32>> = (0..seconds).map(|_| histogram()).collect();
        for (s, h) in reference.iter_mut().enumerate() {
            for k in 0..20u64 {
                let us = 1000 + (s as u64 * 37 + k * 911) % 50_000;
                bins.record(s as f64 * 1000.0 + 5.0, us);
                h.saturating_record(us);
            }
        }
        assert!(matches!(bins.bins[3], Bin::Packed(_)));
        // A late answer into a packed bin.
        bins.record(3_000.0, 123_456);
        reference[3].saturating_record(123_456);
        bins.record(seconds as f64 * 1000.0, 1);
        assert!(matches!(bins.bins[3], Bin::Packed(_)), "packed again");
        let open = bins
            .bins
            .iter()
            .filter(|b| matches!(b, Bin::Open(_)))
            .count();
        assert!(open <= 122, "{open} bins open");
        let t = bins.finish().expect("answers");
        for (s, h) in reference.iter().enumerate() {
            let got = t.bins[s];
            assert_eq!(got.count, h.len(), "bin {s}");
            assert_eq!(
                got.p50_ms,
                h.value_at_quantile(0.50) as f64 / 1000.0,
                "bin {s}"
            );
            assert_eq!(
                got.p99_ms,
                h.value_at_quantile(0.99) as f64 / 1000.0,
                "bin {s}"
            );
        }
    }

    #[test]
    fn bins_stay_open_only_as_long_as_records_lag() {
        let mut bins = LatencyBins::default();
        let open = |b: &LatencyBins| b.bins.iter().filter(|b| matches!(b, Bin::Open(_))).count();
        for s in 0..300 {
            bins.record(s as f64 * 1000.0, 1000);
        }
        assert!(open(&bins) <= 12, "{} bins open", open(&bins));
        // A record 29 s behind the newest (299 s): bins now stay open for 58 s.
        bins.record(270_000.0, 1000);
        for s in 300..400 {
            bins.record(s as f64 * 1000.0, 1000);
        }
        let n = open(&bins);
        assert!((55..=62).contains(&n), "{n} bins open");
        assert_eq!(bins.pack_after_ms, 58_000.0);
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
