//! The sandbox lifecycle routes beyond create, list, get and kill, as E2B's
//! `spec/openapi.yml` names them and its handlers answer
//! (`packages/api/internal/handlers/sandbox_{timeout,refresh,pause,resume,connect,fork,metrics}.go`,
//! `packages/api/internal/orchestrator/keep_alive.go`):
//!
//! - `POST /sandboxes/{id}/timeout` and `/refreshes` move a running sandbox's end time
//!   (a timeout may shorten it, a refresh only extends it, to at least 15 s), never past
//!   its maximum length; the node is told with `Update`.
//! - `POST /sandboxes/{id}/pause` snapshots a running sandbox on its node (`Pause`),
//!   which frees its vCPU there; the sandbox is `paused` from then on, its node its
//!   origin.
//! - `POST /sandboxes/{id}/resume` and `/connect` (on a paused sandbox) place it again
//!   from its snapshot: its origin node first, then Best-of-K
//!   ([`PreferredNode`](stampede_placement::PreferredNode)); `connect` on a running
//!   sandbox only extends its end time.
//! - `POST /sandboxes/{id}/fork` checkpoints a running sandbox (`Checkpoint`: it keeps
//!   running) and places `count` new sandboxes from that snapshot, its node first.
//! - `GET /sandboxes/{id}/metrics` and `GET /sandboxes/metrics` answer the usage model
//!   of [`usage`](crate::usage).
//!
//! A paused sandbox is not in the running store, so a timeout or a refresh of it is a
//! 404, as in E2B; a pause of it a 409; a fork of it a 409.
//!
//! Where a sandbox is comes from one look ([`transition::locate`](crate::transition::locate)),
//! and a pause or a resume begins in one step with taking it from its store, so a
//! sandbox in a move is answered 409 "changing state" (or waited for: a resume or a
//! connect waits out a pause, as E2B's `sandbox_resume.go` and `sandbox_connect.go`
//! do), never 404.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::body::Bytes;
use axum::extract::{Path, Query, RawQuery, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use tonic::Code;

use super::auth::ApiKeyAuth;
use super::error::ApiError;
use super::place::{place_from_snapshot, FromSnapshot, CLIENT_ID};
use super::rest::{NewSandbox, Sandbox};
use super::routes::ApiResult;
use super::state::{lock, SandboxRecord, Shared};
use super::transition::{self, begin_from_running, begin_resume, Move, MoveGuard, Whereabouts};
use super::usage::{self, SandboxMetric};
use super::NODE_HEADER;
use stampede_placement::{DeleteOutcome, PlacementKind};

/// A refresh never leaves less than this: 15 s, E2B's `SandboxTimeoutDefault`
/// (`packages/api/internal/sandbox/sandbox.go`), which a refresh without a duration uses.
pub(crate) const REFRESH_MINIMUM: Duration = Duration::from_secs(15);

/// Most forks one request may ask for: 100 (E2B's `maxForkCount`).
pub(crate) const MAX_FORK_COUNT: i64 = 100;

/// Most ids `GET /sandboxes/metrics` takes: 100 (the spec's `maxItems`).
pub(crate) const MAX_METRICS_IDS: usize = 100;

/// The lifecycle routes, merged into the service's router.
pub(crate) fn router() -> Router<Arc<Shared>> {
    Router::new()
        .route("/sandboxes/metrics", get(metrics_many))
        .route("/sandboxes/{sandbox_id}/metrics", get(metrics_one))
        .route("/sandboxes/{sandbox_id}/timeout", post(set_timeout))
        .route("/sandboxes/{sandbox_id}/refreshes", post(refresh))
        .route("/sandboxes/{sandbox_id}/pause", post(pause))
        .route("/sandboxes/{sandbox_id}/resume", post(resume))
        .route("/sandboxes/{sandbox_id}/connect", post(connect))
        .route("/v2/sandboxes/{sandbox_id}/connect", post(connect_v2))
        .route("/sandboxes/{sandbox_id}/fork", post(fork))
}

/// E2B's answer for an id it does not know (`utils.SandboxNotFoundMsg`).
pub(crate) fn not_found(id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!("sandbox \"{id}\" doesn't exist or you don't have access to it"),
    )
}

