//! [`RunTimeline`]: what a real run keeps of its truth samples and its placements until
//! the run ends, so that its memory grows with samples x nodes (the size of the
//! report's own timeline, capped by the profile limit on timeline cells), not with its
//! creates.
//!
//! The timeline counts, at each truth sample, the placements answered by the sample's
//! time. Placements are known when their answer comes (the workload's side) and samples
//! when their read is done (the sampler's side), in no particular order between the
//! two. So each placement is binned as it comes into the interval of the first sample
//! taken at or after it (a binary search over the sample times); a placement answered
//! after the newest sample waits in a short list until the next sample takes it.
//!
//! Each sample keeps a digest: the sandboxes and refusals each node listed (node
//! numbers, not names) and the sum, count and maximum of its accounting errors.
//! [`RunTimeline::feed`] hands the whole to a [`RunAggregate`] in time order, each
//! interval's placements before its sample, as a whole ledger would have fed it.
//!
//! Times are ms on one clock, the feeders' (a run's samples and placements must use
//! the same); `feed` moves them to the gate's.

use std::collections::HashMap;

use super::fold::{AccountingErrors, RunAggregate};

/// The truth samples and placements of one run, binned as they come.
#[derive(Debug, Default)]
pub struct RunTimeline {
    /// Node names by number, in order first seen.
    nodes: Vec<String>,
    numbers: HashMap<String, u32>,
    /// In time order.
    samples: Vec<SampleDigest>,
    /// Placements after the newest sample: (at ms, node number).
    after: Vec<(f64, u32)>,
}

/// What is kept of one truth sample.
#[derive(Debug)]
struct SampleDigest {
    t_ms: f64,
    /// Per node listed: its number, sandboxes and the creates it refused so far (when
    /// the source counts them).
    nodes: Vec<NodeDigest>,
    errors: AccountingErrors,
    /// Placements answered after the previous sample and by this one: (node number,
    /// count), a node at most once.
    landed: Vec<(u32, u32)>,
}

/// 16 bytes: counts are kept as `u32` (saturating; a node holds far fewer sandboxes,
/// and refuses far fewer creates in one run).
#[derive(Debug, Clone, Copy)]
struct NodeDigest {
    number: u32,
    sandboxes: u32,
    refused: Option<u32>,
}

fn narrow(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// One node of a truth sample, as [`RunTimeline::sample`] takes it.
#[derive(Debug, Clone, Copy)]
pub struct SampledNode<'a> {
    /// Node id.
    pub id: &'a str,
    /// Sandboxes running on it.
    pub sandboxes: u64,
    /// Creates it refused so far, when the source counts them.
    pub refused: Option<u64>,
}

impl RunTimeline {
    /// An empty timeline.
    pub fn new() -> Self {
        Self::default()
    }

    fn number(&mut self, id: &str) -> u32 {
        if let Some(&k) = self.numbers.get(id) {
            return k;
        }
        let k = u32::try_from(self.nodes.len()).unwrap_or(u32::MAX);
        self.nodes.push(id.to_string());
        self.numbers.insert(id.to_string(), k);
        k
    }

    /// A placement on node `node`, answered at `at_ms`.
    pub fn landed(&mut self, at_ms: f64, node: &str) {
        let k = self.number(node);
        let i = self.samples.partition_point(|s| s.t_ms < at_ms);
        match self.samples.get_mut(i) {
            Some(s) => add(&mut s.landed, k, 1),
            None => self.after.push((at_ms, k)),
        }
    }

