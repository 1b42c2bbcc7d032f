//! The per-node accounting state machine behind the four [`AccountingMode`]s.
//!
//! One state keeps the bookkeeping of every mode at once, so a driver can report what
//! each mode would believe (the service's `GET /nodes` does); the configured mode decides
//! what scoring reads. Only `reconciled` keeps per-sandbox state beyond the creates in
//! flight, and at 10,000 nodes that state is most of a simulation's memory: a driver that
//! reports no `reconciled` figure while running another mode drops it
//! ([`keep_only`](NodeAccounting::keep_only)). Every other mode's figure is the same
//! with or without it.

use std::collections::{HashMap, HashSet};

// Randomly seeded per map (listed ids come from nodes); faster than SipHash on short ids.
use foldhash::fast::RandomState;
use stampede_id::{Id, IdMap};

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
/// The id maps are in no order (hash maps, and [`IdMap`]s where a node holds a few
/// entries at a time): only their sizes and vCPU sums are read, never their order, and
/// a simulator updates them several times per placement.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeAccounting {
    /// `metric_cpu_allocated` of the last applied sync.
    reported_vcpu: u64,
    /// This instance's creates in progress on the node: sandbox id -> vCPU.
    in_flight: IdMap<u32>,
    in_flight_vcpu: u64,
    /// `optimistic`: vCPU added on create success, removed on delete; zeroed by every sync.
    optimistic_delta: i64,
    /// `reconciled`'s bookkeeping; `None` once [`keep_only`](Self::keep_only) dropped it.
    reconciled: Option<Box<Reconciled>>,
    #[cfg(feature = "mutations")]
    mutation: Option<super::mutation::Mutation>,
    /// `StaleSyncErasesAdds`: creates in flight whose add a sync overwrote, and their vCPU.
    #[cfg(feature = "mutations")]
    erased_adds: HashSet<Id, RandomState>,
    #[cfg(feature = "mutations")]
    erased_vcpu: u64,
}

/// Deletes per node that [`Reconciled::unlisted_deletes`] holds in a vector before it
/// spills into a hash map: a fleet of thousands of nodes sees a few dozen per node
/// between two syncs.
const UNLISTED_INLINE: usize = 64;

/// What only `reconciled` reads: the creates and deletes of this instance that no sync
/// has confirmed yet, and the ids the last sync listed.
#[derive(Debug, Clone, Default, PartialEq)]
struct Reconciled {
    /// vCPU of the creates in flight that the last sync's ids already name (the node
    /// counts a starting sandbox): the figure counts them, so they are not added.
    in_flight_listed_vcpu: u64,
    /// Ids (and vCPU) listed by the last sync that carried an id list.
    confirmed: IdMap<u32>,
    /// Created here, not yet listed by a sync: id -> (vCPU, syncs missed).
    pending_adds: HashMap<Id, (u32, u32), RandomState>,
    pending_adds_vcpu: u64,
    /// Deleted here, still listed by the last sync: id -> vCPU.
    pending_removes: IdMap<u32>,
    pending_removes_vcpu: u64,
    /// Deleted here before any sync listed it: id -> vCPU. Not counted; a sync whose
    /// (lagged) ids still name it turns it into a pending remove, and it is forgotten at
    /// the first sync that does not name it. Every node fills it between two syncs and
    /// a replica syncs them all at one instant, so their peaks add up: a vector up to
    /// [`UNLISTED_INLINE`] entries holds them in half a hash map's memory.
    unlisted_deletes: IdMap<u32, UNLISTED_INLINE>,
}

impl Default for NodeAccounting {
    /// A node nothing happened on yet, keeping every mode's bookkeeping.
    fn default() -> Self {
        Self {
            reported_vcpu: 0,
            in_flight: IdMap::new(),
            in_flight_vcpu: 0,
            optimistic_delta: 0,
            reconciled: Some(Box::default()),
            #[cfg(feature = "mutations")]
            mutation: None,
            #[cfg(feature = "mutations")]
            erased_adds: HashSet::default(),
            #[cfg(feature = "mutations")]
            erased_vcpu: 0,
        }
    }
}

