//! The `cluster:` section: how many virtual nodes, and the model each one follows.
//!
//! The same struct tree is read by `mock-node --config FILE.yaml` and embedded in
//! stampede run profiles, so a fleet described once behaves the same everywhere.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The seeded latency distributions (node create and delete latencies), shared with the
/// placement core's API stage.
pub use stampede_dist::LatencyDist;

/// A fleet of virtual orchestrator nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// Number of virtual nodes, named `node-00`, `node-01`, ... Default 10.
    pub nodes: usize,
    /// Seed of every random choice the fleet makes (latency, failures, baselines).
    /// In a run profile, absent means "derive from the profile's `seed`". Default none (0).
    pub seed: Option<u64>,
    /// Model every node follows unless overridden.
    pub node: NodeSpec,
    /// Per-node overrides, keyed by node id (`node-03`). Only the fields given change.
    pub overrides: BTreeMap<String, NodeOverride>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            nodes: 10,
            seed: None,
            node: NodeSpec::default(),
            overrides: BTreeMap::new(),
        }
    }
}

impl ClusterConfig {
    /// Id of node `k` (`node-00`, `node-01`, ...; wider when there are over 100 nodes).
    pub fn node_id(&self, k: usize) -> String {
        node_id(k, self.nodes)
    }

    /// The effective spec of node `k`: the shared model with that node's override applied.
    pub fn spec_for(&self, k: usize) -> NodeSpec {
        let id = self.node_id(k);
        match self.overrides.get(&id) {
            Some(o) => o.apply(&self.node),
            None => self.node.clone(),
        }
    }

    /// The seed the fleet is built from: `cluster.seed` when given, else the run
    /// profile's top-level `seed` (0 for a bare cluster file or no profile). The one
    /// rule `mock-node --config`, `stampede sim` and an embedded run share, so that one
    /// profile builds one fleet everywhere.
    pub fn fleet_seed(&self, profile_seed: u64) -> u64 {
        self.seed.unwrap_or(profile_seed)
    }

    /// Each node's background host load ([`NodeSpec::idle_cpu_percent`]), from
    /// `cluster_seed`: nodes sharing a range draw distinct values while the range has
    /// one for each of them, else independently.
    pub fn idle_cpu_percents(&self, cluster_seed: u64) -> Vec<u32> {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(cluster_seed ^ 0x1D1E_C0DE_5EED_0001);
        let specs: Vec<VcpuRange> = (0..self.nodes)
            .map(|k| self.spec_for(k).idle_cpu_percent)
            .collect();
        let mut sharing: BTreeMap<(u32, u32), usize> = BTreeMap::new();
        for r in &specs {
            *sharing.entry((r.min, r.max)).or_default() += 1;
        }
        let mut used: BTreeMap<(u32, u32), std::collections::BTreeSet<u32>> = BTreeMap::new();
        specs
            .iter()
            .map(|r| {
                if r.max <= r.min {
                    return r.min;
                }
                let key = (r.min, r.max);
                let distinct = u64::from(r.max - r.min) + 1 >= sharing[&key] as u64;
                let taken = used.entry(key).or_default();
                loop {
                    let v = rng.random_range(r.min..=r.max);
                    // Terminates: while `distinct`, fewer values are taken than exist.
                    if !distinct || taken.insert(v) {
                        return v;
                    }
                }
            })
            .collect()
    }

    /// Ids named in `overrides` that are not nodes of this cluster (a likely typo).
    pub fn unknown_override_ids(&self) -> Vec<String> {
        let ids: Vec<String> = (0..self.nodes).map(|k| self.node_id(k)).collect();
        self.overrides
            .keys()
            .filter(|k| !ids.contains(k))
            .cloned()
            .collect()
    }
}

/// Id of node `k` in a fleet of `n`: two digits at least, more when `n` needs them.
pub fn node_id(k: usize, n: usize) -> String {
    let width = n.saturating_sub(1).max(1).to_string().len().max(2);
    format!("node-{k:0width$}")
}

