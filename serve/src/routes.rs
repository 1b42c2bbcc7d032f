//! The REST surface (E2B-compatible): handlers, authentication, JSON errors.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;

use super::auth::{AdminAuth, ApiKeyAuth};
use super::error::ApiError;
use super::lifecycle_api;
use super::limits::{validate_metadata, validate_size, LargestNode};
use super::nodes_api::{change_status, node_detail, nodes};
use super::params::{
    metadata_matches, page_limit, parse_date_time, parse_metadata_filter, unix_nanos,
    validate_template_id,
};
use super::place::{create_sandbox, CLIENT_ID};
use super::rest::{EvictedIds, ListedSandbox, NewSandbox};
use super::state::{lock, SandboxRecord, Shared};
use super::transition::{locate, Move, Whereabouts};

/// The router of one instance.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/admin/counters", get(counters))
        .route("/admin/evicted", get(evicted))
        .route("/sandboxes", get(list_v1).post(create))
        .route("/v2/sandboxes", get(list_v2).post(create))
        .route("/sandboxes/{sandbox_id}", get(get_sandbox).delete(delete))
        .route("/nodes", get(nodes))
        .route("/nodes/{node_id}", get(node_detail).post(change_status))
        .merge(super::lifecycle_api::router())
        .merge(super::snapshot_api::router())
        // E2B's `/templates/tags` (not implemented), which `/templates/{templateID}`
        // would otherwise take: a DELETE of it is no snapshot delete.
        .route("/templates/tags", axum::routing::any(not_found))
        .fallback(not_found)
        // A served path's other methods: 501 for E2B's (e.g. `GET /templates/{id}`,
        // where serve has only the DELETE), else 405 (not axum's bare 405).
        .method_not_allowed_fallback(not_found)
        .with_state(shared)
}

/// A handler's answer.
pub(crate) type ApiResult<T> = Result<T, ApiError>;

/// A JSON request body of type `T` (400 naming what is wrong otherwise).
pub(crate) fn json_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> ApiResult<T> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("Error when parsing request: {e}"),
        )
    })
}

fn bad_request(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, message)
}

async fn health() -> StatusCode {
    StatusCode::NO_CONTENT
}

async fn metrics(State(shared): State<Arc<Shared>>) -> Response {
    let body = shared.telemetry.render(shared.cfg.placement.mode.as_str());
    ([("content-type", "text/plain; version=0.0.4")], body).into_response()
}

/// `GET /admin/counters`: the counters a harness reads, as typed JSON
/// ([`ServiceCounters`](crate::counters::ServiceCounters)); `/metrics` is for Prometheus.
async fn counters(
    State(shared): State<Arc<Shared>>,
    _auth: AdminAuth,
) -> ApiResult<Json<crate::counters::ServiceCounters>> {
    Ok(Json(shared.telemetry.counters()))
}

/// `GET /admin/evicted`: the ids the evictor killed (not E2B's: E2B's API does not
/// expose them), so that a harness's set audit forgives exactly those.
async fn evicted(
    State(shared): State<Arc<Shared>>,
    _auth: AdminAuth,
) -> ApiResult<Json<EvictedIds>> {
    let sandbox_ids = lock(&shared.evicted).clone();
    Ok(Json(EvictedIds { sandbox_ids }))
}

async fn not_found(
    method: axum::http::Method,
    uri: axum::http::Uri,
) -> super::unsupported::Unrouted {
    super::unsupported::unrouted(&method, uri.path())
}

