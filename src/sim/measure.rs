//! What a simulated run records and how: the run's measurements go into the one
//! [`RunAggregate`] a real run feeds too, and the fault windows come from the one
//! [`fault_windows`] a real run uses, fed the records a real run measures: the
//! services' per-node create counters read at each fault's edges and at every sample
//! (from the simulated placement cores), and every request's times and outcome.

use super::engine::Engine;
use super::queue::Nanos;
use super::set_audit::audit_sets;
use super::setup::{to_duration, SimSetup};
use crate::aggregate::{
    fault_windows, CallSample, FaultRecord, RequestRecord, RunAggregate, RunShape, ServiceCounters,
};
use crate::collect::NodeCalls;
use crate::placement::{CreateStatus, Placer};
use crate::profile::RunSettings;
use crate::report::{FaultWindow, RunResult};
use crate::workload::Outcome;

/// The run's aggregate, the simulated service's counters, and the fault windows' records.
pub(super) struct Tally {
    agg: RunAggregate,
    /// Retries as the simulated service counts them (the report's `retries`).
    pub retries: u64,
    /// ResourceExhausted refusals (the report's `refusals`).
    pub refusals: u64,
    pub delete_failures: u64,
    /// Per chaos step: its window's record; `applied` says whether it ever started.
    faults: Vec<FaultRecord>,
    applied: Vec<bool>,
    /// Per chaos step: the services' counters on its nodes once it held, and just
    /// before its heal.
    in_force: Vec<Option<NodeCalls>>,
    before_heal: Vec<Option<NodeCalls>>,
    /// Every answered request, kept only when the run has chaos steps.
    requests: Option<Vec<SimRequest>>,
    /// When a replica's periodic sync ran, ms.
    syncs: Vec<f64>,
}

/// One answered request, for the fault windows.
#[derive(Clone, Copy)]
struct SimRequest {
    sent: Nanos,
    done: Nanos,
    latency: Nanos,
    status: CreateStatus,
    /// Where it landed (created only), as the service names it.
    node: Option<u32>,
}

/// Which edge of a fault the counters are read at.
#[derive(Clone, Copy)]
pub(super) enum Edge {
    /// Right after the fault took hold.
    InForce,
    /// Right before it heals.
    BeforeHeal,
}

fn ms(t: Nanos) -> f64 {
    t as f64 / 1e6
}

impl Tally {
    pub fn new(setup: &SimSetup) -> Self {
        let shape = match setup.arrivals {
            super::setup::Arrivals::Burst { .. } => RunShape::Burst,
            _ => RunShape::Paced,
        };
        let ids = (0..setup.cluster.nodes)
            .map(|k| setup.cluster.node_id(k))
            .collect();
        let n = setup.faults.len();
        Tally {
            syncs: Vec::new(),
            agg: RunAggregate::new(ids, shape),
            retries: 0,
            refusals: 0,
            delete_failures: 0,
            faults: setup
                .faults
                .iter()
                .map(|f| FaultRecord {
                    id: f.index.to_string(),
                    kind: f.name.to_string(),
                    nodes: f
                        .nodes
                        .iter()
                        .map(|&k| setup.cluster.node_id(k as usize))
                        .collect(),
                    ..FaultRecord::default()
                })
                .collect(),
            applied: vec![false; n],
            in_force: vec![None; n],
            before_heal: vec![None; n],
            requests: (n > 0).then(Vec::new),
        }
    }

    /// `n` ResourceExhausted retries on `node`, at `first`, `first + period`, ...
    pub fn retries_on(&mut self, node: u32, first: Nanos, period: Nanos, n: u64) {
        const SECOND: Nanos = 1_000_000_000;
        let period = period.max(1);
        let (mut t, mut left) = (first, n);
        while left > 0 {
            let bin = (t / SECOND) as usize;
            let in_bin = ((bin as Nanos + 1) * SECOND - t).div_ceil(period).min(left);
            self.agg.refused(node as usize, bin, in_bin);
            left -= in_bin;
            t = t.saturating_add(in_bin.saturating_mul(period));
        }
    }

    /// A replica's periodic sync ran at `now`.
    pub fn synced(&mut self, now: Nanos) {
        self.syncs.push(ms(now));
    }

