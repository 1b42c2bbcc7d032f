//! `stampede sim`: the deterministic discrete-event simulator (docs/design.md 2.7).
//!
//! Virtual time, one thread, one seeded RNG per run, no sockets and no wall clock. It
//! drives the same sans-IO [`PlacementCore`](crate::placement::PlacementCore) and
//! mock-node [`NodeModel`](stampede_node_model::model::NodeModel) as `stampede run`, and produces
//! the same [`Report`](crate::report::Report), marked `simulated`. Two runs of one
//! profile and seed give byte-identical `report.json`.
//!
//! Known simplifications against a real run: a goose `plan` is a closed model whose
//! users send their next create one [`CLIENT_ROUND_TRIP`](setup::CLIENT_ROUND_TRIP) after
//! an answer; an RPC answered at once (refusal, injected error, killed node) takes the
//! profile's `rpc_round_trip` (default [`RPC_ROUND_TRIP`]); a successful
//! create answers when the node finishes it; a create in flight on a node that is
//! killed fails when it would have completed; syncs and deletes ignore `slow`; a hung
//! node's sync fails at once; deletes ignore their latency; orphans are never killed.
//!
//! Every simulation runs within a [`SimBudget`] (events and memory, `--max-events` and
//! `--max-memory-mb`): estimated before it starts, events enforced while it runs.

mod budget;
mod cli;
mod create;
mod engine;
mod error;
mod faults;
mod lifecycle;
mod measure;
mod nodes;
mod queue;
mod retry;
mod set_audit;
mod setup;
mod sweep;
mod table;

pub use budget::{EstimatePart, SimBudget, SimEstimate, DEFAULT_MAX_EVENTS, DEFAULT_MAX_MEMORY_MB};
pub use cli::{run_sim_cli, SimArgs};
pub use error::SimError;
pub use faults::{plan_faults, PlannedFault};
pub use queue::{EventQueue, Nanos};
pub use setup::{
    plan_users, profile_modes, profile_runs, validate_profile, Arrivals, SimSetup,
    CLIENT_ROUND_TRIP, RPC_ROUND_TRIP,
};
pub use sweep::{
    run_sweep, run_sweep_within, Spread, Sweep, SweepAxis, SweepPoint, MAX_SWEEP_RUNS, SWEEP_KEYS,
};
pub use table::{write_sweep_csv, write_sweep_table};

use crate::placement::AccountingMode;
use crate::profile::Profile;
use crate::profile::RunSettings;
use crate::report::{self, Report, RunResult};

/// `started_at` of every simulated report: a fixed time keeps two runs byte-identical.
pub const SIM_STARTED_AT: &str = "1970-01-01T00:00:00Z";

/// One simulated run and what the engine did.
#[derive(Debug, Clone)]
pub struct SimRun {
    /// The run's figures, as in a real run's report (`wall_ms` is virtual time).
    pub result: RunResult,
    /// Events processed, a sync or a timeline sample counting one per node it reads:
    /// what [`SimBudget::max_events`] bounds.
    pub events: u64,
    /// Virtual time at the end of the workload, nanoseconds.
    pub virtual_ns: Nanos,
}

/// Simulate `profile` once in accounting `mode` within the default [`SimBudget`]; the
/// run is labelled with the mode.
pub fn simulate(profile: &Profile, mode: AccountingMode) -> Result<RunResult, SimError> {
    let setup = SimSetup::from_profile(profile, mode)?;
    let budget = SimBudget::default();
    budget.admit(&[setup.estimate()])?;
    let settings = RunSettings::placement(mode, setup.placement.k);
    Ok(simulate_setup(&setup, mode.as_str().to_string(), settings, &budget)?.result)
}

/// Simulate a resolved setup, labelling the run `label` with `settings`. It stops with
/// [`SimError::EventBudget`] past `budget.max_events` events; the estimate is not
/// checked here (see [`SimBudget::admit`]).
pub fn simulate_setup(
    setup: &SimSetup,
    label: String,
    settings: RunSettings,
    budget: &SimBudget,
) -> Result<SimRun, SimError> {
    let mut engine = engine::Engine::new(setup);
    let end = engine.run(budget.max_events)?;
    let events = engine.events;
    Ok(SimRun {
        result: engine.result(label, settings),
        events,
        virtual_ns: end,
    })
}

/// Simulate every accounting mode `profile` lists and evaluate its `checks:`: the
/// report `stampede sim PROFILE` writes (marked simulated, `started_at` fixed), within
/// the default [`SimBudget`].
pub fn simulate_profile(profile: &Profile) -> Result<Report, SimError> {
    simulate_profile_within(profile, &SimBudget::default())
}

/// [`simulate_profile`] within `budget`, which covers every mode's run together: the
/// estimates are checked before the first run starts, and each run gets the events the
/// ones before it left.
pub fn simulate_profile_within(profile: &Profile, budget: &SimBudget) -> Result<Report, SimError> {
    let mut report = new_report(profile);
    let setups = profile_runs(profile)?
        .into_iter()
        .map(|run| SimSetup::from_run(profile, run).map(|s| (run, s)))
        .collect::<Result<Vec<_>, _>>()?;
    budget.admit(&setups.iter().map(|(_, s)| s.estimate()).collect::<Vec<_>>())?;
    let mut left = *budget;
    for (variant, setup) in &setups {
        let run = simulate_setup(setup, variant.label(), variant.settings(), &left)?;
        left.max_events = left.max_events.saturating_sub(run.events);
        report.runs.push(run.result);
    }
    let checks = report::evaluate(&profile.checks, &report);
    report.set_checks(checks);
    Ok(report)
}

/// An empty simulated report for `profile`.
pub fn new_report(profile: &Profile) -> Report {
    let mut report = Report::new(
        &profile.name,
        &profile.description,
        profile.seed,
        SIM_STARTED_AT,
    );
    report.fleet_seed = Some(profile.cluster.fleet_seed(profile.seed));
    report.simulated = true;
    report
}