/// The model of one orchestrator node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct NodeSpec {
    /// vCPUs the node reports (`metric_cpu_count`). Must be > 0. Default 16. A create
    /// asking for more vCPU than this is InvalidArgument.
    pub cpu_count: u32,
    /// Memory in MiB (`metric_memory_total_bytes`). Default 65536. A create asking for
    /// more `ram_mb` than this is InvalidArgument.
    pub memory_mib: u64,
    /// Create is refused when allocated + requested vCPU > `overcommit` * `cpu_count`.
    /// 0 disables the rule. Default 0: a real orchestrator refuses only at
    /// `max_sandboxes` and `max_starting` (`packages/orchestrator/pkg/server/sandboxes.go`);
    /// E2B's placement benchmark node (LaggyNode) refuses beyond 4 x cpu_count.
    pub overcommit: f64,
    /// Running sandboxes at which Create is refused (E2B `max-sandboxes-per-node`). Default 200.
    pub max_sandboxes: u32,
    /// Creates in progress at which Create is refused (E2B
    /// `max-starting-instances-per-node`); 0 = unlimited. Default 3.
    pub max_starting: u32,
    /// Time a Create takes. Default constant 1ms.
    pub create_latency: LatencyDist,
    /// Time a Delete takes. Default constant 0ms.
    pub delete_latency: LatencyDist,
    /// Injected RPC failures, each drawn independently per call. Default none.
    pub failures: Vec<FailureRule>,
    /// Allocated vCPU already on the node at start (not sandboxes of this run), drawn
    /// uniformly in `[min, max]` per node. Default 0..0.
    pub baseline_vcpu: VcpuRange,
    /// Fraction of allocated vCPU that is busy, for `metric_cpu_percent`. Default 0.5.
    pub busy_fraction: f64,
    /// How `metric_cpu_percent` is computed from the busy CPUs. Default `host`.
    pub cpu_percent: CpuPercentModel,
    /// Background load added to `metric_cpu_percent` (in the figure's own unit: percent
    /// of the host under `host`), drawn per node in `[min, max]`. A fleet draws it without
    /// replacement among the nodes that share the range, while the range has a value for
    /// each, so no two default nodes report the same figure: real hosts never do, and
    /// Best-of-K's order between equally allocated nodes rests on it. Default 1..20, an
    /// assumption (an idle orchestrator host runs the orchestrator, its Nomad and Consul
    /// agents and exporters; E2B publishes no figure). E2B's benchmark has none: 0..0.
    pub idle_cpu_percent: VcpuRange,
    /// How often the node resamples `metric_cpu_percent`; ServiceInfo reports the last
    /// sample, while the allocated vCPU and counts stay live. Default 10s, E2B's
    /// `hostPollInterval` (`packages/orchestrator/pkg/metrics/host.go`); each node's
    /// ticks start at a seeded phase. 0 = live (E2B's benchmark pushes it with each
    /// heartbeat).
    #[serde(with = "humantime_serde")]
    #[schemars(with = "String")]
    pub cpu_percent_period: Duration,
    /// ServiceInfo serves a snapshot refreshed every `metrics_lag`; 0 = live. Default 0s.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "String")]
    pub metrics_lag: Duration,
    /// The orchestrator's own deadline on a Create, from the moment it reaches the node
    /// (a `slow` fault's delay included, a `hang` not): past it the create fails with
    /// INTERNAL and its starting slot is freed, so the API excludes the node and retries
    /// elsewhere. Default [`DEFAULT_CREATE_TIMEOUT`].
    #[serde(with = "humantime_serde")]
    #[schemars(with = "String")]
    pub create_timeout: Duration,
    /// How long a Create from a snapshot (a resume or a fork, `snapshot = true`) waits
    /// for a starting slot when `max_starting` are busy, before ResourceExhausted; a
    /// fresh create is refused at once, and so is any create at `max_sandboxes`.
    /// Default [`DEFAULT_RESUME_ACQUIRE_TIMEOUT`].
    #[serde(with = "humantime_serde")]
    #[schemars(with = "String")]
    pub resume_acquire_timeout: Duration,
}

