//! The snapshot routes of E2B's `spec/openapi.yml`, answered as its handlers
//! (`handlers/snapshot_template_{create,list}.go`) and orchestrator
//! (`orchestrator/snapshot_template.go`) do:
//!
//! - `POST /sandboxes/{id}/snapshots` takes a snapshot template of a running sandbox:
//!   the sandbox is snapshotting for the while (a move, [`Move::Snapshot`]), its node
//!   checkpoints it (`Checkpoint`: it keeps running there and keeps its vCPU), and it is
//!   running again afterwards. 201 with `SnapshotInfo`. A checkpoint the node refuses
//!   while the sandbox stays healthy (FailedPrecondition, or ResourceExhausted: 503 "node
//!   is busy") leaves it running; any other failure kills it, as E2B's does.
//! - `GET /snapshots` lists the team's snapshot templates ([`crate::snapshots`]),
//!   filtered by source sandbox and by name, paged by `limit` and `nextToken`
//!   (`X-Next-Token`).
//!
//! A new sandbox is made from a snapshot with `POST /sandboxes` and its `snapshotID` as
//! the template, an ordinary create there as in E2B (no origin node is preferred), of
//! the snapshot's size unless the body gives one (E2B takes it from the build).
//! E2B's handler answers 400 for a malformed sandbox id, name or token on both routes,
//! which its spec does not list for `GET /snapshots`; stampede's document does.

use std::sync::Arc;
use std::time::SystemTime;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::Value;
use tonic::Code;

use super::auth::ApiKeyAuth;
use super::error::ApiError;
use super::kill::kill_after_snapshot;
use super::lifecycle_api::{changing_state, not_found, object_body};
use super::params::page_limit;
use super::routes::ApiResult;
use super::snapshots::{Cursor, ListFilter, SandboxSize, SnapshotInfo, SnapshotName, LIST_LIMIT};
use super::state::{lock, SandboxRecord, Shared};
use super::transition::{begin_from_running, Move, MoveGuard, Whereabouts};

/// The oldest envd a snapshot can be taken of: 0.5.0 (E2B's
/// `MinEnvdVersionForSnapshot`, `packages/shared/pkg/utils/version.go`).
pub(crate) const MIN_ENVD_FOR_SNAPSHOT: (u64, u64, u64) = (0, 5, 0);

/// The snapshot routes, merged into the service's router.
pub(crate) fn router() -> Router<Arc<Shared>> {
    Router::new()
        .route("/sandboxes/{sandbox_id}/snapshots", post(create))
        .route("/snapshots", get(list))
        .route("/templates/{template_id}", delete(delete_snapshot))
}

/// `DELETE /templates/{templateID}` (the SDKs' `delete_snapshot`): the snapshot template
/// named by id or alias is removed with its builds, 204; 404 when there is none (E2B's
/// message of `cache/templates/errors.go`).
async fn delete_snapshot(
    State(shared): State<Arc<Shared>>,
    _auth: ApiKeyAuth,
    Path(raw): Path<String>,
) -> ApiResult<StatusCode> {
    let name = SnapshotName::parse(&raw).map_err(bad_request)?;
    if lock(&shared.snapshots).delete(&name) {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("template '{}' not found", name.alias),
        ))
    }
}

fn bad_request(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, message)
}

/// E2B's `utils.ShortID`: `id` or `id-clientID`, the id of `[a-z0-9]`.
fn short_id(composite: &str) -> Option<&str> {
    let mut parts = composite.split('-');
    let id = parts.next()?;
    let valid = !id.is_empty()
        && id
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    (parts.nth(1).is_none() && valid).then_some(id)
}

/// E2B's `CheckEnvdVersionForSnapshot` on the envd version this service reports.
fn check_envd(version: &str) -> ApiResult<()> {
    let v = version.strip_prefix('v').unwrap_or(version);
    let parsed: Option<Vec<u64>> = v
        .split(['-', '+'])
        .next()
        .map(|core| core.split('.').map(|p| p.parse().ok()).collect())
        .unwrap_or_default();
    match parsed.as_deref() {
        Some(&[a, b, c]) if (a, b, c) >= MIN_ENVD_FOR_SNAPSHOT => Ok(()),
        Some(&[_, _, _]) => {
            let (a, b, c) = MIN_ENVD_FOR_SNAPSHOT;
            Err(bad_request(format!(
                "sandbox envd version must be at least {a}.{b}.{c} to create snapshots, \
                 current version: {version}"
            )))
        }
        _ => Err(bad_request(format!("invalid envd version \"{version}\""))),
    }
}

async fn create(
    State(shared): State<Arc<Shared>>,
    _auth: ApiKeyAuth,
    Path(raw_id): Path<String>,
    body: Bytes,
) -> ApiResult<Response> {
    let id = short_id(&raw_id)
        .ok_or_else(|| bad_request("Invalid sandbox ID"))?
        .to_string();
    let m = object_body(&body, true)?;
    let name = match m.get("name") {
        None => None,
        Some(Value::String(s)) => Some(SnapshotName::parse(s).map_err(bad_request)?),
        Some(_) => {
            return Err(bad_request(
                "Error when parsing request: name must be a string",
            ))
        }
    };
    // In its own task: a snapshot carries on when the client hangs up (E2B's cleanup
    // runs without the request's context).
    let task = tokio::spawn(snapshot_task(shared.clone(), id, name));
    let info = task.await.unwrap_or_else(|e| {
        Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("snapshot task failed: {e}"),
        ))
    })?;
    Ok((StatusCode::CREATED, Json(info)).into_response())
}

