//! Reports: checks, compare, statistics, the writers (snapshots), the set audit.

#[path = "../support/mod.rs"]
mod support;

mod audited_ledger;
mod browser;
mod checks;
mod ci_outputs;
mod compare;
mod html;
mod set_audit;
mod stats;
mod trend;
mod writers;
