//! stampede: a load-testing and chaos harness for sandbox placement services.
#![deny(missing_docs)]

pub mod aggregate;
pub mod chaos;
pub mod checker;
pub mod cli;
pub mod collect;
pub mod collect_cmd;
pub mod error_chain;
pub mod mock_admin;
pub mod placement;
pub mod profile;
pub mod report;
pub mod run;
pub mod serve;
pub mod sim;
pub mod workload;
