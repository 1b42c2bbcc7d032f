//! Periodic sampling of truth and belief while a run is under way.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::believed::fetch_api_nodes;
use super::truth::{fetch_truth, Truth, TruthSource};
use crate::workload::ApiKey;

/// Truth (and belief, per placement replica) at one instant.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Milliseconds since the sampler started, taken when this sample began reading:
    /// everything that had happened by then is in it.
    pub t_ms: f64,
    /// The nodes' truth.
    pub truth: Truth,
    /// Per replica: believed allocated vCPU per node id.
    pub believed: Vec<BTreeMap<String, f64>>,
    /// Per replica: the create RPCs it has sent to each node so far.
    pub calls: Vec<BTreeMap<String, NodeCalls>>,
}

/// Create RPCs one placement instance sent to one node (E2B's `createSuccesses` and
/// `createFails`), cumulative.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeCalls {
    /// Creates that succeeded on the node.
    pub ok: u64,
    /// Creates that failed on the node.
    pub failed: u64,
    /// Creates sent to the node and not answered yet (`sandboxStartingCount`, a gauge).
    pub starting: u64,
}

impl NodeCalls {
    /// Creates sent to the node so far: answered or still in flight. It grows exactly
    /// when the service chooses the node (a create ending moves one from `starting`
    /// to `ok`/`failed`).
    pub fn sent(&self) -> u64 {
        self.ok + self.failed + self.starting
    }
}

impl Sample {
    /// Mean |believed - true| allocated vCPU over nodes and replicas, if any belief
    /// was read.
    pub fn accounting_error(&self) -> Option<(f64, f64)> {
        let mut sum = 0.0;
        let mut max: f64 = 0.0;
        let mut n = 0usize;
        for b in &self.believed {
            for node in &self.truth.nodes {
                if let Some(v) = b.get(&node.id) {
                    let e = (v - node.allocated_vcpu).abs();
                    sum += e;
                    max = max.max(e);
                    n += 1;
                }
            }
        }
        (n > 0).then(|| (sum / n as f64, max))
    }
}

/// Samples every `interval` until cancelled.
#[derive(Debug, Clone)]
pub struct Sampler {
    /// Where truth comes from.
    pub source: TruthSource,
    /// Placement instances whose belief is read (`GET /nodes`); may be empty.
    pub believers: Vec<String>,
    /// Admin token for the believers' `/nodes`, if they need one.
    pub admin_token: Option<ApiKey>,
    /// Sampling period.
    pub interval: Duration,
}

impl Sampler {
    /// One sample now; `start` anchors `t_ms`.
    pub async fn sample(&self, client: &reqwest::Client, start: Instant) -> Option<Sample> {
        let t_ms = start.elapsed().as_secs_f64() * 1000.0;
        let truth = fetch_truth(client, &self.source).await.ok()?;
        let mut believed = Vec::new();
        let mut calls = Vec::new();
        for b in &self.believers {
            if let Ok(nodes) = fetch_api_nodes(client, b, self.admin_token.as_ref()).await {
                believed.push(
                    nodes
                        .iter()
                        .map(|n| (n.id.clone(), n.allocated_cpu()))
                        .collect(),
                );
                calls.push(
                    nodes
                        .iter()
                        .map(|n| {
                            let c = NodeCalls {
                                ok: n.create_successes,
                                failed: n.create_fails,
                                starting: n.sandbox_starting_count,
                            };
                            (n.id.clone(), c)
                        })
                        .collect(),
                );
            }
        }
        Some(Sample {
            t_ms,
            truth,
            believed,
            calls,
        })
    }

    /// Samples until `stop` fires; failed reads are skipped (a node being killed is
    /// what chaos runs are for), and the samples are returned in time order.
    pub async fn run(self, start: Instant, stop: CancellationToken) -> Vec<Sample> {
        self.run_keeping(start, stop, true).await
    }

    /// [`run`](Self::run), but each sample's sandbox ids are dropped once read (only
    /// the counts are kept): a sample then weighs the same whatever the number of
    /// sandboxes running, where ids weigh every running sandbox once per sample. For
    /// runs that neither check sets nor measure fault windows, the only readers of ids.
    pub async fn run_counts(self, start: Instant, stop: CancellationToken) -> Vec<Sample> {
        self.run_keeping(start, stop, false).await
    }

    async fn run_keeping(self, start: Instant, stop: CancellationToken, ids: bool) -> Vec<Sample> {
        let client = reqwest::Client::new();
        let mut out = Vec::new();
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => {
                    if let Some(mut s) = self.sample(&client, start).await {
                        if !ids {
                            for n in &mut s.truth.nodes {
                                n.ids = None;
                            }
                        }
                        out.push(s);
                    }
                }
            }
        }
        out
    }
}
