//! stampede: a load-testing and chaos harness for sandbox placement services.
#![deny(missing_docs)]

pub mod aggregate;
pub mod api_key;
pub mod audit;
pub mod chaos;
pub mod cli;
pub mod collect;
pub mod collect_cmd;
pub mod e2b;
pub mod error_chain;
mod goose_glue;
pub mod http_client;
pub mod profile;
pub mod redact;
pub mod report;
pub mod run;
pub mod serve_cmd;
pub mod sim;
pub(crate) mod stdout;
pub mod workload;

/// The client of a mock-node fleet's admin API (mock-node's library).
pub use mock_node::admin_client as mock_admin;
/// The sans-IO placement core (its own crate: no async runtime, HTTP or gRPC).
pub use stampede_placement as placement;
/// The reference placement service, the system under test (its own crate, below the harness).
pub use stampede_serve as serve;
