//! Starting and stopping a fleet: nodes on their addresses plus the admin endpoint.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::api::{FaultRequest, NodeTruth, NodesResponse};
use crate::clock::FleetClock;
use crate::config::{ClusterConfig, SpecError};
use crate::faults::{self, FaultBook, FaultError};
use crate::model::NodeModel;
use crate::node::NodeRuntime;
use crate::ports::FreePorts;
use crate::serve::StackTask;
use stampede_http_kit::Secret;

/// Where the nodes listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Addressing {
    /// Node k on `ip:(base_port + k)`; `base_port` 0 = each node takes a free port.
    Ports {
        /// IP every node binds.
        ip: IpAddr,
        /// Port of node 0, or 0 for free ports.
        base_port: u16,
    },
    /// Node k on `127.0.1.(k+1):port`, like one orchestrator per host (Linux loopback /8).
    LoopbackIps {
        /// Port every node binds (E2B's default is 5008).
        port: u16,
    },
}

/// How to run a fleet, besides the cluster model.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// Node addresses.
    pub addressing: Addressing,
    /// Admin HTTP address; must be loopback unless `admin_token` is set.
    pub admin_addr: SocketAddr,
    /// Bearer token the admin API requires, if any.
    pub admin_token: Option<Secret>,
    /// Id of the node in a one-node fleet (`NODE_ID`), instead of `node-00`.
    pub node_id: Option<String>,
    /// Labels every node reports in ServiceInfo (`NODE_LABELS`).
    pub labels: Vec<String>,
    /// IP advertised for every node (admin API, Nomad registrations); default: the
    /// bound IP, or the host's outbound IP for an unspecified bind.
    pub advertise_ip: Option<IpAddr>,
    /// The Nomad-style discovery endpoint.
    pub nomad: crate::nomad::NomadOptions,
    /// The listener policy of every node's port (gRPC and `GET /health`).
    pub node_limits: stampede_http_kit::HttpLimits,
}

impl Default for FleetOptions {
    fn default() -> Self {
        Self {
            addressing: Addressing::Ports {
                ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
                base_port: 0,
            },
            admin_addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            admin_token: None,
            node_id: None,
            labels: Vec::new(),
            advertise_ip: None,
            nomad: crate::nomad::NomadOptions::default(),
            node_limits: crate::NODE_LIMITS,
        }
    }
}

