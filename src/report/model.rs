//! The report: one serde tree, versioned, deterministic (no maps with random order),
//! written by every reporter and read back by `stampede compare`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::over_time::{LatencyOverTime, RetryStorm, SkewOverTime};
use super::stats::{LatencySummary, SkewStats};

/// Version of the `report.json` layout; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// A finished (or interrupted) `stampede run` / `stampede sim`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Report {
    /// Layout version, [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `stampede <version>`.
    pub tool: String,
    /// The profile's `name`.
    pub profile: String,
    /// The profile's `description`.
    #[serde(default)]
    pub description: String,
    /// The profile's `seed`.
    pub seed: u64,
    /// The seed the node fleet was built from (`cluster.seed`, else `seed`), when
    /// known: an external run reads it from its mock-node fleet's admin API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet_seed: Option<u64>,
    /// True when produced by the simulator (virtual time).
    pub simulated: bool,
    /// True when the run was interrupted or a part crashed: figures cover what ran.
    pub incomplete: bool,
    /// Why the run is incomplete.
    #[serde(default)]
    pub incomplete_reason: Option<String>,
    /// RFC 3339 UTC start time; the only wall-clock field (a simulation may fix it).
    pub started_at: String,
    /// One entry per run (accounting mode, or point of a sweep).
    pub runs: Vec<RunResult>,
    /// Outcome of the profile's `checks:`.
    #[serde(default)]
    pub checks: Vec<CheckOutcome>,
    /// True when no check failed and the report is complete.
    pub passed: bool,
}

impl Report {
    /// An empty report of the current version for `profile`, to be filled in.
    pub fn new(profile: &str, description: &str, seed: u64, started_at: &str) -> Self {
        Report {
            schema_version: SCHEMA_VERSION,
            tool: format!("stampede {}", env!("CARGO_PKG_VERSION")),
            profile: profile.to_string(),
            description: description.to_string(),
            seed,
            fleet_seed: None,
            simulated: false,
            incomplete: false,
            incomplete_reason: None,
            started_at: started_at.to_string(),
            runs: Vec::new(),
            checks: Vec::new(),
            passed: true,
        }
    }

    /// The run labelled `label`.
    pub fn run(&self, label: &str) -> Option<&RunResult> {
        self.runs.iter().find(|r| r.label == label)
    }

    /// Store check outcomes and derive `passed` (all passed and the run complete).
    pub fn set_checks(&mut self, checks: Vec<CheckOutcome>) {
        self.passed = !self.incomplete && checks.iter().all(|c| c.passed);
        self.checks = checks;
    }
}

/// Figures of one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunResult {
    /// Name of the run, e.g. `reported` or `accounting=reported k=3 replicas=1`.
    pub label: String,
    /// The settings of this run (`accounting`, `k`; `target` for an external API; a
    /// sweep's varied values), a map of text in `report.json`.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    pub settings: crate::profile::RunSettings,
    /// Final per-node truth, in node order.
    pub nodes: Vec<NodeFigures>,
    /// Skew of the final per-node sandbox counts (after every delete and expiry: all
    /// zero for a run with lifetimes; see `skew_over_time`).
    pub skew: SkewStats,
    /// Skew of placements and of running sandboxes over the run, when sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skew_over_time: Option<SkewOverTime>,
    /// ResourceExhausted retries per second, when there were any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_storm: Option<RetryStorm>,
    /// Placement service's believed vCPU against the nodes' truth over the run.
    #[serde(default)]
    pub accounting_error: Option<AccountingError>,
    /// Successful placements per node by kind, for a run whose workload has a
    /// lifecycle: `create` (a 201 create) and `resume` (a 201 resume or connect of a
    /// paused sandbox), each node as the service named it. Empty otherwise.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub placements_by_kind: BTreeMap<String, BTreeMap<String, u64>>,
    /// What the resumes did, for a run whose workload has a lifecycle that resumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumes: Option<super::resumes::ResumeFigures>,
    /// Create latency (client side, from the intended send time).
    pub latency: LatencySummary,
    /// Create latency per time bin (p50, p99), when a create was answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_over_time: Option<LatencyOverTime>,
    /// Outcomes by HTTP status (`"201"`, `"503"`) or kind (`"timeout"`, `"transport_error"`).
    pub statuses: BTreeMap<String, u64>,
    /// Creates attempted.
    pub requests: u64,
    /// Creates answered 201.
    pub ok: u64,
    /// Creates that failed: no 201, and neither a 429 (a limit) nor given up on a signal.
    pub failed: u64,
    /// `failed / requests` (0 when nothing was sent).
    pub error_rate: f64,
    /// Placement attempts retried by the service (0 and listed in `not_measured` when
    /// the run could not observe it).
    pub retries: u64,
    /// ResourceExhausted answers the service received from nodes (0 and listed in
    /// `not_measured` when the run could not observe it).
    pub refusals: u64,
    /// Figures this run could not observe (an external API exposes no retry counter,
    /// no refusals unless its nodes count them, no beliefs without an admin token or
    /// when its `GET /nodes` is also the truth, no placements when its answers do not
    /// name the node): their fields carry no information and every reporter shows them
    /// as not measured, never as 0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_measured: Vec<Figure>,
    /// How precisely the workload kept its schedule.
    #[serde(default)]
    pub send: SendTiming,
    /// Per-node counts sampled during the run.
    #[serde(default)]
    pub timeline: Vec<TimelinePoint>,
    /// When the placement service's periodic node syncs were, ms since the workload
    /// started (replicas merged, in order, within the timeline): the simulator's sync
    /// events; for embedded services, when each replica's sync timer was due (its
    /// sync's replies land over the following round trips). `None` when not known: an
    /// external API's syncs are its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_at_ms: Option<Vec<f64>>,
    /// Chaos fault windows, in order applied.
    #[serde(default)]
    pub faults: Vec<FaultWindow>,
    /// Set audit findings, when the run audited inventories (`checker` in
    /// `report.json`, its name there since before the audit was called an audit).
    #[serde(default, rename = "checker")]
    pub set_audit: Option<SetAudit>,
    /// Wall (or virtual) duration of the run in milliseconds.
    pub wall_ms: f64,
    /// Runs against an external API: truth source and lag, what was there before,
    /// cancelled and limited creates, cleanup.
    #[serde(default)]
    pub staging: Option<super::staging::StagingFacts>,
}

