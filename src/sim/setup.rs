//! [`SimSetup`]: everything one simulated run needs, resolved once from a profile.

use std::sync::Arc;
use std::time::Duration;

use stampede_node_model::config::{ClusterConfig, LatencyDist, NodeSpec};
use stampede_node_model::model::NodeModel;
use stampede_node_model::seed::node_seed;

use super::error::SimError;
use super::faults::{plan_faults, PlannedFault};
use super::queue::Nanos;
use crate::aggregate::needs_set_audit;
use crate::placement::{AccountingMode, ApiStage, PlacementConfig};
use crate::profile::limits::{MAX_PLAN_STARTED_USERS, MAX_PLAN_USERS};
pub use crate::profile::RPC_ROUND_TRIP;

/// Time from an answer to a closed-loop user's next create (a goose `plan`), in the
/// simulator. An assumption: a client beside the API, within a millisecond of it (the
/// real run's users send at once, over a loopback round trip of tens of microseconds).
/// Apart from [`RPC_ROUND_TRIP`], which is the API's own time per refused retry.
pub const CLIENT_ROUND_TRIP: Nanos = 1_000_000;
use crate::profile::{
    parse_test_plan, Lifecycle, PlacementSection, Profile, ProfileErrors, RunVariant, SandboxSpec,
    Shape, Source,
};

/// When the workload's requests are meant to leave.
#[derive(Debug, Clone, PartialEq)]
pub enum Arrivals {
    /// `count` requests at t = 0.
    Burst {
        /// Number of requests.
        count: u64,
    },
    /// Request `i` at `i / per_second` (the real run's open model).
    Rate {
        /// Requests per second.
        per_second: f64,
        /// Number of requests, `floor(per_second * duration)`.
        total: u64,
    },
    /// A goose test plan (closed model): each user sends a create, waits for the
    /// answer, and sends the next one [`CLIENT_ROUND_TRIP`] later, while it is active.
    Plan {
        /// `(start, stop)` of every user's activity, in start order.
        users: Vec<(Nanos, Nanos)>,
    },
}

impl Arrivals {
    /// Number of open-model requests (0 for a plan, whose users send as they go).
    pub fn total(&self) -> u64 {
        match *self {
            Arrivals::Burst { count } => count,
            Arrivals::Rate { total, .. } => total,
            Arrivals::Plan { .. } => 0,
        }
    }

    /// Intended send time of request `i`, computed as the real workload's pacing does.
    pub fn at(&self, i: u64) -> Nanos {
        match *self {
            Arrivals::Burst { .. } | Arrivals::Plan { .. } => 0,
            Arrivals::Rate { per_second, .. } => {
                to_nanos(Duration::from_secs_f64(i as f64 / per_second))
            }
        }
    }
}

/// One simulated run, fully resolved: no profile lookups during the run.
#[derive(Debug, Clone)]
pub struct SimSetup {
    /// The profile's seed: placement sampling, lifetimes and chaos picks derive from it.
    pub seed: u64,
    /// The fleet (node count, specs, overrides).
    pub cluster: ClusterConfig,
    /// Seed of the node models ([`ClusterConfig::fleet_seed`] of the profile's seed),
    /// passed through [`stampede_node_model::seed::node_seed`] as the real fleet does.
    pub cluster_seed: u64,
    /// Parameters of every placement replica.
    pub placement: PlacementConfig,
    /// Independent placement instances; requests go round-robin.
    pub replicas: usize,
    /// Period of each replica's node sync.
    pub sync_interval: Nanos,
    /// When replica 0's first periodic sync lands, in `(0, sync_interval]`.
    pub sync_phase: Nanos,
    /// Overall deadline of one create request.
    pub request_timeout: Nanos,
    /// When requests are meant to leave.
    pub arrivals: Arrivals,
    /// Requests open at once at most (the real run's goose users).
    pub workers: usize,
    /// What each create asks for.
    pub sandbox: SandboxSpec,
    /// Delete each sandbox after a lifetime drawn from this.
    pub lifetime: Option<LatencyDist>,
    /// What a sandbox does after its create (holds, pause, resume, kill), drawn per
    /// sandbox from `seed` as the real workload draws it.
    pub lifecycle: Option<Lifecycle>,
    /// Timeline sampling period.
    pub collect_interval: Nanos,
    /// The chaos schedule, resolved to node indices and virtual times.
    pub faults: Vec<PlannedFault>,
    /// Client-visible round trip of an RPC the node answers at once
    /// (`placement.embedded.rpc_round_trip`, default [`RPC_ROUND_TRIP`]).
    pub rpc_round_trip: Nanos,
    /// Pause before retrying a ResourceExhausted refusal (`retry_backoff`; 0: none, as
    /// E2B).
    pub retry_backoff: Nanos,
    /// Time before each request's first decision (`placement.embedded.api_stage`),
    /// applied by every replica's placer in virtual time.
    pub api_stage: ApiStage,
    /// Step every retry tick of a refused request as an event instead of parking it
    /// until a state change: the slow reference the parked path is tested against.
    pub step_retries: bool,
    /// Kill each sandbox at its end time, as E2B's evictor (`placement.embedded.evictor`).
    pub evictor: bool,
    /// Keep a client ledger and run the set audit ([`needs_set_audit`]); off for
    /// plain runs, where it would only cost memory.
    pub audit_sets: bool,
}

