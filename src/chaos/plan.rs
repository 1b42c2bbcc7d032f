//! A fault plan: a profile's `chaos:` steps resolved against the node ids and the seed.
//!
//! Resolution is pure and deterministic: `{random: N}` and `{fraction: f}` pick nodes
//! with a ChaCha8 RNG seeded from the profile seed and the step index, so adding a step
//! never changes the picks of the others.

use std::time::Duration;

use mock_node::api::{FaultKind, FaultRequest, ServiceStatus};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::profile::{ChaosFault, ChaosStep, CommandAction, NodeSelector};

/// One fault of a plan, ready to apply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedFault {
    /// Index of the `chaos:` step it comes from.
    pub step: usize,
    /// Offset from the workload's start gate.
    #[serde(with = "humantime_serde")]
    pub at: Duration,
    /// What to do, with its parameters.
    pub kind: FaultKind,
    /// Target node ids, in node order.
    pub nodes: Vec<String>,
    /// How long it lasts; none = until the workload ends (always none for `restart`).
    #[serde(default, with = "humantime_serde")]
    pub duration: Option<Duration>,
    /// A `drain` step: applied through the placement API's `POST /nodes/{nodeID}`
    /// (`draining`, healed with `ready`), not the mock-node admin API. Its `kind` is
    /// `status` with `status: draining`, what the node then reports, which is what the
    /// simulator models.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub through_api: bool,
    /// A `command` step: applied and healed by running these programs. Its `kind` is
    /// `status: healthy` (no effect stampede knows of; the simulator refuses it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandAction>,
}

impl PlannedFault {
    /// The step's fault name: `drain` for a drain, `command` for a command, else the
    /// mock-node kind.
    pub fn name(&self) -> &'static str {
        if self.through_api {
            ChaosFault::Drain.name()
        } else if let Some(c) = &self.command {
            ChaosFault::Command(c.clone()).name()
        } else {
            self.kind.as_str()
        }
    }

    /// The admin API body that applies this fault (the duration is passed along so that
    /// the fleet heals it by itself even if the harness dies).
    pub fn request(&self) -> FaultRequest {
        FaultRequest {
            kind: self.kind,
            nodes: self.nodes.clone(),
            duration: self.duration,
        }
    }
}

/// A resolved `chaos:` schedule, ordered by `at` (then step index).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultPlan {
    /// The faults.
    pub faults: Vec<PlannedFault>,
}

/// Why a `chaos:` step cannot be resolved; `field` is the profile path (`chaos[2].nodes`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("chaos[{step}].{field}: {message}")]
pub struct PlanError {
    /// Step index.
    pub step: usize,
    /// Field inside the step (`fault`, `nodes[1]`, `params.latency`, ...).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl FaultPlan {
    /// Resolves `steps` against the fleet's `node_ids` (in node order) with `seed`.
    pub fn resolve(
        steps: &[ChaosStep],
        node_ids: &[String],
        seed: u64,
    ) -> Result<FaultPlan, PlanError> {
        let mut faults = steps
            .iter()
            .enumerate()
            .map(|(i, s)| resolve_step(i, s, node_ids, seed))
            .collect::<Result<Vec<_>, _>>()?;
        faults.sort_by_key(|f| (f.at, f.step));
        Ok(FaultPlan { faults })
    }

    /// Whether the plan has no fault.
    pub fn is_empty(&self) -> bool {
        self.faults.is_empty()
    }

    /// When the last fault ends (restart and open-ended faults count at their start).
    pub fn span(&self) -> Duration {
        self.faults
            .iter()
            .map(|f| f.at + f.duration.unwrap_or_default())
            .max()
            .unwrap_or_default()
    }
}

fn err(step: usize, field: impl Into<String>, message: impl Into<String>) -> PlanError {
    PlanError {
        step,
        field: field.into(),
        message: message.into(),
    }
}

fn resolve_step(
    i: usize,
    s: &ChaosStep,
    node_ids: &[String],
    seed: u64,
) -> Result<PlannedFault, PlanError> {
    let kind = s.fault.node_kind().unwrap_or(FaultKind::Status {
        status: ServiceStatus::Healthy,
    });
    if s.duration.is_some_and(|d| d.is_zero()) {
        return Err(err(i, "duration", "must be > 0"));
    }
    let nodes = pick_nodes(i, &s.nodes, node_ids, step_seed(seed, i))?;
    Ok(PlannedFault {
        step: i,
        at: s.at,
        kind,
        nodes,
        duration: if kind.is_instant() { None } else { s.duration },
        through_api: s.fault == ChaosFault::Drain,
        command: match &s.fault {
            ChaosFault::Command(c) => Some(c.clone()),
            _ => None,
        },
    })
}

/// Seed of step `i`'s node picks: SplitMix64 of the run seed and the index.
fn step_seed(seed: u64, i: usize) -> u64 {
    let mut z = seed
        .wrapping_add(0xC4A0_5EED)
        .wrapping_add((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn pick_nodes(
    i: usize,
    sel: &NodeSelector,
    node_ids: &[String],
    seed: u64,
) -> Result<Vec<String>, PlanError> {
    let n = node_ids.len();
    let count = match sel {
        NodeSelector::Ids(ids) => {
            if ids.is_empty() {
                return Err(err(i, "nodes", "must name at least one node"));
            }
            for (j, id) in ids.iter().enumerate() {
                if !node_ids.contains(id) {
                    return Err(err(
                        i,
                        format!("nodes[{j}]"),
                        format!("no node `{id}` in this cluster"),
                    ));
                }
            }
            // Node order, each once, whatever order the profile lists them in.
            return Ok(node_ids
                .iter()
                .filter(|id| ids.contains(id))
                .cloned()
                .collect());
        }
        NodeSelector::Random { random } => {
            if *random < 1 || *random > n {
                return Err(err(
                    i,
                    "nodes.random",
                    format!("must be >= 1 and <= {n} (the number of nodes)"),
                ));
            }
            *random
        }
        NodeSelector::Fraction { fraction } => {
            if !(*fraction > 0.0 && *fraction <= 1.0) {
                return Err(err(i, "nodes.fraction", "must be in (0, 1]"));
            }
            if n == 0 {
                return Err(err(i, "nodes.fraction", "the cluster has no nodes"));
            }
            ((*fraction * n as f64).ceil() as usize).clamp(1, n)
        }
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut picked = rand::seq::index::sample(&mut rng, n, count).into_vec();
    picked.sort_unstable();
    Ok(picked.into_iter().map(|k| node_ids[k].clone()).collect())
}
