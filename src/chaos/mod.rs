//! Chaos drills: a profile's `chaos:` steps resolved into a [`FaultPlan`], applied
//! through mock-node admin APIs by a [`ChaosClient`] (each fault held by a
//! [`FaultGuard`] that heals it), run on the workload's clock by [`run_schedule`], and
//! summarised per fault by [`fault_windows`].

mod client;
mod edge_calls;
mod plan;
mod schedule;
mod windows;

pub use client::{ChaosClient, ChaosError, FaultGuard};
pub use edge_calls::{CallProbe, EdgeCalls};
pub use plan::{FaultPlan, PlanError, PlannedFault};
pub use schedule::{run_schedule, AppliedFault};
pub use windows::fault_windows;
