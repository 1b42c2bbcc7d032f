//! The sans-IO model of one orchestrator node: admission, inventory, metrics.
//!
//! No clock and no I/O: every call takes `now`, the time since fleet start. The gRPC
//! server and the discrete-event simulator both drive this one model, so the node the
//! simulator sees is the node the wire sees. A sandbox never leaves by itself: E2B's
//! orchestrator only reports its `end_time` in `List`
//! (`packages/orchestrator/pkg/server/sandboxes.go`); it leaves through Delete, Pause or
//! a restart, and the API's evictor is what sends that Delete.

use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use stampede_id::Id;

use crate::config::{CpuPercentModel, FailureCode, NodeSpec, RpcKind};
pub use crate::rejection::{CreateRejection, NotFound};
pub use crate::snapshot::{Counters, CreateRequest, MetricsSnapshot, Sandbox, ServiceStatus};
use crate::starting::StartingQueue;
pub use crate::starting::{Ticket, WaitState};

mod inventory;
mod labels;
#[cfg(test)]
mod tests;
pub use inventory::SandboxKey;
use inventory::{Held, Inventory, Phase};

/// Longest sandbox, template, team or execution id a create may carry, in bytes.
///
/// E2B's ids are far shorter (a sandbox id is `i` and 20 characters); the bound keeps a
/// hostile client from storing megabytes per sandbox, which every `List` would echo.
pub const MAX_ID_BYTES: usize = 128;

/// One virtual orchestrator node.
///
/// A simulator holds thousands at once, so what most nodes never use is boxed (a lagged
/// or frozen metrics snapshot, a queue of calls waiting for a starting slot) and the
/// spec is shared ([`new`](Self::new) takes an `Arc`).
#[derive(Debug, Clone)]
pub struct NodeModel {
    id: Id,
    spec: Arc<NodeSpec>,
    rng: ChaCha8Rng,
    service_id: String,
    started_at: Duration,
    baseline_vcpu: u32,
    idle_cpu_percent: u32,
    status: ServiceStatus,
    /// The starting and the running sandboxes.
    sandboxes: Inventory,
    /// Calls waiting for a starting slot, and slots handed to them; `None` until the
    /// first call waits.
    waiters: Option<Box<StartingQueue>>,
    counters: Counters,
    last_now: Duration,
    lagged: Option<Box<(u128, MetricsSnapshot)>>,
    /// Offset of this node's host-CPU sampling ticks from its start (a real host's
    /// sampler starts with its process, at an arbitrary phase).
    cpu_phase: Duration,
    /// Host CPU% as last sampled, with the sampling period it belongs to.
    cpu_sample: Option<(u128, u32)>,
    frozen: Option<Box<MetricsSnapshot>>,
}

impl NodeModel {
    /// A fresh node; every random choice it makes derives from `rng_seed`. Nodes of one
    /// spec may share it (`Arc::clone`).
    pub fn new(id: String, spec: impl Into<Arc<NodeSpec>>, rng_seed: u64) -> Self {
        let spec = spec.into();
        let mut rng = ChaCha8Rng::seed_from_u64(rng_seed);
        let b = spec.baseline_vcpu;
        let baseline_vcpu = if b.max > b.min {
            rng.random_range(b.min..=b.max)
        } else {
            b.min
        };
        let service_id = new_service_id(&mut rng);
        let p = spec.idle_cpu_percent;
        let idle_cpu_percent = if p.max > p.min {
            rng.random_range(p.min..=p.max)
        } else {
            p.min
        };
        let period = spec.cpu_percent_period.as_nanos();
        let cpu_phase = if period > 1 {
            Duration::from_nanos(rng.random_range(0..period.min(u128::from(u64::MAX)) as u64))
        } else {
            Duration::ZERO
        };
        Self {
            id: Id::new(&id),
            spec,
            rng,
            service_id,
            started_at: Duration::ZERO,
            baseline_vcpu,
            idle_cpu_percent,
            status: ServiceStatus::Healthy,
            sandboxes: Inventory::default(),
            waiters: None,
            counters: Counters::default(),
            last_now: Duration::ZERO,
            lagged: None,
            cpu_phase,
            cpu_sample: None,
            frozen: None,
        }
    }

