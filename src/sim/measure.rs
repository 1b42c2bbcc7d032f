//! What a simulated run records (outcomes, latency, timeline, accounting error, fault
//! windows) and how it becomes the report's [`RunResult`].

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use super::engine::Engine;
use super::faults::PlannedFault;
use super::queue::Nanos;
use super::setup::{to_duration, SimSetup};
use crate::placement::{CreateOutcome, CreateStatus, Placer};
use crate::report::{
    AccountingError, FaultWindow, LatencySummary, NodeFigures, RetryStorm, RunResult, SendTiming,
    SkewOverTime, SkewStats, TimelinePoint,
};

/// Outcome counters and samples, folded as events happen.
pub(super) struct Tally {
    latency_us: Histogram<u64>,
    lateness_us: Histogram<u64>,
    first_sent: Option<Nanos>,
    last_sent: Nanos,
    statuses: BTreeMap<CreateStatus, u64>,
    pub retries: u64,
    pub refusals: u64,
    pub delete_failures: u64,
    timeline: Vec<TimelinePoint>,
    err_sum: f64,
    err_max: f64,
    err_samples: u64,
    windows: Vec<FaultWindow>,
    spans: Vec<(Nanos, Option<Nanos>)>,
    /// Per chaos step: when the service last sent a create to one of its nodes.
    last_chosen: Vec<Option<Nanos>>,
    /// ResourceExhausted retries per second of virtual time, per node.
    pub retry_bins: Vec<Vec<u64>>,
    nodes: usize,
    /// Creates that landed per node so far.
    placed: Vec<u64>,
}

fn histogram() -> Histogram<u64> {
    // Same bounds as the real run's ledger (1 us .. 1 h, 3 significant digits).
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("constant histogram bounds are valid")
}

fn ms(t: Nanos) -> f64 {
    t as f64 / 1e6
}

impl Tally {
    pub fn new(setup: &SimSetup) -> Self {
        Tally {
            latency_us: histogram(),
            lateness_us: histogram(),
            first_sent: None,
            last_sent: 0,
            statuses: BTreeMap::new(),
            retries: 0,
            refusals: 0,
            delete_failures: 0,
            timeline: Vec::new(),
            err_sum: 0.0,
            err_max: 0.0,
            err_samples: 0,
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
            retry_bins: Vec::new(),
            nodes: setup.cluster.nodes,
            placed: vec![0; setup.cluster.nodes],
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
            if self.retry_bins.len() <= bin {
                self.retry_bins.resize_with(bin + 1, Vec::new);
            }
            let row = &mut self.retry_bins[bin];
            if row.is_empty() {
                row.resize(self.nodes, 0);
            }
            if let Some(c) = row.get_mut(node as usize) {
                *c += in_bin;
            }
            left -= in_bin;
            t = t.saturating_add(in_bin.saturating_mul(period));
        }
    }

    /// A request left `late` after its intended time.
    pub fn sent(&mut self, now: Nanos, late: Nanos) {
        self.first_sent.get_or_insert(now);
        self.last_sent = now;
        self.lateness_us.saturating_record(late / 1000);
    }

    /// A request sent at `sent` was answered `status` after `latency` (from its
    /// intended time).
    pub fn answered(&mut self, status: CreateStatus, latency: Nanos, sent: Nanos) {
        *self.statuses.entry(status).or_default() += 1;
        self.latency_us.saturating_record((latency / 1000).max(1));
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
        if let Some(c) = self.placed.get_mut(node as usize) {
            *c += 1;
        }
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
        let mut err_sum = 0.0;
        let mut err_n = 0u64;
        for core in self.placers.iter().map(Placer::core) {
            // Every core tracks the nodes in node order (added so in `Engine::new`).
            for (view, truth) in core.nodes().zip(&allocated) {
                let d = (view.believed_allocated_vcpu(mode) as f64 - truth).abs();
                err_sum += d;
                err_n += 1;
                self.tally.err_max = self.tally.err_max.max(d);
            }
        }
        self.tally.err_sum += err_sum;
        self.tally.err_samples += err_n;
        self.tally.timeline.push(TimelinePoint {
            t_ms: ms(self.now),
            sandboxes: counts,
            accounting_error_vcpu: (err_n > 0).then(|| err_sum / err_n as f64),
            placed: self.tally.placed.clone(),
        });
    }

