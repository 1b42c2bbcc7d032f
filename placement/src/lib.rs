//! The sans-IO placement core: E2B's Best-of-K with four accounting modes.
//!
//! No sockets, no clock, no tokio: the HTTP service (`serve`) and the simulator drive
//! the same [`PlacementCore`] with events (start placing, create ok / failed / refused,
//! delete ok, sync snapshot) and a caller-provided seeded RNG.
#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod accounting;
mod answer;
mod api_stage;
mod attempt;
mod candidates;
mod channel;
mod config;
mod core;
mod evict;
mod mode;
#[cfg(feature = "mutations")]
mod mutation;
mod node_view;
mod placer;
mod preferred;
mod score;
mod sync_reply;
mod sync_timer;
mod trace;

#[cfg(test)]
mod tests;

pub use self::core::{NoCandidate, PlacementCore};
pub use accounting::NodeAccounting;
pub use answer::{
    CreateStatus, DeleteOutcome, ErrorCode, FailureAnswer, FailureAnswers, FAILED_TO_PLACE,
};
pub use api_stage::{
    measured_commit_lag, measured_create_return, measured_sync_transit, ApiStage, StageDraws,
    StageQueue, COMMIT_LAG_MS, CREATE_RETURN_MS, MAX_STAGE_WORKERS, MEASURED_TIME_MEDIAN,
    MEASURED_TIME_SIGMA, MEASURED_WORKERS, SYNC_TRANSIT_MS,
};
pub use attempt::{
    Chosen, CreateErrorCode, CreateOutcome, Decision, PlacementAttempt, PlacementFailure,
};
pub use channel::{node_status, routable, ChannelCell, ChannelState};
pub use config::{
    first_periodic_sync, PlacementConfig, PlacementConfigError, REQUEST_TIMEOUT, SYNC_INTERVAL,
};
pub use evict::{
    due_evictions, is_orphan_to_kill, EVICT_BATCH, EVICT_POLL, MAX_CONCURRENT_EVICTIONS,
    ORPHAN_GRACE,
};
pub use mode::AccountingMode;
pub use node_view::{NodeCounters, NodeId, NodeMetrics, NodeStatus, NodeView, SyncSnapshot};
pub use placer::{
    Answered, CreateReply, ErrorKind, Failure, FailureKind, Input, Output, Placer, PlacerConfig,
    RequestId,
};
pub use preferred::{PlacementKind, PreferredNode};
pub use score::score;
pub use stampede_id::{format_id, Id};
pub use sync_reply::{status_from_wire, InfoReply, Listed};
pub use sync_timer::{SyncTimer, MIN_SYNC_INTERVAL};
pub use trace::{replay, Replay, TraceError, TraceLine, TraceSink};
