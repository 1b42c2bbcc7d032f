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

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};

/// The digests of the sandbox ids a run has settled (see the module doc). Clones share
/// one set.
#[derive(Debug, Clone, Default)]
pub struct SettledIds {
    set: Arc<Mutex<DigestSet>>,
}

/// A set of digests, hashed by their own low bits (they are uniform already).
type DigestSet = HashSet<u128, BuildHasherDefault<LowBits>>;

impl SettledIds {
    /// Adds `id`; false when it was already there (a second settle of one id).
    pub fn insert(&self, id: &str) -> bool {
        self.lock().insert(digest(id))
    }

    /// Whether `id` was settled.
    pub fn contains(&self, id: &str) -> bool {
        self.lock().contains(&digest(id))
    }

    /// Ids settled so far.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none was settled.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A view for many lookups under one lock.
    pub fn view(&self) -> SettledView<'_> {
        SettledView { set: self.lock() }
    }

    /// The set; a panic while it was held cannot leave it half-updated (an insert is
    /// one call), so a poisoned lock is taken as it is.
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
        self.set.contains(&digest(id))
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

/// Hashes a digest by its low 64 bits.
#[derive(Debug, Default)]
struct LowBits(u64);

impl Hasher for LowBits {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only u128 digests are hashed (`write_u128`); any other input is folded in.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u128(&mut self, v: u128) {
        self.0 = v as u64;
    }
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
    fn digests_of_near_ids_differ_in_both_halves() {
        let (x, y) = (digest("isb-10"), digest("isb-01"));
        assert_ne!(x >> 64, y >> 64);
        assert_ne!(x as u64, y as u64);
    }
}
