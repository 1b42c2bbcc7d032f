//! [`IdMap`]: a map keyed by [`Id`] for the few entries a node usually holds.
//!
//! A node's creates in flight and its starting sandboxes number a handful at a time,
//! and a simulator touches them several times per placement. Hashing the id and probing
//! a table for each of those costs more than comparing it with a few ids in one vector;
//! a burst of thousands on one node must stay O(1) per call, so past [`SPILL`] entries
//! the map becomes a hash map (and a vector again once it shrinks back to half that).
//! Lookups by a short `&str` compare it as an inline [`Id`]: two fixed-size arrays.

use std::collections::HashMap;
use std::fmt;

// Randomly seeded per map: ids come from clients.
use foldhash::fast::RandomState;

use crate::Id;

/// Most entries kept in the vector; one more moves them into a hash map.
pub const SPILL: usize = 16;

/// A map from [`Id`] to `V`, in no order: a vector searched linearly while it holds at
/// most [`SPILL`] entries, a hash map past that.
#[derive(Clone)]
pub struct IdMap<V>(Repr<V>);

#[derive(Clone)]
enum Repr<V> {
    Few(Vec<(Id, V)>),
    Many(HashMap<Id, V, RandomState>),
}

impl<V> Default for IdMap<V> {
    fn default() -> Self {
        IdMap(Repr::Few(Vec::new()))
    }
}

/// Where `key` is among `entries`.
fn position<V>(entries: &[(Id, V)], key: &str) -> Option<usize> {
    match Id::probe(key) {
        Some(probe) => entries.iter().position(|(id, _)| *id == probe),
        None => entries.iter().position(|(id, _)| id.as_str() == key),
    }
}

impl<V> IdMap<V> {
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
            Repr::Many(m) => match Id::probe(key) {
                Some(probe) => m.get(&probe),
                None => m.get(key),
            },
        }
    }

    /// The value of `key`, mutably, if any.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        match &mut self.0 {
            Repr::Few(v) => position(v, key).map(|i| &mut v[i].1),
            Repr::Many(m) => match Id::probe(key) {
                Some(probe) => m.get_mut(&probe),
                None => m.get_mut(key),
            },
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
                if v.len() < SPILL {
                    v.push((key, value));
                    return None;
                }
                let mut m: HashMap<Id, V, RandomState> =
                    HashMap::with_capacity_and_hasher(2 * SPILL, RandomState::default());
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
                let out = match Id::probe(key) {
                    Some(probe) => m.remove_entry(&probe),
                    None => m.remove_entry(key),
                };
                if out.is_some() && m.len() <= SPILL / 2 {
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
}

impl<V: PartialEq> PartialEq for IdMap<V> {
    /// Same entries, whatever their order (as `HashMap`s compare).
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl<V: Eq> Eq for IdMap<V> {}

impl<V: fmt::Debug> fmt::Debug for IdMap<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<V> FromIterator<(Id, V)> for IdMap<V> {
    fn from_iter<I: IntoIterator<Item = (Id, V)>>(iter: I) -> Self {
        let mut map = IdMap::new();
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
            if i % 3 == 0 {
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

    #[test]
    fn equal_maps_compare_equal_whatever_their_order() {
        let a: IdMap<u32> = (0..5).map(|i| (Id::new(&format!("n{i}")), i)).collect();
        let b: IdMap<u32> = (0..5).rev().map(|i| (Id::new(&format!("n{i}")), i)).collect();
        assert_eq!(a, b);
        let c: IdMap<u32> = (0..4).map(|i| (Id::new(&format!("n{i}")), i)).collect();
        assert_ne!(a, c);
        assert_eq!(format!("{:?}", IdMap::<u32>::new()), "{}");
    }
}
