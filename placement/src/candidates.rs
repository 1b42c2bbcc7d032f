//! Best-of-K candidate sampling: up to K distinct nodes, uniformly, among those passing a
//! filter (E2B draws from a shrinking pool of indices and skips the ineligible ones).

use rand::Rng;

/// Reusable buffers so that a decision allocates nothing once warmed up.
///
/// The pool is kept as the identity permutation between calls: a draw swaps at most
/// `k`-ish entries and they are swapped back afterwards, so a decision costs O(draws),
/// not O(n), with the very same draws as a freshly built pool.
#[derive(Debug, Clone, Default)]
pub(crate) struct CandidateDraw {
    pool: Vec<usize>,
    picked: Vec<usize>,
    swaps: Vec<(usize, usize)>,
}

impl CandidateDraw {
    /// Draw up to `k` distinct indices in `0..n` for which `eligible` holds, each drawn
    /// uniformly from the indices not drawn yet. Fewer than `k` come back only when fewer
    /// than `k` indices are eligible. The result is valid until the next call.
    pub(crate) fn sample<R, F>(
        &mut self,
        n: usize,
        k: usize,
        mut eligible: F,
        rng: &mut R,
    ) -> &[usize]
    where
        R: Rng + ?Sized,
        F: FnMut(usize) -> bool,
    {
        self.picked.clear();
        if k == 0 || n == 0 {
            return &self.picked;
        }
        if self.pool.len() != n {
            self.pool.clear();
            self.pool.extend(0..n);
        }
        self.swaps.clear();
        let mut remaining = n;
        while self.picked.len() < k && remaining > 0 {
            let j = rng.random_range(0..remaining);
            let pick = self.pool[j];
            self.pool.swap(j, remaining - 1);
            self.swaps.push((j, remaining - 1));
            remaining -= 1;
            if eligible(pick) {
                self.picked.push(pick);
            }
        }
        for &(a, b) in self.swaps.iter().rev() {
            self.pool.swap(a, b);
        }
        &self.picked
    }
}

#[cfg(test)]
mod tests {
    use super::CandidateDraw;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn k_distinct_eligible_indices() {
        let mut s = CandidateDraw::default();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..1000 {
            let got = s.sample(10, 3, |i| i % 2 == 0, &mut rng).to_vec();
            assert_eq!(got.len(), 3);
            let mut d = got.clone();
            d.sort_unstable();
            d.dedup();
            assert_eq!(d.len(), 3, "{got:?} has duplicates");
            assert!(got.iter().all(|i| i % 2 == 0));
        }
    }

    #[test]
    fn same_draws_as_a_fresh_pool() {
        // The restored pool gives what a pool rebuilt for every call gives.
        let mut kept = CandidateDraw::default();
        let (mut r1, mut r2) = (ChaCha8Rng::seed_from_u64(9), ChaCha8Rng::seed_from_u64(9));
        for i in 0..2000 {
            let a = kept.sample(17, 3, |x| (x + i) % 3 != 0, &mut r1).to_vec();
            let b = CandidateDraw::default()
                .sample(17, 3, |x| (x + i) % 3 != 0, &mut r2)
                .to_vec();
            assert_eq!(a, b, "call {i}");
        }
    }

    #[test]
    fn fewer_eligible_than_k() {
        let mut s = CandidateDraw::default();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let got = s.sample(10, 3, |i| i == 4, &mut rng).to_vec();
        assert_eq!(got, vec![4]);
        assert!(s.sample(0, 3, |_| true, &mut rng).is_empty());
        assert!(s.sample(5, 0, |_| true, &mut rng).is_empty());
    }
}
