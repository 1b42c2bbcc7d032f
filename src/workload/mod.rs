//! The workload: goose users creating (and optionally deleting) sandboxes against an
//! E2B-compatible REST API, every outcome folded into one [`Ledger`].
//!
//! One engine takes the pacing as data ([`Pacing`]): `burst` and `rate` share the same
//! worker loop (claim a slot, wait for its intended time, send, record); `plan` hands
//! the pacing to goose's own test plan.

mod burst;
mod driver;
mod ledger;
mod lifecycle;
mod limited;
mod live;
mod outcomes;
mod pacing;
mod placements;
mod request;

/// The API key a run sends (defined below the harness's layers in [`crate::api_key`]).
pub use crate::api_key::ApiKey;
pub use driver::{
    run_workload, LedgerAudit, WorkloadError, WorkloadOutput, WorkloadRun, GATE_WAIT,
};
pub use ledger::{client_deleted, Ledger, LedgerEntry, Limit, LimitKind, Outcome};
pub use lifecycle::{StepEntry, StepKind};
pub use limited::LimitRetry;
pub use live::{LiveCounts, Tail};
pub use outcomes::{OutcomeFold, OutcomeSnapshot};
pub use pacing::Pacing;
pub use placements::PlacementFeed;
pub use request::{sandbox_url, NODE_HEADER, RUN_TAG_KEY};
