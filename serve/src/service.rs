//! Starting and stopping instances: [`start`] for embedding (the `stampede run`
//! orchestrator, tests), [`start_replicas`] for N independent instances.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::arrivals::{ArrivalWindow, Arrivals, RecordArrivalsLayer};
use super::config::{NodeTarget, ServeConfig};
use super::error::ServeError;
use super::evictor::evict_forever;
use super::listen::{serve, ConnTimeouts};
use super::node_client::NodeClient;
use super::nodes_api::node_json;
use super::routes::router;
use super::state::{NodeConn, NodeInfo, Shared};
use super::sync::sync_all;
use crate::counters::ServiceCounters;
use crate::state::lock;
use stampede_placement::{ChannelCell, SyncTimer, TraceSink};

/// A running instance. Dropping it does not stop it: call [`ServiceHandle::shutdown`].
#[derive(Debug)]
pub struct ServiceHandle {
    addr: SocketAddr,
    shared: Arc<Shared>,
    cancel: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    sync_phase: Arc<watch::Sender<Option<Instant>>>,
    arrivals: Arc<Arrivals>,
}

/// Moves one instance's periodic sync; cheap to clone and `'static`, so a harness can
/// hand it to whatever sees its workload's gate open.
#[derive(Debug, Clone)]
pub struct SyncPhaser {
    tx: Arc<watch::Sender<Option<Instant>>>,
    interval: Duration,
}

impl SyncPhaser {
    /// The instance's sync interval.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The next periodic sync comes at `first`, then every interval after it. A harness
    /// aligns it with its workload's gate so that a drill meets the syncs at the same
    /// offsets every run (as the simulator and E2B's placement benchmark do); a
    /// standalone `serve` keeps its start-up phase.
    pub fn next_sync_at(&self, first: Instant) {
        self.tx.send_replace(Some(first));
    }
}

/// Reads one instance's counters as typed values while it runs; cheap to clone.
#[derive(Debug, Clone)]
pub struct TelemetryReader {
    shared: Arc<Shared>,
}

impl TelemetryReader {
    /// Create RPCs refused with ResourceExhausted so far.
    pub fn refusals(&self) -> u64 {
        self.shared
            .telemetry
            .refusals
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Every counter a run reads, as typed values (the storm from its last origin).
    pub fn counters(&self) -> ServiceCounters {
        self.shared.telemetry.counters()
    }

    /// Bin the retry storm from `origin` on (a harness's workload gate), forgetting
    /// what came before.
    pub fn restart_storm(&self, origin: Instant) {
        self.shared.telemetry.storm.restart(origin);
    }
}

impl ServiceHandle {
    /// A reader of this instance's counters.
    pub fn telemetry_reader(&self) -> TelemetryReader {
        TelemetryReader {
            shared: self.shared.clone(),
        }
    }

    /// Base URL, e.g. `http://127.0.0.1:3000`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The settings in use.
    pub fn config(&self) -> &ServeConfig {
        &self.shared.cfg
    }

    /// Sync every node now and wait for it (instead of waiting for the next tick).
    pub async fn sync_now(&self) {
        sync_all(&self.shared).await;
    }

    /// A handle that moves this instance's periodic sync.
    pub fn sync_phaser(&self) -> SyncPhaser {
        SyncPhaser {
            tx: self.sync_phase.clone(),
            interval: self.shared.cfg.sync_interval,
        }
    }

    /// What `GET /nodes` would answer now.
    pub fn nodes(&self) -> Vec<super::rest::NodeJson> {
        node_json(&self.shared)
    }

    /// The Prometheus text `GET /metrics` would answer now.
    pub fn metrics_text(&self) -> String {
        self.shared
            .telemetry
            .render(self.shared.cfg.placement.mode.as_str())
    }

    /// When the creates this instance received arrived (first, last, how many).
    pub fn arrivals(&self) -> ArrivalWindow {
        self.arrivals.window()
    }

