//! ResourceExhausted refusals per second and per node: the retry storm E2B's no-backoff
//! loop makes, as typed counts a harness reads directly (no Prometheus text).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Instant;

use super::state::lock;

/// Refusals binned by whole seconds since an origin, per node id.
#[derive(Debug)]
pub(crate) struct StormBins {
    inner: Mutex<Bins>,
}

#[derive(Debug)]
struct Bins {
    origin: Instant,
    /// `per_second[s][node]`: refusals `node` answered in second `s` after `origin`.
    per_second: Vec<HashMap<String, u64>>,
}

impl Default for StormBins {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Bins {
                origin: Instant::now(),
                per_second: Vec::new(),
            }),
        }
    }
}

impl StormBins {
    /// Forget every count and bin from `origin` on (a harness's workload gate). A
    /// refusal before `origin` counts in second 0.
    pub(crate) fn restart(&self, origin: Instant) {
        let mut b = lock(&self.inner);
        b.origin = origin;
        b.per_second.clear();
    }

    /// Node `node` refused a create with ResourceExhausted now.
    pub(crate) fn record(&self, node: &str) {
        self.record_at(node, Instant::now());
    }

    /// Node `node` refused a create with ResourceExhausted at `at`.
    pub(crate) fn record_at(&self, node: &str, at: Instant) {
        let mut b = lock(&self.inner);
        let s = at.saturating_duration_since(b.origin).as_secs() as usize;
        if b.per_second.len() <= s {
            b.per_second.resize_with(s + 1, HashMap::new);
        }
        let row = &mut b.per_second[s];
        match row.get_mut(node) {
            Some(c) => *c += 1,
            None => {
                row.insert(node.to_string(), 1);
            }
        }
    }

    /// One map per second since the origin: refusals per node id.
    pub(crate) fn by_node(&self) -> Vec<BTreeMap<String, u64>> {
        let b = lock(&self.inner);
        b.per_second
            .iter()
            .map(|row| row.iter().map(|(n, c)| (n.clone(), *c)).collect())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn refusals_land_in_their_second_and_node() {
        let bins = StormBins::default();
        let t0 = Instant::now();
        bins.restart(t0);
        bins.record_at("a", t0);
        bins.record_at("b", t0 + Duration::from_millis(999));
        bins.record_at("a", t0 + Duration::from_millis(2500));
        bins.record_at("a", t0 + Duration::from_millis(2600));
        let per_second = bins.by_node();
        assert_eq!(per_second.len(), 3);
        assert_eq!(per_second[0].get("a"), Some(&1));
        assert_eq!(per_second[0].get("b"), Some(&1));
        assert!(per_second[1].is_empty());
        assert_eq!(per_second[2].get("a"), Some(&2));
        assert_eq!(per_second[2].get("b"), None);
        let total = |b: &StormBins| b.by_node().iter().flat_map(|r| r.values()).sum::<u64>();
        assert_eq!(total(&bins), 4);
        bins.restart(t0 + Duration::from_secs(3));
        assert_eq!(total(&bins), 0);
    }
}
