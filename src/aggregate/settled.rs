//! [`SettledCreates`]: what a run that does not audit sets keeps of a create once it is
//! settled (answered, and its lifetime's delete answered when it has one), so that a
//! run's memory does not grow with its length.
//!
//! A settled create is folded at once into the counters and histograms the run's
//! result reads (sends, answers, latency over time: the same calls [`RunAggregate`]
//! takes from a whole ledger, none of which depends on their order). Three things are
//! kept beyond counters, each said with its bound (placements go to the run's
//! [`RunTimeline`](super::RunTimeline) as they are answered, not here):
//! - the ids of 201s whose delete did not succeed: what the run left behind, for its
//!   cleanup (bounded by what the run leaves);
//! - the last [`RECENT`] deleted ids and send times: cleanup tells a listed sandbox the
//!   run deleted from one it never saw by the first, and a run stopped by a signal
//!   counts the creates it sent after the signal from the second (exact as long as
//!   fewer than [`RECENT`] creates were sent after it; the workload stops sending at a
//!   signal).

use std::collections::VecDeque;

use super::fold::{RunAggregate, RunShape};
use crate::workload::{LedgerEntry, Outcome};

/// Deleted ids and send times kept for the end of a run (see the module doc).
pub const RECENT: usize = 4096;

/// The folded settled creates of one run.
#[derive(Debug)]
pub struct SettledCreates {
    /// Sends and answers, folded as [`RunAggregate`] folds a whole ledger (no nodes yet).
    sends: RunAggregate,
    /// 201s whose delete did not succeed (never tried, failed, or given up).
    left: Vec<String>,
    recent_deleted: VecDeque<String>,
    recent_sends: VecDeque<f64>,
    created: u64,
    deleted: u64,
    cancelled: u64,
    limited: u64,
    gave_up: bool,
}

impl SettledCreates {
    /// An empty fold for a run of `shape`.
    pub fn new(shape: RunShape) -> Self {
        SettledCreates {
            sends: RunAggregate::new(Vec::new(), shape),
            left: Vec::new(),
            recent_deleted: VecDeque::new(),
            recent_sends: VecDeque::new(),
            created: 0,
            deleted: 0,
            cancelled: 0,
            limited: 0,
            gave_up: false,
        }
    }

    /// Folds one settled create: its entry is dropped afterwards.
    pub fn settle(&mut self, e: LedgerEntry) {
        self.sends.create(&e);
        push_recent(&mut self.recent_sends, e.sent_ms);
        match &e.outcome {
            Outcome::Cancelled => self.cancelled += 1,
            o if o.is_limited() => self.limited += 1,
            _ => {}
        }
        self.gave_up |= e.outcome.is_uncertain();
        if !e.outcome.is_created() {
            return;
        }
        self.created += 1;
        let Some(id) = e.sandbox_id else {
            return;
        };
        if deleted(e.deleted.as_ref()) {
            self.deleted += 1;
            push_recent(&mut self.recent_deleted, id);
        } else {
            self.left.push(id);
        }
    }

    /// The sends and answers folded so far, as an aggregate over `node_ids` (node
    /// order: the result's).
    pub fn into_aggregate(self, node_ids: Vec<String>) -> RunAggregate {
        self.sends.with_nodes(node_ids)
    }

    /// Ids acknowledged with a 201 and not deleted.
    pub fn left(&self) -> &[String] {
        &self.left
    }

    /// The last [`RECENT`] ids the run deleted.
    pub fn recently_deleted(&self) -> impl Iterator<Item = &String> {
        self.recent_deleted.iter()
    }

    /// Creates answered 201.
    pub fn created(&self) -> u64 {
        self.created
    }

    /// 201s whose sandbox the workload deleted.
    pub fn deleted(&self) -> u64 {
        self.deleted
    }

    /// Creates given up on a signal.
    pub fn cancelled(&self) -> u64 {
        self.cancelled
    }

    /// Creates answered 429.
    pub fn limited(&self) -> u64 {
        self.limited
    }

    /// Whether some create's outcome is uncertain (its sandbox may appear late).
    pub fn gave_up(&self) -> bool {
        self.gave_up
    }

    /// Creates sent after `cut_ms`, among the last [`RECENT`] sent.
    pub fn sent_after(&self, cut_ms: f64) -> u64 {
        self.recent_sends.iter().filter(|&&t| t > cut_ms).count() as u64
    }
}

/// Whether a DELETE's outcome means the sandbox is gone (a 2xx, or 404: already gone).
pub fn deleted(outcome: Option<&Outcome>) -> bool {
    matches!(outcome, Some(Outcome::Status(s)) if (200..300).contains(s) || *s == 404)
}

fn push_recent<T>(q: &mut VecDeque<T>, v: T) {
    if q.len() == RECENT {
        q.pop_front();
    }
    q.push_back(v);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: usize, outcome: Outcome, node: &str, deleted: Option<Outcome>) -> LedgerEntry {
        let created = outcome.is_created();
        LedgerEntry {
            index,
            target: 0,
            intended_ms: index as f64 * 10.0,
            sent_ms: index as f64 * 10.0 + 1.0,
            latency_us: 2_000,
            outcome,
            sandbox_id: created.then(|| format!("s{index}")),
            node: created.then(|| node.to_string()),
            deleted,
        }
    }

    #[test]
    fn settled_creates_keep_leftovers_and_counts_only() {
        let mut s = SettledCreates::new(RunShape::Paced);
        s.settle(entry(
            2,
            Outcome::Status(201),
            "b",
            Some(Outcome::Status(204)),
        ));
        s.settle(entry(0, Outcome::Status(201), "a", Some(Outcome::Timeout)));
        s.settle(entry(1, Outcome::Cancelled, "", None));
        s.settle(entry(3, Outcome::Status(201), "zz", None));
        assert_eq!((s.created(), s.deleted(), s.cancelled()), (3, 1, 1));
        assert!(s.gave_up());
        assert_eq!(s.left(), ["s0".to_string(), "s3".to_string()]);
        assert_eq!(s.recently_deleted().collect::<Vec<_>>(), ["s2"]);
        assert_eq!(s.sent_after(15.0), 2);
        let agg = s.into_aggregate(vec!["a".into(), "b".into()]);
        assert_eq!(agg.outcomes().requests(), 4);
    }

    #[test]
    fn recent_ids_are_capped() {
        let mut s = SettledCreates::new(RunShape::Paced);
        for i in 0..RECENT + 10 {
            s.settle(entry(
                i,
                Outcome::Status(201),
                "a",
                Some(Outcome::Status(204)),
            ));
        }
        assert_eq!(s.recently_deleted().count(), RECENT);
        assert_eq!(s.deleted(), (RECENT + 10) as u64);
        assert_eq!(s.recently_deleted().next().map(String::as_str), Some("s10"));
    }
}
