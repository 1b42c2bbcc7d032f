//! stampede: a load-testing and chaos harness for sandbox placement services.
#![deny(missing_docs)]

pub mod chaos;
pub mod checker;
pub mod collect;
pub mod placement;
pub mod profile;
pub mod report;
pub mod serve;
pub mod workload;
