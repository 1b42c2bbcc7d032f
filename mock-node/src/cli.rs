//! The `mock-node` command line (also `stampede mock-node`): flags, env, YAML, ready line.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use crate::config::ClusterConfig;
use crate::config_file::{self, ConfigFileError};
use crate::fleet::{self, Addressing, FleetError, FleetHandle, FleetOptions};
use stampede_http_kit::Secret;

/// E2B orchestrators' gRPC port.
pub const DEFAULT_GRPC_PORT: u16 = 5008;

/// Options of `mock-node`. Flags override the YAML given with `--config`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct MockNodeArgs {
    /// YAML file with a `cluster:` section (a run profile works) or a bare cluster section.
    #[arg(long, value_name = "FILE.yaml")]
    pub config: Option<PathBuf>,
    /// Number of virtual nodes.
    #[arg(long)]
    pub nodes: Option<usize>,
    /// Node k listens on `--ip`:(base-port + k); 0 = each node takes a free port.
    #[arg(long, conflicts_with = "loopback_ips")]
    pub base_port: Option<u16>,
    /// Node k listens on 127.0.1.(k+1):`--port`, one IP per node like a real cluster.
    #[arg(long)]
    pub loopback_ips: bool,
    /// Port of every node with `--loopback-ips` or of the single node (default 5008);
    /// otherwise the base port when `--base-port` is absent.
    #[arg(long, env = "GRPC_PORT")]
    pub port: Option<u16>,
    /// IP the nodes bind with port addressing (default 127.0.0.1; use 0.0.0.0 to be
    /// reachable from other hosts).
    #[arg(long)]
    pub ip: Option<IpAddr>,
    /// Single-node mode: the node's id (E2B's `NODE_ID`).
    #[arg(long, env = "NODE_ID")]
    pub node_id: Option<String>,
    /// Labels reported by ServiceInfo, comma-separated (E2B's `NODE_LABELS`).
    #[arg(long, env = "NODE_LABELS", value_delimiter = ',')]
    pub labels: Vec<String>,
    /// Seed of every random choice (latency, failures, baselines).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Admin HTTP address; non-loopback requires `--admin-token`.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub admin_addr: Option<SocketAddr>,
    /// Bearer token the admin API requires.
    #[arg(long, env = "MOCK_NODE_ADMIN_TOKEN", hide_env_values = true, value_parser = admin_token)]
    pub admin_token: Option<Secret>,
    /// vCPUs of every node.
    #[arg(long)]
    pub cpu_count: Option<u32>,
    /// Memory of every node, MiB.
    #[arg(long)]
    pub memory_mib: Option<u64>,
    /// Refuse creates beyond `overcommit * cpu_count` allocated vCPU (0 = off).
    #[arg(long)]
    pub overcommit: Option<f64>,
    /// Running sandboxes at which creates are refused.
    #[arg(long)]
    pub max_sandboxes: Option<u32>,
    /// Creates in progress at which creates are refused (0 = unlimited).
    #[arg(long)]
    pub max_starting: Option<u32>,
    /// ServiceInfo serves a snapshot refreshed this often (e.g. `20s`; 0 = live).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub metrics_lag: Option<Duration>,
    /// IP advertised for the nodes (admin API, Nomad registrations) instead of the
    /// bound one; an unspecified bind (0.0.0.0) otherwise advertises the host's IP.
    #[arg(long, env = "MOCK_NODE_ADVERTISE_IP")]
    pub advertise_ip: Option<IpAddr>,
    /// Address of the Nomad-style discovery API (E2B's `NOMAD_ADDRESS` points here).
    #[arg(long)]
    pub nomad_addr: Option<SocketAddr>,
    /// Service name the nodes register in the Nomad-style API (E2B's
    /// `NOMAD_ORCHESTRATOR_SERVICE_NAMES`); default `stampede-orchestrator`.
    #[arg(long)]
    pub nomad_service_name: Option<String>,
    /// Node pool of the virtual Nomad nodes; default `default` (the pool E2B's legacy
    /// node-list discovery reads).
    #[arg(long)]
    pub nomad_node_pool: Option<String>,
}

