//! The shared state of one instance: the placement core, the nodes' clients, the
//! sandboxes this instance placed, and telemetry.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use indexmap::IndexMap;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::config::ServeConfig;
use super::node_client::NodeClient;
use super::telemetry::Telemetry;
use stampede_placement::{ChannelCell, Input, NodeStatus, Output, Placer, PlacerConfig, TraceSink};

/// What ServiceInfo says about a node besides the metrics the core keeps.
#[derive(Debug, Clone, Default)]
pub(crate) struct NodeInfo {
    /// `service_id`.
    pub service_id: String,
    /// `service_version`.
    pub version: String,
    /// `service_commit`.
    pub commit: String,
    /// `machine_info`: family, model, model name, architecture.
    pub machine: [String; 4],
    /// `metric_memory_used_bytes`.
    pub memory_used_bytes: u64,
    /// Whether a sync ever succeeded.
    pub synced_once: bool,
    /// Unknown sandboxes at the last sync.
    pub orphans: u64,
    /// Failed syncs.
    pub sync_failures: u64,
    /// Status set through `POST /nodes/{nodeID}`: what the node reports from then on
    /// (E2B sends it to the orchestrator with `ServiceStatusOverride`; the mock nodes'
    /// proto has no such RPC, so this instance keeps it and applies it at each sync).
    pub status_override: Option<NodeStatus>,
    /// The status last seen and when it changed (`statusChangedAt`).
    pub status_seen: Option<(NodeStatus, SystemTime)>,
}

impl NodeInfo {
    /// Note that the node's status is `status` now; the change time moves only when it
    /// differs from the last one seen.
    pub(crate) fn note_status(&mut self, status: NodeStatus) {
        if self.status_seen.is_none_or(|(s, _)| s != status) {
            self.status_seen = Some((status, SystemTime::now()));
        }
    }
}

/// One node: its clients and its ServiceInfo details.
#[derive(Debug)]
pub(crate) struct NodeConn {
    /// Node id.
    pub id: String,
    /// Clients.
    pub client: NodeClient,
    /// The state of the clients' channel, written by their connector, read by the core.
    pub channel: Arc<ChannelCell>,
    /// Details from the last sync.
    pub info: Mutex<NodeInfo>,
}

/// A sandbox this instance placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SandboxRecord {
    /// Node it runs on.
    pub node: String,
    /// Template id.
    pub template_id: String,
    /// vCPU.
    pub vcpu: u32,
    /// Memory, MiB.
    pub ram_mb: u32,
    /// Metadata.
    pub metadata: BTreeMap<String, String>,
    /// Start time.
    pub started_at: SystemTime,
    /// Expiry time.
    pub end_at: SystemTime,
    /// When the create's answer arrived (a sync started later must list the sandbox).
    pub placed_at: Instant,
}

/// Everything the handlers and the sync loop share.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Settings.
    pub cfg: ServeConfig,
    /// The sans-IO placer: core, sampling RNG and open requests (locked briefly, never
    /// across an await).
    pub placer: Mutex<Placer>,
    /// The placer's time origin.
    pub epoch: Instant,
    /// The next request id.
    next_request: AtomicU64,
    /// Sandbox-id RNG, seeded from the same seed on another stream.
    pub id_rng: Mutex<ChaCha8Rng>,
    /// Nodes, in the order given.
    pub nodes: IndexMap<String, NodeConn>,
    /// Sandboxes placed and not deleted/expired.
    pub sandboxes: Mutex<BTreeMap<String, SandboxRecord>>,
    /// Ids of creates in progress (not orphans even if a node lists them). Only looked
    /// up, never iterated: a hash set spares every create two ordered searches.
    pub placing: Mutex<HashSet<String>>,
    /// Ids being killed now (a DELETE or the evictor): out of `sandboxes` already, but
    /// neither orphans nor due for eviction.
    pub removing: Mutex<BTreeSet<String>>,
    /// Ids the evictor took to kill, in order, recorded before their Delete (read by a
    /// harness's set audit through `GET /admin/evicted`, so that it forgives exactly
    /// these).
    pub evicted: Mutex<Vec<String>>,
    /// Paused sandboxes (E2B's snapshots): the record as it was when paused, its `node`
    /// the origin a resume tries first.
    pub paused: Mutex<BTreeMap<String, SandboxRecord>>,
    /// The pauses, resumes, kills and snapshots in flight ([`crate::transition`]).
    pub transitions: crate::transition::Transitions,
    /// The team's snapshot templates (`POST /sandboxes/{id}/snapshots`).
    pub snapshots: Mutex<crate::snapshots::Snapshots>,
    /// Counters.
    pub telemetry: Telemetry,
    /// Serializes syncs so that two never interleave on one node.
    pub sync_lock: tokio::sync::Mutex<()>,
}

impl Shared {
    /// State for `nodes` (already connected lazily).
    pub(crate) fn new(
        cfg: ServeConfig,
        nodes: IndexMap<String, NodeConn>,
        trace: Option<TraceSink>,
    ) -> Self {
        let mut placer = Placer::new(placer_config(&cfg), []);
        for (id, node) in &nodes {
            placer
                .core_mut()
                .add_node_with_channel(id.clone(), node.channel.clone());
        }
        if let Some(sink) = trace {
            placer.record(sink);
        }
        let mut id_rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        id_rng.set_stream(1);
        let snapshots = crate::snapshots::Snapshots::new(cfg.seed);
        Self {
            placer: Mutex::new(placer),
            epoch: Instant::now(),
            next_request: AtomicU64::new(0),
            id_rng: Mutex::new(id_rng),
            cfg,
            nodes,
            sandboxes: Mutex::new(BTreeMap::new()),
            placing: Mutex::new(HashSet::new()),
            removing: Mutex::new(BTreeSet::new()),
            evicted: Mutex::new(Vec::new()),
            paused: Mutex::new(BTreeMap::new()),
            transitions: crate::transition::Transitions::default(),
            snapshots: Mutex::new(snapshots),
            telemetry: Telemetry::default(),
            sync_lock: tokio::sync::Mutex::new(()),
        }
    }

    /// Feed one input to the placer at the current time.
    pub(crate) fn handle(&self, input: Input) -> Option<Output> {
        let mut placer = lock(&self.placer);
        placer.handle(self.now(), input)
    }

    /// Time on the placer's clock.
    pub(crate) fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// An id for a new create request.
    pub(crate) fn next_request(&self) -> u64 {
        self.next_request.fetch_add(1, Ordering::Relaxed)
    }

    /// A fresh sandbox id like E2B's: `i` + 20 lowercase alphanumerics, unused here.
    pub(crate) fn new_sandbox_id(&self) -> String {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        loop {
            let id: String = {
                let mut rng = lock(&self.id_rng);
                std::iter::once('i')
                    .chain(
                        (0..20).map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())])),
                    )
                    .collect()
            };
            let taken = lock(&self.sandboxes).contains_key(&id);
            if !taken && lock(&self.placing).insert(id.clone()) {
                return id;
            }
        }
    }
}

/// The placer settings of an instance.
pub(crate) fn placer_config(cfg: &ServeConfig) -> PlacerConfig {
    PlacerConfig {
        placement: cfg.placement.clone(),
        seed: cfg.seed,
        request_timeout: cfg.request_timeout,
        retry_backoff: cfg.retry_backoff,
        defer_retries: false,
        api_stage: cfg.api_stage.clone(),
    }
}

/// Lock a mutex, recovering the data if a holder panicked (the state stays usable).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
