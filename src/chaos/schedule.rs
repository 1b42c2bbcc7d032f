//! Running a fault plan against the clock of the workload's start gate.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::client::{ChaosClient, FaultGuard};
use super::edge_calls::{CallProbe, EdgeCalls};
use super::plan::{FaultPlan, PlannedFault};

/// Heal attempts before a fault is reported as not healed.
const HEAL_ATTEMPTS: u32 = 3;

/// A fault as it was really applied; times are ms after the workload's start gate (the
/// ledger's `sent_ms` clock).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppliedFault {
    /// What was planned.
    pub planned: PlannedFault,
    /// The admin API's fault id (`"7"`, `"7+3"` over several fleets); empty when the
    /// apply failed.
    pub id: String,
    /// When the `POST` applying it was sent: the fault may be in force from then on.
    pub applied_at_ms: f64,
    /// When the `POST` applying it returned: it surely held from then on. None if it
    /// was never applied.
    #[serde(default)]
    pub in_force_at_ms: Option<f64>,
    /// When the `DELETE` healing it returned (= `applied_at_ms` for `restart`): it is
    /// surely over by then. None if it was never applied or could not be healed.
    pub healed_at_ms: Option<f64>,
    /// What went wrong applying or healing it, if anything.
    pub error: Option<String>,
    /// The services' create counters for the fault's nodes read once the fault was in
    /// force (the `POST` had returned); none without a probe or when the read failed.
    #[serde(default)]
    pub calls_in_force: Option<EdgeCalls>,
    /// The same read just before the heal was sent (the fault still held).
    #[serde(default)]
    pub calls_before_heal: Option<EdgeCalls>,
}

impl AppliedFault {
    /// Whether the fault was in force at some point.
    pub fn was_applied(&self) -> bool {
        !self.id.is_empty()
    }
}

/// Applies each fault of `plan` at `gate + at`, heals it after its `duration` (or when
/// `stop` fires, for open-ended faults and for all faults still in force), and returns
/// once every applied fault is healed, in plan order. Faults whose time had not come when
/// `stop` fired are not applied and not listed. Open-ended faults last until `stop`:
/// cancel it when the workload ends. If this future is dropped instead, the guards' drops
/// heal in the background. With a `probe`, the placement services' create counters are
/// read at each fault's edges ([`AppliedFault::calls_in_force`]).
pub async fn run_schedule(
    plan: &FaultPlan,
    client: &ChaosClient,
    probe: Option<&CallProbe>,
    gate: Instant,
    stop: CancellationToken,
) -> Vec<AppliedFault> {
    let runs = plan
        .faults
        .iter()
        .map(|f| run_one(f, client, probe, gate, &stop));
    futures::future::join_all(runs)
        .await
        .into_iter()
        .flatten()
        .collect()
}

fn ms_since(gate: Instant) -> f64 {
    gate.elapsed().as_secs_f64() * 1000.0
}

async fn run_one(
    f: &PlannedFault,
    client: &ChaosClient,
    probe: Option<&CallProbe>,
    gate: Instant,
    stop: &CancellationToken,
) -> Option<AppliedFault> {
    let due = tokio::time::Instant::from_std(gate + f.at);
    tokio::select! {
        biased;
        _ = stop.cancelled() => return None,
        _ = tokio::time::sleep_until(due) => {}
    }
    let mut out = AppliedFault {
        planned: f.clone(),
        id: String::new(),
        applied_at_ms: ms_since(gate),
        in_force_at_ms: None,
        healed_at_ms: None,
        error: None,
        calls_in_force: None,
        calls_before_heal: None,
    };
    let guard = match client.apply(f).await {
        Ok(g) => g,
        Err(e) => {
            tracing::warn!(step = f.step, kind = f.name(), error = %e, "fault not applied");
            out.error = Some(e.to_string());
            return Some(out);
        }
    };
    let in_force = tokio::time::Instant::now();
    out.in_force_at_ms = Some(ms_since(gate));
    out.id = guard.id();
    if let Some(p) = probe {
        out.calls_in_force = p.read(&f.nodes).await;
    }
    tracing::info!(step = f.step, id = %out.id, kind = f.name(), nodes = ?f.nodes, "chaos: fault applied");
    if f.kind.is_instant() {
        out.healed_at_ms = Some(out.applied_at_ms);
        return Some(out);
    }
    match f.duration {
        Some(d) => {
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = tokio::time::sleep_until(in_force + d) => {}
            }
        }
        None => stop.cancelled().await,
    }
    if let Some(p) = probe {
        out.calls_before_heal = p.read(&f.nodes).await;
    }
    match heal_with_retries(guard).await {
        Ok(()) => {
            out.healed_at_ms = Some(ms_since(gate));
            tracing::info!(id = %out.id, "chaos: fault healed");
        }
        Err(e) => {
            tracing::warn!(id = %out.id, error = %e, "chaos: fault could not be healed");
            out.error = Some(format!("heal failed: {e}"));
        }
    }
    Some(out)
}

async fn heal_with_retries(mut guard: FaultGuard) -> Result<(), super::ChaosError> {
    let mut attempt = 1;
    loop {
        match guard.try_heal().await {
            Ok(()) => return Ok(()),
            Err(e) if attempt >= HEAL_ATTEMPTS => return Err(e),
            Err(_) => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}