async fn create(
    State(shared): State<Arc<Shared>>,
    _auth: ApiKeyAuth,
    body: Bytes,
) -> ApiResult<Response> {
    let mut req: NewSandbox = json_body(&body)?;
    validate_template_id(&req.template_id).map_err(bad_request)?;
    if !template_known(&shared, &req.template_id) {
        // E2B's `handlers/sandbox_create.go` (its test `template 'desktop' not found`).
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("template '{}' not found", req.template_id),
        ));
    }
    // A snapshot's sandboxes are of its size, as E2B's builds carry it.
    if let Some(size) = lock(&shared.snapshots).size_of(&req.template_id) {
        req.cpu_count = req.cpu_count.or(Some(size.vcpu));
        req.memory_mb = req.memory_mb.or(Some(size.ram_mb));
    }
    // E2B's `handlers/timeout_helper.go` (validateAndParseTimeout).
    if let Some(t) = req.timeout {
        if t == 0 {
            return Err(bad_request("Timeout must be greater than 0"));
        }
        let max_hours = shared.cfg.max_length_hours;
        if u64::from(t) > u64::from(max_hours) * 3600 {
            return Err(bad_request(format!(
                "Timeout cannot be greater than {max_hours} hours"
            )));
        }
    }
    // A size no node can ever hold would otherwise be retried against refusing nodes
    // until the request deadline.
    let largest = LargestNode::of(lock(&shared.placer).core());
    validate_size(
        req.cpu_count.unwrap_or(shared.cfg.default_vcpu),
        req.memory_mb.unwrap_or(shared.cfg.default_memory_mb),
        largest,
    )?;
    if let Some(m) = &req.metadata {
        validate_metadata(m)?;
    }
    // Not E2B's: the 201 names the node in `X-Stampede-Node`, so that a real run has
    // placements per node (and their CV) as the simulator has.
    // In its own task: a create carries on when the client hangs up, so a sandbox the
    // node runs is always recorded (dropping the request's future would drop the RPC).
    let task = {
        let shared = shared.clone();
        tokio::spawn(async move { create_sandbox(&shared, req).await })
    };
    let sandbox = task.await.unwrap_or_else(|e| {
        Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("create task failed: {e}"),
        ))
    })?;
    Ok(super::lifecycle_api::created(&shared, sandbox))
}

/// Whether a create may name `template`: `base`, a configured template or a snapshot
/// (each with or without a `:tag`).
fn template_known(shared: &Shared, template: &str) -> bool {
    let name = template.split_once(':').map_or(template, |(n, _)| n);
    name == crate::config::BASE_TEMPLATE
        || shared
            .cfg
            .templates
            .iter()
            .any(|t| t == template || t == name)
        || lock(&shared.snapshots).knows(template)
}

async fn delete(
    State(shared): State<Arc<Shared>>,
    _auth: ApiKeyAuth,
    Path(sandbox_id): Path<String>,
) -> ApiResult<StatusCode> {
    // In its own task: a kill carries on when the client hangs up.
    let task = tokio::spawn(super::kill::kill(shared, sandbox_id));
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
    listed_as(shared, id, r, "running")
}

fn listed_as(shared: &Shared, id: &str, r: &SandboxRecord, state: &str) -> ListedSandbox {
    ListedSandbox {
        template_id: r.template_id.clone(),
        alias: None,
        sandbox_id: id.to_string(),
        client_id: CLIENT_ID.to_string(),
        started_at: humantime::format_rfc3339_millis(r.started_at).to_string(),
        end_at: humantime::format_rfc3339_millis(r.end_at).to_string(),
        cpu_count: r.vcpu,
        memory_mb: r.ram_mb,
        disk_size_mb: 0,
        metadata: r.metadata.clone(),
        state: state.to_string(),
        envd_version: shared.cfg.envd_version.clone(),
        node_id: Some(r.node.clone()),
    }
}

/// `?metadata=` of `GET /sandboxes`.
#[derive(Debug, Deserialize)]
struct MetadataQuery {
    metadata: Option<String>,
}

fn metadata_filter(q: Option<&str>) -> ApiResult<BTreeMap<String, String>> {
    q.map_or_else(|| Ok(BTreeMap::new()), parse_metadata_filter)
        .map_err(bad_request)
}

async fn list_v1(
    State(shared): State<Arc<Shared>>,
    _auth: ApiKeyAuth,
    query: Result<Query<MetadataQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<Vec<ListedSandbox>>> {
    let Query(q) = query.map_err(|e| bad_request(e.body_text()))?;
    let filter = metadata_filter(q.metadata.as_deref())?;
    let all = lock(&shared.sandboxes);
    Ok(Json(
        all.iter()
            .filter(|(_, r)| metadata_matches(&r.metadata, &filter))
            .map(|(id, r)| listed(&shared, id, r))
            .collect(),
    ))
}

/// `GET /v2/sandboxes` query, typed as E2B's spec: `metadata` (filter), `state`
/// (comma-separated `running` / `paused`), `order` (`asc` /
/// `desc`), `startedAfter` (date-time), `template`, `limit` (1..=100, default 100) and
/// `nextToken`. Pages go by sandbox id in `order` (E2B: by start time); the token is
/// the last id of the previous page, so any string is a position. Unknown parameters
/// are ignored, as E2B does.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListQuery {
    metadata: Option<String>,
    state: Option<String>,
    order: Option<String>,
    started_after: Option<String>,
    template: Option<String>,
    limit: Option<String>,
    next_token: Option<String>,
}

