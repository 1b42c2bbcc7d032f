//! The one client of a mock-node fleet's admin API. `GET /nodes` (node ids, gRPC
//! addresses, the true per-node state) is read through [`MockAdmin::nodes`] by the serve
//! verb (which nodes to place on), the truth sampler, the set audit's inventory and the
//! chaos client (which fleet serves which node); the chaos client applies, lists and
//! heals faults through [`MockAdmin::add_fault`], [`MockAdmin::faults`] and
//! [`MockAdmin::heal_fault`].

use std::time::Duration;

use crate::api::{ApiError, FaultCreated, FaultRequest, FaultsResponse, NodesResponse};

/// Deadline of one admin call.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Why an admin call failed.
#[derive(Debug, thiserror::Error)]
pub enum MockAdminError {
    /// The call did not complete, or its body was not what the call answers.
    #[error("{method} {url} failed")]
    Request {
        /// `GET`, `POST` or `DELETE`.
        method: &'static str,
        /// URL called.
        url: String,
        /// What reqwest reported.
        #[source]
        source: reqwest::Error,
    },
    /// The admin API answered with an error status.
    #[error("{method} {url}: status {status}: {message}")]
    Status {
        /// `GET`, `POST` or `DELETE`.
        method: &'static str,
        /// URL called.
        url: String,
        /// HTTP status.
        status: u16,
        /// The API's error message (its body when that is not an error object).
        message: String,
    },
}

impl MockAdminError {
    /// The URL that failed.
    pub fn url(&self) -> &str {
        match self {
            MockAdminError::Request { url, .. } | MockAdminError::Status { url, .. } => url,
        }
    }
}

/// A mock-node admin API at one base URL (`http://127.0.0.1:4567`).
#[derive(Clone)]
pub struct MockAdmin {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl std::fmt::Debug for MockAdmin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The bearer token is a secret: never printed.
        f.debug_struct("MockAdmin")
            .field("base", &self.base)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl MockAdmin {
    /// The admin API at `base`, sent `token` as a bearer token when given; `http` is
    /// reused across calls.
    pub fn new(http: reqwest::Client, base: &str, token: Option<&str>) -> Self {
        MockAdmin {
            http,
            base: base.trim_end_matches('/').to_string(),
            token: token.map(str::to_string),
        }
    }

    /// The base URL, without a trailing slash.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Every node of the fleet, as the fleet itself knows it.
    pub async fn nodes(&self) -> Result<NodesResponse, MockAdminError> {
        let url = format!("{}/nodes", self.base);
        let resp = self.send("GET", &url, self.http.get(&url)).await?;
        resp.json().await.map_err(|source| MockAdminError::Request {
            method: "GET",
            url,
            source,
        })
    }

    /// `POST /faults`: applies `fault`; the id heals it.
    pub async fn add_fault(&self, fault: &FaultRequest) -> Result<FaultCreated, MockAdminError> {
        let url = format!("{}/faults", self.base);
        let resp = self
            .send("POST", &url, self.http.post(&url).json(fault))
            .await?;
        resp.json().await.map_err(|source| MockAdminError::Request {
            method: "POST",
            url,
            source,
        })
    }

    /// `GET /faults`: every fault in force and the most recently healed ones.
    pub async fn faults(&self) -> Result<FaultsResponse, MockAdminError> {
        let url = format!("{}/faults", self.base);
        let resp = self.send("GET", &url, self.http.get(&url)).await?;
        resp.json().await.map_err(|source| MockAdminError::Request {
            method: "GET",
            url,
            source,
        })
    }

    /// `DELETE /faults/{id}`: heals fault `id`; `Ok(false)` when the fleet has no such
    /// fault in force (404: already healed or never there).
    pub async fn heal_fault(&self, id: u64) -> Result<bool, MockAdminError> {
        let url = format!("{}/faults/{id}", self.base);
        match self.send("DELETE", &url, self.http.delete(&url)).await {
            Ok(_) => Ok(true),
            Err(MockAdminError::Status { status: 404, .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Sends `req` with the deadline and the token; an error status becomes
    /// [`MockAdminError::Status`] with the API's message.
    async fn send(
        &self,
        method: &'static str,
        url: &str,
        req: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, MockAdminError> {
        let mut req = req.timeout(CALL_TIMEOUT);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.map_err(|source| MockAdminError::Request {
            method,
            url: url.to_string(),
            source,
        })?;
        checked(method, url, resp).await
    }
}

/// `resp` when its status is a success; else [`MockAdminError::Status`] with the API's
/// error message (the body itself when it is not an error object).
pub async fn checked(
    method: &'static str,
    url: &str,
    resp: reqwest::Response,
) -> Result<reqwest::Response, MockAdminError> {
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let text = resp.text().await.unwrap_or_default();
    let message = serde_json::from_str::<ApiError>(&text)
        .map(|e| e.error)
        .unwrap_or(text);
    Err(MockAdminError::Status {
        method,
        url: url.to_string(),
        status: status.as_u16(),
        message,
    })
}
