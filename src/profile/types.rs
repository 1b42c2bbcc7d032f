//! The profile struct tree.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use stampede_node_model::config::{ClusterConfig, LatencyDist};

use crate::placement::{AccountingMode, FailureAnswers};

pub use super::one_or_many::OneOrMany;

/// Client-visible round trip of an RPC the node answers at once (a refusal, an
/// injected error, a killed listener), which paces E2B's no-backoff ResourceExhausted
/// loop: the API's own time per refused retry. Measured on E2B's API as shipped with
/// `stampede e2b` (`profiles/seed-000-five-node.yaml`, 13 runs of three builds on this
/// 2-core host at load 2-8): the request-seconds a run spent over the refusals it
/// counted, 48-104 ms, median 57. It includes E2B's handling of each refusal (a WARN
/// with a stack trace, as its logger is configured) and the host's contention among the
/// waiting requests; a deployment sets its own from its API's logs (docs/fidelity.md).
pub const RPC_ROUND_TRIP: Duration = Duration::from_millis(57);

/// A run profile (`profiles/*.yaml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Short name, used in report directory names. Required.
    pub name: String,
    /// Free text shown in reports. Default empty.
    #[serde(default)]
    pub description: String,
    /// Seed of every random choice of the run (placement sampling, latencies, failures,
    /// chaos node picks, lifetimes). Default 0.
    #[serde(default)]
    pub seed: u64,
    /// Hosts (names or IPs) that may be contacted although they are not loopback.
    /// Default none: a run refuses every non-loopback target.
    #[serde(default)]
    pub allow_targets: Vec<String>,
    /// The embedded mock-node fleet. Default: 10 nodes of the default model. Ignored
    /// for an `external` placement unless the nodes are ours.
    #[serde(default)]
    pub cluster: ClusterConfig,
    /// The placement service under test: `{embedded: {...}}` or `{external: {...}}`.
    // A one-key map in YAML (serde_yaml_ng would otherwise want a `!embedded` tag).
    #[serde(default, with = "serde_yaml_ng::with::singleton_map")]
    #[schemars(with = "PlacementSection")]
    pub placement: PlacementSection,
    /// The load.
    pub workload: WorkloadSpec,
    /// How per-node truth is sampled.
    #[serde(default)]
    pub collect: CollectSpec,
    /// Pass/fail criteria deciding the exit code.
    #[serde(default)]
    pub checks: Checks,
    /// Where and how reports are written.
    #[serde(default)]
    pub report: ReportSpec,
    /// Scheduled faults (chaos drills). Default none.
    #[serde(default)]
    pub chaos: Vec<super::ChaosStep>,
}

/// The system under test: stampede's embedded reference service, or an external API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
// One per profile: the embedded variant's size is not worth a box.
#[allow(clippy::large_enum_variant)]
pub enum PlacementSection {
    /// Start `stampede serve` in-process on loopback, once per accounting mode.
    Embedded(EmbeddedPlacement),
    /// A running E2B-compatible API (staging).
    External(ExternalPlacement),
}

impl Default for PlacementSection {
    fn default() -> Self {
        PlacementSection::Embedded(EmbeddedPlacement::default())
    }
}

