//! The sandboxes of one node, starting and running, held in one slab.
//!
//! A simulator holds every node's sandboxes at once (1,000 nodes with a hundred each)
//! and deletes each a lifetime after its create, when whatever held it has long left
//! the cache. So a sandbox lives in a slot of one vector for its whole life (starting,
//! then running) and is named by its [`SandboxKey`], the slot and the slot's
//! generation: a driver that keeps the key reaches the sandbox with one indexed load.
//! Ids are for the edges (a client's Delete, `List`): an [`IdIndex`] of slot numbers
//! finds a slot by id, and refuses an id the node already holds; a slot knows where its
//! index entry is, so a delete by key marks it removed without searching for it.
//!
//! The three ids a create only has echoed back live in the node's [`LabelTable`].
//! [`Sandbox`] values are built when asked for (`List`, a delete's answer).

use std::hash::BuildHasher;
use std::time::Duration;

// Randomly seeded per node: ids come from clients.
use foldhash::fast::RandomState;
use stampede_id::Id;

use super::labels::{LabelRef, LabelTable, Labels};
use super::Sandbox;

/// One sandbox, less its id.
#[derive(Debug, Clone)]
pub(super) struct Held {
    pub labels: LabelRef,
    pub ram_mb: u64,
    pub start: Duration,
    pub end: Option<Duration>,
    pub vcpu: u32,
}

impl Held {
    /// The full sandbox `id`, its labels in `table`.
    fn sandbox(&self, id: Id, table: &LabelTable) -> Sandbox {
        let labels = table.get(self.labels);
        Sandbox {
            sandbox_id: id,
            template_id: labels.template_id.clone(),
            team_id: labels.team_id.clone(),
            execution_id: labels.execution_id.clone(),
            vcpu: self.vcpu,
            ram_mb: self.ram_mb,
            start: self.start,
            end: self.end,
        }
    }
}

/// Where a node holds one sandbox, from its admission to its delete (or the node's
/// restart): handed out by [`NodeModel::begin_create`](super::NodeModel::begin_create).
///
/// A key outlives its sandbox harmlessly: the slot's generation moves on when the
/// sandbox leaves, so a stale key names nothing, even once the slot holds another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SandboxKey {
    slot: u32,
    generation: u32,
}

/// Whether a held sandbox is starting or running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Starting,
    Running,
}

/// A slot of the slab: a sandbox, or nothing since its generation's sandbox left.
#[derive(Debug, Clone)]
struct Slot {
    id: Id,
    held: Option<Held>,
    generation: u32,
    /// The high half of the id's hash: where the index looks for it, and what it
    /// compares before the id.
    tag: u32,
    /// Where the index holds this slot.
    pos: u32,
    phase: Phase,
}

/// Occupied slots by id: open addressing with linear probing over a power-of-two table
/// of `tag << 32 | (slot + 1)` words, 0 for an empty place and [`REMOVED`] for a removed
/// entry (a delete writes it without reading the table). Removed entries are dropped
/// when the table is rebuilt, from the slab, once live and removed entries fill three
/// quarters of it; a rebuild leaves it at most half full (a fleet of 10,000 nodes holds
/// 10,000 tables).
#[derive(Debug, Clone, Default)]
struct IdIndex {
    table: Vec<u64>,
    live: usize,
    removed: usize,
}

/// An empty place of the [`IdIndex`].
const EMPTY: u64 = 0;
/// A removed entry of the [`IdIndex`] (no slot number is `u32::MAX - 1`).
const REMOVED: u64 = u32::MAX as u64;

impl IdIndex {
    fn mask(&self) -> usize {
        self.table.len() - 1
    }

    /// The slot holding `id` (whose tag is `tag`).
    fn find(&self, slots: &[Slot], id: &str, tag: u32) -> Option<u32> {
        if self.table.is_empty() {
            return None;
        }
        let mask = self.mask();
        let mut i = tag as usize & mask;
        loop {
            let e = self.table[i];
            if e == EMPTY {
                return None;
            }
            // A tag matches a stranger about once in 2^23 probes: the id decides.
            let slot = (e as u32).wrapping_sub(1);
            if e != REMOVED && (e >> 32) as u32 == tag && slots[slot as usize].id == *id {
                return Some(slot);
            }
            i = (i + 1) & mask;
        }
    }

