//! The fault book: faults applied through the admin API, their effects and self-healing.
//!
//! A fault is a value `{kind, nodes, duration, params}`. The effect on a node is
//! recomputed from every fault in force on it whenever one is added or removed, so
//! overlapping faults compose and removing one never heals another.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::api::{FaultInfo, FaultKind, FaultRequest};
use crate::fleet::FleetShared;
use crate::node::FaultEffect;

/// Why a fault could not be applied or removed.
#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    /// The request names a node the fleet does not have.
    #[error("unknown node {0:?}")]
    UnknownNode(String),
    /// Parameters missing or out of range for the kind.
    #[error("bad fault: {0}")]
    BadRequest(String),
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

/// Every fault applied so far, by id.
#[derive(Debug, Default)]
pub struct FaultBook {
    next_id: u64,
    faults: BTreeMap<u64, FaultInfo>,
}

impl FaultBook {
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
            e.add(f.id, f.kind, &f.params);
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
    let p = &req.params;
    match req.kind {
        FaultKind::Slow if p.latency.is_none() => Err(FaultError::BadRequest(
            "`slow` needs `latency`, e.g. \"200ms\"".into(),
        )),
        FaultKind::Errors if !p.probability.is_some_and(|x| (0.0..=1.0).contains(&x)) => Err(
            FaultError::BadRequest("`errors` needs `probability` in [0, 1]".into()),
        ),
        FaultKind::Status if p.status.is_none() => Err(FaultError::BadRequest(
            "`status` needs `status`: draining | unhealthy | standby | healthy".into(),
        )),
        _ => Ok(()),
    }
}

/// Applies a fault; returns its id. A fault with a duration heals itself.
pub async fn add(fleet: &Arc<FleetShared>, req: FaultRequest) -> Result<u64, FaultError> {
    check(&req, fleet)?;
    let mut book = fleet.faults.lock().await;
    book.next_id += 1;
    let id = book.next_id;
    let now = SystemTime::now();
    let instant = req.kind == FaultKind::Restart;
    let info = FaultInfo {
        id,
        kind: req.kind,
        nodes: req.nodes.clone(),
        params: req.params.clone(),
        applied_at: now,
        expires_at: req.duration.filter(|_| !instant).map(|d| now + d),
        active: !instant,
    };
    book.faults.insert(id, info);
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

/// Heals a fault in force.
pub async fn remove(fleet: &Arc<FleetShared>, id: u64) -> Result<(), FaultError> {
    let mut book = fleet.faults.lock().await;
    let nodes = match book.faults.get_mut(&id) {
        Some(f) if f.active => {
            f.active = false;
            f.nodes.clone()
        }
        _ => return Err(FaultError::UnknownFault(id)),
    };
    refresh(fleet, &book, &nodes).await?;
    tracing::info!(id, "fault healed");
    Ok(())
}

/// Heals every fault in force (used at shutdown and by the harness between drills).
pub async fn clear(fleet: &Arc<FleetShared>) -> Result<(), FaultError> {
    let ids: Vec<u64> = {
        let book = fleet.faults.lock().await;
        book.faults
            .values()
            .filter(|f| f.active)
            .map(|f| f.id)
            .collect()
    };
    for id in ids {
        match remove(fleet, id).await {
            Ok(()) | Err(FaultError::UnknownFault(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
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