fn bad_request(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, message)
}

fn conflict(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, message)
}

/// E2B's answer for a sandbox in a move (`utils.SandboxChangingStateMsg`'s meaning).
pub(crate) fn changing_state(id: &str) -> ApiError {
    conflict(format!(
        "Sandbox '{id}' is changing state, please retry once it settles"
    ))
}

/// A JSON object body; `required`: an absent (empty) body is a 400, else `{}`.
pub(crate) fn object_body(body: &[u8], required: bool) -> ApiResult<Map<String, Value>> {
    if body.iter().all(u8::is_ascii_whitespace) {
        if required {
            return Err(bad_request(
                "Error when parsing request: request body is required",
            ));
        }
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(bad_request(
            "Error when parsing request: the body must be a JSON object",
        )),
        Err(e) => Err(bad_request(format!("Error when parsing request: {e}"))),
    }
}

/// An integer property within `[min, max]` (absent = `None`; `null` or another type is
/// a 400, as E2B's request validator answers).
fn int_field(m: &Map<String, Value>, name: &str, min: i64, max: i64) -> ApiResult<Option<i64>> {
    match m.get(name) {
        None => Ok(None),
        Some(v) => match v.as_i64() {
            Some(i) if (min..=max).contains(&i) => Ok(Some(i)),
            _ => Err(bad_request(format!(
                "Error when parsing request: {name} must be an integer in {min}..={max}"
            ))),
        },
    }
}

/// A boolean property (absent = `None`).
fn bool_field(m: &Map<String, Value>, name: &str) -> ApiResult<Option<bool>> {
    match m.get(name) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(bad_request(format!(
            "Error when parsing request: {name} must be a boolean"
        ))),
    }
}

const INT32_MAX: i64 = i32::MAX as i64;

/// E2B's `validateAndParseTimeout` (`handlers/timeout_helper.go`): absent = 15 s; 0 or
/// less, or more than the maximum length, is a 400.
fn resume_timeout(shared: &Shared, raw: Option<i64>) -> ApiResult<Duration> {
    let Some(t) = raw else {
        return Ok(crate::config::DEFAULT_SANDBOX_TIMEOUT);
    };
    if t <= 0 {
        return Err(bad_request("Timeout must be greater than 0"));
    }
    let max_hours = shared.cfg.max_length_hours;
    if t as u64 > u64::from(max_hours) * 3600 {
        return Err(bad_request(format!(
            "Timeout cannot be greater than {max_hours} hours"
        )));
    }
    Ok(Duration::from_secs(t as u64))
}

fn max_length(shared: &Shared) -> Duration {
    Duration::from_secs(u64::from(shared.cfg.max_length_hours) * 3600)
}

/// E2B's `KeepAliveFor`: the end time of a running sandbox set to now + `duration`,
/// capped by its maximum length; `allow_shorter` false leaves a later end time alone.
async fn keep_alive(
    shared: &Shared,
    id: &str,
    duration: Duration,
    allow_shorter: bool,
) -> ApiResult<SandboxRecord> {
    let now = SystemTime::now();
    let (record, changed) = {
        let mut running = lock(&shared.sandboxes);
        let Some(r) = running.get_mut(id) else {
            drop(running);
            return Err(match transition::locate(shared, id) {
                Whereabouts::Moving(_) | Whereabouts::Running(_) => changing_state(id),
                Whereabouts::Paused | Whereabouts::Unknown => not_found(id),
            });
        };
        let lived = now.duration_since(r.started_at).unwrap_or_default();
        let max = max_length(shared);
        if lived > max {
            return Err(bad_request("Max instance length exceeded"));
        }
        let end = now + duration.min(max - lived);
        if !allow_shorter && end < r.end_at {
            (r.clone(), false)
        } else {
            r.end_at = end;
            (r.clone(), true)
        }
    };
    if !changed {
        return Ok(record);
    }
    let Some(node) = shared.nodes.get(&record.node) else {
        return Err(not_found(id));
    };
    match node
        .client
        .update_end(id, record.end_at, shared.cfg.rpc_timeout)
        .await
    {
        Ok(()) => Ok(record),
        Err(s) if s.code() == Code::NotFound => Err(not_found(id)),
        Err(s) => {
            tracing::debug!(sandbox = id, error = %s, "update failed");
            Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Error when setting sandbox timeout",
            ))
        }
    }
}

