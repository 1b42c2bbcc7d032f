//! [`SampleHistory`]: what the set audit and the fault windows need of a run's truth
//! samples, folded as each sample is taken instead of keeping the samples.
//!
//! - Where each sandbox id was seen (node, first and last sample). An id the run has
//!   settled ([`SettledIds`]) and that the truth no longer lists is forgotten: the audit
//!   reads sightings only for ids the client did not delete and for ids no 201 explains.
//!   What is kept is the sandboxes alive now plus the vanished ids the client has not
//!   settled (the delete answer is still on its way, or the id is an anomaly).
//! - Restarts: every change of a node's `service_id`, dated at the first sample showing
//!   the new incarnation.
//! - With [`SampleHistory::with_windows`], per sample: its time, the services' create
//!   counters and the sandboxes that appeared on each node since the sample before (new
//!   ids when both list ids, else the count's growth): a few hundred bytes per sample,
//!   whatever the number of sandboxes.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde::{Deserialize, Serialize};

use super::sampler::{NodeCalls, Sample};
use crate::aggregate::SettledIds;

/// When an id was seen on one node during the run (ms on the samples' clock).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SeenAt {
    /// First sample that listed it there.
    pub first_ms: f64,
    /// Last sample that listed it there.
    pub last_ms: f64,
}

/// Id -> node -> when it was seen there.
pub type Sightings = BTreeMap<String, BTreeMap<String, SeenAt>>;

/// One sample as the fault windows read it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WindowSample {
    /// When it was taken.
    pub t_ms: f64,
    /// Per replica: the create RPCs it has sent to each node so far.
    pub calls: Vec<BTreeMap<String, NodeCalls>>,
    /// Sandboxes that appeared on each node since the sample before (none in the first
    /// sample, nor for a node missing from either).
    pub landed: BTreeMap<String, u64>,
}

/// The truth samples' history, folded one sample at a time (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct SampleHistory {
    /// Where each id was seen.
    seen: Sightings,
    /// Node -> times of the samples that first showed a new incarnation.
    restarts: BTreeMap<String, Vec<f64>>,
    /// Node -> its last known `service_id`.
    incarnation: BTreeMap<String, String>,
    /// Settled ids, forgotten once the truth no longer lists them.
    settled: Option<SettledIds>,
    /// Per sample, when kept.
    windows: Option<Vec<WindowSample>>,
    /// The previous sample's ids (when listed) and count, per node.
    previous: BTreeMap<String, (Option<HashSet<String>>, u64)>,
}

impl SampleHistory {
    /// A history that keeps every sighting and no per-sample record.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets the sightings of ids in `settled` once the truth stops listing them.
    pub fn forgetting(mut self, settled: SettledIds) -> Self {
        self.settled = Some(settled);
        self
    }

    /// Also keeps the per-sample record the fault windows read.
    pub fn with_windows(mut self) -> Self {
        self.windows = Some(Vec::new());
        self
    }

    /// The history of `samples`, in time order, keeping every sighting and the
    /// per-sample record.
    pub fn of(samples: &[Sample]) -> Self {
        let mut h = Self::new().with_windows();
        for s in samples {
            h.note(s);
        }
        h
    }

    /// Folds one sample in (samples must come in time order).
    pub fn note(&mut self, s: &Sample) {
        let mut landed = BTreeMap::new();
        let mut previous = BTreeMap::new();
        for n in &s.truth.nodes {
            if let Some(sid) = n.service_id.as_deref() {
                match self.incarnation.get(&n.id) {
                    Some(old) if old == sid => {}
                    Some(_) => {
                        add_restart(&mut self.restarts, &n.id, s.t_ms);
                        self.incarnation.insert(n.id.clone(), sid.to_string());
                    }
                    None => {
                        self.incarnation.insert(n.id.clone(), sid.to_string());
                    }
                }
            }
            for id in n.ids.iter().flatten() {
                self.seen
                    .entry(id.clone())
                    .or_default()
                    .entry(n.id.clone())
                    .and_modify(|at| at.last_ms = at.last_ms.max(s.t_ms))
                    .or_insert(SeenAt {
                        first_ms: s.t_ms,
                        last_ms: s.t_ms,
                    });
            }
            if self.windows.is_some() {
                if let Some(prev) = self.previous.get(&n.id) {
                    landed.insert(n.id.clone(), appeared(prev, n.ids.as_deref(), n.sandboxes));
                }
                let ids = n.ids.as_ref().map(|ids| ids.iter().cloned().collect());
                previous.insert(n.id.clone(), (ids, n.sandboxes));
            }
        }
        if let Some(w) = &mut self.windows {
            self.previous = previous;
            w.push(WindowSample {
                t_ms: s.t_ms,
                calls: s.calls.clone(),
                landed,
            });
        }
        self.forget_settled(s);
    }

    /// Drops the sightings of settled ids that `s` no longer lists.
    fn forget_settled(&mut self, s: &Sample) {
        let Some(settled) = &self.settled else {
            return;
        };
        let listed: BTreeSet<&str> = s
            .truth
            .nodes
            .iter()
            .flat_map(|n| n.ids.iter().flatten())
            .map(String::as_str)
            .collect();
        let settled = settled.view();
        self.seen
            .retain(|id, _| listed.contains(id.as_str()) || !settled.contains(id));
    }

    /// Moves every time by `-offset_ms` (onto the workload gate's clock).
    pub fn shift(&mut self, offset_ms: f64) {
        for at in self.seen.values_mut().flat_map(|m| m.values_mut()) {
            at.first_ms -= offset_ms;
            at.last_ms -= offset_ms;
        }
        for t in self.restarts.values_mut().flatten() {
            *t -= offset_ms;
        }
        for w in self.windows.iter_mut().flatten() {
            w.t_ms -= offset_ms;
        }
    }

    /// Ids whose sightings are kept.
    pub fn sighted(&self) -> usize {
        self.seen.len()
    }

    /// The per-sample record (empty unless kept).
    pub fn windows(&self) -> &[WindowSample] {
        self.windows.as_deref().unwrap_or_default()
    }

    /// Sightings and restarts, for the inventory.
    pub fn into_sightings(self) -> (Sightings, BTreeMap<String, Vec<f64>>) {
        (self.seen, self.restarts)
    }
}

/// Adds a restart of `node` at `at_ms` (times kept sorted, without repeats).
pub(crate) fn add_restart(restarts: &mut BTreeMap<String, Vec<f64>>, node: &str, at_ms: f64) {
    let r = restarts.entry(node.to_string()).or_default();
    r.push(at_ms);
    r.sort_by(f64::total_cmp);
    r.dedup();
}

/// Sandboxes on a node now that its previous sample did not show: new ids when both
/// list ids, else the count's growth.
fn appeared(prev: &(Option<HashSet<String>>, u64), ids: Option<&[String]>, count: u64) -> u64 {
    match (&prev.0, ids) {
        (Some(before), Some(now)) => now.iter().filter(|i| !before.contains(*i)).count() as u64,
        _ => count.saturating_sub(prev.1),
    }
}
