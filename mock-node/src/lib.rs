//! `mock-node`: a fleet of virtual E2B orchestrator nodes, each a real gRPC endpoint.
#![deny(missing_docs)]

pub mod config;
pub mod latency;
pub mod model;
pub mod snapshot;