fn api_sandbox(shared: &Shared, id: &str, r: &SandboxRecord) -> Sandbox {
    Sandbox {
        template_id: r.template_id.clone(),
        sandbox_id: id.to_string(),
        alias: None,
        client_id: CLIENT_ID.to_string(),
        envd_version: shared.cfg.envd_version.clone(),
        domain: None,
    }
}

async fn set_timeout(
    State(shared): State<Arc<Shared>>,
    _auth: ApiKeyAuth,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    let m = object_body(&body, true)?;
    let t = required_timeout(&m)?;
    keep_alive(&shared, &id, Duration::from_secs(t as u64), true).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn refresh(
    State(shared): State<Arc<Shared>>,
    _auth: ApiKeyAuth,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    let m = object_body(&body, false)?;
    let d = int_field(&m, "duration", 0, 3600)?;
    let duration = d.map_or(REFRESH_MINIMUM, |s| {
        Duration::from_secs(s as u64).max(REFRESH_MINIMUM)
    });
    keep_alive(&shared, &id, duration, false).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn pause(
    State(shared): State<Arc<Shared>>,
    _auth: ApiKeyAuth,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    let m = object_body(&body, false)?;
    bool_field(&m, "memory")?;
    // In its own task: a pause carries on when the client hangs up.
    let task = tokio::spawn(pause_task(shared.clone(), id));
    let result = task.await.unwrap_or_else(|e| {
        Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("pause task failed: {e}"),
        ))
    });
    result.map(|()| StatusCode::NO_CONTENT)
}

async fn pause_task(shared: Arc<Shared>, id: String) -> ApiResult<()> {
    match begin_from_running(&shared, &id, Move::Pause) {
        Ok((guard, record)) => pause_on_node(&shared, guard, id, record).await,
        Err(Whereabouts::Paused) => Err(conflict(format!(
            "Error pausing sandbox - sandbox '{id}' is already paused"
        ))),
        Err(Whereabouts::Moving(_) | Whereabouts::Running(_)) => Err(changing_state(&id)),
        Err(Whereabouts::Unknown) => Err(not_found(&id)),
    }
}

/// The `Pause` RPC; the node lets the sandbox go whatever the answer (E2B removes it
/// from the store either way), so its vCPU is released as for a kill.
async fn pause_on_node(
    shared: &Shared,
    mut guard: MoveGuard,
    id: String,
    record: SandboxRecord,
) -> ApiResult<()> {
    let outcome = match shared.nodes.get(&record.node) {
        None => Err(None),
        Some(node) => node
            .client
            .pause(&id, &record.template_id, shared.cfg.rpc_timeout)
            .await
            .map_err(Some),
    };
    let delete = match &outcome {
        Ok(()) => DeleteOutcome::Deleted,
        Err(Some(s)) if s.code() == Code::NotFound => DeleteOutcome::NotOnNode,
        Err(_) => DeleteOutcome::Failed,
    };
    shared.handle(stampede_placement::Input::DeleteEnded {
        node: record.node.as_str().into(),
        sandbox_id: id.as_str().into(),
        vcpu: record.vcpu,
        released: delete.releases_vcpu(),
    });
    if outcome.is_ok() {
        // Into the paused store before the move ends: never nowhere.
        lock(&shared.paused).insert(id.clone(), record);
        guard.succeeded();
    }
    lock(&shared.removing).remove(&id);
    drop(guard);
    match outcome {
        Ok(()) => Ok(()),
        Err(Some(s)) if s.code() == Code::NotFound => Err(not_found(&id)),
        Err(e) => {
            tracing::debug!(sandbox = %id, error = ?e, "pause failed");
            Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Error pausing sandbox",
            ))
        }
    }
}