/// Why a fleet did not start.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// The cluster section is invalid.
    #[error("invalid cluster config: {}", join(.0))]
    Config(Vec<SpecError>),
    /// The admin token is empty or whitespace.
    #[error(transparent)]
    BlankAdminToken(#[from] stampede_http_kit::EmptySecret),
    /// A non-loopback Nomad API address without a token.
    #[error("Nomad API address {0} is not loopback: set an admin token to expose it (clients then send it as X-Nomad-Token)")]
    NomadNotLoopback(SocketAddr),
    /// A non-loopback admin address without a token.
    #[error("admin address {0} is not loopback: set an admin token to expose it")]
    AdminNotLoopback(SocketAddr),
    /// `node_id` was given for a fleet of more than one node.
    #[error("a node id can only be set for a one-node fleet (got {0} nodes)")]
    NodeIdNeedsOneNode(usize),
    /// Node k's address does not exist (port or IP range exhausted).
    #[error("node {0}: no address left in the requested range")]
    AddressRange(String),
    /// A node could not bind its address.
    #[error("node {node}: cannot bind {addr}: {source}")]
    Bind {
        /// Node id.
        node: String,
        /// Address tried.
        addr: SocketAddr,
        /// Bind error.
        source: std::io::Error,
    },
    /// The Nomad endpoint could not bind.
    #[error("Nomad endpoint: cannot bind {addr}: {source}")]
    NomadBind {
        /// Address tried.
        addr: SocketAddr,
        /// Bind error.
        source: std::io::Error,
    },
    /// The threads that evaluate Nomad filters could not be started.
    #[error("Nomad endpoint: cannot start the filter threads: {0}")]
    FilterThreads(#[source] std::io::Error),
    /// The admin endpoint could not bind.
    #[error("admin endpoint: cannot bind {addr}: {source}")]
    AdminBind {
        /// Address tried.
        addr: SocketAddr,
        /// Bind error.
        source: std::io::Error,
    },
}

fn join(errs: &[SpecError]) -> String {
    errs.iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

pub use stampede_node_model::seed::node_seed;

/// State shared by the node servers, the fault book and the admin API.
#[derive(Debug)]
pub struct FleetShared {
    /// Nodes in index order.
    pub nodes: Vec<Arc<NodeRuntime>>,
    /// Each node's Nomad identity and advertised address, in node order.
    pub discovery: Vec<crate::nomad::NomadIdentity>,
    index: BTreeMap<String, usize>,
    /// Faults applied so far.
    pub faults: tokio::sync::Mutex<FaultBook>,
    /// Cancelled at shutdown.
    pub shutdown: CancellationToken,
    /// The seed the fleet was built from.
    pub seed: u64,
}

impl FleetShared {
    /// The node with this id.
    pub fn node(&self, id: &str) -> Option<&Arc<NodeRuntime>> {
        self.index.get(id).map(|&k| &self.nodes[k])
    }

    /// Ground truth of every node, in node order.
    pub fn truth(&self) -> NodesResponse {
        NodesResponse {
            nodes: self
                .nodes
                .iter()
                .zip(&self.discovery)
                .map(|(n, d)| node_truth(n, d.advertised))
                .collect(),
            fleet_seed: Some(self.seed),
        }
    }
}

fn node_truth(node: &NodeRuntime, advertised: SocketAddr) -> NodeTruth {
    let eff = node.effect();
    let mut m = node.model();
    let snap = m.truth(node.clock.now());
    let c = m.counters().clone();
    let status = if eff.killed {
        "killed".to_string()
    } else {
        m.status().as_str().to_string()
    };
    NodeTruth {
        id: node.id.clone(),
        grpc_addr: advertised,
        status,
        service_id: m.service_id().to_string(),
        cpu_count: snap.cpu_count,
        sandbox_count: u64::from(snap.sandboxes_running),
        allocated_vcpu: u64::from(snap.allocated_vcpu),
        baseline_vcpu: u64::from(m.baseline_vcpu()),
        allocated_memory_mib: snap.memory_allocated_bytes >> 20,
        starting: m.starting_count() as u64,
        waiting_for_slot: m.starting_waiters() as u64,
        creates_ok: c.creates_ok,
        creates_rejected: c.creates_rejected,
        creates_failed: c.creates_failed,
        deletes_ok: c.deletes_ok,
        restarts: c.restarts,
        active_faults: eff.fault_ids.iter().map(|i| i.to_string()).collect(),
        sandbox_ids: snap.sandbox_ids,
    }
}

/// A node's gRPC endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEndpoint {
    /// Node id.
    pub id: String,
    /// Bound address.
    pub addr: SocketAddr,
}

/// A running fleet. Dropping it without [`shutdown`](Self::shutdown) leaves tasks running.
#[derive(Debug)]
pub struct FleetHandle {
    shared: Arc<FleetShared>,
    admin_addr: SocketAddr,
    admin: JoinHandle<()>,
    nomad_addr: SocketAddr,
    nomad: JoinHandle<()>,
    stack: StackTask,
}

impl FleetHandle {
    /// The seed the fleet was built from ([`ClusterConfig::fleet_seed`]).
    pub fn fleet_seed(&self) -> u64 {
        self.shared.seed
    }
    /// Base URL of the admin API, e.g. `http://127.0.0.1:4567`.
    pub fn admin_url(&self) -> String {
        format!("http://{}", reachable(self.admin_addr))
    }
    /// Bound address of the admin API.
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }
    /// Base URL of the Nomad-style discovery API (E2B's `NOMAD_ADDRESS`).
    pub fn nomad_url(&self) -> String {
        format!("http://{}", reachable(self.nomad_addr))
    }
    /// Every node's endpoint (its advertised address), in node order.
    pub fn nodes(&self) -> Vec<NodeEndpoint> {
        let nodes = &self.shared.nodes;
        nodes
            .iter()
            .zip(&self.shared.discovery)
            .map(|(n, d)| NodeEndpoint {
                id: n.id.clone(),
                addr: d.advertised,
            })
            .collect()
    }
    /// Every node's Nomad identity, in node order.
    pub fn nomad_identities(&self) -> &[crate::nomad::NomadIdentity] {
        &self.shared.discovery
    }
    /// Ground truth of every node, read in-process (same data as `GET /nodes`).
    pub fn truth(&self) -> NodesResponse {
        self.shared.truth()
    }
    /// Applies a fault in-process (same as `POST /faults`).
    pub async fn apply_fault(&self, req: FaultRequest) -> Result<u64, FaultError> {
        faults::add(&self.shared, req).await
    }
    /// Heals a fault in-process (same as `DELETE /faults/{id}`).
    pub async fn heal_fault(&self, id: u64) -> Result<(), FaultError> {
        faults::remove(&self.shared, id).await
    }
    /// Stops every server and frees every port.
    pub async fn shutdown(self) {
        self.shared.shutdown.cancel();
        let stops = self.shared.nodes.iter().map(|n| n.stop_serving());
        futures::future::join_all(stops).await;
        self.stack.stop().await;
        let _ = self.admin.await;
        let _ = self.nomad.await;
    }
}

fn node_addr(addressing: &Addressing, k: usize) -> Option<SocketAddr> {
    match *addressing {
        Addressing::Ports { ip, base_port: 0 } => Some(SocketAddr::new(ip, 0)),
        Addressing::Ports { ip, base_port } => {
            let port = u16::try_from(usize::from(base_port) + k).ok()?;
            Some(SocketAddr::new(ip, port))
        }
        Addressing::LoopbackIps { port } => {
            let base = u32::from(Ipv4Addr::new(127, 0, 1, 0));
            let ip = base.checked_add(u32::try_from(k + 1).ok()?)?;
            (ip < u32::from(Ipv4Addr::new(127, 255, 255, 255)))
                .then(|| SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port))
        }
    }
}