/// A figure of [`RunResult`] that a run may be unable to observe.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Figure {
    /// `retries` (and `retry_storm`).
    Retries,
    /// `refusals`.
    Refusals,
    /// `accounting_error`.
    AccountingError,
    /// `skew_over_time.placements` (creates that landed per node, and their skew):
    /// known only when the API's answers name the node a sandbox landed on.
    Placements,
}

/// What reporters print in place of a figure the run could not observe.
pub const NOT_MEASURED: &str = "not measured";

impl RunResult {
    /// Whether this run observed `figure`.
    pub fn measured(&self, figure: Figure) -> bool {
        !self.not_measured.contains(&figure)
    }

    /// `figure`'s value as text, or [`NOT_MEASURED`].
    pub fn shown(&self, figure: Figure, value: impl std::fmt::Display) -> String {
        if self.measured(figure) {
            value.to_string()
        } else {
            NOT_MEASURED.to_string()
        }
    }
}

/// Final truth of one node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NodeFigures {
    /// Node id (`node-03`).
    pub id: String,
    /// Sandboxes running on it.
    pub sandboxes: u64,
    /// vCPU allocated on it (truth).
    pub allocated_vcpu: f64,
    /// vCPU the placement service believed allocated, when known.
    #[serde(default)]
    pub believed_vcpu: Option<f64>,
}

/// |believed - true| allocated vCPU, over nodes and samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AccountingError {
    /// Mean over samples and nodes.
    pub mean_abs_vcpu: f64,
    /// Largest single difference.
    pub max_abs_vcpu: f64,
    /// Node samples the figures cover.
    pub samples: u64,
}

impl AccountingError {
    /// Mean and max of |believed - truth| over `(believed, truth)` pairs; `None` when
    /// there are none.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (f64, f64)>) -> Option<Self> {
        let mut sum = 0.0;
        let mut max: f64 = 0.0;
        let mut n = 0u64;
        for (b, t) in pairs {
            let d = (b - t).abs();
            sum += d;
            max = max.max(d);
            n += 1;
        }
        (n > 0).then(|| AccountingError {
            mean_abs_vcpu: sum / n as f64,
            max_abs_vcpu: max,
            samples: n,
        })
    }
}

/// Send precision: burst spread or open-model lateness.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SendTiming {
    /// Burst: time between the first and the last send (client side): the first and
    /// the last final byte written by the release loop.
    #[serde(default)]
    pub burst_spread_ms: Option<f64>,
    /// Burst: whether that loop ran at real-time priority (`SCHED_FIFO`; without the
    /// privilege a loop the scheduler preempts stretches the spread by a tick).
    #[serde(default)]
    pub burst_release_realtime: Option<bool>,
    /// Burst: time between the first and the last create arriving at the placement
    /// service, a create arriving when the last byte of its body reached the service's
    /// socket (the kernel's receive timestamp; embedded runs only; replicas merged).
    #[serde(default)]
    pub server_arrival_spread_ms: Option<f64>,
    /// Burst: creates the placement service received (embedded runs only).
    #[serde(default)]
    pub server_arrivals: Option<u64>,
    /// Burst: of those, the ones whose arrival the kernel stamped; the others were
    /// stamped by the service's clock when it read their last byte.
    #[serde(default)]
    pub server_arrivals_kernel_stamped: Option<u64>,
    /// Rate: median delay of a send after its intended time.
    #[serde(default)]
    pub lateness_p50_ms: Option<f64>,
    /// Rate: 99th percentile of that delay.
    #[serde(default)]
    pub lateness_p99_ms: Option<f64>,
    /// Rate: largest delay.
    #[serde(default)]
    pub lateness_max_ms: Option<f64>,
}

