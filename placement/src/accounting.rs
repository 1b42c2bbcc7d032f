//! The per-node accounting state machine behind the four [`AccountingMode`]s.
//!
//! One state keeps the bookkeeping of every mode at once (it is cheap), so a driver can
//! report what each mode would believe; the configured mode decides what scoring reads.

use std::collections::{HashMap, HashSet};

// Randomly seeded per map (listed ids come from nodes); faster than SipHash on short ids.
use foldhash::fast::RandomState;
use stampede_id::Id;

use super::mode::AccountingMode;

/// Whether this state plants the named [`Mutation`](super::mutation::Mutation): always
/// false, and compiled away, without the test-only `mutations` feature.
#[cfg(feature = "mutations")]
macro_rules! mutated {
    ($s:expr, $m:ident) => {
        $s.mutation == Some(super::mutation::Mutation::$m)
    };
}
#[cfg(not(feature = "mutations"))]
macro_rules! mutated {
    ($s:expr, $m:ident) => {
        false
    };
}

/// What one placement instance knows about one node's allocated vCPU.
///
/// The id maps are hash maps: only their sizes and vCPU sums are read, never their
/// order, and a simulator updates them several times per placement.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeAccounting {
    /// `metric_cpu_allocated` of the last applied sync.
    reported_vcpu: u64,
    /// This instance's creates in progress on the node: sandbox id -> vCPU.
    in_flight: HashMap<Id, u32, RandomState>,
    in_flight_vcpu: u64,
    /// `reconciled`: vCPU of the creates in flight that the last sync's ids already name
    /// (the node counts a starting sandbox): the figure counts them, so they are not added.
    in_flight_listed_vcpu: u64,
    /// `optimistic`: vCPU added on create success, removed on delete; zeroed by every sync.
    optimistic_delta: i64,
    /// `reconciled`: ids (and vCPU) listed by the last sync that carried an id list.
    confirmed: HashMap<Id, u32, RandomState>,
    /// `reconciled`: created here, not yet listed by a sync: id -> (vCPU, syncs missed).
    pending_adds: HashMap<Id, (u32, u32), RandomState>,
    pending_adds_vcpu: u64,
    /// `reconciled`: deleted here, still listed by the last sync: id -> vCPU.
    pending_removes: HashMap<Id, u32, RandomState>,
    pending_removes_vcpu: u64,
    /// `reconciled`: deleted here before any sync listed it: id -> vCPU. Not counted; a
    /// sync whose (lagged) ids still name it turns it into a pending remove, and it is
    /// forgotten at the first sync that does not name it.
    unlisted_deletes: HashMap<Id, u32, RandomState>,
    #[cfg(feature = "mutations")]
    mutation: Option<super::mutation::Mutation>,
    /// `StaleSyncErasesAdds`: creates in flight whose add a sync overwrote, and their vCPU.
    #[cfg(feature = "mutations")]
    erased_adds: HashSet<Id, RandomState>,
    #[cfg(feature = "mutations")]
    erased_vcpu: u64,
}

impl NodeAccounting {
    /// Plant `mutation` in this node's bookkeeping (test builds only).
    #[cfg(feature = "mutations")]
    pub fn set_mutation(&mut self, mutation: Option<super::mutation::Mutation>) {
        self.mutation = mutation;
    }

    /// A create of `sandbox_id` needing `vcpu` was sent to this node.
    pub fn start_placing(&mut self, sandbox_id: &str, vcpu: u32) {
        self.end_in_flight(sandbox_id);
        self.in_flight.insert(Id::new(sandbox_id), vcpu);
        self.in_flight_vcpu += u64::from(vcpu);
        if self.confirmed.contains_key(sandbox_id) {
            self.in_flight_listed_vcpu += u64::from(vcpu);
        }
    }

    /// The create of `sandbox_id` succeeded: the sandbox now runs on the node.
    pub fn create_succeeded(&mut self, sandbox_id: &str, vcpu: u32) {
        if self.end_in_flight(sandbox_id) {
            return; // StaleSyncErasesAdds: its add was made, and a sync overwrote it
        }
        self.optimistic_delta += i64::from(vcpu);
        if self.confirmed.contains_key(sandbox_id) {
            return;
        }
        if let Some((old, _)) = self.pending_adds.insert(Id::new(sandbox_id), (vcpu, 0)) {
            self.pending_adds_vcpu -= u64::from(old);
        }
        self.pending_adds_vcpu += u64::from(vcpu);
    }

