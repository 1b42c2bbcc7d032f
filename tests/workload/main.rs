//! The workload: the burst gate (plain and TLS) and its limits.

#[path = "../support/mod.rs"]
mod support;

mod burst_gate;
mod burst_tls;
mod limits;
