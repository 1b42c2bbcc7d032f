//! Chaos drills: a profile's `chaos:` steps resolved into a [`FaultPlan`], applied
//! through mock-node admin APIs, the placement API's `POST /nodes/{nodeID}` (`drain`)
//! or programs (`command`) by a [`ChaosClient`] (each fault held by a
//! [`FaultGuard`] that heals it), run on the workload's clock by [`run_schedule`], and
//! summarised per fault by [`fault_windows_from_run`].

mod backend;
mod client;
mod edge_calls;
mod plan;
mod schedule;
mod windows;

pub use backend::command::{NODES_ENV, PHASE_ENV};
pub use client::{ChaosClient, ChaosError, FaultGuard};
pub use edge_calls::{CallProbe, EdgeCalls};
pub use plan::{FaultPlan, PlanError, PlannedFault};
pub use schedule::{run_schedule, AppliedFault};
pub use windows::{fault_windows_from_run, fault_windows_of};
