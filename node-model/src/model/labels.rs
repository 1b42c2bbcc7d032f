//! The ids a create carries that the node only echoes back in `List` (template, team,
//! execution), held once per distinct triple.
//!
//! Creates that carry the same ones as the node's previous create share its entry,
//! which is what a workload of one template and one team does. A sandbox holds the
//! entry's index and the entry counts its holders with a plain integer: the node model
//! is only ever changed through `&mut`, so the locked increment and decrement an `Arc`
//! costs on a line every sandbox of the node shares buy nothing here.

use stampede_id::Id;

/// Template, team and execution id of a create.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Labels {
    pub template_id: Id,
    pub team_id: Id,
    pub execution_id: Id,
}

/// Index of an entry of a [`LabelTable`], held by one sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct LabelRef(u32);

/// Distinct labels with their holders; the last create's labels hold one count of
/// their own, so that the next create carrying them shares the entry.
#[derive(Debug, Clone, Default)]
pub(super) struct LabelTable {
    /// Labels and the number of holders; 0 holders is a free entry.
    entries: Vec<(Labels, u32)>,
    free: Vec<u32>,
    last: Option<LabelRef>,
}

impl LabelTable {
    /// The entry of `labels` for one more holder (a new entry only when they differ
    /// from the previous create's).
    pub(super) fn share(&mut self, labels: Labels) -> LabelRef {
        if let Some(last) = self.last {
            let entry = &mut self.entries[last.0 as usize];
            if entry.0 == labels {
                entry.1 += 1;
                return last;
            }
        }
        // Two holders: the sandbox and `last`.
        let k = match self.free.pop() {
            Some(k) => {
                self.entries[k as usize] = (labels, 2);
                k
            }
            None => {
                if self.entries.capacity() == 0 {
                    // Most nodes only ever see one set: no room for four.
                    self.entries.reserve_exact(1);
                }
                self.entries.push((labels, 2));
                u32::try_from(self.entries.len() - 1).expect("fewer than 2^32 label sets a node")
            }
        };
        let shared = LabelRef(k);
        if let Some(old) = self.last.replace(shared) {
            self.release(old);
        }
        shared
    }

    /// One holder of `r` lets go of it.
    pub(super) fn release(&mut self, r: LabelRef) {
        let entry = &mut self.entries[r.0 as usize];
        entry.1 -= 1;
        if entry.1 == 0 {
            entry.0 = Labels::default();
            self.free.push(r.0);
        }
    }

    /// The labels `r` names.
    pub(super) fn get(&self, r: LabelRef) -> &Labels {
        &self.entries[r.0 as usize].0
    }

    /// Entries with holders (the last create's included).
    #[cfg(test)]
    pub(super) fn in_use(&self) -> usize {
        self.entries.iter().filter(|e| e.1 > 0).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(team: &str) -> Labels {
        Labels {
            template_id: Id::new("base"),
            team_id: Id::new(team),
            execution_id: Id::EMPTY,
        }
    }

    #[test]
    fn equal_consecutive_labels_share_and_released_entries_are_reused() {
        let mut t = LabelTable::default();
        let a = t.share(labels("a"));
        assert_eq!(t.share(labels("a")), a);
        let b = t.share(labels("b"));
        assert_ne!(a, b);
        assert_eq!(t.get(a), &labels("a"));
        t.release(a);
        assert_eq!(t.in_use(), 2, "one holder of a is left");
        t.release(a);
        assert_eq!(t.in_use(), 1, "only b (the last create's) is left");
        let c = t.share(labels("c"));
        assert_eq!(c, a, "a's entry is reused");
        t.release(b);
        assert_eq!(t.in_use(), 1, "b is no longer the last create's");
        assert_eq!(t.get(c), &labels("c"));
    }
}