    /// Stop serving (in-flight requests finish) and stop the sync loop.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// How long a starting instance waits for the kernel to stamp received segments.
const KERNEL_STAMPS_WITHIN: Duration = Duration::from_secs(2);

/// Start one instance placing on `nodes`, serving on `listen` (port 0 = any free port).
/// The first sync completes before the listener serves requests.
pub async fn start(
    cfg: ServeConfig,
    nodes: Vec<NodeTarget>,
    listen: SocketAddr,
) -> Result<ServiceHandle, ServeError> {
    cfg.validate_credentials(listen)?;
    let mut problems: Vec<String> = cfg
        .placement
        .validate()
        .iter()
        .map(ToString::to_string)
        .collect();
    if cfg.header_read_timeout.is_zero()
        || cfg.idle_timeout.is_zero()
        || cfg.body_read_timeout.is_zero()
    {
        problems.push("the header-read, body-read and idle timeouts must be above zero".into());
    }
    if cfg.max_connections == 0 {
        problems.push("max_connections must be at least 1".into());
    }
    if !problems.is_empty() {
        return Err(ServeError::Config(problems.join("; ")));
    }
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(ServeError::Server)?;
    if !super::rx_stamp::stamp_listener(&listener, KERNEL_STAMPS_WITHIN).await {
        tracing::warn!(%addr, "no kernel receive timestamps: create arrivals are stamped when read");
    }
    let conns = connect_all(&cfg, nodes).await?;
    let trace = match &cfg.placement_trace {
        Some(path) => {
            let file = std::fs::File::create(path).map_err(|source| ServeError::Trace {
                path: path.clone(),
                source,
            })?;
            Some(TraceSink::new(Box::new(std::io::BufWriter::new(file))))
        }
        None => None,
    };
    let shared = Arc::new(Shared::new(cfg, conns, trace));
    sync_all(&shared).await;

    let cancel = CancellationToken::new();
    let arrivals = Arc::new(Arrivals::new());
    let app = router(shared.clone()).layer(RecordArrivalsLayer::new(arrivals.clone()));
    let timeouts = ConnTimeouts {
        header_read: shared.cfg.header_read_timeout,
        idle: shared.cfg.idle_timeout,
        body_read: shared.cfg.body_read_timeout,
    };
    let cap = stampede_http_kit::ConnectionCap::new(shared.cfg.max_connections);
    if cap.limit() < shared.cfg.max_connections {
        tracing::warn!(
            connections = cap.limit(),
            wanted = shared.cfg.max_connections,
            "placement service: the descriptor limit caps connections below max_connections"
        );
    }
    // Creates in progress end within their deadline; let their answers go out.
    let grace = shared.cfg.request_timeout + Duration::from_secs(1);
    let server = tokio::spawn(serve(listener, app, timeouts, cap, cancel.clone(), grace));
    let (sync_phase, phase) = watch::channel(None);
    let sync_loop = tokio::spawn(sync_forever(shared.clone(), phase, cancel.clone()));
    let mut tasks = vec![server, sync_loop];
    if shared.cfg.evictor {
        tasks.push(tokio::spawn(evict_forever(shared.clone(), cancel.clone())));
    }
    tracing::info!(%addr, mode = %shared.cfg.placement.mode, nodes = shared.nodes.len(), "placement service ready");
    Ok(ServiceHandle {
        addr,
        shared,
        cancel,
        tasks,
        sync_phase: Arc::new(sync_phase),
        arrivals,
    })
}

/// Start `n` independent instances (own state each; seeds `seed + i`) on consecutive
/// ports from `listen` (or each on a free port when `listen` has port 0).
pub async fn start_replicas(
    cfg: ServeConfig,
    nodes: Vec<NodeTarget>,
    listen: SocketAddr,
    n: usize,
) -> Result<Vec<ServiceHandle>, ServeError> {
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let mut at = listen;
        if listen.port() != 0 {
            let port = u16::try_from(usize::from(listen.port()) + i).map_err(|_| {
                ServeError::Config(format!("replica {i} has no port above {}", listen.port()))
            })?;
            at.set_port(port);
        }
        let replica_cfg = ServeConfig {
            seed: cfg.seed.wrapping_add(i as u64),
            placement_trace: cfg.placement_trace.as_ref().map(|p| match n {
                1 => p.clone(),
                _ => {
                    let mut name = p.clone().into_os_string();
                    name.push(format!(".{i}"));
                    name.into()
                }
            }),
            ..cfg.clone()
        };
        match start(replica_cfg, nodes.clone(), at).await {
            Ok(h) => handles.push(h),
            Err(e) => {
                for h in handles {
                    h.shutdown().await;
                }
                return Err(e);
            }
        }
    }
    Ok(handles)
}

/// Syncs every node when the placer's timer says so: this loop only keeps time. The
/// first periodic sync comes one interval after start-up, unless a harness moves it.
async fn sync_forever(
    shared: Arc<Shared>,
    mut phase: watch::Receiver<Option<Instant>>,
    cancel: CancellationToken,
) {
    let interval = shared.cfg.sync_interval;
    let first = shared.now().saturating_add(interval);
    lock(&shared.placer).start_syncs(SyncTimer::new(interval, first));
    let mut phased = true;
    loop {
        let due = lock(&shared.placer).poll_timeout();
        // A timer past the clock's range never fires: wait for the phase or the end.
        let wake = due.and_then(|d| shared.epoch.checked_add(d));
        tokio::select! {
            _ = cancel.cancelled() => return,
            changed = phase.changed(), if phased => match changed {
                Ok(()) => {
                    if let Some(first) = *phase.borrow_and_update() {
                        let first = first.saturating_duration_since(shared.epoch);
                        lock(&shared.placer).reset_syncs(first);
                    }
                }
                Err(_) => phased = false,
            },
            _ = sleep_until(wake) => {
                let sync = lock(&shared.placer).handle_timeout(shared.now());
                if sync {
                    sync_all(&shared).await;
                }
            }
        }
    }
}

/// Sleeps until `at`, or for ever without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// Clients for every target; an id-less target is named by its ServiceInfo `node_id`
/// (or its address when it does not answer).
async fn connect_all(
    cfg: &ServeConfig,
    nodes: Vec<NodeTarget>,
) -> Result<IndexMap<String, NodeConn>, ServeError> {
    let mut conns = IndexMap::new();
    for target in nodes {
        let channel = Arc::new(ChannelCell::default());
        let client = NodeClient::new(&target.addr, cfg.rpc_timeout, channel.clone())?;
        let id = match target.id {
            Some(id) => id,
            None => match client.service_info(cfg.rpc_timeout).await {
                Ok(info) if !info.node_id.is_empty() => info.node_id,
                _ => target.addr.clone(),
            },
        };
        if conns.contains_key(&id) {
            return Err(ServeError::Config(format!("node id `{id}` given twice")));
        }
        conns.insert(
            id.clone(),
            NodeConn {
                id,
                client,
                channel,
                info: std::sync::Mutex::new(NodeInfo {
                    status_seen: Some((
                        stampede_placement::NodeStatus::Connecting,
                        std::time::SystemTime::now(),
                    )),
                    ..NodeInfo::default()
                }),
            },
        );
    }
    Ok(conns)
}