    /// The same node with its background host load set to `percent` (a fleet draws
    /// these together so that no two of its nodes share one, see
    /// [`ClusterConfig::idle_cpu_percents`](crate::config::ClusterConfig::idle_cpu_percents)).
    pub fn with_idle_cpu_percent(mut self, percent: u32) -> Self {
        self.idle_cpu_percent = percent;
        self.cpu_sample = None;
        self
    }

    /// Background host load drawn for this node (see [`NodeSpec::idle_cpu_percent`](crate::config::NodeSpec::idle_cpu_percent)).
    pub fn idle_cpu_percent(&self) -> u32 {
        self.idle_cpu_percent
    }

    /// Node id (`node-03`).
    pub fn id(&self) -> &str {
        self.id.as_str()
    }
    /// The spec the node follows.
    pub fn spec(&self) -> &NodeSpec {
        &self.spec
    }
    /// Id of the current incarnation; changes at every restart.
    pub fn service_id(&self) -> &str {
        &self.service_id
    }
    /// When the current incarnation started.
    pub fn started_at(&self) -> Duration {
        self.started_at
    }
    /// Warm-up vCPU drawn at construction (an allocation offset, not sandboxes).
    pub fn baseline_vcpu(&self) -> u32 {
        self.baseline_vcpu
    }
    /// Status the node reports.
    pub fn status(&self) -> ServiceStatus {
        self.status
    }
    /// Sets the status the node reports (a `status` fault).
    pub fn set_status(&mut self, status: ServiceStatus) {
        self.status = status;
    }
    /// Creates admitted and not yet finished.
    pub fn starting_count(&self) -> usize {
        self.sandboxes.len(Phase::Starting)
    }
    /// Whether a Create from a snapshot must wait for a starting slot: every one of
    /// `max_starting` is taken by a create or held for a woken waiter, and the node is not at `max_sandboxes` (which refuses at
    /// once, before any wait, as E2B's Create handler checks it first).
    pub fn starting_slots_full(&self) -> bool {
        !self.at_max_sandboxes() && self.free_starting_slots() == Some(0)
    }

    fn at_max_sandboxes(&self) -> bool {
        let s = &self.spec;
        s.max_sandboxes > 0 && self.sandboxes.len(Phase::Running) >= s.max_sandboxes as usize
    }

    /// Starting slots free now (`None` = no limit): neither taken by a create nor held
    /// for a waiter that was handed one.
    fn free_starting_slots(&self) -> Option<usize> {
        let max = self.spec.max_starting as usize;
        (max > 0)
            .then(|| max.saturating_sub(self.sandboxes.len(Phase::Starting) + self.held_slots()))
    }

    /// A call that needs a starting slot (a Create from a snapshot, a Checkpoint): `None`
    /// when it goes on to admission now, else its place at the end of the node's queue
    /// ([`starting`](crate::starting)). A queue only forms while every slot is taken, so
    /// nobody passes an older waiter.
    pub fn join_starting_wait(&mut self) -> Option<Ticket> {
        self.starting_slots_full()
            .then(|| self.waiters.get_or_insert_with(Box::default).join())
    }

    /// Calls waiting for a starting slot, not yet handed one.
    pub fn starting_waiters(&self) -> usize {
        self.waiters.as_ref().map_or(0, |w| w.waiting())
    }

    /// Slots held for woken waiters that have not gone on to admission yet.
    fn held_slots(&self) -> usize {
        self.waiters.as_ref().map_or(0, |w| w.held())
    }

    /// Where the waiting call `t` stands.
    pub fn starting_wait(&self, t: Ticket) -> WaitState {
        match &self.waiters {
            Some(w) => w.state(t),
            None => WaitState::Gone,
        }
    }

    /// The waiting call `t` leaves the queue: it gave up, was cancelled, or goes on to
    /// admission under this same lock (the slot held for it is then free for its create
    /// and for nobody else in between).
    pub fn leave_starting_wait(&mut self, t: Ticket) {
        if let Some(w) = &mut self.waiters {
            w.leave(t);
        }
    }

