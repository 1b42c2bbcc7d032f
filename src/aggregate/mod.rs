//! One measurement fold for a run, real or simulated.
//!
//! A real run and a simulation feed the same records into one [`RunAggregate`]: every
//! create's answer (typed [`Outcome`](crate::workload::Outcome), times, the node when
//! known), every landing of a sandbox on a node, every truth sample, the final node
//! figures, and the placement service's counters as a typed [`ServiceCounters`]
//! snapshot (never Prometheus text). [`RunAggregate::finish`] is the one builder of a
//! run's [`RunResult`](crate::report::RunResult). The outcome part of the fold,
//! [`OutcomeFold`](crate::workload::OutcomeFold), is the workload's: the live progress
//! view reads it while a run goes on.
//! [`SettledCreates`] is what a run that audits no sets keeps of its creates once
//! each is settled: the same sends and answers, folded as they settle.
//! [`SettledIds`] is what a set-audited run keeps of a create it settled: a digest.
//! [`RunTimeline`] is what a real run keeps of its truth samples and placements until
//! its end: digests binned per sample, fed to the fold in time order.
//! [`needs_set_audit`] is the one place that decides whether a run keeps its client
//! ledger for the set audit; [`Entries`] is that audit's ledger, fed per answer.
//! [`fault_windows`] is the one definition of the chaos fault windows, fed typed
//! [`FaultRecord`]s and [`RequestRecord`]s by both.
//!
//! Pure: no I/O, no clock. Times are ms after the workload's gate, as the ledger's.

mod entries;
mod fold;
mod latency_bins;
mod run_timeline;
mod sets;
mod settled;
mod settled_ids;
mod windows;

pub use crate::serve::ServiceCounters;
pub use entries::{Entries, EntryAnswer};
pub use fold::{AccountingErrors, RunAggregate, RunShape};
pub use latency_bins::LatencyBins;
pub use run_timeline::{RunTimeline, SampledNode};
pub use sets::needs_set_audit;
pub use settled::{SettledCreates, RECENT};
pub use settled_ids::{SettledIds, SettledView};
pub use windows::{fault_windows, CallSample, FaultRecord, Growth, RequestRecord};
