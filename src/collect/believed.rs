//! What a placement instance believes: E2B's `GET /nodes` (`metrics.allocatedCPU`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::CollectError;
use crate::api_key::ApiKey;

/// The fields of E2B's `Node` schema the collector reads. Older E2B versions put
/// `allocatedCPU` at the top level and name the id `nodeID`; both are accepted.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiNode {
    /// Node id (`id`, or `nodeID` in older APIs).
    #[serde(alias = "nodeID")]
    pub id: String,
    /// `ready`, `draining`, `connecting`, `unhealthy`, `standby`.
    #[serde(default)]
    pub status: String,
    /// Running sandboxes the API counts on the node.
    #[serde(default)]
    pub sandbox_count: u64,
    /// Newer layout: allocation inside `metrics`.
    #[serde(default)]
    pub metrics: Option<ApiNodeMetrics>,
    /// Older layout: allocation at the top level.
    #[serde(default, rename = "allocatedCPU")]
    pub allocated_cpu_flat: Option<f64>,
    /// Creates this API placed on the node successfully.
    #[serde(default)]
    pub create_successes: u64,
    /// Creates this API sent to the node that failed.
    #[serde(default)]
    pub create_fails: u64,
    /// Creates this API has sent to the node and not yet seen answered.
    #[serde(default)]
    pub sandbox_starting_count: u64,
}

/// `Node.metrics`.
#[derive(Debug, Clone, Deserialize)]
pub struct ApiNodeMetrics {
    /// vCPU the API believes allocated on the node.
    #[serde(default, rename = "allocatedCPU")]
    pub allocated_cpu: f64,
}

impl ApiNode {
    /// Believed allocated vCPU, whichever layout the API uses.
    pub fn allocated_cpu(&self) -> f64 {
        self.metrics
            .as_ref()
            .map(|m| m.allocated_cpu)
            .or(self.allocated_cpu_flat)
            .unwrap_or(0.0)
    }
}

/// `GET {base}/nodes` of an E2B-compatible API (admin token sent when given).
pub async fn fetch_api_nodes(
    client: &reqwest::Client,
    base: &str,
    admin_token: Option<&ApiKey>,
) -> Result<Vec<ApiNode>, CollectError> {
    let url = format!("{}/nodes", base.trim_end_matches('/'));
    let http = |source: Box<dyn std::error::Error + Send + Sync>| CollectError::Http {
        url: url.clone(),
        source,
    };
    let mut req = client.get(&url).timeout(Duration::from_secs(10));
    if let Some(t) = admin_token {
        req = req.header("X-Admin-Token", t.expose());
    }
    let resp = req.send().await.map_err(|e| http(e.into()))?;
    let status = resp.status();
    if !status.is_success() {
        let hint = match (status.as_u16(), admin_token) {
            (401 | 403, None) => {
                " (no admin token was sent: name the env var holding it with \
                 --admin-token-env VAR or the profile's placement.external.admin_token_env)"
            }
            (401 | 403, Some(_)) => {
                " (the admin token was refused: check the value of the env var \
                 --admin-token-env names)"
            }
            _ => "",
        };
        return Err(http(format!("status {status}{hint}").into()));
    }
    resp.json().await.map_err(|e| http(e.into()))
}

/// Believed allocated vCPU per node id, summed over several placement instances'
/// `GET /nodes` (each replica believes only its own view; the error is per replica).
pub async fn fetch_believed(
    client: &reqwest::Client,
    base: &str,
    admin_token: Option<&ApiKey>,
) -> Result<BTreeMap<String, f64>, CollectError> {
    Ok(fetch_api_nodes(client, base, admin_token)
        .await?
        .into_iter()
        .map(|n| {
            let v = n.allocated_cpu();
            (n.id, v)
        })
        .collect())
}
