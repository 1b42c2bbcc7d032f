//! The chaos part of a run: apply the profile's fault schedule from the gate on, heal
//! everything when the workload ends, then judge the run (fault windows, set audit).

use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::drive::Target;
use super::{AbortState, StageError};
use crate::aggregate::RunAggregate;
use crate::audit::{audit, collect_inventory, read_evicted, Inventory, InventoryError};
use crate::chaos::{
    fault_windows_of, run_schedule, AppliedFault, CallProbe, ChaosClient, FaultPlan,
};
use crate::collect::SampleHistory;
use crate::error_chain::chain_text;
use crate::profile::Profile;
use crate::report::SetAudit;
use crate::workload::WorkloadOutput;

/// A fault schedule running alongside the workload.
pub(crate) struct ChaosRun {
    task: Option<tokio::task::JoinHandle<Vec<AppliedFault>>>,
    stop: CancellationToken,
    /// Told which fleets hold this run's faults, while they may be in force.
    abort: Option<AbortState>,
    /// Planned `(from, until)` of every fault after the gate (`until` none: to the end).
    windows: Vec<(Duration, Option<Duration>)>,
}

impl ChaosRun {
    /// When each planned fault holds, after the gate (for the live progress line).
    pub(crate) fn windows(&self) -> Vec<(Duration, Option<Duration>)> {
        self.windows.clone()
    }

    /// Stops the schedule, heals every fault still in force and returns what was applied.
    pub(crate) async fn finish(mut self) -> Vec<AppliedFault> {
        self.stop.cancel();
        let applied = match self.task.take() {
            Some(t) => t.await.unwrap_or_default(),
            None => Vec::new(),
        };
        let all_healed = applied
            .iter()
            .all(|a| !a.was_applied() || a.healed_at_ms.is_some());
        if let (Some(abort), true) = (&self.abort, all_healed) {
            abort.unwatch_faults();
        }
        applied
    }
}

/// Resolves the profile's `chaos:` against the nodes and starts applying it once the
/// workload's gate opens. Nothing runs when the profile has no schedule. `watch`: the
/// fleets outlive this process, so an abort must name the faults it leaves on them.
pub(crate) async fn spawn(
    profile: &Profile,
    target: &Target,
    gate: oneshot::Receiver<Instant>,
    watch: Option<&AbortState>,
) -> Result<ChaosRun, StageError> {
    let (admin, node_ids) = (&target.chaos_admin, &target.node_ids);
    let stop = CancellationToken::new();
    if profile.chaos.is_empty() {
        return Ok(ChaosRun {
            task: None,
            stop,
            abort: None,
            windows: Vec::new(),
        });
    }
    let plan = FaultPlan::resolve(&profile.chaos, node_ids, profile.seed)
        .map_err(|e| StageError::Chaos(e.to_string()))?;
    // Drains and commands need no fleet: a drill against a real cluster has none.
    let needs_fleet = plan
        .faults
        .iter()
        .any(|f| !f.through_api && f.command.is_none());
    if admin.is_empty() && needs_fleet {
        return Err(StageError::Chaos(
            "the profile has mock-node faults but no mock-node admin API to apply them through"
                .into(),
        ));
    }
    let windows = plan
        .faults
        .iter()
        .map(|f| {
            // A restart is an instant: never in force.
            let lasts = if f.kind.is_instant() {
                Some(Duration::ZERO)
            } else {
                f.duration
            };
            (f.at, lasts.map(|d| f.at.saturating_add(d)))
        })
        .collect();
    let token = target
        .truth
        .mock_admin()
        .and_then(|(_, t)| t)
        .map(|t| t.expose().to_string());
    let client = if admin.is_empty() {
        ChaosClient::without_fleet()
    } else if admin.len() == 1 {
        ChaosClient::new(&admin[0], token)
    } else {
        ChaosClient::discover(admin, token)
            .await
            .map_err(|e| StageError::Chaos(e.to_string()))?
    };
    // `drain` steps go through the placement APIs, as an operator drains a node.
    let client = client.with_api(target.believers.clone(), target.admin_token.clone());
    if let Some(abort) = watch {
        abort.watch_faults(&client).await;
    }
    // The services whose counters bracket each fault window (see `CallProbe`).
    let probe = CallProbe::new(target.believers.clone(), target.admin_token.clone());
    let until = stop.clone();
    let task = tokio::spawn(async move {
        match gate.await {
            Ok(at) => run_schedule(&plan, &client, Some(&probe), at, until).await,
            Err(_) => Vec::new(), // the workload never opened its gate
        }
    });
    Ok(ChaosRun {
        task: Some(task),
        stop,
        abort: watch.cloned(),
        windows,
    })
}

/// Reads the nodes' inventory before the gate, so that sandboxes already there are not
/// taken for this run's orphans.
pub(crate) async fn inventory_before(target: &Target) -> Option<Inventory> {
    collect_inventory(&crate::http_client::client(), &target.truth, None)
        .await
        .ok()
}

/// Feeds fault windows and set audit findings into `agg`. `history` is timed from the
/// workload's gate, like the ledger.
pub(crate) async fn judge(
    agg: &mut RunAggregate,
    applied: &[AppliedFault],
    workload: &WorkloadOutput,
    history: SampleHistory,
    target: &Target,
    before: Option<&Inventory>,
) -> Result<(), StageError> {
    agg.faults(fault_windows_of(
        applied,
        &workload.ledger,
        history.windows(),
    ));
    let mut inv = match collect_inventory(&crate::http_client::client(), &target.truth, None).await
    {
        Ok(inv) => inv,
        // A drill whose truth is the API's `GET /nodes` keeps its fault windows; a
        // `lost` or `duplicated` check then fails for want of a set audit.
        Err(e @ InventoryError::NoIds) => {
            eprintln!("set audit: not run: {e}");
            return Ok(());
        }
        Err(e) => return Err(StageError::Collect(chain_text(&e))),
    };
    inv.note_history(history);
    inv.note_restarts(applied);
    // Only the ids the service's evictor did delete are forgiven; a sandbox merely past
    // its timeout that is on no node is lost (nodes never drop one by themselves).
    // Only stampede's service lists its evictions, and only it names the node in a 201:
    // an external API whose answers named none is not asked.
    let names_nodes = workload.ledger.names_nodes();
    let evicted = if target.staging.is_some() && !names_nodes {
        eprintln!(
            "set audit: {} (the API's answers name no node: not stampede's service)",
            SetAudit::EVICTIONS_UNKNOWN
        );
        None
    } else {
        let client = crate::http_client::client();
        match read_evicted(&client, &target.believers, target.admin_token.as_ref()).await {
            Ok(Some(ids)) => Some(ids),
            Ok(None) => {
                eprintln!(
                    "set audit: {} (GET /admin/evicted: 404)",
                    SetAudit::EVICTIONS_UNKNOWN
                );
                None
            }
            Err(e) => {
                eprintln!(
                    "set audit: {} ({})",
                    SetAudit::EVICTIONS_UNKNOWN,
                    crate::redact::redact_userinfo(&chain_text(&e))
                );
                None
            }
        }
    };
    let known = evicted.is_some();
    inv.note_evicted(evicted.into_iter().flatten());
    if let Some(b) = before {
        inv.note_preexisting(b);
    }
    let mut findings = audit(&workload.ledger, &inv);
    findings.evictions_unknown = !known;
    agg.set_audit(findings);
    Ok(())
}