/// Starts every node and the admin endpoint; returns once all are listening.
pub async fn start(cfg: ClusterConfig, opts: FleetOptions) -> Result<FleetHandle, FleetError> {
    let errs = cfg.validate("cluster");
    if !errs.is_empty() {
        return Err(FleetError::Config(errs));
    }
    if opts.node_id.is_some() && cfg.nodes != 1 {
        return Err(FleetError::NodeIdNeedsOneNode(cfg.nodes));
    }
    if let Some(t) = &opts.admin_token {
        stampede_http_kit::validate_not_blank("the admin token", t.expose())?;
    }
    if !opts.admin_addr.ip().is_loopback() && opts.admin_token.is_none() {
        return Err(FleetError::AdminNotLoopback(opts.admin_addr));
    }
    if !opts.nomad.addr.ip().is_loopback() && opts.admin_token.is_none() {
        return Err(FleetError::NomadNotLoopback(opts.nomad.addr));
    }
    // Started first: nothing else is running yet if the threads cannot start.
    let filters = crate::nomad::filter_threads().map_err(FleetError::FilterThreads)?;
    let clock = FleetClock::start_now();
    let seed = cfg.fleet_seed(0);
    // One server stack for every node; each node only adds its listener.
    let (stack, stack_task) = crate::serve::start(opts.node_limits, cfg.nodes).await;
    let mut listeners = Vec::with_capacity(cfg.nodes);
    let mut nodes = Vec::with_capacity(cfg.nodes);
    let mut free_ports = FreePorts::new();
    let idle = cfg.idle_cpu_percents(seed);
    for (k, &idle_load) in idle.iter().enumerate() {
        let id = match &opts.node_id {
            Some(id) => id.clone(),
            None => cfg.node_id(k),
        };
        let addr =
            node_addr(&opts.addressing, k).ok_or_else(|| FleetError::AddressRange(id.clone()))?;
        let bound = match opts.addressing {
            Addressing::Ports { ip, base_port: 0 } => free_ports.bind(ip),
            _ => TcpListener::bind(addr).await,
        };
        let listener = bound.map_err(|source| FleetError::Bind {
            node: id.clone(),
            addr,
            source,
        })?;
        let bound = listener.local_addr().map_err(|source| FleetError::Bind {
            node: id.clone(),
            addr,
            source,
        })?;
        let model = NodeModel::new(id, cfg.spec_for(k), node_seed(seed, k))
            .with_idle_cpu_percent(idle_load);
        nodes.push(Arc::new(NodeRuntime::new(
            model,
            bound,
            opts.labels.clone(),
            clock,
            stack.clone(),
        )));
        listeners.push(listener);
    }
    let discovery = nodes
        .iter()
        .enumerate()
        .map(|(k, n)| crate::nomad::NomadIdentity {
            node_id: crate::nomad::identity::node_uuid(seed, k),
            name: n.id.clone(),
            advertised: crate::nomad::identity::advertised(n.addr, opts.advertise_ip),
        })
        .collect();
    let index = nodes
        .iter()
        .enumerate()
        .map(|(k, n)| (n.id.clone(), k))
        .collect();
    let shared = Arc::new(FleetShared {
        nodes,
        discovery,
        index,
        faults: tokio::sync::Mutex::new(FaultBook::default()),
        shutdown: CancellationToken::new(),
        seed,
    });
    let admin_listener =
        TcpListener::bind(opts.admin_addr)
            .await
            .map_err(|source| FleetError::AdminBind {
                addr: opts.admin_addr,
                source,
            })?;
    let admin_addr = admin_listener
        .local_addr()
        .map_err(|source| FleetError::AdminBind {
            addr: opts.admin_addr,
            source,
        })?;
    let nomad_listener =
        TcpListener::bind(opts.nomad.addr)
            .await
            .map_err(|source| FleetError::NomadBind {
                addr: opts.nomad.addr,
                source,
            })?;
    let nomad_addr = nomad_listener
        .local_addr()
        .map_err(|source| FleetError::NomadBind {
            addr: opts.nomad.addr,
            source,
        })?;
    for (node, listener) in shared.nodes.iter().zip(listeners) {
        node.serve_on(listener).await;
    }
    let admin = crate::admin::spawn(shared.clone(), admin_listener, opts.admin_token.clone());
    // Exposed beyond loopback, the Nomad API asks for the token as a Nomad agent with
    // ACLs does (`X-Nomad-Token`, which E2B's API sends from `NOMAD_TOKEN`).
    let nomad_token = (!nomad_addr.ip().is_loopback())
        .then(|| opts.admin_token.clone())
        .flatten();
    let nomad = crate::nomad::spawn(
        shared.clone(),
        nomad_listener,
        opts.nomad,
        seed,
        nomad_token,
        filters,
    );
    Ok(FleetHandle {
        shared,
        admin_addr,
        admin,
        nomad_addr,
        nomad,
        stack: stack_task,
    })
}

/// An address clients can dial for a listener bound at `bound`: for a wildcard bind
/// (0.0.0.0 / ::), the host's outbound IP, as nodes are advertised.
fn reachable(bound: SocketAddr) -> SocketAddr {
    crate::nomad::identity::advertised(bound, None)
}
