//! The one reader of a mock-node fleet's admin `GET /nodes`: node ids, gRPC addresses,
//! and the true per-node state. The serve verb (which nodes to place on), the truth
//! sampler, the set checker's inventory and the chaos client (which fleet serves which
//! node) all read it through [`MockAdmin::nodes`].

use std::time::Duration;

use crate::api::{ApiError, NodesResponse};

/// Deadline of one `GET /nodes`.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a `GET /nodes` failed.
#[derive(Debug, thiserror::Error)]
pub enum MockAdminError {
    /// The call did not complete, or its body was not a node list.
    #[error("GET {url} failed")]
    Request {
        /// URL read.
        url: String,
        /// What reqwest reported.
        #[source]
        source: reqwest::Error,
    },
    /// The admin API answered with an error status.
    #[error("GET {url}: status {status}: {message}")]
    Status {
        /// URL read.
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
    nodes_url: String,
    token: Option<String>,
}

impl std::fmt::Debug for MockAdmin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The bearer token is a secret: never printed.
        f.debug_struct("MockAdmin")
            .field("nodes_url", &self.nodes_url)
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
            nodes_url: format!("{}/nodes", base.trim_end_matches('/')),
            token: token.map(str::to_string),
        }
    }

    /// Every node of the fleet, as the fleet itself knows it.
    pub async fn nodes(&self) -> Result<NodesResponse, MockAdminError> {
        let url = &self.nodes_url;
        let request = |source| MockAdminError::Request {
            url: url.clone(),
            source,
        };
        let mut req = self.http.get(url).timeout(CALL_TIMEOUT);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.map_err(request)?;
        let status = resp.status();
        if !status.is_success() {
            let text = resp.text().await.unwrap_or_default();
            let message = serde_json::from_str::<ApiError>(&text)
                .map(|e| e.error)
                .unwrap_or(text);
            return Err(MockAdminError::Status {
                url: url.clone(),
                status: status.as_u16(),
                message,
            });
        }
        resp.json().await.map_err(request)
    }
}