    /// Makes room for one more entry, rebuilding from `slots` (none of them about to be
    /// added) when the table is three quarters full.
    fn reserve_one(&mut self, slots: &mut [Slot]) {
        if (self.live + self.removed + 1) * 4 <= self.table.len() * 3 {
            return;
        }
        let len = ((self.live + 1) * 2).next_power_of_two().max(8);
        self.table.clear();
        self.table.resize(len, EMPTY);
        self.live = 0;
        self.removed = 0;
        for (k, s) in slots.iter_mut().enumerate() {
            if s.held.is_some() {
                s.pos = self.place(k as u32, s.tag);
            }
        }
    }

    /// Enters `slot` (tag `tag`, an id not in the table) and returns where; room was
    /// made by [`reserve_one`](Self::reserve_one).
    fn place(&mut self, slot: u32, tag: u32) -> u32 {
        let mask = self.mask();
        let mut i = tag as usize & mask;
        while self.table[i] != EMPTY && self.table[i] != REMOVED {
            i = (i + 1) & mask;
        }
        if self.table[i] == REMOVED {
            self.removed -= 1;
        }
        self.table[i] = (u64::from(tag) << 32) | u64::from(slot + 1);
        self.live += 1;
        i as u32
    }

    /// Removes the entry at `pos`.
    fn remove(&mut self, pos: u32) {
        self.table[pos as usize] = REMOVED;
        self.live -= 1;
        self.removed += 1;
    }

    fn clear(&mut self) {
        self.table.fill(EMPTY);
        self.live = 0;
        self.removed = 0;
    }
}

/// Count and vCPU of the sandboxes in one phase.
#[derive(Debug, Clone, Copy, Default)]
struct PhaseTally {
    len: usize,
    vcpu: u64,
    /// Exact (a u128 of u64s cannot overflow at any count a node holds): read
    /// saturated, as a running sum that saturates would give.
    ram_mb: u128,
}

impl PhaseTally {
    fn add(&mut self, h: &Held) {
        self.len += 1;
        self.vcpu += u64::from(h.vcpu);
        self.ram_mb += u128::from(h.ram_mb);
    }

    fn sub(&mut self, h: &Held) {
        self.len -= 1;
        self.vcpu -= u64::from(h.vcpu);
        self.ram_mb -= u128::from(h.ram_mb);
    }
}

/// A node's sandboxes, starting and running, by key and by id.
///
/// In no order: every place its order reaches an answer sorts by id (`List`, the
/// metrics' id list).
#[derive(Debug, Clone, Default)]
pub(super) struct Inventory {
    slots: Vec<Slot>,
    /// Empty slots, the last freed on top: a create reuses the slot the latest delete
    /// touched, still in the cache.
    free: Vec<u32>,
    by_id: IdIndex,
    hasher: RandomState,
    labels: LabelTable,
    starting: PhaseTally,
    running: PhaseTally,
}

impl Inventory {
    fn tally(&self, phase: Phase) -> &PhaseTally {
        match phase {
            Phase::Starting => &self.starting,
            Phase::Running => &self.running,
        }
    }

    fn tally_mut(&mut self, phase: Phase) -> &mut PhaseTally {
        match phase {
            Phase::Starting => &mut self.starting,
            Phase::Running => &mut self.running,
        }
    }

    /// Sandboxes in `phase`.
    pub(super) fn len(&self, phase: Phase) -> usize {
        self.tally(phase).len
    }

    /// vCPU of every sandbox in `phase`.
    pub(super) fn vcpu(&self, phase: Phase) -> u64 {
        self.tally(phase).vcpu
    }

