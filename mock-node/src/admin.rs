//! The admin HTTP endpoint: ground truth, Prometheus metrics and the fault verbs.
//!
//! Routes: `GET /health`, `GET /nodes`, `GET /metrics`, `POST /faults`, `GET /faults`,
//! `DELETE /faults/{id}`. With a token, every route requires `Authorization: Bearer`.
//! Connections are bounded ([`ADMIN_LIMITS`]): a stalled request head or body is cut.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use axum::{Json, Router};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::api::{ApiError, FaultCreated, FaultRequest, FaultsResponse};
use crate::faults;
use crate::fleet::FleetShared;
use crate::prometheus;
use stampede_http_kit::{constant_time_eq, Secret};
use stampede_http_kit::{serve_bounded, BodyTimedOut, HttpLimits};

/// Serves the admin API on `listener` until the fleet shuts down.
pub(crate) fn spawn(
    shared: Arc<FleetShared>,
    listener: TcpListener,
    token: Option<Secret>,
) -> JoinHandle<()> {
    let stop = shared.shutdown.clone();
    let mut app = Router::new()
        .route("/health", get(health))
        .route("/nodes", get(nodes))
        .route("/metrics", get(metrics))
        .route("/faults", get(list_faults).post(add_fault))
        .route("/faults/{id}", delete(remove_fault))
        .with_state(shared);
    if let Some(token) = token {
        let expected: Arc<str> = format!("Bearer {}", token.expose()).into();
        app = app.layer(middleware::from_fn(move |req: Request, next: Next| {
            let expected = expected.clone();
            async move { bearer(expected, req, next).await }
        }));
    }
    tokio::spawn(serve_bounded(
        listener,
        app,
        ADMIN_LIMITS,
        stop,
        body_timed_out,
    ))
}

/// What an admin client may hold open: the bounds of the project's local APIs.
pub const ADMIN_LIMITS: HttpLimits = stampede_http_kit::LOCAL_API_LIMITS;

fn body_timed_out(e: BodyTimedOut) -> Response {
    error(StatusCode::REQUEST_TIMEOUT, e.to_string())
}

async fn bearer(expected: Arc<str>, req: Request, next: Next) -> Response {
    let ok = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| constant_time_eq(v.as_bytes(), expected.as_bytes()));
    if ok {
        next.run(req).await
    } else {
        error(StatusCode::UNAUTHORIZED, "missing or wrong bearer token")
    }
}

fn error(status: StatusCode, msg: impl Into<String>) -> Response {
    (status, Json(ApiError { error: msg.into() })).into_response()
}

async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

async fn nodes(State(s): State<Arc<FleetShared>>) -> Response {
    Json(s.truth()).into_response()
}

async fn metrics(State(s): State<Arc<FleetShared>>) -> Response {
    let body = prometheus::render(&s.truth());
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

async fn list_faults(State(s): State<Arc<FleetShared>>) -> Response {
    let faults = s.faults.lock().await.list();
    Json(FaultsResponse { faults }).into_response()
}

async fn add_fault(State(s): State<Arc<FleetShared>>, body: Bytes) -> Response {
    // Parsed by hand so that an unknown kind or a bad field is a 400 with a JSON message.
    let req: FaultRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("bad fault request: {e}")),
    };
    match faults::add(&s, req).await {
        Ok(id) => (StatusCode::CREATED, Json(FaultCreated { id })).into_response(),
        Err(e) if e.is_client_error() => error(StatusCode::BAD_REQUEST, e.to_string()),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn remove_fault(State(s): State<Arc<FleetShared>>, Path(id): Path<String>) -> Response {
    let Ok(id) = id.parse::<u64>() else {
        return error(StatusCode::NOT_FOUND, format!("no fault with id {id:?}"));
    };
    match faults::remove(&s, id).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e @ faults::FaultError::UnknownFault(_)) => error(StatusCode::NOT_FOUND, e.to_string()),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}
