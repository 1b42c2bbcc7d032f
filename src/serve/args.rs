//! `stampede serve` flags and the CLI entry point.

use std::net::SocketAddr;
use std::time::Duration;

use super::config::{NodeTarget, ServeConfig, DEFAULT_API_KEY, DEFAULT_RETRY_BACKOFF};
use super::error::ServeError;
use super::service::start_replicas;
use crate::placement::{AccountingMode, FailureAnswers, PlacementConfig};

/// Flags of `stampede serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address of the REST API (the first replica's; others take the next ports).
    #[arg(long, default_value = "127.0.0.1:3000")]
    pub listen: SocketAddr,
    /// Orchestrator gRPC address, `host:port` or `id=host:port`; repeatable.
    #[arg(long = "node", value_name = "ADDR")]
    pub nodes: Vec<String>,
    /// Read node ids and addresses from a mock-node admin endpoint (`GET /nodes`).
    #[arg(long, value_name = "URL")]
    pub mock_admin: Option<String>,
    /// Bearer token of the mock-node admin endpoint, if it requires one.
    #[arg(long, env = "STAMPEDE_MOCK_ADMIN_TOKEN", hide_env_values = true)]
    pub mock_admin_token: Option<String>,
    /// Accounting mode: reported, in-flight, optimistic or reconciled.
    #[arg(long, default_value = "optimistic")]
    pub accounting: AccountingMode,
    /// Candidates sampled per placement.
    #[arg(long, default_value_t = 3)]
    pub k: usize,
    /// Over-commit ratio in the score's denominator.
    #[arg(long, default_value_t = 4.0)]
    pub r: f64,
    /// Weight of CPU usage in the score.
    #[arg(long, default_value_t = 0.5)]
    pub alpha: f64,
    /// Failed (non-ResourceExhausted) creates tolerated per request.
    #[arg(long, default_value_t = 3)]
    pub max_retries: u32,
    /// Skip sampled nodes with more than N creates of this instance in flight.
    #[arg(long, value_name = "N")]
    pub max_starting_per_node: Option<u32>,
    /// Node sync period.
    #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
    pub sync_interval: Duration,
    /// Deadline of a whole create request (504 past it).
    #[arg(long, default_value = "70s", value_parser = humantime::parse_duration)]
    pub request_timeout: Duration,
    /// Deadline of one Create RPC (a hung node then counts as a failed attempt).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub create_timeout: Duration,
    /// Pause before retrying a create a node refused with ResourceExhausted (e.g.
    /// `50ms`). Default: none, at once until the deadline, as E2B.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub retry_backoff: Option<Duration>,
    /// API key clients send in X-API-Key.
    #[arg(long, env = "STAMPEDE_API_KEY", default_value = DEFAULT_API_KEY, hide_env_values = true)]
    pub api_key: String,
    /// Token admin clients must send in X-Admin-Token for /nodes (none: /nodes answers 401).
    #[arg(long, env = "STAMPEDE_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Seed of sampling and sandbox ids (replica i uses seed + i).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Independent instances, each with its own state, on consecutive ports.
    #[arg(long, default_value_t = 1)]
    pub replicas: usize,
    /// Kill sandboxes found on nodes that this instance does not know.
    #[arg(long)]
    pub kill_orphans: bool,
    /// vCPU of a sandbox whose create body has no cpuCount.
    #[arg(long, default_value_t = 1)]
    pub default_vcpu: u32,
    /// MiB of a sandbox whose create body has no memoryMB.
    #[arg(long, default_value_t = 1024)]
    pub default_memory_mb: u32,
    /// Close a connection that has not sent a complete request head this soon after it
    /// opened (HTTP/1: or after the previous answer, which bounds keep-alive idling too).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub header_read_timeout: Duration,
    /// Close a connection with no request in progress that moved no byte for this long.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub idle_timeout: Duration,
    /// How placement failures are answered: `e2b` (503/504/500 with `error_code`) or
    /// `legacy` (every one a 500 "Failed to place sandbox", E2B before 2026-08-13).
    #[arg(long, value_enum, default_value_t = FailureAnswers::default())]
    pub failure_answers: FailureAnswers,
}

impl ServeArgs {
    /// The instance settings these flags describe.
    pub fn config(&self) -> ServeConfig {
        ServeConfig {
            placement: PlacementConfig {
                k: self.k,
                r: self.r,
                alpha: self.alpha,
                max_retries: self.max_retries,
                mode: self.accounting,
                max_starting_per_node: self.max_starting_per_node,
                failure_answers: self.failure_answers,
                ..PlacementConfig::default()
            },
            sync_interval: self.sync_interval,
            request_timeout: self.request_timeout,
            create_rpc_timeout: self.create_timeout,
            retry_backoff: self.retry_backoff.or(DEFAULT_RETRY_BACKOFF),
            api_key: self.api_key.clone(),
            admin_token: self.admin_token.clone(),
            seed: self.seed,
            default_vcpu: self.default_vcpu,
            default_memory_mb: self.default_memory_mb,
            kill_orphans: self.kill_orphans,
            header_read_timeout: self.header_read_timeout,
            idle_timeout: self.idle_timeout,
            ..ServeConfig::default()
        }
    }

    /// `--node` values as targets (`id=addr` names the node).
    pub fn node_targets(&self) -> Vec<NodeTarget> {
        self.nodes
            .iter()
            .map(|s| match s.split_once('=') {
                Some((id, addr)) => NodeTarget {
                    id: Some(id.to_string()),
                    addr: addr.to_string(),
                },
                None => NodeTarget::addr(s.clone()),
            })
            .collect()
    }
}

/// Node ids and gRPC addresses from a mock-node admin endpoint's `GET /nodes`.
pub async fn nodes_from_mock_admin(
    url: &str,
    token: Option<&str>,
) -> Result<Vec<NodeTarget>, ServeError> {
    let err = |message: String| ServeError::MockAdmin {
        url: url.to_string(),
        message,
    };
    let mut req = reqwest::Client::new()
        .get(format!("{}/nodes", url.trim_end_matches('/')))
        .timeout(Duration::from_secs(10));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.map_err(|e| err(e.to_string()))?;
    if !resp.status().is_success() {
        return Err(err(format!("HTTP {}", resp.status())));
    }
    let body: mock_node::api::NodesResponse = resp.json().await.map_err(|e| err(e.to_string()))?;
    Ok(body
        .nodes
        .into_iter()
        .map(|n| NodeTarget {
            id: Some(n.id),
            addr: n.grpc_addr.to_string(),
        })
        .collect())
}

/// `stampede serve`: start the replicas and serve until Ctrl-C.
pub async fn run(args: ServeArgs) -> Result<(), ServeError> {
    let mut nodes = args.node_targets();
    if let Some(url) = &args.mock_admin {
        nodes.extend(nodes_from_mock_admin(url, args.mock_admin_token.as_deref()).await?);
    }
    if nodes.is_empty() {
        return Err(ServeError::Config(
            "no nodes: give --node ADDR or --mock-admin URL".into(),
        ));
    }
    if args.replicas == 0 {
        return Err(ServeError::Config("--replicas must be at least 1".into()));
    }
    let handles = start_replicas(args.config(), nodes, args.listen, args.replicas).await?;
    for h in &handles {
        println!(
            "stampede serve: {} ({} accounting, {} nodes)",
            h.url(),
            h.config().placement.mode,
            h.nodes().len()
        );
    }
    tokio::signal::ctrl_c().await.map_err(ServeError::Server)?;
    for h in handles {
        h.shutdown().await;
    }
    Ok(())
}