impl SimSetup {
    /// Resolve `profile` for one run in accounting `mode`. The profile goes through the
    /// same [`validate`](crate::profile::validate) as `stampede validate` and `run` (its
    /// problems are reported without positions: see [`validate_profile`]).
    /// The profile's first `k` is used; see [`from_run`](Self::from_run) for the others.
    pub fn from_profile(profile: &Profile, mode: AccountingMode) -> Result<Self, SimError> {
        let PlacementSection::Embedded(p) = &profile.placement else {
            return Err(SimError::ExternalPlacement);
        };
        let k = p.best_of_k.k.to_vec().first().copied().unwrap_or_default();
        let run = RunVariant {
            mode,
            k,
            k_varies: false,
        };
        Self::from_run(profile, run)
    }

    /// Resolve `profile` for one of its runs ([`EmbeddedPlacement::runs`]).
    pub fn from_run(profile: &Profile, run: RunVariant) -> Result<Self, SimError> {
        validate_profile(profile, "")?;
        let PlacementSection::Embedded(p) = &profile.placement else {
            return Err(SimError::ExternalPlacement);
        };
        let placement = p.placement_config(run);
        if let Some(e) = placement.validate().into_iter().next() {
            return Err(SimError::setting(
                format!("placement.embedded.best_of_k.{}", e.field),
                e.message,
            ));
        }
        let arrivals = match &profile.workload.shape {
            Shape::Burst { count } => Arrivals::Burst {
                count: *count as u64,
            },
            Shape::Rate {
                per_second,
                duration,
            } => Arrivals::Rate {
                per_second: *per_second,
                total: (per_second * duration.as_secs_f64()).floor() as u64,
            },
            Shape::Plan { steps } => Arrivals::Plan {
                users: plan_users(steps).map_err(|message| SimError::UnsupportedShape {
                    shape: "plan",
                    message,
                })?,
            },
        };
        let workers = match arrivals {
            Arrivals::Burst { count } => count.max(1) as usize,
            Arrivals::Rate { total, .. } => profile
                .workload
                .max_in_flight
                .min(usize::try_from(total).unwrap_or(usize::MAX))
                .max(1),
            // Users bound their own concurrency: one request each.
            Arrivals::Plan { ref users } => users.len().max(1),
        };
        let cluster_seed = profile.cluster.fleet_seed(profile.seed);
        let faults = plan_faults(&profile.chaos, &profile.cluster, profile.seed)?;
        Ok(SimSetup {
            seed: profile.seed,
            cluster: profile.cluster.clone(),
            cluster_seed,
            placement,
            replicas: p.replicas.max(1) as usize,
            sync_interval: to_nanos(p.sync_interval),
            sync_phase: to_nanos(p.first_sync_phase()),
            request_timeout: to_nanos(p.request_timeout),
            arrivals,
            workers,
            sandbox: profile.workload.sandbox.clone(),
            lifetime: profile.workload.lifetime.clone(),
            lifecycle: profile.workload.lifecycle.clone(),
            collect_interval: to_nanos(profile.collect.interval),
            audit_sets: needs_set_audit(profile),
            faults,
            rpc_round_trip: to_nanos(p.rpc_round_trip),
            retry_backoff: p.retry_backoff.map_or(0, to_nanos),
            api_stage: p.api_stage.clone(),
            step_retries: false,
            evictor: p.evictor,
        })
    }

