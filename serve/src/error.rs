//! Errors of the service (start-up) and of its REST answers.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// Why the service could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Binding the HTTP listener failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Address asked for.
        addr: std::net::SocketAddr,
        /// Cause.
        source: std::io::Error,
    },
    /// A node address is not a valid URI.
    #[error("bad node address `{addr}`: {message}")]
    NodeAddr {
        /// The address given.
        addr: String,
        /// Why it is invalid.
        message: String,
    },
    /// Invalid settings.
    #[error("invalid settings: {0}")]
    Config(String),
    /// The API key or the admin token is empty or whitespace.
    #[error(transparent)]
    BlankSecret(#[from] stampede_http_kit::EmptySecret),
    /// A non-loopback listen address with the published default API key.
    #[error(
        "--listen {0} is not a loopback address and the API key is the built-in default, \
         which is public: give a key of your own with --api-key or STAMPEDE_API_KEY"
    )]
    DefaultKeyExposed(std::net::SocketAddr),
    /// The HTTP server stopped with an error.
    #[error("HTTP server failed")]
    Server(#[source] std::io::Error),
    /// The placement trace file cannot be created.
    #[error("cannot create the placement trace {path}")]
    Trace {
        /// The file.
        path: std::path::PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// A REST error answer: E2B's `Error` schema (`code`, `message`) plus, for 5xx placement
/// outcomes, an `error_code`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiError {
    /// HTTP status, repeated in the body as E2B does.
    pub code: u16,
    /// Human-readable reason.
    pub message: String,
    /// Machine-readable reason (`sandbox_capacity_unavailable`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<&'static str>,
}

impl ApiError {
    /// An error without `error_code`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            code: status.as_u16(),
            message: message.into(),
            error_code: None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, axum::Json(self)).into_response()
    }
}
