//! Chaos drills: fault plans, windows, the fault client against real fleets and services.

#[path = "../support/mod.rs"]
mod support;

mod drain;
mod fleet;
mod hang_deadline;
mod plan;
mod service_kill;
mod staging_backends;
mod toy_router;
mod windows;