    /// Hands the free starting slots to the oldest waiters (or lets every waiter go when
    /// the node is at `max_sandboxes`). Whether anyone was woken. Drivers call it after
    /// every change to the node.
    pub fn wake_starting_waiters(&mut self) -> bool {
        if self.starting_waiters() == 0 {
            return false;
        }
        let at_max = self.at_max_sandboxes();
        let free = self.free_starting_slots().unwrap_or(usize::MAX);
        self.waiters.as_mut().is_some_and(|w| w.wake(free, at_max))
    }

    /// Whether `sandbox_id` runs on the node (started, not being started).
    pub fn is_running(&self, sandbox_id: &str) -> bool {
        self.running_key(sandbox_id).is_some()
    }

    /// The key of `sandbox_id` if it runs on the node.
    fn running_key(&self, sandbox_id: &str) -> Option<SandboxKey> {
        self.sandboxes
            .find(sandbox_id)
            .and_then(|(key, phase)| (phase == Phase::Running).then_some(key))
    }

    /// The key of `sandbox_id` if the node is starting it.
    fn starting_key(&self, sandbox_id: &str) -> Option<SandboxKey> {
        self.sandboxes
            .find(sandbox_id)
            .and_then(|(key, phase)| (phase == Phase::Starting).then_some(key))
    }

    /// Counts `n` refusals for `reason` at once (a simulator's parked retries).
    pub fn count_refusals(&mut self, reason: &str, n: u64) {
        if n > 0 {
            self.counters.count_rejected(reason, n);
        }
    }

    /// Create/delete counters so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Takes a new host CPU sample and refreshes the lagged metrics snapshot when their
    /// periods ended. Every other call does this first, before changing anything, so
    /// the state it samples is the state at the period's start (nothing changed between
    /// two calls); drivers may also call it on a timer.
    pub fn advance(&mut self, now: Duration) {
        let now = now.max(self.last_now);
        self.last_now = now;
        // Zero period means a live figure: no sample kept.
        let since_start = now.saturating_sub(self.started_at) + self.cpu_phase;
        if let Some(p) = since_start
            .as_nanos()
            .checked_div(self.spec.cpu_percent_period.as_nanos())
        {
            if self.cpu_sample.is_none_or(|(q, _)| q != p) {
                self.cpu_sample = Some((p, self.cpu_percent()));
            }
        }
        // Zero lag means live metrics: no period, no snapshot.
        if let Some(period) = now.as_nanos().checked_div(self.spec.metrics_lag.as_nanos()) {
            if self.lagged.as_ref().is_none_or(|l| l.0 != period) {
                let snap = self.live_metrics(now);
                match &mut self.lagged {
                    Some(l) => **l = (period, snap),
                    None => self.lagged = Some(Box::new((period, snap))),
                }
            }
        }
    }

    /// Validates and admits a create; on success the sandbox is *starting* until
    /// [`finish_create`](Self::finish_create) or [`abort_create`](Self::abort_create),
    /// and the key returned names it until it leaves the node.
    pub fn begin_create(
        &mut self,
        req: CreateRequest,
        now: Duration,
    ) -> Result<SandboxKey, CreateRejection> {
        self.advance(now);
        let r = self.admit(&req);
        match r {
            Ok((vcpu, ram_mb)) => {
                let held = Held {
                    labels: self.sandboxes.share_labels(
                        req.template_id,
                        req.team_id,
                        req.execution_id,
                    ),
                    ram_mb,
                    start: self.last_now,
                    end: req.end_time,
                    vcpu,
                };
                Ok(self.sandboxes.insert(req.sandbox_id, held, Phase::Starting))
            }
            Err(e) => Err(self.reject(e)),
        }
    }

