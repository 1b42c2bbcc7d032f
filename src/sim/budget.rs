//! The simulator's budget: how many events it may process and how much memory it may
//! take, estimated before it starts and enforced (events) while it runs.
//!
//! A profile's limits ([`crate::profile::limits`]) bound each figure alone; the cost
//! of a simulation is their product (nodes x samples, requests x retries), so it gets
//! a budget of its own. An estimate over budget is refused before anything runs,
//! naming the profile figures that drive it; a run that goes over anyway (a saturated
//! cluster retrying every create until its deadline) stops with an error naming the
//! budget. Never an endless run.

use crate::profile::LifecycleStep;
use stampede_node_model::config::LatencyDist;

use super::error::SimError;
use super::queue::Nanos;
use super::setup::{to_nanos, Arrivals, SimSetup};

/// Default `--max-events`: 200,000,000. An event is one step of the simulation: a
/// request event, or one node read by a sync or a timeline sample. The simulator
/// handles several million a second in a release build, so this is about a minute;
/// the shipped profiles need under 1,000,000 each, the 10,000-node x 1,000,000-create
/// scale benchmark about 10,000,000.
pub const DEFAULT_MAX_EVENTS: u64 = 200_000_000;

/// Default `--max-memory-mb`: 2,048 MiB, ten times what the scale benchmark takes.
pub const DEFAULT_MAX_MEMORY_MB: u64 = 2_048;

/// Estimated bytes of one node (model, id, fault state, its sandbox maps).
const NODE_BYTES: u64 = 2_048;
/// Estimated bytes of one replica's view of one node (accounting, metrics, counters).
const VIEW_BYTES: u64 = 512;
/// Estimated bytes of one live sandbox on its node.
const SANDBOX_BYTES: u64 = 400;
/// Estimated bytes of one live sandbox in one replica's accounting.
const SANDBOX_VIEW_BYTES: u64 = 160;
/// Estimated bytes of one client ledger entry (set audit).
const LEDGER_BYTES: u64 = 256;
/// Estimated bytes of one request in flight and its pending events.
const IN_FLIGHT_BYTES: u64 = 512;
/// Estimated bytes of one timeline sample besides its per-node counts.
const SAMPLE_BYTES: u64 = 64;
/// Bytes held per timeline byte while the report is written: the timeline itself, its
/// per-node series and their SVG path in `report.html` (measured: 3.7x on 10,000 nodes
/// x 3,001 samples).
const REPORT_FACTOR: u64 = 4;

/// How much one `stampede sim` may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimBudget {
    /// Events over every run of the command (see [`DEFAULT_MAX_EVENTS`]).
    pub max_events: u64,
    /// Estimated peak memory, in bytes.
    pub max_memory_bytes: u64,
}

impl Default for SimBudget {
    fn default() -> Self {
        SimBudget {
            max_events: DEFAULT_MAX_EVENTS,
            max_memory_bytes: DEFAULT_MAX_MEMORY_MB << 20,
        }
    }
}

/// One part of an estimate and the profile figure that drives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EstimatePart {
    /// What it is and which figure to lower, e.g. `timeline samples (collect.interval)`.
    pub what: String,
    /// Events or bytes.
    pub amount: u64,
}

/// What one simulated run is expected to cost (an estimate: a saturated cluster's
/// retries, for one, cannot be known before the run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimEstimate {
    /// Virtual time the workload is expected to last.
    pub virtual_ns: Nanos,
    /// Requests expected.
    pub requests: u64,
    /// Events, by part.
    pub events: Vec<EstimatePart>,
    /// Memory in bytes while running, by part.
    pub memory: Vec<EstimatePart>,
    /// Memory in bytes of the finished run's result (kept by a sweep) and its drawing
    /// in the report, included in [`memory`](Self::memory).
    pub result_bytes: u64,
}

impl SimEstimate {
    /// Events in all.
    pub fn total_events(&self) -> u64 {
        sum(&self.events)
    }

    /// Memory in all, bytes.
    pub fn total_memory(&self) -> u64 {
        sum(&self.memory)
    }
}

fn sum(parts: &[EstimatePart]) -> u64 {
    parts.iter().fold(0, |s, p| s.saturating_add(p.amount))
}

