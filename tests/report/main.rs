//! Reports: checks, compare, statistics, the writers (snapshots), the set checker.

#[path = "../support/mod.rs"]
mod support;

mod checks;
mod compare;
mod set_checker;
mod stats;
mod writers;