    /// The fleet's node models in node order, built as `mock-node` builds them from
    /// the same cluster and seed (specs, seeds, idle loads).
    pub fn node_models(&self) -> Vec<NodeModel> {
        let idle = self.cluster.idle_cpu_percents(self.cluster_seed);
        // Nodes of one spec share it: most fleets have one.
        let mut last_spec: Option<Arc<NodeSpec>> = None;
        (0..self.cluster.nodes)
            .map(|k| {
                let spec = self.cluster.spec_for(k);
                let spec = match &last_spec {
                    Some(last) if **last == spec => Arc::clone(last),
                    _ => Arc::clone(last_spec.insert(Arc::new(spec))),
                };
                NodeModel::new(
                    self.cluster.node_id(k),
                    spec,
                    node_seed(self.cluster_seed, k),
                )
                .with_idle_cpu_percent(idle[k])
            })
            .collect()
    }

    /// Time between two ResourceExhausted retries of one request: the refusal's round
    /// trip plus the backoff (at least 1 ns, so that a loop always advances).
    pub fn retry_period(&self) -> Nanos {
        self.rpc_round_trip
            .saturating_add(self.retry_backoff)
            .max(1)
    }
}

/// The runs a profile asks for, in its order (a sim runs each once).
pub fn profile_runs(profile: &Profile) -> Result<Vec<RunVariant>, SimError> {
    match &profile.placement {
        PlacementSection::Embedded(p) => Ok(p.runs()),
        PlacementSection::External(_) => Err(SimError::ExternalPlacement),
    }
}

/// The accounting modes a profile asks for, in its order (a sim runs each once).
pub fn profile_modes(profile: &Profile) -> Result<Vec<AccountingMode>, SimError> {
    match &profile.placement {
        PlacementSection::Embedded(p) => Ok(p.accounting.to_vec()),
        PlacementSection::External(_) => Err(SimError::ExternalPlacement),
    }
}

/// A duration in virtual nanoseconds, saturating.
pub fn to_nanos(d: Duration) -> Nanos {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Virtual nanoseconds as a duration.
pub fn to_duration(n: Nanos) -> Duration {
    Duration::from_nanos(n)
}

/// Validate `profile` as [`validate`](crate::profile::validate) does for a file, its
/// problems reported under `label` (no line and column: the profile may not come from
/// a file as it is, e.g. a `--sweep` combination).
pub fn validate_profile(profile: &Profile, label: &str) -> Result<(), SimError> {
    let issues = crate::profile::validate(profile, &Source::inline(label, ""));
    if issues.is_empty() {
        Ok(())
    } else {
        Err(SimError::Profile(ProfileErrors::Invalid(issues)))
    }
}

/// The activity spans of a goose test plan's users (`"10,5s;10,20s;0,5s"`: users and the
/// time to reach that count, read as goose reads them). Ramps are linear: on the way up
/// users start evenly over the step, on the way down the most recent stop first; users
/// still active at the end of the plan stop then.
pub fn plan_users(steps: &str) -> Result<Vec<(Nanos, Nanos)>, String> {
    let mut spans: Vec<(Nanos, Nanos)> = Vec::new();
    let mut active: Vec<usize> = Vec::new();
    let mut t: Nanos = 0;
    let mut started: u64 = 0;
    let mut previous = 0usize;
    for step in parse_test_plan(steps)? {
        started = started.saturating_add(step.users.saturating_sub(previous) as u64);
        previous = step.users;
        if started > MAX_PLAN_STARTED_USERS || step.users > MAX_PLAN_USERS {
            return Err(format!(
                "more than {MAX_PLAN_USERS} users at once or {MAX_PLAN_STARTED_USERS} in all"
            ));
        }
        let target = step.users;
        let d = to_nanos(step.ramp);
        let cur = active.len();
        if target > cur {
            let n = (target - cur) as u128;
            for j in 0..(target - cur) {
                let start = t.saturating_add((u128::from(d) * j as u128 / n) as u64);
                active.push(spans.len());
                spans.push((start, Nanos::MAX));
            }
        } else if target < cur {
            let n = (cur - target) as u128;
            for j in 0..(cur - target) {
                let stop = t.saturating_add((u128::from(d) * (j as u128 + 1) / n) as u64);
                if let Some(k) = active.pop() {
                    spans[k].1 = stop;
                }
            }
        }
        t = t.saturating_add(d);
    }
    for k in active {
        spans[k].1 = t;
    }
    if spans.is_empty() {
        return Err("the plan never starts a user".into());
    }
    Ok(spans)
}