    /// The create of `sandbox_id` failed or was refused: nothing landed.
    pub fn create_ended_without_sandbox(&mut self, sandbox_id: &str) {
        self.end_in_flight(sandbox_id);
    }

    /// `sandbox_id` (`vcpu`) was deleted from the node.
    pub fn delete_succeeded(&mut self, sandbox_id: &str, vcpu: u32) {
        if mutated!(self, DeletesNotSubtracted) {
            return;
        }
        self.optimistic_delta -= i64::from(vcpu);
        let vcpu = if let Some((added, _)) = self.pending_adds.remove(sandbox_id) {
            self.pending_adds_vcpu -= u64::from(added);
            added
        } else if let Some(&listed) = self.confirmed.get(sandbox_id) {
            if self
                .pending_removes
                .insert(Id::new(sandbox_id), listed)
                .is_none()
            {
                self.pending_removes_vcpu += u64::from(listed);
            }
            return;
        } else {
            vcpu
        };
        // Not in the last sync's figure, but a later sync's figure may have been taken
        // before this delete: remembered until a sync no longer names it.
        self.unlisted_deletes.insert(Id::new(sandbox_id), vcpu);
    }

    /// A sync reported `reported_vcpu` allocated and, when the node provided one, the list
    /// of its sandboxes behind that figure. `listed_now` is what `List` returned live, when
    /// it differs from that list (lagged or frozen metrics): an unconfirmed add only counts
    /// as missed when the node no longer runs it, so stale metrics cannot make
    /// `reconciled` forget a sandbox. A delete no earlier sync listed is held while these
    /// ids still name it (their figure was taken before the delete) and forgotten at the
    /// first sync that does not: the ids behind successive figures move forward in time,
    /// so one that misses the sandbox was taken before its create or after its delete, and
    /// while the metrics' age stays under a sync interval no later one names it again.
    /// `unseen_limit` is
    /// [`PlacementConfig::reconcile_unseen_syncs`].
    ///
    /// Without an id list `reconciled` cannot confirm anything and falls back to
    /// `optimistic` for this sync (every pending entry is dropped).
    ///
    /// [`PlacementConfig::reconcile_unseen_syncs`]: super::PlacementConfig::reconcile_unseen_syncs
    pub fn apply_sync(
        &mut self,
        reported_vcpu: u64,
        sandboxes: Option<&[(String, u32)]>,
        listed_now: Option<&[String]>,
        unseen_limit: u32,
    ) {
        self.reported_vcpu = reported_vcpu;
        if !mutated!(self, DoubleCountAfterSync) {
            self.optimistic_delta = 0;
        }
        if mutated!(self, StaleSyncErasesAdds) {
            self.erase_in_flight_adds();
        }
        let keep_confirmed = mutated!(self, DoubleCountAfterSync);
        match sandboxes {
            Some(list) => {
                self.confirmed = list.iter().map(|(id, v)| (Id::new(id), *v)).collect();
                let confirmed = &self.confirmed;
                let live: Option<HashSet<&str, RandomState>> =
                    listed_now.map(|l| l.iter().map(String::as_str).collect());
                self.pending_removes
                    .retain(|id, _| confirmed.contains_key(id));
                // A delete the new ids still name: their figure was taken before it.
                for (id, vcpu) in self.unlisted_deletes.drain() {
                    if let Some(&listed) = confirmed.get(&id) {
                        self.pending_removes.entry(id).or_insert(if listed > 0 {
                            listed
                        } else {
                            vcpu
                        });
                    }
                }
                self.in_flight_listed_vcpu = self
                    .in_flight
                    .iter()
                    .filter(|(id, _)| confirmed.contains_key(id.as_str()))
                    .map(|(_, v)| u64::from(*v))
                    .sum();
                self.pending_adds.retain(|id, (_, missed)| {
                    if confirmed.contains_key(id) {
                        return keep_confirmed;
                    }
                    if live.as_ref().is_some_and(|l| l.contains(id.as_str())) {
                        *missed = 0; // running, just not in the metrics yet
                        return true;
                    }
                    *missed += 1;
                    unseen_limit == 0 || *missed < unseen_limit
                });
            }
            None => {
                self.confirmed.clear();
                self.pending_adds.clear();
                self.pending_removes.clear();
                self.unlisted_deletes.clear();
                self.in_flight_listed_vcpu = 0;
            }
        }
        self.pending_adds_vcpu = self.pending_adds.values().map(|(v, _)| u64::from(*v)).sum();
        self.pending_removes_vcpu = self.pending_removes.values().map(|v| u64::from(*v)).sum();
    }

