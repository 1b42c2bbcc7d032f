//! JSON bodies of the REST surface, named and shaped as in E2B's `spec/openapi.yml`
//! (`NewSandbox`, `Sandbox`, `ListedSandbox`, `Node`, `NodeDetail`, `NodeMetrics`).
//! Both directions derive, so tests and the collector read what the service writes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `POST /sandboxes` body. Every property of E2B's `NewSandbox` that stampede's
/// OpenAPI document lists is type-checked as the spec says (none may be `null`); the
/// ones stampede does not act on are accepted and ignored, as are unlisted properties.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSandbox {
    /// Template to start (required; `[namespace/]name[:tag]` as E2B parses it).
    #[serde(rename = "templateID")]
    pub template_id: String,
    /// Time to live in seconds (`int32`, at least 0). Default
    /// [`DEFAULT_SANDBOX_TIMEOUT`](crate::config::DEFAULT_SANDBOX_TIMEOUT) (E2B's).
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub timeout: Option<u32>,
    /// Sandbox metadata, echoed in listings.
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub metadata: Option<BTreeMap<String, String>>,
    /// Environment variables (ignored: no sandbox runs).
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub env_vars: Option<BTreeMap<String, String>>,
    /// Pause instead of kill at the timeout (ignored: the evictor kills).
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub auto_pause: Option<bool>,
    /// Snapshot kind of an auto-pause (ignored).
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub auto_pause_memory: Option<bool>,
    /// Secure envd access (ignored).
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub secure: Option<bool>,
    /// Internet access (ignored).
    #[serde(
        default,
        rename = "allow_internet_access",
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub allow_internet_access: Option<bool>,
    /// stampede extension: vCPU of the sandbox (E2B takes it from the template).
    #[serde(
        default,
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub cpu_count: Option<u32>,
    /// stampede extension: memory of the sandbox in MiB.
    #[serde(
        default,
        rename = "memoryMB",
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub memory_mb: Option<u32>,
    /// The rest of E2B's `NewSandbox` (network, IAM, auto-resume, MCP, volume mounts):
    /// type-checked as the spec says, then ignored.
    #[serde(flatten)]
    pub extras: crate::new_sandbox_schema::NewSandboxExtras,
}

/// A present property must hold a value: `null` is not one where the spec does not say
/// `nullable`.
fn non_null<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// `POST /nodes/{nodeID}` body (E2B `NodeStatusChange`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NodeStatusChange {
    /// The status to set.
    pub status: stampede_placement::NodeStatus,
    /// Cluster of the node (a UUID); absent = the local cluster.
    #[serde(
        default,
        rename = "clusterID",
        deserialize_with = "non_null",
        skip_serializing_if = "Option::is_none"
    )]
    pub cluster_id: Option<String>,
}

/// `201` answer of a create (E2B `Sandbox`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Sandbox {
    /// Template the sandbox was created from.
    #[serde(rename = "templateID")]
    pub template_id: String,
    /// The sandbox id (`i` + 20 lowercase alphanumerics, as E2B).
    #[serde(rename = "sandboxID")]
    pub sandbox_id: String,
    /// Alias of the template (absent: stampede has no aliases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// Deprecated upstream; E2B's constant `6532622b`.
    #[serde(rename = "clientID")]
    pub client_id: String,
    /// Version of envd (fixed).
    #[serde(rename = "envdVersion")]
    pub envd_version: String,
    /// Base domain of the sandbox traffic; `null` (no proxy behind stampede).
    #[serde(default)]
    pub domain: Option<String>,
}

/// One entry of `GET /sandboxes` (E2B `ListedSandbox`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ListedSandbox {
    /// Template id.
    #[serde(rename = "templateID")]
    pub template_id: String,
    /// Template alias, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// Sandbox id.
    #[serde(rename = "sandboxID")]
    pub sandbox_id: String,
    /// Deprecated upstream; see [`Sandbox::client_id`].
    #[serde(rename = "clientID")]
    pub client_id: String,
    /// RFC 3339 start time.
    #[serde(rename = "startedAt")]
    pub started_at: String,
    /// RFC 3339 expiry time.
    #[serde(rename = "endAt")]
    pub end_at: String,
    /// vCPU.
    #[serde(rename = "cpuCount")]
    pub cpu_count: u32,
    /// Memory, MiB.
    #[serde(rename = "memoryMB")]
    pub memory_mb: u32,
    /// Disk, MiB (0: not modelled).
    #[serde(rename = "diskSizeMB")]
    pub disk_size_mb: u32,
    /// Metadata given at create.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// `running` or `paused`.
    pub state: String,
    /// Version of envd.
    #[serde(rename = "envdVersion")]
    pub envd_version: String,
    /// stampede extension: the node the sandbox was placed on.
    #[serde(rename = "nodeID", default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
}

