//! Reports: checks, compare, statistics, the writers (snapshots), the set checker.

#[path = "../support/mod.rs"]
mod support;

mod checks;
mod ci_outputs;
mod compare;
mod set_checker;
mod stats;
mod writers;