    /// Memory of every running sandbox, MiB; saturating, never wrapping: a total past
    /// u64 reads as "everything", not as a little.
    pub(super) fn running_ram_mb(&self) -> u64 {
        u64::try_from(self.running.ram_mb).unwrap_or(u64::MAX)
    }

    /// The labels `template_id`, `team_id`, `execution_id` for a sandbox about to be
    /// inserted.
    pub(super) fn share_labels(
        &mut self,
        template_id: Id,
        team_id: Id,
        execution_id: Id,
    ) -> LabelRef {
        self.labels.share(Labels {
            template_id,
            team_id,
            execution_id,
        })
    }

    fn tag(&self, id: &str) -> u32 {
        (self.hasher.hash_one(id) >> 32) as u32
    }

    /// The key and phase of the sandbox `id`, if the node holds it.
    pub(super) fn find(&self, id: &str) -> Option<(SandboxKey, Phase)> {
        let slot = self.by_id.find(&self.slots, id, self.tag(id))?;
        let s = &self.slots[slot as usize];
        let key = SandboxKey {
            slot,
            generation: s.generation,
        };
        Some((key, s.phase))
    }

    /// The slot `key` names, if its sandbox is still held.
    fn slot_mut(&mut self, key: SandboxKey) -> Option<&mut Slot> {
        self.slots
            .get_mut(key.slot as usize)
            .filter(|s| s.generation == key.generation && s.held.is_some())
    }

    /// Holds `held` under `id` in `phase`. The caller has checked that the node does not
    /// hold `id` already (admission refuses it).
    pub(super) fn insert(&mut self, id: Id, held: Held, phase: Phase) -> SandboxKey {
        debug_assert!(self.find(&id).is_none(), "admission refuses a held id");
        self.tally_mut(phase).add(&held);
        let tag = self.tag(&id);
        self.by_id.reserve_one(&mut self.slots);
        let slot = match self.free.pop() {
            Some(k) => k,
            None => {
                let k = u32::try_from(self.slots.len())
                    .ok()
                    .filter(|&k| k < u32::MAX - 1)
                    .expect("fewer than 2^32 - 2 sandboxes a node");
                self.slots.push(Slot {
                    id: Id::EMPTY,
                    held: None,
                    generation: 0,
                    tag: 0,
                    pos: 0,
                    phase,
                });
                k
            }
        };
        let pos = self.by_id.place(slot, tag);
        let s = &mut self.slots[slot as usize];
        s.id = id;
        s.held = Some(held);
        s.tag = tag;
        s.pos = pos;
        s.phase = phase;
        SandboxKey {
            slot,
            generation: s.generation,
        }
    }

    /// Moves the starting sandbox `key` to running, started at `start`; false (and
    /// nothing changed) when `key` names no starting sandbox.
    pub(super) fn start_running(&mut self, key: SandboxKey, start: Duration) -> bool {
        let Some(s) = self
            .slots
            .get_mut(key.slot as usize)
            .filter(|s| s.generation == key.generation && s.phase == Phase::Starting)
        else {
            return false;
        };
        let Some(held) = &mut s.held else {
            return false;
        };
        held.start = start;
        self.starting.sub(held);
        self.running.add(held);
        s.phase = Phase::Running;
        true
    }

    /// The sandbox `key` names, if it is in `phase`, for changing its end time.
    pub(super) fn get_mut(&mut self, key: SandboxKey, phase: Phase) -> Option<&mut Held> {
        self.slot_mut(key)
            .filter(|s| s.phase == phase)
            .and_then(|s| s.held.as_mut())
    }

    /// Removes the sandbox `key` names if it is in `phase`, and returns it.
    pub(super) fn remove(&mut self, key: SandboxKey, phase: Phase) -> Option<Sandbox> {
        let s = self
            .slots
            .get_mut(key.slot as usize)
            .filter(|s| s.generation == key.generation && s.phase == phase)?;
        let held = s.held.take()?;
        s.generation = s.generation.wrapping_add(1);
        let id = std::mem::take(&mut s.id);
        self.by_id.remove(s.pos);
        self.tally_mut(phase).sub(&held);
        self.free.push(key.slot);
        let sandbox = held.sandbox(id, &self.labels);
        self.labels.release(held.labels);
        Some(sandbox)
    }

