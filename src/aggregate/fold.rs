//! [`RunAggregate`]: the running fold of one run's records, and the one builder of its
//! [`RunResult`].

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use super::latency_bins::LatencyBins;
use crate::profile::RunSettings;
use crate::report::{
    AccountingError, CleanupReport, FaultWindow, Figure, LatencySummary, NodeFigures,
    ResumeFigures, RetryStorm, RunResult, SendTiming, SetAudit, SkewOverTime, SkewStats,
    StagingFacts, TimelinePoint,
};
use crate::serve::{ArrivalWindow, ServiceCounters};
use crate::workload::OutcomeFold;
use crate::workload::{LedgerEntry, Outcome};

/// How the workload sent: which send figure the result reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunShape {
    /// All at once: the spread between the first and the last send.
    Burst,
    /// Paced (a rate or a test plan): how late sends were against their intended time.
    Paced,
}

/// Everything one run measured, folded record by record in time order: a landing fed
/// before a sample of the same instant counts in that sample's `placed`.
#[derive(Debug)]
pub struct RunAggregate {
    node_ids: Vec<String>,
    shape: RunShape,
    outcomes: OutcomeFold,
    latency_us: Histogram<u64>,
    latency_bins: LatencyBins,
    lateness_us: Histogram<u64>,
    /// (first, last) send, ms.
    sent: Option<(f64, f64)>,
    timeline: Vec<TimelinePoint>,
    err_sum: f64,
    err_max: f64,
    err_samples: u64,
    /// Refusals per second per node (node order), from the run's own records.
    storm: Vec<Vec<u64>>,
    retries: u64,
    refusals: u64,
    nodes: Vec<NodeFigures>,
    /// The facts only known once the workload is over (see [`LateFacts`]).
    late: LateFacts,
}

/// What a run learns after its workload: fed to the aggregate before
/// [`RunAggregate::finish`], so that nothing patches the result afterwards.
#[derive(Debug, Default)]
struct LateFacts {
    release_realtime: Option<bool>,
    placements_by_kind: BTreeMap<String, BTreeMap<String, u64>>,
    resumes: Option<ResumeFigures>,
    arrivals: Option<ArrivalWindow>,
    faults: Vec<FaultWindow>,
    set_audit: Option<SetAudit>,
    staging: Option<StagingFacts>,
    cleanup: Option<CleanupReport>,
    /// When the service's periodic syncs were, ms since the workload started.
    syncs: Option<Vec<f64>>,
    /// Whether `refusals` were counted by the nodes themselves (an external run whose
    /// truth source counts them).
    node_refusals: bool,
}

/// The |believed - true| vCPU errors of one truth sample, summed: what the fold keeps
/// of them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AccountingErrors {
    /// Their sum, added in the order given.
    pub sum: f64,
    /// How many there are.
    pub n: u64,
    /// The largest (0 when there are none).
    pub max: f64,
}

impl AccountingErrors {
    /// The errors `errors`, summed in order.
    pub fn of(errors: impl IntoIterator<Item = f64>) -> Self {
        let mut e = AccountingErrors::default();
        for d in errors {
            e.sum += d;
            e.n += 1;
            e.max = e.max.max(d);
        }
        e
    }
}

fn histogram() -> Histogram<u64> {
    // 1 us .. 1 h, 3 significant digits: as the workload's ledger.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("constant histogram bounds are valid")
}

impl Default for RunAggregate {
    /// An empty fold over no nodes.
    fn default() -> Self {
        RunAggregate::new(Vec::new(), RunShape::Paced)
    }
}

impl RunAggregate {
    /// An empty fold over the nodes `node_ids` (node order: the result's).
    pub fn new(node_ids: Vec<String>, shape: RunShape) -> Self {
        RunAggregate {
            outcomes: OutcomeFold::new(node_ids.len()),
            node_ids,
            shape,
            latency_us: histogram(),
            latency_bins: LatencyBins::default(),
            lateness_us: histogram(),
            sent: None,
            timeline: Vec::new(),
            err_sum: 0.0,
            err_max: 0.0,
            err_samples: 0,
            storm: Vec::new(),
            retries: 0,
            refusals: 0,
            nodes: Vec::new(),
            late: LateFacts::default(),
        }
    }