/// Per-node counts at one instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TimelinePoint {
    /// Milliseconds since the workload started.
    pub t_ms: f64,
    /// Sandboxes per node, in the order of [`RunResult::nodes`].
    pub sandboxes: Vec<u64>,
    /// Mean |believed - true| vCPU over nodes at this instant, when known.
    #[serde(default)]
    pub accounting_error_vcpu: Option<f64>,
    /// Creates that landed per node so far (cumulative), when known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placed: Vec<u64>,
}

/// One chaos fault and what happened while it was active.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FaultWindow {
    /// Fault id (as the admin API returned it, or the step index).
    pub id: String,
    /// Fault kind (`kill`, `hang`, ...).
    pub kind: String,
    /// Nodes it applied to.
    pub nodes: Vec<String>,
    /// When it was applied, ms since the workload started.
    pub applied_at_ms: f64,
    /// When it was healed; none if it never was.
    #[serde(default)]
    pub healed_at_ms: Option<f64>,
    /// Creates sent during the window.
    pub attempted: u64,
    /// Of which answered 201.
    pub ok: u64,
    /// Of which failed.
    pub failed: u64,
    /// Placements the service sent to a faulty node during the window: create RPCs
    /// from the service's own per-node counters when it exposes them, else sandboxes
    /// that appeared on those nodes.
    pub placements_to_faulty: u64,
    /// Of those, create RPCs that failed (known only from the service's counters).
    #[serde(default)]
    pub failed_on_faulty: Option<u64>,
    /// Creates already on their way to the faulty nodes when the fault took hold (the
    /// services' `sandboxStartingCount` then): the only ones that may still have
    /// succeeded there during the window. None when the counters were not read at the
    /// fault's edges.
    #[serde(default)]
    pub in_flight_at_fault: Option<u64>,
    /// Time from the fault until the service stopped choosing the faulty nodes.
    #[serde(default)]
    pub time_to_avoid_ms: Option<f64>,
    /// Time from the heal until a healed node received work again.
    #[serde(default)]
    pub time_to_reuse_ms: Option<f64>,
    /// Creates of the window answered 504 (the request deadline passed while placing):
    /// under a `hang`, the ones the hung node held until the deadline.
    #[serde(default)]
    pub timed_out: u64,
    /// Shortest latency of those 504s (from the intended send), ms.
    #[serde(default)]
    pub timed_out_min_ms: Option<f64>,
    /// Longest latency of those 504s, ms.
    #[serde(default)]
    pub timed_out_max_ms: Option<f64>,
}

impl FaultWindow {
    /// Count one create of the window answered 504 after `latency_ms`.
    pub fn note_timed_out(&mut self, latency_ms: f64) {
        self.timed_out += 1;
        self.timed_out_min_ms = Some(
            self.timed_out_min_ms
                .map_or(latency_ms, |m| m.min(latency_ms)),
        );
        self.timed_out_max_ms = Some(
            self.timed_out_max_ms
                .map_or(latency_ms, |m| m.max(latency_ms)),
        );
    }
}

/// Set audit findings (docs/design.md 2.6).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SetAudit {
    /// 201 to the client, on no node, not deleted or expired.
    pub lost: Finding,
    /// Lost, but on a node a fault restarted (expected).
    pub lost_to_node_restart: Finding,
    /// One id on two nodes, or two sandboxes for one request.
    pub duplicated: Finding,
    /// On a node, unknown to the client.
    pub orphaned: Finding,
    /// Unknown outcome for the client, but the sandbox exists.
    pub recovered: Finding,
    /// True when the placement service's evictions are not known (an API without
    /// stampede's `GET /admin/evicted`, or no admin token): a sandbox it evicted then
    /// counts as lost.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub evictions_unknown: bool,
}

impl SetAudit {
    /// What reporters print beside the findings when the evictions are not known.
    pub const EVICTIONS_UNKNOWN: &'static str =
        "evictions not known (the API lists none): a sandbox it evicted counts as lost";
}

/// A count and the first ids behind it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Finding {
    /// How many.
    pub count: u64,
    /// The first [`Finding::MAX_IDS`] ids, sorted.
    pub ids: Vec<String>,
}

impl Finding {
    /// Ids kept in a report per finding.
    pub const MAX_IDS: usize = 20;

    /// A finding of all `ids` (counted), keeping the first [`Finding::MAX_IDS`] sorted.
    pub fn from_ids(ids: impl IntoIterator<Item = String>) -> Self {
        let mut all: Vec<String> = ids.into_iter().collect();
        all.sort();
        let count = all.len() as u64;
        all.truncate(Self::MAX_IDS);
        Finding { count, ids: all }
    }
}

/// Outcome of one check on one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckOutcome {
    /// Label of the run checked.
    pub run: String,
    /// Check name (`cv`, `p99_latency`, ...).
    pub check: String,
    /// The bound as written, e.g. `<= 0.1` or `>= 0.9, <= 1`.
    pub bound: String,
    /// The measured figure; none when missing.
    pub actual: Option<f64>,
    /// Whether the figure is within the bound.
    pub passed: bool,
    /// Human sentence: `cv 1.14 > max 0.1`, `no set audit in this run: lost cannot be checked`.
    pub message: String,
}
