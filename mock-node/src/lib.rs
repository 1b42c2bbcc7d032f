//! `mock-node`: a fleet of virtual E2B orchestrator nodes, each a real gRPC endpoint.
#![deny(missing_docs)]

pub use stampede_node_model::{config, effect, gate, model, rejection, snapshot, starting};

pub mod admin;
pub mod admin_client;
pub mod api;
pub mod cli;
pub mod clock;
pub mod config_file;
pub mod faults;
pub mod fleet;
pub mod grpc;
pub mod health_http;
pub mod intake;
pub mod limit;
pub mod machine;
pub mod node;
pub mod nomad;
pub mod ports;
pub mod prometheus;
pub mod regular_file;
pub mod resume;
pub mod serve;