/// Default [`NodeSpec::resume_acquire_timeout`]: 15 s, E2B's `acquireTimeout` in
/// `packages/orchestrator/pkg/server/sandboxes.go` (`waitForAcquire` in
/// `packages/orchestrator/pkg/server/utils.go`, used by a snapshot Create and by
/// Checkpoint).
pub const DEFAULT_RESUME_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(15);

/// Default [`NodeSpec::create_timeout`]: 60 s, E2B's `requestTimeout` in
/// `packages/orchestrator/pkg/server/sandboxes.go` (the Create handler's context; when
/// it fires the sandbox start fails and the handler answers `codes.Internal`).
pub const DEFAULT_CREATE_TIMEOUT: Duration = Duration::from_secs(60);

impl Default for NodeSpec {
    fn default() -> Self {
        Self {
            cpu_count: 16,
            memory_mib: 65536,
            overcommit: 0.0,
            max_sandboxes: 200,
            max_starting: 3,
            create_latency: LatencyDist::Constant {
                value: Duration::from_millis(1),
            },
            delete_latency: LatencyDist::Constant {
                value: Duration::ZERO,
            },
            failures: Vec::new(),
            baseline_vcpu: VcpuRange::default(),
            busy_fraction: 0.5,
            cpu_percent: CpuPercentModel::default(),
            idle_cpu_percent: VcpuRange { min: 1, max: 20 },
            cpu_percent_period: Duration::from_secs(10),
            metrics_lag: Duration::ZERO,
            create_timeout: DEFAULT_CREATE_TIMEOUT,
            resume_acquire_timeout: DEFAULT_RESUME_ACQUIRE_TIMEOUT,
        }
    }
}

/// Per-node override of a [`NodeSpec`]: every field optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct NodeOverride {
    /// See [`NodeSpec::cpu_count`].
    pub cpu_count: Option<u32>,
    /// See [`NodeSpec::memory_mib`].
    pub memory_mib: Option<u64>,
    /// See [`NodeSpec::overcommit`].
    pub overcommit: Option<f64>,
    /// See [`NodeSpec::max_sandboxes`].
    pub max_sandboxes: Option<u32>,
    /// See [`NodeSpec::max_starting`].
    pub max_starting: Option<u32>,
    /// See [`NodeSpec::create_latency`].
    pub create_latency: Option<LatencyDist>,
    /// See [`NodeSpec::delete_latency`].
    pub delete_latency: Option<LatencyDist>,
    /// See [`NodeSpec::failures`].
    pub failures: Option<Vec<FailureRule>>,
    /// See [`NodeSpec::baseline_vcpu`].
    pub baseline_vcpu: Option<VcpuRange>,
    /// See [`NodeSpec::busy_fraction`].
    pub busy_fraction: Option<f64>,
    /// See [`NodeSpec::cpu_percent`].
    pub cpu_percent: Option<CpuPercentModel>,
    /// See [`NodeSpec::idle_cpu_percent`].
    pub idle_cpu_percent: Option<VcpuRange>,
    /// See [`NodeSpec::cpu_percent_period`].
    #[serde(with = "humantime_serde")]
    #[schemars(with = "Option<String>")]
    pub cpu_percent_period: Option<Duration>,
    /// See [`NodeSpec::metrics_lag`].
    #[serde(with = "humantime_serde")]
    #[schemars(with = "Option<String>")]
    pub metrics_lag: Option<Duration>,
    /// See [`NodeSpec::create_timeout`].
    #[serde(with = "humantime_serde")]
    #[schemars(with = "Option<String>")]
    pub create_timeout: Option<Duration>,
    /// See [`NodeSpec::resume_acquire_timeout`].
    #[serde(with = "humantime_serde")]
    #[schemars(with = "Option<String>")]
    pub resume_acquire_timeout: Option<Duration>,
}