    /// Drops every sandbox; every key handed out so far goes stale.
    pub(super) fn clear(&mut self) {
        self.free.clear();
        for (k, s) in self.slots.iter_mut().enumerate() {
            if let Some(held) = s.held.take() {
                self.labels.release(held.labels);
                s.generation = s.generation.wrapping_add(1);
                s.id = Id::EMPTY;
            }
            // In slot order: which free slot a create takes reaches no answer.
            self.free.push(k as u32);
        }
        self.free.reverse();
        self.by_id.clear();
        self.starting = PhaseTally::default();
        self.running = PhaseTally::default();
    }

    fn held(&self, phase: Phase) -> impl Iterator<Item = (&Id, &Held)> {
        self.slots
            .iter()
            .filter(move |s| s.phase == phase)
            .filter_map(|s| s.held.as_ref().map(|h| (&s.id, h)))
    }

    /// Ids of the running sandboxes, in no order.
    pub(super) fn running_ids(&self) -> impl Iterator<Item = &Id> {
        self.held(Phase::Running).map(|(id, _)| id)
    }

    /// Every running sandbox, in no order.
    pub(super) fn running_sandboxes(&self) -> impl Iterator<Item = Sandbox> + '_ {
        self.held(Phase::Running)
            .map(|(id, h)| h.sandbox(id.clone(), &self.labels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(inv: &mut Inventory, vcpu: u32) -> Held {
        let labels = inv.share_labels(Id::new("base"), Id::EMPTY, Id::EMPTY);
        Held {
            labels,
            ram_mb: 512,
            start: Duration::ZERO,
            end: None,
            vcpu,
        }
    }

    #[test]
    fn a_key_goes_stale_when_its_sandbox_leaves_even_once_its_slot_is_reused() {
        let mut inv = Inventory::default();
        let h = held(&mut inv, 1);
        let a = inv.insert(Id::new("a"), h, Phase::Starting);
        assert!(inv.start_running(a, Duration::from_secs(1)));
        assert_eq!(inv.find("a"), Some((a, Phase::Running)));
        assert_eq!(
            inv.remove(a, Phase::Running).map(|s| s.sandbox_id),
            Some(Id::new("a"))
        );
        let h = held(&mut inv, 2);
        let b = inv.insert(Id::new("b"), h, Phase::Running);
        assert_ne!(a, b, "the slot is reused under a new generation");
        assert!(inv.remove(a, Phase::Running).is_none());
        assert!(!inv.start_running(a, Duration::ZERO));
        assert_eq!(inv.find("a"), None);
        assert_eq!((inv.len(Phase::Running), inv.vcpu(Phase::Running)), (1, 2));
        inv.clear();
        assert!(inv.remove(b, Phase::Running).is_none());
        assert_eq!(inv.find("b"), None);
        assert_eq!((inv.len(Phase::Running), inv.running_ram_mb()), (0, 0));
    }

    #[test]
    fn ids_find_their_keys_through_growth_and_removals() {
        let mut inv = Inventory::default();
        let keys: Vec<SandboxKey> = (0..300)
            .map(|i| {
                let h = held(&mut inv, 1);
                inv.insert(Id::from(format!("sb-{i}")), h, Phase::Running)
            })
            .collect();
        for (i, k) in keys.iter().enumerate().filter(|(i, _)| i % 3 == 0) {
            assert!(inv.remove(*k, Phase::Running).is_some(), "{i}");
        }
        for (i, k) in keys.iter().enumerate() {
            let found = inv.find(&format!("sb-{i}"));
            assert_eq!(found, (i % 3 != 0).then_some((*k, Phase::Running)), "{i}");
        }
        assert_eq!(inv.len(Phase::Running), 200);
        assert_eq!(inv.running_ids().count(), 200);
        assert_eq!(inv.running_ram_mb(), 200 * 512);
    }
}
