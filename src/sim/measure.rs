//! What a simulated run records and how: the run's measurements go into the one
//! [`RunAggregate`] a real run feeds too; the fault windows are folded here from the
//! simulator's exact events (the service's choice of a faulty node, each landing).

use std::collections::BTreeMap;

use super::checker::check_sets;
use super::engine::Engine;
use super::faults::PlannedFault;
use super::queue::Nanos;
use super::setup::{to_duration, SimSetup};
use crate::aggregate::{RunAggregate, RunShape, ServiceCounters};
use crate::placement::{CreateOutcome, CreateStatus, Placer};
use crate::report::{FaultWindow, RunResult};
use crate::workload::Outcome;

/// The run's aggregate, the simulated service's counters, and the fault windows.
pub(super) struct Tally {
    agg: RunAggregate,
    /// Retries as the simulated service counts them (the report's `retries`).
    pub retries: u64,
    /// ResourceExhausted refusals (the report's `refusals`).
    pub refusals: u64,
    pub delete_failures: u64,
    windows: Vec<FaultWindow>,
    spans: Vec<(Nanos, Option<Nanos>)>,
    /// Per chaos step: when the service last sent a create to one of its nodes.
    last_chosen: Vec<Option<Nanos>>,
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
        Tally {
            agg: RunAggregate::new(ids, shape),
            retries: 0,
            refusals: 0,
            delete_failures: 0,
            windows: setup
                .faults
                .iter()
                .map(|f| FaultWindow {
                    id: f.index.to_string(),
                    kind: f.name.to_string(),
                    nodes: f
                        .nodes
                        .iter()
                        .map(|&k| setup.cluster.node_id(k as usize))
                        .collect(),
                    ..FaultWindow::default()
                })
                .collect(),
            spans: setup.faults.iter().map(|f| (f.at, None)).collect(),
            last_chosen: vec![None; setup.faults.len()],
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

    /// A request left `late` after its intended time.
    pub fn sent(&mut self, now: Nanos, late: Nanos) {
        self.agg.sent(ms(now), late / 1000);
    }

    /// A request sent at `sent` was answered `status` after `latency` (from its
    /// intended time).
    pub fn answered(&mut self, status: CreateStatus, latency: Nanos, sent: Nanos) {
        self.agg.answered(&Outcome::from(status), latency / 1000);
        let ok = status == CreateStatus::Created;
        for (w, (at, until)) in self.windows.iter_mut().zip(&self.spans) {
            if sent >= *at && until.is_none_or(|u| sent <= u) {
                w.attempted += 1;
                if ok {
                    w.ok += 1;
                } else {
                    w.failed += 1;
                }
                if status == CreateStatus::GatewayTimeout {
                    w.note_timed_out(ms(latency));
                }
            }
        }
    }

    /// A create sent at `sent` to a node with the chaos steps `faults` in force ended
    /// with `outcome`: the service chose a faulty node.
    pub fn create_outcome(&mut self, faults: &[usize], sent: Nanos, outcome: CreateOutcome) {
        for &f in faults {
            if let Some(w) = self.windows.get_mut(f) {
                w.placements_to_faulty += 1;
                if outcome == CreateOutcome::Failed {
                    *w.failed_on_faulty.get_or_insert(0) += 1;
                }
                let last = &mut self.last_chosen[f];
                *last = Some(last.map_or(sent, |l| l.max(sent)));
            }
        }
    }

    /// A sandbox landed on node `node` at `now`: a healed node receiving work again.
    pub fn created_on(&mut self, plan: &[PlannedFault], node: u32, now: Nanos) {
        self.agg.landed(node as usize);
        for (f, w) in self.windows.iter_mut().enumerate() {
            let Some(healed) = self.spans[f].1 else {
                continue;
            };
            if w.time_to_reuse_ms.is_none()
                && now >= healed
                && plan
                    .get(f)
                    .is_some_and(|p| p.nodes.binary_search(&node).is_ok())
            {
                w.time_to_reuse_ms = Some(ms(now - healed));
            }
        }
    }

    /// Chaos step `f` started at `now`.
    pub fn fault_applied(&mut self, f: usize, now: Nanos) {
        if let Some(w) = self.windows.get_mut(f) {
            w.applied_at_ms = ms(now);
        }
    }

    /// Chaos step `f` healed at `now`.
    pub fn fault_healed(&mut self, f: usize, now: Nanos) {
        if let Some(w) = self.windows.get_mut(f) {
            w.healed_at_ms = Some(ms(now));
        }
        if let Some(s) = self.spans.get_mut(f) {
            s.1 = Some(now);
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
    }

    /// The run's figures at its end (`end` = when the workload finished).
    pub(super) fn result(
        &mut self,
        label: String,
        settings: BTreeMap<String, String>,
    ) -> RunResult {
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
        let checker = self.set_ledger.take().map(|ledger| {
            let inventory = self
                .nodes
                .iter_mut()
                .map(|n| {
                    let ids = n.model.list(now).into_iter().map(|s| s.sandbox_id);
                    (n.id.clone(), ids.collect())
                })
                .collect();
            check_sets(ledger, self.setup, inventory, self.now)
        });
        let t = &mut self.tally;
        t.agg.service(&ServiceCounters {
            retries: t.retries,
            refusals: t.refusals,
            ..ServiceCounters::default()
        });
        let mut windows = std::mem::take(&mut t.windows);
        for (w, last) in windows.iter_mut().zip(&t.last_chosen) {
            w.healed_at_ms.get_or_insert(ms(self.now));
            let applied = w.applied_at_ms;
            w.time_to_avoid_ms = Some(last.map_or(0.0, |l| (ms(l) - applied).max(0.0)));
        }
        let mut result = std::mem::take(&mut t.agg).finish(label, settings, ms(self.now));
        result.faults = windows;
        result.checker = checker;
        result
    }
}
