//! The sandboxes of one node in one state (starting or running), held compactly.
//!
//! A simulator holds every node's sandboxes at once (10,000 nodes with tens of sandboxes
//! each), so a sandbox is kept as its id (the map's key) and a [`Held`] record of 56
//! bytes rather than as a [`Sandbox`] of 144 beside a second copy of its id. The three
//! ids a create only has echoed back (template, team, execution) live in one shared
//! [`Labels`] value: creates that carry the same ones as the node's previous create share
//! it ([`LabelCache`]), which is what a workload of one template and one team does.
//! [`Sandbox`] values are built when asked for (`List`, a delete's answer).

use std::sync::Arc;
use std::time::Duration;

use stampede_id::{Id, IdMap};

use super::Sandbox;

/// The ids a create carries that the node only echoes back in `List`.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Labels {
    template_id: Id,
    team_id: Id,
    execution_id: Id,
}

/// The [`Labels`] of the node's last create, shared with the next create that carries
/// the same ones.
#[derive(Debug, Clone, Default)]
pub(super) struct LabelCache(Option<Arc<Labels>>);

impl LabelCache {
    /// The shared labels `template_id`, `team_id`, `execution_id` (allocates only when
    /// they differ from the previous create's).
    pub(super) fn share(&mut self, template_id: Id, team_id: Id, execution_id: Id) -> Arc<Labels> {
        let labels = Labels {
            template_id,
            team_id,
            execution_id,
        };
        match &self.0 {
            Some(last) if **last == labels => Arc::clone(last),
            _ => {
                let shared = Arc::new(labels);
                self.0 = Some(Arc::clone(&shared));
                shared
            }
        }
    }
}

/// One sandbox, less its id.
#[derive(Debug, Clone)]
pub(super) struct Held {
    pub labels: Arc<Labels>,
    pub ram_mb: u64,
    pub start: Duration,
    pub end: Option<Duration>,
    pub vcpu: u32,
}

impl Held {
    /// The full sandbox `id`.
    fn sandbox(&self, id: &Id) -> Sandbox {
        Sandbox {
            sandbox_id: id.clone(),
            template_id: self.labels.template_id.clone(),
            team_id: self.labels.team_id.clone(),
            execution_id: self.labels.execution_id.clone(),
            vcpu: self.vcpu,
            ram_mb: self.ram_mb,
            start: self.start,
            end: self.end,
        }
    }
}

/// Sandboxes by id, with the sum of their vCPU kept alongside.
///
/// In no order (an [`IdMap`]: a short vector while the node holds a few, as its
/// starting sandboxes mostly are, a hash map past that): every place its order reaches
/// an answer sorts by id (`List`, the metrics' id list), and lookups by id are the hot
/// path of a simulation.
#[derive(Debug, Clone, Default)]
pub(super) struct Inventory {
    by_id: IdMap<Held>,
    vcpu: u64,
}

impl Inventory {
    pub(super) fn len(&self) -> usize {
        self.by_id.len()
    }

    /// vCPU of every sandbox held.
    pub(super) fn vcpu(&self) -> u64 {
        self.vcpu
    }

    pub(super) fn contains(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }

    /// Holds `held` under `id`, replacing (and returning) what was held there.
    pub(super) fn insert(&mut self, id: Id, held: Held) -> Option<Held> {
        self.vcpu += u64::from(held.vcpu);
        let old = self.by_id.insert(id, held);
        if let Some(o) = &old {
            self.vcpu -= u64::from(o.vcpu);
        }
        old
    }

    pub(super) fn remove(&mut self, id: &str) -> Option<(Id, Held)> {
        let (id, held) = self.by_id.remove_entry(id)?;
        self.vcpu -= u64::from(held.vcpu);
        Some((id, held))
    }

    /// Removes `id` and returns it as a [`Sandbox`].
    pub(super) fn take(&mut self, id: &str) -> Option<Sandbox> {
        self.remove(id).map(|(id, held)| held.sandbox(&id))
    }

    pub(super) fn get_mut(&mut self, id: &str) -> Option<&mut Held> {
        self.by_id.get_mut(id)
    }

    pub(super) fn clear(&mut self) {
        self.by_id.clear();
        self.vcpu = 0;
    }

    /// Memory of every sandbox held, MiB; saturating, never wrapping: a total past u64
    /// reads as "everything", not as a little.
    pub(super) fn ram_mb(&self) -> u64 {
        self.by_id
            .values()
            .fold(0u64, |acc, h| acc.saturating_add(h.ram_mb))
    }

    /// Ids, in no order.
    pub(super) fn ids(&self) -> impl Iterator<Item = &Id> {
        self.by_id.keys()
    }

    /// Every sandbox, in no order.
    pub(super) fn sandboxes(&self) -> impl Iterator<Item = Sandbox> + '_ {
        self.by_id.iter().map(|(id, held)| held.sandbox(id))
    }
}