    /// A request left `late` after its intended time.
    pub fn sent(&mut self, now: Nanos, late: Nanos) {
        self.agg.sent(ms(now), late / 1000);
    }

    /// A request sent at `sent` was answered `status` at `now`, `latency` after its
    /// intended time; `node`: where it landed, when it was created.
    pub fn answered(
        &mut self,
        status: CreateStatus,
        latency: Nanos,
        sent: Nanos,
        now: Nanos,
        node: Option<u32>,
    ) {
        self.agg
            .answered(&Outcome::from(status), ms(now - latency), latency / 1000);
        if let Some(requests) = &mut self.requests {
            requests.push(SimRequest {
                sent,
                done: now,
                latency,
                status,
                node,
            });
        }
    }

    /// A sandbox landed on node `node`.
    pub fn created_on(&mut self, node: u32) {
        self.agg.landed(node as usize);
    }

    /// Chaos step `f` started at `now` (it holds at once).
    pub fn fault_applied(&mut self, f: usize, now: Nanos) {
        if let Some(w) = self.faults.get_mut(f) {
            w.applied_at_ms = ms(now);
            w.in_force_at_ms = Some(ms(now));
            self.applied[f] = true;
        }
    }

    /// Chaos step `f` healed at `now`.
    pub fn fault_healed(&mut self, f: usize, now: Nanos) {
        if let Some(w) = self.faults.get_mut(f) {
            w.healed_at_ms = Some(ms(now));
        }
    }

    /// The services' counters on chaos step `f`'s nodes at one of its edges.
    pub fn fault_edge(&mut self, f: usize, edge: Edge, calls: NodeCalls) {
        let slot = match edge {
            Edge::InForce => self.in_force.get_mut(f),
            Edge::BeforeHeal => self.before_heal.get_mut(f),
        };
        if let Some(slot) = slot {
            *slot = Some(calls);
        }
    }
}

