//! The REST surface (E2B-compatible): handlers, authentication, JSON errors.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;

use super::error::ApiError;
use super::limits::{check_metadata, check_size, LargestNode};
use super::place::{create_sandbox, delete_sandbox};
use super::rest::{
    ListedSandbox, MachineInfoJson, NewSandbox, NodeJson, NodeMetricsJson, PlacementTelemetry,
};
use super::state::{lock, SandboxRecord, Shared};
use crate::placement::AccountingMode;

/// The router of one instance.
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/sandboxes", get(list_v1).post(create))
        .route("/v2/sandboxes", get(list_v2).post(create))
        .route("/sandboxes/{sandbox_id}", get(get_sandbox).delete(delete))
        .route("/nodes", get(nodes))
        .route("/nodes/{node_id}", get(node_detail))
        .fallback(not_found)
        .with_state(shared)
}

type ApiResult<T> = Result<T, ApiError>;

fn require_key(shared: &Shared, headers: &HeaderMap) -> ApiResult<()> {
    match headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
        Some(k) if k == shared.cfg.api_key => Ok(()),
        Some(_) => Err(ApiError::new(StatusCode::UNAUTHORIZED, "Invalid API key")),
        None => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "Missing API key: send it in the X-API-Key header",
        )),
    }
}

/// `/nodes` is an admin route in E2B (`X-Admin-Token`); the API key is accepted too.
fn require_admin(shared: &Shared, headers: &HeaderMap) -> ApiResult<()> {
    let token = headers.get("x-admin-token").and_then(|v| v.to_str().ok());
    match (&shared.cfg.admin_token, token) {
        (Some(expected), Some(t)) if t == expected => Ok(()),
        _ => require_key(shared, headers),
    }
}

async fn health() -> StatusCode {
    StatusCode::NO_CONTENT
}

async fn metrics(State(shared): State<Arc<Shared>>) -> Response {
    let body = shared.telemetry.render(shared.cfg.placement.mode.as_str());
    ([("content-type", "text/plain; version=0.0.4")], body).into_response()
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such route")
}

async fn create(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    require_key(&shared, &headers)?;
    let req: NewSandbox = serde_json::from_slice(&body)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("invalid body: {e}")))?;
    if req.template_id.trim().is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "templateID must not be empty",
        ));
    }
    // A size no node can ever hold would otherwise be retried against refusing nodes
    // until the request deadline.
    let largest = LargestNode::of(&lock(&shared.core));
    check_size(
        req.cpu_count.unwrap_or(shared.cfg.default_vcpu),
        req.memory_mb.unwrap_or(shared.cfg.default_memory_mb),
        largest,
    )?;
    if let Some(m) = &req.metadata {
        check_metadata(m)?;
    }
    // Spawned: a client that hangs up must not abandon a create mid-flight.
    let task = tokio::spawn(create_sandbox(shared, req));
    match task.await {
        Ok(Ok(sandbox)) => Ok((StatusCode::CREATED, Json(sandbox)).into_response()),
        Ok(Err(e)) => Err(e),
        Err(e) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("create task failed: {e}"),
        )),
    }
}

async fn delete(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(sandbox_id): Path<String>,
) -> ApiResult<StatusCode> {
    require_key(&shared, &headers)?;
    let task = tokio::spawn(delete_sandbox(shared, sandbox_id));
    match task.await {
        Ok(Ok(())) => Ok(StatusCode::NO_CONTENT),
        Ok(Err(e)) => Err(e),
        Err(e) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("delete task failed: {e}"),
        )),
    }
}

fn listed(shared: &Shared, id: &str, r: &SandboxRecord) -> ListedSandbox {
    ListedSandbox {
        template_id: r.template_id.clone(),
        alias: None,
        sandbox_id: id.to_string(),
        client_id: super::place::CLIENT_ID.to_string(),
        started_at: humantime::format_rfc3339_millis(r.started_at).to_string(),
        end_at: humantime::format_rfc3339_millis(r.end_at).to_string(),
        cpu_count: r.vcpu,
        memory_mb: r.ram_mb,
        disk_size_mb: 0,
        metadata: r.metadata.clone(),
        state: "running".to_string(),
        envd_version: shared.cfg.envd_version.clone(),
        node_id: Some(r.node.clone()),
    }
}