    fn admit(&self, req: &CreateRequest) -> Result<(u32, u64), CreateRejection> {
        let invalid = CreateRejection::InvalidArgument;
        if req.sandbox_id.is_empty() {
            return Err(invalid(
                "sandbox config with a non-empty sandbox_id is required".into(),
            ));
        }
        for (field, id) in [
            ("sandbox_id", &req.sandbox_id),
            ("template_id", &req.template_id),
            ("team_id", &req.team_id),
            ("execution_id", &req.execution_id),
        ] {
            if id.len() > MAX_ID_BYTES {
                // Not echoed: it may be megabytes.
                return Err(invalid(format!(
                    "{field} is {} bytes long, at most {MAX_ID_BYTES} allowed",
                    id.len()
                )));
            }
        }
        // A sandbox larger than the whole node is a malformed request, not a full node.
        let s = &self.spec;
        let vcpu = match u32::try_from(req.vcpu) {
            _ if req.vcpu <= 0 => {
                return Err(invalid(format!("vcpu must be > 0, got {}", req.vcpu)));
            }
            Ok(v) if v <= s.cpu_count => v,
            _ => {
                return Err(invalid(format!(
                    "vcpu {} is more than the node's {} CPUs",
                    req.vcpu, s.cpu_count
                )));
            }
        };
        let ram_mb = match u64::try_from(req.ram_mb) {
            _ if req.ram_mb <= 0 => {
                return Err(invalid(format!("ram_mb must be > 0, got {}", req.ram_mb)));
            }
            Ok(v) if v <= s.memory_mib => v,
            _ => {
                return Err(invalid(format!(
                    "ram_mb {} is more than the node's {} MiB",
                    req.ram_mb, s.memory_mib
                )));
            }
        };
        if self.sandboxes.find(&req.sandbox_id).is_some() {
            return Err(CreateRejection::AlreadyExists(req.sandbox_id.to_string()));
        }
        self.capacity_refusal(vcpu)?;
        Ok((vcpu, ram_mb))
    }

    /// The refusal a valid create of `vcpu` would get from the node's limits as they
    /// stand (sandboxes, starting creates, vCPU overcommit), without recording it: what
    /// a simulator asks to know that a retry cannot succeed before the node changes.
    pub fn capacity_refusal(&self, vcpu: u32) -> Result<(), CreateRejection> {
        let s = &self.spec;
        if s.max_sandboxes > 0 && self.sandboxes.len(Phase::Running) >= s.max_sandboxes as usize {
            return Err(CreateRejection::MaxSandboxes(s.max_sandboxes));
        }
        if self.free_starting_slots() == Some(0) {
            return Err(CreateRejection::MaxStarting(s.max_starting));
        }
        if s.overcommit > 0.0 {
            // Creates in progress hold their vCPU too, or concurrent creates would overshoot.
            let allocated = u64::from(self.baseline_vcpu)
                .saturating_add(self.sandboxes.vcpu(Phase::Running))
                .saturating_add(self.sandboxes.vcpu(Phase::Starting));
            let capacity = s.overcommit * f64::from(s.cpu_count);
            if allocated.saturating_add(u64::from(vcpu)) as f64 > capacity {
                return Err(CreateRejection::Overcommit {
                    allocated,
                    requested: u64::from(vcpu),
                    capacity,
                });
            }
        }
        Ok(())
    }

    /// Counts a rejection decided outside the model (e.g. an `exhaust` fault) and returns it.
    pub fn reject(&mut self, r: CreateRejection) -> CreateRejection {
        self.counters.count_rejected(r.reason(), 1);
        r
    }

    /// Completes an admitted create: the sandbox runs from `now`. `NotFound` when the
    /// create is no longer in progress (the node restarted meanwhile); that counts as failed.
    pub fn finish_create(&mut self, sandbox_id: &str, now: Duration) -> Result<(), NotFound> {
        self.advance(now);
        let key = self.starting_key(sandbox_id);
        if self.finish_started(key) {
            Ok(())
        } else {
            Err(NotFound(sandbox_id.to_string()))
        }
    }

    /// [`finish_create`](Self::finish_create) of the create admitted under `key`:
    /// whether it was still in progress.
    pub fn finish_create_by_key(&mut self, key: SandboxKey, now: Duration) -> bool {
        self.advance(now);
        self.finish_started(Some(key))
    }

    fn finish_started(&mut self, key: Option<SandboxKey>) -> bool {
        let started = key.is_some_and(|k| self.sandboxes.start_running(k, self.last_now));
        if started {
            self.counters.creates_ok += 1;
        } else {
            self.counters.creates_failed += 1;
        }
        started
    }

    /// Abandons an admitted create (caller went away, injected failure): counted as failed.
    pub fn abort_create(&mut self, sandbox_id: &str, now: Duration) {
        self.advance(now);
        let key = self.starting_key(sandbox_id);
        self.abort_started(key);
    }