/// Settings of the embedded reference placement service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct EmbeddedPlacement {
    /// Accounting mode, or a list of modes (one run each). Default `optimistic`.
    pub accounting: OneOrMany<AccountingMode>,
    /// Best-of-K parameters.
    pub best_of_k: BestOfK,
    /// Attempts (non-ResourceExhausted failures) before a create fails. Default 3.
    pub max_retries: u32,
    /// Node sync (ServiceInfo + List) period. Default 20s.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "String")]
    pub sync_interval: Duration,
    /// When the first periodic sync lands after the workload's start (its gate), in
    /// `(0, sync_interval]` (replica r of n lands r/n of an interval after it), in the
    /// simulator and in an embedded run alike. A real cluster's phase is arbitrary, so
    /// sweeping it (`stampede sim --sweep sync_phase=...`) shows the spread of outcomes.
    /// Default one `sync_interval`.
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub sync_phase: Option<Duration>,
    /// Independent placement instances, each with its own state; the workload spreads
    /// requests over them round-robin. Default 1.
    pub replicas: u32,
    /// Skip a sampled node with more than this many creates in flight. Default none.
    pub max_starting_per_node: Option<u32>,
    /// Overall deadline of one create request (E2B: 70s). Default 70s.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "String")]
    pub request_timeout: Duration,
    /// Removed: E2B bounds a Create RPC only by the request deadline (`request_timeout`),
    /// so a hung node holds the request until then. Kept only so that a profile still
    /// giving it is refused with that reason instead of "unknown field".
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub create_rpc_timeout: Option<serde_yaml_ng::Value>,
    /// How placement failures are answered: `e2b` (503 capacity / 504 timeout / 500
    /// create failed, each with an `error_code`) or `legacy` (every one a 500 "Failed to
    /// place sandbox", as E2B deployments before 2026-08-13). Default `e2b`.
    pub failure_answers: FailureAnswers,
    /// Pause before retrying a create a node refused with ResourceExhausted, in the
    /// simulator and the embedded service (`stampede serve --retry-backoff`). Default
    /// none: E2B retries at once, until the request deadline.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "Option<String>")]
    pub retry_backoff: Option<Duration>,
    /// Client-visible round trip of an RPC a node answers at once (a refusal, an
    /// injected error), which paces E2B's retry loop: the simulator prices such an RPC
    /// at it, and the embedded service waits it before each refused retry (on top of
    /// `retry_backoff`). Default 57ms, as measured on E2B's API
    /// ([`RPC_ROUND_TRIP`](crate::profile::RPC_ROUND_TRIP)).
    #[serde(with = "humantime_serde")]
    #[schemars(with = "String")]
    pub rpc_round_trip: Duration,
    /// The API's own time before each placement decision, in the simulator and the
    /// embedded service alike: `time`, a distribution each request holds one of
    /// `workers` for (`{time: {dist: uniform, min: 100ms, max: 400ms}, workers: 8}`).
    /// Default E2B's API as measured (see [`ApiStage`](crate::placement::ApiStage));
    /// `{time: {dist: constant, value: 0ms}}` decides each request as it arrives.
    #[serde(skip_serializing_if = "crate::placement::ApiStage::is_default")]
    pub api_stage: crate::placement::ApiStage,
    /// Run the embedded service's evictor, which kills each sandbox at its end time as
    /// E2B's API does. `false` leaves expired sandboxes on their nodes (`stampede serve
    /// --no-evictor`), so that a drill shows what a service without one leaves behind.
    /// Default true.
    pub evictor: bool,
}

impl EmbeddedPlacement {
    /// When the first periodic sync lands after the gate: `sync_phase`, else one
    /// `sync_interval` (its default, resolved here only).
    pub fn first_sync_phase(&self) -> Duration {
        self.sync_phase.unwrap_or(self.sync_interval)
    }
}

impl Default for EmbeddedPlacement {
    fn default() -> Self {
        Self {
            accounting: OneOrMany::One(AccountingMode::Optimistic),
            best_of_k: BestOfK::default(),
            max_retries: crate::placement::PlacementConfig::default().max_retries,
            sync_interval: crate::placement::SYNC_INTERVAL,
            sync_phase: None,
            replicas: 1,
            max_starting_per_node: None,
            request_timeout: crate::placement::REQUEST_TIMEOUT,
            create_rpc_timeout: None,
            failure_answers: FailureAnswers::default(),
            retry_backoff: crate::serve::DEFAULT_RETRY_BACKOFF,
            rpc_round_trip: RPC_ROUND_TRIP,
            api_stage: crate::placement::ApiStage::default(),
            evictor: true,
        }
    }
}

/// E2B's Best-of-K constants (defaults: E2B's `DefaultBestOfKConfig`, as
/// [`PlacementConfig::default`](crate::placement::PlacementConfig)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct BestOfK {
    /// Nodes sampled per decision, or a list of them (one run per `k` and accounting
    /// mode, e.g. `[3, 5]` as E2B's benchmark). Default 3.
    pub k: OneOrMany<usize>,
    /// Overcommit ratio in the score's denominator. Default 4.
    pub r: f64,
    /// Weight of the node's CPU usage in the score. Default 0.5.
    pub alpha: f64,
}

