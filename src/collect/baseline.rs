//! This run's share of the nodes: the truth read before a run subtracted from every
//! later read (by id where the source lists ids, else by count), and what each truth
//! source is and how stale it can be.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::truth::{NodeSample, Truth, TruthSource};

impl TruthSource {
    /// What the source is, as the report names it.
    pub fn name(&self) -> &'static str {
        match self {
            TruthSource::MockAdmin(..) => "mock-node admin GET /nodes (counts and ids)",
            TruthSource::E2bApi { .. } => "E2B API GET /nodes sandboxCount (counts, no ids)",
            TruthSource::Orchestrators(_) => "orchestrator SandboxService/List (counts and ids)",
        }
    }

    /// How far behind the nodes the source can be; `None`: it reads them live.
    pub fn lag(&self) -> Option<Duration> {
        match self {
            // E2B's API refreshes `GET /nodes` from its orchestrators once per sync,
            // so its `sandboxCount` can lag by one sync interval.
            TruthSource::E2bApi { .. } => Some(crate::placement::SYNC_INTERVAL),
            TruthSource::MockAdmin(..) | TruthSource::Orchestrators(_) => None,
        }
    }

    /// The lag as the report states it.
    pub fn lag_text(&self) -> String {
        match self.lag() {
            None => "live (read from the nodes at each sample)".into(),
            Some(d) => format!(
                "up to one node sync ({}): counts may miss the last sync's changes",
                humantime::format_duration(d)
            ),
        }
    }
}

/// The truth `before` a run held.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Before {
    /// Per node id: the ids listed then (when the source lists them) and the count.
    nodes: BTreeMap<String, (Option<BTreeSet<String>>, u64)>,
    /// Per node id: the creates it had refused by then, when the source counts them.
    refused: BTreeMap<String, u64>,
}

impl Before {
    /// Remembers `truth` as what was there before the run.
    pub fn of(truth: &Truth) -> Self {
        let nodes = truth
            .nodes
            .iter()
            .map(|n| {
                let ids = n.ids.as_ref().map(|v| v.iter().cloned().collect());
                (n.id.clone(), (ids, n.sandboxes))
            })
            .collect();
        let refused = truth
            .nodes
            .iter()
            .filter_map(|n| Some((n.id.clone(), n.refused?)))
            .collect();
        Before { nodes, refused }
    }

    /// Sandboxes there before the run, all nodes.
    pub fn total(&self) -> u64 {
        self.nodes.values().map(|(_, c)| c).sum()
    }

    /// Per node id, sandboxes there before the run.
    pub fn per_node(&self) -> BTreeMap<String, u64> {
        self.nodes
            .iter()
            .map(|(k, (_, c))| (k.clone(), *c))
            .collect()
    }

    /// Whether every node was read with ids (subtraction by id).
    pub fn by_id(&self) -> bool {
        !self.nodes.is_empty() && self.nodes.values().all(|(ids, _)| ids.is_some())
    }

    /// `truth` with what was there before removed: ids listed before are dropped (and
    /// the count is what remains); without ids the count before is subtracted (never
    /// below 0); so are the refusals counted before. Allocated vCPU is left whole: it is compared with the service's belief,
    /// which covers every sandbox.
    pub fn subtract(&self, truth: &Truth) -> Truth {
        let nodes = truth.nodes.iter().map(|n| self.subtract_node(n)).collect();
        Truth { nodes }
    }

    fn subtract_node(&self, n: &NodeSample) -> NodeSample {
        let mut out = n.clone();
        if let (Some(r), Some(before)) = (n.refused, self.refused.get(&n.id)) {
            out.refused = Some(r.saturating_sub(*before));
        }
        let Some((before_ids, before_count)) = self.nodes.get(&n.id) else {
            return out;
        };
        match (&n.ids, before_ids) {
            (Some(ids), Some(before)) => {
                let mine: Vec<String> = ids
                    .iter()
                    .filter(|i| !before.contains(*i))
                    .cloned()
                    .collect();
                out.sandboxes = mine.len() as u64;
                out.ids = Some(mine);
            }
            _ => out.sandboxes = n.sandboxes.saturating_sub(*before_count),
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, n: u64, ids: Option<&[&str]>) -> NodeSample {
        NodeSample {
            id: id.into(),
            sandboxes: n,
            allocated_vcpu: n as f64,
            ids: ids.map(|v| v.iter().map(|s| s.to_string()).collect()),
            status: "ready".into(),
            service_id: None,
            refused: None,
        }
    }

    #[test]
    fn ids_there_before_are_not_this_runs() {
        let before = Before::of(&Truth {
            nodes: vec![node("a", 2, Some(&["x", "y"])), node("b", 0, Some(&[]))],
        });
        let after = Truth {
            // y was deleted by someone else, z is this run's.
            nodes: vec![node("a", 2, Some(&["x", "z"])), node("b", 1, Some(&["w"]))],
        };
        let mine = before.subtract(&after);
        assert_eq!(mine.nodes[0].sandboxes, 1);
        assert_eq!(mine.nodes[0].ids, Some(vec!["z".to_string()]));
        assert_eq!(mine.nodes[0].allocated_vcpu, 2.0, "allocation stays whole");
        assert_eq!(mine.nodes[1].sandboxes, 1);
        assert!(before.by_id());
        assert_eq!(before.total(), 2);
    }

    #[test]
    fn counts_without_ids_are_subtracted_and_never_go_negative() {
        let before = Before::of(&Truth {
            nodes: vec![node("a", 5, None), node("b", 3, None)],
        });
        let after = Truth {
            nodes: vec![node("a", 7, None), node("b", 1, None), node("c", 4, None)],
        };
        let mine = before.subtract(&after);
        let counts: Vec<u64> = mine.nodes.iter().map(|n| n.sandboxes).collect();
        assert_eq!(counts, vec![2, 0, 4]);
        assert!(!before.by_id());
    }
}