/// Resume the paused sandbox `id` for `timeout`: out of the paused set while it is
/// placed, back in it (its origin perhaps remapped) if the placement fails.
async fn resume_paused(shared: &Arc<Shared>, id: &str, timeout: Duration) -> ApiResult<Sandbox> {
    let (mut guard, record) = match begin_resume(shared, id) {
        Ok(begun) => begun,
        Err(Whereabouts::Running(_)) => {
            return Err(conflict(format!("Sandbox {id} is already running")))
        }
        Err(Whereabouts::Unknown) => return Err(not_found(id)),
        Err(Whereabouts::Moving(_) | Whereabouts::Paused) => return Err(changing_state(id)),
    };
    let (body, from) = from_snapshot_of(&record, timeout, PlacementKind::Resume);
    let gone = CancellationToken::new();
    let _hung_up = gone.clone().drop_guard();
    let task = {
        let shared = shared.clone();
        let id = id.to_string();
        tokio::spawn(async move {
            let r = place_from_snapshot(&shared, &id, body, from, &gone).await;
            if r.is_ok() {
                guard.succeeded();
            }
            if let Err((_, warmed)) = &r {
                let mut back = record;
                if shared.cfg.resume_origin_remap {
                    if let Some(w) = warmed {
                        back.node.clone_from(w);
                    }
                }
                lock(&shared.paused).insert(id.clone(), back);
            }
            lock(&shared.placing).remove(&id);
            drop(guard);
            r.map_err(|(e, _)| e)
        })
    };
    task.await.unwrap_or_else(|e| {
        Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("resume task failed: {e}"),
        ))
    })
}

/// Where `id` is, a pause in flight waited out first, as E2B's resume and connect do
/// (`handlers/sandbox_resume.go`, `handlers/sandbox_connect.go`: `WaitForStateChange`);
/// a pause that failed is a 500, as there.
async fn after_pause(shared: &Shared, id: &str) -> ApiResult<Whereabouts> {
    match transition::locate(shared, id) {
        Whereabouts::Moving(m) if m.what == Move::Pause => {
            if !m.settled().await {
                return Err(ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Error waiting for sandbox to pause",
                ));
            }
            Ok(transition::locate(shared, id))
        }
        w => Ok(w),
    }
}

/// A 201 for a created or resumed sandbox, naming the node it landed on in
/// `X-Stampede-Node` (not E2B's: a harness's ledger counts placements per node by kind).
pub(super) fn created(shared: &Shared, sandbox: Sandbox) -> Response {
    let node = lock(&shared.sandboxes)
        .get(&sandbox.sandbox_id)
        .and_then(|r| HeaderValue::from_str(&r.node).ok());
    let mut resp = (StatusCode::CREATED, Json(sandbox)).into_response();
    if let Some(v) = node {
        resp.headers_mut().insert(NODE_HEADER, v);
    }
    resp
}

