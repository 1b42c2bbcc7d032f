//! The simulator: determinism, answers, the API stage, chaos, eviction, sweeps, the retry model, lifecycles, fidelity against the closed form and against real runs, hostile input.

#[path = "../support/mod.rs"]
mod support;

mod answers;
mod api_stage;
mod burst_skew;
mod chaos;
mod determinism;
mod evict;
mod fidelity;
mod fleet_seed;
mod hostile;
mod lifecycle;
mod mutations;
mod plan;
mod pr2201_fidelity;
mod retry_model;
mod sweep;
mod vs_real;
mod zero_times;