/// E2B's state name of a move, as its 409 says it.
fn state_name(what: Move) -> &'static str {
    match what {
        Move::Pause => "pausing",
        Move::Kill => "killing",
        Move::Snapshot => "snapshotting",
        Move::Resume => "resuming",
    }
}

async fn snapshot_task(
    shared: Arc<Shared>,
    id: String,
    name: Option<SnapshotName>,
) -> ApiResult<SnapshotInfo> {
    let (guard, record) = match begin_from_running(&shared, &id, Move::Snapshot) {
        Ok(begun) => begun,
        Err(Whereabouts::Paused | Whereabouts::Unknown) => return Err(not_found(&id)),
        Err(Whereabouts::Moving(m)) if m.what != Move::Resume => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!(
                    "Sandbox '{id}' cannot be snapshotted while in '{}' state",
                    state_name(m.what)
                ),
            ))
        }
        Err(Whereabouts::Moving(_) | Whereabouts::Running(_)) => return Err(changing_state(&id)),
    };
    if let Err(e) = check_envd(&shared.cfg.envd_version) {
        running_again(&shared, guard, &id, record, false);
        return Err(e);
    }
    let Some(node) = shared.nodes.get(&record.node) else {
        running_again(&shared, guard, &id, record, false);
        return Err(snapshot_failed());
    };
    let build_id = lock(&shared.snapshots).new_id();
    match node
        .client
        .checkpoint(&id, &build_id, shared.cfg.rpc_timeout)
        .await
    {
        Ok(()) => {
            let size = SandboxSize {
                vcpu: record.vcpu,
                ram_mb: record.ram_mb,
            };
            let info = lock(&shared.snapshots).record(&id, size, name.as_ref(), SystemTime::now());
            running_again(&shared, guard, &id, record, true);
            Ok(info)
        }
        // Refused before the sandbox was touched: it runs on, as it was.
        Err(s) if s.code() == Code::ResourceExhausted => {
            running_again(&shared, guard, &id, record, false);
            Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "Sandbox '{id}' cannot be snapshotted right now because its node is busy, \
                     please retry"
                ),
            ))
        }
        Err(s) if s.code() == Code::FailedPrecondition => {
            running_again(&shared, guard, &id, record, false);
            Err(snapshot_failed())
        }
        Err(s) => {
            tracing::debug!(sandbox = %id, error = %s, "checkpoint failed: killing the sandbox");
            if let Err(e) = kill_after_snapshot(&shared, guard, &id, &record).await {
                tracing::debug!(sandbox = %id, error = %e.message, "kill after a failed snapshot");
            }
            Err(snapshot_failed())
        }
    }
}

fn snapshot_failed() -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "Error creating snapshot template",
    )
}

/// The sandbox back in the running store before its move ends (never nowhere);
/// `done`: the snapshot was taken.
fn running_again(
    shared: &Shared,
    mut guard: MoveGuard,
    id: &str,
    record: SandboxRecord,
    done: bool,
) {
    lock(&shared.sandboxes).insert(id.to_string(), record);
    lock(&shared.removing).remove(id);
    if done {
        guard.succeeded();
    }
    drop(guard);
}

/// `GET /snapshots` query, typed as E2B's spec: `sandboxID`, `name`, `limit` (1..=100,
/// default 100), `nextToken`. Unknown parameters are ignored, as E2B does.
#[derive(Debug, Deserialize)]
struct ListQuery {
    #[serde(rename = "sandboxID")]
    sandbox_id: Option<String>,
    name: Option<String>,
    limit: Option<String>,
    #[serde(rename = "nextToken")]
    next_token: Option<String>,
}

async fn list(
    State(shared): State<Arc<Shared>>,
    _auth: ApiKeyAuth,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let Query(q) = query.map_err(|e| bad_request(e.body_text()))?;
    let limit = page_limit(q.limit.as_deref(), LIST_LIMIT).map_err(bad_request)?;
    // An empty token is the first page (E2B's `parseCursorToken`).
    let cursor = match q.next_token.as_deref() {
        None | Some("") => None,
        Some(t) => Some(Cursor::decode(t).ok_or_else(|| bad_request("Invalid next token"))?),
    };
    let sandbox_id = match q.sandbox_id.as_deref() {
        None => None,
        Some(s) => Some(
            short_id(s)
                .ok_or_else(|| bad_request("Invalid sandbox ID"))?
                .to_string(),
        ),
    };
    let name = q
        .name
        .as_deref()
        .map(SnapshotName::parse)
        .transpose()
        .map_err(bad_request)?;
    let filter = ListFilter { sandbox_id, name };
    let (page, next) =
        lock(&shared.snapshots).list(&filter, cursor.as_ref(), limit, SystemTime::now());
    let mut resp = Json(page).into_response();
    if let Some(Ok(v)) = next.map(|c| HeaderValue::from_str(&c.encode())) {
        resp.headers_mut().insert("x-next-token", v);
    }
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_ids_and_envd_versions_as_e2b_checks_them() {
        assert_eq!(short_id("iabc123"), Some("iabc123"));
        assert_eq!(short_id("iabc123-6532622b"), Some("iabc123"));
        for bad in ["", "a-b-c", "ABC", "i_x", "-x"] {
            assert_eq!(short_id(bad), None, "{bad:?}");
        }
        assert!(check_envd("0.6.13").is_ok());
        assert!(check_envd("v0.5.0").is_ok());
        assert_eq!(check_envd("0.4.9").map_err(|e| e.code), Err(400));
        assert_eq!(check_envd("latest").map_err(|e| e.code), Err(400));
    }
}