async fn resume(
    State(shared): State<Arc<Shared>>,
    _auth: ApiKeyAuth,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Response> {
    let m = object_body(&body, false)?;
    let timeout = resume_timeout(&shared, int_field(&m, "timeout", 0, INT32_MAX)?)?;
    bool_field(&m, "autoPause")?;
    bool_field(&m, "memory")?;
    match after_pause(&shared, &id).await? {
        Whereabouts::Running(_) => Err(conflict(format!("Sandbox {id} is already running"))),
        Whereabouts::Moving(_) => Err(changing_state(&id)),
        Whereabouts::Unknown => Err(not_found(&id)),
        Whereabouts::Paused => Ok(created(
            &shared,
            resume_paused(&shared, &id, timeout).await?,
        )),
    }
}

/// `timeout` of a `POST /v2/sandboxes/{id}/connect` without one: 300 s (the current
/// SDKs' bundled schema, `ConnectSandboxV2`).
pub(crate) const CONNECT_V2_DEFAULT_TIMEOUT: i64 = 300;

async fn connect(
    State(shared): State<Arc<Shared>>,
    _auth: ApiKeyAuth,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Response> {
    let m = object_body(&body, true)?;
    let t = required_timeout(&m)?;
    connect_for(&shared, &id, &m, t).await
}

/// The connect the current official SDKs call (`ConnectSandboxV2`: `timeout` optional,
/// default [`CONNECT_V2_DEFAULT_TIMEOUT`]); otherwise as `POST /sandboxes/{id}/connect`.
async fn connect_v2(
    State(shared): State<Arc<Shared>>,
    _auth: ApiKeyAuth,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Response> {
    let m = object_body(&body, false)?;
    let t = int_field(&m, "timeout", 0, INT32_MAX)?.unwrap_or(CONNECT_V2_DEFAULT_TIMEOUT);
    connect_for(&shared, &id, &m, t).await
}

async fn connect_for(
    shared: &Arc<Shared>,
    id: &str,
    m: &Map<String, Value>,
    t: i64,
) -> ApiResult<Response> {
    let (shared, id) = (shared.clone(), id.to_string());
    bool_field(m, "memory")?;
    let max_hours = shared.cfg.max_length_hours;
    if t as u64 > u64::from(max_hours) * 3600 {
        return Err(bad_request(format!(
            "Timeout cannot be greater than {max_hours} hours"
        )));
    }
    let timeout = Duration::from_secs(t as u64);
    // A sandbox paused between the look and the keep-alive is resumed on the next try,
    // as E2B's connect retries (`maxConnectRetries`), never answered 404.
    for _ in 0..CONNECT_TRIES {
        match after_pause(&shared, &id).await? {
            Whereabouts::Running(_) => match keep_alive(&shared, &id, timeout, false).await {
                Ok(r) => {
                    return Ok((StatusCode::OK, Json(api_sandbox(&shared, &id, &r))).into_response())
                }
                Err(e) if e.code == StatusCode::NOT_FOUND.as_u16() && moved_on(&shared, &id) => {
                    continue
                }
                Err(e) => return Err(e),
            },
            Whereabouts::Moving(_) => return Err(changing_state(&id)),
            Whereabouts::Unknown => return Err(not_found(&id)),
            // `timeout: 0` resumes with a zero lifetime, as E2B's connect does (it sets
            // no lower bound): the sandbox is due at once and the evictor ends it.
            Whereabouts::Paused => {
                return Ok(created(
                    &shared,
                    resume_paused(&shared, &id, timeout).await?,
                ))
            }
        }
    }
    Err(changing_state(&id))
}

/// Whether `id` left the running store for a pause or a snapshot since it was seen
/// running.
fn moved_on(shared: &Shared, id: &str) -> bool {
    matches!(
        transition::locate(shared, id),
        Whereabouts::Paused | Whereabouts::Moving(_)
    )
}

/// Looks a connect takes before it answers 409: 3, E2B's `maxConnectRetries`
/// (`handlers/sandbox_connect.go`).
const CONNECT_TRIES: usize = 3;

/// One entry of a fork's answer (E2B `SandboxForkResult`): exactly one of the two.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ForkResult {
    /// The fork, when it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Sandbox>,
    /// Why it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ForkError>,
}

/// E2B's `Error` in a fork result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ForkError {
    /// HTTP status the fork would have had alone.
    pub code: u16,
    /// Why.
    pub message: String,
}

async fn fork(
    State(shared): State<Arc<Shared>>,
    _auth: ApiKeyAuth,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Response> {
    let m = object_body(&body, false)?;
    let timeout = resume_timeout(&shared, int_field(&m, "timeout", 0, INT32_MAX)?)?;
    let count = int_field(&m, "count", i64::MIN, i64::MAX)?.unwrap_or(1);
    if count < 1 {
        return Err(bad_request("Count must be at least 1"));
    }
    if count > MAX_FORK_COUNT {
        return Err(bad_request(format!(
            "Count cannot be greater than {MAX_FORK_COUNT}"
        )));
    }
    let record = match transition::locate(&shared, &id) {
        Whereabouts::Running(r) => *r,
        Whereabouts::Paused => {
            return Err(conflict(format!(
                "Sandbox '{id}' is paused and cannot be forked; resume it first"
            )))
        }
        Whereabouts::Moving(_) => return Err(changing_state(&id)),
        Whereabouts::Unknown => return Err(not_found(&id)),
    };
    let task = tokio::spawn(fork_all(
        shared.clone(),
        id,
        record,
        timeout,
        count as usize,
    ));
    let results = task.await.unwrap_or_else(|e| {
        Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("fork task failed: {e}"),
        ))
    })?;
    Ok((StatusCode::CREATED, Json(results)).into_response())
}

