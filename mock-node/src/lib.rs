//! `mock-node`: a fleet of virtual E2B orchestrator nodes, each a real gRPC endpoint.
//!
//! The wire fleet only: each node's behaviour is the sans-IO model of
//! `stampede-node-model`, which this crate drives over tonic, axum and tokio. The public
//! surface is the fleet ([`fleet`]), its admin API's JSON types ([`api`]) and client
//! ([`admin_client`]), the `mock-node` verb ([`cli`]), and the few items below; every
//! other module is private.
#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod admin;
pub mod admin_client;
pub mod api;
pub mod cli;
mod clock;
mod config_file;
mod faults;
pub mod fleet;
mod grpc;
mod health_http;
mod intake;
mod limit;
mod machine;
mod node;
mod nomad;
mod ports;
mod prometheus;
mod regular_file;
mod resume;
mod serve;

pub use admin::ADMIN_LIMITS;
pub use config_file::{parse_cluster, ConfigFileError};
pub use faults::{MAX_ACTIVE_FAULTS, MAX_FAULT_DURATION, MAX_HEALED_FAULTS_KEPT};
pub use limit::MAX_MESSAGE_BYTES;
pub use machine::host_cpu;
pub use regular_file::{open_regular, read_regular_to_string};
pub use serve::NODE_LIMITS;
/// The node model this fleet drives, and the rules a cluster file writes (re-exported
/// from `stampede-node-model` for the fleet's users).
pub use stampede_node_model::{config, model};