impl Engine<'_> {
    /// Per-node truth now, and |believed - true| vCPU of every replica for every node.
    pub(super) fn sample(&mut self) {
        let now = to_duration(self.now);
        let mode = self.setup.placement.mode;
        let reads = self.nodes.len() as u64 * (1 + self.placers.len() as u64);
        self.events = self.events.saturating_add(reads);
        let mut counts = Vec::with_capacity(self.nodes.len());
        let mut allocated = Vec::with_capacity(self.nodes.len());
        for n in &mut self.nodes {
            let (running, vcpu) = n.model.truth_counts(now);
            counts.push(u64::from(running));
            allocated.push(f64::from(vcpu));
        }
        // Every core tracks the nodes in node order (added so in `Engine::new`).
        let errors = self.placers.iter().map(Placer::core).flat_map(|core| {
            core.nodes()
                .zip(&allocated)
                .map(move |(view, truth)| (view.believed_allocated_vcpu(mode) as f64 - truth).abs())
        });
        self.tally.agg.sample(ms(self.now), counts, errors);
        // The services' counters, as a real run's sampler reads them from `GET /nodes`.
        for f in 0..self.setup.faults.len() {
            let calls = self.fault_calls(f);
            if let Some(w) = self.tally.faults.get_mut(f) {
                w.calls.push(CallSample {
                    t_ms: ms(self.now),
                    calls,
                });
            }
        }
    }

    /// Every replica's create counters on chaos step `f`'s nodes now, summed (E2B's
    /// `createSuccesses`, `createFails` and `sandboxStartingCount`, which a real run
    /// reads from each service's `GET /nodes`).
    fn fault_calls(&self, f: usize) -> NodeCalls {
        let mut total = NodeCalls::default();
        let Some(fault) = self.setup.faults.get(f) else {
            return total;
        };
        // Every core tracks the nodes in node order (added so in `Engine::new`).
        for core in self.placers.iter().map(Placer::core) {
            for (k, view) in core.nodes().enumerate() {
                if fault.nodes.binary_search(&(k as u32)).is_ok() {
                    total.ok += view.counters().create_successes;
                    total.failed += view.counters().create_fails;
                    total.starting += view.in_flight() as u64;
                }
            }
        }
        total
    }

    /// Reads the counters at one edge of chaos step `f`, as a real run's chaos stage
    /// does right after a fault holds and right before its heal.
    pub(super) fn fault_edge(&mut self, f: usize, edge: Edge) {
        let calls = self.fault_calls(f);
        self.tally.fault_edge(f, edge, calls);
    }

    /// The fault windows at the run's end. As a real run heals every fault still in
    /// force when its workload ends, reading the counters just before, so does this.
    fn windows(&mut self) -> Vec<FaultWindow> {
        let end = ms(self.now);
        for f in 0..self.tally.faults.len() {
            if self.tally.applied[f] && self.tally.faults[f].healed_at_ms.is_none() {
                self.fault_edge(f, Edge::BeforeHeal);
                self.tally.fault_healed(f, self.now);
            }
        }
        let t = &mut self.tally;
        let nodes = &self.nodes;
        let requests: Vec<RequestRecord<'_>> = t
            .requests
            .iter()
            .flatten()
            .map(|r| RequestRecord {
                sent_ms: ms(r.sent),
                done_ms: ms(r.done),
                latency_ms: ms(r.latency),
                created: r.status == CreateStatus::Created,
                timed_out: Outcome::from(r.status) == Outcome::Status(504),
                node: r
                    .node
                    .and_then(|k| nodes.get(k as usize))
                    .map(|n| n.id.as_str()),
            })
            .collect();
        let faults: Vec<FaultRecord> = t
            .faults
            .iter_mut()
            .enumerate()
            .filter(|(f, _)| t.applied[*f])
            .map(|(f, w)| {
                let mut w = std::mem::take(w);
                w.edges = t.in_force[f].zip(t.before_heal[f]);
                w
            })
            .collect();
        fault_windows(&faults, &requests, end)
    }

    /// The run's figures at its end (`end` = when the workload finished).
    pub(super) fn result(&mut self, label: String, settings: RunSettings) -> RunResult {
        if self
            .tally
            .agg
            .last_sample_ms()
            .is_none_or(|t| t < ms(self.now))
        {
            self.sample();
        }
        let now = to_duration(self.now);
        let mode = self.setup.placement.mode;
        let mut believed: Vec<Vec<f64>> =
            vec![Vec::with_capacity(self.placers.len()); self.nodes.len()];
        for core in self.placers.iter().map(Placer::core) {
            for (of_node, view) in believed.iter_mut().zip(core.nodes()) {
                of_node.push(view.believed_allocated_vcpu(mode) as f64);
            }
        }
        for (n, believed) in self.nodes.iter_mut().zip(believed) {
            let truth = n.model.truth(now);
            self.tally.agg.final_node(
                &n.id,
                u64::from(truth.sandboxes_running),
                f64::from(truth.allocated_vcpu),
                believed,
            );
        }
        let audit = self.set_ledger.take().map(|ledger| {
            let inventory = self
                .nodes
                .iter_mut()
                .map(|n| {
                    let ids = n
                        .model
                        .list(now)
                        .into_iter()
                        .map(|s| s.sandbox_id.to_string());
                    (n.id.to_string(), ids.collect())
                })
                .collect();
            let evicted = std::mem::take(&mut self.evictions)
                .into_iter()
                .map(|req| super::engine::sandbox_id(req).to_string())
                .collect();
            audit_sets(ledger, self.setup, inventory, evicted)
        });
        let t = &mut self.tally;
        t.agg.service(&ServiceCounters {
            retries: t.retries,
            refusals: t.refusals,
            ..ServiceCounters::default()
        });
        let end = ms(self.now);
        let mut agg = std::mem::take(&mut t.agg);
        if self.setup.lifecycle.is_some() {
            let ids: Vec<String> = self.nodes.iter().map(|n| n.id.to_string()).collect();
            agg.placements_by_kind(self.lives.placements_by_kind(&ids));
            agg.resumes(self.lives.resume_figures());
        }
        agg.faults(self.windows());
        agg.syncs(std::mem::take(&mut self.tally.syncs));
        if let Some(c) = audit {
            agg.set_audit(c);
        }
        agg.finish(label, settings, end)
    }
}
