//! What one placement instance knows about one node: status, last reported metrics,
//! its own accounting, and per-node placement counters.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::accounting::NodeAccounting;
use super::channel::{node_status, ChannelCell, ChannelState};
use super::mode::AccountingMode;

/// Identifier of a node (E2B's `node_id`, e.g. `node-03`).
pub type NodeId = stampede_id::Id;

/// A node's status as E2B's API reports it (`NodeStatus` in `spec/openapi.yml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeStatus {
    /// Healthy: accepts new sandboxes.
    Ready,
    /// Bound to shut down: no new sandboxes.
    Draining,
    /// Not yet synced (or unreachable before its first sync).
    Connecting,
    /// Reported unhealthy, or its last sync failed.
    Unhealthy,
    /// Not in use, may return to ready.
    Standby,
}

impl NodeStatus {
    /// Whether `POST /nodes/{nodeID}` may set it: the statuses with an orchestrator
    /// counterpart (E2B's `nodemanager/status.go`, `ApiNodeToOrchestratorStateMapper`).
    /// `connecting` is derived from the channel state and cannot be pushed.
    pub fn is_settable(self) -> bool {
        self != NodeStatus::Connecting
    }

    /// The REST spelling (`ready`, `draining`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            NodeStatus::Ready => "ready",
            NodeStatus::Draining => "draining",
            NodeStatus::Connecting => "connecting",
            NodeStatus::Unhealthy => "unhealthy",
            NodeStatus::Standby => "standby",
        }
    }
}

impl std::fmt::Display for NodeStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The metrics a node reported in its last sync (`InfoService/ServiceInfo`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeMetrics {
    /// `metric_cpu_allocated`: vCPU allocated to sandboxes.
    pub cpu_allocated: u32,
    /// `metric_cpu_count`.
    pub cpu_count: u32,
    /// `metric_cpu_percent` (100 = one busy core).
    pub cpu_percent: u32,
    /// `metric_memory_allocated_bytes`.
    pub memory_allocated_bytes: u64,
    /// `metric_memory_total_bytes`.
    pub memory_total_bytes: u64,
    /// `metric_sandboxes_running`.
    pub sandboxes_running: u32,
}

/// One node sync as the core consumes it.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncSnapshot {
    /// Status mapped from `service_status`.
    pub status: NodeStatus,
    /// The reported metrics; they overwrite the previous ones.
    pub metrics: NodeMetrics,
    /// `(sandbox id, vcpu)` of every sandbox on the node, from `SandboxService/List` or the
    /// ServiceInfo extension field; `None` when the sync did not provide ids.
    pub sandboxes: Option<Vec<(String, u32)>>,
    /// Ids `SandboxService/List` returned in this sync, when `sandboxes` came from the
    /// ServiceInfo extension instead (the ids behind possibly lagged or frozen metrics).
    /// `reconciled` gives an unconfirmed add up only when the node no longer runs it;
    /// `None` = `sandboxes` is the live list.
    pub listed_now: Option<Vec<String>>,
}

/// Per-node placement counters of this instance (E2B's `createSuccesses`/`createFails`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeCounters {
    /// Creates that succeeded on the node.
    pub create_successes: u64,
    /// Creates that failed with an error other than ResourceExhausted.
    pub create_fails: u64,
    /// Creates refused with ResourceExhausted.
    pub create_refusals: u64,
    /// Syncs applied.
    pub syncs: u64,
}

/// Everything one placement instance knows about one node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeView {
    id: NodeId,
    status: NodeStatus,
    channel: Arc<ChannelCell>,
    metrics: NodeMetrics,
    accounting: NodeAccounting,
    counters: NodeCounters,
}

impl NodeView {
    /// A node not synced yet: `connecting`, zero metrics.
    pub fn new(id: NodeId) -> Self {
        Self {
            id,
            status: NodeStatus::Connecting,
            channel: Arc::default(),
            metrics: NodeMetrics::default(),
            accounting: NodeAccounting::default(),
            counters: NodeCounters::default(),
        }
    }

    /// The node's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Current status: the reported one combined with the channel state
    /// ([`node_status`], E2B's `Node.StatusInfo`).
    pub fn status(&self) -> NodeStatus {
        node_status(self.status, self.channel.get())
    }

    /// The status the node last reported (or a failed sync set), before the channel
    /// state is taken into account.
    pub fn reported_status(&self) -> NodeStatus {
        self.status
    }

    /// The channel's state as the driver last recorded it.
    pub fn channel_state(&self) -> ChannelState {
        self.channel.get()
    }

    /// The cell the driver records the channel state in (shared, lock-free).
    pub fn channel(&self) -> &Arc<ChannelCell> {
        &self.channel
    }

    pub(crate) fn set_channel_cell(&mut self, cell: Arc<ChannelCell>) {
        self.channel = cell;
    }

    /// Metrics of the last applied sync.
    pub fn metrics(&self) -> &NodeMetrics {
        &self.metrics
    }

    /// The accounting state (every mode's bookkeeping).
    pub fn accounting(&self) -> &NodeAccounting {
        &self.accounting
    }

    /// Placement counters.
    pub fn counters(&self) -> &NodeCounters {
        &self.counters
    }

    /// Allocated vCPU `mode` believes the node has.
    pub fn believed_allocated_vcpu(&self, mode: AccountingMode) -> u64 {
        self.accounting.believed(mode)
    }

    /// This instance's creates in progress on the node.
    pub fn in_flight(&self) -> usize {
        self.accounting.in_flight_count()
    }

    pub(crate) fn set_status(&mut self, status: NodeStatus) {
        self.status = status;
    }

    pub(crate) fn apply_sync(&mut self, snap: SyncSnapshot, unseen_limit: u32) {
        self.status = snap.status;
        self.metrics = snap.metrics;
        self.accounting.apply_sync(
            u64::from(snap.metrics.cpu_allocated),
            snap.sandboxes.as_deref(),
            snap.listed_now.as_deref(),
            unseen_limit,
        );
        self.counters.syncs += 1;
    }

    pub(crate) fn accounting_mut(&mut self) -> &mut NodeAccounting {
        &mut self.accounting
    }

    pub(crate) fn counters_mut(&mut self) -> &mut NodeCounters {
        &mut self.counters
    }
}