impl NodeOverride {
    /// `base` with every field this override sets replaced.
    pub fn apply(&self, base: &NodeSpec) -> NodeSpec {
        let b = base.clone();
        NodeSpec {
            cpu_count: self.cpu_count.unwrap_or(b.cpu_count),
            memory_mib: self.memory_mib.unwrap_or(b.memory_mib),
            overcommit: self.overcommit.unwrap_or(b.overcommit),
            max_sandboxes: self.max_sandboxes.unwrap_or(b.max_sandboxes),
            max_starting: self.max_starting.unwrap_or(b.max_starting),
            create_latency: self.create_latency.clone().unwrap_or(b.create_latency),
            delete_latency: self.delete_latency.clone().unwrap_or(b.delete_latency),
            failures: self.failures.clone().unwrap_or(b.failures),
            baseline_vcpu: self.baseline_vcpu.unwrap_or(b.baseline_vcpu),
            busy_fraction: self.busy_fraction.unwrap_or(b.busy_fraction),
            cpu_percent: self.cpu_percent.unwrap_or(b.cpu_percent),
            idle_cpu_percent: self.idle_cpu_percent.unwrap_or(b.idle_cpu_percent),
            cpu_percent_period: self.cpu_percent_period.unwrap_or(b.cpu_percent_period),
            metrics_lag: self.metrics_lag.unwrap_or(b.metrics_lag),
            create_timeout: self.create_timeout.unwrap_or(b.create_timeout),
            resume_acquire_timeout: self
                .resume_acquire_timeout
                .unwrap_or(b.resume_acquire_timeout),
        }
    }
}

/// How a node turns its busy CPUs into `metric_cpu_percent` (ServiceInfo field 105).
///
/// Busy CPUs are `idle_cpu_percent / 100` plus `busy_fraction` of the vCPU allocated.
/// Best-of-K reads the figure as CPUs x 100 (`usageAvg := CpuPercent / 100` in E2B's
/// `placement_best_of_K.go`); a real orchestrator reports gopsutil's aggregate host
/// figure (`cpu.Percent(0, false)`, 0-100 over all CPUs; `pkg/metrics/host.go`), so the two
/// units differ by `cpu_count`, and the usage term weighs far less on a real cluster than in
/// E2B's benchmark.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CpuPercentModel {
    /// A real orchestrator: 100 x busy CPUs / `cpu_count` over the whole host (baseline
    /// allocation included), at most 100.
    #[default]
    Host,
    /// E2B's placement benchmark (LaggyNode): 100 per busy vCPU of this node's running
    /// sandboxes (`ActualCPUUsage x 100` summed), baseline allocation not counted, no cap.
    PerSandbox,
}

/// An inclusive range of whole numbers (vCPUs, or CPU percent for `idle_cpu_percent`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct VcpuRange {
    /// Lowest value drawn.
    pub min: u32,
    /// Highest value drawn (inclusive).
    pub max: u32,
}

/// Which RPC a failure rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RpcKind {
    /// `SandboxService/Create`.
    Create,
    /// `SandboxService/Delete`.
    Delete,
    /// `SandboxService/List`.
    List,
    /// `InfoService/ServiceInfo`.
    ServiceInfo,
    /// Every RPC above.
    Any,
}

/// gRPC status codes a failure rule may inject, named in kebab-case like fault kinds
/// (`resource-exhausted`). The snake_case spellings of earlier versions
/// (`resource_exhausted`) are still read, with a deprecation warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FailureCode {
    /// UNAVAILABLE.
    Unavailable,
    /// INTERNAL.
    Internal,
    /// RESOURCE_EXHAUSTED.
    ResourceExhausted,
    /// DEADLINE_EXCEEDED.
    DeadlineExceeded,
    /// UNKNOWN.
    Unknown,
}

/// The names of [`FailureCode`]s, in the order of the enum.
const FAILURE_CODE_NAMES: [&str; 5] = [
    "unavailable",
    "internal",
    "resource-exhausted",
    "deadline-exceeded",
    "unknown",
];

impl FailureCode {
    /// Every code, in the order of the enum.
    pub const ALL: [FailureCode; 5] = [
        Self::Unavailable,
        Self::Internal,
        Self::ResourceExhausted,
        Self::DeadlineExceeded,
        Self::Unknown,
    ];