async fn fork_all(
    shared: Arc<Shared>,
    id: String,
    record: SandboxRecord,
    timeout: Duration,
    count: usize,
) -> ApiResult<Vec<ForkResult>> {
    let Some(node) = shared.nodes.get(&record.node) else {
        return Err(not_found(&id));
    };
    match node
        .client
        .checkpoint(&id, &record.template_id, shared.cfg.rpc_timeout)
        .await
    {
        Ok(()) => {}
        Err(s) if s.code() == Code::NotFound => return Err(not_found(&id)),
        Err(s) if s.code() == Code::ResourceExhausted => {
            let busy = format!(
                "Sandbox '{id}' cannot be forked right now because its node is busy, please retry"
            );
            return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, busy));
        }
        Err(s) => {
            tracing::debug!(sandbox = %id, error = %s, "checkpoint failed");
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Error forking sandbox",
            ));
        }
    }
    let forks = (0..count).map(|_| {
        let shared = shared.clone();
        let (body, from) = from_snapshot_of(&record, timeout, PlacementKind::Fork);
        tokio::spawn(async move {
            let new_id = shared.new_sandbox_id();
            let gone = CancellationToken::new();
            let r = place_from_snapshot(&shared, &new_id, body, from, &gone).await;
            lock(&shared.placing).remove(&new_id);
            match r {
                Ok(s) => ForkResult {
                    sandbox: Some(s),
                    error: None,
                },
                Err((e, _)) => ForkResult {
                    sandbox: None,
                    error: Some(ForkError {
                        code: e.code,
                        message: e.message,
                    }),
                },
            }
        })
    });
    let handles: Vec<_> = forks.collect();
    let mut results = Vec::with_capacity(handles.len());
    for h in handles {
        results.push(h.await.unwrap_or_else(|e| ForkResult {
            sandbox: None,
            error: Some(ForkError {
                code: 500,
                message: format!("fork task failed: {e}"),
            }),
        }));
    }
    Ok(results)
}

/// `GET /sandboxes/{id}/metrics` query: Unix seconds, `int64`, at least 0.
#[derive(Debug, Deserialize)]
struct Interval {
    start: Option<String>,
    end: Option<String>,
}

fn unix_param(name: &str, v: Option<&str>) -> ApiResult<Option<u64>> {
    v.map(|s| {
        s.parse::<i64>()
            .ok()
            .and_then(|i| u64::try_from(i).ok())
            .ok_or_else(|| bad_request(format!("{name} must be an integer >= 0")))
    })
    .transpose()
}

