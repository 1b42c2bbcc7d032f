//! Fault backends beyond mock-node's admin API, for runs against a cluster stampede did
//! not start: programs run by the harness (`command` steps).

pub(crate) mod command;