/// Why `mock-node` stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum MockNodeError {
    /// The `--config` file is unreadable or invalid.
    #[error(transparent)]
    Config(#[from] ConfigFileError),
    /// The fleet did not start.
    #[error(transparent)]
    Fleet(#[from] FleetError),
    /// Waiting for Ctrl-C failed.
    #[error("waiting for Ctrl-C: {0}")]
    Signal(std::io::Error),
}

impl MockNodeArgs {
    /// The cluster and fleet options these arguments describe.
    pub fn resolve(&self) -> Result<(ClusterConfig, FleetOptions), MockNodeError> {
        let mut cfg = match &self.config {
            Some(p) => config_file::load_cluster(p)?,
            None => ClusterConfig::default(),
        };
        let single = self.node_id.is_some();
        if let Some(n) = self.nodes {
            cfg.nodes = n;
        } else if single {
            cfg.nodes = 1;
        }
        if self.seed.is_some() {
            cfg.seed = self.seed;
        }
        let n = &mut cfg.node;
        n.cpu_count = self.cpu_count.unwrap_or(n.cpu_count);
        n.memory_mib = self.memory_mib.unwrap_or(n.memory_mib);
        n.overcommit = self.overcommit.unwrap_or(n.overcommit);
        n.max_sandboxes = self.max_sandboxes.unwrap_or(n.max_sandboxes);
        n.max_starting = self.max_starting.unwrap_or(n.max_starting);
        n.metrics_lag = self.metrics_lag.unwrap_or(n.metrics_lag);
        let ip = self.ip.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
        let addressing = if self.loopback_ips {
            Addressing::LoopbackIps {
                port: self.port.unwrap_or(DEFAULT_GRPC_PORT),
            }
        } else if let Some(base_port) = self.base_port {
            Addressing::Ports { ip, base_port }
        } else if single {
            Addressing::Ports {
                ip,
                base_port: self.port.unwrap_or(DEFAULT_GRPC_PORT),
            }
        } else {
            Addressing::Ports {
                ip,
                base_port: self.port.unwrap_or(0),
            }
        };
        let defaults = FleetOptions::default();
        let mut nomad = defaults.nomad.clone();
        nomad.addr = self.nomad_addr.unwrap_or(nomad.addr);
        if let Some(name) = self.nomad_service_name.clone().filter(|n| !n.is_empty()) {
            nomad.service_name = name;
        }
        if let Some(pool) = self.nomad_node_pool.clone().filter(|p| !p.is_empty()) {
            nomad.node_pool = pool;
        }
        let opts = FleetOptions {
            addressing,
            admin_addr: self.admin_addr.unwrap_or(defaults.admin_addr),
            admin_token: self.admin_token.clone(),
            node_id: self.node_id.clone(),
            labels: self
                .labels
                .iter()
                .filter(|l| !l.is_empty())
                .cloned()
                .collect(),
            advertise_ip: self.advertise_ip,
            nomad,
            node_limits: defaults.node_limits,
        };
        Ok((cfg, opts))
    }
}

/// The one line printed when the fleet is ready, for scripts to wait on. Fields are
/// space-separated `key=value`; new ones are appended at the end.
pub fn ready_line(fleet: &FleetHandle) -> String {
    let nodes: Vec<String> = fleet
        .nodes()
        .iter()
        .map(|n| format!("{}@{}", n.id, n.addr))
        .collect();
    format!(
        "mock-node ready admin={} nomad={} nodes={} fleet_seed={}",
        fleet.admin_url(),
        fleet.nomad_url(),
        nodes.join(","),
        fleet.fleet_seed()
    )
}

/// Starts the fleet, prints the ready line on stdout, serves until Ctrl-C, shuts down.
pub async fn run(args: MockNodeArgs) -> Result<(), MockNodeError> {
    let (cfg, opts) = args.resolve()?;
    // A fleet holds a listener per node and every client's connections: take the
    // descriptors the hard limit allows, as Go's runtime does for E2B's servers.
    stampede_http_kit::raise_fd_limit();
    tracing::info!(
        nodes = cfg.nodes,
        fleet_seed = cfg.fleet_seed(0),
        "starting mock-node fleet"
    );
    let fleet = fleet::start(cfg, opts).await?;
    {
        let mut out = std::io::stdout().lock();
        // A closed stdout must not stop the fleet; the admin endpoint still works.
        let _ = writeln!(out, "{}", ready_line(&fleet));
        let _ = out.flush();
    }
    let waited = tokio::signal::ctrl_c().await;
    fleet.shutdown().await;
    waited.map_err(MockNodeError::Signal)
}

/// `--admin-token`: refused when blank, naming the setting.
fn admin_token(text: &str) -> Result<Secret, stampede_http_kit::EmptySecret> {
    Secret::parse("the admin token", text)
}
