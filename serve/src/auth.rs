//! Who may call a route: a handler that takes [`ApiKeyAuth`] runs only for a request
//! carrying the instance's API key (`X-API-Key`, as E2B's API), one that takes
//! [`AdminAuth`] only for one carrying its admin token (`X-Admin-Token`). Both compare
//! in constant time and answer 401 with E2B's error body otherwise, before the handler
//! reads anything else of the request.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};

use super::error::ApiError;
use super::state::Shared;

/// Proof that the request carried the instance's API key.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ApiKeyAuth;

/// Proof that the request carried the instance's admin token.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AdminAuth;

impl FromRequestParts<Arc<Shared>> for ApiKeyAuth {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        shared: &Arc<Shared>,
    ) -> Result<Self, Self::Rejection> {
        check_key(shared, &parts.headers).map(|()| ApiKeyAuth)
    }
}

impl FromRequestParts<Arc<Shared>> for AdminAuth {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        shared: &Arc<Shared>,
    ) -> Result<Self, Self::Rejection> {
        check_admin(shared, &parts.headers).map(|()| AdminAuth)
    }
}

/// The client's `X-API-Key` must be the service's (401 otherwise).
fn check_key(shared: &Shared, headers: &HeaderMap) -> Result<(), ApiError> {
    match headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
        Some(k) if shared.cfg.api_key.matches(k.as_bytes()) => Ok(()),
        Some(_) => Err(ApiError::new(StatusCode::UNAUTHORIZED, "Invalid API key")),
        None => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "Missing API key: send it in the X-API-Key header",
        )),
    }
}

/// `X-Admin-Token` must match the configured admin token (E2B's `AdminApiKeyAuth`, the
/// only security of `/nodes`); without one configured the admin routes refuse all.
fn check_admin(shared: &Shared, headers: &HeaderMap) -> Result<(), ApiError> {
    let token = headers.get("x-admin-token").and_then(|v| v.to_str().ok());
    match (&shared.cfg.admin_token, token) {
        (Some(expected), Some(t)) if expected.matches(t.as_bytes()) => Ok(()),
        (_, Some(_)) => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "Invalid admin token",
        )),
        (_, None) => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "Missing admin token: send it in the X-Admin-Token header",
        )),
    }
}
