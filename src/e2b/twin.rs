//! The twin beside a real run: `stampede sim` of the same profile, on the fleet the
//! profile's fleet seed builds (the one mock-node served), in the accounting mode the
//! build behaves as, with its sync landing at the phase the real run met.

use std::time::Duration;

use serde::Serialize;

use crate::placement::AccountingMode;
use crate::profile::{OneOrMany, PlacementSection, Profile};
use crate::report::SkewStats;
use crate::sim::SimError;

/// One simulated run.
#[derive(Debug, Clone, Serialize)]
pub struct TwinRun {
    /// Sync phase simulated, seconds.
    pub phase_s: f64,
    /// Placements per node, in node order.
    pub placed: Vec<u64>,
    /// Their CV.
    pub cv: f64,
    /// Node refusals (ResourceExhausted) over the run.
    pub refusals: u64,
    /// Latency p50, ms (virtual).
    pub p50_ms: f64,
    /// Latency p99, ms (virtual).
    pub p99_ms: f64,
}

/// Why the twin cannot run.
#[derive(Debug, thiserror::Error)]
pub enum TwinError {
    /// The profile has no embedded placement to simulate.
    #[error("the profile's placement is external: the twin simulates embedded profiles only")]
    External,
    /// The simulation failed.
    #[error(transparent)]
    Sim(#[from] SimError),
}

/// Simulates `profile` in `mode` with its first sync `phase` after the workload's start
/// and the API's sync `cycle` (E2B's: 20 s).
pub fn twin(
    profile: &Profile,
    mode: AccountingMode,
    phase: Duration,
    cycle: Duration,
) -> Result<TwinRun, TwinError> {
    let mut p = profile.clone();
    let PlacementSection::Embedded(e) = &mut p.placement else {
        return Err(TwinError::External);
    };
    e.accounting = OneOrMany::One(mode);
    e.sync_interval = cycle;
    e.sync_phase = Some(phase.clamp(Duration::from_millis(1), cycle));
    let r = crate::sim::simulate(&p, mode)?;
    let placed: Vec<u64> = match r.timeline.last() {
        Some(t) if !t.placed.is_empty() => t.placed.clone(),
        _ => r.nodes.iter().map(|n| n.sandboxes).collect(),
    };
    Ok(TwinRun {
        phase_s: phase.as_secs_f64(),
        cv: SkewStats::from_counts(&placed).cv,
        placed,
        refusals: r.refusals,
        p50_ms: r.latency.p50_ms,
        p99_ms: r.latency.p99_ms,
    })
}

/// `profile` with each decision's choice counting on its node at its read: the twin of
/// a build that takes the in-progress mark under the lock of the score read.
pub fn without_commit_lag(profile: &Profile) -> Profile {
    let mut p = profile.clone();
    if let PlacementSection::Embedded(e) = &mut p.placement {
        e.api_stage.commit_lag = stampede_node_model::config::LatencyDist::Constant {
            value: Duration::ZERO,
        };
    }
    p
}

/// The twin at `n` phases spread evenly over the cycle (`(i + 0.5) * cycle / n`).
pub fn over_phases(
    profile: &Profile,
    mode: AccountingMode,
    n: usize,
    cycle: Duration,
) -> Result<Vec<TwinRun>, TwinError> {
    (0..n)
        .map(|i| twin(profile, mode, spread_phase(i, n, cycle), cycle))
        .collect()
}

/// The `i`-th of `n` phases spread evenly over `cycle`.
pub fn spread_phase(i: usize, n: usize, cycle: Duration) -> Duration {
    cycle.mul_f64((i as f64 + 0.5) / n.max(1) as f64)
}
