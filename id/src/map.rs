//! [`IdMap`]: a map keyed by [`Id`] for the few entries a node usually holds.
//!
//! A node's creates in flight and its starting sandboxes number a handful at a time,
//! and a simulator touches them several times per placement. Hashing the id and probing
//! a table for each of those costs more than comparing it with a few ids in one vector;
//! a burst of thousands on one node must stay O(1) per call, so past [`SPILL`] entries
//! the map becomes a hash map (and a vector again once it shrinks back to half that).

use std::collections::HashMap;
use std::fmt;

// Randomly seeded per map: ids come from clients.
use foldhash::fast::RandomState;

use crate::Id;

/// Most entries an [`IdMap`] keeps in its vector unless told otherwise; one more moves
/// them into a hash map.
pub const SPILL: usize = 16;

/// A map from [`Id`] to `V`, in no order: a vector searched linearly while it holds at
/// most `N` entries, a hash map past that. A vector holds
/// an entry in its size, where a hash map at its load factor takes about twice that: a
/// map that many nodes fill to a few dozen at once may be given a larger `N`.
#[derive(Clone)]
pub struct IdMap<V, const N: usize = SPILL>(Repr<V>);

#[derive(Clone)]
enum Repr<V> {
    Few(Vec<(Id, V)>),
    Many(HashMap<Id, V, RandomState>),
}

impl<V, const N: usize> Default for IdMap<V, N> {
    fn default() -> Self {
        IdMap(Repr::Few(Vec::new()))
    }
}

/// Where `key` is among `entries`: a length compare per entry, and a byte compare
/// only where the length matches.
fn position<V>(entries: &[(Id, V)], key: &str) -> Option<usize> {
    entries.iter().position(|(id, _)| id.as_str() == key)
}

