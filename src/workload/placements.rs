//! [`PlacementFeed`]: where a workload reports each placement as its answer comes, so
//! that a run's timeline is binned as it goes instead of from a ledger kept to the end.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::ledger::LedgerEntry;
use crate::aggregate::RunTimeline;

/// A run's [`RunTimeline`] and the instant its times count from.
#[derive(Debug, Clone)]
pub struct PlacementFeed {
    /// The run's timeline, shared with its sampler.
    pub timeline: Arc<Mutex<RunTimeline>>,
    /// The instant the timeline's ms count from (the sampler's start).
    pub origin: Instant,
}

impl PlacementFeed {
    /// Reports `e`, answered in a workload whose gate opened at `gate`, if it placed a
    /// sandbox on a node the service named: it landed at its answer, `latency_us` after
    /// its intended send.
    pub fn answered(&self, gate: Instant, e: &LedgerEntry) {
        let Some(node) = e.node.as_deref().filter(|_| e.outcome.is_created()) else {
            return;
        };
        let gate_ms = gate.saturating_duration_since(self.origin).as_secs_f64() * 1000.0;
        let at_ms = gate_ms + e.intended_ms + e.latency_us as f64 / 1000.0;
        if let Ok(mut t) = self.timeline.lock() {
            t.landed(at_ms, node);
        }
    }
}
