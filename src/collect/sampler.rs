//! Periodic sampling of truth and belief while a run is under way.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::believed::fetch_api_nodes;
use super::sample_sink::SampleSink;
use super::truth::{fetch_truth, Truth, TruthSource};
use crate::api_key::ApiKey;

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
    /// Allocated vCPU per node id, read again once the belief was read: the truth at
    /// the belief's reading lies between this and `truth`. Empty when no belief was
    /// read, or when the second read failed (then `truth` stands alone).
    pub allocated_after: BTreeMap<String, f64>,
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
    /// Per replica and node with a belief: how far the believed allocated vCPU is from
    /// the truth. The belief is read between two reads of the truth, so the truth at
    /// that instant is only known to lie between them: a belief inside that range
    /// counts 0, one outside it its distance to the nearer end. Creates and deletes that
    /// land between the reads (more of them the more loaded the machine) are then not
    /// counted as the placement's error.
    pub fn accounting_errors(&self) -> impl Iterator<Item = f64> + '_ {
        self.believed.iter().flat_map(move |b| {
            self.truth.nodes.iter().filter_map(move |n| {
                let v = *b.get(&n.id)?;
                let after = self
                    .allocated_after
                    .get(&n.id)
                    .copied()
                    .unwrap_or(n.allocated_vcpu);
                Some(distance_to_range(v, n.allocated_vcpu, after))
            })
        })
    }
}

/// How far `v` lies outside the range between `a` and `b` (0 inside it).
fn distance_to_range(v: f64, a: f64, b: f64) -> f64 {
    let (lo, hi) = (a.min(b), a.max(b));
    if v < lo {
        lo - v
    } else if v > hi {
        v - hi
    } else {
        0.0
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
    /// Whether the believer `url` is also the truth source (an E2B API's `GET /nodes`
    /// read for both).
    fn belief_is_truth(&self, url: &str) -> bool {
        matches!(&self.source, TruthSource::E2bApi { url: truth, .. } if truth == url)
    }

    /// One sample now; `start` anchors `t_ms`.
    pub async fn sample(&self, client: &reqwest::Client, start: Instant) -> Option<Sample> {
        let t_ms = start.elapsed().as_secs_f64() * 1000.0;
        let truth = fetch_truth(client, &self.source).await.ok()?;
        let mut believed = Vec::new();
        let mut calls = Vec::new();
        for b in &self.believers {
            if let Ok(nodes) = fetch_api_nodes(client, b, self.admin_token.as_ref()).await {
                // A belief read from the truth's own `GET /nodes` is the truth: no
                // accounting error can be seen (only its create counters are news).
                if !self.belief_is_truth(b) {
                    believed.push(
                        nodes
                            .iter()
                            .map(|n| (n.id.clone(), n.allocated_cpu()))
                            .collect(),
                    );
                }
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
        let allocated_after = if believed.is_empty() {
            BTreeMap::new()
        } else {
            fetch_truth(client, &self.source)
                .await
                .map(|after| {
                    after
                        .nodes
                        .into_iter()
                        .map(|n| (n.id, n.allocated_vcpu))
                        .collect()
                })
                .unwrap_or_default()
        };
        Some(Sample {
            t_ms,
            truth,
            believed,
            allocated_after,
            calls,
        })
    }

    /// Samples until `stop` fires; failed reads are skipped (a node being killed is
    /// what chaos runs are for), and the samples are returned in time order.
    pub async fn run(self, start: Instant, stop: CancellationToken) -> Vec<Sample> {
        let mut out = Vec::new();
        self.each(start, stop, |s| out.push(s)).await;
        out
    }

    /// [`run`](Self::run), each sample handed to `sink` as it is taken (which keeps
    /// what the run reads of it), and the sink returned once `stop` fires.
    pub async fn record(
        self,
        start: Instant,
        stop: CancellationToken,
        mut sink: SampleSink,
    ) -> SampleSink {
        self.each(start, stop, |s| sink.take(s)).await;
        sink
    }

    async fn each(&self, start: Instant, stop: CancellationToken, mut take: impl FnMut(Sample)) {
        let client = crate::http_client::client();
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => {
                    if let Some(s) = self.sample(&client, start).await {
                        take(s);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::NodeSample;

    fn sample(first: f64, after: Option<f64>, believed: f64) -> Sample {
        let node = NodeSample {
            id: "n".into(),
            sandboxes: 0,
            allocated_vcpu: first,
            ids: None,
            status: "ready".into(),
            service_id: None,
            refused: None,
        };
        Sample {
            t_ms: 0.0,
            truth: Truth { nodes: vec![node] },
            believed: vec![BTreeMap::from([("n".to_string(), believed)])],
            allocated_after: after
                .map(|a| BTreeMap::from([("n".to_string(), a)]))
                .unwrap_or_default(),
            calls: Vec::new(),
        }
    }

    fn errors(s: &Sample) -> Vec<f64> {
        s.accounting_errors().collect()
    }

    #[test]
    fn a_belief_between_the_two_truth_reads_is_no_error() {
        assert_eq!(errors(&sample(10.0, Some(14.0), 12.0)), vec![0.0]);
        assert_eq!(errors(&sample(14.0, Some(10.0), 10.0)), vec![0.0]);
    }

    #[test]
    fn a_belief_outside_the_reads_counts_its_distance_to_the_nearer_one() {
        assert_eq!(errors(&sample(10.0, Some(14.0), 17.0)), vec![3.0]);
        assert_eq!(errors(&sample(14.0, Some(10.0), 4.0)), vec![6.0]);
    }

    /// Truth and belief both read from one E2B API's `GET /nodes` gave an accounting
    /// error of 0.0 shown as measured.
    #[test]
    fn a_belief_from_the_truths_own_nodes_is_no_belief() {
        let url = "http://127.0.0.1:3000".to_string();
        let sampler = |source| Sampler {
            source,
            believers: vec![url.clone()],
            admin_token: None,
            interval: Duration::from_secs(1),
        };
        let same = sampler(TruthSource::E2bApi {
            url: url.clone(),
            admin_token: None,
        });
        assert!(same.belief_is_truth(&url));
        let other = sampler(TruthSource::MockAdmin(
            vec!["http://127.0.0.1:4000".into()],
            None,
        ));
        assert!(!other.belief_is_truth(&url));
    }

    #[test]
    fn without_a_second_read_the_first_stands_alone() {
        assert_eq!(errors(&sample(10.0, None, 12.5)), vec![2.5]);
    }
}