    /// A truth sample taken at `t_ms`: what each node listed, and the accounting errors
    /// of the sample. Samples come in time order; one older than the newest is put in
    /// its place, and the placements already binned after it stay where they are.
    pub fn sample<'a>(
        &mut self,
        t_ms: f64,
        nodes: impl IntoIterator<Item = SampledNode<'a>>,
        errors: AccountingErrors,
    ) {
        let nodes = nodes
            .into_iter()
            .map(|n| NodeDigest {
                number: self.number(n.id),
                sandboxes: narrow(n.sandboxes),
                refused: n.refused.map(narrow),
            })
            .collect();
        let mut landed = Vec::new();
        let newest = self.samples.last().is_none_or(|s| s.t_ms <= t_ms);
        if newest {
            self.after.retain(|&(at, k)| {
                let taken = at <= t_ms;
                if taken {
                    add(&mut landed, k, 1);
                }
                !taken
            });
        }
        let digest = SampleDigest {
            t_ms,
            nodes,
            errors,
            landed,
        };
        let i = self.samples.partition_point(|s| s.t_ms <= t_ms);
        self.samples.insert(i, digest);
    }

    /// Samples taken so far.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether no sample was taken.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Feeds every sample and placement into `agg`, whose nodes are `node_ids` (node
    /// order), in time order: each interval's placements, then its sample (timed
    /// `offset_ms` earlier: on the gate's clock), then the placements after the last
    /// sample. Placements and counts on nodes outside `node_ids` are left out.
    pub fn feed(&self, agg: &mut RunAggregate, node_ids: &[String], offset_ms: f64) {
        let index: HashMap<&str, usize> = node_ids
            .iter()
            .enumerate()
            .map(|(p, id)| (id.as_str(), p))
            .collect();
        let position: Vec<Option<usize>> = self
            .nodes
            .iter()
            .map(|n| index.get(n.as_str()).copied())
            .collect();
        let at = |k: u32| position.get(k as usize).copied().flatten();
        for s in &self.samples {
            for &(k, n) in &s.landed {
                if let Some(p) = at(k) {
                    for _ in 0..n {
                        agg.landed(p);
                    }
                }
            }
            let mut sandboxes = vec![0; node_ids.len()];
            for n in &s.nodes {
                if let Some(p) = at(n.number) {
                    sandboxes[p] = u64::from(n.sandboxes);
                }
            }
            agg.sample_errors(s.t_ms - offset_ms, sandboxes, s.errors);
        }
        for &(_, k) in &self.after {
            if let Some(p) = at(k) {
                agg.landed(p);
            }
        }
    }

    /// Feeds the refusals the nodes counted into `agg`: per node of the last sample,
    /// the growth between samples binned at the later sample's second (on the gate's
    /// clock, `offset_ms` before the feeders'), and the last sample's sum as the run's
    /// total. Nothing when the last sample lacks a node's count (the source does not
    /// count refusals).
    pub fn feed_refusals(&self, agg: &mut RunAggregate, offset_ms: f64) {
        let Some(last) = self.samples.last() else {
            return;
        };
        let Some(total) = last
            .nodes
            .iter()
            .map(|n| n.refused.map(u64::from))
            .sum::<Option<u64>>()
        else {
            return;
        };
        // Node number -> position in the last sample.
        let mut position = vec![None; self.nodes.len()];
        for (p, n) in last.nodes.iter().enumerate() {
            position[n.number as usize] = Some(p);
        }
        let mut seen = vec![0u64; last.nodes.len()];
        for s in &self.samples {
            let second = ((s.t_ms - offset_ms).max(0.0) / 1000.0) as usize;
            for n in &s.nodes {
                let (Some(p), Some(r)) = (
                    position.get(n.number as usize).copied().flatten(),
                    n.refused.map(u64::from),
                ) else {
                    continue;
                };
                if r > seen[p] {
                    agg.refused(p, second, r - seen[p]);
                    seen[p] = r;
                }
            }
        }
        agg.node_refusals(total);
    }
}