    /// The kebab-case name used in profiles and on the admin API.
    pub fn as_str(self) -> &'static str {
        FAILURE_CODE_NAMES[self as usize]
    }

    /// The code named `name`, and whether `name` is a deprecated snake_case spelling.
    pub fn parse(name: &str) -> Option<(FailureCode, bool)> {
        let kebab = name.replace('_', "-");
        let code = Self::ALL.into_iter().find(|c| c.as_str() == kebab)?;
        Some((code, kebab != name))
    }
}

impl<'de> Deserialize<'de> for FailureCode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        match FailureCode::parse(&name) {
            Some((code, deprecated)) => {
                if deprecated {
                    tracing::warn!(
                        "error code `{name}` is deprecated: write `{}` (kebab-case, like \
                         fault kinds)",
                        code.as_str()
                    );
                }
                Ok(code)
            }
            None => Err(serde::de::Error::unknown_variant(
                &name,
                &FAILURE_CODE_NAMES,
            )),
        }
    }
}

/// Fail a fraction of calls of one RPC with a given code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FailureRule {
    /// The RPC the rule applies to.
    pub rpc: RpcKind,
    /// Probability in `[0, 1]` that a call fails.
    pub probability: f64,
    /// Status code returned.
    pub code: FailureCode,
}

/// A problem with a cluster section, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct SpecError {
    /// Dotted path of the bad field, e.g. `cluster.node.cpu_count`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl ClusterConfig {
    /// Every semantic problem of the section (types are checked by serde already);
    /// `prefix` is prepended to field paths (`cluster` in a run profile).
    pub fn validate(&self, prefix: &str) -> Vec<SpecError> {
        let mut errs = Vec::new();
        if self.nodes == 0 {
            errs.push(err(prefix, "nodes", "must be at least 1"));
        }
        for id in self.unknown_override_ids() {
            errs.push(err(
                prefix,
                &format!("overrides.{id}"),
                "no such node in this cluster",
            ));
        }
        self.node
            .validate_into(&join_path(prefix, "node"), &mut errs);
        for (id, o) in &self.overrides {
            o.apply(&self.node)
                .validate_into(&join_path(prefix, &format!("overrides.{id}")), &mut errs);
        }
        errs
    }
}

impl NodeSpec {
    fn validate_into(&self, path: &str, errs: &mut Vec<SpecError>) {
        if self.cpu_count == 0 {
            errs.push(err(path, "cpu_count", "must be > 0"));
        }
        if self.create_timeout.is_zero() {
            errs.push(err(path, "create_timeout", "must be > 0"));
        }
        if !(self.overcommit >= 0.0 && self.overcommit.is_finite()) {
            errs.push(err(path, "overcommit", "must be a finite number >= 0"));
        }
        if !(0.0..=1.0).contains(&self.busy_fraction) {
            errs.push(err(path, "busy_fraction", "must be in [0, 1]"));
        }
        if self.baseline_vcpu.min > self.baseline_vcpu.max {
            errs.push(err(path, "baseline_vcpu", "min must be <= max"));
        }
        if self.idle_cpu_percent.min > self.idle_cpu_percent.max {
            errs.push(err(path, "idle_cpu_percent", "min must be <= max"));
        }
        for (name, d) in [
            ("create_latency", &self.create_latency),
            ("delete_latency", &self.delete_latency),
        ] {
            if let Err(m) = d.check() {
                errs.push(err(path, name, &m));
            }
        }
        for (i, f) in self.failures.iter().enumerate() {
            if !(0.0..=1.0).contains(&f.probability) {
                errs.push(err(
                    path,
                    &format!("failures[{i}].probability"),
                    "must be in [0, 1]",
                ));
            }
        }
    }
}

fn join_path(prefix: &str, field: &str) -> String {
    if prefix.is_empty() {
        field.to_string()
    } else {
        format!("{prefix}.{field}")
    }
}

fn err(prefix: &str, field: &str, message: &str) -> SpecError {
    SpecError {
        field: join_path(prefix, field),
        message: message.to_string(),
    }
}
