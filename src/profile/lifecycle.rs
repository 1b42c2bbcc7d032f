//! `workload.lifecycle`: what a sandbox does after its create (hold, pause, resume or
//! connect, kill), and which sandboxes do it.

use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use stampede_node_model::config::LatencyDist;

/// A per-sandbox lifecycle. YAML:
/// `{mix: 0.5, steps: [{hold: {dist: constant, value: 2s}}, pause, {hold: ...}, resume, kill]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Lifecycle {
    /// Fraction of sandboxes (0 to 1) that follow `steps`, drawn per sandbox from the
    /// profile's seed; the rest are plain creates (deleted after `workload.lifetime`, if
    /// set). Default 1.
    #[serde(default = "default_mix")]
    pub mix: f64,
    /// What a sandbox does after its create, in order. A `resume` or `connect` needs a
    /// `pause` before it; `kill` may only come last.
    // One-key maps in YAML (serde_yaml_ng would otherwise want a `!hold` tag).
    #[serde(with = "serde_yaml_ng::with::singleton_map_recursive")]
    #[schemars(with = "Vec<LifecycleStep>")]
    pub steps: Vec<LifecycleStep>,
}

fn default_mix() -> f64 {
    1.0
}

/// One step of a [`Lifecycle`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum LifecycleStep {
    /// Wait a time drawn from this distribution.
    Hold(LatencyDist),
    /// `POST /sandboxes/{id}/pause`.
    Pause,
    /// `POST /sandboxes/{id}/resume` (with the sandbox's `timeout`).
    Resume,
    /// `POST /sandboxes/{id}/connect` (with the sandbox's `timeout`): resumes a paused
    /// sandbox.
    Connect,
    /// `DELETE /sandboxes/{id}`.
    Kill,
}

/// Salt that keeps a sandbox's lifecycle draws apart from its lifetime's.
const LIFECYCLE_SALT: u64 = 0x6C69_6665_6379_636C;

impl Lifecycle {
    /// The RNG of sandbox `index`'s lifecycle: one per slot, so a slot's draws do not
    /// depend on arrival order.
    pub fn rng(seed: u64, index: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(seed ^ LIFECYCLE_SALT ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    /// The steps sandbox `index` follows, with every hold drawn; `None`: a plain create.
    pub fn plan(&self, seed: u64, index: u64) -> Option<Vec<PlannedStep>> {
        let mut rng = Self::rng(seed, index);
        if rng.random::<f64>() >= self.mix {
            return None;
        }
        Some(
            self.steps
                .iter()
                .map(|s| match s {
                    LifecycleStep::Hold(d) => PlannedStep::Hold(d.sample(&mut rng)),
                    LifecycleStep::Pause => PlannedStep::Pause,
                    LifecycleStep::Resume => PlannedStep::Resume,
                    LifecycleStep::Connect => PlannedStep::Connect,
                    LifecycleStep::Kill => PlannedStep::Kill,
                })
                .collect(),
        )
    }

    /// What is wrong with the steps, as `(field under workload.lifecycle, message)`.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if !(0.0..=1.0).contains(&self.mix) {
            out.push(("mix".into(), "must be between 0 and 1".into()));
        }
        if self.steps.is_empty() {
            out.push(("steps".into(), "must list at least one step".into()));
        }
        let mut paused = false;
        for (i, s) in self.steps.iter().enumerate() {
            let at = format!("steps[{i}]");
            match s {
                LifecycleStep::Hold(d) => {
                    if let Err(m) = d.check() {
                        out.push((format!("{at}.hold"), m));
                    }
                }
                LifecycleStep::Pause if paused => {
                    out.push((at, "the sandbox is already paused".into()))
                }
                LifecycleStep::Pause => paused = true,
                LifecycleStep::Resume | LifecycleStep::Connect if !paused => {
                    out.push((at, "needs a pause before it".into()))
                }
                LifecycleStep::Resume | LifecycleStep::Connect => paused = false,
                LifecycleStep::Kill if i + 1 != self.steps.len() => {
                    out.push((at, "kill may only be the last step".into()))
                }
                LifecycleStep::Kill => {}
            }
        }
        out
    }
}

/// A [`LifecycleStep`] with its hold drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlannedStep {
    /// Wait this long.
    Hold(Duration),
    /// Pause the sandbox.
    Pause,
    /// Resume it.
    Resume,
    /// Connect to it (resumes it when paused).
    Connect,
    /// Kill it.
    Kill,
}