/// Adds `n` to node `k`'s count in `counts`.
fn add(counts: &mut Vec<(u32, u32)>, k: u32, n: u32) {
    match counts.iter_mut().find(|(node, _)| *node == k) {
        Some((_, c)) => *c = c.saturating_add(n),
        None => counts.push((k, n)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::RunShape;
    use crate::profile::RunSettings;

    fn node(id: &str, sandboxes: u64) -> SampledNode<'_> {
        SampledNode {
            id,
            sandboxes,
            refused: None,
        }
    }

    fn finish(t: &RunTimeline, ids: &[&str], offset_ms: f64) -> crate::report::RunResult {
        let ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
        let mut agg = RunAggregate::new(ids.clone(), RunShape::Paced);
        t.feed(&mut agg, &ids, offset_ms);
        agg.finish("run".into(), RunSettings::default(), 0.0)
    }

    #[test]
    fn a_placement_counts_in_the_first_sample_at_or_after_it_whichever_comes_first() {
        let mut t = RunTimeline::new();
        t.landed(5.0, "a"); // before any sample: waits
        t.sample(
            10.0,
            [node("a", 1), node("b", 0)],
            AccountingErrors::default(),
        );
        t.landed(10.0, "b"); // at the sample's time: counts in it
        t.landed(12.0, "b"); // after the newest sample: waits
        t.sample(
            20.0,
            [node("a", 1), node("b", 2)],
            AccountingErrors::default(),
        );
        t.landed(25.0, "a"); // after every sample: counted at the end
        let r = finish(&t, &["a", "b"], 0.0);
        assert_eq!(r.timeline[0].placed, vec![1, 1]);
        assert_eq!(r.timeline[1].placed, vec![1, 2]);
        assert_eq!(r.timeline[1].sandboxes, vec![1, 2]);
        assert_eq!(r.timeline.len(), 2);
    }

    #[test]
    fn a_placement_answered_late_goes_back_to_its_sample() {
        let mut t = RunTimeline::new();
        for at in [10.0, 20.0, 30.0] {
            t.sample(at, [node("a", 0)], AccountingErrors::default());
        }
        t.landed(15.0, "a");
        let r = finish(&t, &["a"], 0.0);
        let placed: Vec<u64> = r.timeline.iter().map(|p| p.placed[0]).collect();
        assert_eq!(placed, vec![0, 1, 1]);
    }

    #[test]
    fn nodes_outside_the_result_and_the_offset() {
        let mut t = RunTimeline::new();
        t.landed(1.0, "gone");
        t.sample(
            1500.0,
            [node("gone", 4), node("b", 3)],
            AccountingErrors::default(),
        );
        let r = finish(&t, &["b"], 500.0);
        assert_eq!(r.timeline[0].t_ms, 1000.0);
        assert_eq!(r.timeline[0].sandboxes, vec![3]);
        assert_eq!(r.timeline[0].placed, vec![0]);
    }

    #[test]
    fn an_older_sample_is_put_in_its_place() {
        let mut t = RunTimeline::new();
        t.sample(20.0, [node("a", 2)], AccountingErrors::default());
        t.sample(10.0, [node("a", 1)], AccountingErrors::default());
        let r = finish(&t, &["a"], 0.0);
        let at: Vec<f64> = r.timeline.iter().map(|p| p.t_ms).collect();
        assert_eq!(at, vec![10.0, 20.0]);
    }

    #[test]
    fn refusals_grow_per_node_and_total_from_the_last_sample() {
        let mut t = RunTimeline::new();
        let refused = |id, r| SampledNode {
            id,
            sandboxes: 0,
            refused: Some(r),
        };
        t.sample(
            500.0,
            [refused("a", 2), refused("b", 0)],
            AccountingErrors::default(),
        );
        t.sample(
            1500.0,
            [refused("a", 5), refused("b", 1)],
            AccountingErrors::default(),
        );
        let ids = vec!["a".to_string(), "b".to_string()];
        let mut agg = RunAggregate::new(ids, RunShape::Paced);
        t.feed_refusals(&mut agg, 0.0);
        let r = agg.finish("run".into(), RunSettings::default(), 0.0);
        assert_eq!(r.refusals, 6);
    }

    #[test]
    fn a_sample_keeps_no_node_names() {
        let mut t = RunTimeline::new();
        for i in 0..100 {
            t.sample(
                f64::from(i),
                [node("a-long-node-name", 1), node("b-long-node-name", 2)],
                AccountingErrors::default(),
            );
        }
        assert_eq!(t.nodes.len(), 2);
        assert_eq!(t.len(), 100);
    }
}
