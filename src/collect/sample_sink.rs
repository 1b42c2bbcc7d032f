//! [`SampleSink`]: where a run's truth samples go as they are taken. Each is reduced
//! at once to its digest in the run's [`RunTimeline`]; a whole sample (sandbox ids
//! included) is kept only when the run reads them at its end (the set audit and the
//! fault windows).

use std::sync::{Arc, Mutex};

use super::baseline::Before;
use super::sampler::Sample;
use crate::aggregate::{AccountingErrors, RunTimeline, SampledNode};

/// A run's samples on their way into its timeline.
#[derive(Debug)]
pub struct SampleSink {
    timeline: Arc<Mutex<RunTimeline>>,
    /// What the nodes held before the run (an API stampede did not start), subtracted
    /// from every sample.
    before: Option<Before>,
    /// Whole samples, in the order taken, when kept.
    kept: Option<Vec<Sample>>,
}

impl SampleSink {
    /// Samples into `timeline`, less `before`; whole samples are kept when `keep`.
    pub fn new(timeline: Arc<Mutex<RunTimeline>>, before: Option<Before>, keep: bool) -> Self {
        SampleSink {
            timeline,
            before,
            kept: keep.then(Vec::new),
        }
    }

    /// One sample taken while the run goes on. Unless whole samples are kept, its ids
    /// are dropped before the baseline is subtracted (by count, then), as a sample that
    /// is not kept is never read by id.
    pub fn take(&mut self, mut s: Sample) {
        if self.kept.is_none() {
            for n in &mut s.truth.nodes {
                n.ids = None;
            }
        }
        self.record(&mut s);
        if let Some(kept) = &mut self.kept {
            kept.push(s);
        }
    }

    /// The run's final sample, ids and all: recorded like the others, and returned less
    /// the baseline (the run's final truth).
    pub fn take_final(&mut self, mut s: Sample) -> Sample {
        self.record(&mut s);
        if let Some(kept) = &mut self.kept {
            kept.push(s.clone());
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

    /// The whole samples kept, in the order taken (none unless kept).
    pub fn into_kept(self) -> Vec<Sample> {
        self.kept.unwrap_or_default()
    }
}
