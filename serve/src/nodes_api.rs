//! The admin `/nodes` routes as E2B's `spec/openapi.yml` and `handlers/admin.go` serve
//! them: `X-Admin-Token` only, sorted by id, `clusterID` a UUID, and the status change
//! of `POST /nodes/{nodeID}`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;

use super::auth::AdminAuth;
use super::error::ApiError;
use super::params::{is_local_cluster, LOCAL_CLUSTER_ID};
use super::rest::{
    MachineInfoJson, NodeJson, NodeMetricsJson, NodeStatusChange, PlacementTelemetry,
};
use super::routes::{json_body, ApiResult};
use super::state::{lock, Shared};
use stampede_placement::AccountingMode;

/// Every node as E2B's `Node`, `allocatedCPU` being this instance's belief.
pub(crate) fn node_json(shared: &Shared) -> Vec<NodeJson> {
    let mut per_node: BTreeMap<&str, u64> = BTreeMap::new();
    let sandboxes = lock(&shared.sandboxes);
    for r in sandboxes.values() {
        *per_node.entry(r.node.as_str()).or_default() += 1;
    }
    // Each node's info before the core: a failed sync holds a node's info while it takes
    // the core (`sync.rs`), so holding the core while taking an info would deadlock.
    let mut infos: BTreeMap<&str, _> = shared
        .nodes
        .iter()
        .map(|(id, n)| (id.as_str(), lock(&n.info).clone()))
        .collect();
    let placer = lock(&shared.placer);
    let core = placer.core();
    let mode = core.config().mode;
    let mut out: Vec<NodeJson> = core
        .nodes()
        .map(|view| {
            let info = infos.remove(view.id()).unwrap_or_default();
            let m = view.metrics();
            let [family, model, model_name, arch] = info.machine;
            let changed_at = info.status_seen.map_or_else(SystemTime::now, |(_, at)| at);
            NodeJson {
                id: view.id().to_string(),
                service_instance_id: info.service_id,
                cluster_id: LOCAL_CLUSTER_ID.to_string(),
                status: view.status().as_str().to_string(),
                status_changed_at: humantime::format_rfc3339_nanos(changed_at).to_string(),
                sandbox_count: per_node.get(view.id()).copied().unwrap_or(0),
                metrics: NodeMetricsJson {
                    allocated_cpu: view.believed_allocated_vcpu(mode),
                    cpu_percent: m.cpu_percent,
                    cpu_count: m.cpu_count,
                    allocated_memory_bytes: m.memory_allocated_bytes,
                    memory_used_bytes: info.memory_used_bytes,
                    memory_total_bytes: m.memory_total_bytes,
                    disks: Vec::new(),
                    huge_pages_total: 0,
                    huge_pages_used: 0,
                    huge_pages_reserved: 0,
                    huge_page_size_bytes: 0,
                },
                create_successes: view.counters().create_successes,
                create_fails: view.counters().create_fails,
                sandbox_starting_count: view.in_flight() as u64,
                version: info.version,
                commit: info.commit,
                machine_info: MachineInfoJson {
                    cpu_family: family,
                    cpu_model: model,
                    cpu_model_name: model_name,
                    cpu_architecture: arch,
                },
                cached_builds: None,
                stampede: PlacementTelemetry {
                    accounting: mode.as_str().to_string(),
                    reported_allocated_cpu: view.accounting().reported_vcpu(),
                    believed_allocated_cpu: AccountingMode::ALL
                        .iter()
                        .map(|&m| (m.as_str().to_string(), view.believed_allocated_vcpu(m)))
                        .collect(),
                    create_refusals: view.counters().create_refusals,
                    orphans: info.orphans,
                    syncs: view.counters().syncs,
                    sync_failures: info.sync_failures,
                    channel: view.channel_state().as_str().to_string(),
                },
            }
        })
        .collect();
    // E2B's `orchestrator/admin.go` sorts by id.
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// `?clusterID=` of the `/nodes` routes.
#[derive(Debug, Deserialize)]
pub(crate) struct ClusterQuery {
    #[serde(rename = "clusterID")]
    cluster_id: Option<String>,
}

fn local(
    q: Result<Query<ClusterQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<bool> {
    let Query(q) = q.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.body_text()))?;
    is_local_cluster(q.cluster_id.as_deref()).map_err(|m| ApiError::new(StatusCode::BAD_REQUEST, m))
}

/// `GET /nodes`.
pub(crate) async fn nodes(
    State(shared): State<Arc<Shared>>,
    _auth: AdminAuth,
    query: Result<Query<ClusterQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<Vec<NodeJson>>> {
    if !local(query)? {
        return Ok(Json(Vec::new()));
    }
    Ok(Json(node_json(&shared)))
}

fn node_not_found(node_id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!("node \"{node_id}\" not found"),
    )
}

/// `GET /nodes/{nodeID}` (E2B `NodeDetail`).
pub(crate) async fn node_detail(
    State(shared): State<Arc<Shared>>,
    _auth: AdminAuth,
    Path(node_id): Path<String>,
    query: Result<Query<ClusterQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<NodeJson>> {
    if !local(query)? {
        return Err(node_not_found(&node_id));
    }
    node_json(&shared)
        .into_iter()
        .find(|n| n.id == node_id)
        .map(|mut n| {
            n.cached_builds = Some(Vec::new());
            Json(n)
        })
        .ok_or_else(|| node_not_found(&node_id))
}

/// `POST /nodes/{nodeID}`: the node reports `status` from the next sync on (E2B sends it
/// to the orchestrator, whose ServiceInfo then reports it). 204; 404 for an unknown node
/// or another cluster; 400 for `connecting`, which has no orchestrator counterpart.
pub(crate) async fn change_status(
    State(shared): State<Arc<Shared>>,
    _auth: AdminAuth,
    Path(node_id): Path<String>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    let change: NodeStatusChange = json_body(&body)?;
    let local = is_local_cluster(change.cluster_id.as_deref())
        .map_err(|m| ApiError::new(StatusCode::BAD_REQUEST, m))?;
    if !change.status.is_settable() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("status `{}` cannot be set on a node", change.status),
        ));
    }
    let node = shared
        .nodes
        .get(&node_id)
        .filter(|_| local)
        .ok_or_else(|| node_not_found(&node_id))?;
    lock(&node.info).status_override = Some(change.status);
    Ok(StatusCode::NO_CONTENT)
}