async fn list_v1(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
) -> ApiResult<Json<Vec<ListedSandbox>>> {
    require_key(&shared, &headers)?;
    let all = lock(&shared.sandboxes);
    Ok(Json(
        all.iter().map(|(id, r)| listed(&shared, id, r)).collect(),
    ))
}

/// `GET /v2/sandboxes` query: `state` (comma-separated; only `running` matches),
/// `limit` (1..=100, default 100), `nextToken` (the last id of the previous page; the
/// next one is in the `x-next-token` header). `metadata` filtering is not supported.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListQuery {
    state: Option<String>,
    limit: Option<usize>,
    next_token: Option<String>,
}

async fn list_v2(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    require_key(&shared, &headers)?;
    let Query(q) = query.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.body_text()))?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=100).contains(&limit) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "limit must be in 1..=100",
        ));
    }
    let wants_running = q
        .state
        .as_deref()
        .is_none_or(|s| s.split(',').any(|x| x.trim() == "running"));
    let all = lock(&shared.sandboxes);
    let after = q.next_token.unwrap_or_default();
    let page: Vec<ListedSandbox> = if wants_running {
        all.range::<String, _>((
            std::ops::Bound::Excluded(&after),
            std::ops::Bound::Unbounded,
        ))
        .take(limit)
        .map(|(id, r)| listed(&shared, id, r))
        .collect()
    } else {
        Vec::new()
    };
    let more = page.len() == limit
        && page.last().is_some_and(|l| {
            all.range::<String, _>((
                std::ops::Bound::Excluded(&l.sandbox_id),
                std::ops::Bound::Unbounded,
            ))
            .next()
            .is_some()
        });
    let mut resp = Json(page.clone()).into_response();
    if more {
        if let Some(Ok(v)) = page.last().map(|l| l.sandbox_id.parse()) {
            resp.headers_mut().insert("x-next-token", v);
        }
    }
    Ok(resp)
}

async fn get_sandbox(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(sandbox_id): Path<String>,
) -> ApiResult<Json<ListedSandbox>> {
    require_key(&shared, &headers)?;
    let all = lock(&shared.sandboxes);
    all.get(&sandbox_id)
        .map(|r| Json(listed(&shared, &sandbox_id, r)))
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                format!("sandbox \"{sandbox_id}\" doesn't exist or you don't have access to it"),
            )
        })
}

/// Every node as E2B's `Node`, `allocatedCPU` being this instance's belief.
pub fn node_json(shared: &Shared) -> Vec<NodeJson> {
    let mut per_node: BTreeMap<&str, u64> = BTreeMap::new();
    let sandboxes = lock(&shared.sandboxes);
    for r in sandboxes.values() {
        *per_node.entry(r.node.as_str()).or_default() += 1;
    }
    let core = lock(&shared.core);
    let mode = core.config().mode;
    core.nodes()
        .map(|view| {
            let info = shared
                .nodes
                .get(view.id())
                .map(|n| lock(&n.info).clone())
                .unwrap_or_default();
            let m = view.metrics();
            let [family, model, model_name, arch] = info.machine;
            NodeJson {
                id: view.id().to_string(),
                service_instance_id: info.service_id,
                cluster_id: String::new(),
                status: view.status().as_str().to_string(),
                sandbox_count: per_node.get(view.id()).copied().unwrap_or(0),
                metrics: NodeMetricsJson {
                    allocated_cpu: view.believed_allocated_vcpu(mode),
                    cpu_percent: m.cpu_percent,
                    cpu_count: m.cpu_count,
                    allocated_memory_bytes: m.memory_allocated_bytes,
                    memory_used_bytes: info.memory_used_bytes,
                    memory_total_bytes: m.memory_total_bytes,
                    disks: Vec::new(),
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
                },
            }
        })
        .collect()
}

async fn nodes(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
) -> ApiResult<Json<Vec<NodeJson>>> {
    require_admin(&shared, &headers)?;
    Ok(Json(node_json(&shared)))
}

async fn node_detail(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Path(node_id): Path<String>,
) -> ApiResult<Json<NodeJson>> {
    require_admin(&shared, &headers)?;
    node_json(&shared)
        .into_iter()
        .find(|n| n.id == node_id)
        .map(|mut n| {
            n.cached_builds = Some(Vec::new());
            Json(n)
        })
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                format!("node \"{node_id}\" not found"),
            )
        })
}