    /// [`abort_create`](Self::abort_create) of the create admitted under `key`.
    pub fn abort_create_by_key(&mut self, key: SandboxKey, now: Duration) {
        self.advance(now);
        self.abort_started(Some(key));
    }

    fn abort_started(&mut self, key: Option<SandboxKey>) {
        if key.is_some_and(|k| self.sandboxes.remove(k, Phase::Starting).is_some()) {
            self.counters.creates_failed += 1;
        }
    }

    /// Counts a create that failed by an injected error before admission.
    pub fn count_failed_create(&mut self) {
        self.counters.creates_failed += 1;
    }

    /// Removes a running sandbox.
    pub fn delete(&mut self, sandbox_id: &str, now: Duration) -> Result<Sandbox, NotFound> {
        self.advance(now);
        self.running_key(sandbox_id)
            .and_then(|key| self.remove_running(key))
            .ok_or_else(|| NotFound(sandbox_id.to_string()))
    }

    /// [`delete`](Self::delete) of the sandbox admitted under `key`: `None` when it no
    /// longer runs on the node.
    pub fn delete_by_key(&mut self, key: SandboxKey, now: Duration) -> Option<Sandbox> {
        self.advance(now);
        self.remove_running(key)
    }

    fn remove_running(&mut self, key: SandboxKey) -> Option<Sandbox> {
        let sb = self.sandboxes.remove(key, Phase::Running)?;
        self.counters.deletes_ok += 1;
        Some(sb)
    }

    /// Changes the `end_time` a running sandbox reports (`None` = none). The node does
    /// not act on it: the API's evictor does.
    pub fn update_end_time(
        &mut self,
        sandbox_id: &str,
        end: Option<Duration>,
        now: Duration,
    ) -> Result<(), NotFound> {
        self.advance(now);
        let held = self
            .running_key(sandbox_id)
            .and_then(|key| self.sandboxes.get_mut(key, Phase::Running))
            .ok_or_else(|| NotFound(sandbox_id.to_string()))?;
        held.end = end;
        Ok(())
    }

    /// Running sandboxes, by id.
    pub fn list(&mut self, now: Duration) -> Vec<Sandbox> {
        self.advance(now);
        let mut all: Vec<Sandbox> = self.sandboxes.running_sandboxes().collect();
        all.sort_unstable_by(|a, b| a.sandbox_id.cmp(&b.sandbox_id));
        all
    }

    /// What `ServiceInfo` reports now: frozen snapshot, else the lagged one, else live.
    pub fn metrics(&mut self, now: Duration) -> MetricsSnapshot {
        self.advance(now);
        if let Some(f) = &self.frozen {
            return MetricsSnapshot::clone(f);
        }
        match self.lagged.as_deref() {
            Some((_, snap)) if !self.spec.metrics_lag.is_zero() => snap.clone(),
            _ => self.live_metrics(self.last_now),
        }
    }

    /// The true allocation now, ignoring lag and freezes (what the admin API reports).
    pub fn truth(&mut self, now: Duration) -> MetricsSnapshot {
        self.advance(now);
        self.live_metrics(self.last_now)
    }

    /// `(sandboxes running, allocated vCPU)` now, as [`truth`](Self::truth) reports
    /// them, without building a snapshot (a simulator samples every node every second).
    pub fn truth_counts(&mut self, now: Duration) -> (u32, u32) {
        self.advance(now);
        let allocated =
            u64::from(self.baseline_vcpu).saturating_add(self.sandboxes.vcpu(Phase::Running));
        (
            u32::try_from(self.sandboxes.len(Phase::Running)).unwrap_or(u32::MAX),
            u32::try_from(allocated).unwrap_or(u32::MAX),
        )
    }

    /// Keeps serving the metrics reported now until [`unfreeze_metrics`](Self::unfreeze_metrics).
    pub fn freeze_metrics(&mut self, now: Duration) {
        if self.frozen.is_none() {
            self.frozen = Some(Box::new(self.metrics(now)));
        }
    }

    /// Ends a metrics freeze.
    pub fn unfreeze_metrics(&mut self) {
        self.frozen = None;
    }

    /// Whether metrics are frozen.
    pub fn metrics_frozen(&self) -> bool {
        self.frozen.is_some()
    }