impl Default for BestOfK {
    fn default() -> Self {
        let d = crate::placement::PlacementConfig::default();
        Self {
            k: OneOrMany::One(d.k),
            r: d.r,
            alpha: d.alpha,
        }
    }
}

/// An E2B-compatible API that stampede does not start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExternalPlacement {
    /// Base URL, e.g. `https://api.staging.example.com`. Its host must be loopback or
    /// listed in `allow_targets`.
    pub url: String,
    /// Env var holding the `X-API-Key`. Default `STAMPEDE_API_KEY`.
    #[serde(default = "ExternalPlacement::default_api_key_env")]
    pub api_key_env: String,
    /// Env var holding the admin token for `GET /nodes`. Default none.
    #[serde(default)]
    pub admin_token_env: Option<String>,
    /// Orchestrator gRPC addresses to read with `List` when `/nodes` is not available.
    #[serde(default)]
    pub orchestrators: Vec<String>,
    /// Admin URLs of mock-node fleets deployed for this run, read for per-node truth.
    #[serde(default)]
    pub mock_admin: Vec<String>,
    /// Env var holding the bearer token those admin APIs require (`mock-node
    /// --admin-token`). Default none.
    #[serde(default)]
    pub mock_admin_token_env: Option<String>,
}

impl ExternalPlacement {
    /// The env var holding the API key when a profile names none.
    pub fn default_api_key_env() -> String {
        "STAMPEDE_API_KEY".into()
    }
}

/// The load: a shape, a sandbox spec and optional deletes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// How requests are paced: `{burst: {...}}`, `{rate: {...}}` or `{plan: {...}}`.
    // A one-key map in YAML (serde_yaml_ng would otherwise want a `!rate` tag).
    #[serde(with = "serde_yaml_ng::with::singleton_map")]
    #[schemars(with = "Shape")]
    pub shape: Shape,
    /// What each create asks for.
    #[serde(default)]
    pub sandbox: SandboxSpec,
    /// Delete each sandbox after a lifetime drawn from this distribution. Default:
    /// never (sandboxes live until their timeout).
    #[serde(default)]
    pub lifetime: Option<LatencyDist>,
    /// What each sandbox does after its create (hold, pause, resume, kill), for a
    /// `mix` of them. Default: nothing (plain creates). `stampede run` only.
    #[serde(default)]
    pub lifecycle: Option<super::Lifecycle>,
    /// Upper bound on concurrently open requests (goose users for `rate`). Default 512.
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: usize,
    /// Retry creates answered 429 (team concurrency or rate limit). Default: no retry,
    /// the 429 is recorded as its own outcome.
    #[serde(default)]
    pub on_429: Option<On429>,
}

/// How the workload retries a create answered 429.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct On429 {
    /// Further attempts after the first 429. Default 3.
    pub retries: u32,
    /// Wait what the answer's `Retry-After` says, when it has one. Default true.
    pub honour_retry_after: bool,
    /// Wait when there is no `Retry-After` (or it is not honoured). Default 1s.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "String")]
    pub backoff: Duration,
    /// Longest single wait, whatever `Retry-After` says. Default 30s.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "String")]
    pub max_wait: Duration,
}

impl Default for On429 {
    fn default() -> Self {
        Self {
            retries: 3,
            honour_retry_after: true,
            backoff: Duration::from_secs(1),
            max_wait: Duration::from_secs(30),
        }
    }
}

fn default_max_in_flight() -> usize {
    512
}

/// Pacing of the workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Shape {
    /// `count` creates released together behind a start gate.
    Burst {
        /// Number of creates, all in flight at once.
        count: usize,
    },
    /// Open model: request i is sent at t0 + i/per_second.
    Rate {
        /// Requests per second.
        per_second: f64,
        /// How long to send.
        #[serde(with = "humantime_serde")]
        #[schemars(with = "String")]
        duration: Duration,
    },
    /// goose test-plan steps, e.g. `"10,5s;10,20s;0,5s"` (users, ramp time).
    Plan {
        /// goose `--test-plan` syntax.
        steps: String,
    },
}

