//! Shared fixtures of the serve integration tests: a mock-node fleet plus one placement
//! instance, both on 127.0.0.1 with free ports.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use mock_node::api::{FaultKind, FaultRequest};
use mock_node::config::{ClusterConfig, NodeOverride, NodeSpec, VcpuRange};
use mock_node::fleet::{FleetHandle, FleetOptions};
use serde_json::Value;
use stampede::placement::{AccountingMode, PlacementConfig};
use stampede::serve::{ServeConfig, ServiceHandle, DEFAULT_API_KEY};

/// A fleet and a service placing on it.
pub struct Rig {
    pub fleet: FleetHandle,
    pub svc: ServiceHandle,
    pub http: reqwest::Client,
}

/// `n` nodes of 16 vCPU, no creates refused for concurrency; `baselines` (per node, in
/// vCPU) make some nodes more attractive than others.
pub fn cluster(n: usize, baselines: &[u32]) -> ClusterConfig {
    let mut cfg = ClusterConfig {
        nodes: n,
        seed: Some(7),
        node: NodeSpec {
            cpu_count: 16,
            max_starting: 0,
            ..NodeSpec::default()
        },
        overrides: BTreeMap::new(),
    };
    for (k, &b) in baselines.iter().enumerate() {
        cfg.overrides.insert(
            cfg.node_id(k),
            NodeOverride {
                baseline_vcpu: Some(VcpuRange { min: b, max: b }),
                ..NodeOverride::default()
            },
        );
    }
    cfg
}

/// The admin token of [`serve_config`].
pub const TEST_ADMIN_TOKEN: &str = "stampede-test-admin-token";

/// Settings for tests: manual syncs (1 h period), short deadlines.
pub fn serve_config(mode: AccountingMode) -> ServeConfig {
    ServeConfig {
        placement: PlacementConfig {
            mode,
            ..PlacementConfig::default()
        },
        sync_interval: Duration::from_secs(3600),
        request_timeout: Duration::from_secs(10),
        rpc_timeout: Duration::from_secs(2),
        seed: 11,
        admin_token: Some(stampede_http_kit::Secret::new(TEST_ADMIN_TOKEN)),
        ..ServeConfig::default()
    }
}

/// [`serve_config`] for nodes slowed by a few hundred milliseconds: RPC deadlines (10 s,
/// the request's 20 s) far above the added latency, so that a loaded machine does not
/// turn a slow RPC into a failed one.
pub fn slow_nodes_config() -> ServeConfig {
    let mut cfg = serve_config(AccountingMode::Optimistic);
    cfg.rpc_timeout = Duration::from_secs(10);
    cfg.request_timeout = Duration::from_secs(20);
    cfg
}

impl Rig {
    /// Sandboxes on the fleet's nodes now (their truth, all nodes together).
    pub fn sandboxes_on_nodes(&self) -> usize {
        self.fleet
            .truth()
            .nodes
            .iter()
            .map(|n| n.sandbox_ids.len())
            .sum()
    }

    pub async fn start(cluster: ClusterConfig, cfg: ServeConfig) -> Rig {
        Rig::start_with(cluster, cfg, FleetOptions::default()).await
    }

    /// [`Rig::start`] with the fleet's own options (e.g. a node port's connection cap).
    pub async fn start_with(cluster: ClusterConfig, cfg: ServeConfig, opts: FleetOptions) -> Rig {
        let fleet = mock_node::fleet::start(cluster, opts)
            .await
            .expect("fleet starts");
        let nodes = stampede::serve_cmd::targets_of(&fleet);
        let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let svc = stampede::serve::start(cfg, nodes, listen)
            .await
            .expect("service starts");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(20))
            .build()
            .unwrap();
        Rig { fleet, svc, http }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.svc.url())
    }

    /// POST /sandboxes with the default key; (status, JSON body).
    pub async fn create(&self, body: Value) -> (u16, Value) {
        let r = self
            .http
            .post(self.url("/sandboxes"))
            .header("X-API-Key", DEFAULT_API_KEY)
            .json(&body)
            .send()
            .await
            .expect("request sent");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// GET with the API key and the admin token; (status, JSON body).
    pub async fn get_json(&self, path: &str) -> (u16, Value) {
        let r = self
            .http
            .get(self.url(path))
            .header("X-API-Key", DEFAULT_API_KEY)
            .header("X-Admin-Token", TEST_ADMIN_TOKEN)
            .send()
            .await
            .expect("request sent");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// POST `path` with the API key and `body` (none: no body); (status, JSON body).
    pub async fn post(&self, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut r = self
            .http
            .post(self.url(path))
            .header("X-API-Key", DEFAULT_API_KEY);
        if let Some(b) = body {
            r = r.json(&b);
        }
        let r = r.send().await.expect("request sent");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Every node slowed by `latency` per RPC (mock-node's `slow` fault).
    pub async fn slow_all(&self, latency: Duration) {
        self.fleet
            .apply_fault(FaultRequest {
                kind: FaultKind::Slow { latency },
                nodes: self.fleet.nodes().iter().map(|n| n.id.clone()).collect(),
                duration: None,
            })
            .await
            .expect("fault applied");
    }

    pub async fn delete(&self, id: &str) -> u16 {
        self.http
            .delete(self.url(&format!("/sandboxes/{id}")))
            .header("X-API-Key", DEFAULT_API_KEY)
            .send()
            .await
            .expect("request sent")
            .status()
            .as_u16()
    }

    /// GET /nodes as a map id -> node JSON.
    pub async fn nodes(&self) -> BTreeMap<String, Value> {
        let (status, body) = self.get_json("/nodes").await;
        assert_eq!(status, 200, "{body}");
        body.as_array()
            .expect("array")
            .iter()
            .map(|n| (n["id"].as_str().unwrap().to_string(), n.clone()))
            .collect()
    }

    /// Which node the truth says runs `sandbox_id`.
    pub fn truth_node_of(&self, sandbox_id: &str) -> Option<String> {
        self.fleet
            .truth()
            .nodes
            .into_iter()
            .find(|n| n.sandbox_ids.iter().any(|s| s == sandbox_id))
            .map(|n| n.id)
    }

    /// The vCPU allocated on `node` now (its truth).
    pub fn allocated_vcpu(&self, node: &str) -> u64 {
        self.fleet
            .truth()
            .nodes
            .into_iter()
            .find(|n| n.id == node)
            .map(|n| n.allocated_vcpu)
            .expect("a node of the fleet")
    }

    pub async fn fault(&self, kind: FaultKind, node: &str) -> u64 {
        self.fleet
            .apply_fault(FaultRequest {
                kind,
                nodes: vec![node.to_string()],
                duration: None,
            })
            .await
            .expect("fault applied")
    }

    /// The value of counter `name` in the service's `/metrics` (summed over labels).
    pub async fn counter(&self, name: &str) -> u64 {
        let text = self
            .http
            .get(self.url("/metrics"))
            .send()
            .await
            .expect("metrics answered")
            .text()
            .await
            .expect("metrics body");
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (key, value) = l.rsplit_once(' ')?;
                (key.split('{').next()? == name).then(|| value.trim().parse::<u64>().ok())?
            })
            .sum()
    }

    pub async fn stop(self) {
        self.svc.shutdown().await;
        self.fleet.shutdown().await;
    }
}
