//! The core's tests: Best-of-K answers, channel states, accounting, eviction, the frozen
//! world, and property tests of its invariants.

mod answers;
mod api_stage;
mod api_times;
mod channel;
mod core;
mod evict;
mod frozen;
mod lagged;
#[cfg(feature = "mutations")]
mod mutations;
mod preferred;
mod props;
