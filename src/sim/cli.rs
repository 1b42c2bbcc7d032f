//! `stampede sim PROFILE [--sweep key=v1,v2 ...] [--repeat N] [--csv FILE] [--report-dir DIR]
//! [--max-events N] [--max-memory-mb MIB]`.

use std::io::Write;
use std::path::PathBuf;

use super::budget::{SimBudget, DEFAULT_MAX_EVENTS, DEFAULT_MAX_MEMORY_MB};
use super::error::SimError;
use super::sweep::{run_sweep_within, SweepAxis};
use super::table::{write_sweep_csv, write_sweep_table};
use super::{new_report, simulate_profile_within};
use crate::profile::load_and_validate;
use crate::report::{self, Report};
use crate::stdout::closed_is_fine;

/// Arguments of `stampede sim`.
#[derive(Debug, Clone, clap::Args)]
pub struct SimArgs {
    /// Profile to simulate (embedded placement, burst or rate shape).
    pub profile: PathBuf,
    /// Vary a setting: `KEY=V1,V2,...`, repeatable; the cartesian product runs. Keys:
    /// accounting, k, r, alpha, sync_interval, sync_phase, replicas, rate, nodes, create_latency
    /// (`0ms-2ms` uniform or `1ms` constant), max_starting (node side), burst.
    #[arg(long = "sweep", value_name = "KEY=V1,V2,...")]
    pub sweep: Vec<String>,
    /// Seeds per combination: the profile's seed, seed+1, ... (implies a sweep table).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub repeat: u32,
    /// Also write the sweep table as CSV to FILE.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Parent directory of the report (as `run --report-dir`; `--out` is its old name).
    #[arg(long, alias = "out", default_value = "reports", value_name = "DIR")]
    pub report_dir: PathBuf,
    /// Events the whole command may process (every mode, combination and seed): an
    /// event is a request step, or one node read by a sync or a timeline sample. A
    /// profile estimated over it is refused before it starts; a run that goes over
    /// (a saturated cluster) is stopped with an error.
    #[arg(long, default_value_t = DEFAULT_MAX_EVENTS, value_name = "N")]
    pub max_events: u64,
    /// Estimated peak memory the command may take, MiB; a profile estimated over it is
    /// refused before it starts.
    #[arg(long, default_value_t = DEFAULT_MAX_MEMORY_MB, value_name = "MIB")]
    pub max_memory_mb: u64,
    /// Print nothing but the verdict and the report's path (as `run -q`): no tables.
    #[arg(long, short)]
    pub quiet: bool,
}

impl Default for SimArgs {
    /// The command line's defaults, with no profile.
    fn default() -> Self {
        SimArgs {
            profile: PathBuf::new(),
            sweep: Vec::new(),
            repeat: 1,
            csv: None,
            report_dir: PathBuf::from("reports"),
            max_events: DEFAULT_MAX_EVENTS,
            max_memory_mb: DEFAULT_MAX_MEMORY_MB,
            quiet: false,
        }
    }
}

impl SimArgs {
    /// The budget these arguments give.
    pub fn budget(&self) -> SimBudget {
        SimBudget {
            max_events: self.max_events,
            max_memory_bytes: self.max_memory_mb.saturating_mul(1 << 20),
        }
    }
}

/// Run `stampede sim`: write the report (and the sweep table and CSV, if asked), print
/// the tables; `Ok(true)` when every check of the profile passed.
pub fn run_sim_cli(args: SimArgs) -> Result<bool, SimError> {
    let profile = load_and_validate(&args.profile)?;
    let budget = args.budget();
    let io = |what: &str| {
        let what = what.to_string();
        move |source| SimError::Io { what, source }
    };
    let mut stdout = std::io::stdout().lock();
    let report = if args.sweep.is_empty() && args.repeat <= 1 && args.csv.is_none() {
        let report = simulate_profile_within(&profile, &budget)?;
        if args.quiet {
            closed_is_fine(report::write_verdict(&report, &mut stdout)).map_err(io("stdout"))?;
        } else {
            closed_is_fine(report::write_terminal(&report, &mut stdout)).map_err(io("stdout"))?;
        }
        report
    } else {
        let axes = args
            .sweep
            .iter()
            .map(|a| a.parse::<SweepAxis>())
            .collect::<Result<Vec<_>, _>>()?;
        let sweep = run_sweep_within(&profile, &axes, args.repeat, &budget)?;
        closed_is_fine(writeln!(
            stdout,
            "sweep of `{}` over {} (seeds {:?}); keys: {}",
            profile.name,
            sweep.keys.join(" x "),
            sweep.seeds,
            super::sweep::sweep_key_names()
        ))
        .map_err(io("stdout"))?;
        if !args.quiet {
            closed_is_fine(write_sweep_table(&sweep, &mut stdout)).map_err(io("stdout"))?;
        }
        if let Some(path) = &args.csv {
            let file = std::fs::File::create(path).map_err(io(&path.display().to_string()))?;
            let mut w = std::io::BufWriter::new(file);
            write_sweep_csv(&sweep, &mut w)
                .and_then(|()| w.flush())
                .map_err(io(&path.display().to_string()))?;
        }
        // The report keeps the first seed's run of every combination.
        let mut report: Report = new_report(&profile);
        report.runs = sweep
            .points
            .iter()
            .filter_map(|p| p.runs.first().cloned())
            .collect();
        let checks = report::evaluate(&profile.checks, &report);
        report.set_checks(checks);
        report
    };
    let dir = report::write_report_dir(&report, &args.report_dir).map_err(io("the report"))?;
    report::append_to_step_summary(&report);
    closed_is_fine(writeln!(stdout, "simulated report: {}", dir.display()))
        .map_err(io("stdout"))?;
    Ok(report.passed)
}