    /// The same fold over the nodes `node_ids`, known after the workload (a fold of
    /// sends and answers only, [`SettledCreates`](super::SettledCreates)'s): call before
    /// any landing, sample, refusal or node figure.
    pub fn with_nodes(mut self, node_ids: Vec<String>) -> Self {
        self.outcomes = self.outcomes.with_nodes(node_ids.len());
        self.node_ids = node_ids;
        self
    }

    /// A create left at `sent_ms`, `late_us` after its intended time.
    pub fn sent(&mut self, sent_ms: f64, late_us: u64) {
        self.sent = Some(match self.sent {
            None => (sent_ms, sent_ms),
            Some((lo, hi)) => (lo.min(sent_ms), hi.max(sent_ms)),
        });
        self.lateness_us.saturating_record(late_us);
    }

    /// The send and the answer of the create `e` ([`sent`](Self::sent), then
    /// [`answered`](Self::answered)).
    pub fn create(&mut self, e: &LedgerEntry) {
        let late_us = ((e.sent_ms - e.intended_ms).max(0.0) * 1000.0).round() as u64;
        self.sent(e.sent_ms, late_us);
        self.answered(&e.outcome, e.intended_ms, e.latency_us);
    }

    /// A create meant to leave at `intended_ms` was answered `outcome`, `latency_us`
    /// after that time.
    pub fn answered(&mut self, outcome: &Outcome, intended_ms: f64, latency_us: u64) {
        self.outcomes.answered(outcome);
        self.latency_us.saturating_record(latency_us.max(1));
        self.latency_bins.record(intended_ms, latency_us);
    }

    /// A sandbox landed on node `node` (index in node order).
    pub fn landed(&mut self, node: usize) {
        self.outcomes.landed(node);
    }

    /// A truth sample at `t_ms`: sandboxes per node (node order) and |believed - true|
    /// vCPU of every (replica, node) pair the replicas report.
    pub fn sample(
        &mut self,
        t_ms: f64,
        sandboxes: Vec<u64>,
        errors: impl IntoIterator<Item = f64>,
    ) {
        self.sample_errors(t_ms, sandboxes, AccountingErrors::of(errors));
    }

    /// [`sample`](Self::sample), its errors already summed.
    pub fn sample_errors(&mut self, t_ms: f64, sandboxes: Vec<u64>, errors: AccountingErrors) {
        let AccountingErrors { sum, n, max } = errors;
        if n > 0 {
            self.err_max = self.err_max.max(max);
        }
        self.err_sum += sum;
        self.err_samples += n;
        self.timeline.push(TimelinePoint {
            t_ms,
            sandboxes,
            accounting_error_vcpu: (n > 0).then(|| sum / n as f64),
            placed: self.outcomes.placed().to_vec(),
        });
    }

    /// When the last truth sample was taken.
    pub fn last_sample_ms(&self) -> Option<f64> {
        self.timeline.last().map(|p| p.t_ms)
    }

    /// `n` ResourceExhausted refusals by node `node` in whole second `second` of the run.
    pub fn refused(&mut self, node: usize, second: usize, n: u64) {
        if self.storm.len() <= second {
            self.storm.resize_with(second + 1, Vec::new);
        }
        let row = &mut self.storm[second];
        if row.is_empty() {
            row.resize(self.node_ids.len(), 0);
        }
        if let Some(c) = row.get_mut(node) {
            *c += n;
        }
    }

    /// The placement service's counters at the end of the run (every replica's, added
    /// up): its retries and refusals, and its own storm bins.
    pub fn service(&mut self, c: &ServiceCounters) {
        self.retries += c.retries;
        self.refusals += c.refusals;
        for (second, row) in c.storm_rows(&self.node_ids).into_iter().enumerate() {
            for (node, n) in row.into_iter().enumerate() {
                self.refused(node, second, n);
            }
        }
    }

    /// The creates the nodes refused during the run, counted by the nodes (a run
    /// against an external API whose truth source counts refusals): its `refusals`, the
    /// storm's bins fed through [`refused`](Self::refused).
    pub fn node_refusals(&mut self, total: u64) {
        self.refusals += total;
        self.late.node_refusals = true;
    }

