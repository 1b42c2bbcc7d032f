//! gRPC clients of one orchestrator node, every call bounded by a deadline.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use stampede_proto::info_service_client::InfoServiceClient;
use stampede_proto::prost_types::Timestamp;
use stampede_proto::sandbox_service_client::SandboxServiceClient;
use stampede_proto::{
    SandboxCheckpointRequest, SandboxConfig, SandboxCreateRequest, SandboxDeleteRequest,
    SandboxPauseRequest, SandboxUpdateRequest, ServiceInfoResponse,
};
use tonic::codegen::http::Uri;
use tonic::{Code, Status};

use super::channel_watch::WatchedConnector;
use super::error::ServeError;
use super::node_channel::NodeChannel;
use stampede_placement::ChannelCell;

/// A sandbox as a node's `List` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedOnNode {
    /// Sandbox id.
    pub id: String,
    /// vCPU.
    pub vcpu: u32,
    /// When the node started it, when it says.
    pub started: Option<SystemTime>,
}

impl ListedOnNode {
    /// The placer's reading of it.
    pub fn listed(&self) -> stampede_placement::Listed {
        stampede_placement::Listed {
            id: self.id.clone(),
            vcpu: self.vcpu,
        }
    }
}

/// What a create needs to send.
#[derive(Debug, Clone)]
pub struct CreateSpec {
    /// Sandbox id chosen by the API.
    pub sandbox_id: String,
    /// Template id.
    pub template_id: String,
    /// vCPU.
    pub vcpu: u32,
    /// Memory, MiB.
    pub ram_mb: u32,
    /// Metadata.
    pub metadata: std::collections::BTreeMap<String, String>,
    /// Start time.
    pub start: SystemTime,
    /// Expiry time.
    pub end: SystemTime,
    /// envd version.
    pub envd_version: String,
    /// Longest lifetime the sandbox may be extended to, hours.
    pub max_length_hours: u32,
    /// Start from a snapshot (a resume or a fork): the node waits for a starting slot.
    pub snapshot: bool,
}

/// Clients of one node over one lazily connected channel (reconnects by itself).
#[derive(Debug, Clone)]
pub struct NodeClient {
    sandboxes: SandboxServiceClient<NodeChannel>,
    info: InfoServiceClient<NodeChannel>,
}

impl NodeClient {
    /// A client of `addr` (`host:port` or `http://host:port`); connects on first use,
    /// its connector recording the channel's state in `channel`.
    pub fn new(
        addr: &str,
        connect_timeout: Duration,
        channel: Arc<ChannelCell>,
    ) -> Result<Self, ServeError> {
        let uri = if addr.contains("://") {
            addr.to_string()
        } else {
            format!("http://{addr}")
        };
        let bad = |message: String| ServeError::NodeAddr {
            addr: addr.to_string(),
            message,
        };
        let origin = Uri::try_from(uri).map_err(|e| bad(e.to_string()))?;
        let channel = NodeChannel::new(origin, WatchedConnector::new(channel, connect_timeout))
            .ok_or_else(|| bad("no scheme or host".to_string()))?;
        Ok(Self {
            sandboxes: SandboxServiceClient::new(channel.clone()),
            info: InfoServiceClient::new(channel),
        })
    }

    /// `InfoService/ServiceInfo`.
    pub async fn service_info(&self, limit: Duration) -> Result<ServiceInfoResponse, Status> {
        let mut c = self.info.clone();
        bounded(limit, async move { c.service_info(req((), limit)).await }).await
    }

    /// `SandboxService/List`.
    pub async fn list(&self, limit: Duration) -> Result<Vec<ListedOnNode>, Status> {
        let mut c = self.sandboxes.clone();
        let resp = bounded(limit, async move { c.list(req((), limit)).await }).await?;
        Ok(resp
            .sandboxes
            .into_iter()
            .map(|s| {
                let cfg = s.config.unwrap_or_default();
                let id = if s.sandbox_id.is_empty() {
                    cfg.sandbox_id
                } else {
                    s.sandbox_id
                };
                let vcpu = if s.vcpu > 0 { s.vcpu } else { cfg.vcpu };
                ListedOnNode {
                    id,
                    vcpu: u32::try_from(vcpu.max(0)).unwrap_or(u32::MAX),
                    started: s.start_time.and_then(|t| SystemTime::try_from(t).ok()),
                }
            })
            .collect())
    }

