//! The fault book: faults applied through the admin API, their effects and self-healing.
//!
//! A fault is a value `{kind, nodes, duration, params}`. The effect on a node is
//! recomputed from every fault in force on it whenever one is added or removed, so
//! overlapping faults compose and removing one never heals another.
//!
//! Hostile requests cannot grow the book or break it: durations are capped at
//! [`MAX_FAULT_DURATION`] (so every expiry is a time `GET /faults` can print), at most
//! [`MAX_ACTIVE_FAULTS`] are in force at once, and only the newest
//! [`MAX_HEALED_FAULTS_KEPT`] healed faults stay listed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::api::{FaultInfo, FaultKind, FaultRequest};
use crate::fleet::FleetShared;
use stampede_node_model::effect::FaultEffect;

/// Longest `duration` a fault may heal after, and longest `slow` latency: 30 days.
///
/// Longer ones are refused (HTTP 400). Without a ceiling, `now + duration` can overflow
/// the clock, and an expiry past the year 9999 cannot be written as RFC 3339, which
/// `GET /faults` does. A fault meant to last longer is given no duration and healed with
/// `DELETE /faults/{id}`.
pub const MAX_FAULT_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);

/// Faults in force at once, fleet-wide; more are refused until some heal.
pub const MAX_ACTIVE_FAULTS: usize = 1024;

/// Healed faults `GET /faults` keeps listing; the oldest are forgotten first.
pub const MAX_HEALED_FAULTS_KEPT: usize = 1024;

/// Period of the retries of a heal that failed (a killed node's address taken by
/// another process meanwhile). Retried until it succeeds or the fleet stops: a node
/// that cannot listen again stays reported `killed`, never healthy.
pub(crate) const HEAL_RETRY_EVERY: Duration = Duration::from_secs(1);

/// Why a fault could not be applied or removed.
#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    /// The request names a node the fleet does not have.
    #[error("unknown node {0:?}")]
    UnknownNode(String),
    /// Parameters missing or out of range for the kind.
    #[error("bad fault: {0}")]
    BadRequest(String),
    /// A duration past [`MAX_FAULT_DURATION`] (or one the clock cannot add).
    #[error(
        "`{field}` {} is too long: at most {} (heal longer faults with DELETE)",
        humantime::format_duration(*.value),
        humantime::format_duration(MAX_FAULT_DURATION)
    )]
    DurationTooLong {
        /// `duration` or `latency`.
        field: &'static str,
        /// What was asked.
        value: Duration,
    },
    /// [`MAX_ACTIVE_FAULTS`] are in force already.
    #[error("{0} faults are in force already: heal some first")]
    TooManyFaults(usize),
    /// No fault with this id is in force.
    #[error("no active fault with id {0}")]
    UnknownFault(u64),
    /// A healed `kill` could not re-bind the node's address.
    #[error("node {node}: cannot re-bind its address: {source}")]
    Rebind {
        /// Node id.
        node: String,
        /// Bind error.
        source: std::io::Error,
    },
}

impl FaultError {
    /// Whether the caller sent something wrong (HTTP 4xx) rather than the fleet failing.
    pub fn is_client_error(&self) -> bool {
        !matches!(self, FaultError::Rebind { .. })
    }
}

/// The faults in force and the most recently healed ones, by id.
#[derive(Debug, Default)]
pub struct FaultBook {
    next_id: u64,
    faults: BTreeMap<u64, FaultInfo>,
    /// Faults whose failed heal is being retried in the background.
    retrying: std::collections::BTreeSet<u64>,
}

impl FaultBook {
    /// Faults in force.
    pub fn active_count(&self) -> usize {
        self.faults.values().filter(|f| f.active).count()
    }

    /// Forgets the oldest healed faults beyond [`MAX_HEALED_FAULTS_KEPT`].
    fn prune(&mut self) {
        let healed: Vec<u64> = self
            .faults
            .values()
            .filter(|f| !f.active)
            .map(|f| f.id)
            .collect();
        let excess = healed.len().saturating_sub(MAX_HEALED_FAULTS_KEPT);
        for id in &healed[..excess] {
            self.faults.remove(id);
        }
    }

    /// Every fault, in id order.
    pub fn list(&self) -> Vec<FaultInfo> {
        self.faults.values().cloned().collect()
    }

    /// The effect of the faults in force on `node`; later faults win on conflicts.
    pub fn effect_on(&self, node: &str) -> FaultEffect {
        let mut e = FaultEffect::default();
        for f in self.faults.values().filter(|f| f.active) {
            if !f.nodes.iter().any(|n| n == node) {
                continue;
            }
            e.add(f.id, f.kind);
        }
        e
    }
}

fn check(req: &FaultRequest, fleet: &FleetShared) -> Result<(), FaultError> {
    if req.nodes.is_empty() {
        return Err(FaultError::BadRequest(
            "`nodes` must name at least one node".into(),
        ));
    }
    if let Some(n) = req.nodes.iter().find(|n| fleet.node(n).is_none()) {
        return Err(FaultError::UnknownNode(n.clone()));
    }
    let latency = match req.kind {
        FaultKind::Slow { latency } => Some(latency),
        _ => None,
    };
    for (field, d) in [("duration", req.duration), ("latency", latency)] {
        if let Some(value) = d.filter(|d| *d > MAX_FAULT_DURATION) {
            return Err(FaultError::DurationTooLong { field, value });
        }
    }
    Ok(())
}