impl NodeAccounting {
    /// Keeps only the bookkeeping `mode` reads, dropping the rest: for a driver that
    /// reports no other mode's figure. [`believed`](Self::believed) then answers for
    /// `mode` (and for every mode but `reconciled`) as before; asked for `reconciled`
    /// after it was dropped, it answers what `in-flight` believes.
    pub fn keep_only(&mut self, mode: AccountingMode) {
        if mode != AccountingMode::Reconciled {
            self.reconciled = None;
        }
    }

    /// Whether [`believed`](Self::believed) answers for `mode` (see
    /// [`keep_only`](Self::keep_only)).
    pub fn keeps(&self, mode: AccountingMode) -> bool {
        mode != AccountingMode::Reconciled || self.reconciled.is_some()
    }

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
        if let Some(r) = &mut self.reconciled {
            if r.confirmed.contains_key(sandbox_id) {
                r.in_flight_listed_vcpu += u64::from(vcpu);
            }
        }
    }

    /// The create of `sandbox_id` succeeded: the sandbox now runs on the node.
    pub fn create_succeeded(&mut self, sandbox_id: &str, vcpu: u32) {
        if self.end_in_flight(sandbox_id) {
            return; // StaleSyncErasesAdds: its add was made, and a sync overwrote it
        }
        self.optimistic_delta += i64::from(vcpu);
        let Some(r) = &mut self.reconciled else {
            return;
        };
        if r.confirmed.contains_key(sandbox_id) {
            return;
        }
        if let Some((old, _)) = r.pending_adds.insert(Id::new(sandbox_id), (vcpu, 0)) {
            r.pending_adds_vcpu -= u64::from(old);
        }
        r.pending_adds_vcpu += u64::from(vcpu);
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
        let Some(r) = &mut self.reconciled else {
            return;
        };
        let vcpu = if let Some((added, _)) = r.pending_adds.remove(sandbox_id) {
            r.pending_adds_vcpu -= u64::from(added);
            added
        } else if let Some(&listed) = r.confirmed.get(sandbox_id) {
            if r.pending_removes
                .insert(Id::new(sandbox_id), listed)
                .is_none()
            {
                r.pending_removes_vcpu += u64::from(listed);
            }
            return;
        } else {
            vcpu
        };
        // Not in the last sync's figure, but a later sync's figure may have been taken
        // before this delete: remembered until a sync no longer names it.
        r.unlisted_deletes.insert(Id::new(sandbox_id), vcpu);
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
        let Some(r) = &mut self.reconciled else {
            return;
        };
        match sandboxes {
            Some(list) => {
                r.confirmed = list.iter().map(|(id, v)| (Id::new(id), *v)).collect();
                let confirmed = &r.confirmed;
                let live: Option<HashSet<&str, RandomState>> =
                    listed_now.map(|l| l.iter().map(String::as_str).collect());
                r.pending_removes.retain(|id, _| confirmed.contains_key(id));
                // A delete the new ids still name: their figure was taken before it.
                for (id, vcpu) in std::mem::take(&mut r.unlisted_deletes) {
                    if let Some(&listed) = confirmed.get(&id) {
                        if !r.pending_removes.contains_key(&id) {
                            let vcpu = if listed > 0 { listed } else { vcpu };
                            r.pending_removes.insert(id, vcpu);
                        }
                    }
                }
                r.in_flight_listed_vcpu = self
                    .in_flight
                    .iter()
                    .filter(|(id, _)| confirmed.contains_key(id.as_str()))
                    .map(|(_, v)| u64::from(*v))
                    .sum();
                r.pending_adds.retain(|id, (_, missed)| {
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
                r.confirmed.clear();
                r.pending_adds.clear();
                r.pending_removes.clear();
                r.unlisted_deletes.clear();
                r.in_flight_listed_vcpu = 0;
            }
        }
        r.pending_adds_vcpu = r.pending_adds.values().map(|(v, _)| u64::from(*v)).sum();
        r.pending_removes_vcpu = r.pending_removes.values().map(|v| u64::from(*v)).sum();
    }

    /// Allocated vCPU this node has in the eyes of `mode`; never negative.
    pub fn believed(&self, mode: AccountingMode) -> u64 {
        let reported = self.reported_vcpu as i128;
        let in_flight = self.in_flight_vcpu as i128 - self.erased_vcpu() as i128;
        let believed = match mode {
            AccountingMode::Reported => reported,
            AccountingMode::InFlight => reported + in_flight,
            AccountingMode::Optimistic => reported + in_flight + i128::from(self.optimistic_delta),
            AccountingMode::Reconciled => match &self.reconciled {
                Some(r) => {
                    reported + in_flight - r.in_flight_listed_vcpu as i128
                        + r.pending_adds_vcpu as i128
                        - r.pending_removes_vcpu as i128
                }
                // Dropped only by a core whose drivers read its configured mode alone
                // (`keep_only_configured_mode`), which is then another one.
                None => {
                    debug_assert!(false, "`reconciled` asked of a core that dropped it");
                    reported + in_flight
                }
            },
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

    /// `reconciled`: creates not yet confirmed by a sync (0 when not kept).
    pub fn pending_adds(&self) -> usize {
        self.reconciled.as_ref().map_or(0, |r| r.pending_adds.len())
    }

    /// `reconciled`: deletes not yet confirmed by a sync (0 when not kept).
    pub fn pending_removes(&self) -> usize {
        self.reconciled
            .as_ref()
            .map_or(0, |r| r.pending_removes.len())
    }

    /// `reconciled`: deletes no sync listed yet (held only if a lagged sync names them;
    /// 0 when not kept).
    pub fn unlisted_deletes(&self) -> usize {
        self.reconciled
            .as_ref()
            .map_or(0, |r| r.unlisted_deletes.len())
    }

    /// The vCPU this instance recorded for `sandbox_id` on the node (in flight, placed and
    /// not yet listed, listed by the last sync, deleted and still listed, or deleted before
    /// any sync listed it), if any: a lagged sync's ids get their vCPU from here. Only
    /// `reconciled` reads that vCPU; without its bookkeeping, only creates in flight are
    /// known.
    pub fn known_vcpu(&self, sandbox_id: &str) -> Option<u32> {
        let r = self.reconciled.as_deref();
        self.in_flight
            .get(sandbox_id)
            .or_else(|| r?.pending_adds.get(sandbox_id).map(|(v, _)| v))
            .or_else(|| r?.confirmed.get(sandbox_id))
            .or_else(|| r?.pending_removes.get(sandbox_id))
            .or_else(|| r?.unlisted_deletes.get(sandbox_id))
            .copied()
    }

    /// Ends the create of `sandbox_id` in flight, if it is; true when a sync had erased
    /// its add (`StaleSyncErasesAdds`; never without the mutation).
    fn end_in_flight(&mut self, sandbox_id: &str) -> bool {
        let Some(v) = self.in_flight.remove(sandbox_id) else {
            return false;
        };
        self.in_flight_vcpu -= u64::from(v);
        if let Some(r) = &mut self.reconciled {
            if r.confirmed.contains_key(sandbox_id) {
                r.in_flight_listed_vcpu -= u64::from(v);
            }
        }
        self.forget_erased(sandbox_id, v)
    }

    /// `StaleSyncErasesAdds`: the add of every create in flight is overwritten by the
    /// sync's figure, which does not count a starting sandbox yet. The creates stay in
    /// flight (the node still starts them); only their vCPU leaves the count.
    #[cfg(feature = "mutations")]
    fn erase_in_flight_adds(&mut self) {
        for (id, v) in self.in_flight.iter() {
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