    /// `SandboxService/Create`; returns the node's `client_id`.
    pub async fn create(&self, spec: &CreateSpec, limit: Duration) -> Result<String, Status> {
        let body = SandboxCreateRequest {
            sandbox: Some(SandboxConfig {
                template_id: spec.template_id.clone(),
                build_id: spec.template_id.clone(),
                sandbox_id: spec.sandbox_id.clone(),
                vcpu: i64::from(spec.vcpu),
                ram_mb: i64::from(spec.ram_mb),
                team_id: "stampede".to_string(),
                metadata: spec.metadata.clone().into_iter().collect(),
                envd_version: spec.envd_version.clone(),
                execution_id: spec.sandbox_id.clone(),
                max_sandbox_length: i64::from(spec.max_length_hours),
                snapshot: spec.snapshot,
                ..SandboxConfig::default()
            }),
            start_time: Some(Timestamp::from(spec.start)),
            end_time: Some(Timestamp::from(spec.end)),
        };
        let mut c = self.sandboxes.clone();
        let resp = bounded(limit, async move { c.create(req(body, limit)).await }).await?;
        Ok(resp.client_id)
    }

    /// `SandboxService/Pause`: the node snapshots the sandbox and lets it go.
    pub async fn pause(
        &self,
        sandbox_id: &str,
        build_id: &str,
        limit: Duration,
    ) -> Result<(), Status> {
        let body = SandboxPauseRequest {
            sandbox_id: sandbox_id.to_string(),
            template_id: build_id.to_string(),
            build_id: build_id.to_string(),
            filesystem_only: false,
        };
        let mut c = self.sandboxes.clone();
        bounded(limit, async move { c.pause(req(body, limit)).await }).await?;
        Ok(())
    }

    /// `SandboxService/Checkpoint`: a snapshot of a running sandbox, which keeps running.
    pub async fn checkpoint(
        &self,
        sandbox_id: &str,
        build_id: &str,
        limit: Duration,
    ) -> Result<(), Status> {
        let body = SandboxCheckpointRequest {
            sandbox_id: sandbox_id.to_string(),
            build_id: build_id.to_string(),
            metadata: std::collections::HashMap::new(),
        };
        let mut c = self.sandboxes.clone();
        bounded(limit, async move { c.checkpoint(req(body, limit)).await }).await?;
        Ok(())
    }

    /// `SandboxService/Update`: the sandbox's new end time.
    pub async fn update_end(
        &self,
        sandbox_id: &str,
        end: SystemTime,
        limit: Duration,
    ) -> Result<(), Status> {
        let body = SandboxUpdateRequest {
            sandbox_id: sandbox_id.to_string(),
            end_time: Some(Timestamp::from(end)),
        };
        let mut c = self.sandboxes.clone();
        bounded(limit, async move { c.update(req(body, limit)).await }).await?;
        Ok(())
    }

    /// `SandboxService/Delete`, sent again once on a fresh connection when the first
    /// attempt's connection was lost before the node's answer arrived (a node port's
    /// connection cap closing it between calls, a reset), both attempts within `limit`.
    ///
    /// Sending it again is safe because a node's Delete is idempotent in effect: if the
    /// lost attempt did reach the node and kill the sandbox, the second one finds it gone
    /// and the node answers NotFound, which the kill takes as done (204), as it takes a
    /// sandbox a restart lost. Without the retry the kill answers 500 and the sandbox may
    /// stay on its node, out of the API's books, until the orphan sweep.
    pub async fn delete(&self, sandbox_id: &str, limit: Duration) -> Result<(), Status> {
        let deadline = tokio::time::Instant::now() + limit;
        match self.delete_once(sandbox_id, limit).await {
            Err(s) if lost_connection(&s) => {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                if left.is_zero() {
                    return Err(s);
                }
                tracing::debug!(status = %s, "Delete lost its connection: sending it again");
                self.delete_once(sandbox_id, left).await
            }
            other => other,
        }
    }

    async fn delete_once(&self, sandbox_id: &str, limit: Duration) -> Result<(), Status> {
        let body = SandboxDeleteRequest {
            sandbox_id: sandbox_id.to_string(),
        };
        let mut c = self.sandboxes.clone();
        bounded(limit, async move { c.delete(req(body, limit)).await }).await?;
        Ok(())
    }
}

/// Whether a call failed because its connection was lost before the node answered
/// (the status carries the connection's `h2` error), not with a status the node sent.
fn lost_connection(status: &Status) -> bool {
    let mut source = std::error::Error::source(status);
    while let Some(e) = source {
        if let Some(h2) = e.downcast_ref::<h2::Error>() {
            return super::node_channel::connection_lost(h2);
        }
        source = e.source();
    }
    false
}

fn req<T>(body: T, limit: Duration) -> tonic::Request<T> {
    let mut r = tonic::Request::new(body);
    r.set_timeout(limit);
    r
}

/// Run `call`, turning an elapsed `limit` into DEADLINE_EXCEEDED: a node that accepts and
/// never answers must not hold the request.
async fn bounded<T, F>(limit: Duration, call: F) -> Result<T, Status>
where
    F: Future<Output = Result<tonic::Response<T>, Status>>,
{
    match tokio::time::timeout(limit, call).await {
        Ok(r) => r.map(tonic::Response::into_inner),
        Err(_) => Err(Status::new(
            Code::DeadlineExceeded,
            format!("no answer within {limit:?}"),
        )),
    }
}
