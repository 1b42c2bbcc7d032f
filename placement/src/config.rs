//! Placement parameters: E2B's Best-of-K defaults plus the harness's accounting choice.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::answer::FailureAnswers;
use super::mode::AccountingMode;

/// E2B's node sync period: the API refreshes each node from its orchestrator every
/// 20 s (`cacheSyncTime`, `packages/api/internal/orchestrator/cache.go`). The one copy
/// of this default: profiles, `stampede serve` and the simulator fall back to it.
pub const SYNC_INTERVAL: Duration = Duration::from_secs(20);

/// E2B's deadline of a whole create request, placement retries included: 70 s
/// (`requestTimeout`, `packages/api/main.go`). The one copy of this default.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(70);

/// When replica `replica` of `replicas` first syncs after the workload starts: its
/// `phase` (one `interval` by default) plus `replica / replicas` of an interval, wrapped
/// into `(0, interval]`. A real cluster's phase is arbitrary; the simulator and a real
/// run both place their first periodic sync with this rule.
pub fn first_periodic_sync(
    interval: Duration,
    phase: Duration,
    replica: usize,
    replicas: usize,
) -> Duration {
    let offset = interval.as_nanos() * replica as u128 / replicas.max(1) as u128;
    let first = phase.as_nanos().saturating_add(offset);
    let first = if first > interval.as_nanos() {
        first - interval.as_nanos()
    } else {
        first
    };
    Duration::from_nanos(u64::try_from(first).unwrap_or(u64::MAX))
}

/// Parameters of one placement instance (one API replica).
///
/// Defaults are E2B's (`DefaultBestOfKConfig`: `K=3`, `R=4`, `Alpha=0.5`; `maxRetries=3`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlacementConfig {
    /// Candidates sampled per decision ("power of K choices"). Default 3.
    pub k: usize,
    /// Cluster-wide over-commit ratio: a node's capacity is `r * cpu_count`. Default 4.0.
    pub r: f64,
    /// Weight of the node's CPU usage in the score. Default 0.5.
    pub alpha: f64,
    /// Non-ResourceExhausted create failures tolerated per request. Default 3.
    pub max_retries: u32,
    /// What this instance adds to a node's reported allocation. Default `optimistic`
    /// (E2B today).
    #[serde(alias = "accounting")]
    pub mode: AccountingMode,
    /// Skip a sampled node with more than this many of this instance's creates in flight
    /// (E2B's old `TooManyStarting` filter). Default none.
    pub max_starting_per_node: Option<u32>,
    /// `reconciled` only: drop an optimistic add after this many consecutive syncs whose id
    /// list does not contain it (the sandbox died before any sync saw it, e.g. a node
    /// restart). 0 keeps it forever. Default 2. Not an E2B setting.
    pub reconcile_unseen_syncs: u32,
    /// How a placement failure is answered over HTTP. Default `e2b`.
    pub failure_answers: FailureAnswers,
}

impl Default for PlacementConfig {
    fn default() -> Self {
        Self {
            k: 3,
            r: 4.0,
            alpha: 0.5,
            max_retries: 3,
            mode: AccountingMode::Optimistic,
            max_starting_per_node: None,
            reconcile_unseen_syncs: 2,
            failure_answers: FailureAnswers::default(),
        }
    }
}

/// A placement parameter outside its domain, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("placement.{field}: {message}")]
pub struct PlacementConfigError {
    /// The bad field (`k`, `r`, `alpha`).
    pub field: &'static str,
    /// What is wrong with it.
    pub message: &'static str,
}

impl PlacementConfig {
    /// Every semantic problem of the parameters (serde checked the types).
    pub fn validate(&self) -> Vec<PlacementConfigError> {
        let mut errs = Vec::new();
        if self.k == 0 {
            errs.push(PlacementConfigError {
                field: "k",
                message: "must be at least 1",
            });
        }
        if !(self.r > 0.0 && self.r.is_finite()) {
            errs.push(PlacementConfigError {
                field: "r",
                message: "must be a finite number > 0",
            });
        }
        if !(self.alpha >= 0.0 && self.alpha.is_finite()) {
            errs.push(PlacementConfigError {
                field: "alpha",
                message: "must be a finite number >= 0",
            });
        }
        errs
    }
}