/// E2B `NodeMetrics`, with `allocatedCPU` = what this instance believes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeMetricsJson {
    /// Allocated vCPU as this instance's accounting mode believes it.
    #[serde(rename = "allocatedCPU")]
    pub allocated_cpu: u64,
    /// Reported `metric_cpu_percent`.
    pub cpu_percent: u32,
    /// Reported `metric_cpu_count`.
    pub cpu_count: u32,
    /// Reported `metric_memory_allocated_bytes`.
    pub allocated_memory_bytes: u64,
    /// Reported `metric_memory_used_bytes`.
    pub memory_used_bytes: u64,
    /// Reported `metric_memory_total_bytes`.
    pub memory_total_bytes: u64,
    /// Disks (not modelled: empty).
    #[serde(default)]
    pub disks: Vec<serde_json::Value>,
    /// Preallocated hugepages. The orchestrator proto stampede's nodes speak has no
    /// hugepage metrics (E2B's fields 114-117), so 0, as a node without hugepages.
    pub huge_pages_total: u64,
    /// Hugepages in use (0, see [`huge_pages_total`](Self::huge_pages_total)).
    pub huge_pages_used: u64,
    /// Hugepages reserved (0, see [`huge_pages_total`](Self::huge_pages_total)).
    pub huge_pages_reserved: u64,
    /// Size of one hugepage (0, see [`huge_pages_total`](Self::huge_pages_total)).
    pub huge_page_size_bytes: u64,
}

/// E2B `MachineInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineInfoJson {
    /// CPU family.
    pub cpu_family: String,
    /// CPU model.
    pub cpu_model: String,
    /// CPU model name.
    pub cpu_model_name: String,
    /// CPU architecture.
    pub cpu_architecture: String,
}

/// stampede's per-node placement telemetry, an extra object in `Node`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementTelemetry {
    /// Accounting mode of this instance.
    pub accounting: String,
    /// `metric_cpu_allocated` of the last sync.
    #[serde(rename = "reportedAllocatedCPU")]
    pub reported_allocated_cpu: u64,
    /// Allocated vCPU every mode would believe now, by mode name.
    #[serde(rename = "believedAllocatedCPU")]
    pub believed_allocated_cpu: BTreeMap<String, u64>,
    /// Creates refused by the node with ResourceExhausted.
    pub create_refusals: u64,
    /// Sandboxes the node ran at the last sync that this instance does not know.
    pub orphans: u64,
    /// Syncs applied (failed ones not counted).
    pub syncs: u64,
    /// Syncs that failed.
    pub sync_failures: u64,
    /// State of the gRPC channel to the node (`idle`, `connecting`, `ready`,
    /// `transient_failure`, `shutdown`); with a reported `ready` it decides `status`.
    pub channel: String,
}

/// One entry of `GET /nodes` (E2B `Node`), also the `GET /nodes/{nodeID}` answer (with
/// `cachedBuilds`, as E2B's `NodeDetail`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeJson {
    /// Node id.
    pub id: String,
    /// Orchestrator's `service_id` (changes when it restarts).
    #[serde(rename = "serviceInstanceID")]
    pub service_instance_id: String,
    /// Cluster id (empty: single cluster).
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    /// `ready` | `draining` | `connecting` | `unhealthy` | `standby`.
    pub status: String,
    /// RFC 3339 time this instance saw the status change.
    pub status_changed_at: String,
    /// Sandboxes this instance placed on the node and still tracks.
    pub sandbox_count: u64,
    /// Metrics; `allocatedCPU` is this instance's belief.
    pub metrics: NodeMetricsJson,
    /// Creates this instance completed on the node.
    pub create_successes: u64,
    /// Creates that failed on the node (not counting ResourceExhausted).
    pub create_fails: u64,
    /// This instance's creates in progress on the node.
    pub sandbox_starting_count: u64,
    /// Orchestrator version.
    pub version: String,
    /// Orchestrator commit.
    pub commit: String,
    /// Machine info.
    pub machine_info: MachineInfoJson,
    /// `NodeDetail` only: cached builds (not modelled: empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_builds: Option<Vec<String>>,
    /// stampede extension: placement telemetry.
    #[serde(default)]
    pub stampede: PlacementTelemetry,
}

/// `GET /admin/evicted` answer: the ids the service's evictor killed, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvictedIds {
    /// Sandbox ids, each once.
    #[serde(rename = "sandboxIDs")]
    pub sandbox_ids: Vec<String>,
}