    /// Final figures of node `id`: its truth and each replica's belief of its vCPU.
    pub fn final_node(
        &mut self,
        id: &str,
        sandboxes: u64,
        allocated_vcpu: f64,
        believed: impl IntoIterator<Item = f64>,
    ) {
        let (sum, n) = believed
            .into_iter()
            .fold((0.0, 0u32), |(s, n), b| (s + b, n + 1));
        self.nodes.push(NodeFigures {
            id: id.to_string(),
            sandboxes,
            allocated_vcpu,
            believed_vcpu: (n > 0).then(|| sum / f64::from(n)),
        });
    }

    /// Whether a burst's release loop ran at real-time priority (`None`: not a burst).
    pub fn release_realtime(&mut self, realtime: Option<bool>) {
        self.late.release_realtime = realtime;
    }

    /// What the placement service saw arrive (embedded runs): reported for a burst
    /// that sent, ignored otherwise.
    pub fn server_arrivals(&mut self, arrivals: ArrivalWindow) {
        self.late.arrivals = Some(arrivals);
    }

    /// The chaos fault windows, in order applied.
    pub fn faults(&mut self, faults: Vec<FaultWindow>) {
        self.late.faults = faults;
    }

    /// The set audit's findings.
    pub fn set_audit(&mut self, audit: SetAudit) {
        self.late.set_audit = Some(audit);
    }

    /// A run against an external API: its staging facts.
    pub fn staging(&mut self, staging: StagingFacts) {
        self.late.staging = Some(staging);
    }

    /// What the cleanup of an external run did (kept in its staging facts; ignored
    /// without them).
    pub fn cleanup(&mut self, cleanup: CleanupReport) {
        self.late.cleanup = Some(cleanup);
    }

    /// Placements per node by kind (create, resume) of a run with a lifecycle.
    pub fn placements_by_kind(&mut self, by_kind: BTreeMap<String, BTreeMap<String, u64>>) {
        self.late.placements_by_kind = by_kind;
    }

    /// What the resumes of a run with a lifecycle did.
    pub fn resumes(&mut self, resumes: Option<ResumeFigures>) {
        self.late.resumes = resumes;
    }

    /// When the placement service's periodic syncs were (or were due), ms since the
    /// workload started, in any order; the result keeps those within its timeline.
    pub fn syncs(&mut self, at_ms: impl IntoIterator<Item = f64>) {
        self.late.syncs = Some(at_ms.into_iter().collect());
    }

    /// The outcome part of the fold.
    pub fn outcomes(&self) -> &OutcomeFold {
        &self.outcomes
    }

    /// The report entry of the run: the last call, every late fact fed before it.
    pub fn finish(self, label: String, settings: RunSettings, wall_ms: f64) -> RunResult {
        let counts: Vec<u64> = self.nodes.iter().map(|n| n.sandboxes).collect();
        let requests = self.outcomes.requests();
        let failed = self.outcomes.failed();
        let late = self.late;
        let mut send = send_timing(self.shape, self.sent, &self.lateness_us);
        send.burst_release_realtime = late.release_realtime;
        if let (Some(_), Some(a)) = (send.burst_spread_ms, late.arrivals) {
            send.server_arrival_spread_ms = a.spread().map(|d| d.as_secs_f64() * 1000.0);
            send.server_arrivals = Some(a.count);
            send.server_arrivals_kernel_stamped = Some(a.kernel_stamped);
        }
        let staging = late.staging.map(|mut s| {
            s.cleanup = late.cleanup.or(s.cleanup);
            s
        });
        // An external API (a run with staging facts) exposes no retry or refusal
        // counters (refusals are known when its nodes count them), and its beliefs only
        // to an admin token.
        let mut not_measured = Vec::new();
        if staging.is_some() {
            not_measured.push(Figure::Retries);
            if !late.node_refusals {
                not_measured.push(Figure::Refusals);
            }
            if self.err_samples == 0 {
                not_measured.push(Figure::AccountingError);
            }
            let placed: u64 = self.outcomes.placed().iter().sum();
            if self.outcomes.created() > 0 && placed == 0 {
                not_measured.push(Figure::Placements);
            }
        }
        let end_ms = self.timeline.last().map_or(wall_ms, |p| p.t_ms);
        let sync_at_ms = late.syncs.map(|mut at| {
            at.retain(|t| t.is_finite() && (0.0..=end_ms).contains(t));
            at.sort_by(f64::total_cmp);
            at
        });
        RunResult {
            label,
            settings,
            skew: SkewStats::from_counts(&counts),
            nodes: self.nodes,
            skew_over_time: SkewOverTime::from_timeline(&self.timeline, self.outcomes.placed()),
            retry_storm: RetryStorm::from_bins(&self.storm, self.node_ids.len()),
            accounting_error: (self.err_samples > 0).then(|| AccountingError {
                mean_abs_vcpu: self.err_sum / self.err_samples as f64,
                max_abs_vcpu: self.err_max,
                samples: self.err_samples,
            }),
            placements_by_kind: late.placements_by_kind,
            resumes: late.resumes,
            latency: LatencySummary::from_histogram(&self.latency_us),
            latency_over_time: self.latency_bins.finish(),
            statuses: self.outcomes.statuses(),
            requests,
            ok: self.outcomes.created(),
            failed,
            error_rate: if requests == 0 {
                0.0
            } else {
                failed as f64 / requests as f64
            },
            retries: self.retries,
            refusals: self.refusals,
            send,
            timeline: self.timeline,
            sync_at_ms,
            faults: late.faults,
            set_audit: late.set_audit,
            wall_ms,
            staging,
            not_measured,
        }
    }
}