/// What each create requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxSpec {
    /// `templateID`. Default `base`.
    pub template: String,
    /// vCPUs per sandbox (`cpuCount`). Default 1.
    pub vcpu: u32,
    /// Memory per sandbox in MiB (`memoryMB`). Default 1024.
    pub ram_mb: u32,
    /// Sandbox `timeout` (seconds of life the API grants). Default 300s.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "String")]
    pub timeout: Duration,
}

impl Default for SandboxSpec {
    fn default() -> Self {
        Self {
            template: "base".into(),
            vcpu: 1,
            ram_mb: 1024,
            timeout: Duration::from_secs(300),
        }
    }
}

/// Collector settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct CollectSpec {
    /// Sampling period during the run. Default 1s.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "String")]
    pub interval: Duration,
}

impl Default for CollectSpec {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(1),
        }
    }
}

/// Bounds on a figure; either side optional.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Bound {
    /// Fails when the figure is below this.
    #[serde(default)]
    pub min: Option<f64>,
    /// Fails when the figure is above this.
    #[serde(default)]
    pub max: Option<f64>,
}

/// Upper bound on a latency.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LatencyBound {
    /// Fails when the latency is above this.
    #[serde(with = "humantime_serde")]
    #[schemars(with = "String")]
    pub max: Duration,
}

/// Checks applied to every run (`checks:`) and, per mode, overrides (`per_mode:`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Checks {
    /// Coefficient of variation of per-node sandbox counts.
    pub cv: Option<Bound>,
    /// Busiest node's count over the mean.
    pub max_over_mean: Option<Bound>,
    /// Jain's fairness index.
    pub jain: Option<Bound>,
    /// Fraction of creates that did not get a 201.
    pub error_rate: Option<Bound>,
    /// p99 create latency.
    pub p99_latency: Option<LatencyBound>,
    /// Sandboxes lost (chaos set audit).
    pub lost: Option<Bound>,
    /// Sandboxes duplicated (chaos set audit).
    pub duplicated: Option<Bound>,
    /// Fraction of creates answered 429 (team concurrency or rate limit), after any
    /// `workload.on_429` retries.
    pub limited: Option<Bound>,
    /// Creates given up because the run was interrupted.
    pub cancelled: Option<Bound>,
    /// Coefficient of variation of creates that landed per node over the run (the herd
    /// figure of a burst; meaningful with lifetimes, when final counts are all zero).
    pub placements_cv: Option<Bound>,
    /// Time-weighted mean CV of running sandboxes per node over the steady window.
    pub running_cv_mean: Option<Bound>,
    /// Largest CV of running sandboxes per node at a sample of the steady window.
    pub running_cv_peak: Option<Bound>,
    /// Largest count of ResourceExhausted retries in one second (0 without any).
    pub retries_per_s_peak: Option<Bound>,
    /// Mean |believed - true| allocated vCPU over nodes and samples: how far the
    /// placement's bookkeeping drifts from the nodes (needs the service's beliefs).
    pub accounting_error: Option<Bound>,
    /// Checks for one accounting mode only, replacing the shared ones they name.
    pub per_mode: BTreeMap<AccountingMode, Checks>,
    /// Checks for the runs of one Best-of-K `k` only (`per_k: {5: {cv: ...}}`), replacing
    /// the shared ones they name; a mode's `per_k` replaces its mode's. Default none.
    pub per_k: BTreeMap<usize, Checks>,
}

/// Report output settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ReportSpec {
    /// Parent directory of `<profile>-<UTC time>/`. Default `reports`.
    pub dir: String,
    /// Also write goose's HTML report per run (`goose-<run>.html`). Default false: goose
    /// 0.19's page loads its chart library from a CDN (jsDelivr), so its charts render
    /// only with network access; stampede's own `report.html` is self-contained.
    pub goose_html: bool,
}

impl Default for ReportSpec {
    fn default() -> Self {
        Self {
            dir: "reports".into(),
            goose_html: false,
        }
    }
}

/// Nodes a fault applies to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum NodeSelector {
    /// Named node ids.
    Ids(Vec<String>),
    /// Picked among all nodes with the profile's seed.
    Random {
        /// How many.
        random: usize,
    },
    /// A fraction of all nodes (rounded up), picked with the profile's seed.
    Fraction {
        /// Fraction in (0, 1].
        fraction: f64,
    },
}
