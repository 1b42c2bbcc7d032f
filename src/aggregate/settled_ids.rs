//! [`SettledIds`]: the sandboxes a set-audited run has settled, as 128-bit digests of
//! their ids, shared by the client ledger (which settles them) and the truth samples'
//! history (which then forgets where they were seen).
//!
//! A create is settled for the set audit when it was answered 201 with an id and the
//! workload's DELETE of it was answered with anything but 404 (it may have landed). The
//! audit can then say nothing of it but two things: that a sandbox the nodes still list
//! under that id is the run's own (not orphaned), and that a second 201 with the same id
//! is a duplicate. A digest answers both in 16 bytes instead of a whole ledger entry.
//!
//! Digests are two SipHash-1-3 sums with fixed keys (Rust's `DefaultHasher::new()`),
//! each over a different prefix byte and the id. Two ids of one run share a digest with
//! probability about n^2 / 2^129 (n ids): under 10^-24 for a day at 1,000 creates/s.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};

/// The digests of the sandbox ids a run has settled (see the module doc). Clones share
/// one set.
#[derive(Debug, Clone, Default)]
pub struct SettledIds {
    set: Arc<Mutex<DigestSet>>,
}

/// Digests kept in sorted runs, 16 bytes each and no more: a sorted buffer of at most
/// [`BUFFER`] digests, and sorted levels of [`BUFFER`] times distinct powers of two,
/// longest first, like the digits of a binary counter (a full buffer becomes a level;
/// two levels of one length are merged into a vector of exactly their joint length).
/// A digest is copied about log2(n / BUFFER) times in all, and a lookup is a binary
/// search per level, of which there are at most that many plus one. A hash set would
/// take 19 to 38 bytes a digest.
#[derive(Debug, Default)]
struct DigestSet {
    buffer: Vec<u128>,
    levels: Vec<Vec<u128>>,
    len: usize,
}

/// Digests buffered before they form a level.
const BUFFER: usize = 4096;

impl DigestSet {
    fn contains(&self, d: u128) -> bool {
        self.buffer.binary_search(&d).is_ok()
            || self.levels.iter().any(|l| l.binary_search(&d).is_ok())
    }

    fn insert(&mut self, d: u128) -> bool {
        if self.levels.iter().any(|l| l.binary_search(&d).is_ok()) {
            return false;
        }
        let Err(at) = self.buffer.binary_search(&d) else {
            return false;
        };
        if self.buffer.capacity() == 0 {
            self.buffer.reserve_exact(BUFFER);
        }
        self.buffer.insert(at, d);
        self.len += 1;
        if self.buffer.len() == BUFFER {
            let full = std::mem::replace(&mut self.buffer, Vec::with_capacity(BUFFER));
            self.levels.push(full);
            while let [.., big, small] = &self.levels[..] {
                if small.len() < big.len() {
                    break;
                }
                let small = self.levels.pop().unwrap_or_default();
                let big = self.levels.pop().unwrap_or_default();
                self.levels.push(merge(&big, &small));
            }
        }
        true
    }
}

/// Two sorted runs of distinct digests as one, in a vector of exactly their length.
fn merge(a: &[u128], b: &[u128]) -> Vec<u128> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i] < b[j] {
            out.push(a[i]);
            i += 1;
        } else {
            out.push(b[j]);
            j += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

impl SettledIds {
    /// Adds `id`; false when it was already there (a second settle of one id).
    pub fn insert(&self, id: &str) -> bool {
        self.lock().insert(digest(id))
    }

    /// Whether `id` was settled.
    pub fn contains(&self, id: &str) -> bool {
        self.lock().contains(digest(id))
    }

    /// Ids settled so far.
    pub fn len(&self) -> usize {
        self.lock().len
    }

    /// Whether none was settled.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A view for many lookups under one lock.
    pub fn view(&self) -> SettledView<'_> {
        SettledView { set: self.lock() }
    }

    /// The set; a panic while it was held cannot leave it half-updated (an insert
    /// completes before a level is merged, and a merge replaces its two levels with one
    /// only once built), so a poisoned lock is taken as it is.
    fn lock(&self) -> MutexGuard<'_, DigestSet> {
        self.set.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// [`SettledIds`] held for many lookups.
#[derive(Debug)]
pub struct SettledView<'a> {
    set: MutexGuard<'a, DigestSet>,
}

impl SettledView<'_> {
    /// Whether `id` was settled.
    pub fn contains(&self, id: &str) -> bool {
        self.set.contains(digest(id))
    }
}

/// The 128-bit digest of `id`.
fn digest(id: &str) -> u128 {
    let half = |prefix: u8| {
        let mut h = DefaultHasher::new();
        prefix.hash(&mut h);
        id.hash(&mut h);
        h.finish()
    };
    (u128::from(half(0)) << 64) | u128::from(half(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_settled_once_and_clones_share_the_set() {
        let a = SettledIds::default();
        let b = a.clone();
        assert!(a.insert("isb-1"));
        assert!(!b.insert("isb-1"));
        assert!(b.contains("isb-1") && !b.contains("isb-2"));
        assert_eq!(a.len(), 1);
        assert!(a.view().contains("isb-1"));
    }

    #[test]
    fn many_ids_are_found_once_across_levels_at_16_bytes_each() {
        let ids = SettledIds::default();
        let n = 5 * BUFFER + 123;
        for i in 0..n {
            assert!(ids.insert(&format!("i{i:020}")), "{i} new");
        }
        for i in (0..n).step_by(97) {
            assert!(!ids.insert(&format!("i{i:020}")), "{i} again");
            assert!(ids.contains(&format!("i{i:020}")));
        }
        assert!(!ids.contains("i-never"));
        assert_eq!(ids.len(), n);
        let set = ids.lock();
        let held: usize = set.levels.iter().map(Vec::capacity).sum();
        assert_eq!(
            held + set.buffer.len(),
            n,
            "levels hold exactly their digests"
        );
        let lens: Vec<usize> = set.levels.iter().map(Vec::len).collect();
        assert!(lens.windows(2).all(|w| w[0] > w[1]), "{lens:?}");
        assert_eq!(lens, [4 * BUFFER, BUFFER]);
    }

    #[test]
    fn digests_of_near_ids_differ_in_both_halves() {
        let (x, y) = (digest("isb-10"), digest("isb-01"));
        assert_ne!(x >> 64, y >> 64);
        assert_ne!(x as u64, y as u64);
    }
}