/// A typical draw of `d`: its value, mean or median.
fn typical(d: &LatencyDist) -> Nanos {
    let t = match d {
        LatencyDist::Constant { value } => *value,
        LatencyDist::Uniform { min, max } => (*min + *max) / 2,
        LatencyDist::Exponential { mean } => *mean,
        LatencyDist::Lognormal { median, .. } => *median,
        LatencyDist::Quantiles { .. } => d.quantile(50.0).unwrap_or_default(),
    };
    to_nanos(t)
}

fn div_ceil(a: Nanos, b: Nanos) -> u64 {
    if b == 0 {
        u64::MAX
    } else {
        a.div_ceil(b)
    }
}

impl SimSetup {
    /// What this run is expected to cost.
    pub fn estimate(&self) -> SimEstimate {
        let nodes = self.cluster.nodes as u64;
        let replicas = self.replicas as u64;
        let rtt = self.rpc_round_trip;
        let create = typical(&self.cluster.node.create_latency).min(self.request_timeout);
        let lifetime = self.lifetime.as_ref().map(typical);
        let (sending, requests) = match &self.arrivals {
            Arrivals::Burst { count } => (0, *count),
            Arrivals::Rate { per_second, total } => (
                to_nanos(std::time::Duration::from_secs_f64(
                    (*total as f64 / per_second).min(1e12),
                )),
                *total,
            ),
            Arrivals::Plan { users } => {
                let end = users.iter().map(|u| u.1).max().unwrap_or(0);
                let busy = users.iter().fold(0u64, |s, &(a, b)| {
                    s.saturating_add(b.saturating_sub(a) / (create + rtt).max(1) + 1)
                });
                (end, busy)
            }
        };
        // A lifecycle: its holds add to the span, each step is an event and each
        // resume a create's events again (its retries are bounded by the same parking).
        let (life_span, life_events) = self.lifecycle.as_ref().map_or((0, 0), |l| {
            l.steps.iter().fold((0u64, 0u64), |(t, e), s| match s {
                LifecycleStep::Hold(d) => (t.saturating_add(typical(d)), e + 1),
                LifecycleStep::Resume | LifecycleStep::Connect => (t.saturating_add(create), e + 4),
                LifecycleStep::Pause | LifecycleStep::Kill => (t, e + 1),
            })
        });
        // The API stage: one event more per request (passes it through) and, with a bound
        // on its workers, the time a burst takes to drain through them.
        let (stage_span, stage_events) = match &self.api_stage.time {
            t if self.api_stage.is_active() => {
                let rounds = self
                    .api_stage
                    .workers
                    .map_or(1, |w| div_ceil(requests, u64::from(w.max(1))));
                (typical(t).saturating_mul(rounds), 1)
            }
            _ => (0, 0),
        };
        let span = sending
            .saturating_add(stage_span)
            .saturating_add(create)
            .saturating_add(lifetime.unwrap_or(0))
            .saturating_add(life_span);
        // A commit lag and a create return time are one event more each per request.
        let times = &self.api_stage;
        let after =
            u64::from(!times.commit_lag.is_zero()) + u64::from(!times.create_return.is_zero());
        let per_request = 3 + u64::from(lifetime.is_some()) + life_events + stage_events + after;
        // A sync transit is one event more per node synced.
        let per_node_sync = 1 + u64::from(!times.sync_transit.is_zero());
        let samples = div_ceil(span, self.collect_interval).saturating_add(1);
        let syncs = div_ceil(span, self.sync_interval).saturating_add(1);
        let events = vec![
            EstimatePart {
                what: "requests (workload.shape)".into(),
                amount: requests.saturating_mul(per_request),
            },
            EstimatePart {
                what: "timeline samples (collect.interval, cluster.nodes)".into(),
                amount: samples.saturating_mul(1 + nodes.saturating_mul(1 + replicas)),
            },
            EstimatePart {
                what: "node syncs (placement.embedded.sync_interval, replicas, cluster.nodes)"
                    .into(),
                amount: syncs.saturating_mul(
                    replicas.saturating_mul(1 + nodes.saturating_mul(per_node_sync)),
                ),
            },
            EstimatePart {
                what: "chaos steps".into(),
                amount: 2 * self.faults.len() as u64,
            },
        ];
        let live = match (&self.arrivals, lifetime) {
            (Arrivals::Rate { per_second, .. }, Some(l)) => requests
                .min((per_second * l as f64 / 1e9) as u64 + self.workers as u64)
                .min(requests),
            _ => requests,
        };
        let timeline = samples.saturating_mul(nodes.saturating_mul(8) + SAMPLE_BYTES);
        let users = match &self.arrivals {
            Arrivals::Plan { users } => users.len() as u64 * 16,
            _ => 0,
        };
        let memory = vec![
            EstimatePart {
                what: "nodes (cluster.nodes)".into(),
                amount: nodes.saturating_mul(NODE_BYTES),
            },
            EstimatePart {
                what: "replica views (placement.embedded.replicas x cluster.nodes)".into(),
                amount: nodes.saturating_mul(replicas).saturating_mul(VIEW_BYTES),
            },
            EstimatePart {
                what: "live sandboxes (workload.shape, workload.lifetime)".into(),
                amount: live
                    .saturating_mul(SANDBOX_BYTES + replicas.saturating_mul(SANDBOX_VIEW_BYTES)),
            },
            EstimatePart {
                what: "timeline and its drawing in the report (collect.interval x cluster.nodes)"
                    .into(),
                amount: timeline.saturating_mul(REPORT_FACTOR),
            },
            EstimatePart {
                what: "client ledger (chaos or lost/duplicated checks)".into(),
                amount: if self.audit_sets {
                    requests.saturating_mul(LEDGER_BYTES)
                } else {
                    0
                },
            },
            EstimatePart {
                what: "requests in flight (workload.max_in_flight, burst count, plan users)".into(),
                amount: (self.workers as u64)
                    .saturating_mul(IN_FLIGHT_BYTES)
                    .saturating_add(users),
            },
        ];
        SimEstimate {
            virtual_ns: span,
            requests,
            events,
            memory,
            result_bytes: timeline
                .saturating_mul(REPORT_FACTOR)
                .saturating_add(nodes.saturating_mul(64)),
        }
    }
}

