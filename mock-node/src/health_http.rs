//! `GET /health` over HTTP/1.1 on each node's gRPC port, as E2B's orchestrator serves it
//! (`packages/orchestrator/pkg/healthcheck`: cmux splits HTTP and gRPC on port 5008).
//! A Nomad service check or a Kubernetes probe can then point at the node's one port.
//!
//! The answer follows the node's ServiceInfo status as E2B maps it: `healthy` 200,
//! `draining` 200 (also for standby), `unhealthy` 503; body `{"status","version"}`.
//! A killed node answers nothing (its listener is closed); a hung one never answers.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::model::ServiceStatus;
use crate::serve::NodeConnInfo;

/// The `/health` handler of the node whose listener accepted the connection.
pub(crate) async fn health(req: Request) -> Response {
    let Some(conn) = req.extensions().get::<NodeConnInfo>() else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let status = conn.node.model().status();
    let (code, word) = match status {
        ServiceStatus::Healthy => (StatusCode::OK, "healthy"),
        ServiceStatus::Draining | ServiceStatus::Standby => (StatusCode::OK, "draining"),
        ServiceStatus::Unhealthy => (StatusCode::SERVICE_UNAVAILABLE, "unhealthy"),
    };
    let body = serde_json::json!({ "status": word, "version": "mock-node" });
    (code, Json(body)).into_response()
}