async fn list_v2(
    State(shared): State<Arc<Shared>>,
    _auth: ApiKeyAuth,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let Query(q) = query.map_err(|e| bad_request(e.body_text()))?;
    let limit = page_limit(q.limit.as_deref(), 100).map_err(bad_request)?;
    let (mut wants_running, mut wants_paused) = (true, true);
    if let Some(states) = q.state.as_deref() {
        (wants_running, wants_paused) = (false, false);
        for s in states.split(',') {
            match s {
                "running" => wants_running = true,
                "paused" => wants_paused = true,
                other => return Err(bad_request(format!("unknown state `{other}`"))),
            }
        }
    }
    let descending = match q.order.as_deref() {
        None | Some("desc") => true,
        Some("asc") => false,
        Some(other) => return Err(bad_request(format!("unknown order `{other}`"))),
    };
    let started_after = match q.started_after.as_deref() {
        None => None,
        Some(t) => Some(
            parse_date_time(t)
                .ok_or_else(|| bad_request(format!("startedAfter `{t}` is not a date-time")))?,
        ),
    };
    let filter = metadata_filter(q.metadata.as_deref())?;
    let all = lock(&shared.sandboxes).clone();
    let paused = lock(&shared.paused).clone();
    let keep = |r: &SandboxRecord| {
        metadata_matches(&r.metadata, &filter)
            && started_after.is_none_or(|t| unix_nanos(r.started_at) >= t)
            && q.template.as_deref().is_none_or(|t| r.template_id == t)
    };
    let total = all.values().filter(|r| keep(r)).count();
    // Both sets by id, each id in one of them only.
    let mut chosen: BTreeMap<&String, (&SandboxRecord, &str)> = BTreeMap::new();
    if wants_running {
        chosen.extend(
            all.iter()
                .filter(|(_, r)| keep(r))
                .map(|(i, r)| (i, (r, "running"))),
        );
    }
    if wants_paused {
        chosen.extend(
            paused
                .iter()
                .filter(|(_, r)| keep(r))
                .map(|(i, r)| (i, (r, "paused"))),
        );
    }
    let matching: Vec<(&String, (&SandboxRecord, &str))> = chosen.into_iter().collect();
    let after = |id: &String| match q.next_token.as_deref() {
        None => true,
        Some(t) if descending => id.as_str() < t,
        Some(t) => id.as_str() > t,
    };
    let ordered: Box<dyn Iterator<Item = &(&String, (&SandboxRecord, &str))>> = if descending {
        Box::new(matching.iter().rev())
    } else {
        Box::new(matching.iter())
    };
    let mut rest = ordered.filter(|(id, _)| after(id));
    let page: Vec<ListedSandbox> = rest
        .by_ref()
        .take(limit)
        .map(|(id, (r, state))| listed_as(&shared, id, r, state))
        .collect();
    let more = rest.next().is_some();
    let last = page.last().map(|l| l.sandbox_id.clone());
    let mut resp = Json(page).into_response();
    if wants_running {
        resp.headers_mut()
            .insert("x-total-running", axum::http::HeaderValue::from(total));
    }
    if more {
        if let Some(Ok(v)) = last.map(|l| l.parse()) {
            resp.headers_mut().insert("x-next-token", v);
        }
    }
    Ok(resp)
}

async fn get_sandbox(
    State(shared): State<Arc<Shared>>,
    _auth: ApiKeyAuth,
    Path(sandbox_id): Path<String>,
) -> ApiResult<Json<ListedSandbox>> {
    // E2B's `handlers/sandbox_get.go`: a sandbox being paused reads as paused, one
    // being killed as gone, one being snapshotted as running; one being resumed is
    // still its snapshot there.
    match locate(&shared, &sandbox_id) {
        Whereabouts::Running(r) => Ok(Json(listed(&shared, &sandbox_id, &r))),
        Whereabouts::Moving(m) if m.what == Move::Snapshot => {
            Ok(Json(listed(&shared, &sandbox_id, &m.record)))
        }
        Whereabouts::Moving(m) if m.what != Move::Kill => {
            Ok(Json(listed_as(&shared, &sandbox_id, &m.record, "paused")))
        }
        Whereabouts::Paused => match lock(&shared.paused).get(&sandbox_id) {
            Some(r) => Ok(Json(listed_as(&shared, &sandbox_id, r, "paused"))),
            None => Err(lifecycle_api::not_found(&sandbox_id)),
        },
        Whereabouts::Moving(_) | Whereabouts::Unknown => Err(lifecycle_api::not_found(&sandbox_id)),
    }
}