async fn metrics_one(
    State(shared): State<Arc<Shared>>,
    _auth: ApiKeyAuth,
    Path(id): Path<String>,
    query: Result<Query<Interval>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<Vec<SandboxMetric>>> {
    let Query(q) = query.map_err(|e| bad_request(e.body_text()))?;
    let from = unix_param("start", q.start.as_deref())?;
    let to = unix_param("end", q.end.as_deref())?;
    match transition::locate(&shared, &id) {
        Whereabouts::Running(r) => Ok(Json(usage::samples(
            shared.cfg.seed,
            &id,
            &r,
            SystemTime::now(),
            from,
            to,
        ))),
        Whereabouts::Paused | Whereabouts::Moving(_) => Ok(Json(Vec::new())),
        Whereabouts::Unknown => Err(not_found(&id)),
    }
}

/// The values of the `form`, `explode: false` array parameter `name` of a raw query
/// string: split on the literal commas, then each item percent-decoded (`+` a space), so
/// an escaped comma stays inside its item. `None` when the parameter is absent; the
/// last occurrence wins.
fn query_list(raw: Option<&str>, name: &str) -> Option<Vec<String>> {
    let raw = raw?;
    raw.split('&')
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k) == name).then_some(v)
        })
        .next_back()
        .map(|v| v.split(',').map(percent_decode).collect())
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = s
            .get(i + 1..i + 3)
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// E2B `SandboxesWithMetrics`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SandboxesWithMetrics {
    /// The latest sample of each running sandbox asked for, by id.
    pub sandboxes: BTreeMap<String, SandboxMetric>,
}

async fn metrics_many(
    State(shared): State<Arc<Shared>>,
    _auth: ApiKeyAuth,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<SandboxesWithMetrics>> {
    let Some(list) = query_list(raw.as_deref(), "sandbox_ids") else {
        return Err(bad_request("sandbox_ids is required"));
    };
    let ids: Vec<&str> = list.iter().map(String::as_str).collect();
    if ids.len() > MAX_METRICS_IDS {
        return Err(bad_request(format!(
            "sandbox_ids takes at most {MAX_METRICS_IDS} ids"
        )));
    }
    let mut seen = std::collections::BTreeSet::new();
    if !ids.iter().all(|i| seen.insert(*i)) {
        return Err(bad_request("sandbox_ids must be unique"));
    }
    let now = SystemTime::now();
    let running = lock(&shared.sandboxes);
    let sandboxes = ids
        .into_iter()
        .filter_map(|i| {
            let r = running.get(i)?;
            usage::latest(shared.cfg.seed, i, r, now).map(|m| (i.to_string(), m))
        })
        .collect();
    Ok(Json(SandboxesWithMetrics { sandboxes }))
}

/// The create a resume or a fork of `record` sends: its template, size and metadata,
/// `timeout` long, its node as the origin to try first; `kind` says which.
fn from_snapshot_of(
    record: &SandboxRecord,
    timeout: Duration,
    kind: PlacementKind,
) -> (NewSandbox, FromSnapshot) {
    let body = NewSandbox {
        template_id: record.template_id.clone(),
        timeout: Some(u32::try_from(timeout.as_secs()).unwrap_or(u32::MAX)),
        metadata: Some(record.metadata.clone()),
        cpu_count: Some(record.vcpu),
        memory_mb: Some(record.ram_mb),
        ..NewSandbox::default()
    };
    let from = FromSnapshot {
        origin: Some(record.node.clone()),
        kind,
    };
    (body, from)
}

/// A body's required `timeout` (seconds, 0 to int32 max), as E2B's handlers read it.
fn required_timeout(m: &Map<String, Value>) -> ApiResult<i64> {
    int_field(m, "timeout", 0, INT32_MAX)?
        .ok_or_else(|| bad_request("Error when parsing request: timeout is required"))
}
