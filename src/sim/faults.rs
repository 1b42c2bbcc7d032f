//! The chaos schedule in virtual time, and the effect of the faults in force on a node.
//!
//! The profile's `chaos:` steps are resolved by the same [`FaultPlan::resolve`] as a
//! real run (same node picks for the same seed), then turned into node indices and
//! virtual times.

use std::collections::HashMap;

use stampede_node_model::config::ClusterConfig;
use stampede_node_model::effect::FaultEffect;
use stampede_node_model::fault::FaultKind;

use super::error::SimError;
use super::queue::Nanos;
use super::setup::to_nanos;
use crate::chaos::FaultPlan;
use crate::profile::ChaosStep;

/// One chaos step, resolved for the simulator.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedFault {
    /// Position in the profile's `chaos:` list (the fault's id in the report).
    pub index: usize,
    /// What it does, with its parameters.
    pub kind: FaultKind,
    /// Indices of the nodes it applies to, ascending.
    pub nodes: Vec<u32>,
    /// When it starts.
    pub at: Nanos,
    /// When it heals by itself; `None` = at the end of the workload.
    pub until: Option<Nanos>,
    /// The step's name in reports (`drain` is a `status: draining` here).
    pub name: &'static str,
}

/// Resolve `steps` against `cluster` with the profile `seed`, in application order.
pub fn plan_faults(
    steps: &[ChaosStep],
    cluster: &ClusterConfig,
    seed: u64,
) -> Result<Vec<PlannedFault>, SimError> {
    let ids: Vec<String> = (0..cluster.nodes).map(|k| cluster.node_id(k)).collect();
    let plan = FaultPlan::resolve(steps, &ids, seed).map_err(|e| SimError::Chaos {
        index: e.step,
        message: format!("{}: {}", e.field, e.message),
    })?;
    if let Some(f) = plan.faults.iter().find(|f| f.command.is_some()) {
        return Err(SimError::Chaos {
            index: f.step,
            message: "a `command` step runs programs against a real cluster: the simulator \
                      cannot model what they do"
                .into(),
        });
    }
    // Node index by id: a fault on every node of a large fleet is not quadratic.
    let index: HashMap<&str, u32> = ids
        .iter()
        .enumerate()
        .map(|(k, id)| (id.as_str(), k as u32))
        .collect();
    Ok(plan
        .faults
        .into_iter()
        .map(|f| {
            let at = to_nanos(f.at);
            let name = f.name();
            PlannedFault {
                name,
                index: f.step,
                kind: f.kind,
                nodes: f
                    .nodes
                    .iter()
                    .filter_map(|id| index.get(id.as_str()).copied())
                    .collect(),
                at,
                until: if f.kind.is_instant() {
                    Some(at)
                } else {
                    f.duration.map(|d| at.saturating_add(to_nanos(d)))
                },
            }
        })
        .collect())
}

/// The effect of the faults `active` (indices into `plan`, in application order) on one
/// node: later faults win on conflicts, as in the mock-node fault book.
pub fn effect_of(plan: &[PlannedFault], active: &[usize]) -> FaultEffect {
    let mut e = FaultEffect::default();
    for &i in active {
        let Some(f) = plan.get(i) else { continue };
        e.add(f.index as u64, f.kind);
    }
    e
}
