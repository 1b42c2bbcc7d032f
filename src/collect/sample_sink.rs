//! [`SampleSink`]: where a run's truth samples go as they are taken. Each is reduced
//! at once to its digest in the run's [`RunTimeline`] and, when the run audits sets,
//! folded into its [`SampleHistory`] (what the set audit and the fault windows read of
//! sandbox ids at the end); no sample is kept whole.

use std::sync::{Arc, Mutex};

use super::baseline::Before;
use super::history::SampleHistory;
use super::sampler::Sample;
use crate::aggregate::{AccountingErrors, RunTimeline, SampledNode};

/// A run's samples on their way into its timeline.
#[derive(Debug)]
pub struct SampleSink {
    timeline: Arc<Mutex<RunTimeline>>,
    /// What the nodes held before the run (an API stampede did not start), subtracted
    /// from every sample.
    before: Option<Before>,
    /// The ids' history, when the run reads it.
    history: Option<SampleHistory>,
}

impl SampleSink {
    /// Samples into `timeline`, less `before`, and into `history` when given.
    pub fn new(
        timeline: Arc<Mutex<RunTimeline>>,
        before: Option<Before>,
        history: Option<SampleHistory>,
    ) -> Self {
        SampleSink {
            timeline,
            before,
            history,
        }
    }

    /// One sample taken while the run goes on. Without a history its ids are dropped
    /// before the baseline is subtracted (by count, then), as nothing reads them.
    pub fn take(&mut self, mut s: Sample) {
        if self.history.is_none() {
            for n in &mut s.truth.nodes {
                n.ids = None;
            }
        }
        self.record(&mut s);
        if let Some(h) = &mut self.history {
            h.note(&s);
        }
    }

    /// The run's final sample, ids and all: recorded like the others, and returned less
    /// the baseline (the run's final truth).
    pub fn take_final(&mut self, mut s: Sample) -> Sample {
        self.record(&mut s);
        if let Some(h) = &mut self.history {
            h.note(&s);
        }
        s
    }

    /// Subtracts the baseline from `s` and adds its digest to the timeline.
    fn record(&mut self, s: &mut Sample) {
        if let Some(b) = &self.before {
            s.truth = b.subtract(&s.truth);
        }
        let nodes = s.truth.nodes.iter().map(|n| SampledNode {
            id: &n.id,
            sandboxes: n.sandboxes,
            refused: n.refused,
        });
        let errors = AccountingErrors::of(s.accounting_errors());
        if let Ok(mut t) = self.timeline.lock() {
            t.sample(s.t_ms, nodes, errors);
        }
    }

    /// The ids' history (none unless given).
    pub fn into_history(self) -> Option<SampleHistory> {
        self.history
    }
}