/// Applies a fault; returns its id. A fault with a duration heals itself. A node named
/// twice is targeted once.
pub(crate) async fn add(
    fleet: &Arc<FleetShared>,
    mut req: FaultRequest,
) -> Result<u64, FaultError> {
    let mut seen = std::collections::BTreeSet::new();
    req.nodes.retain(|n| seen.insert(n.clone()));
    check(&req, fleet)?;
    let now = SystemTime::now();
    let instant = req.kind.is_instant();
    let expires_at = match req.duration.filter(|_| !instant) {
        Some(d) => Some(now.checked_add(d).ok_or(FaultError::DurationTooLong {
            field: "duration",
            value: d,
        })?),
        None => None,
    };
    let mut book = fleet.faults.lock().await;
    let active = book.active_count();
    if !instant && active >= MAX_ACTIVE_FAULTS {
        return Err(FaultError::TooManyFaults(active));
    }
    book.next_id += 1;
    let id = book.next_id;
    let info = FaultInfo {
        id,
        kind: req.kind,
        nodes: req.nodes.clone(),
        applied_at: now,
        expires_at,
        active: !instant,
        heal_error: None,
    };
    book.faults.insert(id, info);
    book.prune();
    if instant {
        for n in &req.nodes {
            if let Some(node) = fleet.node(n) {
                let t = node.clock.now();
                node.model().restart(t);
            }
        }
        tracing::info!(id, kind = req.kind.as_str(), nodes = ?req.nodes, "fault applied");
        return Ok(id);
    }
    refresh(fleet, &book, &req.nodes).await?;
    drop(book);
    tracing::info!(id, kind = req.kind.as_str(), nodes = ?req.nodes, duration = ?req.duration, "fault applied");
    if let Some(d) = req.duration {
        schedule_heal(fleet.clone(), id, d);
    }
    Ok(id)
}

/// Heals a fault in force. When a node cannot take its address back, the fault stays
/// in force (its nodes stay `killed`), says why in [`FaultInfo::heal_error`], and the
/// heal is retried every [`HEAL_RETRY_EVERY`] in the background.
pub(crate) async fn remove(fleet: &Arc<FleetShared>, id: u64) -> Result<(), FaultError> {
    match heal_once(fleet, id).await {
        Err(e @ FaultError::Rebind { .. }) => {
            retry_heal(fleet.clone(), id).await;
            Err(e)
        }
        other => other,
    }
}

/// One attempt to heal `id`; on failure the fault is in force again.
async fn heal_once(fleet: &Arc<FleetShared>, id: u64) -> Result<(), FaultError> {
    let mut book = fleet.faults.lock().await;
    let nodes = match book.faults.get_mut(&id) {
        Some(f) if f.active => {
            f.active = false;
            f.nodes.clone()
        }
        _ => return Err(FaultError::UnknownFault(id)),
    };
    if let Err(e) = refresh(fleet, &book, &nodes).await {
        if let Some(f) = book.faults.get_mut(&id) {
            f.active = true;
            f.heal_error = Some(e.to_string());
        }
        // Back to the fault's effect on every node, also those that did re-bind: a
        // fault is healed whole or not at all.
        if let Err(again) = refresh(fleet, &book, &nodes).await {
            tracing::warn!(id, error = %again, "restoring a fault after a failed heal");
        }
        tracing::warn!(id, error = %e, "fault heal failed: still in force, retried");
        return Err(e);
    }
    if let Some(f) = book.faults.get_mut(&id) {
        f.heal_error = None;
    }
    book.prune();
    tracing::info!(id, "fault healed");
    Ok(())
}

/// Retries healing `id` until it succeeds, the fault is removed otherwise, or the
/// fleet stops. One retry task per fault.
async fn retry_heal(fleet: Arc<FleetShared>, id: u64) {
    if !fleet.faults.lock().await.retrying.insert(id) {
        return;
    }
    let stop = fleet.shutdown.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(HEAL_RETRY_EVERY) => {}
            }
            match heal_once(&fleet, id).await {
                Err(FaultError::Rebind { .. }) => continue,
                Ok(()) => {
                    tracing::info!(id, "fault healed on retry");
                    break;
                }
                Err(_) => break,
            }
        }
        fleet.faults.lock().await.retrying.remove(&id);
    });
}

async fn refresh(
    fleet: &Arc<FleetShared>,
    book: &FaultBook,
    nodes: &[String],
) -> Result<(), FaultError> {
    // Concurrently: killing a thousand nodes must not take a thousand kill delays.
    let applies = nodes.iter().filter_map(|n| {
        let node = fleet.node(n)?;
        let effect = book.effect_on(n);
        Some(async move {
            node.apply(effect)
                .await
                .map_err(|source| FaultError::Rebind {
                    node: n.clone(),
                    source,
                })
        })
    });
    futures::future::join_all(applies)
        .await
        .into_iter()
        .collect::<Result<Vec<()>, _>>()
        .map(|_| ())
}

fn schedule_heal(fleet: Arc<FleetShared>, id: u64, after: Duration) {
    let stop = fleet.shutdown.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = stop.cancelled() => {}
            _ = tokio::time::sleep(after) => {
                match remove(&fleet, id).await {
                    Ok(()) | Err(FaultError::UnknownFault(_)) => {}
                    Err(e) => tracing::warn!(id, error = %e, "self-heal failed"),
                }
            }
        }
    });
}