    /// Allocated vCPU this node has in the eyes of `mode`; never negative.
    pub fn believed(&self, mode: AccountingMode) -> u64 {
        let reported = self.reported_vcpu as i128;
        let in_flight = self.in_flight_vcpu as i128 - self.erased_vcpu() as i128;
        let believed = match mode {
            AccountingMode::Reported => reported,
            AccountingMode::InFlight => reported + in_flight,
            AccountingMode::Optimistic => reported + in_flight + i128::from(self.optimistic_delta),
            AccountingMode::Reconciled => {
                reported + in_flight - self.in_flight_listed_vcpu as i128
                    + self.pending_adds_vcpu as i128
                    - self.pending_removes_vcpu as i128
            }
        };
        u64::try_from(believed.max(0)).unwrap_or(u64::MAX)
    }

    /// `metric_cpu_allocated` of the last applied sync.
    pub fn reported_vcpu(&self) -> u64 {
        self.reported_vcpu
    }

    /// Number of this instance's creates in progress on the node.
    pub fn in_flight_count(&self) -> usize {
        self.in_flight.len()
    }

    /// vCPU of this instance's creates in progress on the node.
    pub fn in_flight_vcpu(&self) -> u64 {
        self.in_flight_vcpu
    }

    /// `reconciled`: creates not yet confirmed by a sync.
    pub fn pending_adds(&self) -> usize {
        self.pending_adds.len()
    }

    /// `reconciled`: deletes not yet confirmed by a sync.
    pub fn pending_removes(&self) -> usize {
        self.pending_removes.len()
    }

    /// `reconciled`: deletes no sync listed yet (held only if a lagged sync names them).
    pub fn unlisted_deletes(&self) -> usize {
        self.unlisted_deletes.len()
    }

    /// The vCPU this instance recorded for `sandbox_id` on the node (in flight, placed and
    /// not yet listed, listed by the last sync, deleted and still listed, or deleted before
    /// any sync listed it), if any: a lagged sync's ids get their vCPU from here.
    pub fn known_vcpu(&self, sandbox_id: &str) -> Option<u32> {
        self.in_flight
            .get(sandbox_id)
            .or_else(|| self.pending_adds.get(sandbox_id).map(|(v, _)| v))
            .or_else(|| self.confirmed.get(sandbox_id))
            .or_else(|| self.pending_removes.get(sandbox_id))
            .or_else(|| self.unlisted_deletes.get(sandbox_id))
            .copied()
    }

    /// Ends the create of `sandbox_id` in flight, if it is; true when a sync had erased
    /// its add (`StaleSyncErasesAdds`; never without the mutation).
    fn end_in_flight(&mut self, sandbox_id: &str) -> bool {
        let Some(v) = self.in_flight.remove(sandbox_id) else {
            return false;
        };
        self.in_flight_vcpu -= u64::from(v);
        if self.confirmed.contains_key(sandbox_id) {
            self.in_flight_listed_vcpu -= u64::from(v);
        }
        self.forget_erased(sandbox_id, v)
    }

    /// `StaleSyncErasesAdds`: the add of every create in flight is overwritten by the
    /// sync's figure, which does not count a starting sandbox yet. The creates stay in
    /// flight (the node still starts them); only their vCPU leaves the count.
    #[cfg(feature = "mutations")]
    fn erase_in_flight_adds(&mut self) {
        for (id, v) in &self.in_flight {
            if self.erased_adds.insert(id.clone()) {
                self.erased_vcpu += u64::from(*v);
            }
        }
    }
    #[cfg(not(feature = "mutations"))]
    fn erase_in_flight_adds(&mut self) {}

    /// `StaleSyncErasesAdds`: whether the ended create's add had been erased.
    #[cfg(feature = "mutations")]
    fn forget_erased(&mut self, sandbox_id: &str, vcpu: u32) -> bool {
        let erased = self.erased_adds.remove(sandbox_id);
        if erased {
            self.erased_vcpu -= u64::from(vcpu);
        }
        erased
    }
    #[cfg(not(feature = "mutations"))]
    fn forget_erased(&mut self, _sandbox_id: &str, _vcpu: u32) -> bool {
        false
    }

    /// vCPU of the creates in flight whose add a sync erased (0 without the mutation).
    #[cfg(feature = "mutations")]
    fn erased_vcpu(&self) -> u64 {
        self.erased_vcpu
    }
    #[cfg(not(feature = "mutations"))]
    fn erased_vcpu(&self) -> u64 {
        0
    }
}