impl SimBudget {
    /// Refuse runs whose estimates, together, exceed this budget: events summed over
    /// the runs, memory as the largest run's working set plus every result kept.
    pub fn admit(&self, estimates: &[SimEstimate]) -> Result<(), SimError> {
        let events: u64 = estimates
            .iter()
            .fold(0u64, |s, e| s.saturating_add(e.total_events()));
        if events > self.max_events {
            return Err(SimError::OverBudget {
                figure: "--max-events",
                estimate: events,
                limit: self.max_events,
                parts: breakdown(estimates, |e| &e.events),
            });
        }
        let results = estimates
            .iter()
            .fold(0u64, |s, e| s.saturating_add(e.result_bytes));
        let working = estimates
            .iter()
            .map(|e| e.total_memory().saturating_sub(e.result_bytes))
            .max()
            .unwrap_or(0);
        let memory = working.saturating_add(results);
        if memory > self.max_memory_bytes {
            return Err(SimError::OverBudget {
                figure: "--max-memory-mb",
                estimate: memory >> 20,
                limit: self.max_memory_bytes >> 20,
                parts: breakdown(estimates, |e| &e.memory)
                    .into_iter()
                    .map(|p| EstimatePart {
                        what: p.what,
                        amount: p.amount >> 20,
                    })
                    .collect(),
            });
        }
        Ok(())
    }
}

/// The parts of `estimates` summed by name, largest first.
fn breakdown(
    estimates: &[SimEstimate],
    parts: impl Fn(&SimEstimate) -> &Vec<EstimatePart>,
) -> Vec<EstimatePart> {
    let mut out: Vec<EstimatePart> = Vec::new();
    for e in estimates {
        for p in parts(e) {
            match out.iter_mut().find(|o| o.what == p.what) {
                Some(o) => o.amount = o.amount.saturating_add(p.amount),
                None => out.push(p.clone()),
            }
        }
    }
    out.retain(|p| p.amount > 0);
    out.sort_by_key(|p| std::cmp::Reverse(p.amount));
    out
}