    /// The run's figures at its end (`end` = when the workload finished).
    pub(super) fn result(
        &mut self,
        label: String,
        settings: BTreeMap<String, String>,
    ) -> RunResult {
        if self
            .tally
            .timeline
            .last()
            .is_none_or(|p| p.t_ms < ms(self.now))
        {
            self.sample();
        }
        let now = to_duration(self.now);
        let mode = self.setup.placement.mode;
        let mut believed = vec![0.0; self.nodes.len()];
        for core in self.placers.iter().map(Placer::core) {
            for (sum, view) in believed.iter_mut().zip(core.nodes()) {
                *sum += view.believed_allocated_vcpu(mode) as f64;
            }
        }
        let replicas = self.placers.len() as f64;
        let mut nodes = Vec::with_capacity(self.nodes.len());
        for (n, believed) in self.nodes.iter_mut().zip(believed) {
            let truth = n.model.truth(now);
            nodes.push(NodeFigures {
                id: n.id.clone(),
                sandboxes: u64::from(truth.sandboxes_running),
                allocated_vcpu: f64::from(truth.allocated_vcpu),
                believed_vcpu: (replicas > 0.0).then(|| believed / replicas),
            });
        }
        let counts: Vec<u64> = nodes.iter().map(|n| n.sandboxes).collect();
        let checker = self.set_ledger.take().map(|ledger| {
            let inventory = self
                .nodes
                .iter_mut()
                .map(|n| {
                    let ids = n.model.list(now).into_iter().map(|s| s.sandbox_id);
                    (n.id.clone(), ids.collect())
                })
                .collect();
            ledger.check(self.setup, inventory, self.now)
        });
        let t = &mut self.tally;
        let requests: u64 = t.statuses.values().sum();
        let ok = t.statuses.get(&CreateStatus::Created).copied().unwrap_or(0);
        let burst = matches!(self.setup.arrivals, super::setup::Arrivals::Burst { .. });
        let send = if burst {
            SendTiming {
                burst_spread_ms: t.first_sent.map(|f| ms(t.last_sent - f)),
                ..SendTiming::default()
            }
        } else if t.lateness_us.is_empty() {
            SendTiming::default()
        } else {
            let q = |x: f64| t.lateness_us.value_at_quantile(x) as f64 / 1000.0;
            SendTiming {
                burst_spread_ms: None,
                lateness_p50_ms: Some(q(0.5)),
                lateness_p99_ms: Some(q(0.99)),
                lateness_max_ms: Some(t.lateness_us.max() as f64 / 1000.0),
                ..SendTiming::default()
            }
        };
        let mut windows = std::mem::take(&mut t.windows);
        for (w, last) in windows.iter_mut().zip(&t.last_chosen) {
            w.healed_at_ms.get_or_insert(ms(self.now));
            let applied = w.applied_at_ms;
            w.time_to_avoid_ms = Some(last.map_or(0.0, |l| (ms(l) - applied).max(0.0)));
        }
        RunResult {
            label,
            settings,
            nodes,
            skew: SkewStats::from_counts(&counts),
            skew_over_time: SkewOverTime::from_timeline(&t.timeline, &t.placed),
            retry_storm: RetryStorm::from_bins(&t.retry_bins, t.nodes),
            accounting_error: (t.err_samples > 0).then(|| AccountingError {
                mean_abs_vcpu: t.err_sum / t.err_samples as f64,
                max_abs_vcpu: t.err_max,
                samples: t.err_samples,
            }),
            latency: LatencySummary::from_histogram(&t.latency_us),
            statuses: t
                .statuses
                .iter()
                .map(|(k, v)| (k.as_str().to_string(), *v))
                .collect(),
            requests,
            ok,
            failed: requests - ok,
            error_rate: if requests == 0 {
                0.0
            } else {
                (requests - ok) as f64 / requests as f64
            },
            retries: t.retries,
            refusals: t.refusals,
            send,
            timeline: std::mem::take(&mut t.timeline),
            faults: windows,
            checker,
            wall_ms: ms(self.now),
            staging: None,
        }
    }
}
