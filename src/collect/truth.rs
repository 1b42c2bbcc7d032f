//! Reading per-node truth from mock-node admin APIs, an E2B API's `/nodes`, or
//! orchestrators' `SandboxService/List` over gRPC.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use stampede_proto::sandbox_service_client::SandboxServiceClient;

use super::believed::fetch_api_nodes;
use super::CollectError;
use crate::api_key::ApiKey;
use crate::mock_admin::MockAdmin;

/// Where node truth comes from.
#[derive(Debug, Clone)]
pub enum TruthSource {
    /// mock-node admin base URLs (`GET /nodes`): exact counts, allocations and ids; and
    /// the bearer token they require (`mock-node --admin-token`), if any.
    MockAdmin(Vec<String>, Option<ApiKey>),
    /// An E2B API's `GET /nodes` with an admin token: counts and allocations, no ids.
    E2bApi {
        /// API base URL.
        url: String,
        /// `X-Admin-Token`.
        admin_token: Option<ApiKey>,
    },
    /// Orchestrator gRPC addresses (`host:port`), read with `List`.
    Orchestrators(Vec<String>),
}

/// One node's truth at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeSample {
    /// Node id.
    pub id: String,
    /// Running sandboxes.
    pub sandboxes: u64,
    /// Allocated vCPU (baseline included where the source knows it).
    pub allocated_vcpu: f64,
    /// Sandbox ids, when the source lists them.
    pub ids: Option<Vec<String>>,
    /// Node status as the source names it.
    pub status: String,
    /// Incarnation id (changes when a node restarts), when known.
    pub service_id: Option<String>,
    /// Creates the node refused so far (mock-node's `creates_rejected`, every reason),
    /// when the source counts them.
    #[serde(default)]
    pub refused: Option<u64>,
}

/// Every node's truth at one instant, in node order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Truth {
    /// Per node.
    pub nodes: Vec<NodeSample>,
}

impl TruthSource {
    /// The mock-node fleets' admin URLs and token, when the truth comes from them.
    pub fn mock_admin(&self) -> Option<(&[String], Option<&ApiKey>)> {
        match self {
            TruthSource::MockAdmin(urls, token) => Some((urls, token.as_ref())),
            _ => None,
        }
    }
}

/// Reads the truth once. `client` is reused across calls.
pub async fn fetch_truth(
    client: &reqwest::Client,
    source: &TruthSource,
) -> Result<Truth, CollectError> {
    match source {
        TruthSource::MockAdmin(urls, token) => {
            let mut nodes = Vec::new();
            for base in urls {
                nodes.extend(fetch_mock(client, base, token.as_ref()).await?);
            }
            Ok(Truth { nodes })
        }
        TruthSource::E2bApi { url, admin_token } => {
            let api = fetch_api_nodes(client, url, admin_token.as_ref()).await?;
            Ok(Truth {
                nodes: api
                    .into_iter()
                    .map(|n| NodeSample {
                        sandboxes: n.sandbox_count,
                        allocated_vcpu: n.allocated_cpu(),
                        id: n.id,
                        ids: None,
                        status: n.status,
                        service_id: None,
                        refused: None,
                    })
                    .collect(),
            })
        }
        TruthSource::Orchestrators(addrs) => {
            let mut nodes = Vec::new();
            for a in addrs {
                nodes.push(list_over_grpc(a).await?);
            }
            Ok(Truth { nodes })
        }
    }
}

async fn fetch_mock(
    client: &reqwest::Client,
    base: &str,
    token: Option<&ApiKey>,
) -> Result<Vec<NodeSample>, CollectError> {
    let body = MockAdmin::new(client.clone(), base, token.map(ApiKey::expose))
        .nodes()
        .await?;
    Ok(body
        .nodes
        .into_iter()
        .map(|n| NodeSample {
            id: n.id,
            sandboxes: n.sandbox_count,
            allocated_vcpu: n.allocated_vcpu as f64,
            ids: Some(n.sandbox_ids),
            status: n.status,
            service_id: Some(n.service_id),
            refused: Some(n.creates_rejected.values().sum()),
        })
        .collect())
}

/// Reads one orchestrator's running sandboxes with `SandboxService/List`.
pub async fn list_over_grpc(addr: &str) -> Result<NodeSample, CollectError> {
    let grpc = |source: Box<dyn std::error::Error + Send + Sync>| CollectError::Grpc {
        addr: addr.to_string(),
        source,
    };
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .map_err(|e| grpc(e.into()))?
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(10));
    let channel = endpoint.connect().await.map_err(|e| grpc(e.into()))?;
    let list = SandboxServiceClient::new(channel)
        .list(())
        .await
        .map_err(|e| grpc(e.into()))?
        .into_inner();
    let vcpu: i64 = list.sandboxes.iter().map(|s| s.vcpu).sum();
    Ok(NodeSample {
        id: addr.to_string(),
        sandboxes: list.sandboxes.len() as u64,
        allocated_vcpu: vcpu as f64,
        ids: Some(list.sandboxes.into_iter().map(|s| s.sandbox_id).collect()),
        status: "ready".into(),
        service_id: None,
        refused: None,
    })
}