impl<V, const N: usize> IdMap<V, N> {
    /// An empty map (allocates nothing).
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Few(v) => v.len(),
            Repr::Many(m) => m.len(),
        }
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value of `key`, if any.
    pub fn get(&self, key: &str) -> Option<&V> {
        match &self.0 {
            Repr::Few(v) => position(v, key).map(|i| &v[i].1),
            Repr::Many(m) => m.get(key),
        }
    }

    /// The value of `key`, mutably, if any.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        match &mut self.0 {
            Repr::Few(v) => position(v, key).map(|i| &mut v[i].1),
            Repr::Many(m) => m.get_mut(key),
        }
    }

    /// Whether `key` has an entry.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key` to `value`, returning the value it replaced.
    pub fn insert(&mut self, key: Id, value: V) -> Option<V> {
        match &mut self.0 {
            Repr::Few(v) => {
                if let Some(i) = position(v, &key) {
                    return Some(std::mem::replace(&mut v[i].1, value));
                }
                if v.len() < N {
                    v.push((key, value));
                    return None;
                }
                let mut m: HashMap<Id, V, RandomState> =
                    HashMap::with_capacity_and_hasher(2 * N, RandomState::default());
                m.extend(v.drain(..));
                m.insert(key, value);
                self.0 = Repr::Many(m);
                None
            }
            Repr::Many(m) => m.insert(key, value),
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<V> {
        self.remove_entry(key).map(|(_, v)| v)
    }

    /// Removes `key`, returning the id it was held under and its value.
    pub fn remove_entry(&mut self, key: &str) -> Option<(Id, V)> {
        match &mut self.0 {
            Repr::Few(v) => position(v, key).map(|i| v.swap_remove(i)),
            Repr::Many(m) => {
                let out = m.remove_entry(key);
                if out.is_some() && m.len() <= N / 2 {
                    let few = m.drain().collect();
                    self.0 = Repr::Few(few);
                }
                out
            }
        }
    }

    /// Removes every entry (and the hash map, if the map had spilled into one).
    pub fn clear(&mut self) {
        match &mut self.0 {
            Repr::Few(v) => v.clear(),
            Repr::Many(_) => self.0 = Repr::Few(Vec::new()),
        }
    }

    /// Every entry, in no order.
    pub fn iter(&self) -> impl Iterator<Item = (&Id, &V)> {
        let (few, many) = match &self.0 {
            Repr::Few(v) => (Some(v.iter().map(|(k, v)| (k, v))), None),
            Repr::Many(m) => (None, Some(m.iter())),
        };
        few.into_iter().flatten().chain(many.into_iter().flatten())
    }

    /// Every id, in no order.
    pub fn keys(&self) -> impl Iterator<Item = &Id> {
        self.iter().map(|(k, _)| k)
    }

    /// Every value, in no order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }

    /// Keeps only the entries `keep` is true of (it may change their values).
    pub fn retain(&mut self, mut keep: impl FnMut(&Id, &mut V) -> bool) {
        match &mut self.0 {
            Repr::Few(v) => v.retain_mut(|(k, v)| keep(k, v)),
            Repr::Many(m) => {
                m.retain(|k, v| keep(k, v));
                if m.len() <= N / 2 {
                    let few = m.drain().collect();
                    self.0 = Repr::Few(few);
                }
            }
        }
    }
}

impl<V, const N: usize> IntoIterator for IdMap<V, N> {
    type Item = (Id, V);
    type IntoIter = std::iter::Chain<
        std::iter::Flatten<std::option::IntoIter<std::vec::IntoIter<(Id, V)>>>,
        std::iter::Flatten<std::option::IntoIter<std::collections::hash_map::IntoIter<Id, V>>>,
    >;

    /// Every entry, in no order.
    fn into_iter(self) -> Self::IntoIter {
        let (few, many) = match self.0 {
            Repr::Few(v) => (Some(v.into_iter()), None),
            Repr::Many(m) => (None, Some(m.into_iter())),
        };
        few.into_iter().flatten().chain(many.into_iter().flatten())
    }
}

impl<V: PartialEq, const N: usize> PartialEq for IdMap<V, N> {
    /// Same entries, whatever their order (as `HashMap`s compare).
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl<V: Eq, const N: usize> Eq for IdMap<V, N> {}

impl<V: fmt::Debug, const N: usize> fmt::Debug for IdMap<V, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<V, const N: usize> FromIterator<(Id, V)> for IdMap<V, N> {
    /// Sized for what `iter` says it holds: no growth on the way.
    fn from_iter<I: IntoIterator<Item = (Id, V)>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let (least, _) = iter.size_hint();
        let mut map = IdMap(if least > N {
            Repr::Many(HashMap::with_capacity_and_hasher(
                least,
                RandomState::default(),
            ))
        } else {
            Repr::Few(Vec::with_capacity(least))
        });
        for (k, v) in iter {
            map.insert(k, v);
        }
        map
    }
}

#[cfg(test)]
mod tests {
    use super::{IdMap, SPILL};
    use crate::Id;
    use std::collections::HashMap;

    /// Every operation agrees with a `HashMap` across the spill and back, for short
    /// (inline) and long (heap) ids alike.
    #[test]
    fn agrees_with_a_hash_map_through_spill_and_shrink() {
        let mut map: IdMap<u32> = IdMap::new();
        let mut model: HashMap<String, u32> = HashMap::new();
        let key = |i: u32| {
            if i.is_multiple_of(3) {
                format!("{}-{i}", "long".repeat(8))
            } else {
                format!("sb-{i:08}")
            }
        };
        // Grow well past the spill, shrink below half of it, grow again.
        let plan: Vec<(bool, u32)> = (0..3 * SPILL as u32)
            .map(|i| (true, i))
            .chain((0..3 * SPILL as u32 - 2).map(|i| (false, i)))
            .chain((100..100 + 2 * SPILL as u32).map(|i| (true, i)))
            .chain((0..3 * SPILL as u32).map(|i| (true, i)))
            .collect();
        for (insert, i) in plan {
            let k = key(i);
            if insert {
                assert_eq!(map.insert(Id::new(&k), i), model.insert(k.clone(), i));
            } else {
                assert_eq!(map.remove(&k), model.remove(&k));
                assert_eq!(map.remove(&k), None);
            }
            assert_eq!(map.len(), model.len());
            assert_eq!(map.get(&k), model.get(&k));
            assert!(!map.contains_key("absent"));
            let mut got: Vec<(String, u32)> =
                map.iter().map(|(k, v)| (k.to_string(), *v)).collect();
            let mut want: Vec<(String, u32)> = model.iter().map(|(k, v)| (k.clone(), *v)).collect();
            got.sort();
            want.sort();
            assert_eq!(got, want);
        }
        if let Some(v) = map.get_mut(&key(1)) {
            *v = 7;
        }
        assert_eq!(map.get(&key(1)), Some(&7));
        let (id, v) = map.remove_entry(&key(1)).expect("present");
        assert_eq!((id.as_str(), v), (key(1).as_str(), 7));
        map.clear();
        assert!(map.is_empty());
        assert_eq!(map.get(&key(2)), None);
    }

    /// `retain` and `into_iter` see every entry once, on either side of the spill, and a
    /// map given a larger vector holds that many before it spills.
    #[test]
    fn retain_and_into_iter_cover_every_entry() {
        for n in [3u32, 2 * SPILL as u32] {
            let mut map: IdMap<u32, 40> = (0..n).map(|i| (Id::new(&format!("s{i}")), i)).collect();
            map.retain(|_, v| {
                *v += 1;
                v.is_multiple_of(2)
            });
            let mut got: Vec<u32> = map.into_iter().map(|(_, v)| v).collect();
            got.sort_unstable();
            let want: Vec<u32> = (1..=n).filter(|v| v.is_multiple_of(2)).collect();
            assert_eq!(got, want);
        }
        let many: IdMap<u32> = (0..3 * SPILL as u32)
            .map(|i| (Id::new(&format!("s{i}")), i))
            .collect();
        let mut left = many.clone();
        left.retain(|_, v| *v < 2);
        assert_eq!(left.len(), 2);
        assert_eq!(many.into_iter().count(), 3 * SPILL);
    }

    #[test]
    fn equal_maps_compare_equal_whatever_their_order() {
        let a: IdMap<u32> = (0..5).map(|i| (Id::new(&format!("n{i}")), i)).collect();
        let b: IdMap<u32> = (0..5)
            .rev()
            .map(|i| (Id::new(&format!("n{i}")), i))
            .collect();
        assert_eq!(a, b);
        let c: IdMap<u32> = (0..4).map(|i| (Id::new(&format!("n{i}")), i)).collect();
        assert_ne!(a, c);
        assert_eq!(format!("{:?}", IdMap::<u32>::new()), "{}");
    }
}