fn send_timing(
    shape: RunShape,
    sent: Option<(f64, f64)>,
    lateness_us: &Histogram<u64>,
) -> SendTiming {
    match shape {
        RunShape::Burst => SendTiming {
            burst_spread_ms: sent.map(|(lo, hi)| hi - lo),
            ..SendTiming::default()
        },
        RunShape::Paced if lateness_us.is_empty() => SendTiming::default(),
        RunShape::Paced => {
            let q = |x: f64| lateness_us.value_at_quantile(x) as f64 / 1000.0;
            SendTiming {
                burst_spread_ms: None,
                lateness_p50_ms: Some(q(0.5)),
                lateness_p99_ms: Some(q(0.99)),
                lateness_max_ms: Some(lateness_us.max() as f64 / 1000.0),
                ..SendTiming::default()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> Vec<String> {
        vec!["a".to_string(), "b".to_string()]
    }

    #[test]
    fn a_landing_counts_in_the_samples_after_it() {
        let mut agg = RunAggregate::new(ids(), RunShape::Burst);
        agg.sent(0.0, 0);
        agg.sent(4.0, 0);
        agg.answered(&Outcome::Status(201), 0.0, 1500);
        agg.answered(&Outcome::Status(503), 1200.0, 800);
        agg.sample(1.0, vec![0, 0], [1.0, 3.0]);
        agg.landed(1);
        agg.sample(2.0, vec![0, 1], []);
        agg.final_node("a", 0, 0.0, [0.0, 2.0]);
        agg.final_node("b", 1, 2.0, []);
        let r = agg.finish("optimistic".into(), RunSettings::default(), 7.0);
        assert_eq!(r.timeline[0].placed, vec![0, 0]);
        assert_eq!(r.timeline[1].placed, vec![0, 1]);
        assert_eq!(r.timeline[0].accounting_error_vcpu, Some(2.0));
        assert_eq!(r.timeline[1].accounting_error_vcpu, None);
        let e = r.accounting_error.expect("two pairs");
        assert_eq!((e.mean_abs_vcpu, e.max_abs_vcpu, e.samples), (2.0, 3.0, 2));
        assert_eq!((r.requests, r.ok, r.failed), (2, 1, 1));
        assert_eq!(r.error_rate, 0.5);
        assert_eq!(r.send.burst_spread_ms, Some(4.0));
        assert_eq!(r.nodes[0].believed_vcpu, Some(1.0));
        assert_eq!(r.nodes[1].believed_vcpu, None);
        assert_eq!(r.wall_ms, 7.0);
        let bins = r.latency_over_time.expect("answers").bins;
        assert_eq!(
            bins.iter().map(|b| b.from_ms).collect::<Vec<_>>(),
            [0.0, 1000.0]
        );
        assert!((bins[1].p99_ms - 0.8).abs() <= 0.008, "{:?}", bins[1]);
    }

    /// An external run against an API whose 201s name no node printed its placements
    /// as `0.000` and `0 / 0.00 / 0`, and an API without beliefs an accounting error.
    #[test]
    fn an_external_run_whose_answers_name_no_node_has_no_placements() {
        let external = |name_node: bool, node_refusals: bool| {
            let mut agg = RunAggregate::new(ids(), RunShape::Burst);
            agg.answered(&Outcome::Status(201), 0.0, 1000);
            if name_node {
                agg.landed(0);
            }
            agg.sample(1.0, vec![1, 0], []);
            agg.final_node("a", 1, 1.0, []);
            agg.final_node("b", 0, 0.0, []);
            if node_refusals {
                agg.node_refusals(0);
            }
            agg.staging(StagingFacts::default());
            agg.finish("external".into(), RunSettings::default(), 1.0)
        };
        let r = external(false, false);
        assert_eq!(
            r.not_measured,
            [
                Figure::Retries,
                Figure::Refusals,
                Figure::AccountingError,
                Figure::Placements
            ]
        );
        assert_eq!(r.shown(Figure::Placements, 0), crate::report::NOT_MEASURED);
        let r = external(true, true);
        assert_eq!(r.not_measured, [Figure::Retries, Figure::AccountingError]);
        // An embedded run measures everything, whatever it placed.
        let mut agg = RunAggregate::new(ids(), RunShape::Burst);
        agg.answered(&Outcome::Status(201), 0.0, 1000);
        assert!(agg
            .finish("reported".into(), RunSettings::default(), 1.0)
            .not_measured
            .is_empty());
    }

    #[test]
    fn the_storm_adds_the_runs_own_records_and_the_services_bins() {
        let mut agg = RunAggregate::new(ids(), RunShape::Paced);
        agg.refused(0, 1, 3);
        let mut bins = vec![BTreeMap::new(), BTreeMap::new()];
        bins[1].insert("b".to_string(), 2);
        bins[0].insert("zz".to_string(), 9);
        agg.service(&ServiceCounters {
            retries: 5,
            refusals: 5,
            refusals_per_second: bins,
            ..ServiceCounters::default()
        });
        agg.sent(0.0, 2_000);
        let r = agg.finish("x".into(), RunSettings::default(), 0.0);
        assert_eq!((r.retries, r.refusals), (5, 5));
        let storm = r.retry_storm.expect("refusals were binned");
        assert_eq!(storm.node_total, vec![3, 2]);
        assert_eq!(r.send.lateness_max_ms, Some(2.0));
    }

    #[test]
    fn late_facts_are_inputs_and_arrivals_count_only_for_a_burst_that_sent() {
        let arrivals = ArrivalWindow {
            count: 2,
            kernel_stamped: 1,
            span: Some((1_000_000, 4_000_000)),
        };
        let mut burst = RunAggregate::new(ids(), RunShape::Burst);
        burst.sent(0.0, 0);
        burst.release_realtime(Some(true));
        burst.server_arrivals(arrivals);
        burst.staging(StagingFacts::default());
        burst.cleanup(CleanupReport {
            kept: true,
            ..CleanupReport::default()
        });
        let r = burst.finish("b".into(), RunSettings::default(), 9.0);
        assert_eq!(r.send.burst_release_realtime, Some(true));
        assert_eq!(r.send.server_arrival_spread_ms, Some(3.0));
        assert_eq!(r.send.server_arrivals, Some(2));
        assert_eq!(r.send.server_arrivals_kernel_stamped, Some(1));
        let cleanup = r.staging.and_then(|s| s.cleanup).expect("cleanup kept");
        assert!(cleanup.kept);
        // A burst that sent nothing, and a paced run, report no arrivals.
        for shape in [RunShape::Burst, RunShape::Paced] {
            let mut agg = RunAggregate::new(ids(), shape);
            if shape == RunShape::Paced {
                agg.sent(0.0, 0);
            }
            agg.server_arrivals(arrivals);
            agg.cleanup(CleanupReport::default());
            let r = agg.finish("p".into(), RunSettings::default(), 0.0);
            assert_eq!(r.send.server_arrivals, None);
            assert_eq!(
                r.staging, None,
                "a cleanup without staging facts is not reported"
            );
        }
    }
}