    /// A crash: every sandbox (running or starting) is lost, a new `service_id` is drawn.
    pub fn restart(&mut self, now: Duration) {
        self.advance(now);
        self.sandboxes.clear();
        self.service_id = new_service_id(&mut self.rng);
        self.started_at = self.last_now;
        self.counters.restarts += 1;
        // A new process primes its host sampler at once (`HostMetrics.Start`).
        self.cpu_phase = Duration::ZERO;
        self.cpu_sample = None;
        self.lagged = None;
        self.frozen = None;
        self.advance(now);
    }

    /// Draws a create latency.
    pub fn sample_create_latency(&mut self) -> Duration {
        self.spec.create_latency.sample(&mut self.rng)
    }

    /// Draws a delete latency.
    pub fn sample_delete_latency(&mut self) -> Duration {
        self.spec.delete_latency.sample(&mut self.rng)
    }

    /// Draws the configured failure rules for one call of `rpc`: the code of the first
    /// rule that fires, if any.
    pub fn sample_failure(&mut self, rpc: RpcKind) -> Option<FailureCode> {
        let mut hit = None;
        for rule in &self.spec.failures {
            if hit.is_none() && (rule.rpc == rpc || rule.rpc == RpcKind::Any) {
                let p = rule.probability.clamp(0.0, 1.0);
                if p > 0.0 && self.rng.random_bool(p) {
                    hit = Some(rule.code);
                }
            }
        }
        hit
    }

    /// True with probability `p` (clamped to `[0, 1]`), from the node's own RNG.
    pub fn chance(&mut self, p: f64) -> bool {
        let p = if p.is_finite() {
            p.clamp(0.0, 1.0)
        } else {
            0.0
        };
        p > 0.0 && self.rng.random_bool(p)
    }

    fn live_metrics(&self, now: Duration) -> MetricsSnapshot {
        let s = &self.spec;
        let allocated =
            u64::from(self.baseline_vcpu).saturating_add(self.sandboxes.vcpu(Phase::Running));
        let allocated_vcpu = u32::try_from(allocated).unwrap_or(u32::MAX);
        let cpu_percent = match self.cpu_sample {
            Some((_, sampled)) if !self.spec.cpu_percent_period.is_zero() => sampled,
            _ => self.cpu_percent(),
        };
        let mem_mib = self.sandboxes.running_ram_mb();
        let mem_bytes = mem_mib.saturating_mul(1 << 20);
        MetricsSnapshot {
            taken_at: now,
            allocated_vcpu,
            cpu_count: s.cpu_count,
            cpu_percent,
            memory_allocated_bytes: mem_bytes,
            memory_used_bytes: (mem_bytes as f64 * s.busy_fraction.clamp(0.0, 1.0)) as u64,
            memory_total_bytes: s.memory_mib.saturating_mul(1 << 20),
            sandboxes_running: u32::try_from(self.sandboxes.len(Phase::Running))
                .unwrap_or(u32::MAX),
            sandbox_ids: self.sorted_ids(),
        }
    }
}

impl NodeModel {
    /// Ids of the running sandboxes, sorted.
    fn sorted_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .sandboxes
            .running_ids()
            .map(|id| id.to_string())
            .collect();
        ids.sort_unstable();
        ids
    }

    /// `metric_cpu_percent` of the node's state now, per the spec's [`CpuPercentModel`],
    /// before any sampling period applies.
    fn cpu_percent(&self) -> u32 {
        let s = &self.spec;
        let idle = f64::from(self.idle_cpu_percent);
        let sandboxes = self.sandboxes.vcpu(Phase::Running) as f64;
        let percent = match s.cpu_percent {
            CpuPercentModel::Host => {
                let allocated = f64::from(self.baseline_vcpu) + sandboxes;
                let busy = s.busy_fraction * allocated;
                (idle + 100.0 * busy / f64::from(s.cpu_count.max(1))).clamp(0.0, 100.0)
            }
            CpuPercentModel::PerSandbox => idle + 100.0 * s.busy_fraction * sandboxes,
        };
        // `as` saturates: a figure past u32 reads as the most, never wraps.
        percent.round() as u32
    }
}

fn new_service_id(rng: &mut ChaCha8Rng) -> String {
    let x: u128 = rng.random();
    let h = format!("{x:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}
