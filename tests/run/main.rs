//! `stampede run` end to end: the CLI, plans, progress, signals, secrets, failing surroundings, restart drills, retry storms, lifecycles, the set audit, staging rehearsals, `collect`, trace replay.

#[path = "../support/mod.rs"]
mod support;

mod cleanup_hostile;
mod cli;
mod collect_cli;
mod lifecycle;
mod metrics;
mod node_refusals;
mod placement_replay;
mod plan;
mod progress;
mod redaction;
mod reliability;
mod restart_drill;
mod retry_storm;
mod secrets;
mod set_audit;
mod setup_exit;
mod short_nightly;
mod signals;
mod staging_rehearsal;
mod user_agent;
